//! `while`, `case` and `if`: each region becomes a function of its own. StableHLO regions
//! read values of the enclosing scope directly; ferrax's functions take everything they read
//! as parameters, so those values become extra operands (a loop carries them unchanged).
//! `if`'s regions (true, then false) become branches 1 and 0 of a `cond` on the predicate.

use super::{Env, Importer};
use crate::parse::{Operation, Region};
use crate::types::Dynamic;
use crate::Error;
use ferrax_ir::{Cond, Func, FuncBuilder, Op, TensorType, ValueId, While};
use std::collections::HashSet;

/// The names `regions` read from outside themselves, in order of first use: read by an op
/// (in any nested region too) and defined by none of theirs nor bound as a region argument.
pub(super) fn free_names(regions: &[&Region], bound: &[String]) -> Vec<String> {
    let mut defined: HashSet<&str> = bound.iter().map(String::as_str).collect();
    let mut used: Vec<&str> = Vec::new();
    let mut stack: Vec<&Region> = regions.to_vec();
    while let Some(region) = stack.pop() {
        defined.extend(region.args.iter().map(|(n, _)| n.as_str()));
        for op in &region.ops {
            defined.extend(op.results.iter().map(String::as_str));
            defined.extend(op.bound.iter().map(String::as_str));
            used.extend(op.operands.iter().map(String::as_str));
            stack.extend(&op.regions);
        }
    }
    let mut seen = HashSet::new();
    used.into_iter()
        .filter(|n| !defined.contains(n) && seen.insert(*n))
        .map(str::to_string)
        .collect()
}

impl Importer<'_> {
    /// The results of the control-flow op `op` (`short` is its name without the dialect).
    pub(super) fn control(
        &mut self,
        short: &str,
        op: &Operation,
        args: &[ValueId],
        env: &Env,
        depth: usize,
    ) -> Result<Vec<ValueId>, Error> {
        let line = op.line;
        let regions: Vec<&Region> = op.regions.iter().collect();
        let free: Vec<(String, ValueId)> = free_names(&regions, &op.bound)
            .into_iter()
            .filter_map(|n| env.get(&n).map(|&v| (n, v)))
            .collect();
        let free_params: Vec<(String, TensorType)> = free
            .iter()
            .map(|(n, v)| Ok((n.clone(), self.type_of(*v, line)?)))
            .collect::<Result<_, Error>>()?;
        let free_values: Vec<ValueId> = free.iter().map(|(_, v)| *v).collect();
        let (call, operands, results) = match (short, regions.as_slice()) {
            ("while", [cond, body]) => {
                let mut params = Vec::new();
                for (k, &a) in args.iter().enumerate() {
                    let name = match cond.args.get(k) {
                        Some((n, _)) => n.clone(),
                        None => op.bound.get(k).cloned().unwrap_or_default(),
                    };
                    params.push((name, self.type_of(a, line)?));
                }
                let body_params = match body.args.is_empty() {
                    true => params.clone(),
                    false => body.args.clone(),
                };
                params.extend(free_params.iter().cloned());
                let mut body_params = body_params;
                body_params.extend(free_params.iter().cloned());
                let w = While {
                    cond: self.region_func("cond", cond, &params, None, depth)?,
                    body: self.region_func("body", body, &body_params, Some(args.len()), depth)?,
                    result: 0,
                };
                let mut operands = args.to_vec();
                operands.extend(&free_values);
                (Op::While(Box::new(w)), operands, args.len())
            }
            ("case" | "if", branches) if !branches.is_empty() => {
                let [index] = args else {
                    return Err(Error::at(line, format!("{short} takes one operand")));
                };
                let mut funcs = branches
                    .iter()
                    .enumerate()
                    .map(|(k, r)| {
                        let name = match (short, k) {
                            ("if", 0) => "then".to_string(),
                            ("if", _) => "else".to_string(),
                            _ => format!("branch{k}"),
                        };
                        self.region_func(&name, r, &free_params, None, depth)
                    })
                    .collect::<Result<Vec<Func>, Error>>()?;
                if short == "if" {
                    funcs.reverse();
                }
                let results = funcs.first().map_or(0, |f| f.outputs.len());
                let mut operands = vec![*index];
                operands.extend(&free_values);
                let c = Cond {
                    branches: funcs,
                    result: 0,
                };
                (Op::Cond(Box::new(c)), operands, results)
            }
            _ => {
                return Err(Error::at(
                    line,
                    format!("{short} with {} regions", regions.len()),
                ))
            }
        };
        (0..results)
            .map(|k| self.push(call.with_result(k), &operands, line))
            .collect()
    }

    pub(super) fn type_of(&self, v: ValueId, line: usize) -> Result<TensorType, Error> {
        self.b
            .value_type(v)
            .cloned()
            .ok_or_else(|| Error::at(line, format!("value {v} is not defined")))
    }

    /// `region` as a function of `params` (its arguments, then the values it reads from
    /// outside); a loop's body (`carried`: how many arguments are its own) returns the values
    /// from outside after its results, carrying them unchanged.
    pub(super) fn region_func(
        &mut self,
        name: &str,
        region: &Region,
        params: &[(String, TensorType)],
        carried: Option<usize>,
        depth: usize,
    ) -> Result<Func, Error> {
        let line = region.ops.first().map_or(0, |o| o.line);
        let mut inner = Importer {
            funcs: self.funcs.clone(),
            b: FuncBuilder::new(name),
            constants: Default::default(),
            known: Default::default(),
            refining: Dynamic::default(),
            outputs: Vec::new(),
            checks: Vec::new(),
            external: self.external.clone(),
            external_params: Vec::new(),
            walked: self.walked,
        };
        let mut env = Env::new();
        let mut values = Vec::new();
        for (n, ty) in params {
            let v = inner.b.param(ty.clone());
            env.insert(n.clone(), v);
            values.push(v);
        }
        let mut outputs = inner.body(&region.ops, &mut env, depth + 1)?;
        self.walked = inner.walked;
        if !inner.checks.is_empty() {
            return Err(Error::unsupported(line, "checks inside a region"));
        }
        if let Some(own) = carried {
            outputs.extend(values.get(own..).unwrap_or_default());
        }
        Ok(inner.b.finish(outputs))
    }
}

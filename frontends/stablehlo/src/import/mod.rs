//! Operation tree → ferrax IR. Calls are inlined; the checks of conformance programs become
//! outputs so that a runner can compare them.
//!
//! Here: the walk over an entry's operations and the calls it inlines. One op's mapping is in
//! `ops` (with StableHLO's op names in `names` and attribute reading in `attrs`), reductions
//! in `reduce`, gathers, scatters and dynamic slices in `indexing`, `while`, `case` and `if`
//! in `control`, sorts in `sort`, checks in `check`, quantized types in `quant`; shape
//! refinement of programs with dynamic shapes in `refine`, over the values `known` folds.

mod attrs;
mod check;
mod composite;
mod control;
mod conv;
mod indexing;
mod known;
mod lapack;
mod lapack_qr_eig;
mod names;
mod ops;
mod philox;
mod quant;
mod reduce;
mod refine;
mod rng;
mod sort;
mod variadic;
mod window;

pub use check::{Check, CheckKind, Expected};

use crate::parse::{MFunc, Operation};
use crate::types::{check_size, Dynamic, MAX_INLINED_OPS};
use crate::{Error, Specialize};
use ferrax_ir::{Func, FuncBuilder, Literal, Op, TensorType, ValueId};
use std::collections::HashMap;

/// An imported entry point: its program and the checks it makes. The program's outputs are
/// the entry's returned values (the first `returned`), then the values the checks compare.
#[derive(Clone, Debug)]
pub struct Program {
    pub func: Func,
    pub returned: usize,
    pub checks: Vec<Check>,
}

pub(crate) struct Importer<'a> {
    funcs: HashMap<&'a str, &'a MFunc>,
    b: FuncBuilder,
    constants: HashMap<ValueId, Literal>,
    /// Small integer values known while importing (see `known`).
    known: HashMap<ValueId, Vec<i64>>,
    /// The dynamic dimensions of the result types of the op being imported, where the
    /// declared types' sizes are placeholders.
    refining: Dynamic,
    outputs: Vec<ValueId>,
    checks: Vec<Check>,
    /// Calls to these functions become parameters instead of being inlined.
    external: Vec<String>,
    external_params: Vec<ValueId>,
    /// Operations walked so far, inlined calls' bodies counted at every call.
    walked: usize,
}

type Env = HashMap<String, ValueId>;

impl<'a> Importer<'a> {
    pub(crate) fn new(funcs: &'a [MFunc], name: &str, external: &[&str]) -> Importer<'a> {
        Importer {
            funcs: funcs.iter().map(|f| (f.name.as_str(), f)).collect(),
            b: FuncBuilder::new(name),
            constants: HashMap::new(),
            known: HashMap::new(),
            refining: Dynamic::default(),
            outputs: Vec::new(),
            checks: Vec::new(),
            external: external.iter().map(|s| s.to_string()).collect(),
            external_params: Vec::new(),
            walked: 0,
        }
    }

    /// Imports `entry`: its parameters, then the results of calls to external functions, become
    /// the parameters of the program; its returned values and checked values its outputs.
    pub(crate) fn import(self, entry: &MFunc) -> Result<Program, Error> {
        self.import_specialized(entry, &[])
    }

    /// `import`, with each parameter of `entry` fixed as `specialize` says (one entry per
    /// parameter, or none for a program without dynamic shapes).
    pub(crate) fn import_specialized(
        mut self,
        entry: &MFunc,
        specialize: &[Specialize],
    ) -> Result<Program, Error> {
        let line = entry.body.first().map_or(1, |o| o.line);
        if !specialize.is_empty() && specialize.len() != entry.params.len() {
            return Err(Error::at(
                line,
                format!(
                    "@{} has {} parameters, specialized with {}",
                    entry.name,
                    entry.params.len(),
                    specialize.len()
                ),
            ));
        }
        let mut env = Env::new();
        // Parameters given values become constants once every parameter is added.
        let mut values = Vec::new();
        for (k, ((name, ty), &dynamic)) in entry.params.iter().zip(&entry.param_dynamic).enumerate()
        {
            match self.specialized_param(name, ty, dynamic, specialize.get(k), line)? {
                Some(v) => {
                    env.insert(name.clone(), v);
                }
                None => values.push(k),
            }
        }
        for op in &entry.body {
            let external = matches!(op.name.as_str(), "call" | "func.call")
                && op
                    .callee
                    .as_ref()
                    .is_some_and(|c| self.external.contains(c));
            if external {
                for (name, ty) in op.results.iter().zip(&op.result_types) {
                    let p = self.b.param(ty.clone());
                    self.external_params.push(p);
                    env.insert(name.clone(), p);
                }
            }
        }
        for k in values {
            if let (Some((name, _)), Some(Specialize::Value(lit))) =
                (entry.params.get(k), specialize.get(k))
            {
                let v = self.push(Op::Constant(lit.clone()), &[], line)?;
                self.constants.insert(v, lit.clone());
                if let Some(values) = known::literal_values(lit) {
                    self.known.insert(v, values);
                }
                env.insert(name.clone(), v);
            }
        }
        let returned = self.body(&entry.body, &mut env, 0)?;
        let mut outputs = returned;
        outputs.extend(self.outputs.iter().copied());
        let returned_count = outputs.len() - self.outputs.len();
        let checks = self
            .checks
            .into_iter()
            .map(|mut c| {
                c.actual += returned_count;
                if let Expected::Output(k) = &mut c.expected {
                    *k += returned_count;
                }
                c
            })
            .collect();
        Ok(Program {
            func: self.b.finish(outputs),
            returned: returned_count,
            checks,
        })
    }

    /// Parameter `%name` of type `ty` (`dynamic` where the text writes `?`), as `specialize`
    /// fixes it: a parameter of the given shape, or `None` for a value of the right type
    /// (which becomes a constant).
    fn specialized_param(
        &mut self,
        name: &str,
        ty: &TensorType,
        dynamic: Dynamic,
        specialize: Option<&Specialize>,
        line: usize,
    ) -> Result<Option<ValueId>, Error> {
        let written = dynamic.show(ty);
        let given = match specialize {
            None if dynamic.is_static() => return Ok(Some(self.b.param(ty.clone()))),
            None => {
                return Err(Error::unsupported(
                    line,
                    format!(
                        "dynamic shape {written} of parameter %{name} (load_specialized gives \
                         it a shape)"
                    ),
                ))
            }
            Some(Specialize::Shape(dims)) => ty.with_shape(dims.clone()),
            Some(Specialize::Value(lit)) => lit.ty.clone(),
        };
        if !dynamic.conforms(ty, &given) {
            return Err(Error::at(
                line,
                format!("parameter %{name} is {written}, specialized as {given}"),
            ));
        }
        check_size(&given)
            .map_err(|e| Error::at(line, format!("parameter %{name}: {given} {e}")))?;
        Ok(match specialize {
            Some(Specialize::Value(_)) => None,
            _ => Some(self.b.param(given)),
        })
    }

    /// Appends `op(args)`; its result must have an addressable size, as every type read from
    /// the text has.
    fn push(&mut self, op: Op, args: &[ValueId], line: usize) -> Result<ValueId, Error> {
        let name = op.name();
        let v = self
            .b
            .push(op, args)
            .map_err(|e| Error::at(line, e.to_string()))?;
        if let Some(ty) = self.b.value_type(v) {
            check_size(ty).map_err(|e| Error::at(line, format!("the {name} result {ty} {e}")))?;
        }
        Ok(v)
    }

    fn output(&mut self, v: ValueId) -> usize {
        self.outputs.push(v);
        self.outputs.len() - 1
    }

    /// Emits `ops`; returns the values of their `return`.
    fn body(
        &mut self,
        ops: &[Operation],
        env: &mut Env,
        depth: usize,
    ) -> Result<Vec<ValueId>, Error> {
        if depth > 64 {
            return Err(Error::at(
                ops.first().map_or(0, |o| o.line),
                "calls nest too deeply (recursion?)",
            ));
        }
        for op in ops {
            self.walked += 1;
            if self.walked > MAX_INLINED_OPS {
                return Err(Error::at(
                    op.line,
                    format!("the program inlines to more than {MAX_INLINED_OPS} operations"),
                ));
            }
            let args = op
                .operands
                .iter()
                .map(|o| {
                    env.get(o)
                        .copied()
                        .ok_or_else(|| Error::at(op.line, format!("%{o} is not defined")))
                })
                .collect::<Result<Vec<_>, _>>()?;
            let short = op.name.strip_prefix("stablehlo.").unwrap_or(&op.name);
            match short {
                "return" | "func.return" => return Ok(args),
                "call" | "func.call" => {
                    let callee = op.callee.clone().unwrap_or_default();
                    if self.external.contains(&callee) && depth == 0 {
                        continue;
                    }
                    let f = *self.funcs.get(callee.as_str()).ok_or_else(|| {
                        Error::at(op.line, format!("call of unknown function @{callee}"))
                    })?;
                    let mut inner = Env::new();
                    for ((name, _), v) in f.params.iter().zip(&args) {
                        inner.insert(name.clone(), *v);
                    }
                    let results = self.body(&f.body, &mut inner, depth + 1)?;
                    for (name, v) in op.results.iter().zip(results) {
                        env.insert(name.clone(), v);
                    }
                }
                _ if short.starts_with("check.")
                    || op
                        .callee
                        .as_deref()
                        .is_some_and(|c| c.starts_with("check.")) =>
                {
                    if let (Some(v), Some(name)) = (self.check(op, &args)?, op.results.first()) {
                        env.insert(name.clone(), v);
                    }
                }
                _ => {
                    let refined = self.refine(short, op, &args)?;
                    let (op, args) = match &refined {
                        Some((op, args)) => (op, args.as_slice()),
                        None => (op, args.as_slice()),
                    };
                    let short = op.name.strip_prefix("stablehlo.").unwrap_or(&op.name);
                    // Restored after: an op's regions import ops of their own.
                    let outer = std::mem::replace(&mut self.refining, op.dynamic_results());
                    let results = if op.is_quantized() {
                        self.quantized(short, op, args, env, depth)
                    } else {
                        self.results(short, op, args, env, depth)
                    };
                    self.refining = outer;
                    let results = results?;
                    if refined.is_some() {
                        self.check_refined(op, &results)?;
                    }
                    if let [v] = results[..] {
                        self.fold_known(short, op, args, v);
                    }
                    for (name, v) in op.results.iter().zip(results) {
                        env.insert(name.clone(), v);
                    }
                }
            }
        }
        Ok(Vec::new())
    }

    /// The results of a refined `op` have its declared types, dynamic sizes aside.
    fn check_refined(&self, op: &Operation, results: &[ValueId]) -> Result<(), Error> {
        for ((&v, declared), dynamic) in
            results.iter().zip(&op.result_types).zip(&op.result_dynamic)
        {
            let got = self.type_of(v, op.line)?;
            if !dynamic.conforms(declared, &got) {
                return Err(Error::at(
                    op.line,
                    format!(
                        "{} gives {got} where the program declares {}",
                        op.name,
                        dynamic.show(declared)
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The results of `op`, one that computes values (not a call, return or check).
    fn results(
        &mut self,
        short: &str,
        op: &Operation,
        args: &[ValueId],
        env: &Env,
        depth: usize,
    ) -> Result<Vec<ValueId>, Error> {
        match short {
            "while" | "case" | "if" => self.control(short, op, args, env, depth),
            "reduce_window" => self.reduce_window(op, args, depth),
            // Reductions by one combining op are the IR's; others (several operands, or a body
            // such as complex numbers' lexicographic maximum) are inlined.
            "reduce" if args.len() > 2 || !reduce::combines_simply(op) => {
                self.variadic_reduce(op, args, depth)
            }
            "chlo.top_k" => self.top_k(op, args),
            "sort" => self.sort(op, args),
            "rng_bit_generator" => self.rng_bit_generator(op, args),
            "custom_call" => self.custom_call(op, args),
            "get_dimension_size" => Ok(vec![self.dimension_size(op, args)?]),
            _ => Ok(vec![self.simple(short, op, args)?]),
        }
    }
}

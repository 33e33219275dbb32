//! The functions that control flow holds (a loop's condition and body, a `cond`'s branches)
//! are simplified on their own, each in its own e-graph, before the program around them: the
//! e-graph sees a call as one opaque op. The instructions of one call (the same op but for
//! `result`) get the same simplified functions, so they remain one call. A `cond` on a
//! constant index is first replaced by the branch it picks (each of its result instructions
//! inlines the branch; the e-graph then merges the copies), and a scan's stacked outputs that
//! no instruction yields are dropped from its body (reverse mode's per-step cotangents of
//! inputs nobody differentiates, say), so the body no longer computes them.

use super::{simplify_with, Limits, Report, SimplifyError};
use ferrax_ir::{Func, FuncBuilder, Instr, Op, Scalar, Scan, ValueId};
use std::collections::BTreeSet;

/// The branch a `cond` instruction reading `index` picks, if `index` is a constant.
fn constant_branch(func: &Func, index: ValueId, branches: usize) -> Option<usize> {
    let defined = index.index().checked_sub(func.params.len())?;
    let Op::Constant(lit) = &func.body.get(defined)?.op else {
        return None;
    };
    let last = branches.checked_sub(1)?;
    match lit.data.get(0) {
        Scalar::Bool(p) => Some(usize::from(p).min(last)),
        Scalar::I32(i) => Some(usize::try_from(i).map_or(last, |i| i.min(last))),
        _ => None,
    }
}

/// `func` with every `cond` on a constant index replaced by the picked branch's instructions.
pub(super) fn fold_constant_conds(func: &Func) -> Func {
    let picks: Vec<Option<usize>> = func
        .body
        .iter()
        .map(|ins| match (&ins.op, ins.args.first()) {
            (Op::Cond(c), Some(&index)) => constant_branch(func, index, c.branches.len()),
            _ => None,
        })
        .collect();
    if picks.iter().all(Option::is_none) {
        return func.clone();
    }
    let mut b = FuncBuilder::new(func.name.clone());
    let mut values: Vec<ValueId> = func.params.iter().map(|p| b.param(p.clone())).collect();
    for (ins, pick) in func.body.iter().zip(picks) {
        let args: Vec<ValueId> = ins.args.iter().map(|a| values[a.index()]).collect();
        let value = match (&ins.op, pick) {
            (Op::Cond(c), Some(k)) => c
                .branches
                .get(k)
                .and_then(|branch| inline(&mut b, branch, &args[1..], c.result)),
            _ => b.push(ins.op.clone(), &args).ok(),
        };
        match value {
            Some(v) => values.push(v),
            None => return func.clone(),
        }
    }
    b.finish(func.outputs.iter().map(|o| values[o.index()]).collect())
}

/// Emits `callee` on `args` and returns its output `k`.
fn inline(b: &mut FuncBuilder, callee: &Func, args: &[ValueId], k: usize) -> Option<ValueId> {
    let mut values = args.to_vec();
    for ins in &callee.body {
        let operands: Vec<ValueId> = ins.args.iter().map(|a| values[a.index()]).collect();
        values.push(b.push(ins.op.clone(), &operands).ok()?);
    }
    callee
        .outputs
        .get(k)
        .and_then(|o| values.get(o.index()).copied())
}

/// `func` with the functions of each control-flow op simplified; the rules that fired in
/// them are counted in `report`.
pub(super) fn simplify_regions(
    func: &Func,
    limits: &Limits,
    report: &mut Report,
) -> Result<Func, SimplifyError> {
    if func.body.iter().all(|ins| ins.op.call_result().is_none()) {
        return Ok(func.clone());
    }
    // Each call simplified once: its op (as result 0) and the simplified op.
    let mut done: Vec<(Op, Op)> = Vec::new();
    let mut body = Vec::with_capacity(func.body.len());
    for ins in &func.body {
        let Some((k, _)) = ins.op.call_result() else {
            body.push(ins.clone());
            continue;
        };
        let simplified = match done.iter().find(|(op, _)| op.same_call(&ins.op)) {
            Some((_, simplified)) => simplified.with_result(k),
            None => {
                let simplified = ins.op.map_regions(|region| {
                    let (f, inner) = simplify_with(region, limits)?;
                    for (rule, n) in inner.applied {
                        *report.applied.entry(rule).or_default() += n;
                    }
                    Ok::<Func, SimplifyError>(f)
                })?;
                done.push((ins.op.with_result(0), simplified.with_result(0)));
                simplified
            }
        };
        body.push(Instr {
            op: simplified,
            args: ins.args.clone(),
            ty: ins.ty.clone(),
        });
    }
    Ok(Func {
        body,
        ..func.clone()
    })
}

/// `func` with each scan's stacked outputs that none of its call's instructions yields
/// dropped from its body, and the instructions' `result`s renumbered.
pub(super) fn prune_scan_outputs(func: &Func) -> Func {
    // Per instruction of a scan: the first instruction of its call.
    let mut first: Vec<Option<usize>> = vec![None; func.body.len()];
    for (i, ins) in func.body.iter().enumerate() {
        if !matches!(ins.op, Op::Scan(_)) || first[i].is_some() {
            continue;
        }
        for (j, other) in func.body.iter().enumerate().skip(i) {
            if other.args == ins.args && other.op.same_call(&ins.op) {
                first[j] = Some(i);
            }
        }
    }
    let mut body = func.body.clone();
    for (i, ins) in func.body.iter().enumerate() {
        let Op::Scan(s) = &ins.op else { continue };
        if first[i] != Some(i) {
            continue;
        }
        let members: Vec<usize> = (i..func.body.len())
            .filter(|&j| first[j] == Some(i))
            .collect();
        let used: BTreeSet<usize> = members
            .iter()
            .filter_map(|&j| func.body[j].op.call_result().map(|(k, _)| k))
            .collect();
        let kept: Vec<usize> = (s.carry..s.body.outputs.len())
            .filter(|k| used.contains(k))
            .collect();
        if s.carry + kept.len() == s.body.outputs.len() {
            continue;
        }
        let mut pruned = s.body.clone();
        pruned.outputs = s.body.outputs[..s.carry]
            .iter()
            .chain(kept.iter().map(|&k| &s.body.outputs[k]))
            .copied()
            .collect();
        let renumber = |k: usize| match k < s.carry {
            true => k,
            false => s.carry + kept.iter().position(|&kk| kk == k).unwrap_or(0),
        };
        for &j in &members {
            let k = func.body[j].op.call_result().map_or(0, |(k, _)| k);
            body[j].op = Op::Scan(Box::new(Scan {
                body: pruned.clone(),
                result: renumber(k),
                ..(**s).clone()
            }));
        }
    }
    Func {
        body,
        ..func.clone()
    }
}

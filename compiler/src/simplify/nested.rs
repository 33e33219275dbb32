//! The functions that control flow holds (a loop's condition and body, a `cond`'s branches)
//! are simplified on their own, each in its own e-graph, before the program around them: the
//! e-graph sees a call as one opaque op. The instructions of one call (the same op but for
//! `result`) get the same simplified functions, so they remain one call.

use super::{simplify_with, Limits, Report, SimplifyError};
use ferrax_ir::{Func, Instr, Op};

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

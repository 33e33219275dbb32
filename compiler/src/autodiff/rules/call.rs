//! `custom_vjp`: reverse mode runs the user's `fwd` program for the residuals and their `bwd`
//! program for the operand cotangents, inlined; forward mode differentiates the primal program.

use super::{or_zero, Emitter, R};
use crate::autodiff::{jvp as jvp_program, AutodiffError};
use ferrax_ir::{CustomVjp, Func, ValueId};

/// Emits `func`'s instructions on `args` and returns its outputs.
fn inline(e: &mut Emitter, func: &Func, args: &[ValueId]) -> R<Vec<ValueId>> {
    let mut values: Vec<ValueId> = args.to_vec();
    for ins in &func.body {
        let operands: Vec<ValueId> = ins.args.iter().map(|a| values[a.index()]).collect();
        values.push(e.push(ins.op.clone(), &operands)?);
    }
    Ok(func.outputs.iter().map(|o| values[o.index()]).collect())
}

pub(super) fn jvp(
    e: &mut Emitter,
    c: &CustomVjp,
    x: &[ValueId],
    t: &[Option<ValueId>],
) -> R<Option<ValueId>> {
    let program = jvp_program(&c.primal)?;
    let mut args = x.to_vec();
    for (&xi, &ti) in x.iter().zip(t) {
        args.push(or_zero(e, ti, xi)?);
    }
    let outs = inline(e, &program, &args)?;
    outs.get(1)
        .copied()
        .map(Some)
        .ok_or(AutodiffError::Undefined(ValueId(1)))
}

pub(super) fn vjp(
    e: &mut Emitter,
    c: &CustomVjp,
    x: &[ValueId],
    g: ValueId,
) -> R<Vec<Option<ValueId>>> {
    let fwd_out = inline(e, &c.fwd, x)?;
    let mut bwd_args = fwd_out[1..].to_vec();
    bwd_args.push(g);
    Ok(inline(e, &c.bwd, &bwd_args)?
        .into_iter()
        .map(Some)
        .collect())
}

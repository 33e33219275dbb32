//! `custom_vjp`: reverse mode runs the user's `fwd` program for the residuals and their `bwd`
//! program for the operand cotangents, inlined; forward mode differentiates the primal program.

use super::{or_zero, Emitter, R};
use crate::autodiff::{jvp as jvp_program, AutodiffError};
use ferrax_ir::{CustomVjp, Func, ValueId};

pub(super) fn jvp(
    e: &mut Emitter,
    c: &CustomVjp,
    x: &[ValueId],
    t: &[Option<ValueId>],
) -> R<Option<ValueId>> {
    inline_jvp(e, &c.primal, x, t)
}

/// The tangent of `f`'s one result at `x` along `t` (zeros where absent): `f`'s forward-mode
/// program, inlined.
pub(super) fn inline_jvp(
    e: &mut Emitter,
    f: &Func,
    x: &[ValueId],
    t: &[Option<ValueId>],
) -> R<Option<ValueId>> {
    let program = jvp_program(f)?;
    let mut args = x.to_vec();
    for (&xi, &ti) in x.iter().zip(t) {
        args.push(or_zero(e, ti, xi)?);
    }
    let outs = e.b.inline(&program, &args)?;
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
    let fwd_out = e.b.inline(&c.fwd, x)?;
    let mut bwd_args = fwd_out[1..].to_vec();
    bwd_args.push(g);
    Ok(e.b
        .inline(&c.bwd, &bwd_args)?
        .into_iter()
        .map(Some)
        .collect())
}

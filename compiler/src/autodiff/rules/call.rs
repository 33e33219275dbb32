//! `custom_vjp`: reverse mode runs the user's `fwd` program for the residuals and their `bwd`
//! program for the operand cotangents, inlined; forward mode differentiates the primal program.
//! `custom_jvp`: forward mode runs the user's `jvp` program; reverse mode transposes its
//! tangent part, as JAX does: the reverse-mode program of the tangent result with respect to
//! the tangents alone (which it is linear in), so work on the operands alone is computed, not
//! differentiated, and stays differentiable for higher orders.

use super::{or_zero, Emitter, R};
use crate::autodiff::{jvp as jvp_program, vjp_wrt, AutodiffError};
use ferrax_ir::{CustomJvp, CustomVjp, Func, ValueId};

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

pub(super) fn custom_jvp_jvp(
    e: &mut Emitter,
    c: &CustomJvp,
    x: &[ValueId],
    t: &[Option<ValueId>],
) -> R<Option<ValueId>> {
    let mut args = x.to_vec();
    for (&xi, &ti) in x.iter().zip(t) {
        args.push(or_zero(e, ti, xi)?);
    }
    let outs = e.b.inline(&c.jvp, &args)?;
    outs.get(1)
        .copied()
        .map(Some)
        .ok_or(AutodiffError::Undefined(ValueId(1)))
}

pub(super) fn custom_jvp_vjp(
    e: &mut Emitter,
    c: &CustomJvp,
    x: &[ValueId],
    g: ValueId,
) -> R<Vec<Option<ValueId>>> {
    let n = x.len();
    let tangent_out = c
        .jvp
        .outputs
        .get(1)
        .copied()
        .ok_or(AutodiffError::Undefined(ValueId(1)))?;
    let tangent_part = Func {
        outputs: vec![tangent_out],
        ..c.jvp.clone()
    };
    let wrt: Vec<bool> = (0..2 * n).map(|i| i >= n).collect();
    let transposed = vjp_wrt(&tangent_part, &wrt)?;
    // The tangents' values do not matter (the part is linear in them): zeros.
    let mut args = x.to_vec();
    for &xi in x {
        args.push(e.full_like(0.0, xi)?);
    }
    args.push(g);
    let outs = e.b.inline(&transposed, &args)?;
    Ok(outs
        .get(1 + n..1 + 2 * n)
        .ok_or(AutodiffError::Undefined(g))?
        .iter()
        .map(|&c| Some(c))
        .collect())
}

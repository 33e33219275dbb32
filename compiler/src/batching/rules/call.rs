//! `custom_vjp`: its three programs are batched with every operand batched first (an
//! unbatched operand broadcast), so the user's backward rule returns per-example cotangents
//! of per-example operands, and reverse mode through the broadcast sums them for an operand
//! shared by the batch, as the derivative of the batched program requires. `custom_jvp`'s
//! two programs likewise, its tangents batched with their operands.

use super::{BVal, Batcher, R};
use crate::batching::{batch_func, OutAxis};
use ferrax_ir::{CustomJvp, CustomVjp, Func, Op};

fn all_batched(bt: &Batcher, f: &Func) -> R<Func> {
    let in_axes = vec![Some(0); f.params.len()];
    let out = vec![OutAxis::At(0); f.outputs.len()];
    Ok(batch_func(f, &in_axes, bt.size, &out)?.0)
}

pub(super) fn custom_vjp(bt: &mut Batcher, c: &CustomVjp, args: &[BVal]) -> R<BVal> {
    let operands: Vec<_> = args
        .iter()
        .map(|a| bt.materialize(*a, 0))
        .collect::<R<_>>()?;
    let batched = CustomVjp {
        primal: all_batched(bt, &c.primal)?,
        fwd: all_batched(bt, &c.fwd)?,
        bwd: all_batched(bt, &c.bwd)?,
    };
    Ok(BVal::at(
        bt.push(Op::CustomVjp(Box::new(batched)), &operands)?,
        0,
    ))
}

pub(super) fn custom_jvp(bt: &mut Batcher, c: &CustomJvp, args: &[BVal]) -> R<BVal> {
    let operands: Vec<_> = args
        .iter()
        .map(|a| bt.materialize(*a, 0))
        .collect::<R<_>>()?;
    let batched = CustomJvp {
        primal: all_batched(bt, &c.primal)?,
        jvp: all_batched(bt, &c.jvp)?,
    };
    Ok(BVal::at(
        bt.push(Op::CustomJvp(Box::new(batched)), &operands)?,
        0,
    ))
}

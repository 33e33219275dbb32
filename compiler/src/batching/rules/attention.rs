//! Dot-product attention: every operand leads with its batch dimension, so the examples of a
//! `vmap` join it (`[N, B, ...]` as `[N * B, ...]`) and split off the result again.

use super::{BVal, Batcher, R};
use crate::batching::BatchError;
use ferrax_ir::{Attention, Op};

pub(super) fn batch(bt: &mut Batcher, a: Attention, args: &[BVal]) -> R<BVal> {
    let n = bt.size;
    let joined = |bt: &mut Batcher, x: BVal| -> R {
        let v = bt.materialize(x, 0)?;
        let ty = bt.ty(v)?;
        let mut dims = ty.dims()[1..].to_vec();
        let lead = dims
            .first_mut()
            .ok_or_else(|| BatchError::Malformed(format!("{}: a scalar operand", a.name())))?;
        *lead = lead
            .checked_mul(n)
            .ok_or_else(|| BatchError::Malformed(format!("{}: too large", a.name())))?;
        bt.push(Op::Reshape { shape: dims.into() }, &[v])
    };
    let operands = args.iter().map(|&x| joined(bt, x)).collect::<R<Vec<_>>>()?;
    let out = bt.push(Op::Attention(a), &operands)?;
    let examples = args
        .iter()
        .map(|&x| bt.example_type(x))
        .collect::<R<Vec<_>>>()?;
    let example = a.result_type(&examples.iter().collect::<Vec<_>>())?;
    let mut dims = example.dims().to_vec();
    dims.insert(0, n);
    let v = bt.push(Op::Reshape { shape: dims.into() }, &[out])?;
    Ok(BVal::at(v, 0))
}

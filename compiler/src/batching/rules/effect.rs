//! `debug_callback` under `vmap`, as JAX's: the callback runs once per example, in order, on
//! that example's operands (operands shared by the batch as they are). `add_dependency` keeps
//! its operand's batch dimension, whatever it waits for. Tokens come from callbacks, which
//! give unbatched ones.

use super::{BVal, Batcher, R};
use crate::batching::BatchError;
use ferrax_ir::{Op, ValueId};

/// Example `k` of `x`, batched at `bdim`.
fn example(bt: &mut Batcher, x: ValueId, bdim: usize, k: usize) -> R<ValueId> {
    let ty = bt.ty(x)?;
    let mut start = vec![0; ty.rank()];
    let mut limit = ty.dims().to_vec();
    start[bdim] = k;
    limit[bdim] = k + 1;
    let strides = vec![1; ty.rank()];
    let row = bt.push(
        Op::Slice {
            start,
            limit,
            strides,
        },
        &[x],
    )?;
    let mut dims = ty.dims().to_vec();
    dims.remove(bdim);
    bt.push(Op::Reshape { shape: dims.into() }, &[row])
}

pub(super) fn debug_callback(bt: &mut Batcher, op: &Op, args: &[BVal]) -> R<BVal> {
    let (token, operands) = args
        .split_first()
        .ok_or_else(|| BatchError::Malformed(format!("{}: no token operand", op.name())))?;
    if token.bdim.is_some() {
        return Err(BatchError::Malformed(format!(
            "{}: the token operand is batched",
            op.name()
        )));
    }
    let mut token = token.v;
    for k in 0..bt.size {
        let mut call = vec![token];
        for a in operands {
            call.push(match a.bdim {
                None => a.v,
                Some(d) => example(bt, a.v, d, k)?,
            });
        }
        token = bt.push(op.clone(), &call)?;
    }
    Ok(BVal {
        v: token,
        bdim: None,
    })
}

pub(super) fn add_dependency(bt: &mut Batcher, op: &Op, args: &[BVal]) -> R<BVal> {
    let [x, after] = args else {
        return Err(BatchError::Malformed(format!(
            "{}: expects two operands",
            op.name()
        )));
    };
    Ok(BVal {
        v: bt.push(Op::AddDependency, &[x.v, after.v])?,
        bdim: x.bdim,
    })
}

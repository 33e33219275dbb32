//! Elementwise ops (unary, binary, compare, select, clamp, conversions, stop_gradient): the
//! operands of the result's shape are lined up at the first batched one's batch dimension,
//! the unbatched among them broadcast along the batch. Scalar operands of a shaped op
//! (`select`'s predicate, `clamp`'s bounds) stay scalars when unbatched; batched, they are
//! spread over the batched result.

use super::{BVal, Batcher, R};
use ferrax_ir::Op;

/// `op` on `args`; `rank` is the result's rank per example.
pub(super) fn batch(bt: &mut Batcher, op: &Op, args: &[BVal], rank: usize) -> R<BVal> {
    let ranks: Vec<usize> = args.iter().map(|a| bt.rank(*a)).collect::<R<_>>()?;
    let shaped = |k: usize| ranks[k] == rank;
    let bdim = (0..args.len())
        .filter(|&k| shaped(k))
        .find_map(|k| args[k].bdim)
        .unwrap_or(0);
    let mut lined_up = Vec::with_capacity(args.len());
    for (k, &a) in args.iter().enumerate() {
        lined_up.push(if shaped(k) {
            bt.materialize(a, bdim)?
        } else {
            a.v
        });
    }
    // The batched result's shape, known from any shaped operand.
    let like = (0..args.len())
        .find(|&k| shaped(k))
        .map(|k| lined_up[k])
        .ok_or_else(|| {
            super::BatchError::Malformed(format!("{}: no operand of its shape", op.name()))
        })?;
    let shape = bt.ty(like)?.shape;
    for (k, &a) in args.iter().enumerate() {
        if !shaped(k) && a.bdim.is_some() {
            lined_up[k] = bt.push(
                Op::BroadcastInDim {
                    shape: shape.clone(),
                    dims: vec![bdim],
                },
                &[a.v],
            )?;
        }
    }
    Ok(BVal::at(bt.push(op.clone(), &lined_up)?, bdim))
}

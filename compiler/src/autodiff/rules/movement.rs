//! Data movement is linear: forward mode applies the op to the tangents, and each op states
//! its transpose for reverse mode.

use super::{or_zero, Emitter, R};
use ferrax_ir::{Op, ReduceOp, Shape, ValueId};

pub(super) fn jvp(
    e: &mut Emitter,
    op: &Op,
    x: &[ValueId],
    t: &[Option<ValueId>],
) -> R<Option<ValueId>> {
    let mut args = Vec::with_capacity(x.len());
    for (&xi, &ti) in x.iter().zip(t) {
        args.push(or_zero(e, ti, xi)?);
    }
    Ok(Some(e.push(op.clone(), &args)?))
}

/// The positions of `order`'s values when sorted: the permutation that sorts it.
fn argsort(order: &[usize]) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..order.len()).collect();
    idx.sort_by_key(|&k| order[k]);
    idx
}

pub(super) fn vjp(e: &mut Emitter, op: &Op, x: &[ValueId], g: ValueId) -> R<Vec<Option<ValueId>>> {
    let xt = e.ty(x[0])?;
    let gt = e.ty(g)?;
    match op {
        Op::BroadcastInDim { dims, .. } => {
            // Sum over the new axes and the axes broadcast from size 1.
            let summed: Vec<usize> = (0..gt.rank())
                .filter(|r| match dims.iter().position(|d| d == r) {
                    None => true,
                    Some(i) => xt.dims()[i] == 1 && gt.dims()[*r] != 1,
                })
                .collect();
            let reduced = e.reduce(ReduceOp::Sum, g, summed.clone())?;
            let order: Vec<usize> = (0..gt.rank())
                .filter(|r| !summed.contains(r))
                .filter_map(|r| dims.iter().position(|&d| d == r))
                .collect();
            let sorted = e.transpose(reduced, argsort(&order))?;
            Ok(vec![Some(e.reshape(sorted, &xt.shape)?)])
        }
        Op::Reshape { .. } => Ok(vec![Some(e.reshape(g, &xt.shape)?)]),
        Op::Transpose { perm } => Ok(vec![Some(e.transpose(g, argsort(perm))?)]),
        // Its own transpose.
        Op::Reverse { .. } => Ok(vec![Some(e.push(op.clone(), &[g])?)]),
        Op::Slice { start, strides, .. } => {
            if gt.numel() == 0 {
                return Ok(vec![Some(e.full_like(0.0, x[0])?)]);
            }
            let zero = e.splat(0.0, &gt.with_shape(Shape::scalar()))?;
            let high = (0..xt.rank())
                .map(|i| {
                    let last = start[i] + (gt.dims()[i] - 1) * strides[i];
                    xt.dims()[i] as i64 - last as i64 - 1
                })
                .collect();
            let op = Op::Pad {
                low: start.iter().map(|&s| s as i64).collect(),
                high,
                interior: strides.iter().map(|&s| s - 1).collect(),
            };
            Ok(vec![Some(e.push(op, &[g, zero])?)])
        }
        Op::Pad {
            low,
            high,
            interior,
        } => {
            let zero = e.splat(0.0, &gt.with_shape(Shape::scalar()))?;
            let unpad = Op::Pad {
                low: low.iter().map(|l| -l).collect(),
                high: high.iter().map(|h| -h).collect(),
                interior: vec![0; xt.rank()],
            };
            let unpadded = e.push(unpad, &[g, zero])?;
            let ut = e.ty(unpadded)?;
            let slice = Op::Slice {
                start: vec![0; xt.rank()],
                limit: ut.dims().to_vec(),
                strides: interior.iter().map(|i| i + 1).collect(),
            };
            let gx = e.push(slice, &[unpadded])?;
            let all: Vec<usize> = (0..xt.rank()).collect();
            let total = e.reduce(ReduceOp::Sum, g, all.clone())?;
            let kept = e.reduce(ReduceOp::Sum, gx, all)?;
            let gv = e.sub(total, kept)?;
            Ok(vec![Some(gx), Some(gv)])
        }
        Op::Concatenate { axis } => {
            let mut offset = 0;
            let mut out = Vec::with_capacity(x.len());
            for &xi in x {
                let size = e.ty(xi)?.dims()[*axis];
                let mut start = vec![0; gt.rank()];
                let mut limit = gt.dims().to_vec();
                start[*axis] = offset;
                limit[*axis] = offset + size;
                let op = Op::Slice {
                    start,
                    limit,
                    strides: vec![1; gt.rank()],
                };
                out.push(Some(e.push(op, &[g])?));
                offset += size;
            }
            Ok(out)
        }
        _ => Ok(vec![None; x.len()]),
    }
}

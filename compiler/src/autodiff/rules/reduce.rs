//! Reductions. `reduce_sum` is linear; `reduce_max`/`reduce_min` send the derivative to the
//! extreme elements, split evenly between ties (as JAX does); `reduce_prod` uses the product
//! of the other elements, computed without division so that zeros are handled.

use super::{Emitter, R};
use ferrax_ir::{CompareOp, DType, Op, ReduceOp, Shape, ValueId};

fn kept_axes(rank: usize, axes: &[usize]) -> Vec<usize> {
    (0..rank).filter(|a| !axes.contains(a)).collect()
}

/// `v` (shaped like the reduction result) broadcast back to the operand's shape.
fn expand(e: &mut Emitter, v: ValueId, x: ValueId, axes: &[usize]) -> R {
    let xt = e.ty(x)?;
    e.broadcast(v, &xt.shape, kept_axes(xt.rank(), axes))
}

/// 1 where `x` equals its reduction result `y`, else 0; and the number of such elements.
fn extreme_mask(e: &mut Emitter, x: ValueId, y: ValueId, axes: &[usize]) -> R<(ValueId, ValueId)> {
    let dtype = e.ty(x)?.dtype;
    let yb = expand(e, y, x, axes)?;
    let hit = e.compare(CompareOp::Eq, x, yb)?;
    let mask = e.mask(hit, dtype)?;
    let count = e.reduce(ReduceOp::Sum, mask, axes.to_vec())?;
    Ok((mask, count))
}

/// For every element, the product of the other elements of its reduction group.
fn others_product(e: &mut Emitter, x: ValueId, axes: &[usize]) -> R {
    let xt = e.ty(x)?;
    let kept = kept_axes(xt.rank(), axes);
    let perm: Vec<usize> = kept.iter().chain(axes).copied().collect();
    let moved = e.transpose(x, perm.clone())?;
    let moved_shape = e.ty(moved)?.shape;
    let m: usize = kept.iter().map(|&a| xt.dims()[a]).product();
    let n: usize = axes.iter().map(|&a| xt.dims()[a]).product();
    let flat = e.reshape(moved, &Shape::new([m, n]))?;
    let cube = Shape::new([m, n, n]);
    let rows = e.broadcast(flat, &cube, vec![0, 2])?;
    let i = e.push(
        Op::Iota {
            dtype: DType::I32,
            shape: cube.clone(),
            dim: 1,
        },
        &[],
    )?;
    let j = e.push(
        Op::Iota {
            dtype: DType::I32,
            shape: cube,
            dim: 2,
        },
        &[],
    )?;
    let diagonal = e.compare(CompareOp::Eq, i, j)?;
    let one = e.full_like(1.0, rows)?;
    let without_self = e.select(diagonal, one, rows)?;
    let prod = e.reduce(ReduceOp::Prod, without_self, vec![2])?;
    let back = e.reshape(prod, &moved_shape)?;
    let mut inverse = vec![0; perm.len()];
    for (k, &p) in perm.iter().enumerate() {
        inverse[p] = k;
    }
    e.transpose(back, inverse)
}

pub(super) fn jvp(
    e: &mut Emitter,
    r: ReduceOp,
    axes: &[usize],
    x: ValueId,
    t: Option<ValueId>,
    y: ValueId,
) -> R<Option<ValueId>> {
    let Some(t) = t else { return Ok(None) };
    let axes = axes.to_vec();
    Ok(Some(match r {
        ReduceOp::Sum => e.reduce(ReduceOp::Sum, t, axes)?,
        ReduceOp::Max | ReduceOp::Min => {
            let (mask, count) = extreme_mask(e, x, y, &axes)?;
            let picked = e.mul(t, mask)?;
            let total = e.reduce(ReduceOp::Sum, picked, axes)?;
            e.div(total, count)?
        }
        ReduceOp::Prod => {
            let others = others_product(e, x, &axes)?;
            let terms = e.mul(t, others)?;
            e.reduce(ReduceOp::Sum, terms, axes)?
        }
    }))
}

pub(super) fn vjp(
    e: &mut Emitter,
    r: ReduceOp,
    axes: &[usize],
    x: ValueId,
    y: ValueId,
    g: ValueId,
) -> R<Option<ValueId>> {
    Ok(Some(match r {
        ReduceOp::Sum => expand(e, g, x, axes)?,
        ReduceOp::Max | ReduceOp::Min => {
            let (mask, count) = extreme_mask(e, x, y, axes)?;
            let share = e.div(g, count)?;
            let share = expand(e, share, x, axes)?;
            e.mul(share, mask)?
        }
        ReduceOp::Prod => {
            let others = others_product(e, x, axes)?;
            let gb = expand(e, g, x, axes)?;
            e.mul(gb, others)?
        }
    }))
}

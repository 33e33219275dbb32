//! `dot_general` is bilinear: the tangent is `dot(ta, b) + dot(a, tb)`, and each operand's
//! cotangent is a `dot_general` of the result cotangent with the other operand, transposed
//! back into the operand's dimension order.

use super::{sum_terms, Emitter, R};
use ferrax_ir::{DotDims, Op, ValueId};

pub(super) fn jvp(
    e: &mut Emitter,
    dims: &DotDims,
    x: &[ValueId],
    t: &[Option<ValueId>],
) -> R<Option<ValueId>> {
    let op = Op::DotGeneral(dims.clone());
    let ta = match t[0] {
        Some(ta) => Some(e.push(op.clone(), &[ta, x[1]])?),
        None => None,
    };
    let tb = match t[1] {
        Some(tb) => Some(e.push(op, &[x[0], tb])?),
        None => None,
    };
    sum_terms(e, [ta, tb])
}

pub(super) fn vjp(
    e: &mut Emitter,
    dims: &DotDims,
    x: &[ValueId],
    g: ValueId,
) -> R<Vec<Option<ValueId>>> {
    let lhs = Side {
        contract: &dims.lhs_contract,
        batch: &dims.lhs_batch,
    };
    let rhs = Side {
        contract: &dims.rhs_contract,
        batch: &dims.rhs_batch,
    };
    let ga = cotangent(e, g, x[0], x[1], &lhs, &rhs, false)?;
    let gb = cotangent(e, g, x[1], x[0], &rhs, &lhs, true)?;
    Ok(vec![Some(ga), Some(gb)])
}

struct Side<'a> {
    contract: &'a [usize],
    batch: &'a [usize],
}

fn free_dims(rank: usize, side: &Side) -> Vec<usize> {
    (0..rank)
        .filter(|d| !side.contract.contains(d) && !side.batch.contains(d))
        .collect()
}

/// The cotangent of operand `x` given the result cotangent `g` and the other operand `y`.
/// The result's dimensions are (batch, lhs free, rhs free); `x_is_rhs` says which free group
/// belongs to `x`.
fn cotangent(
    e: &mut Emitter,
    g: ValueId,
    x: ValueId,
    y: ValueId,
    xs: &Side,
    ys: &Side,
    x_is_rhs: bool,
) -> R {
    let (x_rank, y_rank) = (e.ty(x)?.rank(), e.ty(y)?.rank());
    let x_free = free_dims(x_rank, xs);
    let y_free = free_dims(y_rank, ys);
    let nb = xs.batch.len();
    let y_free_start = if x_is_rhs { nb } else { nb + x_free.len() };
    let dims = DotDims {
        lhs_batch: (0..nb).collect(),
        rhs_batch: ys.batch.to_vec(),
        lhs_contract: (y_free_start..y_free_start + y_free.len()).collect(),
        rhs_contract: y_free,
    };
    let product = e.push(Op::DotGeneral(dims), &[g, y])?;
    // `product` is (batch, x free, y's contracting dims in y order); name x's dimension at
    // each position, then permute into x's order.
    let mut pairs: Vec<(usize, usize)> = ys
        .contract
        .iter()
        .copied()
        .zip(xs.contract.iter().copied())
        .collect();
    pairs.sort_unstable();
    let layout: Vec<usize> = xs
        .batch
        .iter()
        .copied()
        .chain(x_free)
        .chain(pairs.into_iter().map(|(_, xd)| xd))
        .collect();
    let mut perm: Vec<usize> = (0..layout.len()).collect();
    perm.sort_by_key(|&k| layout[k]);
    e.transpose(product, perm)
}

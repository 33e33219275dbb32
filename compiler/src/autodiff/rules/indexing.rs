//! Indexing by values. Gather, the dynamic slices and `scatter_add` are linear in their
//! data operands and transpose into one another; `scatter` (replace), `scatter_mul` and
//! `scatter_min`/`scatter_max` are linear in their tangents once the primal fixes which
//! update lands where. Indices have no derivative.
//!
//! Two facts recur: gather clamps a start index that would leave the operand while scatter
//! drops the window, so a gather's transpose clamps its indices first and a scatter's
//! transpose masks the windows it dropped; and for `scatter` the winner among updates to
//! one position is the last in row-major order (the interpreter's order, which every
//! backend keeps), found here by scattering update ids.

use super::{or_zero, Emitter, R};
use crate::autodiff::AutodiffError;
use ferrax_ir::{
    BinaryOp, CompareOp, DType, Elements, Gather, IndexMap, Literal, Op, ReduceOp, Scalar, Scatter,
    ScatterCombine, Shape, TensorType, ValueId,
};

/// Forward mode of a gather or dynamic slice (`op`): the same op on the operand's tangent.
pub(super) fn slice_jvp(
    e: &mut Emitter,
    op: &Op,
    x: &[ValueId],
    t: &[Option<ValueId>],
) -> R<Option<ValueId>> {
    let Some(tx) = t[0] else { return Ok(None) };
    let mut args = vec![tx];
    args.extend_from_slice(&x[1..]);
    Ok(Some(e.push(op.clone(), &args)?))
}

pub(super) fn update_slice_jvp(
    e: &mut Emitter,
    x: &[ValueId],
    t: &[Option<ValueId>],
) -> R<Option<ValueId>> {
    if t[0].is_none() && t[1].is_none() {
        return Ok(None);
    }
    let mut args = vec![or_zero(e, t[0], x[0])?, or_zero(e, t[1], x[1])?];
    args.extend_from_slice(&x[2..]);
    Ok(Some(e.push(Op::DynamicUpdateSlice, &args)?))
}

/// Indices have no cotangent.
fn no_indices(n: usize) -> Vec<Option<ValueId>> {
    vec![None; n]
}

pub(super) fn gather_vjp(
    e: &mut Emitter,
    gather: &Gather,
    x: &[ValueId],
    g: ValueId,
) -> R<Vec<Option<ValueId>>> {
    let zeros = e.full_like(0.0, x[0])?;
    let xt = e.ty(x[0])?;
    let clamped = clamp_gather_indices(e, gather, &xt, x[1])?;
    let scatter = gather.transpose_scatter(ScatterCombine::Add);
    let gx = e.push(Op::Scatter(Box::new(scatter)), &[zeros, clamped, g])?;
    Ok(vec![Some(gx), None])
}

pub(super) fn dynamic_slice_vjp(
    e: &mut Emitter,
    x: &[ValueId],
    g: ValueId,
) -> R<Vec<Option<ValueId>>> {
    let zeros = e.full_like(0.0, x[0])?;
    let mut args = vec![zeros, g];
    args.extend_from_slice(&x[1..]);
    let mut out = vec![Some(e.push(Op::DynamicUpdateSlice, &args)?)];
    out.extend(no_indices(x.len() - 1));
    Ok(out)
}

pub(super) fn update_slice_vjp(
    e: &mut Emitter,
    x: &[ValueId],
    g: ValueId,
) -> R<Vec<Option<ValueId>>> {
    let zeros = e.full_like(0.0, x[1])?;
    let mut args = vec![g, zeros];
    args.extend_from_slice(&x[2..]);
    let gx = e.push(Op::DynamicUpdateSlice, &args)?;
    let sizes = e.ty(x[1])?.dims().to_vec();
    let mut args = vec![g];
    args.extend_from_slice(&x[2..]);
    let gu = e.push(Op::DynamicSlice { sizes }, &args)?;
    let mut out = vec![Some(gx), Some(gu)];
    out.extend(no_indices(x.len() - 2));
    Ok(out)
}

/// A constant of `dtype` and `shape` holding `values` in row-major order.
fn constant(e: &mut Emitter, dtype: DType, shape: Vec<usize>, values: &[i64]) -> R {
    let scalars: Vec<Scalar> = values
        .iter()
        .map(|&v| Scalar::from_f64(dtype, v as f64))
        .collect();
    let data = Elements::from_scalars(dtype, &scalars).ok_or(AutodiffError::Type(
        ferrax_ir::TypeError::DType {
            op: "constant",
            dtype,
            expected: "the dtype of its values",
        },
    ))?;
    let lit = Literal {
        ty: TensorType::new(dtype, shape),
        data,
    };
    e.push(Op::Constant(lit), &[])
}

/// `bound[k]` for index vector entry `k`, laid out like the indices (broadcast along
/// everything but the index vector dimension).
fn per_entry(e: &mut Emitter, indices: ValueId, vector_dim: usize, bound: &[i64]) -> R {
    let it = e.ty(indices)?;
    if vector_dim == it.rank() {
        return e.splat(bound[0] as f64, &it);
    }
    let v = constant(e, it.dtype, vec![bound.len()], bound)?;
    e.broadcast(v, &it.shape, vec![vector_dim])
}

/// The indices of a gather clamped as the gather clamps them, so that a scatter at them
/// writes where the gather read.
fn clamp_gather_indices(e: &mut Emitter, g: &Gather, xt: &TensorType, indices: ValueId) -> R {
    let hi: Vec<i64> = g
        .start_index_map
        .iter()
        .map(|&d| (xt.dims()[d] - g.slice_sizes[d]) as i64)
        .collect();
    let it = e.ty(indices)?;
    let lo = e.splat(0.0, &it.with_shape(Shape::scalar()))?;
    let hi = per_entry(e, indices, g.index_vector_dim, &hi)?;
    e.push(Op::Clamp, &[lo, indices, hi])
}

/// Updates-shaped: whether each update element's window fits inside the operand (the
/// scatter keeps it) or not (dropped).
fn kept_windows(
    e: &mut Emitter,
    s: &Scatter,
    xt: &TensorType,
    indices: ValueId,
    ut: &TensorType,
) -> R {
    let it = e.ty(indices)?;
    let extent = s.window_extent(xt.rank(), ut.dims());
    let hi: Vec<i64> = s
        .scatter_dims_to_operand_dims
        .iter()
        .map(|&d| xt.dims()[d] as i64 - extent[d] as i64)
        .collect();
    let map = IndexMap::of_scatter(s, xt.rank(), ut.rank());
    let bool_ty = ut.with_dtype(DType::Bool);
    if hi.iter().any(|&h| h < 0) {
        return e.splat(0.0, &bool_ty);
    }
    let zero = e.splat(0.0, &it)?;
    let hi = per_entry(e, indices, s.index_vector_dim, &hi)?;
    let above = e.compare(CompareOp::Ge, indices, zero)?;
    let below = e.compare(CompareOp::Le, indices, hi)?;
    let fits = e.binary(BinaryOp::And, above, below)?;
    let per_window = if s.index_vector_dim < it.rank() {
        e.reduce(ReduceOp::Min, fits, vec![s.index_vector_dim])?
    } else {
        fits
    };
    e.broadcast(per_window, &bool_ty.shape, map.batch_dims)
}

/// `where(p, a, 0)`.
fn keep(e: &mut Emitter, p: ValueId, a: ValueId) -> R {
    let zero = e.full_like(0.0, a)?;
    e.select(p, a, zero)
}

/// For each update element, the value of operand-shaped `v` at the position the update is
/// combined into (clamped where the window is dropped).
fn at_updates(e: &mut Emitter, s: &Scatter, v: ValueId, indices: ValueId, ut: &TensorType) -> R {
    let rank = e.ty(v)?.rank();
    let gather = s.window_gather(rank, ut.dims());
    e.push(Op::Gather(Box::new(gather)), &[v, indices])
}

fn scatter_op(e: &mut Emitter, s: &Scatter, combine: ScatterCombine, args: [ValueId; 3]) -> R {
    let op = Scatter {
        combine,
        ..s.clone()
    };
    e.push(Op::Scatter(Box::new(op)), &args)
}

/// Per update element, whether it is the one whose value `scatter` (replace) leaves at its
/// position: update ids (1, 2, ... in row-major order of the batch) are scattered the same
/// way and read back.
fn replace_winners(
    e: &mut Emitter,
    s: &Scatter,
    x: &[ValueId],
    ut: &TensorType,
) -> R<(ValueId, ValueId)> {
    let xt = e.ty(x[0])?;
    let map = IndexMap::of_scatter(s, xt.rank(), ut.rank());
    let batch: Vec<usize> = map.batch_dims.iter().map(|&d| ut.dims()[d]).collect();
    let count: usize = batch.iter().product();
    let id_type = if count < i32::MAX as usize {
        DType::I32
    } else {
        DType::I64
    };
    let iota = e.push(
        Op::Iota {
            dtype: id_type,
            shape: Shape::new(vec![count]),
            dim: 0,
        },
        &[],
    )?;
    let one = e.full_like(1.0, iota)?;
    let ids = e.add(iota, one)?;
    let ids = e.reshape(ids, &Shape::new(batch))?;
    let ids = e.broadcast(ids, &ut.shape, map.batch_dims)?;
    let none = e.splat(0.0, &xt.with_dtype(id_type))?;
    let written = scatter_op(e, s, ScatterCombine::Replace, [none, x[1], ids])?;
    let zero = e.full_like(0.0, written)?;
    let untouched = e.compare(CompareOp::Eq, written, zero)?;
    let landed = at_updates(e, s, written, x[1], ut)?;
    let wins = e.compare(CompareOp::Eq, landed, ids)?;
    Ok((untouched, wins))
}

/// The coefficients of `scatter_min`/`scatter_max`'s derivative, as JAX defines it: where
/// the operand and several updates tie for the extremum they share its derivative equally.
/// Operand-shaped for the operand, updates-shaped for the updates.
fn extremum_coefficients(
    e: &mut Emitter,
    s: &Scatter,
    x: &[ValueId],
    y: ValueId,
) -> R<(ValueId, ValueId)> {
    let (xt, ut) = (e.ty(x[0])?, e.ty(x[2])?);
    let at = at_updates(e, s, y, x[1], &ut)?;
    let equal = e.compare(CompareOp::Eq, x[2], at)?;
    let kept = kept_windows(e, s, &xt, x[1], &ut)?;
    let successful = e.binary(BinaryOp::And, equal, kept)?;
    let retained = e.compare(CompareOp::Eq, x[0], y)?;
    let ones_u = e.splat(1.0, &ut)?;
    let counted = keep(e, successful, ones_u)?;
    let zeros = e.full_like(0.0, x[0])?;
    let updates = scatter_op(e, s, ScatterCombine::Add, [zeros, x[1], counted])?;
    let retained_f = e.mask(retained, xt.dtype)?;
    let refs = e.add(updates, retained_f)?;
    let ones_x = e.full_like(1.0, refs)?;
    let share = e.div(ones_x, refs)?;
    let x_coef = keep(e, retained, share)?;
    let refs_at = at_updates(e, s, refs, x[1], &ut)?;
    let ones = e.full_like(1.0, refs_at)?;
    let u_share = e.div(ones, refs_at)?;
    let u_coef = keep(e, successful, u_share)?;
    Ok((x_coef, u_coef))
}

/// For `scatter_mul`, per update element: the product of the other updates combined into
/// its position (without dividing by a zero: zero updates are counted apart). Updates-shaped.
fn product_of_others(e: &mut Emitter, s: &Scatter, x: &[ValueId]) -> R {
    let (xt, ut) = (e.ty(x[0])?, e.ty(x[2])?);
    let zero_u = e.full_like(0.0, x[2])?;
    let one_u = e.full_like(1.0, x[2])?;
    let is_zero = e.compare(CompareOp::Eq, x[2], zero_u)?;
    let nonzero = e.select(is_zero, one_u, x[2])?;
    let ones_x = e.splat(1.0, &xt)?;
    let product = scatter_op(e, s, ScatterCombine::Mul, [ones_x, x[1], nonzero])?;
    let zeros_x = e.splat(0.0, &xt)?;
    let zero_count = e.mask(is_zero, xt.dtype)?;
    let zeros = scatter_op(e, s, ScatterCombine::Add, [zeros_x, x[1], zero_count])?;
    let product_at = at_updates(e, s, product, x[1], &ut)?;
    let zeros_at = at_updates(e, s, zeros, x[1], &ut)?;
    // An update that is zero: the product of the others if it is the only zero. One that is
    // not: the product divided by it if no update there is zero.
    let one = e.full_like(1.0, zeros_at)?;
    let only_zero = e.compare(CompareOp::Eq, zeros_at, one)?;
    let if_zero = keep(e, only_zero, product_at)?;
    let zero = e.full_like(0.0, zeros_at)?;
    let no_zero = e.compare(CompareOp::Eq, zeros_at, zero)?;
    let quotient = e.div(product_at, nonzero)?;
    let if_nonzero = keep(e, no_zero, quotient)?;
    e.select(is_zero, if_zero, if_nonzero)
}

/// Whether no update window fits inside the operand (an empty dimension it needs), so the
/// scatter returns its operand unchanged.
fn no_window_fits(e: &Emitter, s: &Scatter, x: &[ValueId]) -> R<bool> {
    let (xt, ut) = (e.ty(x[0])?, e.ty(x[2])?);
    let extent = s.window_extent(xt.rank(), ut.dims());
    Ok(extent.iter().zip(xt.dims()).any(|(w, d)| w > d))
}

pub(super) fn scatter_jvp(
    e: &mut Emitter,
    s: &Scatter,
    x: &[ValueId],
    [tx, tu]: [Option<ValueId>; 2],
    y: ValueId,
) -> R {
    let tx = or_zero(e, tx, x[0])?;
    if no_window_fits(e, s, x)? {
        return Ok(tx);
    }
    let tu = or_zero(e, tu, x[2])?;
    match s.combine {
        // Linear in (operand, updates) jointly once the indices are fixed.
        ScatterCombine::Add | ScatterCombine::Replace => {
            scatter_op(e, s, s.combine, [tx, x[1], tu])
        }
        ScatterCombine::Mul => {
            let scaled = scatter_op(e, s, ScatterCombine::Mul, [tx, x[1], x[2]])?;
            let others = product_of_others(e, s, x)?;
            let du = e.mul(others, tu)?;
            let zeros = e.full_like(0.0, x[0])?;
            let summed = scatter_op(e, s, ScatterCombine::Add, [zeros, x[1], du])?;
            let dx = e.mul(x[0], summed)?;
            e.add(scaled, dx)
        }
        ScatterCombine::Min | ScatterCombine::Max => {
            let (x_coef, u_coef) = extremum_coefficients(e, s, x, y)?;
            let from_x = e.mul(x_coef, tx)?;
            let from_u = e.mul(u_coef, tu)?;
            scatter_op(e, s, ScatterCombine::Add, [from_x, x[1], from_u])
        }
    }
}

fn scatter_cotangents(
    e: &mut Emitter,
    s: &Scatter,
    x: &[ValueId],
    y: ValueId,
    g: ValueId,
) -> R<[ValueId; 2]> {
    let (xt, ut) = (e.ty(x[0])?, e.ty(x[2])?);
    if no_window_fits(e, s, x)? {
        return Ok([g, e.full_like(0.0, x[2])?]);
    }
    match s.combine {
        ScatterCombine::Add => {
            let kept = kept_windows(e, s, &xt, x[1], &ut)?;
            let read = at_updates(e, s, g, x[1], &ut)?;
            Ok([g, keep(e, kept, read)?])
        }
        ScatterCombine::Replace => {
            let (untouched, wins) = replace_winners(e, s, x, &ut)?;
            let gx = keep(e, untouched, g)?;
            let read = at_updates(e, s, g, x[1], &ut)?;
            Ok([gx, keep(e, wins, read)?])
        }
        ScatterCombine::Mul => {
            let gx = scatter_op(e, s, ScatterCombine::Mul, [g, x[1], x[2]])?;
            let weighted = e.mul(g, x[0])?;
            let read = at_updates(e, s, weighted, x[1], &ut)?;
            let others = product_of_others(e, s, x)?;
            let gu = e.mul(read, others)?;
            let kept = kept_windows(e, s, &xt, x[1], &ut)?;
            Ok([gx, keep(e, kept, gu)?])
        }
        ScatterCombine::Min | ScatterCombine::Max => {
            let (x_coef, u_coef) = extremum_coefficients(e, s, x, y)?;
            let gx = e.mul(x_coef, g)?;
            let read = at_updates(e, s, g, x[1], &ut)?;
            Ok([gx, e.mul(u_coef, read)?])
        }
    }
}

pub(super) fn scatter_vjp(
    e: &mut Emitter,
    s: &Scatter,
    x: &[ValueId],
    y: ValueId,
    g: ValueId,
) -> R<Vec<Option<ValueId>>> {
    let [gx, gu] = scatter_cotangents(e, s, x, y, g)?;
    Ok(vec![Some(gx), None, Some(gu)])
}

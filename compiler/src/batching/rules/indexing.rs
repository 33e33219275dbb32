//! Indexing. A gather or scatter takes the batch dimension first on every batched operand:
//! a batched operand with unbatched indices reads (writes) a window that spans the batch,
//! batched indices pair with the operand through the op's batching dimensions (the operand
//! broadcast along the batch where needed), as JAX's rules do. `dynamic_slice` and
//! `dynamic_update_slice` with unbatched starts stay what they are, with a zero start on
//! the batch dimension; batched starts make them the gather or scatter that reads or writes
//! each example's window (starts clamped first for the scatter, which drops windows that do
//! not fit where the dynamic update clamps them).

use super::{BVal, Batcher, R};
use ferrax_ir::{Gather, Op, Scalar, Scatter, ScatterCombine, Shape};

fn plus_one(list: &[usize]) -> Vec<usize> {
    list.iter().map(|d| d + 1).collect()
}

fn with_leading(first: usize, list: &[usize]) -> Vec<usize> {
    let mut l = vec![first];
    l.extend(plus_one(list));
    l
}

pub(super) fn gather(bt: &mut Batcher, g: &Gather, operand: BVal, indices: BVal) -> R<BVal> {
    let new = match (operand.bdim, indices.bdim) {
        (_, None) => {
            let mut slice_sizes = vec![bt.size];
            slice_sizes.extend_from_slice(&g.slice_sizes);
            Gather {
                offset_dims: with_leading(0, &g.offset_dims),
                collapsed_slice_dims: plus_one(&g.collapsed_slice_dims),
                operand_batching_dims: plus_one(&g.operand_batching_dims),
                start_indices_batching_dims: g.start_indices_batching_dims.clone(),
                start_index_map: plus_one(&g.start_index_map),
                index_vector_dim: g.index_vector_dim,
                slice_sizes,
                indices_are_sorted: g.indices_are_sorted,
            }
        }
        (None, Some(_)) => Gather {
            offset_dims: plus_one(&g.offset_dims),
            start_indices_batching_dims: plus_one(&g.start_indices_batching_dims),
            index_vector_dim: g.index_vector_dim + 1,
            ..g.clone()
        },
        (Some(_), Some(_)) => {
            let mut slice_sizes = vec![1];
            slice_sizes.extend_from_slice(&g.slice_sizes);
            Gather {
                offset_dims: plus_one(&g.offset_dims),
                collapsed_slice_dims: plus_one(&g.collapsed_slice_dims),
                operand_batching_dims: with_leading(0, &g.operand_batching_dims),
                start_indices_batching_dims: with_leading(0, &g.start_indices_batching_dims),
                start_index_map: plus_one(&g.start_index_map),
                index_vector_dim: g.index_vector_dim + 1,
                slice_sizes,
                indices_are_sorted: g.indices_are_sorted,
            }
        }
    };
    let o = match operand.bdim {
        Some(_) => bt.materialize(operand, 0)?,
        None => operand.v,
    };
    let i = match indices.bdim {
        Some(_) => bt.materialize(indices, 0)?,
        None => indices.v,
    };
    Ok(BVal::at(bt.push(Op::Gather(Box::new(new)), &[o, i])?, 0))
}

/// `scatter(operand, indices, updates)`: the operand and updates batched first (broadcast if
/// they are not: each example's result is its own copy).
pub(super) fn scatter(bt: &mut Batcher, s: &Scatter, args: &[BVal]) -> R<BVal> {
    let (operand, indices, updates) = (args[0], args[1], args[2]);
    let new = match indices.bdim {
        None => Scatter {
            update_window_dims: with_leading(0, &s.update_window_dims),
            inserted_window_dims: plus_one(&s.inserted_window_dims),
            input_batching_dims: plus_one(&s.input_batching_dims),
            scatter_dims_to_operand_dims: plus_one(&s.scatter_dims_to_operand_dims),
            ..s.clone()
        },
        Some(_) => Scatter {
            update_window_dims: plus_one(&s.update_window_dims),
            inserted_window_dims: plus_one(&s.inserted_window_dims),
            input_batching_dims: with_leading(0, &s.input_batching_dims),
            scatter_indices_batching_dims: with_leading(0, &s.scatter_indices_batching_dims),
            scatter_dims_to_operand_dims: plus_one(&s.scatter_dims_to_operand_dims),
            index_vector_dim: s.index_vector_dim + 1,
            ..s.clone()
        },
    };
    let o = bt.materialize(operand, 0)?;
    let i = match indices.bdim {
        Some(_) => bt.materialize(indices, 0)?,
        None => indices.v,
    };
    let u = bt.materialize(updates, 0)?;
    Ok(BVal::at(
        bt.push(Op::Scatter(Box::new(new)), &[o, i, u])?,
        0,
    ))
}

/// The starts as one index vector per example: `[B, r]`, batched at 0.
fn index_vectors(bt: &mut Batcher, starts: &[BVal]) -> R<BVal> {
    let mut columns = Vec::with_capacity(starts.len());
    for &s in starts {
        let v = bt.materialize(s, 0)?;
        let shape = Shape::new(vec![bt.size, 1]);
        columns.push(bt.push(Op::Reshape { shape }, &[v])?);
    }
    let v = match columns.as_slice() {
        [one] => *one,
        _ => bt.push(Op::Concatenate { axis: 1 }, &columns)?,
    };
    Ok(BVal::at(v, 0))
}

/// A zero start of the starts' dtype, for the batch dimension.
fn zero_start(bt: &mut Batcher, starts: &[BVal]) -> R {
    let dtype = match starts.first() {
        Some(s) => bt.ty(s.v)?.dtype,
        None => ferrax_ir::DType::I32,
    };
    bt.constant(Scalar::zero(dtype), Shape::scalar())
}

pub(super) fn dynamic_slice(bt: &mut Batcher, sizes: &[usize], args: &[BVal]) -> R<BVal> {
    let (x, starts) = (args[0], &args[1..]);
    if starts.iter().all(|s| s.bdim.is_none()) {
        let b = x.bdim.unwrap_or(0);
        let mut operands = vec![x.v];
        operands.extend(starts.iter().map(|s| s.v));
        operands.insert(1 + b, zero_start(bt, starts)?);
        let mut new_sizes = sizes.to_vec();
        new_sizes.insert(b, bt.size);
        let v = bt.push(Op::DynamicSlice { sizes: new_sizes }, &operands)?;
        return Ok(BVal::at(v, b));
    }
    let rank = sizes.len();
    let g = Gather {
        offset_dims: (0..rank).collect(),
        collapsed_slice_dims: Vec::new(),
        operand_batching_dims: Vec::new(),
        start_indices_batching_dims: Vec::new(),
        start_index_map: (0..rank).collect(),
        index_vector_dim: 0,
        slice_sizes: sizes.to_vec(),
        indices_are_sorted: false,
    };
    let indices = index_vectors(bt, starts)?;
    gather(bt, &g, x, indices)
}

pub(super) fn dynamic_update_slice(bt: &mut Batcher, args: &[BVal]) -> R<BVal> {
    let (x, update, starts) = (args[0], args[1], &args[2..]);
    if starts.iter().all(|s| s.bdim.is_none()) {
        let b = x.bdim.or(update.bdim).unwrap_or(0);
        let mut operands = vec![bt.materialize(x, b)?, bt.materialize(update, b)?];
        operands.extend(starts.iter().map(|s| s.v));
        operands.insert(2 + b, zero_start(bt, starts)?);
        let v = bt.push(Op::DynamicUpdateSlice, &operands)?;
        return Ok(BVal::at(v, b));
    }
    let (dims, window) = (bt.example_type(x)?, bt.example_type(update)?);
    let mut clamped = Vec::with_capacity(starts.len());
    for (k, &s) in starts.iter().enumerate() {
        let dtype = bt.ty(s.v)?.dtype;
        let lo = bt.scalar(dtype, 0.0)?;
        let top = dims.dims()[k].saturating_sub(window.dims()[k]);
        let hi = bt.scalar(dtype, top as f64)?;
        let v = bt.push(Op::Clamp, &[lo, s.v, hi])?;
        clamped.push(BVal { v, bdim: s.bdim });
    }
    let rank = dims.rank();
    let s = Scatter {
        combine: ScatterCombine::Replace,
        update_window_dims: (0..rank).collect(),
        inserted_window_dims: Vec::new(),
        input_batching_dims: Vec::new(),
        scatter_indices_batching_dims: Vec::new(),
        scatter_dims_to_operand_dims: (0..rank).collect(),
        index_vector_dim: 0,
        indices_are_sorted: true,
        unique_indices: true,
    };
    let indices = index_vectors(bt, &clamped)?;
    scatter(bt, &s, &[x, indices, update])
}

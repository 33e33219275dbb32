//! Indexing by values: gather, scatter, dynamic_slice, dynamic_update_slice. The checks
//! follow StableHLO's constraints, and each error names the dimension numbers and shapes at
//! fault.

use super::{arity, invalid};
use crate::{Gather, IndexMap, Scatter, ScatterCombine, TensorType, TypeError};

/// `dims` are distinct and each below `bound`; `what` names them in the error.
fn check_dims(
    op: &'static str,
    what: &str,
    dims: &[usize],
    bound: usize,
    of: &TensorType,
) -> Result<(), TypeError> {
    for (i, &d) in dims.iter().enumerate() {
        if d >= bound {
            return Err(invalid(
                op,
                format!("{what} {dims:?}: {d} is out of range for {of}"),
            ));
        }
        if dims[..i].contains(&d) {
            return Err(invalid(op, format!("{what} {dims:?}: {d} appears twice")));
        }
    }
    Ok(())
}

fn check_sorted(op: &'static str, what: &str, dims: &[usize]) -> Result<(), TypeError> {
    if dims.windows(2).any(|w| w[0] >= w[1]) {
        return Err(invalid(op, format!("{what} {dims:?} must be sorted")));
    }
    Ok(())
}

fn check_disjoint(
    op: &'static str,
    (a_name, a): (&str, &[usize]),
    (b_name, b): (&str, &[usize]),
) -> Result<(), TypeError> {
    if let Some(d) = a.iter().find(|d| b.contains(d)) {
        return Err(invalid(
            op,
            format!("dimension {d} is in both {a_name} {a:?} and {b_name} {b:?}"),
        ));
    }
    Ok(())
}

fn check_indices_dtype(op: &'static str, indices: &TensorType) -> Result<(), TypeError> {
    if !indices.dtype.is_int() {
        return Err(invalid(
            op,
            format!("indices must have an integer dtype, got {indices}"),
        ));
    }
    Ok(())
}

/// The checks gather and scatter share on their indices: the index vector dimension, the
/// length of an index vector against its operand-dimension map, and the batching dimensions
/// on both sides. Returns the batch sizes (the indices' shape without the index vector
/// dimension).
fn check_indices(
    op: &'static str,
    operand: &TensorType,
    indices: &TensorType,
    index_vector_dim: usize,
    (map_name, start_map): (&str, &[usize]),
    (operand_batching, indices_batching): (&[usize], &[usize]),
) -> Result<Vec<usize>, TypeError> {
    check_indices_dtype(op, indices)?;
    if index_vector_dim > indices.rank() {
        return Err(invalid(
            op,
            format!("index_vector_dim {index_vector_dim} is out of range for indices {indices}"),
        ));
    }
    let vector_len = indices.dims().get(index_vector_dim).copied().unwrap_or(1);
    if start_map.len() != vector_len {
        return Err(invalid(
            op,
            format!(
                "{map_name} {start_map:?} must name one operand dimension per index vector entry ({vector_len} in indices {indices} at dimension {index_vector_dim})"
            ),
        ));
    }
    check_dims(op, map_name, start_map, operand.rank(), operand)?;
    check_dims(
        op,
        "operand batching dims",
        operand_batching,
        operand.rank(),
        operand,
    )?;
    check_sorted(op, "operand batching dims", operand_batching)?;
    check_disjoint(
        op,
        (map_name, start_map),
        ("the operand batching dims", operand_batching),
    )?;
    check_dims(
        op,
        "indices batching dims",
        indices_batching,
        indices.rank(),
        indices,
    )?;
    if indices_batching.contains(&index_vector_dim) {
        return Err(invalid(
            op,
            format!("indices batching dims {indices_batching:?} contain index_vector_dim {index_vector_dim}"),
        ));
    }
    if operand_batching.len() != indices_batching.len() {
        return Err(invalid(
            op,
            format!("operand batching dims {operand_batching:?} and indices batching dims {indices_batching:?} must pair one to one"),
        ));
    }
    for (&o, &i) in operand_batching.iter().zip(indices_batching) {
        if operand.dims()[o] != indices.dims()[i] {
            return Err(invalid(
                op,
                format!("batching dimension {o} of {operand} and dimension {i} of indices {indices} differ in size"),
            ));
        }
    }
    Ok((0..indices.rank())
        .filter(|&d| d != index_vector_dim)
        .map(|d| indices.dims()[d])
        .collect())
}

pub(super) fn gather(g: &Gather, args: &[&TensorType]) -> Result<TensorType, TypeError> {
    const OP: &str = "gather";
    let [operand, indices] = arity::<2>(OP, args)?;
    let rank = operand.rank();
    let batch = check_indices(
        OP,
        operand,
        indices,
        g.index_vector_dim,
        ("start_index_map", &g.start_index_map),
        (&g.operand_batching_dims, &g.start_indices_batching_dims),
    )?;
    check_dims(
        OP,
        "collapsed slice dims",
        &g.collapsed_slice_dims,
        rank,
        operand,
    )?;
    check_sorted(OP, "collapsed slice dims", &g.collapsed_slice_dims)?;
    check_disjoint(
        OP,
        ("collapsed slice dims", &g.collapsed_slice_dims),
        ("operand batching dims", &g.operand_batching_dims),
    )?;
    if g.slice_sizes.len() != rank {
        return Err(invalid(
            OP,
            format!(
                "slice_sizes {:?} must have one entry per dimension of {operand}",
                g.slice_sizes
            ),
        ));
    }
    for (d, (&size, &dim)) in g.slice_sizes.iter().zip(operand.dims()).enumerate() {
        if size > dim {
            return Err(invalid(
                OP,
                format!("slice size {size} of dimension {d} exceeds {operand}"),
            ));
        }
        let dropped = g.collapsed_slice_dims.contains(&d) || g.operand_batching_dims.contains(&d);
        if dropped && size != 1 {
            return Err(invalid(
                OP,
                format!("dimension {d} is collapsed or batching, so its slice size must be 1, got {size}"),
            ));
        }
    }
    let map = IndexMap::of_gather(g, rank, 0);
    let window: Vec<usize> = map
        .window_to_operand
        .iter()
        .map(|&d| g.slice_sizes[d])
        .collect();
    if g.offset_dims.len() != window.len() {
        return Err(invalid(
            OP,
            format!(
                "offset dims {:?} must name one result dimension per slice dimension kept ({} of {operand})",
                g.offset_dims,
                window.len()
            ),
        ));
    }
    let result_rank = batch.len() + window.len();
    check_dims(OP, "offset dims", &g.offset_dims, result_rank, operand)?;
    check_sorted(OP, "offset dims", &g.offset_dims)?;
    let (mut b, mut w) = (batch.iter(), window.iter());
    let dims: Vec<usize> = (0..result_rank)
        .filter_map(|d| {
            if g.offset_dims.contains(&d) {
                w.next().copied()
            } else {
                b.next().copied()
            }
        })
        .collect();
    Ok(operand.with_shape(dims))
}

pub(super) fn scatter(s: &Scatter, args: &[&TensorType]) -> Result<TensorType, TypeError> {
    let op = s.combine.name();
    let [operand, indices, updates] = arity::<3>(op, args)?;
    let rank = operand.rank();
    if updates.dtype != operand.dtype {
        return Err(TypeError::Mismatch {
            op,
            lhs: operand.clone(),
            rhs: updates.clone(),
        });
    }
    let ordered = match s.combine {
        ScatterCombine::Replace | ScatterCombine::Add | ScatterCombine::Mul => false,
        ScatterCombine::Max | ScatterCombine::Min => true,
    };
    if ordered && operand.dtype.is_complex() {
        return Err(TypeError::DType {
            op,
            dtype: operand.dtype,
            expected: "an ordered type",
        });
    }
    let batch = check_indices(
        op,
        operand,
        indices,
        s.index_vector_dim,
        (
            "scatter_dims_to_operand_dims",
            &s.scatter_dims_to_operand_dims,
        ),
        (&s.input_batching_dims, &s.scatter_indices_batching_dims),
    )?;
    check_dims(
        op,
        "inserted window dims",
        &s.inserted_window_dims,
        rank,
        operand,
    )?;
    check_sorted(op, "inserted window dims", &s.inserted_window_dims)?;
    check_disjoint(
        op,
        ("inserted window dims", &s.inserted_window_dims),
        ("input batching dims", &s.input_batching_dims),
    )?;
    check_dims(
        op,
        "update window dims",
        &s.update_window_dims,
        updates.rank(),
        updates,
    )?;
    check_sorted(op, "update window dims", &s.update_window_dims)?;
    let map = IndexMap::of_scatter(s, rank, updates.rank());
    if map.window_dims.len() != map.window_to_operand.len() || map.batch_dims.len() != batch.len() {
        return Err(invalid(
            op,
            format!(
                "updates {updates} must have {} window dimensions (update window dims {:?}) and {} scatter dimensions (indices {indices})",
                map.window_to_operand.len(),
                s.update_window_dims,
                batch.len()
            ),
        ));
    }
    for (&u, &size) in map.batch_dims.iter().zip(&batch) {
        if updates.dims()[u] != size {
            return Err(invalid(
                op,
                format!("dimension {u} of updates {updates} must match the indices' batch size {size} (indices {indices})"),
            ));
        }
    }
    for (&u, &d) in map.window_dims.iter().zip(&map.window_to_operand) {
        if updates.dims()[u] > operand.dims()[d] {
            return Err(invalid(
                op,
                format!("window dimension {u} of updates {updates} is larger than dimension {d} of {operand}"),
            ));
        }
    }
    Ok(operand.clone())
}

/// The start indices of a dynamic slice or update: one integer scalar per dimension of `x`,
/// all of one dtype.
fn check_starts(op: &'static str, x: &TensorType, starts: &[&TensorType]) -> Result<(), TypeError> {
    if starts.len() != x.rank() {
        return Err(TypeError::Arity {
            op,
            expected: format!("{} start indices for {x}, so {}", x.rank(), x.rank() + 1),
            got: starts.len() + 1,
        });
    }
    for s in starts {
        check_indices_dtype(op, s)?;
        if s.rank() != 0 {
            return Err(invalid(
                op,
                format!("start indices must be integer scalars, got {s}"),
            ));
        }
        if s.dtype != starts[0].dtype {
            return Err(invalid(
                op,
                format!(
                    "start indices must share one dtype, got {} and {s}",
                    starts[0]
                ),
            ));
        }
    }
    Ok(())
}

pub(super) fn dynamic_slice(
    sizes: &[usize],
    args: &[&TensorType],
) -> Result<TensorType, TypeError> {
    const OP: &str = "dynamic_slice";
    let Some((x, starts)) = args.split_first() else {
        return Err(TypeError::Arity {
            op: OP,
            expected: "at least 1".into(),
            got: 0,
        });
    };
    check_starts(OP, x, starts)?;
    if sizes.len() != x.rank() || sizes.iter().zip(x.dims()).any(|(s, d)| s > d) {
        return Err(invalid(
            OP,
            format!("slice sizes {sizes:?} must have one entry per dimension of {x}, none larger than it"),
        ));
    }
    Ok(x.with_shape(sizes.to_vec()))
}

pub(super) fn dynamic_update_slice(args: &[&TensorType]) -> Result<TensorType, TypeError> {
    const OP: &str = "dynamic_update_slice";
    let [x, update, starts @ ..] = args else {
        return Err(TypeError::Arity {
            op: OP,
            expected: "at least 2".into(),
            got: args.len(),
        });
    };
    check_starts(OP, x, starts)?;
    let fits = update.dtype == x.dtype
        && update.rank() == x.rank()
        && update.dims().iter().zip(x.dims()).all(|(u, d)| u <= d);
    if !fits {
        return Err(invalid(
            OP,
            format!("the update {update} must have the dtype and rank of {x} and fit inside it"),
        ));
    }
    Ok((*x).clone())
}

//! How a kernel reads the program's values: broadcasts read in place, splat constants
//! inlined, and the values a kernel must store for the rest of the program. Fusion decides
//! with these what a kernel may hold; lowering builds the kernel's buffers from them.

use super::Access;
use ferrax_ir::{DType, Func, Gather, Op, Scalar, TensorType, ValueId};

/// How a kernel over `result`'s elements reads `operand` broadcast with `dims`: one value
/// for all (a scalar), element `i / n` (the operand fills the leading dimensions, like a
/// keep-dims row statistic), element `i % n` (it fills the trailing dimensions, like a bias), or
/// none of these.
pub fn broadcast_access(
    operand: &TensorType,
    result: &TensorType,
    dims: &[usize],
) -> Option<Access> {
    if operand.numel() == 1 {
        return Some(Access::Scalar);
    }
    // A kernel over no elements reads nothing; any access does (and none divides by zero).
    if result.numel() == 0 {
        return Some(Access::Each);
    }
    let kept: Vec<usize> = dims
        .iter()
        .zip(operand.dims())
        .filter(|(_, &size)| size != 1)
        .map(|(&d, _)| d)
        .collect();
    let (&first, &last) = (kept.first()?, kept.last()?);
    if kept.windows(2).any(|w| w[1] != w[0] + 1) {
        return None;
    }
    // Leading or trailing dimensions of size 1 do not change the flat index: such a
    // broadcast reads element `i`, and a value computed in the same kernel is reused.
    let rank = result.rank();
    let leading = result.dims()[..first].iter().product::<usize>() == 1;
    let trailing = result.dims()[last + 1..].iter().product::<usize>() == 1;
    match (first == 0 || leading, last + 1 == rank || trailing) {
        (true, true) => Some(Access::Each),
        (true, false) => Some(Access::Outer(result.dims()[last + 1..].iter().product())),
        (false, true) => Some(Access::Inner(result.dims()[first..].iter().product())),
        (false, false) => None,
    }
}

/// `(n, rows)` when `g` picks whole rows of `operand` (its leading dimension) by scalar
/// indices of `indices` (i32 or i64; a trailing index vector of length 1 counts as scalar)
/// and lays each row out after the indices' dimensions: a kernel over the result reads element
/// `i` of it at row `indices[i / n]`, column `i % n` ([`Access::Gather`]).
pub fn row_gather(
    operand: &TensorType,
    indices: &TensorType,
    g: &Gather,
) -> Option<(usize, usize)> {
    let (rank, batch) = (operand.rank(), indices.rank());
    if rank == 0 || g.slice_sizes.len() != rank {
        return None;
    }
    let scalar_indices = g.index_vector_dim == batch
        || (g.index_vector_dim + 1 == batch && indices.dims()[g.index_vector_dim] == 1);
    let batch = if g.index_vector_dim == batch {
        batch
    } else {
        batch - 1
    };
    let whole_rows = g.slice_sizes.first() == Some(&1) && g.slice_sizes[1..] == operand.dims()[1..];
    let ok = matches!(indices.dtype, DType::I32 | DType::I64)
        && scalar_indices
        && g.collapsed_slice_dims == [0]
        && g.start_index_map == [0]
        && g.operand_batching_dims.is_empty()
        && whole_rows
        && g.offset_dims.iter().copied().eq(batch..batch + rank - 1);
    let n: usize = operand.dims()[1..].iter().product();
    (ok && n > 0).then_some((n, operand.dims()[0]))
}

/// The splat value of `v` when it is a splat constant, or a broadcast or reshape of one.
pub fn splat_constant(func: &Func, mut v: ValueId) -> Option<Scalar> {
    loop {
        let ins = func.body.get(v.index().checked_sub(func.params.len())?)?;
        match &ins.op {
            Op::Constant(lit) if lit.is_splat() => return Some(lit.data.get(0)),
            Op::BroadcastInDim { .. } | Op::Reshape { .. } => v = *ins.args.first()?,
            _ => return None,
        }
    }
}

/// Where each value of a program is last read: found once per program, so that finding each
/// kernel's outputs costs the kernel's length, not the program's.
pub struct LastReads(Vec<usize>);

impl LastReads {
    pub fn of(func: &Func) -> LastReads {
        let mut last = vec![0; func.params.len() + func.body.len()];
        for (i, ins) in func.body.iter().enumerate() {
            for a in &ins.args {
                if let Some(l) = last.get_mut(a.index()) {
                    *l = i;
                }
            }
        }
        for o in &func.outputs {
            if let Some(l) = last.get_mut(o.index()) {
                *l = usize::MAX;
            }
        }
        LastReads(last)
    }

    /// The last instruction that reads `v` (`usize::MAX` if the program returns it, 0 if
    /// nothing reads it).
    pub fn last(&self, v: ValueId) -> usize {
        self.0.get(v.index()).copied().unwrap_or(0)
    }

    /// Whether `v` is read by an instruction at or after `end`, or returned.
    fn after(&self, v: ValueId, end: usize) -> bool {
        self.last(v) >= end
    }
}

/// The values of instructions `start..end` that are used after the kernel or returned, splat
/// constants aside: every kernel inlines those, and `fuse::partition` makes the ones needed as
/// arrays in steps of their own.
pub fn kernel_outputs(func: &Func, reads: &LastReads, start: usize, end: usize) -> Vec<ValueId> {
    (start..end)
        .map(|i| func.instr_value(i))
        .filter(|&v| reads.after(v, end) && splat_constant(func, v).is_none())
        .collect()
}

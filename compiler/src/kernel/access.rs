//! How a kernel reads the program's values: broadcasts read in place, splat constants
//! inlined, and the values a kernel must store for the rest of the program. Fusion decides
//! with these what a kernel may hold; lowering builds the kernel's buffers from them.

use super::Access;
use ferrax_ir::{Func, Op, Scalar, TensorType, ValueId};

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

/// The splat value of `v` when it is a splat constant, or a broadcast or reshape of one.
pub fn splat_constant(func: &Func, v: ValueId) -> Option<Scalar> {
    let ins = func.body.get(v.index().checked_sub(func.params.len())?)?;
    match &ins.op {
        Op::Constant(lit) if lit.is_splat() => Some(lit.data.get(0)),
        Op::BroadcastInDim { .. } | Op::Reshape { .. } => splat_constant(func, ins.args[0]),
        _ => None,
    }
}

/// The values of instructions `start..end` that are used after the kernel or returned, splat
/// constants aside: every kernel inlines those, and `fuse::partition` makes the ones needed as
/// arrays in steps of their own.
pub fn kernel_outputs(func: &Func, start: usize, end: usize) -> Vec<ValueId> {
    (start..end)
        .map(|i| func.instr_value(i))
        .filter(|&v| {
            splat_constant(func, v).is_none()
                && (func.outputs.contains(&v)
                    || func.body[end..].iter().any(|ins| ins.args.contains(&v)))
        })
        .collect()
}

//! Fusion: the program is cut into steps, each either one kernel (a run of elementwise ops over
//! one element count, compiled to a single loop) or one op left to the library path (the
//! reference interpreter for now). Values that live only inside a kernel never touch memory.
//!
//! This first partition is deliberately simple: a kernel is a maximal run of consecutive
//! fusible instructions with the same element count, so program order is kept as is.

use crate::kernel::Access;
use ferrax_ir::{DType, Func, Op, TensorType, UnaryOp, ValueId};

/// One step of a fused program.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// Instructions `start..end` of the body, fused into one kernel.
    Kernel { start: usize, end: usize },
    /// Instruction `index` of the body, run on its own.
    Op { index: usize },
}

/// What a backend's kernels handle: f32, f64 and bool always; f16 and bf16 (stored as such,
/// computed in f32) where `halves` is set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelTypes {
    pub halves: bool,
}

impl KernelTypes {
    /// The CPU code generator's set.
    pub const CPU: KernelTypes = KernelTypes { halves: false };
    /// The PTX renderer's set.
    pub const GPU: KernelTypes = KernelTypes { halves: true };

    pub fn float(self, d: DType) -> bool {
        matches!(d, DType::F32 | DType::F64)
            || (self.halves && matches!(d, DType::F16 | DType::BF16))
    }

    pub fn handles(self, d: DType) -> bool {
        self.float(d) || d == DType::Bool
    }
}

/// Whether instruction `i` can be computed element by element inside a kernel of `len` elements.
fn fusible(func: &Func, i: usize, types: KernelTypes) -> bool {
    let ins = &func.body[i];
    let types_ok = types.handles(ins.ty.dtype)
        && ins
            .args
            .iter()
            .filter_map(|&a| func.value_type(a))
            .all(|t| types.handles(t.dtype));
    let float_result = types.float(ins.ty.dtype);
    types_ok
        && match &ins.op {
            Op::Unary(UnaryOp::Not) => false,
            Op::Unary(_) | Op::Binary(_) => float_result,
            Op::Compare(_) => ins
                .args
                .iter()
                .filter_map(|&a| func.value_type(a))
                .all(|t| t.dtype != DType::Bool),
            Op::Select | Op::Clamp | Op::StopGradient => true,
            Op::Convert { to } => {
                let from = ins
                    .args
                    .first()
                    .and_then(|&a| func.value_type(a))
                    .map(|t| t.dtype);
                from.is_some_and(|f| types.float(f)) && types.float(*to)
            }
            Op::Constant(lit) => lit.is_splat(),
            // Broadcasts that are a scalar, a row or a column pattern are read in place.
            Op::BroadcastInDim { dims, .. } => ins
                .args
                .first()
                .and_then(|&a| func.value_type(a))
                .is_some_and(|t| broadcast_access(t, &ins.ty, dims).is_some()),
            _ => false,
        }
}

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
    let rank = result.rank();
    match (first == 0, last + 1 == rank) {
        (true, true) => Some(Access::Each),
        (true, false) => Some(Access::Outer(result.dims()[last + 1..].iter().product())),
        (false, true) => Some(Access::Inner(result.dims()[first..].iter().product())),
        (false, false) => None,
    }
}

/// The steps of `func`, in program order, for kernels of `types`.
pub fn partition(func: &Func, types: KernelTypes) -> Vec<Step> {
    let mut steps = Vec::new();
    let mut i = 0;
    while i < func.body.len() {
        if !fusible(func, i, types) {
            steps.push(Step::Op { index: i });
            i += 1;
            continue;
        }
        let len = func.body[i].ty.numel();
        let mut end = i + 1;
        while end < func.body.len() && fusible(func, end, types) && func.body[end].ty.numel() == len
        {
            end += 1;
        }
        // A kernel that only moves a constant or a scalar is not worth a launch.
        let computes = func.body[i..end]
            .iter()
            .any(|ins| !matches!(ins.op, Op::Constant(_) | Op::BroadcastInDim { .. }));
        if computes {
            steps.push(Step::Kernel { start: i, end });
        } else {
            steps.extend((i..end).map(|index| Step::Op { index }));
        }
        i = end;
    }
    steps
}

/// The values of instructions `start..end` that are used after the kernel or returned.
pub fn kernel_outputs(func: &Func, start: usize, end: usize) -> Vec<ValueId> {
    (start..end)
        .map(|i| func.instr_value(i))
        .filter(|&v| {
            func.outputs.contains(&v) || func.body[end..].iter().any(|ins| ins.args.contains(&v))
        })
        .collect()
}

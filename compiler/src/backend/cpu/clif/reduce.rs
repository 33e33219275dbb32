//! One step of a reduction, scalar or on vectors; row kernels fold their accumulators with it,
//! flat kernels their partial results.

use super::isel::lanes;
use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{types, InstBuilder, Value};
use cranelift_frontend::FunctionBuilder;
use ferrax_ir::ReduceOp;

/// `acc` combined with `x` by reduction `op`: Cranelift's max and min propagate NaNs and order
/// -0 below +0.
pub(super) fn reduce_step(b: &mut FunctionBuilder, op: ReduceOp, acc: Value, x: Value) -> Value {
    match op {
        ReduceOp::Max => b.ins().fmax(acc, x),
        ReduceOp::Min => b.ins().fmin(acc, x),
        ReduceOp::Sum => b.ins().fadd(acc, x),
        ReduceOp::Prod => b.ins().fmul(acc, x),
    }
}

/// A vector step of a max or min reduction in three instructions rather than the nine of
/// Cranelift's `fmax`/`fmin`: x86 `maxps`/`minps` in both operand orders, whose results
/// differ only where an operand is NaN (one of them is that NaN) or on a tie of zeros, joined
/// by a bitwise or, which keeps a NaN a NaN and makes a tie -0. That is min's answer; max
/// corrects its zeros at the end with [`positive_zeros`]. Sums add, products multiply.
pub(super) fn vector_reduce_step(
    b: &mut FunctionBuilder,
    op: ReduceOp,
    acc: Value,
    x: Value,
) -> Value {
    // `x < y ? x : y` and `y < x ? x : y` lower to `minps x, y` and `maxps x, y`.
    let pick = |b: &mut FunctionBuilder, x: Value, y: Value, min: bool| {
        let lt = if min {
            b.ins().fcmp(FloatCC::LessThan, x, y)
        } else {
            b.ins().fcmp(FloatCC::LessThan, y, x)
        };
        let mask = b.ins().bitcast(types::F32X4, lanes(), lt);
        b.ins().bitselect(mask, x, y)
    };
    match op {
        ReduceOp::Max | ReduceOp::Min => {
            let min = op == ReduceOp::Min;
            let first = pick(b, x, acc, min);
            let second = pick(b, acc, x, min);
            b.ins().bor(first, second)
        }
        ReduceOp::Sum => b.ins().fadd(acc, x),
        ReduceOp::Prod => b.ins().fmul(acc, x),
    }
}

/// The lanes of a max accumulator from [`vector_reduce_step`] with each zero made +0 where
/// the lane saw a +0 (`seen`, the unsigned minimum of the lane's bit patterns, is 0).
pub(super) fn positive_zeros(b: &mut FunctionBuilder, acc: Value, seen: Value) -> Value {
    let zero = b.ins().f32const(0.0);
    let zeros = b.ins().splat(types::F32X4, zero);
    let is_zero = b.ins().fcmp(FloatCC::Equal, acc, zeros);
    let int_zero = b.ins().iconst(types::I32, 0);
    let int_zeros = b.ins().splat(types::I32X4, int_zero);
    let saw = b.ins().icmp(IntCC::Equal, seen, int_zeros);
    let both = b.ins().band(is_zero, saw);
    let mask = b.ins().bitcast(types::F32X4, lanes(), both);
    b.ins().bitselect(mask, zeros, acc)
}

//! Reductions: the reduced axes are moved last with one strided gather, then each contiguous
//! group is folded. Float sums and products accumulate in f64 and round once.

use super::movement::strided_gather;
use super::{floats, from_floats, from_ints, ints};
use crate::Array;
use ferrax_ir::{Elements, ReduceOp};

/// `x` with `axes` moved last, and the size of one reduction group.
fn grouped<T: Copy>(data: &[T], x: &Array, axes: &[usize]) -> (Vec<T>, usize) {
    let strides = x.shape().strides();
    let kept: Vec<usize> = (0..x.dims().len()).filter(|a| !axes.contains(a)).collect();
    let order: Vec<usize> = kept.iter().chain(axes).copied().collect();
    let dims: Vec<usize> = order.iter().map(|&a| x.dims()[a]).collect();
    let st: Vec<usize> = order.iter().map(|&a| strides[a]).collect();
    let group = axes.iter().map(|&a| x.dims()[a]).product();
    (strided_gather(data, 0, &dims, &st), group)
}

/// Folds each group of `group` consecutive values; an empty group gives `init`.
fn fold_groups<T: Copy>(
    v: &[T],
    group: usize,
    outputs: usize,
    init: T,
    f: impl Fn(T, T) -> T,
) -> Vec<T> {
    (0..outputs)
        .map(|o| {
            v[o * group..(o + 1) * group]
                .iter()
                .fold(init, |acc, &x| f(acc, x))
        })
        .collect()
}

fn nan_max(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.max(b)
    }
}

fn nan_min(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.min(b)
    }
}

pub(super) fn reduce(op: ReduceOp, x: &Array, axes: &[usize]) -> Elements {
    let d = x.dtype();
    let outputs: usize = (0..x.dims().len())
        .filter(|a| !axes.contains(a))
        .map(|a| x.dims()[a])
        .product();
    match x.elements() {
        Elements::Bool(v) => {
            let (g, n) = grouped(v, x, axes);
            let out = match op {
                ReduceOp::Max | ReduceOp::Sum => fold_groups(&g, n, outputs, false, |a, b| a | b),
                ReduceOp::Min | ReduceOp::Prod => fold_groups(&g, n, outputs, true, |a, b| a & b),
            };
            Elements::Bool(out)
        }
        e if d.is_float() => {
            let (g, n) = grouped(&floats(e), x, axes);
            let out = match op {
                ReduceOp::Sum => fold_groups(&g, n, outputs, 0.0, |a, b| a + b),
                ReduceOp::Prod => fold_groups(&g, n, outputs, 1.0, |a, b| a * b),
                ReduceOp::Max => fold_groups(&g, n, outputs, f64::NEG_INFINITY, nan_max),
                ReduceOp::Min => fold_groups(&g, n, outputs, f64::INFINITY, nan_min),
            };
            from_floats(out, d)
        }
        e => {
            let (g, n) = grouped(&ints(e), x, axes);
            let (lowest, highest) = match d {
                ferrax_ir::DType::I32 => (i32::MIN as i64, i32::MAX as i64),
                ferrax_ir::DType::U8 => (0, u8::MAX as i64),
                _ => (i64::MIN, i64::MAX),
            };
            let out = match op {
                ReduceOp::Sum => fold_groups(&g, n, outputs, 0, i64::wrapping_add),
                ReduceOp::Prod => fold_groups(&g, n, outputs, 1, i64::wrapping_mul),
                ReduceOp::Max => fold_groups(&g, n, outputs, lowest, i64::max),
                ReduceOp::Min => fold_groups(&g, n, outputs, highest, i64::min),
            };
            from_ints(out, d)
        }
    }
}

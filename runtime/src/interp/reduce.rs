//! Reductions. The reduced axes are moved last (without a copy when they already are), so
//! each result element folds one contiguous group. Float sums and products accumulate in f64
//! and round once to the dtype; sums are pairwise, so that f64 inputs stay accurate too.
//! Max and min propagate NaN. Integers wrap.

use super::movement::permuted;
use super::num::{fmax, fmin, Arith, Float, Int};
use super::undefined;
use crate::{Array, RuntimeError};
use ferrax_ir::{DType, Elements, ReduceOp};
use rayon::prelude::*;
use std::borrow::Cow;

/// `x`'s data with `axes` moved last, the number of groups and the size of each.
fn grouped<'a, T: Copy>(data: &'a [T], x: &Array, axes: &[usize]) -> (Cow<'a, [T]>, usize, usize) {
    let rank = x.dims().len();
    let kept: Vec<usize> = (0..rank).filter(|a| !axes.contains(a)).collect();
    let groups = kept.iter().map(|&a| x.dims()[a]).product();
    let size = axes.iter().map(|&a| x.dims()[a]).product();
    if kept.iter().enumerate().all(|(i, &a)| i == a) {
        return (Cow::Borrowed(data), groups, size);
    }
    let order: Vec<usize> = kept.iter().chain(axes).copied().collect();
    (Cow::Owned(permuted(data, x, &order)), groups, size)
}

/// Inputs below this many elements are reduced on one thread.
const PARALLEL_ELEMENTS: usize = 1 << 16;

/// `f` applied to each of the `groups` consecutive chunks of `size` elements; large inputs are
/// split by groups across the cores (rayon's pool; each group is folded the same way on any thread, so the
/// result does not depend on the split).
fn per_group<T: Sync, U: Send>(
    data: &[T],
    groups: usize,
    size: usize,
    f: impl Fn(&[T]) -> U + Sync,
) -> Vec<U> {
    let fold = |range: std::ops::Range<usize>| -> Vec<U> {
        range.map(|g| f(&data[g * size..(g + 1) * size])).collect()
    };
    let threads = rayon::current_num_threads();
    if groups < 2 || groups * size < PARALLEL_ELEMENTS || threads < 2 {
        return fold(0..groups);
    }
    let chunk = groups.div_ceil(threads);
    let parts: Vec<Vec<U>> = (0..threads)
        .into_par_iter()
        .map(|t| fold((t * chunk).min(groups)..((t + 1) * chunk).min(groups)))
        .collect();
    parts.into_iter().flatten().collect()
}

/// Each group folded from `init` with `f`, then `finish`ed.
fn fold_groups<T: Copy + Sync, A: Copy + Sync, U: Send>(
    data: &[T],
    groups: usize,
    size: usize,
    init: A,
    f: impl Fn(A, T) -> A + Sync,
    finish: impl Fn(A) -> U + Sync,
) -> Vec<U> {
    per_group(data, groups, size, |g| {
        finish(g.iter().fold(init, |acc, &x| f(acc, x)))
    })
}

/// Σ v in f64, pairwise above a small block size; blocks are summed in eight interleaved
/// partial sums (which the compiler keeps in SIMD registers).
fn pairwise_sum<T: Float>(v: &[T]) -> f64 {
    if v.len() <= 128 {
        let mut acc = [0.0f64; 8];
        let chunks = v.chunks_exact(8);
        let rest = chunks.remainder();
        for c in chunks {
            for (a, &x) in acc.iter_mut().zip(c) {
                *a += x.to_f64();
            }
        }
        let total =
            ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
        rest.iter().fold(total, |s, &x| s + x.to_f64())
    } else {
        let (a, b) = v.split_at(v.len() / 2);
        pairwise_sum(a) + pairwise_sum(b)
    }
}

fn reduce_float<T: Float>(op: ReduceOp, data: &[T], groups: usize, size: usize) -> Vec<T> {
    let inf = T::Arith::INFINITY;
    match op {
        ReduceOp::Sum => per_group(data, groups, size, |g| T::from_f64(pairwise_sum(g))),
        ReduceOp::Prod => fold_groups(data, groups, size, 1.0, |a, x| a * x.to_f64(), T::from_f64),
        ReduceOp::Max => fold_groups(
            data,
            groups,
            size,
            -inf,
            |a, x| fmax(a, x.to_arith()),
            T::from_arith,
        ),
        ReduceOp::Min => fold_groups(
            data,
            groups,
            size,
            inf,
            |a, x| fmin(a, x.to_arith()),
            T::from_arith,
        ),
    }
}

fn reduce_int<T: Int>(op: ReduceOp, data: &[T], groups: usize, size: usize) -> Vec<T> {
    let same = |a: T| a;
    match op {
        ReduceOp::Sum => fold_groups(data, groups, size, T::ZERO, T::add, same),
        ReduceOp::Prod => fold_groups(data, groups, size, T::ONE, T::mul, same),
        ReduceOp::Max => fold_groups(data, groups, size, T::MIN, Ord::max, same),
        ReduceOp::Min => fold_groups(data, groups, size, T::MAX, Ord::min, same),
    }
}

/// Max is "any", min is "all"; sums and products are not defined on bools.
fn reduce_bool(
    op: ReduceOp,
    data: &[bool],
    groups: usize,
    size: usize,
) -> Result<Vec<bool>, RuntimeError> {
    match op {
        ReduceOp::Max => Ok(per_group(data, groups, size, |g| g.contains(&true))),
        ReduceOp::Min => Ok(per_group(data, groups, size, |g| !g.contains(&false))),
        ReduceOp::Sum | ReduceOp::Prod => Err(undefined(op.name(), DType::Bool)),
    }
}

pub(super) fn reduce(op: ReduceOp, x: &Array, axes: &[usize]) -> Result<Elements, RuntimeError> {
    macro_rules! run {
        ($v:expr, $f:ident) => {{
            let (data, groups, size) = grouped($v, x, axes);
            $f(op, &data, groups, size)
        }};
    }
    Ok(match x.elements() {
        Elements::F32(v) => Elements::F32(run!(v, reduce_float)),
        Elements::F64(v) => Elements::F64(run!(v, reduce_float)),
        Elements::F16(v) => Elements::F16(run!(v, reduce_float)),
        Elements::BF16(v) => Elements::BF16(run!(v, reduce_float)),
        Elements::I32(v) => Elements::I32(run!(v, reduce_int)),
        Elements::I64(v) => Elements::I64(run!(v, reduce_int)),
        Elements::U8(v) => Elements::U8(run!(v, reduce_int)),
        Elements::Bool(v) => Elements::Bool(run!(v, reduce_bool)?),
    })
}

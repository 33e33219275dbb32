//! Reductions. The reduced axes are moved last (without a copy when they already are), so
//! each result element folds one contiguous group; reduced axes that lead (a bias gradient, a
//! batch mean) are read in place instead, each column folded in the same order and association,
//! so the results are the same bits. Float sums and products accumulate in f64 and round once
//! to the dtype; sums are pairwise, so that f64 inputs stay accurate too. Max and min
//! propagate NaN. Integers wrap.

use super::complex::{narrow, widen, Part};
use super::movement::permuted;
use super::num::{fmax, fmin, Arith, Float, Int};
use super::undefined;
use crate::{Array, RuntimeError};
use ferrax_ir::{Complex, DType, Elements, ReduceOp};
use rayon::prelude::*;
use std::borrow::Cow;

/// Where the inputs of each result element are.
#[derive(Clone, Copy)]
enum Groups {
    /// `groups` consecutive runs of `size` elements.
    Runs { groups: usize, size: usize },
    /// The `cols` columns of `rows` rows.
    Columns { rows: usize, cols: usize },
}

/// `x`'s data laid out for reducing `axes`: in place when they are the trailing axes (runs) or
/// the leading ones (columns), else with them moved last.
fn grouped<'a, T: Copy + Send + Sync>(
    data: &'a [T],
    x: &Array,
    axes: &[usize],
) -> (Cow<'a, [T]>, Groups) {
    let rank = x.dims().len();
    let kept: Vec<usize> = (0..rank).filter(|a| !axes.contains(a)).collect();
    let groups = kept.iter().map(|&a| x.dims()[a]).product();
    let size = axes.iter().map(|&a| x.dims()[a]).product();
    let runs = Groups::Runs { groups, size };
    if kept.iter().enumerate().all(|(i, &a)| i == a) {
        return (Cow::Borrowed(data), runs);
    }
    if axes.iter().enumerate().all(|(i, &a)| i == a) {
        let columns = Groups::Columns {
            rows: size,
            cols: groups,
        };
        return (Cow::Borrowed(data), columns);
    }
    let order: Vec<usize> = kept.iter().chain(axes).copied().collect();
    (Cow::Owned(permuted(data, x, &order)), runs)
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

/// Columns per block of a column reduction: whole cache lines, and accumulators that stay in
/// cache (a pairwise sum keeps eight per column).
const COLUMN_BLOCK: usize = 256;

/// `f(first, width)`, the results of columns `first..first + width`, over all `cols` columns
/// in blocks; large inputs are split by blocks across the cores (each column is folded the
/// same way on any thread).
fn per_column_block<U: Send>(
    rows: usize,
    cols: usize,
    f: impl Fn(usize, usize) -> Vec<U> + Sync,
) -> Vec<U> {
    let block = |b: usize| f(b * COLUMN_BLOCK, COLUMN_BLOCK.min(cols - b * COLUMN_BLOCK));
    let blocks = cols.div_ceil(COLUMN_BLOCK);
    let parts: Vec<Vec<U>> = if blocks < 2 || rows * cols < PARALLEL_ELEMENTS {
        (0..blocks).map(block).collect()
    } else {
        (0..blocks).into_par_iter().map(block).collect()
    };
    parts.into_iter().flatten().collect()
}

/// Each group folded from `init` with `f` in order, then `finish`ed.
fn fold_groups<T: Copy + Sync, A: Copy + Sync, U: Send>(
    data: &[T],
    groups: Groups,
    init: A,
    f: impl Fn(A, T) -> A + Sync,
    finish: impl Fn(A) -> U + Sync,
) -> Vec<U> {
    match groups {
        Groups::Runs { groups, size } => per_group(data, groups, size, |g| {
            finish(g.iter().fold(init, |acc, &x| f(acc, x)))
        }),
        Groups::Columns { rows, cols } => per_column_block(rows, cols, |first, width| {
            let mut acc = vec![init; width];
            for r in 0..rows {
                for (a, &x) in acc.iter_mut().zip(&data[r * cols + first..][..width]) {
                    *a = f(*a, x);
                }
            }
            acc.into_iter().map(&finish).collect()
        }),
    }
}

/// Each group's pairwise sum in f64.
fn sum_groups<T: Float>(data: &[T], groups: Groups) -> Vec<f64> {
    match groups {
        Groups::Runs { groups, size } => per_group(data, groups, size, pairwise_sum),
        Groups::Columns { rows, cols } => per_column_block(rows, cols, |first, width| {
            pairwise_columns(data, cols, (first, width), 0..rows)
        }),
    }
}

/// The float sum's identity (-0, so a sum of -0s is -0).
fn sum_identity() -> f64 {
    ReduceOp::Sum.identity(DType::F64).to_f64()
}

/// Σ v in f64, pairwise above a small block size; blocks are summed in eight interleaved
/// partial sums (which the compiler keeps in SIMD registers).
fn pairwise_sum<T: Float>(v: &[T]) -> f64 {
    if v.len() <= 128 {
        let mut acc = [sum_identity(); 8];
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

/// [`pairwise_sum`] of each of columns `first..first + width` over `rows` (of `cols` columns),
/// with the same association, so the same bits.
fn pairwise_columns<T: Float>(
    data: &[T],
    cols: usize,
    (first, width): (usize, usize),
    rows: std::ops::Range<usize>,
) -> Vec<f64> {
    let row = |r: usize| &data[r * cols + first..][..width];
    let len = rows.len();
    if len > 128 {
        let mid = rows.start + len / 2;
        let a = pairwise_columns(data, cols, (first, width), rows.start..mid);
        let b = pairwise_columns(data, cols, (first, width), mid..rows.end);
        return a.iter().zip(&b).map(|(x, y)| x + y).collect();
    }
    // Row `rows.start + i` of the whole chunks of eight goes to partial sum `i % 8`.
    let whole = rows.start + len / 8 * 8;
    let mut acc = vec![sum_identity(); 8 * width];
    for r in rows.start..whole {
        let part = &mut acc[(r - rows.start) % 8 * width..][..width];
        for (a, &x) in part.iter_mut().zip(row(r)) {
            *a += x.to_f64();
        }
    }
    let mut total: Vec<f64> = (0..width)
        .map(|c| {
            let a = |j: usize| acc[j * width + c];
            ((a(0) + a(1)) + (a(2) + a(3))) + ((a(4) + a(5)) + (a(6) + a(7)))
        })
        .collect();
    for r in whole..rows.end {
        for (t, &x) in total.iter_mut().zip(row(r)) {
            *t += x.to_f64();
        }
    }
    total
}

fn reduce_float<T: Float>(op: ReduceOp, data: &[T], groups: Groups) -> Vec<T> {
    let inf = T::Arith::INFINITY;
    match op {
        ReduceOp::Sum => sum_groups(data, groups)
            .into_iter()
            .map(T::from_f64)
            .collect(),
        ReduceOp::Prod => fold_groups(data, groups, 1.0, |a, x| a * x.to_f64(), T::from_f64),
        ReduceOp::Max => fold_groups(
            data,
            groups,
            -inf,
            |a, x| fmax(a, x.to_arith()),
            T::from_arith,
        ),
        ReduceOp::Min => fold_groups(
            data,
            groups,
            inf,
            |a, x| fmin(a, x.to_arith()),
            T::from_arith,
        ),
    }
}

fn reduce_int<T: Int>(op: ReduceOp, data: &[T], groups: Groups) -> Vec<T> {
    let same = |a: T| a;
    match op {
        ReduceOp::Sum => fold_groups(data, groups, T::ZERO, T::add, same),
        ReduceOp::Prod => fold_groups(data, groups, T::ONE, T::mul, same),
        ReduceOp::Max => fold_groups(data, groups, T::MIN, Ord::max, same),
        ReduceOp::Min => fold_groups(data, groups, T::MAX, Ord::min, same),
    }
}

/// Sums and products accumulate in c128 and round each part once; complex numbers are not
/// ordered.
fn reduce_complex<T: Part>(
    op: ReduceOp,
    data: &[Complex<T>],
    groups: Groups,
) -> Result<Elements, RuntimeError> {
    let values = match op {
        ReduceOp::Sum => {
            let zero = Complex::new(-0.0, -0.0);
            fold_groups(data, groups, zero, |a, x| a + widen(x), narrow)
        }
        ReduceOp::Prod => {
            let one = Complex::new(1.0, 0.0);
            fold_groups(data, groups, one, |a, x| a * widen(x), narrow)
        }
        ReduceOp::Max | ReduceOp::Min => {
            return Err(undefined(
                op.name(),
                T::DTYPE.complex_of().unwrap_or(T::DTYPE),
            ))
        }
    };
    Ok(T::complex_elements(values))
}

/// Max is "any", min is "all"; sums and products are not defined on bools.
fn reduce_bool(op: ReduceOp, data: &[bool], groups: Groups) -> Result<Vec<bool>, RuntimeError> {
    let same = |a: bool| a;
    match op {
        ReduceOp::Max => Ok(fold_groups(data, groups, false, |a, x| a | x, same)),
        ReduceOp::Min => Ok(fold_groups(data, groups, true, |a, x| a & x, same)),
        ReduceOp::Sum | ReduceOp::Prod => Err(undefined(op.name(), DType::Bool)),
    }
}

pub(super) fn reduce(op: ReduceOp, x: &Array, axes: &[usize]) -> Result<Elements, RuntimeError> {
    macro_rules! run {
        ($v:expr, $f:ident) => {{
            let (data, groups) = grouped($v, x, axes);
            $f(op, &data, groups)
        }};
    }
    Ok(match x.elements() {
        Elements::F32(v) => Elements::F32(run!(v, reduce_float)),
        Elements::F64(v) => Elements::F64(run!(v, reduce_float)),
        Elements::F16(v) => Elements::F16(run!(v, reduce_float)),
        Elements::BF16(v) => Elements::BF16(run!(v, reduce_float)),
        Elements::I32(v) => Elements::I32(run!(v, reduce_int)),
        Elements::I64(v) => Elements::I64(run!(v, reduce_int)),
        Elements::U32(v) => Elements::U32(run!(v, reduce_int)),
        Elements::U8(v) => Elements::U8(run!(v, reduce_int)),
        Elements::I8(v) => Elements::I8(run!(v, reduce_int)),
        Elements::I16(v) => Elements::I16(run!(v, reduce_int)),
        Elements::U16(v) => Elements::U16(run!(v, reduce_int)),
        Elements::U64(v) => Elements::U64(run!(v, reduce_int)),
        Elements::Bool(v) => Elements::Bool(run!(v, reduce_bool)?),
        Elements::C64(v) => run!(v, reduce_complex)?,
        Elements::C128(v) => run!(v, reduce_complex)?,
    })
}

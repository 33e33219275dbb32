//! Sorting along one dimension, as `jax.lax.sort` orders: each line (every position of the
//! other dimensions) is sorted stably on its own, floats by their value with -0 tied to +0
//! and every NaN tied with the others after +inf (lax canonicalises both before comparing),
//! integers by their dtype's order, `false < true`. Descending order is the reverse order
//! with ties still in their original order. Lines sort in parallel above a size, each the
//! same way on any thread.

use crate::{Array, RuntimeError};
use ferrax_ir::{map_elements, with_elements, Complex, Elements};
use half::{bf16, f16};
use rayon::prelude::*;
use std::cmp::Ordering;

/// The order `lax.sort` compares elements by.
trait SortOrder: Copy + Send + Sync {
    fn order(a: &Self, b: &Self) -> Ordering;
}

/// lax's canonical float for sorting: +0 for either zero, the positive quiet NaN for any NaN.
fn canonical(x: f64) -> f64 {
    if x == 0.0 {
        0.0
    } else if x.is_nan() {
        f64::NAN
    } else {
        x
    }
}

macro_rules! float_order {
    ($($t:ty => $wide:expr),*) => {$(
        impl SortOrder for $t {
            fn order(a: &Self, b: &Self) -> Ordering {
                let wide: fn($t) -> f64 = $wide;
                canonical(wide(*a)).total_cmp(&canonical(wide(*b)))
            }
        }
    )*};
}

float_order!(f32 => f64::from, f64 => |x| x, f16 => f64::from, bf16 => f64::from);

macro_rules! ord_order {
    ($($t:ty),*) => {$(
        impl SortOrder for $t {
            fn order(a: &Self, b: &Self) -> Ordering {
                a.cmp(b)
            }
        }
    )*};
}

ord_order!(i32, i64, u32, u8, i8, i16, u16, u64, bool);

/// Complex numbers sort lexicographically: by real part, then imaginary part (lax's order).
impl<T: SortOrder> SortOrder for Complex<T> {
    fn order(a: &Self, b: &Self) -> Ordering {
        T::order(&a.re, &b.re).then(T::order(&a.im, &b.im))
    }
}

/// Lines of at least this many elements in all are sorted across the cores.
const PARALLEL_ELEMENTS: usize = 1 << 15;

/// The layout of `x` around `dimension`: (lines before, length of a line, stride of a line).
fn layout(x: &Array, dimension: usize) -> (usize, usize, usize) {
    let dims = x.dims();
    let outer = dims[..dimension].iter().product();
    let inner = dims[dimension + 1..].iter().product();
    (outer, dims[dimension], inner)
}

/// For each line, the stable order of its positions (line-major: line `l`'s `k`-th smallest
/// at `l * len + k`), lines numbered outer-major then inner.
fn line_orders<T: SortOrder>(
    data: &[T],
    (outer, len, inner): (usize, usize, usize),
    descending: bool,
) -> Vec<usize> {
    let lines = outer * inner;
    let mut orders = vec![0usize; lines * len];
    let sort_line = |line: usize, out: &mut [usize]| {
        let (o, i) = (line / inner.max(1), line % inner.max(1));
        let at = |k: usize| &data[(o * len + k) * inner + i];
        for (k, slot) in out.iter_mut().enumerate() {
            *slot = k;
        }
        if descending {
            out.sort_by(|&a, &b| T::order(at(b), at(a)));
        } else {
            out.sort_by(|&a, &b| T::order(at(a), at(b)));
        }
    };
    if len == 0 {
        return orders;
    }
    if data.len() >= PARALLEL_ELEMENTS {
        orders
            .par_chunks_mut(len)
            .enumerate()
            .for_each(|(line, out)| sort_line(line, out));
    } else {
        for (line, out) in orders.chunks_mut(len).enumerate() {
            sort_line(line, out);
        }
    }
    orders
}

/// `f(line order, position k)` placed at each element of the result, in `x`'s layout.
fn place<U: Copy + Default>(
    orders: &[usize],
    (outer, len, inner): (usize, usize, usize),
    f: impl Fn(usize, usize, usize) -> U,
) -> Vec<U> {
    let mut out = vec![U::default(); outer * len * inner];
    for o in 0..outer {
        for i in 0..inner {
            let line = o * inner + i;
            for k in 0..len {
                out[(o * len + k) * inner + i] = f(o, i, orders[line * len + k]);
            }
        }
    }
    out
}

fn sorted<T: SortOrder + Default>(
    data: &[T],
    shape: (usize, usize, usize),
    descending: bool,
) -> Vec<T> {
    let orders = line_orders(data, shape, descending);
    let (_, len, inner) = shape;
    place(&orders, shape, |o, i, k| data[(o * len + k) * inner + i])
}

fn argsorted<T: SortOrder>(data: &[T], shape: (usize, usize, usize), descending: bool) -> Vec<i32> {
    let orders = line_orders(data, shape, descending);
    // The shape rule keeps the sorted dimension within i32.
    place(&orders, shape, |_, _, k| k as i32)
}

/// `x` sorted along `dimension` (the shape rule has checked it is in range).
pub(super) fn sort(
    x: &Array,
    dimension: usize,
    descending: bool,
) -> Result<Elements, RuntimeError> {
    let shape = layout(x, dimension);
    Ok(map_elements!(x.elements(), v => sorted(v, shape, descending)))
}

/// The stable permutation sorting `x` along `dimension`, as `i32` positions along it.
pub(super) fn argsort(
    x: &Array,
    dimension: usize,
    descending: bool,
) -> Result<Elements, RuntimeError> {
    let shape = layout(x, dimension);
    Ok(Elements::I32(
        with_elements!(x.elements(), v => argsorted(v, shape, descending)),
    ))
}

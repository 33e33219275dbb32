//! `dot_general`. The operands are gathered into contiguous `[batch, m, k]` and
//! `[batch, k, n]` layouts (batch, free and contracting dimensions each flattened), converted
//! to the accumulator type on the way: f64 for floats (c128 for complex numbers), which round
//! once at the end, and the
//! dtype itself for integers, whose wrapping arithmetic equals i64's truncated. The product
//! is an i-k-j loop, blocked over k so that a slab of the right operand stays in cache; every
//! output element still sums its k terms in ascending order.

use super::complex::{narrow, widen, Part};
use super::movement::permuted_with;
use super::num::{Float, Int};
use super::undefined;
use crate::{Array, RuntimeError};
use ferrax_ir::{Complex, DType, DotDims, Elements};

/// Bytes of the right operand's rows kept hot per k block.
const BLOCK_BYTES: usize = 256 * 1024;

/// Sizes of the flattened dimension groups and the axis orders that produce the layouts.
struct Layout {
    batch: usize,
    m: usize,
    k: usize,
    n: usize,
    lhs_order: Vec<usize>,
    rhs_order: Vec<usize>,
}

fn layout(a: &Array, b: &Array, d: &DotDims) -> Layout {
    let free = |x: &Array, batch: &[usize], contract: &[usize]| -> Vec<usize> {
        (0..x.dims().len())
            .filter(|i| !batch.contains(i) && !contract.contains(i))
            .collect()
    };
    let size = |x: &Array, axes: &[usize]| axes.iter().map(|&i| x.dims()[i]).product::<usize>();
    let lhs_free = free(a, &d.lhs_batch, &d.lhs_contract);
    let rhs_free = free(b, &d.rhs_batch, &d.rhs_contract);
    let chain = |x: &[usize], y: &[usize], z: &[usize]| -> Vec<usize> {
        x.iter().chain(y).chain(z).copied().collect()
    };
    Layout {
        batch: size(a, &d.lhs_batch),
        m: size(a, &lhs_free),
        k: size(a, &d.lhs_contract),
        n: size(b, &rhs_free),
        lhs_order: chain(&d.lhs_batch, &lhs_free, &d.lhs_contract),
        rhs_order: chain(&d.rhs_batch, &d.rhs_contract, &rhs_free),
    }
}

/// `c[b, i, j] = Σ_p lhs[b, i, p] * rhs[b, p, j]` with `fma(c, x, y) = c + x * y`.
fn matmul<A: Copy>(
    lhs: &[A],
    rhs: &[A],
    l: &Layout,
    zero: A,
    fma: impl Fn(A, A, A) -> A,
) -> Vec<A> {
    let (m, k, n) = (l.m, l.k, l.n);
    let mut out = vec![zero; l.batch * m * n];
    if n == 0 {
        return out;
    }
    let kb = (BLOCK_BYTES / (n * size_of::<A>())).max(1);
    for b in 0..l.batch {
        let a = &lhs[b * m * k..(b + 1) * m * k];
        let w = &rhs[b * k * n..(b + 1) * k * n];
        let c = &mut out[b * m * n..(b + 1) * m * n];
        for p0 in (0..k).step_by(kb) {
            let p1 = (p0 + kb).min(k);
            for (crow, arow) in c.chunks_exact_mut(n).zip(a.chunks_exact(k.max(1))) {
                for (p, &x) in (p0..p1).zip(&arow[p0..p1]) {
                    for (cj, &y) in crow.iter_mut().zip(&w[p * n..(p + 1) * n]) {
                        *cj = fma(*cj, x, y);
                    }
                }
            }
        }
    }
    out
}

fn dot_float<T: Float>(a: &[T], x: &Array, b: &[T], y: &Array, l: &Layout) -> Vec<T> {
    let lhs = permuted_with(a, x, &l.lhs_order, T::to_f64);
    let rhs = permuted_with(b, y, &l.rhs_order, T::to_f64);
    let out = matmul(&lhs, &rhs, l, 0.0, |c, p, q| c + p * q);
    out.into_iter().map(T::from_f64).collect()
}

/// Complex products accumulate in c128 and round each part once.
fn dot_complex<T: Part>(
    a: &[Complex<T>],
    x: &Array,
    b: &[Complex<T>],
    y: &Array,
    l: &Layout,
) -> Elements {
    let lhs = permuted_with(a, x, &l.lhs_order, widen);
    let rhs = permuted_with(b, y, &l.rhs_order, widen);
    let out = matmul(&lhs, &rhs, l, Complex::new(0.0, 0.0), |c, p, q| c + p * q);
    T::complex_elements(out.into_iter().map(narrow).collect())
}

fn dot_int<T: Int>(a: &[T], x: &Array, b: &[T], y: &Array, l: &Layout) -> Vec<T> {
    let lhs = permuted_with(a, x, &l.lhs_order, |v| v);
    let rhs = permuted_with(b, y, &l.rhs_order, |v| v);
    matmul(&lhs, &rhs, l, T::ZERO, |c, p, q| c.add(p.mul(q)))
}

pub(super) fn dot_general(x: &Array, y: &Array, d: &DotDims) -> Result<Elements, RuntimeError> {
    let l = layout(x, y, d);
    Ok(match x.elements() {
        Elements::F32(a) => Elements::F32(dot_float(a, x, y.as_slice()?, y, &l)),
        Elements::F64(a) => Elements::F64(dot_float(a, x, y.as_slice()?, y, &l)),
        Elements::F16(a) => Elements::F16(dot_float(a, x, y.as_slice()?, y, &l)),
        Elements::BF16(a) => Elements::BF16(dot_float(a, x, y.as_slice()?, y, &l)),
        Elements::I32(a) => Elements::I32(dot_int(a, x, y.as_slice()?, y, &l)),
        Elements::I64(a) => Elements::I64(dot_int(a, x, y.as_slice()?, y, &l)),
        Elements::U32(a) => Elements::U32(dot_int(a, x, y.as_slice()?, y, &l)),
        Elements::U8(a) => Elements::U8(dot_int(a, x, y.as_slice()?, y, &l)),
        Elements::I8(a) => Elements::I8(dot_int(a, x, y.as_slice()?, y, &l)),
        Elements::I16(a) => Elements::I16(dot_int(a, x, y.as_slice()?, y, &l)),
        Elements::U16(a) => Elements::U16(dot_int(a, x, y.as_slice()?, y, &l)),
        Elements::U64(a) => Elements::U64(dot_int(a, x, y.as_slice()?, y, &l)),
        Elements::C64(a) => dot_complex(a, x, y.as_slice()?, y, &l),
        Elements::C128(a) => dot_complex(a, x, y.as_slice()?, y, &l),
        Elements::Bool(_) => return Err(undefined("dot_general", DType::Bool)),
    })
}

//! `dot_general`: both operands are gathered into `[batch, free, contract]` / `[batch,
//! contract, free]` layouts, then multiplied with a cache-friendly i-k-j loop. Floats
//! accumulate in f64 and round once; integers wrap.

use super::movement::strided_gather;
use super::{floats, from_floats, from_ints, ints};
use crate::Array;
use ferrax_ir::{DotDims, Elements, TensorType};

/// Gathers `x` with its dimensions in `order`.
fn permuted<T: Copy>(data: &[T], x: &Array, order: &[usize]) -> Vec<T> {
    let strides = x.shape().strides();
    let dims: Vec<usize> = order.iter().map(|&a| x.dims()[a]).collect();
    let st: Vec<usize> = order.iter().map(|&a| strides[a]).collect();
    strided_gather(data, 0, &dims, &st)
}

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
    let lhs_free = free(a, &d.lhs_batch, &d.lhs_contract);
    let rhs_free = free(b, &d.rhs_batch, &d.rhs_contract);
    let size = |x: &Array, axes: &[usize]| axes.iter().map(|&i| x.dims()[i]).product::<usize>();
    Layout {
        batch: size(a, &d.lhs_batch),
        m: size(a, &lhs_free),
        k: size(a, &d.lhs_contract),
        n: size(b, &rhs_free),
        lhs_order: d
            .lhs_batch
            .iter()
            .chain(&lhs_free)
            .chain(&d.lhs_contract)
            .copied()
            .collect(),
        rhs_order: d
            .rhs_batch
            .iter()
            .chain(&d.rhs_contract)
            .chain(&rhs_free)
            .copied()
            .collect(),
    }
}

/// `c[b, i, j] = Σ_p a[b, i, p] * w[b, p, j]` with `T` as the accumulator.
fn matmul<T: Copy + Default>(
    a: &[T],
    w: &[T],
    l: &Layout,
    add: impl Fn(T, T) -> T,
    mul: impl Fn(T, T) -> T,
) -> Vec<T> {
    let (m, k, n) = (l.m, l.k, l.n);
    let mut c = vec![T::default(); l.batch * m * n];
    for b in 0..l.batch {
        for i in 0..m {
            let row = &mut c[(b * m + i) * n..(b * m + i + 1) * n];
            for p in 0..k {
                let av = a[(b * m + i) * k + p];
                let wrow = &w[(b * k + p) * n..(b * k + p + 1) * n];
                for (cj, &wv) in row.iter_mut().zip(wrow) {
                    *cj = add(*cj, mul(av, wv));
                }
            }
        }
    }
    c
}

pub(super) fn dot_general(a: &Array, b: &Array, d: &DotDims, ty: &TensorType) -> Elements {
    let l = layout(a, b, d);
    if ty.dtype.is_float() {
        let lhs = permuted(&floats(a.elements()), a, &l.lhs_order);
        let rhs = permuted(&floats(b.elements()), b, &l.rhs_order);
        from_floats(matmul(&lhs, &rhs, &l, |x, y| x + y, |x, y| x * y), ty.dtype)
    } else {
        let lhs = permuted(&ints(a.elements()), a, &l.lhs_order);
        let rhs = permuted(&ints(b.elements()), b, &l.rhs_order);
        from_ints(
            matmul(&lhs, &rhs, &l, i64::wrapping_add, i64::wrapping_mul),
            ty.dtype,
        )
    }
}

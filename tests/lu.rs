//! `lu` (LU factorization with partial pivoting, `lax.linalg.lu`) and what is built on it
//! (`solve`, `inv`, `det`, `slogdet`): factors that rebuild the permuted matrix in f32, f64
//! and c128, square, tall and wide, with batches, on the interpreter, the CPU backend and the
//! emulated GPU bit for bit; LAPACK's pivot choice on hand-factored matrices (ties, zero
//! columns, singular matrices); zero sizes; type errors; `vmap`; determinants against the
//! Leibniz sum; and Jacobi's formula for the determinant's gradient. Derivatives against
//! central differences are in `complex_autodiff.rs`, with the other linear algebra.
#![allow(clippy::unwrap_used, clippy::panic)]

mod common;

use common::numbers::{array, entries, shape_text, signed as values, typed, unit, widened, C64};
use common::run_on_every_backend as run;

use ferrax::ir::parse_func;
use ferrax::{grad, jit, vmap, Array, DType, Tensor};

/// The program returning all three parts of `a`'s factorization.
fn lu_program(dtype: &str, dims: &[usize]) -> String {
    let rank = dims.len();
    let (m, n) = (dims[rank - 2], dims[rank - 1]);
    let batch = &dims[..rank - 2];
    let with = |last: usize| {
        let mut d = batch.to_vec();
        d.push(last);
        shape_text("i32", &d)
    };
    let (a, pivots, permutation) = (shape_text(dtype, dims), with(m.min(n)), with(m));
    format!(
        "func @f(%0: {a}) -> ({a}, {pivots}, {permutation}) {{\n  %1 = lu %0 : {a}\n  %2 = lu_pivots %0 : {pivots}\n  %3 = lu_permutation %0 : {permutation}\n  return %1, %2, %3\n}}\n"
    )
}

fn rows(a: &Array) -> Vec<usize> {
    a.as_slice::<i32>()
        .unwrap()
        .iter()
        .map(|&r| usize::try_from(r).unwrap())
        .collect()
}

/// Every matrix's factors rebuild its rows in the permutation's order, within a few roundings
/// of the factors' size; the permutation is the pivots' swaps; and partial pivoting bounds
/// `l`'s entries (by 1, or √2 where complex pivots are chosen by `|re| + |im|`).
#[test]
fn factors_rebuild_the_permuted_matrix() {
    for dims in [
        vec![4, 4],
        vec![2, 5, 3],
        vec![3, 5],
        vec![1, 1],
        vec![2, 2, 7, 7],
    ] {
        let rank = dims.len();
        let (m, n) = (dims[rank - 2], dims[rank - 1]);
        let k = m.min(n);
        let count: usize = dims.iter().product();
        let batches = count / (m * n);
        for dtype in ["f64", "f32", "c128"] {
            let a: Vec<C64> = match dtype {
                "c128" => entries(count, 1, "c128"),
                _ => values(count, 1).into_iter().map(C64::from).collect(),
            };
            let input = typed(&dims, &a, dtype);
            let out = run(&lu_program(dtype, &dims), std::slice::from_ref(&input));
            let (a, factors) = (widened(&input), widened(&out[0]));
            let (pivots, permutation) = (rows(&out[1]), rows(&out[2]));
            let unit = unit(dtype);
            let bound = if dtype == "c128" { 2f64.sqrt() } else { 1.0 };
            for batch in 0..batches {
                let a = &a[batch * m * n..(batch + 1) * m * n];
                let f = &factors[batch * m * n..(batch + 1) * m * n];
                let mut order: Vec<usize> = (0..m).collect();
                for (j, &p) in pivots[batch * k..(batch + 1) * k].iter().enumerate() {
                    assert!(p >= j && p < m, "{dtype} {dims:?}: pivot {p} at step {j}");
                    order.swap(j, p);
                }
                assert_eq!(order, permutation[batch * m..(batch + 1) * m]);
                let scale = f.iter().map(|z| z.norm()).fold(1.0, f64::max);
                for i in 0..m {
                    for j in 0..n {
                        let l = |c: usize| match c.cmp(&i) {
                            std::cmp::Ordering::Less => f[i * n + c],
                            std::cmp::Ordering::Equal => C64::new(1.0, 0.0),
                            std::cmp::Ordering::Greater => C64::new(0.0, 0.0),
                        };
                        let rebuilt: C64 = (0..=i.min(j).min(k - 1))
                            .map(|c| l(c) * if c <= j { f[c * n + j] } else { C64::default() })
                            .sum();
                        let want = a[order[i] * n + j];
                        assert!(
                            (rebuilt - want).norm() <= 8.0 * k as f64 * unit * scale,
                            "{dtype} {dims:?} batch {batch} ({i}, {j}): {rebuilt} vs {want}"
                        );
                        if j < i && j < k {
                            assert!(
                                f[i * n + j].norm() <= bound,
                                "{dtype} {dims:?}: l({i}, {j})"
                            );
                        }
                    }
                }
            }
        }
    }
}

/// Matrices factored by hand: the first largest candidate is the pivot (ties keep the upper
/// row), a zero column scales nothing, and singular matrices factor without error.
#[test]
fn pivots_are_lapacks() {
    // (a, packed factors, pivots, permutation)
    type Case<'a> = (&'a [f64], &'a [f64], &'a [i32], &'a [i32]);
    let cases: [Case; 5] = [
        // [[2, 1], [4, 3]]: swap, l = 1/2, u22 = 1 − 3/2.
        (
            &[2.0, 1.0, 4.0, 3.0],
            &[4.0, 3.0, 0.5, -0.5],
            &[1, 1],
            &[1, 0],
        ),
        // A tie |1| = |−1| keeps row 0: l = −1, u22 = 3 + 2.
        (
            &[1.0, 2.0, -1.0, 3.0],
            &[1.0, 2.0, -1.0, 5.0],
            &[0, 1],
            &[0, 1],
        ),
        // A zero first column: no swap, no scaling.
        (
            &[0.0, 0.0, 0.0, 1.0],
            &[0.0, 0.0, 0.0, 1.0],
            &[0, 1],
            &[0, 1],
        ),
        // Rank one: u22 = 0.
        (
            &[1.0, 2.0, 2.0, 4.0],
            &[2.0, 4.0, 0.5, 0.0],
            &[1, 1],
            &[1, 0],
        ),
        // A NaN candidate is never larger: row 0's 1 stays the pivot.
        (
            &[1.0, 0.0, f64::NAN, 1.0],
            &[1.0, 0.0, f64::NAN, f64::NAN],
            &[0, 1],
            &[0, 1],
        ),
    ];
    for (a, factors, pivots, permutation) in cases {
        let out = run(&lu_program("f64", &[2, 2]), &[array(&[2, 2], a.to_vec())]);
        let got = out[0].as_slice::<f64>().unwrap();
        let same = got
            .iter()
            .zip(factors)
            .all(|(g, w)| g == w || (g.is_nan() && w.is_nan()));
        assert!(same, "{a:?}: {got:?}");
        assert_eq!(out[1].as_slice::<i32>().unwrap(), pivots, "{a:?}");
        assert_eq!(out[2].as_slice::<i32>().unwrap(), permutation, "{a:?}");
    }
    // 3 × 3: column 0's largest is row 2; after its elimination column 1's is row 2 again,
    // and the swap moves the multipliers with their rows.
    let a = [1.0, 2.0, 3.0, 2.0, 1.0, 6.0, 4.0, 2.0, 4.0];
    let out = run(&lu_program("f64", &[3, 3]), &[array(&[3, 3], a.to_vec())]);
    assert_eq!(
        out[0].as_slice::<f64>().unwrap(),
        &[4.0, 2.0, 4.0, 0.25, 1.5, 2.0, 0.5, 0.0, 4.0]
    );
    assert_eq!(out[1].as_slice::<i32>().unwrap(), &[2, 2, 2]);
    assert_eq!(out[2].as_slice::<i32>().unwrap(), &[2, 0, 1]);
}

/// Zero-size matrices and batches: empty factors and pivots, identity permutations.
#[test]
fn zero_sizes() {
    for (dims, permutation) in [
        (vec![0, 0], vec![]),
        (vec![3, 0], vec![0, 1, 2]),
        (vec![0, 3], vec![]),
        (vec![2, 2, 0], vec![0, 1, 0, 1]),
        (vec![0, 2, 2], vec![]),
    ] {
        let text = lu_program("f32", &dims);
        let func = parse_func(&text).unwrap();
        let out = run(&text, &[Array::zeros(DType::F32, dims.clone())]);
        for (k, ty) in func.outputs.iter().enumerate() {
            assert_eq!(
                Some(out[k].ty()),
                func.value_type(*ty),
                "{dims:?} result {k}"
            );
        }
        assert_eq!(out[2].as_slice::<i32>().unwrap(), permutation, "{dims:?}");
    }
    let empty = Tensor::from_vec([0, 0], Vec::<f64>::new());
    assert_eq!(empty.det().to_vec::<f64>().unwrap(), [1.0]);
    let (sign, log) = empty.slogdet();
    assert_eq!(sign.to_vec::<f64>().unwrap(), [1.0]);
    assert_eq!(log.to_vec::<f64>().unwrap(), [0.0]);
    assert_eq!(empty.inv().shape(), &[0, 0]);
    let none = Tensor::from_vec([0, 3, 3], Vec::<f32>::new());
    assert_eq!(none.det().shape(), &[0]);
}

/// Ill-typed factorizations and solves are errors naming why, and the caller's line.
#[test]
fn type_errors_name_the_problem() {
    for (a, result, why) in [
        ("i32[2,2]", "i32[2,2]", "floating-point or complex"),
        ("f32[4]", "f32[4]", "matrix"),
        ("f32[2,3]", "f32[3,2]", "f32[2,3]"),
    ] {
        let text = format!(
            "func @f(%0: {a}) -> ({result}) {{\n  %1 = lu %0 : {result}\n  return %1\n}}\n"
        );
        let e = parse_func(&text).unwrap_err().to_string();
        assert!(e.contains(why), "{a}: {e}");
    }
    let wide = Tensor::from_vec([2, 3], vec![1.0f32; 6]);
    for e in [
        wide.det().to_array().unwrap_err(),
        wide.inv().to_array().unwrap_err(),
        wide.solve(&Tensor::from_vec([2], vec![1.0f32; 2]))
            .to_array()
            .unwrap_err(),
    ] {
        let e = e.to_string();
        assert!(e.contains("square") && e.contains("lu.rs"), "{e}");
    }
    let a = Tensor::from_vec([2, 2], vec![1.0f32; 4]);
    let e = a
        .solve(&Tensor::from_vec([1, 2, 1], vec![1.0f32; 2]))
        .to_array()
        .unwrap_err()
        .to_string();
    assert!(e.contains("rank") && e.contains("lu.rs"), "{e}");
}

/// The determinant by the Leibniz sum over permutations, in c128.
fn leibniz(a: &[C64], m: usize) -> C64 {
    let mut total = C64::default();
    let mut order: Vec<usize> = (0..m).collect();
    // Heap's algorithm, iteratively; each swap flips the sign.
    let mut sign = 1.0;
    let mut c = vec![0; m];
    let term = |order: &[usize]| -> C64 { (0..m).map(|i| a[i * m + order[i]]).product() };
    total += term(&order) * sign;
    let mut i = 0;
    while i < m {
        if c[i] < i {
            let j = if i % 2 == 0 { 0 } else { c[i] };
            order.swap(j, i);
            sign = -sign;
            total += term(&order) * sign;
            c[i] += 1;
            i = 0;
        } else {
            c[i] = 0;
            i += 1;
        }
    }
    total
}

/// Determinants against the Leibniz sum (real and complex, batched), exact ones, the sign of
/// row swaps, singular matrices, and `slogdet` beyond `det`'s range.
#[test]
fn determinants() {
    let m = 4;
    let real = values(3 * m * m, 5);
    let a = Tensor::from_vec([3, m, m], real.clone());
    let got = a.det().to_vec::<f64>().unwrap();
    let (sign, log) = a.slogdet();
    let (sign, log) = (sign.to_vec::<f64>().unwrap(), log.to_vec::<f64>().unwrap());
    for batch in 0..3 {
        let want = leibniz(
            &real[batch * m * m..(batch + 1) * m * m]
                .iter()
                .map(|&x| C64::new(x, 0.0))
                .collect::<Vec<_>>(),
            m,
        )
        .re;
        assert!(
            (got[batch] - want).abs() <= 1e-14,
            "{} vs {want}",
            got[batch]
        );
        assert_eq!(sign[batch], want.signum());
        assert!((log[batch] - want.abs().ln()).abs() <= 1e-13 * want.abs().ln().abs().max(1.0));
    }
    let z = entries(m * m, 7, "c128");
    let a = Tensor::from(array(&[m, m], z.clone()));
    let got = a.det().to_vec::<C64>().unwrap()[0];
    let want = leibniz(&z, m);
    assert!((got - want).norm() <= 1e-14, "{got} vs {want}");
    let (sign, log) = a.slogdet();
    assert_eq!(log.dtype(), DType::F64);
    let sign = sign.to_vec::<C64>().unwrap()[0];
    let log = log.to_vec::<f64>().unwrap()[0];
    assert!((sign - want / want.norm()).norm() <= 1e-15, "{sign}");
    assert!((log - want.norm().ln()).abs() <= 1e-14, "{log}");

    let exact =
        |m: usize, v: Vec<f64>| Tensor::from_vec([m, m], v).det().to_vec::<f64>().unwrap()[0];
    assert_eq!(exact(2, vec![2.0, 1.0, 4.0, 3.0]), 2.0);
    assert_eq!(exact(2, vec![0.0, 1.0, 1.0, 0.0]), -1.0);
    // A 3-cycle is an even permutation.
    assert_eq!(
        exact(3, vec![0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0]),
        1.0
    );
    assert_eq!(exact(2, vec![1.0, 2.0, 2.0, 4.0]), 0.0);
    let (sign, log) = Tensor::from_vec([2, 2], vec![1.0, 2.0, 2.0, 4.0]).slogdet();
    assert_eq!(sign.to_vec::<f64>().unwrap(), [0.0]);
    assert_eq!(log.to_vec::<f64>().unwrap(), [f64::NEG_INFINITY]);

    // 100·I of size 50: the determinant 1e100 overflows f32, its log does not.
    let big = Tensor::from_vec(
        [50, 50],
        (0..2500)
            .map(|i| if i % 51 == 0 { 100.0f32 } else { 0.0 })
            .collect(),
    );
    assert_eq!(big.det().to_vec::<f32>().unwrap(), [f32::INFINITY]);
    let (sign, log) = big.slogdet();
    assert_eq!(sign.to_vec::<f32>().unwrap(), [1.0]);
    let log = log.to_vec::<f32>().unwrap()[0];
    assert!((f64::from(log) - 50.0 * 100f64.ln()).abs() <= 1e-3, "{log}");
}

/// `solve` and `inv` against their residuals, with matrix and vector right-hand sides and a
/// batch; `jit` on the CPU backend gives the interpreter's bits.
#[test]
fn solves_and_inverses() {
    let m = 5;
    let a = Tensor::from_vec([2, m, m], values(2 * m * m, 11));
    let b = Tensor::from_vec([2, m, 3], values(2 * m * 3, 12));
    let x = a.solve(&b);
    let residual = (&a.matmul(&x) - &b).abs().max(..).to_vec::<f64>().unwrap()[0];
    let size = x.abs().max(..).to_vec::<f64>().unwrap()[0];
    assert!(
        residual <= 64.0 * f64::EPSILON * size.max(1.0),
        "{residual}"
    );
    let jitted = jit(|(a, b): (Tensor, Tensor)| a.solve(&b))
        .call((a.clone(), b.clone()))
        .unwrap();
    assert_eq!(
        jitted.to_vec::<f64>().unwrap(),
        x.to_vec::<f64>().unwrap(),
        "jit on the CPU"
    );

    let one = a.slice(&[0, 0, 0], &[1, m, m]).reshape([m, m]);
    let v = Tensor::from_vec([m], values(m, 13));
    let x = one.solve(&v);
    assert_eq!(x.shape(), &[m]);
    let residual = (&one.matmul(&x.reshape([m, 1])).reshape([m]) - &v)
        .abs()
        .max(..)
        .to_vec::<f64>()
        .unwrap()[0];
    assert!(residual <= 1e-13, "{residual}");

    let z = Tensor::from(array(&[m, m], entries(m * m, 14, "c128")));
    let product = z.matmul(&z.inv()).to_vec::<C64>().unwrap();
    for (k, p) in product.iter().enumerate() {
        let want = if k % (m + 1) == 0 { 1.0 } else { 0.0 };
        assert!((p - C64::new(want, 0.0)).norm() <= 1e-13, "({k}): {p}");
    }
    // An exact inverse: [[2, 1], [4, 3]]⁻¹ = [[1.5, −0.5], [−2, 1]].
    let inverse = Tensor::from_vec([2, 2], vec![2.0, 1.0, 4.0, 3.0]).inv();
    assert_eq!(inverse.to_vec::<f64>().unwrap(), [1.5, -0.5, -2.0, 1.0]);
}

/// `vmap` over a batch of matrices gives each example's factors, and each solve.
#[test]
fn batched_factorizations_factor_each_example() {
    let m = 4;
    let stack = Tensor::from_vec([3, m, m], values(3 * m * m, 21));
    let b = Tensor::from_vec([m, 2], values(m * 2, 22));
    let each = |k: usize| stack.slice(&[k, 0, 0], &[k + 1, m, m]).reshape([m, m]);
    let (factors, pivots, permutation) = vmap(|a: Tensor| a.lu())(stack.clone());
    let solved = vmap(|a: Tensor| a.solve(&b))(stack.clone());
    for k in 0..3 {
        let (f, p, q) = each(k).lu();
        let slice = |t: &Tensor| {
            let mut start = vec![0; t.ndim()];
            let mut limit = t.shape().to_vec();
            start[0] = k;
            limit[0] = k + 1;
            t.slice(&start, &limit)
                .reshape(&t.shape()[1..])
                .to_array()
                .unwrap()
                .elements()
                .clone()
        };
        assert_eq!(slice(&factors), f.to_array().unwrap().elements().clone());
        assert_eq!(slice(&pivots), p.to_array().unwrap().elements().clone());
        assert_eq!(
            slice(&permutation),
            q.to_array().unwrap().elements().clone()
        );
        assert_eq!(
            slice(&solved),
            each(k).solve(&b).to_array().unwrap().elements().clone()
        );
    }
}

/// Jacobi's formula: the gradient of `det` is `det(a)·a⁻ᵀ`, of `slogdet`'s log `a⁻ᵀ`.
#[test]
fn determinant_gradients_follow_jacobi() {
    let m = 4;
    let a = Tensor::from_vec([m, m], values(m * m, 31));
    let transposed_inverse = a.inv().transpose([1, 0]).to_vec::<f64>().unwrap();
    let det = a.det().to_vec::<f64>().unwrap()[0];
    let g = grad(|a: Tensor| a.det())(a.clone())
        .to_vec::<f64>()
        .unwrap();
    let g_log = grad(|a: Tensor| a.slogdet().1)(a.clone())
        .to_vec::<f64>()
        .unwrap();
    for k in 0..m * m {
        let want = det * transposed_inverse[k];
        assert!(
            (g[k] - want).abs() <= 1e-13,
            "det'[{k}]: {} vs {want}",
            g[k]
        );
        let want = transposed_inverse[k];
        assert!(
            (g_log[k] - want).abs() <= 1e-13,
            "log'[{k}]: {} vs {want}",
            g_log[k]
        );
    }
}

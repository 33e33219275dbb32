//! `svd` (singular value decomposition, `lax.linalg.svd`): factors that rebuild the matrix,
//! orthonormal singular vectors (the full ones completed), descending non-negative values and
//! the phase convention, in f32, f64 and c128, square, tall, wide and rank-deficient, with
//! batches, on the interpreter, the CPU backend and the emulated GPU bit for bit; values of
//! matrices known by hand; zero sizes; NaN; `vmap`; what is built on it (`pinv`,
//! `matrix_rank`, `cond`, the spectral and nuclear norms); errors. Derivatives against central
//! differences are in `complex_autodiff.rs`.
#![allow(clippy::unwrap_used, clippy::panic)]

mod common;

use common::numbers::{array, entries, shape_text, signed as values, typed, unit, widened, C64};
use common::run_on_every_backend as run;

use ferrax::{grad, vmap, Array, DType, Tensor};

/// The dims of `u`, `s` and `vh` of a `[.., m, n]` matrix.
fn factor_dims(dims: &[usize], full: bool) -> [Vec<usize>; 3] {
    let rank = dims.len();
    let (m, n) = (dims[rank - 2], dims[rank - 1]);
    let k = m.min(n);
    let with = |tail: &[usize]| {
        let mut d = dims[..rank - 2].to_vec();
        d.extend(tail);
        d
    };
    match full {
        true => [with(&[m, m]), with(&[k]), with(&[n, n])],
        false => [with(&[m, k]), with(&[k]), with(&[k, n])],
    }
}

fn svd_program(dtype: &str, dims: &[usize], full: bool) -> String {
    let [u, s, vh] = factor_dims(dims, full);
    let real = match dtype {
        "c128" => "f64",
        "c64" => "f32",
        other => other,
    };
    let (a, u, s, vh) = (
        shape_text(dtype, dims),
        shape_text(dtype, &u),
        shape_text(real, &s),
        shape_text(dtype, &vh),
    );
    let flag = if full { ", full_matrices=1" } else { "" };
    format!(
        "func @f(%0: {a}) -> ({u}, {s}, {vh}) {{\n  %1 = svd_u %0{flag} : {u}\n  %2 = svd_values %0 : {s}\n  %3 = svd_vh %0{flag} : {vh}\n  return %1, %2, %3\n}}\n"
    )
}

/// Checks one matrix's factors: `u·diag(s)·vh = a`, `uᴴu = I`, `vh·vhᴴ = I`, `s` descending
/// and non-negative, each of the first `k` rows of `vh` with its largest entry real and
/// positive.
fn check_factors(
    what: &str,
    a: &[C64],
    u: &[C64],
    s: &[C64],
    vh: &[C64],
    dims: (usize, usize, usize, usize),
    unit: f64,
) {
    let (m, n, uc, vr) = dims;
    let k = m.min(n);
    let scale = a.iter().map(|x| x.norm()).fold(1.0, f64::max);
    for i in 0..m {
        for j in 0..n {
            let rebuilt: C64 = (0..k).map(|c| u[i * uc + c] * s[c] * vh[c * n + j]).sum();
            let err = (rebuilt - a[i * n + j]).norm();
            assert!(err <= 32.0 * unit * scale, "{what} ({i}, {j}): {err}");
        }
    }
    for c in 0..uc {
        for d in 0..uc {
            let dot: C64 = (0..m).map(|i| u[i * uc + c].conj() * u[i * uc + d]).sum();
            let want = if c == d { 1.0 } else { 0.0 };
            assert!(
                (dot - want).norm() <= 32.0 * unit,
                "{what}: uᴴu({c}, {d}) = {dot}"
            );
        }
    }
    for r in 0..vr {
        for q in 0..vr {
            let dot: C64 = (0..n).map(|j| vh[r * n + j] * vh[q * n + j].conj()).sum();
            let want = if r == q { 1.0 } else { 0.0 };
            assert!(
                (dot - want).norm() <= 32.0 * unit,
                "{what}: vh·vhᴴ({r}, {q}) = {dot}"
            );
        }
    }
    for c in 0..k {
        assert_eq!(s[c].im, 0.0);
        assert!(s[c].re >= 0.0, "{what}: s[{c}] = {}", s[c]);
        if c > 0 {
            assert!(s[c].re <= s[c - 1].re, "{what}: s not descending: {s:?}");
        }
        let row = &vh[c * n..(c + 1) * n];
        let mut largest = 0;
        for j in 1..n {
            if row[j].norm() > row[largest].norm() {
                largest = j;
            }
        }
        assert!(
            row[largest].im == 0.0 && row[largest].re > 0.0,
            "{what}: vh row {c}'s largest entry {}",
            row[largest]
        );
    }
}

#[test]
fn factors_rebuild_the_matrix() {
    for dims in [
        vec![4, 4],
        vec![5, 3],
        vec![3, 5],
        vec![2, 4, 3],
        vec![1, 1],
        vec![7, 6],
        vec![3, 40],
    ] {
        let rank = dims.len();
        let (m, n) = (dims[rank - 2], dims[rank - 1]);
        let k = m.min(n);
        let count: usize = dims.iter().product();
        let batches = count / (m * n);
        for dtype in ["f64", "f32", "c128"] {
            let a = entries(count, 1, dtype);
            let input = typed(&dims, &a, dtype);
            let a = widened(&input);
            let unit = unit(dtype);
            for full in [false, true] {
                let out = run(
                    &svd_program(dtype, &dims, full),
                    std::slice::from_ref(&input),
                );
                let (u, s, vh) = (widened(&out[0]), widened(&out[1]), widened(&out[2]));
                let (uc, vr) = if full { (m, n) } else { (k, k) };
                for b in 0..batches {
                    check_factors(
                        &format!("{dtype} {dims:?} full={full} batch {b}"),
                        &a[b * m * n..(b + 1) * m * n],
                        &u[b * m * uc..(b + 1) * m * uc],
                        &s[b * k..(b + 1) * k],
                        &vh[b * vr * n..(b + 1) * vr * n],
                        (m, n, uc, vr),
                        unit,
                    );
                }
            }
        }
    }
}

/// Rank-deficient matrices (repeated and zero columns, a zero matrix): zero singular values,
/// and singular vectors still orthonormal, completed where the matrix gives none.
#[test]
fn rank_deficient_matrices() {
    let cases: [(usize, usize, Vec<f64>); 3] = [
        (4, 3, vec![1., 2., 1., 3., -1., 3., 0., 4., 0., 2., 2., 2.]),
        (3, 4, vec![1., 0., 2., 0., 2., 0., 4., 0., -1., 0., -2., 0.]),
        (3, 3, vec![0.0; 9]),
    ];
    for (m, n, a) in cases {
        let k = m.min(n);
        let input = array(&[m, n], a.clone());
        let a: Vec<C64> = a.iter().map(|&x| C64::new(x, 0.0)).collect();
        for full in [false, true] {
            let out = run(
                &svd_program("f64", &[m, n], full),
                std::slice::from_ref(&input),
            );
            let (u, s, vh) = (widened(&out[0]), widened(&out[1]), widened(&out[2]));
            let (uc, vr) = if full { (m, n) } else { (k, k) };
            let what = format!("[{m}, {n}] full={full}");
            check_factors(&what, &a, &u, &s, &vh, (m, n, uc, vr), f64::EPSILON);
            assert!(s[k - 1].re <= 1e-14, "{what}: {s:?}");
        }
    }
}

/// Values of matrices known by hand: a diagonal matrix's are its entries' magnitudes, sorted;
/// `[[3, 0], [4, 5]]`'s are `√45` and `√5`; the vectors of a diagonal matrix are signed unit
/// vectors.
#[test]
fn known_values() {
    let out = run(
        &svd_program("f64", &[3, 3], false),
        &[array(
            &[3, 3],
            vec![3.0, 0.0, 0.0, 0.0, -5.0, 0.0, 0.0, 0.0, 1.0],
        )],
    );
    assert_eq!(out[1].as_slice::<f64>().unwrap(), &[5.0, 3.0, 1.0]);
    assert_eq!(
        out[0].as_slice::<f64>().unwrap(),
        &[0.0, 1.0, 0.0, -1.0, 0.0, 0.0, 0.0, 0.0, 1.0]
    );
    assert_eq!(
        out[2].as_slice::<f64>().unwrap(),
        &[0.0, 1.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0]
    );
    let out = run(
        &svd_program("f32", &[2, 2], false),
        &[array(&[2, 2], vec![3.0f32, 0.0, 4.0, 5.0])],
    );
    let s = out[1].as_slice::<f32>().unwrap();
    assert_eq!(s, &[45f64.sqrt() as f32, 5f64.sqrt() as f32]);
}

/// Zero-size matrices: no values, the full vectors the identity.
#[test]
fn zero_sizes() {
    for (dims, full, u_want, vh_want) in [
        (
            vec![0, 3],
            true,
            vec![],
            vec![1.0f32, 0., 0., 0., 1., 0., 0., 0., 1.],
        ),
        (
            vec![3, 0],
            true,
            vec![1.0f32, 0., 0., 0., 1., 0., 0., 0., 1.],
            vec![],
        ),
        (vec![3, 0], false, vec![], vec![]),
        (
            vec![2, 2, 0],
            true,
            vec![1.0, 0., 0., 1., 1., 0., 0., 1.],
            vec![],
        ),
    ] {
        let out = run(
            &svd_program("f32", &dims, full),
            &[Array::zeros(DType::F32, dims.clone())],
        );
        let [u, s, vh] = factor_dims(&dims, full);
        assert_eq!(out[0].dims(), u.as_slice());
        assert_eq!(out[1].dims(), s.as_slice());
        assert_eq!(out[2].dims(), vh.as_slice());
        assert_eq!(
            out[0].as_slice::<f32>().unwrap(),
            u_want.as_slice(),
            "{dims:?}"
        );
        assert_eq!(
            out[2].as_slice::<f32>().unwrap(),
            vh_want.as_slice(),
            "{dims:?}"
        );
    }
}

/// A value that is not finite makes that matrix's results NaN, and only that matrix's.
#[test]
fn non_finite_values_give_nan() {
    let mut a = values(8, 3);
    a[5] = f64::INFINITY;
    let out = run(
        &svd_program("f64", &[2, 2, 2], false),
        &[array(&[2, 2, 2], a)],
    );
    let s = out[1].as_slice::<f64>().unwrap();
    assert!(s[..2].iter().all(|x| x.is_finite()), "{s:?}");
    assert!(s[2..].iter().all(|x| x.is_nan()), "{s:?}");
    let u = out[0].as_slice::<f64>().unwrap();
    assert!(u[4..].iter().all(|x| x.is_nan()), "{u:?}");
}

/// `vmap` decomposes each example as alone; `jnp.linalg`'s functions on it.
#[test]
fn batches_and_what_is_built_on_it() {
    let stack = Tensor::from_vec([3, 4, 3], values(36, 5));
    let (u, s, vh) = vmap(|a: Tensor| a.svd(false))(stack.clone());
    for k in 0..3 {
        let one = stack.slice(&[k, 0, 0], &[k + 1, 4, 3]).reshape([4, 3]);
        let (uk, sk, vk) = one.svd(false);
        let slice = |t: &Tensor, tail: &[usize]| {
            let mut start = vec![k];
            start.extend(tail.iter().map(|_| 0));
            let mut limit = vec![k + 1];
            limit.extend(tail);
            t.slice(&start, &limit).to_vec::<f64>().unwrap()
        };
        assert_eq!(slice(&u, &[4, 3]), uk.to_vec::<f64>().unwrap());
        assert_eq!(slice(&s, &[3]), sk.to_vec::<f64>().unwrap());
        assert_eq!(slice(&vh, &[3, 3]), vk.to_vec::<f64>().unwrap());
    }

    // The Moore–Penrose conditions, for a full-rank tall, a wide and a rank-one matrix.
    let rank_one: Vec<f64> = (0..12)
        .map(|i| ((i / 4) + 1) as f64 * ((i % 4) as f64 - 1.5))
        .collect();
    for (dims, a) in [
        ([5, 3], values(15, 8)),
        ([2, 4], values(8, 9)),
        ([3, 4], rank_one),
    ] {
        let a = Tensor::from_vec(dims, a);
        let p = a.pinv();
        assert_eq!(p.shape(), &[dims[1], dims[0]]);
        let close = |x: &Tensor, y: &Tensor, what: &str| {
            let (x, y) = (x.to_vec::<f64>().unwrap(), y.to_vec::<f64>().unwrap());
            for (a, b) in x.iter().zip(&y) {
                assert!((a - b).abs() <= 1e-12, "{dims:?} {what}: {a} vs {b}");
            }
        };
        close(&a.matmul(&p).matmul(&a), &a, "a·p·a");
        close(&p.matmul(&a).matmul(&p), &p, "p·a·p");
        close(&a.matmul(&p).t(), &a.matmul(&p), "(a·p)ᵀ");
        close(&p.matmul(&a).t(), &p.matmul(&a), "(p·a)ᵀ");
    }

    let ranks = Tensor::from_vec(
        [3, 3, 3],
        [
            vec![1.0, 2.0, 3.0, 2.0, 4.0, 6.0, -1.0, -2.0, -3.0],
            vec![1.0, 0.0, 1.0, 0.0, 1.0, 1.0, 1.0, 1.0, 2.0],
            vec![2.0, 0.0, 0.0, 0.0, 3.0, 0.0, 0.0, 0.0, 4.0],
        ]
        .concat(),
    );
    assert_eq!(ranks.matrix_rank().to_vec::<i32>().unwrap(), [1, 2, 3]);
    let diagonal = Tensor::from_vec([3, 3], vec![4.0, 0.0, 0.0, 0.0, -0.5, 0.0, 0.0, 0.0, 2.0]);
    assert_eq!(diagonal.cond().to_vec::<f64>().unwrap(), [8.0]);
    assert_eq!(diagonal.spectral_norm().to_vec::<f64>().unwrap(), [4.0]);
    assert_eq!(diagonal.nuclear_norm().to_vec::<f64>().unwrap(), [6.5]);
    let empty = Tensor::from_vec([0, 3], Vec::<f64>::new());
    assert_eq!(empty.spectral_norm().to_vec::<f64>().unwrap(), [0.0]);
    assert_eq!(empty.matrix_rank().to_vec::<i32>().unwrap(), [0]);
}

/// A vector has no SVD; the full vectors of a non-square matrix have no derivative, as in
/// JAX.
#[test]
fn errors() {
    let v = Tensor::from_vec([3], values(3, 10));
    let e = v.svd_values().to_array().unwrap_err().to_string();
    assert!(
        e.contains("svd_values") && e.contains("tests/svd.rs"),
        "{e}"
    );
    let e = v.pinv().to_array().unwrap_err().to_string();
    assert!(e.contains("pinv: a must be a matrix"), "{e}");
    let tall = Tensor::from_vec([3, 2], values(6, 11));
    let e = grad(|a: Tensor| a.svd(true).0.sum(..))(tall)
        .to_array()
        .unwrap_err()
        .to_string();
    assert!(e.contains("full singular vectors"), "{e}");
}

/// `lstsq`: an overdetermined system's residual is orthogonal to `a`'s columns (the normal
/// equations), an underdetermined one's solution is `pinv(a)·b` (the least-norm one), the
/// residuals are the columns' squared errors, the rank counts the kept values, a vector `b`
/// gives a vector `x` and one residual; bad shapes are errors.
#[test]
fn least_squares() {
    let close = |x: &[f64], y: &[f64], tol: f64, what: &str| {
        assert_eq!(x.len(), y.len(), "{what}");
        for (a, b) in x.iter().zip(y) {
            assert!((a - b).abs() <= tol, "{what}: {a} vs {b}");
        }
    };
    let a = Tensor::from_vec([6, 3], values(18, 20));
    let b = Tensor::from_vec([6, 2], values(12, 21));
    let (x, resid, rank, s) = a.lstsq(&b, None);
    assert_eq!(x.shape(), &[3, 2]);
    let error = &b - &a.matmul(&x);
    let normal = a.t().matmul(&error).to_vec::<f64>().unwrap();
    close(&normal, &[0.0; 6], 1e-14, "aᵀ(b − a·x)");
    let squares = (&error * &error).sum(0).to_vec::<f64>().unwrap();
    close(
        &resid.to_vec::<f64>().unwrap(),
        &squares,
        1e-15,
        "residuals",
    );
    assert_eq!(rank.to_vec::<i32>().unwrap(), [3]);
    assert_eq!(
        s.to_vec::<f64>().unwrap(),
        a.svd_values().to_vec::<f64>().unwrap()
    );

    let wide = Tensor::from_vec([2, 4], values(8, 22));
    let rhs = Tensor::from_vec([2], values(2, 23));
    let (x, resid, rank, _) = wide.lstsq(&rhs, None);
    assert_eq!(x.shape(), &[4]);
    assert_eq!(resid.shape(), &[1]);
    assert_eq!(rank.to_vec::<i32>().unwrap(), [2]);
    let least_norm = wide.pinv().matmul(&rhs.expand_dims(-1)).squeeze(-1);
    close(
        &x.to_vec::<f64>().unwrap(),
        &least_norm.to_vec::<f64>().unwrap(),
        1e-14,
        "least-norm solution",
    );
    close(&resid.to_vec::<f64>().unwrap(), &[0.0], 1e-28, "exact fit");

    // A rank-one matrix: one value kept, by the default cutoff and by a cutoff of a half.
    let rank_one = Tensor::from_vec([3, 2], vec![1.0, 2.0, 2.0, 4.0, -1.0, -2.0]);
    let ones = Tensor::from_vec([3], vec![1.0, 1.0, 1.0]);
    assert_eq!(rank_one.lstsq(&ones, None).2.to_vec::<i32>().unwrap(), [1]);
    assert_eq!(
        rank_one.lstsq(&ones, Some(0.5)).2.to_vec::<i32>().unwrap(),
        [1]
    );

    let e = Tensor::from_vec([2, 2, 2], values(8, 24))
        .lstsq(&ones, None)
        .0
        .to_array()
        .unwrap_err()
        .to_string();
    assert!(e.contains("lstsq: a must be a matrix"), "{e}");
    let e = a.lstsq(&ones, None).0.to_array().unwrap_err().to_string();
    assert!(e.contains("with the rows of a"), "{e}");
}

//! `qr` (Householder QR factorization, `lax.linalg.qr`): factors that rebuild the matrix with
//! orthonormal `q` and upper triangular `r` in f32, f64 and c128, square, tall and wide, full
//! and reduced, with batches, on the interpreter, the CPU backend and the emulated GPU bit for
//! bit; LAPACK's signs on small matrices; zero sizes; `vmap`; the derivative's unsupported
//! shapes; and `nn::initializers::orthogonal` built on it. Derivatives against central
//! differences are in `complex_autodiff.rs`.
#![allow(clippy::unwrap_used, clippy::panic)]

mod common;

use common::numbers::{array, entries, shape_text, signed as values, typed, unit, widened, C64};
use common::run_on_every_backend as run;

use ferrax::nn::initializers;
use ferrax::random;
use ferrax::{grad, vmap, Array, DType, Tensor};

/// The dims of `q` and `r` of a `[.., m, n]` matrix.
fn factor_dims(dims: &[usize], full: bool) -> (Vec<usize>, Vec<usize>) {
    let rank = dims.len();
    let (m, n) = (dims[rank - 2], dims[rank - 1]);
    let k = m.min(n);
    let with = |r: usize, c: usize| {
        let mut d = dims[..rank - 2].to_vec();
        d.extend([r, c]);
        d
    };
    match full {
        true => (with(m, m), with(m, n)),
        false => (with(m, k), with(k, n)),
    }
}

fn qr_program(dtype: &str, dims: &[usize], full: bool) -> String {
    let (q, r) = factor_dims(dims, full);
    let (a, q, r) = (
        shape_text(dtype, dims),
        shape_text(dtype, &q),
        shape_text(dtype, &r),
    );
    let flag = if full { ", full_matrices=1" } else { "" };
    format!(
        "func @f(%0: {a}) -> ({q}, {r}) {{\n  %1 = qr_q %0{flag} : {q}\n  %2 = qr_r %0{flag} : {r}\n  return %1, %2\n}}\n"
    )
}

/// Every matrix's `q·r` is the matrix and `qᴴ·q` the identity within a few roundings, `r` is
/// exactly zero below the diagonal with a real diagonal, and `r₀₀` has the sign opposite
/// `a₀₀`'s real part (LAPACK's reflection; a single row reflects nothing).
#[test]
fn factors_rebuild_the_matrix() {
    for dims in [
        vec![4, 4],
        vec![5, 3],
        vec![3, 5],
        vec![2, 4, 3],
        vec![1, 1],
    ] {
        let rank = dims.len();
        let (m, n) = (dims[rank - 2], dims[rank - 1]);
        let count: usize = dims.iter().product();
        let batches = count / (m * n);
        for dtype in ["f64", "f32", "c128"] {
            let a = entries(count, 1, dtype);
            let input = typed(&dims, &a, dtype);
            let a = widened(&input);
            let unit = unit(dtype);
            for full in [false, true] {
                let out = run(
                    &qr_program(dtype, &dims, full),
                    std::slice::from_ref(&input),
                );
                let (q, r) = (widened(&out[0]), widened(&out[1]));
                let (qd, rd) = factor_dims(&dims, full);
                let (qc, rr) = (qd[rank - 1], rd[rank - 2]);
                let what = format!("{dtype} {dims:?} full={full}");
                for batch in 0..batches {
                    let q = &q[batch * m * qc..(batch + 1) * m * qc];
                    let r = &r[batch * rr * n..(batch + 1) * rr * n];
                    let a = &a[batch * m * n..(batch + 1) * m * n];
                    for i in 0..m {
                        for j in 0..n {
                            let rebuilt: C64 =
                                (0..qc.min(rr)).map(|c| q[i * qc + c] * r[c * n + j]).sum();
                            let err = (rebuilt - a[i * n + j]).norm();
                            assert!(err <= 16.0 * unit, "{what} ({i}, {j}): {err}");
                        }
                    }
                    for c in 0..qc {
                        for d in 0..qc {
                            let dot: C64 =
                                (0..m).map(|i| q[i * qc + c].conj() * q[i * qc + d]).sum();
                            let want = if c == d { 1.0 } else { 0.0 };
                            assert!(
                                (dot - want).norm() <= 16.0 * unit,
                                "{what}: qᴴq({c}, {d}) = {dot}"
                            );
                        }
                    }
                    for i in 0..rr {
                        for j in 0..n {
                            if i > j {
                                assert_eq!(r[i * n + j], C64::default(), "{what}: r({i}, {j})");
                            }
                            if i == j {
                                assert_eq!(r[i * n + j].im, 0.0, "{what}: r({i}, {i}) is real");
                            }
                        }
                    }
                    if m > 1 {
                        assert!(
                            r[0].re * a[0].re < 0.0,
                            "{what}: r₀₀ {} for a₀₀ {}",
                            r[0],
                            a[0]
                        );
                    }
                }
            }
        }
    }
}

/// Small matrices factored by hand: `[3, 4]ᵀ` reflects onto `−5`, a diagonal matrix needs no
/// reflection (whatever its signs), and the full `q` completes the basis.
#[test]
fn lapacks_reflections() {
    let out = run(
        &qr_program("f64", &[2, 1], true),
        &[array(&[2, 1], vec![3.0, 4.0])],
    );
    let q = out[0].as_slice::<f64>().unwrap();
    for (got, want) in q.iter().zip([-0.6, -0.8, -0.8, 0.6]) {
        assert!((got - want).abs() <= 2.0 * f64::EPSILON, "{q:?}");
    }
    assert_eq!(out[1].as_slice::<f64>().unwrap(), &[-5.0, 0.0]);
    let out = run(
        &qr_program("f64", &[2, 2], false),
        &[array(&[2, 2], vec![-2.0, 0.0, 0.0, 3.0])],
    );
    assert_eq!(out[0].as_slice::<f64>().unwrap(), &[1.0, 0.0, 0.0, 1.0]);
    assert_eq!(out[1].as_slice::<f64>().unwrap(), &[-2.0, 0.0, 0.0, 3.0]);
}

/// Zero-size matrices: `q` is the identity's columns, `r` zeros.
#[test]
fn zero_sizes() {
    for (dims, full, q_want) in [
        (vec![0, 3], true, vec![]),
        (
            vec![3, 0],
            true,
            vec![1.0f32, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0],
        ),
        (vec![3, 0], false, vec![]),
        (
            vec![2, 2, 0],
            true,
            vec![1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0],
        ),
    ] {
        let out = run(
            &qr_program("f32", &dims, full),
            &[Array::zeros(DType::F32, dims.clone())],
        );
        let (q, r) = factor_dims(&dims, full);
        assert_eq!(out[0].dims(), q.as_slice());
        assert_eq!(out[1].dims(), r.as_slice());
        assert_eq!(
            out[0].as_slice::<f32>().unwrap(),
            q_want.as_slice(),
            "{dims:?}"
        );
        assert!(out[1].as_slice::<f32>().unwrap().iter().all(|&x| x == 0.0));
    }
}

/// `vmap` factors each example; the derivative of a wide matrix's factors is an error, as
/// in JAX.
#[test]
fn batched_factors_and_unsupported_derivatives() {
    let stack = Tensor::from_vec([3, 4, 3], values(36, 5));
    let (q, r) = vmap(|a: Tensor| a.qr(false))(stack.clone());
    for k in 0..3 {
        let one = stack.slice(&[k, 0, 0], &[k + 1, 4, 3]).reshape([4, 3]);
        let (qk, rk) = one.qr(false);
        let slice = |t: &Tensor, rows: usize, cols: usize| {
            t.slice(&[k, 0, 0], &[k + 1, rows, cols])
                .reshape([rows, cols])
                .to_vec::<f64>()
                .unwrap()
        };
        assert_eq!(slice(&q, 4, 3), qk.to_vec::<f64>().unwrap());
        assert_eq!(slice(&r, 3, 3), rk.to_vec::<f64>().unwrap());
    }
    let wide = Tensor::from_vec([2, 3], values(6, 6));
    let e = grad(|a: Tensor| a.qr(false).1.sum(..))(wide)
        .to_array()
        .unwrap_err()
        .to_string();
    assert!(e.contains("QR") && e.contains("m >= n"), "{e}");
    let tall = Tensor::from_vec([3, 2], values(6, 7));
    let e = grad(|a: Tensor| a.qr(true).0.sum(..))(tall)
        .to_array()
        .unwrap_err()
        .to_string();
    assert!(e.contains("square"), "{e}");
}

/// `orthogonal`: orthonormal columns (more rows) or rows (more columns) times the scale; the
/// draw is `q` of the normal matrix JAX draws with the same key, signed so that `qᵀ·a` has a
/// positive diagonal (and is upper triangular); higher ranks put the columns on the last axis.
#[test]
fn orthogonal_initializer() {
    let key = random::key(7);
    for (shape, scale) in [([6usize, 4usize], 1.0), ([3, 5], 2.0)] {
        let w = initializers::orthogonal(scale).init(&key, shape, DType::F32);
        let w64 = w.astype(DType::F64);
        let gram = match shape[0] >= shape[1] {
            true => w64.t().matmul(&w64),
            false => w64.matmul(&w64.t()),
        };
        let size = shape[0].min(shape[1]);
        let gram = gram.to_vec::<f64>().unwrap();
        for (i, g) in gram.iter().enumerate() {
            let want = if i % (size + 1) == 0 {
                scale * scale
            } else {
                0.0
            };
            assert!((g - want).abs() <= 1e-5, "{shape:?}: gram[{i}] = {g}");
        }
        let tall = [shape[0].max(shape[1]), size];
        let a = random::normal(&key, tall.to_vec(), DType::F32).astype(DType::F64);
        let q = if shape[0] >= shape[1] { w64 } else { w64.t() };
        let projected = (q.t().matmul(&a) * (1.0 / scale)).to_vec::<f64>().unwrap();
        for i in 0..size {
            for j in 0..size {
                let p = projected[i * size + j];
                match i.cmp(&j) {
                    std::cmp::Ordering::Equal => assert!(p > 0.0, "{shape:?}: ({i}, {i}) = {p}"),
                    std::cmp::Ordering::Greater => {
                        assert!(p.abs() <= 1e-5, "{shape:?}: ({i}, {j}) = {p}")
                    }
                    std::cmp::Ordering::Less => {}
                }
            }
        }
    }
    let w = initializers::orthogonal(1.0).init(&key, [2, 3, 4], DType::F32);
    let w = w.reshape([6, 4]).astype(DType::F64);
    let gram = w.t().matmul(&w).to_vec::<f64>().unwrap();
    for (i, g) in gram.iter().enumerate() {
        let want = if i % 5 == 0 { 1.0 } else { 0.0 };
        assert!((g - want).abs() <= 1e-5, "[2, 3, 4]: gram[{i}] = {g}");
    }
    let again = initializers::orthogonal(1.0).init(&key, [2, 3, 4], DType::F32);
    assert_eq!(
        again
            .reshape([6, 4])
            .astype(DType::F64)
            .to_vec::<f64>()
            .unwrap(),
        w.to_vec::<f64>().unwrap()
    );
    let e = initializers::orthogonal(1.0)
        .init(&key, [4], DType::F32)
        .to_array()
        .unwrap_err()
        .to_string();
    assert!(e.contains("rank >= 2"), "{e}");
}

/// `geqrf` and `householder_product` (`lax.linalg`'s compact QR): the packed matrix holds `r`
/// on and above the diagonal, and multiplying out its reflections gives `q` bit for bit, on
/// every backend; a product of fewer reflections than columns is the product written out
/// (`I − τ·v·vᴴ` each) in the test; zero sizes; `vmap`; errors.
#[test]
fn compact_factorization() {
    for (dtype, dims, seed) in [
        ("f64", vec![5, 3], 41),
        ("f32", vec![4, 4], 42),
        ("c128", vec![2, 4, 3], 43),
        ("f64", vec![3, 5], 44),
    ] {
        let rank = dims.len();
        let (m, n) = (dims[rank - 2], dims[rank - 1]);
        let k = m.min(n);
        let count: usize = dims.iter().product();
        let a = typed(&dims, &entries(count, seed, dtype), dtype);
        let mut taus = dims[..rank - 2].to_vec();
        taus.push(k);
        let (a_ty, t_ty) = (shape_text(dtype, &dims), shape_text(dtype, &taus));
        let (_, r_dims) = factor_dims(&dims, false);
        let (q_ty, r_ty) = (
            shape_text(dtype, &factor_dims(&dims, false).0),
            shape_text(dtype, &r_dims),
        );
        let text = format!(
            "func @f(%0: {a_ty}) -> ({a_ty}, {t_ty}, {q_ty}, {r_ty}) {{\n  %1 = geqrf %0 : {a_ty}\n  %2 = geqrf_taus %0 : {t_ty}\n  %3 = qr_q %0 : {q_ty}\n  %4 = qr_r %0 : {r_ty}\n  return %1, %2, %3, %4\n}}\n"
        );
        let out = run(&text, &[a]);
        let (packed, r) = (widened(&out[0]), widened(&out[3]));
        for b in 0..count / (m * n) {
            for i in 0..k {
                for j in i..n {
                    assert_eq!(
                        packed[b * m * n + i * n + j],
                        r[b * k * n + i * n + j],
                        "{dims:?}"
                    );
                }
            }
        }
        if m >= n {
            let text = format!(
                "func @f(%0: {a_ty}, %1: {t_ty}) -> ({a_ty}) {{\n  %2 = householder_product %0, %1 : {a_ty}\n  return %2\n}}\n"
            );
            let q = run(&text, &[out[0].clone(), out[1].clone()]);
            // Bit for bit where the packed factors are not rounded in between.
            match dtype {
                "f32" => {
                    for (x, y) in widened(&q[0]).iter().zip(widened(&out[2])) {
                        assert!(
                            (x - y).norm() <= 8.0 * unit(dtype),
                            "{dims:?}: {x} against {y}"
                        );
                    }
                }
                _ => assert_eq!(q[0].elements(), out[2].elements(), "{dtype} {dims:?}"),
            }
        }
    }

    // Two reflections of a 4 × 3 matrix, multiplied out by hand.
    let v = entries(12, 45, "c128");
    let taus = entries(2, 46, "c128");
    let text = "func @f(%0: c128[4,3], %1: c128[2]) -> (c128[4,3]) {\n  %2 = householder_product %0, %1 : c128[4,3]\n  return %2\n}\n";
    let got = widened(
        &run(
            text,
            &[array(&[4, 3], v.clone()), array(&[2], taus.clone())],
        )[0],
    );
    let mut q: Vec<C64> = (0..16)
        .map(|i| C64::new(if i % 5 == 0 { 1.0 } else { 0.0 }, 0.0))
        .collect();
    for (j, tau) in taus.iter().enumerate() {
        let vj: Vec<C64> = (0..4)
            .map(|i| match i.cmp(&j) {
                std::cmp::Ordering::Less => C64::new(0.0, 0.0),
                std::cmp::Ordering::Equal => C64::new(1.0, 0.0),
                std::cmp::Ordering::Greater => v[i * 3 + j],
            })
            .collect();
        // q ← q·(I − τ·v·vᴴ)
        let qv: Vec<C64> = (0..4)
            .map(|r| (0..4).map(|c| q[r * 4 + c] * vj[c]).sum())
            .collect();
        for r in 0..4 {
            for c in 0..4 {
                q[r * 4 + c] -= tau * qv[r] * vj[c].conj();
            }
        }
    }
    for r in 0..4 {
        for c in 0..3 {
            let err = (got[r * 3 + c] - q[r * 4 + c]).norm();
            assert!(
                err <= 8.0 * unit("c128"),
                "({r}, {c}): {} against {}",
                got[r * 3 + c],
                q[r * 4 + c]
            );
        }
    }

    // Zero sizes, and vmap.
    let (packed, taus) = Tensor::from_vec([0, 3], Vec::<f32>::new()).geqrf();
    assert_eq!((packed.shape(), taus.shape()), (&[0, 3][..], &[0][..]));
    let q = Tensor::from_vec([3, 0], Vec::<f32>::new())
        .householder_product(&Tensor::from_vec([0], Vec::<f32>::new()));
    assert_eq!(q.shape(), &[3, 0]);
    let stack = Tensor::from_vec([3, 4, 2], values(24, 47));
    let (p, t) = vmap(|a: Tensor| a.geqrf())(stack.clone());
    let q = vmap(|(a, t): (Tensor, Tensor)| a.householder_product(&t))((p.clone(), t.clone()));
    assert_eq!(
        q.to_vec::<f64>().unwrap(),
        stack.qr(false).0.to_vec::<f64>().unwrap()
    );

    // Errors: more columns than rows, more factors than columns, another type, a derivative.
    let wide = Tensor::from_vec([2, 3], values(6, 48));
    let e = wide
        .householder_product(&Tensor::from_vec([2], values(2, 49)))
        .to_array()
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("householder_product") && e.contains("m ≥ n"),
        "{e}"
    );
    let tall = Tensor::from_vec([4, 2], values(8, 50));
    let e = tall
        .householder_product(&Tensor::from_vec([3], values(3, 51)))
        .to_array()
        .unwrap_err()
        .to_string();
    assert!(e.contains("k ≤ n"), "{e}");
    let e = tall
        .householder_product(&Tensor::from_vec([2], vec![1.0f32, 2.0]))
        .to_array()
        .unwrap_err()
        .to_string();
    assert!(e.contains("householder_product"), "{e}");
    let e = grad(|a: Tensor| a.geqrf().0.sum(..))(tall)
        .to_array()
        .unwrap_err()
        .to_string();
    assert!(e.contains("`geqrf`") && e.contains("qr"), "{e}");
}

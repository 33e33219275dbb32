//! `eig` (eigendecomposition of general square matrices, `lax.linalg.eig`): eigenpairs that
//! satisfy `a·vr = vr·diag(w)` and `vlᴴ·a = diag(w)·vlᴴ`, unit eigenvectors with their largest
//! entry real and positive, in f32, f64, c64 and c128, with batches, on the interpreter, the
//! CPU backend and the emulated GPU bit for bit; eigenvalues known by hand (triangular,
//! rotations, a companion matrix, repeated and defective ones); zero sizes; NaN; `vmap`;
//! errors. The eigenvalues' derivative against central differences is in
//! `complex_autodiff.rs`.
#![allow(clippy::unwrap_used, clippy::panic)]

mod common;

use common::numbers::{array, entries, shape_text, typed, unit, widened, C64};
use common::run_on_every_backend as run;

use ferrax::{grad, vmap, DType, Tensor};

fn complex_of(dtype: &str) -> &'static str {
    match dtype {
        "f32" | "c64" => "c64",
        _ => "c128",
    }
}

fn eig_program(dtype: &str, dims: &[usize]) -> String {
    let rank = dims.len();
    let c = complex_of(dtype);
    let (a, w, v) = (
        shape_text(dtype, dims),
        shape_text(c, &dims[..rank - 1]),
        shape_text(c, dims),
    );
    format!(
        "func @f(%0: {a}) -> ({w}, {v}, {v}) {{\n  %1 = eig_values %0 : {w}\n  %2 = eig_left %0 : {v}\n  %3 = eig_right %0 : {v}\n  return %1, %2, %3\n}}\n"
    )
}

/// Checks one `m × m` matrix's eigenpairs to `tolerance` of `a`'s largest entry: the residuals
/// of both equations, unit vectors, each one's largest entry real and positive.
fn check_pairs(what: &str, a: &[C64], w: &[C64], vl: &[C64], vr: &[C64], m: usize, tolerance: f64) {
    let scale = a.iter().map(|x| x.norm()).fold(1.0, f64::max);
    for k in 0..m {
        for i in 0..m {
            let av: C64 = (0..m).map(|j| a[i * m + j] * vr[j * m + k]).sum();
            let err = (av - w[k] * vr[i * m + k]).norm();
            assert!(
                err <= tolerance * scale,
                "{what}: (a·vr − vr·w)[{i}, {k}] = {err}"
            );
            let la: C64 = (0..m).map(|j| vl[j * m + k].conj() * a[j * m + i]).sum();
            let err = (la - w[k] * vl[i * m + k].conj()).norm();
            assert!(
                err <= tolerance * scale,
                "{what}: (vlᴴ·a − w·vlᴴ)[{k}, {i}] = {err}"
            );
        }
        for v in [vl, vr] {
            let column: Vec<C64> = (0..m).map(|i| v[i * m + k]).collect();
            let norm = column.iter().map(|x| x.norm_sqr()).sum::<f64>().sqrt();
            assert!((norm - 1.0).abs() <= tolerance, "{what}: ‖v_{k}‖ = {norm}");
            let largest = column.iter().map(|x| x.norm()).fold(0.0, f64::max);
            let first = column.iter().find(|x| x.norm() == largest).unwrap();
            assert!(
                first.im == 0.0 && first.re > 0.0,
                "{what}: v_{k}'s largest entry {first}"
            );
        }
    }
}

#[test]
fn eigenpairs_satisfy_their_equations() {
    for dtype in ["f32", "f64", "c64", "c128"] {
        for (seed, dims) in [
            (1, vec![1, 1]),
            (2, vec![2, 2]),
            (3, vec![5, 5]),
            (4, vec![3, 7, 7]),
        ] {
            let count: usize = dims.iter().product();
            let source = if dtype == "c64" { "c128" } else { dtype };
            let v = entries(count, seed, source);
            let a = match dtype {
                "c64" => array(
                    &dims,
                    v.iter()
                        .map(|z| ferrax::ir::Complex::new(z.re as f32, z.im as f32))
                        .collect(),
                ),
                _ => typed(&dims, &v, dtype),
            };
            let out = run(&eig_program(dtype, &dims), std::slice::from_ref(&a));
            let (a, w, vl, vr) = (
                widened(&a),
                widened(&out[0]),
                widened(&out[1]),
                widened(&out[2]),
            );
            let m = dims[dims.len() - 1];
            let tolerance = 64.0 * m as f64 * unit(if dtype == "c64" { "f32" } else { dtype });
            for b in 0..count / (m * m) {
                let (mat, vec) = (b * m * m..(b + 1) * m * m, b * m..(b + 1) * m);
                let what = format!("{dtype} {dims:?} matrix {b}");
                check_pairs(
                    &what,
                    &a[mat.clone()],
                    &w[vec],
                    &vl[mat.clone()],
                    &vr[mat],
                    m,
                    tolerance,
                );
            }
        }
    }
}

/// `eig` of an f64 matrix from the interpreter.
fn eig_f64(m: usize, a: &[f64]) -> (Vec<C64>, Vec<C64>, Vec<C64>) {
    let out = run(&eig_program("f64", &[m, m]), &[array(&[m, m], a.to_vec())]);
    (widened(&out[0]), widened(&out[1]), widened(&out[2]))
}

/// `got`, in some order, within `tolerance` of `want`.
fn assert_same_set(what: &str, got: &[C64], want: &[C64], tolerance: f64) {
    let mut unused: Vec<C64> = got.to_vec();
    for w in want {
        let (at, err) = unused
            .iter()
            .enumerate()
            .map(|(i, g)| (i, (g - w).norm()))
            .fold((0, f64::INFINITY), |a, b| if b.1 < a.1 { b } else { a });
        assert!(
            err <= tolerance,
            "{what}: no eigenvalue near {w} in {got:?}"
        );
        unused.remove(at);
    }
}

#[test]
fn known_eigenvalues() {
    let c = C64::new;
    // Triangular: the diagonal.
    let (w, _, _) = eig_f64(3, &[2.0, 5.0, -1.0, 0.0, -3.0, 4.0, 0.0, 0.0, 0.5]);
    assert_same_set(
        "triangular",
        &w,
        &[c(2.0, 0.0), c(-3.0, 0.0), c(0.5, 0.0)],
        1e-14,
    );
    // A rotation by a quarter turn: ±i, with eigenvectors (1, ∓i)/√2 up to phase.
    let (w, vl, vr) = eig_f64(2, &[0.0, -1.0, 1.0, 0.0]);
    assert_same_set("rotation", &w, &[c(0.0, 1.0), c(0.0, -1.0)], 1e-15);
    check_pairs(
        "rotation",
        &[c(0.0, 0.0), c(-1.0, 0.0), c(1.0, 0.0), c(0.0, 0.0)],
        &w,
        &vl,
        &vr,
        2,
        1e-15,
    );
    // The companion matrix of (x − 1)(x − 2)(x − 3)(x² + 1) = x⁵ − 6x⁴ + 12x³ − 12x² + 11x − 6.
    let coefficients = [-6.0, 12.0, -12.0, 11.0, -6.0];
    let mut companion = vec![0.0; 25];
    for (j, &p) in coefficients.iter().enumerate() {
        companion[j] = -p;
    }
    for i in 1..5 {
        companion[i * 5 + i - 1] = 1.0;
    }
    let (w, _, _) = eig_f64(5, &companion);
    let roots = [
        c(1.0, 0.0),
        c(2.0, 0.0),
        c(3.0, 0.0),
        c(0.0, 1.0),
        c(0.0, -1.0),
    ];
    assert_same_set("companion", &w, &roots, 1e-12);
    // A cyclic permutation, where the shifted steps stall until an exceptional shift: the
    // fourth roots of unity. The zero matrix: zeros.
    let cycle = [
        0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0,
    ];
    let (w, _, _) = eig_f64(4, &cycle);
    let roots = [c(1.0, 0.0), c(-1.0, 0.0), c(0.0, 1.0), c(0.0, -1.0)];
    assert_same_set("cycle", &w, &roots, 1e-14);
    let (w, _, vr) = eig_f64(3, &[0.0; 9]);
    assert_eq!(w, vec![c(0.0, 0.0); 3]);
    assert!(vr.iter().all(|z| z.re.is_finite()), "{vr:?}");
    // Scaled far from 1 either way, the eigenvalues scale (no underflow or overflow).
    let base: Vec<f64> = entries(25, 12, "f64").iter().map(|z| z.re).collect();
    let (w, _, _) = eig_f64(5, &base);
    for scale in [1e-140, 1e140] {
        let scaled: Vec<f64> = base.iter().map(|x| x * scale).collect();
        let (ws, _, vr) = eig_f64(5, &scaled);
        let want: Vec<C64> = w.iter().map(|z| z * scale).collect();
        assert_same_set("scaled", &ws, &want, 1e-13 * scale);
        assert!(
            vr.iter().all(|z| z.re.is_finite() && z.im.is_finite()),
            "{vr:?}"
        );
    }
    // The identity: every vector is an eigenvector; the standard basis comes out.
    let (w, vl, vr) = eig_f64(3, &[1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]);
    assert_eq!(w, vec![c(1.0, 0.0); 3]);
    let identity: Vec<C64> = (0..9)
        .map(|i| c(if i % 4 == 0 { 1.0 } else { 0.0 }, 0.0))
        .collect();
    assert_eq!((vl, vr), (identity.clone(), identity));
    // A Jordan block: one eigenvalue, twice, and (nearly) one eigenvector direction.
    let (w, _, vr) = eig_f64(2, &[1.0, 1.0, 0.0, 1.0]);
    assert_eq!(w, vec![c(1.0, 0.0); 2]);
    for k in 0..2 {
        assert!(
            (vr[k] - c(1.0, 0.0)).norm() < 1e-12 && vr[2 + k].norm() < 1e-12,
            "{vr:?}"
        );
    }
    // Sum and product of the eigenvalues: the trace and the determinant.
    let a = entries(36, 11, "f64")
        .iter()
        .map(|z| z.re)
        .collect::<Vec<_>>();
    let (w, _, _) = eig_f64(6, &a);
    let trace: f64 = (0..6).map(|i| a[i * 7]).sum();
    let sum: C64 = w.iter().sum();
    assert!(
        (sum - c(trace, 0.0)).norm() < 1e-13,
        "{sum} against {trace}"
    );
    let product: C64 = w.iter().product();
    let want = determinant(&a, 6);
    assert!(
        (product - c(want, 0.0)).norm() < 1e-13 * want.abs().max(1.0),
        "{product} against {want}"
    );
}

/// A real matrix's eigenvalues are real or come in adjacent conjugate pairs, the positive
/// imaginary part first, exactly, and so do their eigenvectors; real eigenvalues have real
/// eigenvectors (as LAPACK's `dgeev` gives them). Larger matrices converge.
#[test]
fn real_matrices_give_exact_conjugate_pairs() {
    let mut complex_pairs = 0;
    for (m, seed) in [(2, 61), (5, 62), (8, 63), (17, 64), (40, 65)] {
        for dtype in ["f64", "f32"] {
            let a = typed(&[m, m], &entries(m * m, seed, "f64"), dtype);
            let out = run(&eig_program(dtype, &[m, m]), std::slice::from_ref(&a));
            let (w, vl, vr) = (widened(&out[0]), widened(&out[1]), widened(&out[2]));
            let what = format!("{dtype} {m} × {m}");
            check_pairs(
                &what,
                &widened(&a),
                &w,
                &vl,
                &vr,
                m,
                64.0 * m as f64 * unit(dtype),
            );
            let mut k = 0;
            while k < m {
                if w[k].im == 0.0 {
                    for v in [&vl, &vr] {
                        assert!((0..m).all(|r| v[r * m + k].im == 0.0), "{what}: vector {k}");
                    }
                    k += 1;
                    continue;
                }
                assert!(
                    w[k].im > 0.0 && k + 1 < m && w[k + 1] == w[k].conj(),
                    "{what}: {w:?}"
                );
                for v in [&vl, &vr] {
                    assert!(
                        (0..m).all(|r| v[r * m + k + 1] == v[r * m + k].conj()),
                        "{what}: {k}"
                    );
                }
                complex_pairs += 1;
                k += 2;
            }
        }
    }
    assert!(complex_pairs >= 10, "{complex_pairs} pairs");
}

/// The determinant of the `m × m` matrix `a`, by elimination with partial pivoting.
fn determinant(a: &[f64], m: usize) -> f64 {
    let mut a = a.to_vec();
    let mut det = 1.0;
    for j in 0..m {
        let p = (j..m)
            .max_by(|&x, &y| a[x * m + j].abs().total_cmp(&a[y * m + j].abs()))
            .unwrap();
        if p != j {
            for c in 0..m {
                a.swap(j * m + c, p * m + c);
            }
            det = -det;
        }
        det *= a[j * m + j];
        for i in j + 1..m {
            let f = a[i * m + j] / a[j * m + j];
            for c in j..m {
                a[i * m + c] -= f * a[j * m + c];
            }
        }
    }
    det
}

#[test]
fn zero_sizes_and_non_finite_values() {
    for dims in [vec![0, 0], vec![3, 0, 0], vec![0, 2, 2]] {
        let count: usize = dims.iter().product();
        let out = run(
            &eig_program("f32", &dims),
            &[array(&dims, vec![0.0f32; count])],
        );
        assert!(out.iter().all(|x| x.dtype() == DType::C64));
        assert_eq!(out[2].dims(), &dims[..]);
    }
    for bad in [f64::NAN, f64::INFINITY] {
        let out = run(
            &eig_program("f64", &[2, 2]),
            &[array(&[2, 2], vec![1.0, bad, 0.0, 2.0])],
        );
        for x in &out {
            assert!(
                widened(x).iter().all(|z| z.re.is_nan() && z.im.is_nan()),
                "{x:?}"
            );
        }
    }
}

#[test]
fn tensor_functions_and_vmap() {
    let a = Tensor::from_vec(
        [4, 3, 3],
        entries(36, 21, "f64")
            .iter()
            .map(|z| z.re)
            .collect::<Vec<_>>(),
    );
    let (w, v) = a.eig();
    let (w2, vl, vr) = a.eig_left_right();
    let w = w.to_vec::<C64>().unwrap();
    assert_eq!(w, a.eigvals().to_vec::<C64>().unwrap());
    assert_eq!(w, w2.to_vec::<C64>().unwrap());
    assert_eq!(v.to_vec::<C64>().unwrap(), vr.to_vec::<C64>().unwrap());
    assert_eq!(vl.shape(), &[4, 3, 3]);
    let by_vmap = vmap(|a: Tensor| a.eigvals())(a.clone());
    assert_eq!(by_vmap.to_vec::<C64>().unwrap(), w);
}

/// Only the eigenvalues have a derivative (JAX's rule); eig takes f32, f64, c64 and c128
/// square matrices.
#[test]
fn errors() {
    let a = Tensor::from_vec([3, 3], vec![1.0f64; 9]);
    let e = grad(|a: Tensor| a.eig().1.real().sum(..))(a.clone())
        .to_array()
        .unwrap_err()
        .to_string();
    assert!(e.contains("eig_right") && e.contains("eigenvalues"), "{e}");
    let half = Tensor::from_vec([2, 2], vec![half::f16::ONE; 4]);
    let e = half.eigvals().to_array().unwrap_err().to_string();
    assert!(
        e.contains("eig_values") && e.contains("f32, f64, c64 or c128"),
        "{e}"
    );
    let wide = Tensor::from_vec([2, 3], vec![1.0f32; 6]);
    let e = wide.eigvals().to_array().unwrap_err().to_string();
    assert!(e.contains("square") && e.contains("tests/eig.rs"), "{e}");
}

/// The parts `name` of a case of `eig_reference.json` as complex numbers.
fn reference_parts(case: &serde_json::Value, name: &str) -> Vec<C64> {
    let floats = |part: &str| -> Vec<f64> {
        case[name][part]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect()
    };
    let (re, im) = (floats("re"), floats("im"));
    re.iter().zip(&im).map(|(&r, &i)| C64::new(r, i)).collect()
}

/// Against JAX's `eig` (LAPACK's `geev`, `tests/jax/generate_eig.py`): matrices whose rows and
/// columns isolate eigenvalues come out in the order the balancing's permutation gives them,
/// and badly scaled ones (`d·b·d⁻¹`, `d` powers of 2 up to 2^20) have their eigenvalues to
/// the accuracy of `b`'s norm, which only a balanced decomposition reaches (unbalanced, the
/// error is about ε times the scaled matrix's norm, 2^40 times more). Eigenvectors agree up to
/// each one's phase (LAPACK leaves a real matrix's real eigenvectors' signs free).
#[test]
fn balanced_like_lapack() {
    let record: serde_json::Value =
        serde_json::from_str(include_str!("jax/eig_reference.json")).unwrap();
    for (name, case) in record.as_object().unwrap() {
        let dtype = case["dtype"].as_str().unwrap();
        let m = case["m"].as_u64().unwrap() as usize;
        let a = typed(&[m, m], &reference_parts(case, "a"), dtype);
        let out = run(&eig_program(dtype, &[m, m]), std::slice::from_ref(&a));
        let tolerance = 64.0 * m as f64 * unit(if dtype == "c128" { "f64" } else { dtype });
        let w = widened(&out[0]);
        let want = reference_parts(case, "values");
        for (k, (got, want)) in w.iter().zip(&want).enumerate() {
            assert!(
                (got - want).norm() <= tolerance * want.norm().max(1.0),
                "{name}: eigenvalue {k} is {got}, JAX's {want}"
            );
        }
        for (part, index) in [("left", 1), ("right", 2)] {
            let got = widened(&out[index]);
            let want = reference_parts(case, part);
            for k in 0..m {
                let column = |v: &[C64]| -> Vec<C64> { (0..m).map(|i| v[i * m + k]).collect() };
                let (g, j) = (column(&got), column(&want));
                let overlap: C64 = g.iter().zip(&j).map(|(g, j)| g.conj() * j).sum();
                let phase = overlap / overlap.norm();
                let err = g
                    .iter()
                    .zip(&j)
                    .map(|(g, j)| (g * phase - j).norm())
                    .fold(0.0, f64::max);
                assert!(
                    err <= tolerance,
                    "{name}: {part} eigenvector {k} is {g:?}, JAX's {j:?}"
                );
            }
        }
    }
}

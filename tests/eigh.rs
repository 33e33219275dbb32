//! `eigh` (eigendecomposition of Hermitian matrices, `lax.linalg.eigh`, by Jacobi rotations):
//! `v·diag(w)·vᴴ` rebuilds the matrix the lower triangle stands for, `v` is unitary, `w`
//! ascending, each eigenvector's largest entry real and positive, in f32, f64 and c128, with
//! batches and up to 40 × 40, on the interpreter, the CPU backend and the emulated GPU bit for
//! bit; exact small cases; zero sizes and NaN; `vmap`; and `Tensor::eigh`'s symmetrization.
//! Derivatives against central differences are in `complex_autodiff.rs`.
#![allow(clippy::unwrap_used, clippy::panic)]

mod common;

use common::numbers::{array, entries, signed as values, typed, unit, widened, C64};
use common::run_on_every_backend as run;

use ferrax::{vmap, Array, DType, Tensor};

fn eigh_program(dtype: &str, dims: &[usize]) -> String {
    let d: Vec<String> = dims.iter().map(usize::to_string).collect();
    let real = match dtype {
        "c128" => "f64",
        "c64" => "f32",
        other => other,
    };
    let (a, w) = (
        format!("{dtype}[{}]", d.join(",")),
        format!("{real}[{}]", d[..d.len() - 1].join(",")),
    );
    format!(
        "func @f(%0: {a}) -> ({w}, {a}) {{\n  %1 = eigh_values %0 : {w}\n  %2 = eigh_vectors %0 : {a}\n  return %1, %2\n}}\n"
    )
}

/// The Hermitian matrix the lower triangle of `a` (`m × m`) stands for.
fn hermitian(a: &[C64], m: usize) -> Vec<C64> {
    let mut h = vec![C64::default(); m * m];
    for i in 0..m {
        for j in 0..m {
            h[i * m + j] = match i.cmp(&j) {
                std::cmp::Ordering::Greater => a[i * m + j],
                std::cmp::Ordering::Less => a[j * m + i].conj(),
                std::cmp::Ordering::Equal => C64::new(a[i * m + i].re, 0.0),
            };
        }
    }
    h
}

#[test]
fn decompositions_rebuild_the_hermitian_matrix() {
    for dims in [vec![4, 4], vec![2, 5, 5], vec![1, 1], vec![40, 40]] {
        let rank = dims.len();
        let m = dims[rank - 1];
        let count: usize = dims.iter().product();
        let batches = count / (m * m);
        for dtype in ["f64", "f32", "c128"] {
            let a = entries(count, 3, dtype);
            let input = typed(&dims, &a, dtype);
            let a = widened(&input);
            let out = run(&eigh_program(dtype, &dims), std::slice::from_ref(&input));
            let (w, v) = (widened(&out[0]), widened(&out[1]));
            let unit = unit(dtype);
            let bound = 8.0 * m as f64 * unit;
            let what = format!("{dtype} {dims:?}");
            for batch in 0..batches {
                let h = hermitian(&a[batch * m * m..(batch + 1) * m * m], m);
                let w = &w[batch * m..(batch + 1) * m];
                let v = &v[batch * m * m..(batch + 1) * m * m];
                assert!(w.windows(2).all(|p| p[0].re <= p[1].re), "{what}: {w:?}");
                for i in 0..m {
                    for j in 0..m {
                        let rebuilt: C64 = (0..m)
                            .map(|c| v[i * m + c] * w[c] * v[j * m + c].conj())
                            .sum();
                        let err = (rebuilt - h[i * m + j]).norm();
                        assert!(err <= bound, "{what} ({i}, {j}): {err}");
                        let dot: C64 = (0..m).map(|k| v[k * m + i].conj() * v[k * m + j]).sum();
                        let want = if i == j { 1.0 } else { 0.0 };
                        assert!((dot - want).norm() <= bound, "{what}: vᴴv({i}, {j})");
                    }
                }
                for c in 0..m {
                    let column: Vec<C64> = (0..m).map(|k| v[k * m + c]).collect();
                    let largest = column
                        .iter()
                        .copied()
                        .reduce(|x, y| if y.norm() > x.norm() { y } else { x })
                        .unwrap();
                    assert!(largest.re > 0.0 && largest.im == 0.0, "{what}: column {c}");
                }
            }
        }
    }
}

/// Exact cases: a diagonal matrix needs no rotation (eigenvalues sorted, columns permuted);
/// `[[2, 1], [1, 2]]` has eigenvalues 1 and 3 with `[1, −1]/√2` and `[1, 1]/√2`; only the
/// lower triangle is read.
#[test]
fn small_cases() {
    let out = run(
        &eigh_program("f64", &[2, 2]),
        &[array(&[2, 2], vec![3.0, 99.0, 0.0, -1.0])],
    );
    assert_eq!(out[0].as_slice::<f64>().unwrap(), &[-1.0, 3.0]);
    assert_eq!(out[1].as_slice::<f64>().unwrap(), &[0.0, 1.0, 1.0, 0.0]);
    let out = run(
        &eigh_program("f64", &[2, 2]),
        &[array(&[2, 2], vec![2.0, -7.0, 1.0, 2.0])],
    );
    let w = out[0].as_slice::<f64>().unwrap();
    assert!((w[0] - 1.0).abs() <= 4.0 * f64::EPSILON && (w[1] - 3.0).abs() <= 4.0 * f64::EPSILON);
    let h = std::f64::consts::FRAC_1_SQRT_2;
    for (got, want) in out[1].as_slice::<f64>().unwrap().iter().zip([h, h, -h, h]) {
        assert!((got - want).abs() <= 4.0 * f64::EPSILON, "{got} vs {want}");
    }
}

/// Zero-size matrices give empty results; a matrix holding NaN gives NaN throughout.
#[test]
fn zero_sizes_and_nan() {
    for dims in [vec![0, 0], vec![3, 0, 0]] {
        let out = run(
            &eigh_program("f32", &dims),
            &[Array::zeros(DType::F32, dims.clone())],
        );
        assert_eq!(out[0].dims(), &dims[..dims.len() - 1]);
        assert_eq!(out[1].dims(), dims.as_slice());
    }
    let out = run(
        &eigh_program("f32", &[2, 2]),
        &[array(&[2, 2], vec![1.0f32, 0.0, f32::NAN, 1.0])],
    );
    assert!(out[0].as_slice::<f32>().unwrap().iter().all(|x| x.is_nan()));
    assert!(out[1].as_slice::<f32>().unwrap().iter().all(|x| x.is_nan()));
}

/// `Tensor::eigh` symmetrizes (both triangles count, as `jnp.linalg.eigh`), and `vmap`
/// decomposes each example.
#[test]
fn traced_eigh_symmetrizes_and_batches() {
    // (a + aᵀ)/2 of [[1, 4], [0, 1]] is [[1, 2], [2, 1]]: eigenvalues −1 and 3.
    let a = Tensor::from_vec([2, 2], vec![1.0, 4.0, 0.0, 1.0]);
    let (w, _) = a.eigh();
    let w = w.to_vec::<f64>().unwrap();
    assert!(
        (w[0] + 1.0).abs() <= 1e-15 && (w[1] - 3.0).abs() <= 1e-15,
        "{w:?}"
    );
    let stack = Tensor::from_vec([3, 4, 4], values(48, 9));
    let (ws, vs) = vmap(|a: Tensor| a.eigh())(stack.clone());
    for k in 0..3 {
        let (w, v) = stack
            .slice(&[k, 0, 0], &[k + 1, 4, 4])
            .reshape([4, 4])
            .eigh();
        let w_k = ws.slice(&[k, 0], &[k + 1, 4]).reshape([4]);
        let v_k = vs.slice(&[k, 0, 0], &[k + 1, 4, 4]).reshape([4, 4]);
        assert_eq!(w_k.to_vec::<f64>().unwrap(), w.to_vec::<f64>().unwrap());
        assert_eq!(v_k.to_vec::<f64>().unwrap(), v.to_vec::<f64>().unwrap());
    }
}

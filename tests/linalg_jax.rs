//! Gradients of the linear-algebra ops against values computed by JAX in f64 and c128
//! (`tests/jax/generate_linalg.py` wrote `tests/jax/linalg_reference.json`; no Python is
//! needed here): cholesky, lu, qr, eigh, svd, the eigenvalues of general matrices, det,
//! slogdet, inv, solve, pinv and triangular_solve, real and complex, through the same losses
//! written with ferrax tensors. Complex gradients follow JAX's convention (`∂f/∂x − i·∂f/∂y`).
//! Tolerance: 1e-9 of the gradient's largest entry; both sides compute in f64 by different
//! algorithms (Jacobi rotations here, LAPACK there).
#![allow(clippy::unwrap_used, clippy::panic)]

use ferrax::ir::{Complex, TriangularSolve};
use ferrax::{grad, DType, Tensor};
use serde_json::Value;

type C = Complex<f64>;

fn numbers(v: &Value) -> Vec<f64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

/// A recorded array: f64, or c128 where it has imaginary parts.
fn tensor(v: &Value) -> Tensor {
    let shape: Vec<usize> = numbers(&v["shape"]).iter().map(|&d| d as usize).collect();
    let re = numbers(&v["re"]);
    match v.get("im") {
        Some(im) => Tensor::from_vec(
            shape,
            re.into_iter()
                .zip(numbers(im))
                .map(|(r, i)| C::new(r, i))
                .collect::<Vec<C>>(),
        ),
        None => Tensor::from_vec(shape, re),
    }
}

fn elements(t: &Tensor) -> Vec<C> {
    match t.dtype() {
        DType::C128 => t.to_vec::<C>().unwrap(),
        _ => t
            .to_vec::<f64>()
            .unwrap()
            .into_iter()
            .map(|x| C::new(x, 0.0))
            .collect(),
    }
}

/// 1, 2, 3, ... over `shape`, divided by its size (the generator's `weights`).
fn weights(shape: &[usize]) -> Tensor {
    let n: usize = shape.iter().product();
    let w: Vec<f64> = (1..=n).map(|i| i as f64 / n as f64).collect();
    Tensor::from_vec(shape.to_vec(), w)
}

/// The real part of complex values; real ones as they are.
fn real_part(x: &Tensor) -> Tensor {
    match x.dtype() {
        DType::C128 => x.real(),
        _ => x.clone(),
    }
}

fn magnitude2(x: &Tensor) -> Tensor {
    match x.dtype() {
        DType::C128 => (x * &x.conj()).real(),
        _ => x * x,
    }
}

/// `Σ re(x)·w` over all of `x`, `w` the weights of `x`'s shape.
fn weighted(x: &Tensor) -> Tensor {
    (real_part(x) * weights(x.shape())).sum(..)
}

/// The generator's loss `name` of `args`.
fn loss(name: &str, args: &[Tensor]) -> Tensor {
    let a = &args[0];
    let (m, n) = (a.shape()[0], a.shape()[1]);
    let k = m.min(n);
    match name {
        "cholesky" => weighted(&a.cholesky().sin()),
        "lu" => weighted(&a.lu().0.sin()),
        "qr" => {
            let (q, r) = a.qr(false);
            weighted(&q.sin()) + weighted(&r.cos())
        }
        "eigh" => {
            let (w, v) = a.eigh();
            (w * weights(&[m])).sum(..) + (magnitude2(&v) * weights(&[m, m])).sum(..)
        }
        "svd" => {
            let (u, s, vh) = a.svd(false);
            (s * weights(&[k])).sum(..)
                + (magnitude2(&u) * weights(&[m, k])).sum(..)
                + (magnitude2(&vh) * weights(&[k, n])).sum(..)
        }
        "eigvals" => {
            let w = a.eigvals();
            w.sin().real().sum(..) + (w.real() * w.imag()).sum(..)
        }
        "det" => real_part(&a.det()),
        "slogdet" => a.slogdet().1,
        "inv" => weighted(&a.inv()),
        "solve" => weighted(&a.solve(&args[1])),
        "pinv" => weighted(&a.pinv()),
        "triangular_solve" => {
            let options = TriangularSolve {
                left_side: true,
                lower: true,
                ..TriangularSolve::default()
            };
            weighted(&a.triangular_solve(&args[1], options))
        }
        other => panic!("no loss {other}"),
    }
}

#[test]
fn linear_algebra_gradients_match_jax() {
    let record: Value = serde_json::from_str(include_str!("jax/linalg_reference.json")).unwrap();
    let cases = record["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 20);
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let inputs: Vec<Tensor> = case["inputs"]
            .as_array()
            .unwrap()
            .iter()
            .map(tensor)
            .collect();
        let what = format!(
            "{name} of {:?}",
            inputs
                .iter()
                .map(|t| (t.dtype(), t.shape().to_vec()))
                .collect::<Vec<_>>()
        );
        let value = loss(name, &inputs).to_vec::<f64>().unwrap()[0];
        let want = case["value"].as_f64().unwrap();
        assert!(
            (value - want).abs() <= 1e-10 * want.abs().max(1.0),
            "{what}: loss {value} against JAX's {want}"
        );
        let grads = grad(|args: Vec<Tensor>| loss(name, &args))(inputs.clone());
        for (g, w) in grads.iter().zip(case["grads"].as_array().unwrap()) {
            let (got, want) = (elements(g), elements(&tensor(w)));
            assert_eq!(got.len(), want.len(), "{what}");
            let scale = want.iter().map(|z| z.norm()).fold(1.0, f64::max);
            for (i, (x, y)) in got.iter().zip(&want).enumerate() {
                assert!(
                    (x - y).norm() <= 1e-9 * scale,
                    "{what}: gradient[{i}] {x} against JAX's {y}"
                );
            }
        }
    }
}

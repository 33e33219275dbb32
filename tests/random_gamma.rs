//! `random::gamma`, `loggamma`, `beta` and `dirichlet` against JAX's draws for the same keys
//! (`tests/jax/generate_gamma.py` wrote `tests/jax/gamma_reference.json`), in f32 and f64,
//! and their derivatives with respect to the shape parameter against JAX's implicit
//! reparameterization gradients.
//!
//! Tolerances: a draw is a few elementary functions of JAX's bits (its rejection loop's key
//! splits and accept tests must match for any digit to), and ferrax's `log`, `pow` and `exp`
//! round once where XLA's f32 ones may be an ulp or two away: 2e-6 relative in f32, 1e-13 in
//! f64. The derivative, from the incomplete gamma function's series in f64, agrees with JAX's
//! `random_gamma_grad` to 1e-12 in f64; f32 results are rounded once (JAX's computed in f32):
//! 1e-5 relative.
#![allow(clippy::unwrap_used)]

use ferrax::{grad, jit, random, DType, Tensor};
use serde_json::Value;

fn numbers(v: &Value) -> Vec<f64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

fn assert_close(what: &str, got: &Tensor, want: &[f64], tolerance: f64) {
    let got = got.astype(DType::F64).to_vec::<f64>().unwrap();
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= tolerance * w.abs().max(1e-30),
            "{what}[{i}]: {g} against JAX's {w}"
        );
    }
}

#[test]
fn draws_and_gradients_match_jax() {
    let r: Value = serde_json::from_str(include_str!("jax/gamma_reference.json")).unwrap();
    let (a, b, alpha) = (numbers(&r["a"]), numbers(&r["b"]), numbers(&r["alpha"]));
    for case in r["cases"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let dtype = match case["dtype"].as_str().unwrap() {
            "float32" => DType::F32,
            _ => DType::F64,
        };
        let tolerance = match dtype {
            DType::F32 => 2e-6,
            _ => 1e-13,
        };
        let key = random::key(case["seed"].as_u64().unwrap() as u32);
        let a = Tensor::from_vec([8], a.clone()).astype(dtype);
        let b = Tensor::from_vec([8], b.clone()).astype(dtype);
        let alpha = Tensor::from_vec([2, 3], alpha.clone()).astype(dtype);
        let w = Tensor::linspace(dtype, 1.0, 8.0, 8);
        let f = |a: &Tensor| match name {
            "gamma" => random::gamma(&key, a, [8], dtype),
            "gamma_shape" => random::gamma(
                &key,
                &a.slice(&[5], &[6]).reshape([0usize; 0]),
                [3, 4],
                dtype,
            ),
            "loggamma" => random::loggamma(&key, a, [8], dtype),
            "beta" => random::beta(&key, a, &b, [8], dtype),
            "dirichlet" => random::dirichlet(&key, &alpha, None, dtype),
            "dirichlet_shape" => random::dirichlet(
                &key,
                &alpha.slice(&[0, 0], &[1, 3]).reshape([3]),
                Some(&[4]),
                dtype,
            ),
            other => panic!("no case {other}"),
        };
        let what = format!("{name} {dtype}");
        assert_close(&what, &f(&a), &numbers(&case["value"]), tolerance);
        if let Some(want) = case.get("grad") {
            let g = grad(|a: Tensor| (f(&a) * &w).sum(..))(a.clone());
            let tolerance = match dtype {
                DType::F32 => 1e-5,
                _ => 1e-11,
            };
            assert_close(&format!("{what}'s gradient"), &g, &numbers(want), tolerance);
        }
    }
}

/// Compiled, the draws are the eager ones; a key array of another shape or an integer
/// dtype is an error naming the call.
#[test]
fn compiled_draws_and_errors() {
    let a = Tensor::from_vec([4], vec![0.5f32, 1.0, 2.0, 9.0]);
    let eager = random::gamma(&random::key(1), &a, [4], DType::F32);
    let compiled = jit(|a: Tensor| random::beta(&random::key(1), &a, &a, [4], DType::F32))
        .call(a.clone())
        .unwrap();
    let beta = random::beta(&random::key(1), &a, &a, [4], DType::F32);
    assert_eq!(
        compiled.to_vec::<f32>().unwrap(),
        beta.to_vec::<f32>().unwrap()
    );
    assert!(eager.to_vec::<f32>().unwrap().iter().all(|&x| x > 0.0));
    let e = random::gamma(&random::key(1), &a, [4], DType::I32)
        .to_array()
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("gamma: the dtype must be a float") && e.contains("tests/random_gamma.rs"),
        "{e}"
    );
    let e = random::dirichlet(&random::key(1), &Tensor::scalar(1.0f32), None, DType::F32)
        .to_array()
        .unwrap_err()
        .to_string();
    assert!(e.contains("dirichlet: alpha needs an axis"), "{e}");
    assert_eq!(
        random::gamma(&random::key(1), &a, [0, 4], DType::F32).shape(),
        &[0, 4]
    );
}

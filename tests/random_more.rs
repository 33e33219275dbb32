//! `jax.random`'s distributions built on its uniform, normal, exponential and gamma draws,
//! Poisson and binomial, against JAX's values for the same keys (`tests/jax/generate_random_more.py`
//! wrote `tests/jax/random_more_reference.json`), in f32 and f64, eagerly and under `jit`.
//!
//! Tolerances: each draw is a few elementary functions of JAX's bits, and ferrax's `tan`,
//! `log`, `pow`, `exp` and `lgamma` round once where XLA's f32 ones may be an ulp or two away,
//! amplified by the transformations' conditioning (a Cauchy draw near ±π/2): 1e-5 relative in
//! f32, 1e-12 in f64 (1e-11 where a QR, SVD or eigendecomposition factors the matrix, whose
//! rounding differs from LAPACK's). Counts (geometric, Poisson, binomial) are exact: their accept tests
//! and floors must match JAX's for any to. An SVD's or eigendecomposition's vectors are
//! determined up to sign, which LAPACK and ferrax choose differently, so multivariate normal
//! draws by those factors are compared by what the sign does not change: each draw's
//! Mahalanobis distance `(x − μ)ᵀ Σ⁻¹ (x − μ)`, the squared norm of the normal vector behind it.
#![allow(clippy::unwrap_used)]

use ferrax::random::{self, CovarianceFactor, Key};
use ferrax::{jit, DType, Tensor};
use serde_json::Value;

fn numbers(v: &Value) -> Vec<f64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

fn draw(name: &str, key: &Key, dtype: DType, r: &Value) -> Tensor {
    let mean = Tensor::from_vec([3], numbers(&r["mean"])).astype(dtype);
    let cov = Tensor::from_vec([3, 3], numbers(&r["cov"])).astype(dtype);
    let mvn = |method| random::multivariate_normal(key, &mean, &cov, Some(&[4]), method, dtype);
    match name {
        "cauchy" => random::cauchy(key, [5], dtype),
        "lognormal" => random::lognormal(key, 0.7, [5], dtype),
        "pareto" => random::pareto(key, 2.5, [5], dtype),
        "weibull_min" => random::weibull_min(key, 1.5, 0.8, [5], dtype),
        "rayleigh" => random::rayleigh(key, 2.0, [5], dtype),
        "wald" => random::wald(key, 1.3, [6], dtype),
        "geometric" => random::geometric(key, &Tensor::scalar(0.3).astype(dtype), [6], DType::I32),
        "triangular" => random::triangular(key, -1.0, 0.5, 2.0, [6], dtype),
        "maxwell" => random::maxwell(key, [5], dtype),
        "double_sided_maxwell" => random::double_sided_maxwell(key, 0.5, 2.0, [5], dtype),
        "t" => random::t(key, 3.5, [5], dtype),
        "chisquare" => random::chisquare(key, 2.5, [5], dtype),
        "f" => random::f(key, 3.0, 7.0, [5], dtype),
        "generalized_normal" => random::generalized_normal(key, 1.5, [5], dtype),
        "ball" => random::ball(key, 3, 2.0, [4], dtype),
        "orthogonal" => random::orthogonal(key, 3, None, [2], dtype),
        "orthogonal_wide" => random::orthogonal(key, 3, Some(5), [0usize; 0], dtype),
        "multivariate_normal_cholesky" => mvn(CovarianceFactor::Cholesky),
        "multivariate_normal_svd" => mvn(CovarianceFactor::Svd),
        "multivariate_normal_eigh" => mvn(CovarianceFactor::Eigh),
        "poisson" => random::poisson(
            key,
            Tensor::from_vec([8], numbers(&r["lam"])),
            [8],
            DType::I32,
        ),
        "poisson_shape" => random::poisson(key, 4.0, [3, 5], DType::I32),
        "poisson_large" => random::poisson(key, 60.0, [400], DType::I32),
        other => panic!("no case {other}"),
    }
}

#[test]
fn draws_match_jax_eagerly_and_jitted() {
    let r: Value = serde_json::from_str(include_str!("jax/random_more_reference.json")).unwrap();
    let cases = r["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 43);
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let (dtype, tolerance) = match case["dtype"].as_str().unwrap() {
            "float32" => (DType::F32, 1e-5),
            "float64"
                if name.starts_with("orthogonal")
                    || name.ends_with("normal_svd")
                    || name.ends_with("normal_eigh") =>
            {
                (DType::F64, 1e-11)
            }
            "float64" => (DType::F64, 1e-12),
            _ => (DType::I32, 0.0),
        };
        let want = numbers(&case["value"]);
        let key = random::key(case["seed"].as_u64().unwrap() as u32);
        let eager = draw(name, &key, dtype, &r);
        let r2 = r.clone();
        let name2 = name.to_string();
        let jitted = jit(move |k: Key| draw(&name2, &k, dtype, &r2))
            .call(key)
            .unwrap();
        let signless = name.ends_with("normal_svd") || name.ends_with("normal_eigh");
        let want = match signless {
            true => mahalanobis(&want, &r),
            false => want.clone(),
        };
        for (how, got) in [("eager", eager), ("jit", jitted)] {
            let got = got.astype(DType::F64).to_vec::<f64>().unwrap();
            let got = match signless {
                true => {
                    assert_eq!(got.len(), 12, "{name} {dtype} {how}");
                    mahalanobis(&got, &r)
                }
                false => got,
            };
            assert_eq!(got.len(), want.len(), "{name} {dtype} {how}");
            let scale = want.iter().fold(0f64, |m, w| m.max(w.abs()));
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                let bound = match name {
                    // Orthogonal and normal-vector entries near zero: relative to the largest.
                    "orthogonal" | "orthogonal_wide" | "ball" => tolerance * scale,
                    _ if name.ends_with("cholesky") => tolerance * scale,
                    _ => tolerance * w.abs(),
                };
                assert!(
                    (g - w).abs() <= bound,
                    "{name} {dtype} {how}[{i}]: {g} against JAX's {w}"
                );
            }
        }
    }
}

/// Each 3-vector draw's `(x − μ)ᵀ Σ⁻¹ (x − μ)` for the reference mean and covariance.
fn mahalanobis(draws: &[f64], r: &Value) -> Vec<f64> {
    let (mean, c) = (numbers(&r["mean"]), numbers(&r["cov"]));
    let at = |i: usize, j: usize| c[3 * i + j];
    let cof = |i: usize, j: usize| {
        let (r0, r1) = ((i + 1) % 3, (i + 2) % 3);
        let (c0, c1) = ((j + 1) % 3, (j + 2) % 3);
        at(r0, c0) * at(r1, c1) - at(r0, c1) * at(r1, c0)
    };
    let det: f64 = (0..3).map(|j| at(0, j) * cof(0, j)).sum();
    draws
        .chunks(3)
        .map(|x| {
            let d: Vec<f64> = x.iter().zip(&mean).map(|(x, m)| x - m).collect();
            (0..3)
                .flat_map(|i| (0..3).map(move |j| (i, j)))
                .map(|(i, j)| d[i] * cof(j, i) / det * d[j])
                .sum()
        })
        .collect()
}

/// A binomial reference's counts: numbers, or "nan" and "inf" as JSON has no such numbers.
fn counts(v: &Value) -> Vec<f64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| match x.as_str() {
            Some(text) => text.parse::<f64>().unwrap(),
            None => x.as_f64().unwrap(),
        })
        .collect()
}

fn binomial_draw(name: &str, key: &Key, dtype: DType, r: &Value) -> Tensor {
    let n = Tensor::from_vec([13], counts(&r["binomial_n"])).astype(dtype);
    let p = Tensor::from_vec([13], counts(&r["binomial_p"])).astype(dtype);
    match name {
        "edges" => random::binomial(key, &n, &p, [13], dtype),
        "inversion" => random::binomial(key, 20.0, 0.4, [3, 5], dtype),
        "inversion_complement" => random::binomial(key, 20.0, 0.6, [20], dtype),
        "rejection" => random::binomial(key, 500.0, 0.3, [300], dtype),
        "rejection_complement" => random::binomial(key, 47.0, 0.55, [100], dtype),
        other => panic!("no case {other}"),
    }
}

/// Binomial counts, NaN and infinite ones included, are JAX's exactly: both methods' accept
/// tests and floors decide them.
#[test]
fn binomial_counts_match_jax_eagerly_and_jitted() {
    let r: Value = serde_json::from_str(include_str!("jax/random_more_reference.json")).unwrap();
    let cases = r["binomial_cases"].as_array().unwrap();
    assert_eq!(cases.len(), 10);
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let dtype = match case["dtype"].as_str().unwrap() {
            "float32" => DType::F32,
            _ => DType::F64,
        };
        let want = counts(&case["value"]);
        let key = random::key(case["seed"].as_u64().unwrap() as u32);
        let eager = binomial_draw(name, &key, dtype, &r);
        let r2 = r.clone();
        let name2 = name.to_string();
        let jitted = jit(move |k: Key| binomial_draw(&name2, &k, dtype, &r2))
            .call(key)
            .unwrap();
        for (how, got) in [("eager", eager), ("jit", jitted)] {
            assert_eq!(got.dtype(), dtype, "{name} {how}");
            let got = got.astype(DType::F64).to_vec::<f64>().unwrap();
            assert_eq!(got.len(), want.len(), "{name} {dtype} {how}");
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                assert!(
                    g == w || (g.is_nan() && w.is_nan()),
                    "binomial {name} {dtype} {how}[{i}]: {g} against JAX's {w}"
                );
            }
        }
    }
}

#[test]
fn bad_parameters_are_errors_at_the_call() {
    let key = random::key(0);
    let e = random::poisson(&key, 3.0, [2], DType::F32)
        .to_vec::<f32>()
        .unwrap_err()
        .to_string();
    assert!(e.contains("poisson: the dtype must be an integer"), "{e}");
    assert!(e.contains("random_more.rs"), "{e}");
    let mean = Tensor::zeros(DType::F32, [3]);
    let e = random::multivariate_normal(
        &key,
        &mean,
        &Tensor::eye(DType::F32, 2),
        None,
        CovarianceFactor::Svd,
        DType::F32,
    )
    .to_vec::<f32>()
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("multivariate_normal: mean must be [.., k] and cov [.., k, k]"),
        "{e}"
    );
    let e = random::binomial(&key, 10.0, 0.5, [2], DType::I32)
        .to_vec::<i32>()
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("binomial: the dtype must be a float type"),
        "{e}"
    );
    // Zero-size draws.
    assert_eq!(random::poisson(&key, 3.0, [0], DType::I32).shape(), [0]);
    assert_eq!(
        random::binomial(&key, 10.0, 0.5, [0, 3], DType::F32).shape(),
        [0, 3]
    );
    assert_eq!(
        random::orthogonal(&key, 2, None, [0], DType::F32).shape(),
        [0, 2, 2]
    );
    assert_eq!(random::t(&key, 2.0, [2, 0], DType::F32).shape(), [2, 0]);
}

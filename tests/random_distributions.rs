//! `random::exponential`, `laplace`, `logistic` and `rademacher` against JAX's draws for the
//! same keys (`tests/jax/generate_distributions.py` wrote `distributions_reference.json`):
//! the same uniform bits, bounds and formulas, so the values agree to XLA's accuracy (its
//! `log1p` and `log` against the interpreter's correctly rounded ones: 4 ulps in f32; in f64
//! XLA's CPU `log1p` was seen 40 ulps from the correctly rounded value, so 256 are allowed)
//! and Rademacher signs exactly; the sample moments are those of the distributions.
#![allow(clippy::unwrap_used, clippy::panic)]

use ferrax::{random, DType, Tensor};
use serde_json::Value;

fn draw(name: &str, seed: u32, shape: &[usize], dtype: DType) -> Tensor {
    let key = random::key(seed);
    let shape = shape.to_vec();
    match name {
        "exponential" => random::exponential(&key, shape, dtype),
        "laplace" => random::laplace(&key, shape, dtype),
        "logistic" => random::logistic(&key, shape, dtype),
        "rademacher" => random::rademacher(&key, shape, dtype),
        other => panic!("no distribution {other}"),
    }
}

fn values(t: &Tensor) -> Vec<f64> {
    match t.dtype() {
        DType::F32 => t
            .to_vec::<f32>()
            .unwrap()
            .into_iter()
            .map(f64::from)
            .collect(),
        DType::I32 => t
            .to_vec::<i32>()
            .unwrap()
            .into_iter()
            .map(f64::from)
            .collect(),
        _ => t.to_vec::<f64>().unwrap(),
    }
}

#[test]
fn draws_match_jax() {
    let record: Value =
        serde_json::from_str(include_str!("jax/distributions_reference.json")).unwrap();
    let cases = record["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 12);
    for case in cases.iter().filter(|c| c["name"] != "choice") {
        let name = case["name"].as_str().unwrap();
        let seed = case["seed"].as_u64().unwrap() as u32;
        let shape: Vec<usize> = case["shape"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d.as_u64().unwrap() as usize)
            .collect();
        let (dtype, ulp) = match case["dtype"].as_str().unwrap() {
            "float32" => (DType::F32, f64::from(f32::EPSILON)),
            "float64" => (DType::F64, 64.0 * f64::EPSILON),
            _ => (DType::I32, 0.0),
        };
        let got = values(&draw(name, seed, &shape, dtype));
        let want: Vec<f64> = case["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect();
        assert_eq!(got.len(), want.len(), "{name}");
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!(
                (g - w).abs() <= 4.0 * ulp * w.abs().max(1.0),
                "{name} {dtype}[{i}]: {g} against JAX's {w}"
            );
        }
    }
}

/// `choice` of 8 with and without replacement, uniform and by probabilities, gives JAX's
/// indices for the same keys.
#[test]
fn choices_match_jax() {
    let record: Value =
        serde_json::from_str(include_str!("jax/distributions_reference.json")).unwrap();
    let cases: Vec<&Value> = record["cases"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["name"] == "choice")
        .collect();
    assert_eq!(cases.len(), 4);
    for case in cases {
        let seed = case["seed"].as_u64().unwrap() as u32;
        let shape: Vec<usize> = case["shape"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d.as_u64().unwrap() as usize)
            .collect();
        let replace = case["replace"].as_bool().unwrap();
        let p = case["p"].as_array().map(|p| {
            Tensor::from_vec(
                [p.len()],
                p.iter()
                    .map(|v| v.as_f64().unwrap() as f32)
                    .collect::<Vec<f32>>(),
            )
        });
        let got = random::choice(&random::key(seed), 8, &shape, replace, p.as_ref());
        let want: Vec<i32> = case["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_i64().unwrap() as i32)
            .collect();
        assert_eq!(got.shape(), &shape[..]);
        assert_eq!(
            got.to_vec::<i32>().unwrap(),
            want,
            "seed {seed}, replace {replace}"
        );
    }
    let e = random::choice(&random::key(0), 3, &[4], false, None)
        .to_array()
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("choice: a sample of 4 from a population of 3"),
        "{e}"
    );
}

/// 100,000 draws of each: the distributions' means and variances (exponential 1 and 1,
/// Laplace 0 and 2, logistic 0 and π²/3, Rademacher 0 and 1) within a few standard errors.
#[test]
fn moments() {
    let n = 100_000;
    for (name, mean, variance) in [
        ("exponential", 1.0, 1.0),
        ("laplace", 0.0, 2.0),
        ("logistic", 0.0, std::f64::consts::PI.powi(2) / 3.0),
        ("rademacher", 0.0, 1.0),
    ] {
        let x = values(&draw(name, 17, &[n], DType::F32));
        let m = x.iter().sum::<f64>() / n as f64;
        let v = x.iter().map(|x| (x - m).powi(2)).sum::<f64>() / n as f64;
        let error = (variance / n as f64).sqrt();
        assert!((m - mean).abs() < 5.0 * error, "{name}: mean {m}");
        assert!(
            (v - variance).abs() < 0.05 * variance,
            "{name}: variance {v}"
        );
    }
}

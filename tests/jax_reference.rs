//! Derivatives of composite functions against values computed by JAX in f64
//! (`tests/jax/generate.py` wrote `tests/jax/reference.json`; no Python is needed here).
//! The same functions are written below with ferrax tensors. Tolerance: 1e-10 relative, the
//! f64 target of the autodiff issue; both sides compute in f64 with different but
//! equally-accurate orders of operations.
#![allow(clippy::unwrap_used)]

use ferrax::ir::DotDims;
use ferrax::{grad, hessian, jvp, nn, value_and_grad, DType, Tensor};
use serde_json::Value;

fn tensor(v: &Value) -> Tensor {
    let shape: Vec<usize> = v["shape"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_u64().unwrap() as usize)
        .collect();
    let data: Vec<f64> = v["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_f64().unwrap())
        .collect();
    Tensor::from_vec(shape, data)
}

/// `jnp.arange(lo, hi)` in the dtype of `like`.
fn arange(like: &Tensor, lo: f64, hi: f64) -> Tensor {
    let n = (hi - lo) as usize;
    Tensor::arange(like.dtype(), n) + lo
}

fn log_softmax(z: &Tensor) -> Tensor {
    nn::log_softmax(z, -1)
}

fn layernorm(x: &Tensor, g: &Tensor, b: &Tensor) -> Tensor {
    let c = x - x.mean_keepdims(-1);
    let var = c.square().mean_keepdims(-1);
    c * (var + 1e-5).rsqrt() * g + b
}

/// The scalar function of case `name`, over its inputs.
fn function(name: &str) -> fn(Vec<Tensor>) -> Tensor {
    match name {
        "mlp_loss" => |a| {
            let h = nn::relu(&(a[4].matmul(&a[0]) + &a[1]));
            -(log_softmax(&(h.matmul(&a[2]) + &a[3])) * &a[5])
                .sum(-1)
                .mean(..)
        },
        "softmax_cross_entropy" => |a| -(log_softmax(&a[0]) * &a[1]).sum(..),
        "layernorm" => |a| (layernorm(&a[0], &a[1], &a[2]) * arange(&a[0], 1.0, 7.0)).sum(..),
        "attention" => |a| {
            let (q, k, v) = (a[0].matmul(&a[1]), a[0].matmul(&a[2]), a[0].matmul(&a[3]));
            let s = q.matmul(&k.transpose([0, 2, 1])) / 2.0;
            (nn::softmax(&s, -1).matmul(&v) + &a[0]).square().sum(..)
        },
        "gaussian_log_likelihood" => |a| {
            let z = (&a[0] - &a[1]) / a[2].exp();
            (z.square() * -0.5 - &a[2] - 0.5 * (2.0 * std::f64::consts::PI).ln()).sum(..)
        },
        "logsumexp" => |a| (nn::logsumexp(&a[0], 1) * arange(&a[0], 1.0, 4.0)).sum(..),
        "tanh_mlp" => |a| a[2].matmul(&a[0]).tanh().matmul(&a[1]).tanh().sum(..),
        "sigmoid_bce" => |a| {
            let p = a[1].matmul(&a[0]).sigmoid();
            -(&a[2] * p.log() + (1.0 - &a[2]) * (1.0 - &p).log()).mean(..)
        },
        "huber" => |a| {
            let x = &a[0];
            x.abs()
                .less(1.0)
                .select(x.square() * 0.5, x.abs() - 0.5)
                .sum(..)
        },
        "rational" => |a| ((a[0].pow(2.0) + 1.0) / (a[0].pow(3.0) + 2.0)).sum(..),
        "product" => |a| a[0].prod(1).sum(..),
        "max_pool" => |a| a[0].reshape([4, 2, 3]).max(1).square().sum(..),
        "matmul_chain" => |a| a[0].matmul(&a[1]).matmul(&a[2]).sin().sum(..),
        "batched_matmul_transpose" => |a| {
            let dims = DotDims {
                lhs_batch: vec![0],
                rhs_batch: vec![0],
                lhs_contract: vec![2],
                rhs_contract: vec![2],
            };
            a[0].dot_general(&a[1], dims).cos().sum(..)
        },
        "normalize" => |a| (&a[0] / a[0].square().sum(..).sqrt() * arange(&a[0], 1.0, 7.0)).sum(..),
        "softplus" => |a| a[0].exp().log1p().sum(..),
        "clipped_square" => |a| a[0].clip(-1.0, 1.0).pow(2.0).sum(..),
        "pad_slice_concat" => |a| {
            let padded = a[0].pad(&[(1, -1, 1)], 0.5);
            let strided = a[0].slice_strided(&[1], &[5], &[2]) * 3.0;
            Tensor::concatenate(&[padded, strided], 0).pow(2.0).sum(..)
        },
        "cosine_similarity" => |a| {
            (&a[0] * &a[1]).sum(..) / (a[0].square().sum(..).sqrt() * a[1].square().sum(..).sqrt())
        },
        "expm1_log1p" => |a| (a[0].expm1() * a[0].square().log1p()).sum(..),
        "power" => |a| a[0].pow(&a[1]).sum(..),
        "linear_regression_mse" => |a| (a[2].matmul(&a[0]) + &a[1] - &a[3]).pow(2.0).mean(..),
        "broadcast_reduce" => |a| {
            let prod = (a[0].expand_dims(1) * a[1].expand_dims(0)).max(2);
            (prod + a[0].min(1).expand_dims(1)).sum(..)
        },
        "sin_cos_chain" => |a| (a[0].cos() * 2.0 + &a[0]).sin().sum(..),
        "rsqrt_variance" => |a| {
            let var = (&a[0] - a[0].mean_keepdims(0)).square().mean(0);
            (var + 0.1).rsqrt().sum(..)
        },
        "hessian" | "hessian_vector_product" => |a| {
            let x = &a[0];
            x.pow(3.0).sum(..) * x.slice(&[0], &[1]).reshape(Vec::<usize>::new()) + x.sin().prod(..)
        },
        other => panic!("no ferrax version of case {other}"),
    }
}

fn second_order(name: &str) -> fn(Tensor) -> Tensor {
    match name {
        "second_derivative_sin_exp" => |x| x.sin() * x.exp(),
        "second_derivative_logistic" => |x| (x * 3.0).sigmoid(),
        other => panic!("no ferrax version of case {other}"),
    }
}

fn assert_close(case: &str, k: usize, got: &Tensor, want: &Tensor) {
    assert_eq!(got.shape(), want.shape(), "{case} output {k}");
    let (g, w) = (got.to_vec::<f64>().unwrap(), want.to_vec::<f64>().unwrap());
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        assert!(
            (a - b).abs() <= 1e-10 * b.abs().max(1.0),
            "{case} output {k}[{i}]: ferrax {a}, jax {b}"
        );
    }
}

#[test]
fn composite_functions_match_jax() {
    let reference: Value = serde_json::from_str(include_str!("jax/reference.json")).unwrap();
    let cases = reference["cases"].as_array().unwrap();
    assert!(cases.len() >= 25, "at least 25 composite functions");
    let mut checked = 0;
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let inputs: Vec<Tensor> = case["inputs"]
            .as_array()
            .unwrap()
            .iter()
            .map(tensor)
            .collect();
        let want: Vec<Tensor> = case["outputs"]
            .as_array()
            .unwrap()
            .iter()
            .map(tensor)
            .collect();
        let got: Vec<Tensor> = match name {
            "second_derivative_sin_exp" | "second_derivative_logistic" => {
                let f = second_order(name);
                let xs = inputs[0].to_vec::<f64>().unwrap();
                let d2: Vec<f64> = xs
                    .iter()
                    .map(|&x| grad(grad(f))(Tensor::scalar(x)).to_vec::<f64>().unwrap()[0])
                    .collect();
                vec![Tensor::from_vec([d2.len()], d2)]
            }
            "hessian" => {
                let f = function(name);
                vec![hessian(move |x: Tensor| f(vec![x]))(&inputs[0]).unwrap()]
            }
            "hessian_vector_product" => {
                let f = function(name);
                let g = grad(move |x: Tensor| f(vec![x]));
                vec![jvp(g, &inputs[0], &inputs[1]).unwrap().1]
            }
            _ => {
                let (value, grads) = value_and_grad(function(name))(inputs);
                std::iter::once(value).chain(grads).collect()
            }
        };
        assert_eq!(got.len(), want.len(), "{name}");
        for (k, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_close(name, k, g, w);
        }
        checked += 1;
    }
    assert_eq!(checked, cases.len());
}

/// Every first-order case again in f32, against JAX's own f32 results. Both sides round
/// differently inside (summation order, fused or not), so the bound is relative to each
/// output's largest magnitude: 1e-5, the f32 target of the autodiff issue.
#[test]
fn f32_gradients_match_jax_to_1e_5() {
    let reference: Value = serde_json::from_str(include_str!("jax/reference.json")).unwrap();
    let mut checked = 0;
    for case in reference["cases"].as_array().unwrap() {
        let Some(outputs) = case["outputs_f32"].as_array() else {
            continue;
        };
        let name = case["name"].as_str().unwrap();
        let inputs: Vec<Tensor> = case["inputs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| tensor(v).astype(DType::F32))
            .collect();
        let (value, grads) = value_and_grad(function(name))(inputs);
        for (k, (g, w)) in std::iter::once(value).chain(grads).zip(outputs).enumerate() {
            let (g, w) = (
                g.to_vec::<f32>().unwrap(),
                tensor(w).to_vec::<f64>().unwrap(),
            );
            let scale = w.iter().fold(1e-6f64, |m, v| m.max(v.abs()));
            for (i, (a, b)) in g.iter().zip(&w).enumerate() {
                assert!(
                    ((*a as f64) - b).abs() <= 1e-5 * scale,
                    "{name} output {k}[{i}]: ferrax {a}, jax {b}"
                );
            }
        }
        checked += 1;
    }
    assert_eq!(checked, 25);
}

/// The indexing cases of `tests/jax/generate_indexing.py`: the same functions with ferrax's
/// `take`, `take_along_axis`, `at(..)` and dynamic slices, value and gradients to 1e-10.
#[test]
fn indexing_gradients_match_jax() {
    let reference: Value =
        serde_json::from_str(include_str!("jax/indexing_reference.json")).unwrap();
    let ints = |key: &str| -> Tensor {
        let v = &reference["indices"][key];
        let rows: Vec<&Value> = v.as_array().unwrap().iter().collect();
        let nested = rows[0].is_array();
        let data: Vec<i64> = if nested {
            rows.iter()
                .flat_map(|r| r.as_array().unwrap().iter().map(|x| x.as_i64().unwrap()))
                .collect()
        } else {
            rows.iter().map(|x| x.as_i64().unwrap()).collect()
        };
        let shape = if nested {
            vec![rows.len(), data.len() / rows.len()]
        } else {
            vec![rows.len()]
        };
        Tensor::from_vec(shape, data)
    };
    let (rows, cols, scatter, repeated) = (
        ints("rows"),
        ints("cols"),
        ints("scatter"),
        ints("repeated"),
    );
    let starts = ints("starts").to_vec::<i64>().unwrap();
    let (i, j) = (Tensor::scalar(starts[0]), Tensor::scalar(starts[1]));
    let weighted = |y: &Tensor| {
        let n = y.numel();
        let w: Vec<f64> = (0..n)
            .map(|k| {
                if n == 1 {
                    0.5
                } else {
                    0.5 + k as f64 / (n - 1) as f64
                }
            })
            .collect();
        (y * Tensor::from_vec(y.shape().to_vec(), w)).sum(..)
    };
    let mut checked = 0;
    for case in reference["cases"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let inputs: Vec<Tensor> = case["inputs"]
            .as_array()
            .unwrap()
            .iter()
            .map(tensor)
            .collect();
        let want: Vec<Tensor> = case["outputs"]
            .as_array()
            .unwrap()
            .iter()
            .map(tensor)
            .collect();
        let f = |a: Vec<Tensor>| -> Tensor {
            match name {
                "embedding" => weighted(&(a[0].take(&rows, 0) + &a[1]).tanh()),
                "gather_rows_clamped" => {
                    let idx = Tensor::from_vec([4], vec![0i64, 7, -1, 2]);
                    weighted(&a[0].at(&idx).get().sin())
                }
                "take_along_axis" => weighted(&a[0].take_along_axis(&cols, 1).exp()),
                "scatter_set" => weighted(&a[0].at(&scatter).set(&a[1]).square()),
                "scatter_add" => weighted(&a[0].at(&repeated).add(&a[1]).sin()),
                "scatter_mul" => weighted(&a[0].at(&scatter).mul(&a[1])),
                "scatter_max" => weighted(&a[0].at(&repeated).max(&a[1])),
                "scatter_min" => weighted(&a[0].at(&scatter).min(&a[1])),
                "dynamic_slices" => {
                    let s = a[0].dynamic_slice(&[&i, &j], &[2, 3]);
                    let w = a[0].dynamic_update_slice(&(&a[1] * &a[1]), &[&j, &i]);
                    weighted(&s.sin()) + weighted(&w.exp())
                }
                other => panic!("no ferrax version of case {other}"),
            }
        };
        let (value, grads) = value_and_grad(f)(inputs);
        let got: Vec<Tensor> = std::iter::once(value).chain(grads).collect();
        assert_eq!(got.len(), want.len(), "{name}");
        for (k, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_close(name, k, g, w);
        }
        checked += 1;
    }
    assert_eq!(checked, 9);
}

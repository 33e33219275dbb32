//! Window reductions (`Tensor::reduce_window`, `nn::max_pool`, `nn::avg_pool`) and cumulative
//! ones (`cumsum`, `cumprod`, `cummax`, `cummin`) against JAX (`tests/jax/generate_windows.py`,
//! values in `tests/jax/windows_reference.json`): outputs and the gradient of a weighted sum,
//! eagerly and under `jit`; gradients JAX does not define (maxima over dilated windows) and
//! all others again against central differences in f64; integer and bool inputs, empty ones,
//! and bad windows.
//!
//! Tolerances, relative to `max(|want|, 1)`: maxima, minima and window sums, which XLA and
//! ferrax both combine in the window's order, agree to 1e-6 (a sum of six f32 terms and one
//! division for the means); cumulative sums and products, which ferrax computes as a
//! log-step scan and XLA as one sum per prefix, to 4e-6 (37 terms at most).
#![allow(clippy::unwrap_used)]

use ferrax::ir::ReduceOp;
use ferrax::nn;
use ferrax::{jit, value_and_grad, DType, Padding, Tensor, Window};
use serde_json::Value;

#[path = "common/jax_values.rs"]
mod jax_values;
use jax_values::{assert_close, tensor, usizes};

fn reference() -> Value {
    serde_json::from_str(include_str!("jax/windows_reference.json")).unwrap()
}

fn padding(v: &Value) -> Padding {
    match v.as_str() {
        Some("valid") => Padding::Valid,
        Some("same") => Padding::Same,
        _ => Padding::Explicit(
            v.as_array()
                .unwrap()
                .iter()
                .map(|p| (p[0].as_i64().unwrap(), p[1].as_i64().unwrap()))
                .collect(),
        ),
    }
}

/// The ferrax op a reference case describes.
fn apply(spec: &Value, x: &Tensor) -> Tensor {
    let op = spec["op"].as_str().unwrap();
    let axis = || spec["axis"].as_i64().unwrap();
    let window = || usizes(&spec["window"]);
    let strides = || usizes(&spec["strides"]);
    match op {
        "cumsum" => x.cumsum(axis()),
        "cumprod" => x.cumprod(axis()),
        "cummax" => x.cummax(axis()),
        "cummin" => x.cummin(axis()),
        "max_pool" => nn::max_pool(x, &window(), Some(&strides()), padding(&spec["padding"])),
        "avg_pool" => nn::avg_pool(
            x,
            &window(),
            Some(&strides()),
            padding(&spec["padding"]),
            spec["count_include_pad"].as_bool().unwrap(),
        ),
        _ => {
            let mut w = Window::new(window())
                .strides(strides())
                .padding(padding(&spec["padding"]));
            if spec["base_dilation"].is_array() {
                w = w.base_dilation(usizes(&spec["base_dilation"]));
            }
            if spec["window_dilation"].is_array() {
                w = w.window_dilation(usizes(&spec["window_dilation"]));
            }
            let r = match op {
                "sum" => ReduceOp::Sum,
                "max" => ReduceOp::Max,
                "min" => ReduceOp::Min,
                other => panic!("no op {other}"),
            };
            x.reduce_window(r, &w)
        }
    }
}

fn tolerance(spec: &Value) -> f32 {
    match spec["op"].as_str().unwrap() {
        "cumsum" | "cumprod" => 4e-6,
        _ => 1e-6,
    }
}

#[test]
fn windows_and_their_gradients_match_jax_eagerly_and_under_jit() {
    for case in reference()["cases"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let spec = &case["spec"];
        let (x, weights, tol) = (
            tensor(&case["input"]),
            tensor(&case["weights"]),
            tolerance(spec),
        );
        let want = tensor(&case["output"]);
        assert_close(&apply(spec, &x), &want, tol, &format!("{name} eager"));
        let jitted = jit(|x: Tensor| apply(spec, &x)).call(x.clone()).unwrap();
        assert_close(&jitted, &want, tol, &format!("{name} jit"));
        let weighted = |(x, w): (Tensor, Tensor)| (apply(spec, &x) * w).sum(..);
        let (_, (eager, _)) = value_and_grad(weighted)((x.clone(), weights.clone()));
        let compiled = jit(|args: (Tensor, Tensor)| value_and_grad(weighted)(args).1 .0)
            .call((x.clone(), weights.clone()))
            .unwrap();
        if case["grad"].is_object() {
            let want = tensor(&case["grad"]);
            assert_close(&eager, &want, tol, &format!("{name} gradient eager"));
            assert_close(&compiled, &want, tol, &format!("{name} gradient jit"));
        }
        // Central differences of the same weighted sum in f64 (over the finite outputs:
        // windows of padding alone hold -inf, whose gradient is 0).
        let x64 = x.astype(DType::F64);
        let w64 = weights.astype(DType::F64).to_vec::<f64>().unwrap();
        let value = |x: &Tensor| -> f64 {
            let out = apply(spec, x).to_vec::<f64>().unwrap();
            out.iter()
                .zip(&w64)
                .filter(|(y, _)| y.is_finite())
                .map(|(y, w)| y * w)
                .sum()
        };
        let base = x64.to_vec::<f64>().unwrap();
        let grad = eager.to_vec::<f32>().unwrap();
        let h = 1e-6;
        for (i, &g) in grad.iter().enumerate() {
            let at = |d: f64| {
                let mut v = base.clone();
                v[i] += d;
                value(&Tensor::from_vec(x.shape().to_vec(), v))
            };
            let fd = (at(h) - at(-h)) / (2.0 * h);
            assert!(
                (fd - f64::from(g)).abs() <= 1e-4 * fd.abs().max(1.0),
                "{name}: d/dx[{i}] = {g}, finite differences {fd}"
            );
        }
    }
}

/// Integers sum and multiply exactly, bools run as `or`/`and`, and empty axes give empty
/// results, compiled as eagerly.
#[test]
fn integer_bool_and_empty_windows() {
    let x = Tensor::from_vec([2, 4], vec![1i32, -2, 3, 4, i32::MAX, 1, 0, -5]);
    assert_eq!(
        x.cumsum(1).to_vec::<i32>().unwrap(),
        vec![
            1,
            -1,
            2,
            6,
            i32::MAX,
            i32::MIN,
            i32::MIN,
            i32::MIN.wrapping_sub(5)
        ]
    );
    assert_eq!(
        x.cummax(0).to_vec::<i32>().unwrap(),
        vec![1, -2, 3, 4, i32::MAX, 1, 3, 4]
    );
    let sums =
        jit(|x: Tensor| x.reduce_window(ReduceOp::Sum, &Window::new([1, 2]).strides([1, 2])))
            .call(x.clone())
            .unwrap();
    assert_eq!(
        sums.to_vec::<i32>().unwrap(),
        vec![-1, 7, i32::MAX.wrapping_add(1), -5]
    );
    let b = Tensor::from_vec([5], vec![false, true, false, false, true]);
    assert_eq!(
        b.cumsum(0).to_vec::<bool>().unwrap(),
        vec![false, true, true, true, true]
    );
    assert_eq!(b.cumprod(0).to_vec::<bool>().unwrap(), vec![false; 5]);
    let empty = Tensor::zeros(DType::F32, [0, 3]);
    assert_eq!(empty.cumsum(0).shape(), [0, 3]);
    let pooled = empty.reduce_window(ReduceOp::Max, &Window::new([2, 2]));
    assert_eq!(pooled.shape(), [0, 2]);
    // SAME padding of an empty axis fits no window, as lax.padtype_to_pads pads it.
    let same = Tensor::zeros(DType::F32, [0])
        .reduce_window(ReduceOp::Max, &Window::new([3]).padding(Padding::Same));
    assert_eq!(same.shape(), [0]);
    // Sums start at +0, as JAX's do: a sum of -0s is +0.
    let negative_zero = Tensor::from_vec([2], vec![-0.0f32, -0.0]);
    for sums in [
        negative_zero.cumsum(0),
        negative_zero.reduce_window(ReduceOp::Sum, &Window::new([1])),
    ] {
        let bits: Vec<u32> = sums
            .to_vec::<f32>()
            .unwrap()
            .iter()
            .map(|v| v.to_bits())
            .collect();
        assert_eq!(bits, vec![0, 0]);
    }
    let too_big =
        Tensor::zeros(DType::F32, [1, 3]).reduce_window(ReduceOp::Max, &Window::new([2, 2]));
    assert_eq!(too_big.to_vec::<f32>().unwrap(), Vec::<f32>::new());
}

#[test]
fn bad_windows_are_errors_naming_the_call() {
    let x = Tensor::zeros(DType::F32, [4, 4]);
    let e = x
        .reduce_window(ReduceOp::Sum, &Window::new([2]))
        .to_array()
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("reduce_window") && e.contains("need 2 sizes"),
        "{e}"
    );
    assert!(e.contains("windows.rs"), "{e}");
    let e = x
        .reduce_window(ReduceOp::Sum, &Window::new([2, 2]).strides([0, 1]))
        .to_array()
        .unwrap_err()
        .to_string();
    assert!(e.contains("positive sizes"), "{e}");
    let e = x
        .reduce_window(ReduceOp::Sum, &Window::new([100, 100]))
        .to_array()
        .unwrap_err()
        .to_string();
    assert!(e.contains("more than 4096 positions"), "{e}");
    let e = x.cumsum(2).to_array().unwrap_err().to_string();
    assert!(e.contains("cumsum: axis 2 is out of range"), "{e}");
    let e = nn::max_pool(&x, &[2, 2], None, Padding::Valid)
        .to_array()
        .unwrap_err()
        .to_string();
    assert!(e.contains("pooling") && e.contains("at least 3"), "{e}");
    let image = Tensor::zeros(DType::F32, [1, 4, 4, 1]);
    let e = nn::avg_pool(&image, &[1 << 32, 1 << 32], None, Padding::Valid, true)
        .to_array()
        .unwrap_err()
        .to_string();
    assert!(e.contains("more than 4096 positions"), "{e}");
}

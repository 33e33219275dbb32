//! Every `ferrax::nn` layer's gradients against central finite differences in f64, with no
//! reference values from elsewhere: `tests/nn.rs` checks the same layers against JAX, which
//! would not catch a rule that JAX and ferrax share by construction (both written from the
//! same formulas). The loss is a weighted sum of the layer's output with fixed non-uniform
//! weights in [0.5, 1.5] (so every output element gets its own cotangent), differentiated
//! eagerly and under `jit` with respect to every float input and parameter, and compared at up
//! to 20 evenly spread coordinates of each against `(L(x + h) - L(x - h)) / 2h`, L evaluated
//! eagerly.
//!
//! Tolerance: with h = 1e-6 in f64, truncation error is `h²·|L'''|/6` (~1e-12 for these
//! O(1)-curvature layers) and rounding error `~ε·|L|/h` (~2e-10·|L|, |L| ≤ 15 here), so
//! differences agree with a correct gradient to ~3e-9 (measured: at most 1.5e-9, the loss);
//! the test allows 2e-8 relative to `max(|g|, 1)`. A wrong rule (a missing term of the norms'
//! mean, a factor, a transpose, a lost scatter-add of repeated ids) is off by 1e-3 or more.
//! Exact GELU is checked as the f32-accurate composite it is (`nn::erfc`): differences and
//! autodiff see the same smooth function.
#![allow(clippy::unwrap_used)]

#[path = "common/numbers.rs"]
mod numbers;

use ferrax::nn::{self, Attention, Linear};
use ferrax::{grad, jit, DType, Tensor};
use numbers::uniform as values;
use std::collections::BTreeMap;

type Inputs = BTreeMap<String, Tensor>;

const H: f64 = 1e-6;
const TOLERANCE: f64 = 2e-8;
const COORDINATES: usize = 20;

fn t64(shape: &[usize], seed: u64, lo: f64, hi: f64) -> Tensor {
    let n = shape.iter().product();
    Tensor::from_vec(shape.to_vec(), values(n, seed, lo, hi))
}

fn inputs(list: &[(&str, Tensor)]) -> Inputs {
    list.iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
}

fn linear(w: &Tensor, b: Option<&Tensor>) -> Linear {
    Linear {
        w: w.clone(),
        b: b.cloned(),
    }
}

/// Up to [`COORDINATES`] indices spread evenly over `0..n`, first and last included.
fn coordinates(n: usize) -> Vec<usize> {
    if n <= COORDINATES {
        return (0..n).collect();
    }
    (0..COORDINATES)
        .map(|k| k * (n - 1) / (COORDINATES - 1))
        .collect()
}

/// Checks the gradient of `sum(layer(inputs) * weights)` with respect to every input, eagerly
/// and under `jit`, against central differences at [`coordinates`].
fn check(name: &str, layer: impl Fn(&Inputs) -> Tensor + Send + Sync, x: Inputs) {
    let out = layer(&x);
    assert_eq!(out.dtype(), DType::F64, "{name}: the layer's output dtype");
    let weights = t64(out.shape(), 999, 0.5, 1.5);
    let loss = |a: Inputs| (layer(&a) * &weights).sum(..);
    let eager = grad(loss)(x.clone());
    let jitted = jit(|a: Inputs| grad(loss)(a)).call(x.clone()).unwrap();
    for (key, t) in &x {
        let base = t.to_vec::<f64>().unwrap();
        let g = eager[key].to_vec::<f64>().unwrap();
        let gj = jitted[key].to_vec::<f64>().unwrap();
        assert_eq!(eager[key].shape(), t.shape(), "{name}: d/d{key} shape");
        assert_eq!(eager[key].dtype(), DType::F64, "{name}: d/d{key} dtype");
        for i in coordinates(base.len()) {
            let at = |delta: f64| {
                let mut v = base.clone();
                v[i] += delta;
                let mut a = x.clone();
                a.insert(key.clone(), Tensor::from_vec(t.shape().to_vec(), v));
                loss(a).to_vec::<f64>().unwrap()[0]
            };
            let fd = (at(H) - at(-H)) / (2.0 * H);
            for (how, g) in [("eager", g[i]), ("jit", gj[i])] {
                assert!(
                    (g - fd).abs() <= TOLERANCE * g.abs().max(1.0),
                    "{name}: d/d{key}[{i}] {how} = {g}, finite differences {fd} (diff {:e})",
                    (g - fd).abs()
                );
            }
        }
    }
}

#[test]
fn linear_layer() {
    let x = inputs(&[
        ("x", t64(&[2, 3, 4], 1, -1.0, 1.0)),
        ("w", t64(&[4, 5], 2, -1.0, 1.0)),
        ("b", t64(&[5], 3, -0.5, 0.5)),
    ]);
    check(
        "linear",
        |a| nn::linear(&a["x"], &linear(&a["w"], Some(&a["b"]))),
        x.clone(),
    );
    check(
        "linear without bias",
        |a| nn::linear(&a["x"], &linear(&a["w"], None)),
        inputs(&[("x", x["x"].clone()), ("w", x["w"].clone())]),
    );
}

#[test]
fn norms() {
    let x = inputs(&[
        ("x", t64(&[3, 6], 4, -2.0, 2.0)),
        ("g", t64(&[6], 5, 0.5, 1.5)),
        ("b", t64(&[6], 6, -0.5, 0.5)),
    ]);
    check(
        "layer_norm",
        |a| nn::layer_norm(&a["x"], &a["g"], &a["b"], 1e-5),
        x.clone(),
    );
    check(
        "rms_norm",
        |a| nn::rms_norm(&a["x"], &a["g"], 1e-6),
        inputs(&[("x", x["x"].clone()), ("g", x["g"].clone())]),
    );
}

#[test]
fn activations() {
    // Both signs and both tails of GELU's exact form (its branches meet at 0, which these
    // values keep away from by far more than h).
    let x = inputs(&[("x", t64(&[4, 5], 7, -4.0, 4.0))]);
    check("gelu tanh", |a| nn::gelu(&a["x"], true), x.clone());
    check("gelu exact", |a| nn::gelu(&a["x"], false), x.clone());
    check("silu", |a| nn::silu(&a["x"]), x);
}

#[test]
fn attention() {
    let (d, heads) = (6, 2);
    let x = inputs(&[
        ("x", t64(&[2, 4, d], 8, -1.0, 1.0)),
        ("w_qkv", t64(&[d, 3 * d], 9, -0.5, 0.5)),
        ("b_qkv", t64(&[3 * d], 10, -0.1, 0.1)),
        ("w_o", t64(&[d, d], 11, -0.5, 0.5)),
        ("b_o", t64(&[d], 12, -0.1, 0.1)),
    ]);
    let layer = |a: &Inputs| {
        let p = Attention {
            qkv: linear(&a["w_qkv"], Some(&a["b_qkv"])),
            proj: linear(&a["w_o"], Some(&a["b_o"])),
        };
        nn::causal_self_attention(&a["x"], &p, heads)
    };
    check("causal_self_attention", layer, x);
}

#[test]
fn cross_entropy() {
    let labels = Tensor::from_vec([2, 3], vec![0i32, 4, 2, 2, 1, 3]);
    check(
        "softmax_cross_entropy_with_integer_labels",
        |a| nn::softmax_cross_entropy_with_integer_labels(&a["logits"], &labels),
        inputs(&[("logits", t64(&[2, 3, 5], 13, -3.0, 3.0))]),
    );
}

#[test]
fn embedding_lookup() {
    // Repeated ids (their rows' cotangents add up) and a negative one (counting from the end).
    let ids = Tensor::from_vec([2, 4], vec![1i32, 5, 1, 0, 3, -1, 5, 1]);
    check(
        "embedding",
        |a| nn::embedding(&a["table"], &ids),
        inputs(&[("table", t64(&[6, 3], 14, -1.0, 1.0))]),
    );
}

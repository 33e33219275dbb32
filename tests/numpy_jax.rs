//! The `jax.numpy`, `jax.nn` and optax functions ferrax composes from its primitives, against
//! values computed by JAX in f64 (`tests/jax/generate_numpy.py` wrote
//! `tests/jax/numpy_reference.json`; no Python is needed here): `stack`, `var`, `std`, `any`,
//! `all`, `tril`, `triu`, `eye`, `diagonal`, `repeat`, `tile`, `roll`, `linspace`,
//! `logaddexp` (infinities included), `split`, the vector and Frobenius norms, `outer`, `kron`,
//! `meshgrid`, `nan_to_num`, `isclose`, `searchsorted`, the activations `softplus`, `log_sigmoid`, `leaky_relu`,
//! `elu`, `relu6`, `hard_tanh`, `glu` at and around their kinks, and the losses
//! `softmax_cross_entropy`, `sigmoid_binary_cross_entropy`, `l2_loss`, `huber_loss`, and
//! `einsum` (products, batches, implicit output, traces, diagonals, `...`, three operands);
//! each
//! value, and the gradient of `sum(f(x)·w)` where JAX defines one. Tolerance: 1e-12 of the
//! largest magnitude (the same formulas in f64); infinities and NaN must match exactly.
#![allow(clippy::unwrap_used, clippy::panic)]

use ferrax::{grad, nn, DType, Tensor};
use serde_json::Value;

fn data(v: &Value) -> (Vec<usize>, Vec<f64>) {
    let shape = v["shape"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_u64().unwrap() as usize)
        .collect();
    let values = v["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| match x {
            Value::Null => f64::NAN,
            Value::String(s) if s == "inf" => f64::INFINITY,
            Value::String(_) => f64::NEG_INFINITY,
            x => x.as_f64().unwrap(),
        })
        .collect();
    (shape, values)
}

fn tensor(v: &Value) -> Tensor {
    let (shape, values) = data(v);
    Tensor::from_vec(shape, values)
}

/// The function `name` of the generator, written with ferrax.
fn function(name: &str, args: &[Tensor]) -> Tensor {
    let a = args.first();
    let x = || a.unwrap();
    match name {
        "stack" => Tensor::stack(args, 1),
        "var" => x().var([1]),
        "std" => x().std([0]),
        "any" => x().any([1]).astype(DType::F64),
        "all" => x().all([1]).astype(DType::F64),
        "tril" => x().tril(-1),
        "triu" => x().triu(1),
        "eye" => Tensor::eye(DType::F64, 3),
        "diagonal" => x().diagonal(),
        "repeat" => x().repeat(2, 1),
        "tile" => x().tile(&[2, 1, 3]),
        "roll" => x().roll(-2, 1),
        "roll_wrap" => x().roll(7, 0),
        "linspace" => Tensor::linspace(DType::F64, 0.5, 2.0, 7),
        "logaddexp" | "logaddexp_grad" => x().logaddexp(&args[1]),
        "softplus" => nn::softplus(x()),
        "log_sigmoid" => nn::log_sigmoid(x()),
        "leaky_relu" => nn::leaky_relu(x(), 0.1),
        "elu" => nn::elu(x(), 1.5),
        "relu6" => nn::relu6(x()),
        "hard_tanh" => nn::hard_tanh(x()),
        "glu" => nn::glu(x(), -1),
        "softmax_cross_entropy" => nn::softmax_cross_entropy(x(), &args[1]),
        "sigmoid_binary_cross_entropy" => nn::sigmoid_binary_cross_entropy(x(), &args[1]),
        "l2_loss" => nn::l2_loss(x(), &args[1]),
        "huber_loss" => nn::huber_loss(x(), &args[1], 1.5),
        "split" => Tensor::stack(&x().split(3, 1), 0),
        "split_indices" => {
            let pieces = x().split_at_indices(&[1, 3], 0);
            Tensor::concatenate(&pieces, 0)
                * Tensor::linspace(DType::F64, 1.0, 5.0, 5).reshape([5, 1])
        }
        "norm_2" => x().vector_norm(2.0, 1),
        "norm_1" => x().vector_norm(1.0, 0),
        "norm_inf" => x().vector_norm(f64::INFINITY, 1),
        "norm_neginf" => x().vector_norm(f64::NEG_INFINITY, 1),
        "norm_0" => x().vector_norm(0.0, 1),
        "norm_3" => x().vector_norm(3.0, 1),
        "frobenius" => x().frobenius_norm(),
        "outer" => x().outer(&args[1]),
        "kron" => x().kron(&args[1]),
        "meshgrid_xy" => Tensor::stack(&Tensor::meshgrid(&[x(), &args[1]], true), 0),
        "meshgrid_ij" => {
            let grids = Tensor::meshgrid(&[x(), &args[1], &args[2]], false);
            let flat: Vec<Tensor> = grids.iter().map(|g| g.reshape([g.numel()])).collect();
            Tensor::stack(&flat, 0)
        }
        "nan_to_num" => x().nan_to_num(0.5, 9.0, -9.0),
        "searchsorted_left" => x().searchsorted(&args[1], false).astype(DType::F64),
        "searchsorted_right" => x().searchsorted(&args[1], true).astype(DType::F64),
        "isclose" => x().isclose(&args[1], 1e-3, 1e-6).astype(DType::F64),
        other => match other.strip_prefix("einsum:") {
            Some(spec) => Tensor::einsum(spec, &args.iter().collect::<Vec<_>>()),
            None => panic!("no function {other}"),
        },
    }
}

fn weights(shape: &[usize]) -> Tensor {
    let n: usize = shape.iter().product();
    Tensor::from_vec(
        shape.to_vec(),
        (1..=n).map(|i| i as f64 / n as f64).collect::<Vec<f64>>(),
    )
}

fn assert_close(what: &str, got: &Tensor, want: &Value) {
    let (shape, want) = data(want);
    assert_eq!(got.shape(), &shape[..], "{what}: shape");
    let got = got.to_vec::<f64>().unwrap();
    let scale = want
        .iter()
        .filter(|v| v.is_finite())
        .fold(1.0f64, |m, v| m.max(v.abs()));
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        let ok = match (g.is_finite(), w.is_finite()) {
            (true, true) => (g - w).abs() <= 1e-12 * scale,
            _ => g == w || (g.is_nan() && w.is_nan()),
        };
        assert!(ok, "{what}[{i}]: {g} against JAX's {w}");
    }
}

#[test]
fn composites_match_jax() {
    let record: Value = serde_json::from_str(include_str!("jax/numpy_reference.json")).unwrap();
    let cases = record["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 58);
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let args: Vec<Tensor> = case["inputs"]
            .as_array()
            .unwrap()
            .iter()
            .map(tensor)
            .collect();
        assert_close(name, &function(name, &args), &case["value"]);
        if let Some(want) = case.get("grad") {
            let shape = data(&case["value"]).0;
            let rest = args[1..].to_vec();
            let g = grad(|x: Tensor| {
                let mut all = vec![x];
                all.extend(rest.iter().cloned());
                (function(name, &all) * weights(&shape)).sum(..)
            })(args[0].clone());
            assert_close(&format!("{name}'s gradient"), &g, want);
        }
    }
}

/// Bad axes and shapes are errors naming the function and the caller's line.
#[test]
fn errors() {
    let v = Tensor::from_vec([3], vec![1.0f64, 2.0, 3.0]);
    for (what, t) in [
        ("tril", v.tril(0)),
        ("diagonal", v.diagonal()),
        ("repeat", v.repeat(2, 1)),
        ("roll", v.roll(1, -2)),
        ("glu", nn::glu(&v, 0)),
    ] {
        let e = t.to_array().unwrap_err().to_string();
        assert!(
            e.contains(what) && e.contains("tests/numpy_jax.rs"),
            "{what}: {e}"
        );
    }
    let m = Tensor::from_vec([2, 3], vec![1.0f64; 6]);
    for (spec, operands, why) in [
        ("ij,jk->ik", vec![&m], "2 operand subscripts for 1 operands"),
        ("ij,jk->ik", vec![&m, &m], "label 'j' has sizes 3 and 2"),
        ("ij->ii", vec![&m], "appears twice"),
        ("ij->q", vec![&m], "is no operand's"),
        ("i1", vec![&m], "letters and `...` only"),
        ("ijk", vec![&m], "names 3 dimensions of an operand of 2"),
    ] {
        let e = Tensor::einsum(spec, &operands)
            .to_array()
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(why) && e.contains("tests/numpy_jax.rs"),
            "{spec}: {e}"
        );
    }
    // Malformed subscripts of every kind are errors, never panics.
    let scalar = Tensor::scalar(2.0f64);
    for spec in [
        "",
        "->",
        ",",
        "i,->i",
        "...,...",
        "i...j...",
        "...->......",
        "->i",
        "ii->ii",
        "é",
        "i.j",
        "ij->",
        "..i",
        "i,j,k->ijk",
        "abcdefghijklmnopqrstuvwxyz",
    ] {
        for operands in [vec![&m], vec![&m, &m], vec![&scalar], vec![]] {
            let _ = Tensor::einsum(spec, &operands).to_array();
        }
    }
    let e = Tensor::einsum("i...j...", &[&m])
        .to_array()
        .unwrap_err()
        .to_string();
    assert!(e.contains("`...` at most once"), "{e}");
    assert_eq!(
        Tensor::einsum("", &[&scalar]).to_vec::<f64>().unwrap(),
        [2.0]
    );
    let six = Tensor::from_vec([6], vec![1.0f64; 6]);
    let pieces = six.split(4, 0);
    let e = pieces[0].to_array().unwrap_err().to_string();
    assert!(e.contains("split: 4 equal sections of the 6"), "{e}");
    let e = v.kron(&m).to_array().unwrap_err().to_string();
    assert!(e.contains("kron: two matrices"), "{e}");
    let empty = Tensor::from_vec([0], Vec::<f64>::new());
    assert_eq!(empty.roll(3, 0).shape(), &[0]);
    assert_eq!(Tensor::linspace(DType::F32, 0.0, 1.0, 0).shape(), &[0]);
    assert_eq!(
        Tensor::linspace(DType::F64, 2.0, 5.0, 1)
            .to_vec::<f64>()
            .unwrap(),
        [2.0]
    );
}

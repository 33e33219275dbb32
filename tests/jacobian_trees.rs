//! Jacobians and Hessians of functions of a tree of parameters (`jacfwd_tree`,
//! `jacrev_tree`, `hessian_tree`) against `jax.jacfwd`, `jax.jacrev` and `jax.hessian` of the
//! same functions of a parameter dictionary (`tests/jax/generate_jacobians.py` wrote
//! `tests/jax/jacobians_reference.json`), to 1e-12 of the largest magnitude (the same f64
//! arithmetic), and `ravel_pytree`'s round trip across dtypes.
#![allow(clippy::unwrap_used)]

use ferrax::{hessian_tree, jacfwd_tree, jacrev_tree, jit, ravel_pytree, DType, Tensor, Tree};
use serde_json::Value;
use std::collections::BTreeMap;

type Params = BTreeMap<String, Tensor>;

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
        .map(|x| x.as_f64().unwrap())
        .collect();
    Tensor::from_vec(shape, data)
}

fn params(v: &Value) -> Params {
    v.as_object()
        .unwrap()
        .iter()
        .map(|(k, t)| (k.clone(), tensor(t)))
        .collect()
}

fn assert_tree_close(what: &str, got: &Params, want: &Params) {
    assert_eq!(
        got.keys().collect::<Vec<_>>(),
        want.keys().collect::<Vec<_>>(),
        "{what}"
    );
    for (k, w) in want {
        let g = &got[k];
        assert_eq!(g.shape(), w.shape(), "{what}.{k}");
        let (g, w) = (g.to_vec::<f64>().unwrap(), w.to_vec::<f64>().unwrap());
        let scale = w.iter().fold(1.0f64, |m, v| m.max(v.abs()));
        for (i, (a, b)) in g.iter().zip(&w).enumerate() {
            assert!(
                (a - b).abs() <= 1e-12 * scale,
                "{what}.{k}[{i}]: {a} against JAX's {b}"
            );
        }
    }
}

#[test]
fn tree_jacobians_and_hessians_match_jax() {
    let r: Value = serde_json::from_str(include_str!("jax/jacobians_reference.json")).unwrap();
    let x = tensor(&r["x"]);
    let p = params(&r["params"]);
    let layer = |p: Params| (x.matmul(&p["w"]) + &p["b"]).tanh();
    let loss = |p: Params| {
        let weights = Tensor::linspace(DType::F64, 1.0, 3.0, 3);
        (layer(p.clone()).square() * weights).sum(..) + p["w"].pow(3.0).sum(..)
    };
    assert_tree_close(
        "jacfwd",
        &jacfwd_tree(layer)(&p).unwrap(),
        &params(&r["jacfwd"]),
    );
    assert_tree_close(
        "jacrev",
        &jacrev_tree(layer)(&p).unwrap(),
        &params(&r["jacrev"]),
    );
    let h = hessian_tree(loss)(&p).unwrap();
    assert_eq!(h.len(), 2);
    for (row, key) in h.iter().zip(["b", "w"]) {
        assert_tree_close(&format!("hessian.{key}"), row, &params(&r["hessian"][key]));
    }
    // Inside jit, the same Jacobian.
    let compiled = jit(move |p: Params| {
        jacrev_tree(|p: Params| (x.matmul(&p["w"]) + &p["b"]).tanh())(&p).unwrap()
    })
    .call(p.clone())
    .unwrap();
    assert_tree_close("jit jacrev", &compiled, &params(&r["jacrev"]));
}

#[test]
fn ravel_pytree_round_trips_across_dtypes() {
    let tree = (
        Tensor::from_vec([2], vec![1.5f32, -2.0]),
        vec![Tensor::from_vec([2, 2], vec![1.0f64, 2.0, 3.0, 4.0])],
        Tensor::scalar(7i32),
    );
    let (flat, unravel) = ravel_pytree(&tree);
    assert_eq!(flat.dtype(), DType::F64);
    assert_eq!(
        flat.to_vec::<f64>().unwrap(),
        [1.5, -2.0, 1.0, 2.0, 3.0, 4.0, 7.0]
    );
    let back = unravel(&(flat * 2.0)).unwrap();
    assert_eq!(back.0.dtype(), DType::F32);
    assert_eq!(back.0.to_vec::<f32>().unwrap(), [3.0, -4.0]);
    assert_eq!(back.1[0].to_vec::<f64>().unwrap(), [2.0, 4.0, 6.0, 8.0]);
    assert_eq!(back.2.to_vec::<i32>().unwrap(), [14]);
    let e = unravel(&Tensor::zeros(DType::F64, [3]))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("a vector of 7 elements"), "{e}");
    let (empty, unravel_empty) = ravel_pytree(&Vec::<Tensor>::new());
    assert_eq!(empty.shape(), &[0]);
    assert!(unravel_empty(&empty).unwrap().is_empty());
    assert_eq!(tree.leaves().len(), 3);
}

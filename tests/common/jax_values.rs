//! Reading the JAX-generated reference values (`tests/jax/*_reference.json`: tensors as
//! `{"shape": [..], "data": [..]}`) and comparing f32 results with them. Test files include it
//! by `#[path]`, alone, without the corpus of `common`.
#![allow(dead_code)]

use ferrax::Tensor;
use serde_json::Value;

/// A JSON list of sizes.
pub fn usizes(v: &Value) -> Vec<usize> {
    v.as_array()
        .expect("a list")
        .iter()
        .map(|d| d.as_u64().expect("a size") as usize)
        .collect()
}

/// An f32 tensor written as `{"shape": [..], "data": [..]}`, non-finite elements as strings
/// (`"inf"`, `"-inf"`, `"nan"`).
pub fn tensor(v: &Value) -> Tensor {
    let data: Vec<f32> = v["data"]
        .as_array()
        .expect("data")
        .iter()
        .map(|d| match d.as_str() {
            Some(s) => s.parse().expect("a float"),
            None => d.as_f64().expect("a number") as f32,
        })
        .collect();
    Tensor::from_vec(usizes(&v["shape"]), data)
}

/// `got` equals `want` (f32 values JAX computed) to within `tol` relative to `max(|want|, 1)`.
pub fn assert_close(got: &Tensor, want: &Tensor, tol: f32, what: &str) {
    assert_eq!(got.shape(), want.shape(), "{what}: shape");
    let (g, w) = (
        got.to_vec::<f32>().expect("f32 values"),
        want.to_vec::<f32>().expect("f32 values"),
    );
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        assert!(
            a == b || (a - b).abs() <= tol * b.abs().max(1.0),
            "{what}[{i}] = {a}, JAX {b} (diff {:e})",
            (a - b).abs()
        );
    }
}

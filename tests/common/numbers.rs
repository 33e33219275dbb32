//! Deterministic test values and conversions between arrays and `f64`/`c128` vectors, for tests
//! that check numbers against their own references. Tests that need nothing else of `common`
//! include this file alone (`#[path]`), so they do not compile the corpus.
#![allow(dead_code)]

use ferrax::ir::{Complex, Element};
use ferrax::{Array, DType};

pub type C64 = Complex<f64>;

/// `n` deterministic values in [`lo`, `hi`) (xorshift from `seed`).
pub fn uniform(n: usize, seed: u64, lo: f64, hi: f64) -> Vec<f64> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(7);
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            lo + (hi - lo) * ((s >> 11) as f64 / (1u64 << 53) as f64)
        })
        .collect()
}

/// `n` deterministic values in [−1, 1).
pub fn signed(n: usize, seed: u64) -> Vec<f64> {
    uniform(n, seed, -1.0, 1.0)
}

/// The IR's text for the type `dtype[dims]` (`f32[2,3]`).
pub fn shape_text(dtype: &str, dims: &[usize]) -> String {
    let d: Vec<String> = dims.iter().map(usize::to_string).collect();
    format!("{dtype}[{}]", d.join(","))
}

/// `count` deterministic entries in [−1, 1) for a matrix of `dtype` (`"f64"`, `"f32"` or
/// `"c128"`): the real parts from `seed`, the imaginary parts (c128 only) from `seed + 1`.
pub fn entries(count: usize, seed: u64, dtype: &str) -> Vec<C64> {
    let imaginary = match dtype {
        "c128" => signed(count, seed + 1),
        _ => vec![0.0; count],
    };
    signed(count, seed)
        .into_iter()
        .zip(imaginary)
        .map(|(re, im)| C64::new(re, im))
        .collect()
}

/// The rounding unit of `dtype` (`"f32"`, or a type of f64 parts).
pub fn unit(dtype: &str) -> f64 {
    match dtype {
        "f32" => f64::from(f32::EPSILON),
        _ => f64::EPSILON,
    }
}

/// An array of `dims` holding `v`.
pub fn array<T: Element>(dims: &[usize], v: Vec<T>) -> Array {
    Array::new(dims.to_vec(), T::into_elements(v)).unwrap()
}

/// `v` as an array of `dtype` (`"f64"`, `"f32"` or `"c128"`): the real types take the real
/// parts (f32 rounded), c128 all.
pub fn typed(dims: &[usize], v: &[C64], dtype: &str) -> Array {
    match dtype {
        "f64" => array(dims, v.iter().map(|z| z.re).collect()),
        "f32" => array(dims, v.iter().map(|z| z.re as f32).collect()),
        _ => array(dims, v.to_vec()),
    }
}

/// An f32, f64, c64 or c128 array's elements as c128.
pub fn widened(x: &Array) -> Vec<C64> {
    match x.dtype() {
        DType::C64 => x
            .as_slice::<Complex<f32>>()
            .unwrap()
            .iter()
            .map(|z| C64::new(f64::from(z.re), f64::from(z.im)))
            .collect(),
        DType::F32 => x
            .as_slice::<f32>()
            .unwrap()
            .iter()
            .map(|&r| C64::new(f64::from(r), 0.0))
            .collect(),
        DType::F64 => x
            .as_slice::<f64>()
            .unwrap()
            .iter()
            .map(|&r| C64::new(r, 0.0))
            .collect(),
        _ => x.as_slice::<C64>().unwrap().to_vec(),
    }
}

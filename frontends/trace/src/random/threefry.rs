//! The threefry2x32 hash (`ferrax_ir::threefry2x32`, shared with the StableHLO importer) on
//! `u32` tensors, and the counters JAX hashes with it. A sampler traces to one elementwise
//! program over an iota that fuses into a single kernel on every backend.
//!
//! The counters are JAX's "partitionable" ones (its default since 0.5): element `i` of a
//! shape, in row-major order, hashes the 64-bit counter `i` as the word pair `(i >> 32,
//! i & 0xffffffff)`, so every element depends on its own index only.

use crate::Tensor;
use ferrax_ir::{DType, Shape, ThreefrySchedule, Words};
use std::convert::Infallible;

/// A `u32[]` constant.
#[track_caller]
pub(super) fn word(value: u32) -> Tensor {
    Tensor::full(DType::U32, Shape::scalar(), f64::from(value))
}

/// Words as `u32` tensors; scalars (the key schedule) broadcast against the counters.
struct TensorWords;

/// Tensors carry their own errors, so the words never fail here.
impl Words for TensorWords {
    type Word = Tensor;
    type Error = Infallible;

    fn add(&mut self, a: &Tensor, b: &Tensor) -> Result<Tensor, Infallible> {
        Ok(a + b)
    }

    fn xor(&mut self, a: &Tensor, b: &Tensor) -> Result<Tensor, Infallible> {
        Ok(a.logical_xor(b))
    }

    fn rotate_left(&mut self, x: &Tensor, distance: u32) -> Result<Tensor, Infallible> {
        Ok(x.shift_left(word(distance))
            .logical_or(x.shift_right_logical(word(32 - distance))))
    }

    fn constant(&mut self, value: u32) -> Result<Tensor, Infallible> {
        Ok(word(value))
    }
}

/// Threefry's key schedule of scalar key words, computed before the counters are traced, so
/// that fusion computes it first and the hash of the counters stays one elementwise kernel.
pub(super) type Schedule = ThreefrySchedule<Tensor>;

/// The schedule of the key words `(k1, k2)` (`u32[]`).
pub(super) fn schedule(k1: &Tensor, k2: &Tensor) -> Schedule {
    match Schedule::new(&mut TensorWords, k1, k2) {
        Ok(s) => s,
        Err(never) => match never {},
    }
}

/// The 20-round threefry2x32 hash of the counter words `x` under the key `schedule`.
pub(super) fn threefry2x32(schedule: &Schedule, x: [Tensor; 2]) -> [Tensor; 2] {
    match ferrax_ir::threefry2x32(&mut TensorWords, schedule, x) {
        Ok(words) => words,
        Err(never) => match never {},
    }
}

/// The counter words `(high, low)` of every element of `shape`, or why there are too many
/// elements to count.
#[track_caller]
pub(super) fn iota_2x32(shape: &[usize]) -> Result<[Tensor; 2], String> {
    let numel = shape
        .iter()
        .try_fold(1usize, |n, &d| n.checked_mul(d))
        .filter(|&n| n as u64 <= 1 << 32)
        .ok_or_else(|| format!("a shape of {shape:?} has more than 2^32 elements"))?;
    let high = Tensor::zeros(DType::U32, shape.to_vec());
    if shape.is_empty() || numel == 0 {
        return Ok([high, Tensor::zeros(DType::U32, shape.to_vec())]);
    }
    // The row-major index as a sum of per-dimension iotas times their strides, so that the
    // counters stay elementwise (no reshape between the iota and the hash).
    let mut low: Option<Tensor> = None;
    let mut stride = 1usize;
    for (axis, &size) in shape.iter().enumerate().rev() {
        if size > 1 {
            let iota = Tensor::iota(DType::U32, shape.to_vec(), axis);
            // `stride` < 2^32 here: it divides `numel` and a later dimension exceeds 1.
            let term = match stride {
                1 => iota,
                s => iota * &word(s as u32),
            };
            low = Some(match low {
                None => term,
                Some(l) => l + &term,
            });
        }
        stride *= size;
    }
    let low = low.unwrap_or_else(|| Tensor::zeros(DType::U32, shape.to_vec()));
    Ok([high, low])
}

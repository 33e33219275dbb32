//! The threefry2x32 hash (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", 2011)
//! and the counters JAX hashes with it. Written with `u32` tensor ops, so a sampler traces to
//! one elementwise program over an iota that fuses into a single kernel on every backend.
//!
//! The counters are JAX's "partitionable" ones (its default since 0.5): element `i` of a
//! shape, in row-major order, hashes the 64-bit counter `i` as the word pair `(i >> 32,
//! i & 0xffffffff)`, so every element depends on its own index only.

use crate::Tensor;
use ferrax_ir::{DType, Shape};

/// Rotation distances of the even and odd groups of four rounds.
const ROTATIONS: [[u32; 4]; 2] = [[13, 15, 26, 6], [17, 29, 16, 24]];

/// Threefry's key-schedule parity constant.
const PARITY: u32 = 0x1BD1_1BDA;

/// A `u32[]` constant.
#[track_caller]
pub(super) fn word(value: u32) -> Tensor {
    Tensor::full(DType::U32, Shape::scalar(), f64::from(value))
}

#[track_caller]
fn rotate_left(x: &Tensor, distance: u32) -> Tensor {
    x.shift_left(word(distance))
        .logical_or(x.shift_right_logical(word(32 - distance)))
}

/// Threefry's key schedule for one key: the words added before the rounds and after each
/// group of four. Scalars, computed before the counters are traced, so that fusion computes
/// them first and the hash of the counters stays one elementwise kernel.
pub(super) struct Schedule {
    first: [Tensor; 2],
    injections: Vec<[Tensor; 2]>,
}

impl Schedule {
    /// The schedule of the key words `(k1, k2)` (`u32[]`).
    #[track_caller]
    pub(super) fn new(k1: &Tensor, k2: &Tensor) -> Schedule {
        let ks = [
            k1.clone(),
            k2.clone(),
            k1.logical_xor(k2).logical_xor(word(PARITY)),
        ];
        let injections = (0..5usize)
            .map(|block| {
                [
                    ks[(block + 1) % 3].clone(),
                    &ks[(block + 2) % 3] + word(block as u32 + 1),
                ]
            })
            .collect();
        Schedule {
            first: [k1.clone(), k2.clone()],
            injections,
        }
    }
}

/// The 20-round threefry2x32 hash of the counter words `x` under the key `schedule`.
#[track_caller]
pub(super) fn threefry2x32(schedule: &Schedule, x: [Tensor; 2]) -> [Tensor; 2] {
    let [x0, x1] = x;
    let mut x0 = x0 + &schedule.first[0];
    let mut x1 = x1 + &schedule.first[1];
    for (block, [a, b]) in schedule.injections.iter().enumerate() {
        for distance in ROTATIONS[block % 2] {
            x0 = &x0 + &x1;
            x1 = rotate_left(&x1, distance).logical_xor(&x0);
        }
        x0 = x0 + a;
        x1 = x1 + b;
    }
    [x0, x1]
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

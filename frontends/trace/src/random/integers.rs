//! Random integers (`jax.random.randint`), by JAX's algorithm: two draws of the dtype's width
//! combined modulo the span, so that the bias of a span that is not a power of two shrinks
//! with the square of the draw's range.

use super::key::{split2, Key};
use super::sample::hashed_counters;
use super::threefry::word;
use crate::Tensor;
use ferrax_ir::{DType, Shape, TensorType};
use std::panic::Location;

/// Integers uniform in [`minval`, `maxval`) of `dtype` (`jax.random.randint`): i32, u32 or
/// u8. Bounds outside the dtype are clipped to it, a `maxval` above the dtype's largest
/// value includes that value, and `maxval ≤ minval` gives `minval` everywhere, as in JAX.
#[track_caller]
pub fn randint(
    key: &Key,
    shape: impl Into<Shape>,
    minval: i64,
    maxval: i64,
    dtype: DType,
) -> Tensor {
    let location = Location::caller();
    let shape = shape.into();
    let ty = TensorType::new(dtype, shape.clone());
    let (lowest, highest) = match dtype {
        DType::I32 => (i64::from(i32::MIN), i64::from(i32::MAX)),
        DType::U32 => (0, i64::from(u32::MAX)),
        DType::U8 => (0, i64::from(u8::MAX)),
        DType::I64
        | DType::I8
        | DType::I16
        | DType::U16
        | DType::U64
        | DType::F32
        | DType::F64
        | DType::F16
        | DType::BF16
        | DType::Bool
        | DType::C64
        | DType::C128 => {
            let message = format!("randint: the dtype must be i32, u32 or u8, it is {dtype}");
            return Tensor::failed(location, message, ty);
        }
    };
    let width = 8 * dtype.size_bytes() as u32;
    // Arithmetic modulo 2^width on values held in u32s.
    let mask = |v: u64| (v & ((1u64 << width) - 1)) as u32;
    let out_of_range = maxval > highest;
    let (lo, hi) = (minval.clamp(lowest, highest), maxval.clamp(lowest, highest));
    let mut span = mask((hi - lo) as u64);
    if hi <= lo {
        span = 1;
    } else if out_of_range {
        span = mask(u64::from(span) + 1);
    }
    let (k1, k2) = split2(key);
    let draw = |k: &Key| match hashed_counters("randint", k, shape.dims()) {
        Ok([b1, b2]) => {
            let w = b1.logical_xor(&b2);
            match width {
                32 => Ok(w),
                _ => Ok(w.logical_and(word(mask(u64::MAX)))),
            }
        }
        Err(unusable) => Err(unusable.tensor(location, ty.clone())),
    };
    let (higher, lower) = match (draw(&k1), draw(&k2)) {
        (Ok(h), Ok(l)) => (h, l),
        (Err(failed), _) | (_, Err(failed)) => return failed,
    };
    let offset = if span == 0 {
        // The span is the whole range 2^width: every remainder below is the identity, and
        // the multiplier `(2^(width/2))² mod 2^width` is zero.
        lower
    } else {
        let half = (1u64 << (width / 2)) % u64::from(span);
        let multiplier = mask(half * half) % span;
        let span_word = word(span);
        let mut combined = higher.fmod(&span_word) * &word(multiplier);
        if width < 32 {
            combined = combined.logical_and(word(mask(u64::MAX)));
        }
        combined = combined + lower.fmod(&span_word);
        if width < 32 {
            combined = combined.logical_and(word(mask(u64::MAX)));
        }
        combined.fmod(&span_word)
    };
    let value = offset + &word(mask(lo as u64));
    if dtype == DType::I32 {
        value.bitcast(DType::I32)
    } else if width < 32 {
        value.logical_and(word(mask(u64::MAX))).astype(dtype)
    } else {
        value
    }
}

//! A half-precision product's rounding, done by its gemm step (the compiler plans it where a
//! bf16 or f16 product's conversions would otherwise be a kernel of their own): the f32
//! result rounded with the interpreter's rounding, so the values are the same.

use crate::PARALLEL_THRESHOLD;
use ferrax_ir::{DType, Elements, ValueId};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

/// A product step's rounding: its f32 result rounded to `dtype` is `output`, of type `dtype`,
/// or where `widened`, of f32 again.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rounding {
    pub dtype: DType,
    pub output: ValueId,
    pub widened: bool,
}

/// `x` rounded to the nearest bf16 (ties to even; a NaN made quiet), as f32 bits: the `half`
/// crate's conversion, which the interpreter and the kernels use, on the bits directly so that
/// the loop vectorizes.
fn bf16_bits(x: f32) -> u32 {
    let b = x.to_bits();
    if x.is_nan() {
        (b | 0x0040_0000) & 0xFFFF_0000
    } else {
        b.wrapping_add(0x7FFF + ((b >> 16) & 1)) & 0xFFFF_0000
    }
}

/// `x` rounded to the nearest f16 and widened back.
fn f16_round(x: f32) -> f32 {
    half::f16::from_f32(x).to_f32()
}

/// `out` (f32) rounded as `r` says: to its half type, and back to f32 where widened; on every
/// core when large.
pub(crate) fn round(out: Elements, r: Rounding) -> Elements {
    let Elements::F32(mut values) = out else {
        return out;
    };
    let chunks = |v: &mut Vec<f32>, f: fn(f32) -> f32| {
        if v.len() >= PARALLEL_THRESHOLD {
            v.par_chunks_mut(1 << 14)
                .for_each(|c| c.iter_mut().for_each(|x| *x = f(*x)));
        } else {
            v.iter_mut().for_each(|x| *x = f(*x));
        }
    };
    match (r.dtype, r.widened) {
        (DType::BF16, true) => {
            chunks(&mut values, |x| f32::from_bits(bf16_bits(x)));
            Elements::F32(values)
        }
        (DType::F16, true) => {
            chunks(&mut values, f16_round);
            Elements::F32(values)
        }
        (DType::BF16, false) => {
            let narrow = |&x: &f32| half::bf16::from_bits((bf16_bits(x) >> 16) as u16);
            Elements::BF16(if values.len() >= PARALLEL_THRESHOLD {
                values.par_iter().map(narrow).collect()
            } else {
                values.iter().map(narrow).collect()
            })
        }
        (DType::F16, false) => {
            let narrow = |&x: &f32| half::f16::from_f32(x);
            Elements::F16(if values.len() >= PARALLEL_THRESHOLD {
                values.par_iter().map(narrow).collect()
            } else {
                values.iter().map(narrow).collect()
            })
        }
        // Never planned (`plan_rounding`): other types round to themselves.
        (
            DType::F32
            | DType::F64
            | DType::I32
            | DType::I64
            | DType::U32
            | DType::U8
            | DType::I8
            | DType::I16
            | DType::U16
            | DType::U64
            | DType::Bool
            | DType::C64
            | DType::C128,
            _,
        ) => Elements::F32(values),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bit-level rounding is the `half` crate's, over every class of f32: ties both ways,
    /// the largest finite values (rounding up to infinity), subnormals, infinities, NaNs.
    #[test]
    fn bf16_rounding_is_the_half_crates() {
        let specials = [
            0.0f32,
            -0.0,
            1.0,
            1.0 + 1.0 / 256.0,
            1.0 + 3.0 / 256.0,
            1.0000001,
            -2.5e-40,
            f32::MAX,
            -f32::MAX,
            f32::MIN_POSITIVE,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            f32::from_bits(0x7F80_0001),
            f32::from_bits(0xFFC1_2345),
        ];
        let mut state = 0x2545_F491u32;
        let random = (0..100_000).map(|_| {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            f32::from_bits(state)
        });
        for x in specials.into_iter().chain(random) {
            let want = half::bf16::from_f32(x).to_f32().to_bits();
            assert_eq!(bf16_bits(x), want, "{x:e} ({:#010x})", x.to_bits());
        }
    }
}

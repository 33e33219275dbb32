//! Arithmetic a backend may lack an instruction for (PTX): the f32 remainder, computed
//! exactly in f64, and integer powers by squaring, both branch-free.

use super::{int_of, Emit};
use crate::kernel::KOp;
use ferrax_ir::{BinaryOp, CompareOp, DType, UnaryOp};

impl Emit {
    /// f32 `x % y` (C's `fmod`: truncated, the sign of `x`), exact: in f64, `|x|` is reduced by
    /// `d = |y|·2^(26i)` for i = 10 down to 0 (2^286 covers the widest f32 quotient, 2^277).
    /// Before step `i` the remainder is below `d·2^26` and a multiple of `d`'s ULP, so the
    /// quotient digit `q` is below 2^26, `q·d` is exact (50 bits), and so is `r - q·d`. `q`
    /// comes from one reciprocal of `|y|`: two roundings leave the estimate within 2^-26 of
    /// `r/d`, which, unless whole, is at least 2^-24 from an integer (`d` has 24 bits), so `q`
    /// is right or, for a whole quotient, one short, which one subtraction corrects. A zero or
    /// NaN `y`, or an infinite or NaN `x`, gives NaN; an infinite `y`, `x` itself.
    pub(super) fn rem_f32(&mut self, x: usize, y: usize) -> usize {
        let w = DType::F64;
        let (xd, yd) = (self.convert(x, w), self.convert(y, w));
        let ax = self.un(UnaryOp::Abs, xd, w);
        let ay = self.un(UnaryOp::Abs, yd, w);
        let one = self.c(1.0, w);
        let inverse = self.div(one, ay, w);
        let mut r = ax;
        for i in (0..=10).rev() {
            let scale = 2f64.powi(26 * i);
            let step = self.c(scale, w);
            let d = self.mul(ay, step, w);
            let step_inverse = self.c(1.0 / scale, w);
            let estimate = self.mul(r, inverse, w);
            let estimate = self.mul(estimate, step_inverse, w);
            let q = self.un(UnaryOp::Floor, estimate, w);
            let minus_q = self.un(UnaryOp::Neg, q, w);
            let reduced = self.fma(minus_q, d, r, w);
            let over = self.cmp(CompareOp::Ge, reduced, d);
            let lowered = self.sub(reduced, d, w);
            r = self.select(over, lowered, reduced, w);
        }
        let infinite_y = self.cmp_c(CompareOp::Eq, ay, f64::INFINITY, w);
        let finite_x = self.cmp_c(CompareOp::Lt, ax, f64::INFINITY, w);
        let keep_x = self.and(infinite_y, finite_x);
        let r = self.select(keep_x, ax, r, w);
        let r = self.convert(r, DType::F32);
        self.copy_sign(r, x, DType::F32)
    }

    /// i32 or i64 `x^y` as the interpreter computes it: by squaring, wrapping, for `y >= 0`
    /// (one step per bit of `y`, 31 or 63, branch-free); for `y < 0`, 1 where `x` is 1, ±1 where
    /// `x` is -1 (by `y`'s parity), else 0.
    pub(super) fn pow_int(&mut self, x: usize, y: usize, i: DType) -> usize {
        let bits = if i == DType::I64 { 63 } else { 31 };
        let (one, zero) = (self.ci(1, i), self.ci(0, i));
        let mut result = one;
        let mut base = x;
        for bit in 0..bits {
            let shifted = if bit == 0 {
                y
            } else {
                self.op(KOp::ShiftRight(bit), &[y], i)
            };
            let digit = self.bin(BinaryOp::And, shifted, one, i);
            let set = self.cmp(CompareOp::Eq, digit, one);
            let product = self.mul(result, base, i);
            result = self.select(set, product, result, i);
            if bit + 1 < bits {
                base = self.mul(base, base, i);
            }
        }
        let minus_one = self.ci(-1, i);
        let odd_bit = self.bin(BinaryOp::And, y, one, i);
        let odd = self.cmp(CompareOp::Eq, odd_bit, one);
        let sign = self.select(odd, minus_one, one, i);
        let is_one = self.cmp(CompareOp::Eq, x, one);
        let is_minus_one = self.cmp(CompareOp::Eq, x, minus_one);
        let negative = self.select(is_minus_one, sign, zero, i);
        let negative = self.select(is_one, one, negative, i);
        let below = self.cmp(CompareOp::Lt, y, zero);
        self.select(below, negative, result, i)
    }

    /// `magnitude` (sign bit clear, or of `sign`'s sign already) with the sign of `sign`, ±0
    /// included: the remainder's sign is its dividend's.
    fn copy_sign(&mut self, magnitude: usize, sign: usize, t: DType) -> usize {
        let it = int_of(t);
        let sign_bit = if t == DType::F32 {
            i64::from(i32::MIN)
        } else {
            i64::MIN
        };
        let bit = self.ci(sign_bit, it);
        let sign_bits = self.bitcast(sign, it);
        let sign_only = self.bin(BinaryOp::And, sign_bits, bit, it);
        let magnitude_bits = self.bitcast(magnitude, it);
        let bits = self.bin(BinaryOp::Or, magnitude_bits, sign_only, it);
        self.bitcast(bits, t)
    }
}

//! exp, expm1, log, log1p and pow. exp and expm1 reduce by `k·ln2` ([`Emit::reduce_ln2`],
//! which tanh shares) and rebuild `2^k` from its bits; log takes the exponent and the mantissa
//! apart; log1p corrects the rounding of `1 + x`; pow is `exp(y·log|x|)` in f64 with the sign
//! and the special cases put back.

use super::{int_of, inverse_factorials, layout, Emit};
use crate::kernel::KOp;
use ferrax_ir::{BinaryOp, CompareOp, DType, UnaryOp};

/// P(r) of f32 exp(r) = 1 + r·P(r), P's first coefficient held at 1: a degree-6 minimax fit
/// over |r| <= 1.01·ln2/2, 0.08 ULP with its coefficients rounded to f32 (the Taylor series
/// needs degree 7).
pub(super) const F32_EXP_COEFFS: [f64; 6] = [
    1.0,
    0.499_999_940_395_355_2,
    0.166_665_151_715_278_63,
    0.041_668_456_047_773_36,
    0.008_369_418_792_426_586,
    0.001_381_314_476_020_634_2,
];

/// q(r) of f32 expm1(r) = r + r^2·q(r), fitted the same way with `r` held: 0.04 ULP with six
/// coefficients (the first rounds to 1/2), where the Taylor series needs seven.
const F32_EXPM1_COEFFS: [f64; 6] = [
    0.5,
    0.166_666_656_732_559_2,
    0.041_666_347_533_464_43,
    0.008_333_391_509_950_161,
    0.001_394_165_214_151_144,
    0.000_198_459_587_409_161_03,
];

/// The integer [`Emit::reduce_ln2`] returns: `k + offset` or `offset - k`, or (`Field`) the
/// exponent field of `2^k`, `k + bias`, in its low bits and other bits above, which
/// [`Emit::power_of_two`]'s shift drops: one instruction fewer.
pub(super) enum Count {
    Plus(i64),
    Minus(i64),
    Field,
}

impl Emit {
    /// `x - k·ln2/scale` for integer-valued `k` (`scale` 1 or 2), exact to the working
    /// precision, and the integer `k = rint(x·scale/ln2)` as [`Count`] asks, for `|x·scale/ln2|`
    /// below 2^21 (callers clamp first). `k` is rounded by adding 1.5·2^m (m the mantissa width)
    /// to `x·scale·log2(e)` in one fma and subtracting it again: the sum's last bit has weight
    /// one, so it rounds to nearest even, and its bits minus the constant's are `k` itself (the
    /// offset folded into the constant subtracted).
    pub(super) fn reduce_ln2(
        &mut self,
        x: usize,
        scale: f64,
        count: Count,
        t: DType,
    ) -> (usize, usize) {
        let (hi, lo) = if t == DType::F32 {
            (0.693_145_751_953_125, 1.428_606_765_330_187e-6)
        } else {
            (0.693_147_180_369_123_8, 1.908_214_929_270_587_7e-10)
        };
        let (bias, mant) = layout(t);
        let it = int_of(t);
        let magic = 1.5 * 2f64.powi(mant as i32);
        // With the bias in the constant, the sum's low bits are `k + bias` themselves.
        let magic = match count {
            Count::Field => magic + bias as f64,
            _ => magic,
        };
        let l = self.c(std::f64::consts::LOG2_E * scale, t);
        let m = self.c(magic, t);
        let shifted = self.fma(x, l, m, t);
        let k = self.sub(shifted, m, t);
        let bits = self.bitcast(shifted, it);
        let magic_bits = if t == DType::F32 {
            i64::from((magic as f32).to_bits())
        } else {
            magic.to_bits() as i64
        };
        let ki = match count {
            Count::Plus(offset) => {
                let mb = self.ci(magic_bits - offset, it);
                self.sub(bits, mb, it)
            }
            Count::Minus(offset) => {
                let mb = self.ci(magic_bits + offset, it);
                self.sub(mb, bits, it)
            }
            Count::Field => bits,
        };
        // Halving the parts of ln2 is exact.
        let h = self.c(-hi / scale, t);
        let r = self.fma(k, h, x, t);
        let lo = self.c(-lo / scale, t);
        (ki, self.fma(k, lo, r, t))
    }

    pub(super) fn exp(&mut self, x: usize, t: DType) -> usize {
        let (lo, hi) = if t == DType::F32 {
            (-104.0, 89.0)
        } else {
            (-746.0, 710.0)
        };
        // Clamping keeps 2^k a product of two normal factors; NaN passes through.
        let xc = self.clamp_c(x, lo, hi, t);
        // 2^k as two normal factors: their exponent fields add up to k + 2·bias.
        let (bias, _) = layout(t);
        let (fields, r) = self.reduce_ln2(xc, 1.0, Count::Plus(2 * bias), t);
        let p = if t == DType::F32 {
            let p = self.poly(r, &F32_EXP_COEFFS, t);
            let one = self.c(1.0, t);
            self.fma(p, r, one, t)
        } else {
            self.poly(r, &inverse_factorials(0, 13), t)
        };
        let it = int_of(t);
        let f1 = self.op(KOp::ShiftRight(1), &[fields], it);
        let f2 = self.sub(fields, f1, it);
        let s1 = self.power_of_two(f1, t);
        let s2 = self.power_of_two(f2, t);
        let y = self.mul(p, s1, t);
        self.mul(y, s2, t)
    }

    /// expm1 for `x <= hi` (20 for f32, 40 for f64), where `2^k` needs no split.
    fn expm1_core(&mut self, x: usize, t: DType) -> usize {
        let (lo, hi) = if t == DType::F32 {
            (-18.0, 20.0)
        } else {
            (-40.0, 40.0)
        };
        let xc = self.clamp_c(x, lo, hi, t);
        let (field, r) = self.reduce_ln2(xc, 1.0, Count::Field, t);
        // expm1(r) = r + r²·(1/2 + r/6 + ...), rounded once at the end.
        let q = if t == DType::F32 {
            self.poly(r, &F32_EXPM1_COEFFS, t)
        } else {
            self.poly(r, &inverse_factorials(2, 14), t)
        };
        let r2 = self.mul(r, r, t);
        let em1 = self.fma(r2, q, r, t);
        let s = self.power_of_two(field, t);
        let one = self.c(1.0, t);
        let sm1 = self.sub(s, one, t);
        self.fma(s, em1, sm1, t)
    }

    pub(super) fn expm1(&mut self, x: usize, t: DType) -> usize {
        let hi = if t == DType::F32 { 20.0 } else { 40.0 };
        let y = self.expm1_core(x, t);
        // Above `hi` the -1 no longer matters and exp carries the overflow.
        let big = self.cmp_c(CompareOp::Gt, x, hi, t);
        let e = self.exp(x, t);
        let y = self.select(big, e, y, t);
        self.keep_zero(x, y, t)
    }

    /// log of a finite positive `x` (the caller handles 0, negatives, inf and NaN).
    fn log_core(&mut self, x: usize, t: DType) -> usize {
        let (bias, mant) = layout(t);
        let it = int_of(t);
        let (min_normal, up, terms, sqrt2, hi, lo) = if t == DType::F32 {
            (
                f64::from(f32::MIN_POSITIVE),
                24.0,
                5,
                1.414_213_538_169_860_8,
                0.693_145_751_953_125,
                1.428_606_765_330_187e-6,
            )
        } else {
            (
                f64::MIN_POSITIVE,
                54.0,
                11,
                std::f64::consts::SQRT_2,
                0.693_147_180_369_123_8,
                1.908_214_929_270_587_7e-10,
            )
        };
        // Subnormals are scaled up first, the exponent corrected after.
        let tiny = self.cmp_c(CompareOp::Lt, x, min_normal, t);
        let scale = self.c(2f64.powf(up), t);
        let scaled = self.mul(x, scale, t);
        let xs = self.select(tiny, scaled, x, t);
        let zero = self.c(0.0, t);
        let adjust = self.select_c(tiny, -up, zero, t);
        let bits = self.bitcast(xs, it);
        let field = self.op(KOp::ShiftRight(mant), &[bits], it);
        let b = self.ci(bias, it);
        let e = self.sub(field, b, it);
        let mask = self.ci((1i64 << mant) - 1, it);
        let frac = self.bin(BinaryOp::And, bits, mask, it);
        let one_bits = self.ci(bias << mant, it);
        let mbits = self.bin(BinaryOp::Or, frac, one_bits, it);
        let m = self.bitcast(mbits, t);
        // m in [sqrt(1/2), sqrt(2)).
        let big = self.cmp_c(CompareOp::Gt, m, sqrt2, t);
        let half = self.c(0.5, t);
        let m_half = self.mul(m, half, t);
        let m = self.select(big, m_half, m, t);
        let ef = self.exponent_to_float(e, t);
        let one = self.c(1.0, t);
        let ef1 = self.add(ef, one, t);
        let ef = self.select(big, ef1, ef, t);
        let ef = self.add(ef, adjust, t);
        // log(m) = 2·atanh(f) = 2f + 2f·s·(1/3 + s/5 + ...), f = (m-1)/(m+1), s = f².
        let num = self.sub(m, one, t);
        let den = self.add(m, one, t);
        let f = self.div(num, den, t);
        let s = self.mul(f, f, t);
        let coeffs: Vec<f64> = (1..=terms).map(|i| 1.0 / f64::from(2 * i + 1)).collect();
        let p = self.poly(s, &coeffs, t);
        let two_f = self.add(f, f, t);
        let two_fs = self.mul(two_f, s, t);
        let lm = self.fma(two_fs, p, two_f, t);
        let lo = self.c(lo, t);
        let low = self.fma(ef, lo, lm, t);
        let hi = self.c(hi, t);
        self.fma(ef, hi, low, t)
    }

    /// log's special cases around `core` (log of `x` for finite positive `x`).
    fn log_specials(&mut self, x: usize, core: usize, t: DType) -> usize {
        let is_nan = self.cmp(CompareOp::Ne, x, x);
        let y = self.select(is_nan, x, core, t);
        let inf = self.cmp_c(CompareOp::Eq, x, f64::INFINITY, t);
        let y = self.select_c(inf, f64::INFINITY, y, t);
        let zero = self.cmp_c(CompareOp::Eq, x, 0.0, t);
        let y = self.select_c(zero, f64::NEG_INFINITY, y, t);
        let neg = self.cmp_c(CompareOp::Lt, x, 0.0, t);
        self.select_c(neg, f64::NAN, y, t)
    }

    pub(super) fn log(&mut self, x: usize, t: DType) -> usize {
        let core = self.log_core(x, t);
        self.log_specials(x, core, t)
    }

    pub(super) fn log1p(&mut self, x: usize, t: DType) -> usize {
        // log1p(x) = log(u) + (x - (u - 1))/u with u = 1 + x rounded.
        let one = self.c(1.0, t);
        let u = self.add(one, x, t);
        let core = self.log_core(u, t);
        let um1 = self.sub(u, one, t);
        let err = self.sub(x, um1, t);
        let corr = self.div(err, u, t);
        let y = self.add(core, corr, t);
        let y = self.log_specials(u, y, t);
        let inf = self.cmp_c(CompareOp::Eq, x, f64::INFINITY, t);
        let y = self.select_c(inf, f64::INFINITY, y, t);
        self.keep_zero(x, y, t)
    }

    pub(super) fn pow(&mut self, x: usize, y: usize, t: DType) -> usize {
        // f32 runs in f64, where y·log(x) carries enough bits for a correctly scaled result.
        let w = DType::F64;
        let (xd, yd) = if t == DType::F32 {
            (self.convert(x, w), self.convert(y, w))
        } else {
            (x, y)
        };
        let ax = self.un(UnaryOp::Abs, xd, w);
        let l = self.log(ax, w);
        let yl = self.mul(yd, l, w);
        let z = self.exp(yl, w);
        // Sign and domain: a negative base needs an integer exponent.
        let inf = f64::INFINITY;
        let ay = self.un(UnaryOp::Abs, yd, w);
        let y_finite = self.cmp_c(CompareOp::Lt, ay, inf, w);
        let ry = self.un(UnaryOp::RoundEven, yd, w);
        let y_int = self.cmp(CompareOp::Eq, ry, yd);
        let half = self.c(0.5, w);
        let hy = self.mul(yd, half, w);
        let rhy = self.un(UnaryOp::RoundEven, hy, w);
        let y_even = self.cmp(CompareOp::Eq, rhy, hy);
        let y_not_even = self.un(UnaryOp::Not, y_even, DType::Bool);
        let y_odd = self.and(y_int, y_not_even);
        let y_odd = self.and(y_odd, y_finite);
        let bits = self.bitcast(xd, DType::I64);
        let zero_i = self.ci(0, DType::I64);
        let x_signed = self.cmp(CompareOp::Lt, bits, zero_i);
        let flip = self.and(x_signed, y_odd);
        let nz = self.un(UnaryOp::Neg, z, w);
        let z = self.select(flip, nz, z, w);
        let x_neg = self.cmp_c(CompareOp::Lt, xd, 0.0, w);
        let x_finite = self.cmp_c(CompareOp::Lt, ax, inf, w);
        let y_frac = self.un(UnaryOp::Not, y_int, DType::Bool);
        let bad = self.and(x_neg, x_finite);
        let bad = self.and(bad, y_frac);
        let bad = self.and(bad, y_finite);
        let z = self.select_c(bad, f64::NAN, z, w);
        let unit = self.cmp_c(CompareOp::Eq, ax, 1.0, w);
        let y_inf = self.cmp_c(CompareOp::Eq, ay, inf, w);
        let unit_inf = self.and(unit, y_inf);
        let z = self.select_c(unit_inf, 1.0, z, w);
        let x_one = self.cmp_c(CompareOp::Eq, xd, 1.0, w);
        let z = self.select_c(x_one, 1.0, z, w);
        let y_zero = self.cmp_c(CompareOp::Eq, yd, 0.0, w);
        let z = self.select_c(y_zero, 1.0, z, w);
        if t == DType::F32 {
            self.convert(z, t)
        } else {
            z
        }
    }
}

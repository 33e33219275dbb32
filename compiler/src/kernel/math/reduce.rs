//! The exact reductions of sin and cos arguments by `k·π/2`, right for arguments of any size
//! however close to a multiple of π/2: f32 from 26-bit chunks of 2/π, f64 by Payne and Hanek's
//! digit sums. Long (about 60 and 650 operations): under
//! [`expand_guarded`](super::expand_guarded) a backend runs them only for arguments beyond the
//! short reductions' limits.

use super::Emit;
use crate::kernel::KOp;
use ferrax_ir::{BinaryOp, CompareOp, DType, UnaryOp};

/// 2/π in chunks of 26 bits (bits 1-26 after the binary point, 27-52, ..., to 208), each exact
/// in f64 and exact when multiplied by an f32: [`Emit::reduce_half_pi_exact`].
const TWO_OVER_PI_CHUNKS: [f64; 8] = [
    0.636_619_761_586_189_3,
    1.078_139_200_139_105_5e-8,
    7.166_494_634_684_664e-17,
    2.765_304_029_256_071_3e-24,
    1.018_166_407_313_423_3e-32,
    3.143_654_692_300_393e-40,
    6.319_121_160_070_941e-48,
    1.051_335_891_051_139e-56,
];

/// 2/π in 24-bit digits, `2/π = Σ D_i·2^(-24(i+1))`: 1,224 bits, enough for the exact
/// reduction of every finite f64 ([`Emit::reduce_half_pi_exact_f64`]).
const TWO_OVER_PI_DIGITS: [u32; 51] = [
    0xA2F983, 0x6E4E44, 0x1529FC, 0x2757D1, 0xF534DD, 0xC0DB62, 0x95993C, 0x439041, 0xFE5163,
    0xABDEBB, 0xC561B7, 0x246E3A, 0x424DD2, 0xE00649, 0x2EEA09, 0xD1921C, 0xFE1DEB, 0x1CB129,
    0xA73EE8, 0x8235F5, 0x2EBB44, 0x84E99C, 0x7026B4, 0x5F7E41, 0x3991D6, 0x398353, 0x39F49C,
    0x845F8B, 0xBDF928, 0x3B1FF8, 0x97FFDE, 0x05980F, 0xEF2F11, 0x8B5A0A, 0x6D1F6D, 0x367ECF,
    0x27CB09, 0xB74F46, 0x3F669E, 0x5FEA2D, 0x7527BA, 0xC7EBE5, 0xF17B3D, 0x0739F7, 0x8A5292,
    0xEA6BFB, 0x5FB11F, 0x8D5D08, 0x560330, 0x46FC7B, 0x6BABF0,
];

/// The digits of [`TWO_OVER_PI_DIGITS`] (`D_i`, `i < DIGITS`).
const DIGITS: usize = TWO_OVER_PI_DIGITS.len();

/// The range of the exponent window of [`Emit::reduce_half_pi_exact_f64`]: `n0 = floor((E -
/// 1029)/24)` is in `[FIRST, LAST]` for `|x| >= 2^51` (E the biased exponent).
const FIRST: usize = 1;
const LAST: usize = 42;

/// The digit sums `F_(n0+j)` of the exact f64 reduction, `j < WINDOW`: enough for the integer
/// part mod 4, the fraction's top and five digits of its tail.
const WINDOW: usize = 9;

impl Emit {
    /// [`Self::reduce_half_pi_f64`] for f32 `x` of any size (Payne and Hanek's idea, without a
    /// table): `x·2/π mod 4` as the sum of `x·c_i mod 4` over [`TWO_OVER_PI_CHUNKS`]. Each
    /// product is exact in f64 (24 bits times 26), and so is each `mod 4` taken to [-2, 2]
    /// (`t - 4·rint(t/4)`: a small `t` is kept as it is, and a large one loses only whole
    /// multiples of 4, within its own bits), so the chunks whose product is a multiple of 4 drop
    /// out exactly however large `x`; the eight partial results are summed with their rounding
    /// errors kept (two-sum), so the fraction is right to about 2^-100 even where `x` lies within
    /// 2^-30 of a multiple of π/2. Then `k` is the sum rounded, `r = (sum - k)·π/2`, and a zero
    /// `x` gives its own zero, sign included. About 60 f64 operations: the GPU runs it only for
    /// arguments beyond [`SIN_COS_F32_LIMIT`](super::SIN_COS_F32_LIMIT).
    pub(super) fn reduce_half_pi_exact(&mut self, x: usize) -> (usize, usize) {
        let w = DType::F64;
        let xd = self.convert(x, w);
        let (quarter, minus_four) = (self.c(0.25, w), self.c(-4.0, w));
        let mut sum: Option<(usize, usize)> = None;
        for chunk in TWO_OVER_PI_CHUNKS {
            let c = self.c(chunk, w);
            let t = self.mul(xd, c, w);
            let fourths = self.mul(t, quarter, w);
            let whole = self.un(UnaryOp::RoundEven, fourths, w);
            let part = self.fma(whole, minus_four, t, w);
            sum = Some(match sum {
                None => (part, self.c(0.0, w)),
                Some((hi, lo)) => {
                    let s = self.add(hi, part, w);
                    let b = self.sub(s, hi, w);
                    let a = self.sub(s, b, w);
                    let da = self.sub(hi, a, w);
                    let db = self.sub(part, b, w);
                    let err = self.add(da, db, w);
                    (s, self.add(lo, err, w))
                }
            });
        }
        let Some((hi, lo)) = sum else {
            return (x, x);
        };
        let magic = self.c(1.5 * 2f64.powi(52), w);
        let shifted = self.add(hi, magic, w);
        let k = self.sub(shifted, magic, w);
        let fraction = self.sub(hi, k, w);
        let fraction = self.add(fraction, lo, w);
        let half_pi = self.c(std::f64::consts::FRAC_PI_2, w);
        let r = self.mul(fraction, half_pi, w);
        let zero = self.c(0.0, w);
        let is_zero = self.cmp(CompareOp::Eq, xd, zero);
        let r = self.select(is_zero, xd, r, w);
        let bits = self.bitcast(shifted, DType::I64);
        (self.convert(r, DType::F32), self.convert(bits, DType::I32))
    }

    /// `x·2/π mod 4` for f64 `x` of any size, as (`r`, `k`) with `x·2/π = k + r·2/π` (`|r|` up
    /// to π/4), right to the last bit even for the f64 nearest a multiple of π/2 (within
    /// 2^-61 of one): Payne and Hanek's reduction, as fdlibm's `__kernel_rem_pio2` computes
    /// it, branch-free. `|x| = m·2^q`, `m` in three 24-bit pieces `X_a`; the digits of 2/π
    /// ([`TWO_OVER_PI_DIGITS`]) whose products with `m` weigh 4 or more drop out (a multiple of
    /// 4), and the next eleven are picked by the exponent (selects: the kernel IR has no table
    /// lookup). The products' sums by weight, `F_n = Σ X_a·D_(n-a)` (below 2^50, exact), are
    /// carried into exact 24-bit digits; the two highest give the integer part mod 4 and the
    /// fraction's top, the next five its tail, complemented when the fraction is above 1/2, so
    /// that `fraction - 1` is a sum of two terms of one sign (no cancellation however close to
    /// an integer). Finite arguments only; infinities and NaN give NaN. About 650 operations,
    /// most of them the digit selects: the GPU runs it only for arguments beyond
    /// [`SIN_COS_F64_LIMIT`](super::SIN_COS_F64_LIMIT).
    pub(super) fn reduce_half_pi_exact_f64(&mut self, x: usize) -> (usize, usize) {
        let (w, i) = (DType::F64, DType::I64);
        let ax = self.un(UnaryOp::Abs, x, w);
        let (pieces, e) = self.mantissa_pieces(ax);
        let (n0, scale) = self.first_digit(e);
        let picked = self.window_digits(n0);
        let digits = self.carried_digits(pieces, &picked);
        let (head, tail, k) = self.split_fraction(&digits, scale);
        // r = (head + tail)·π/2, head and tail of one sign.
        let hi = self.add(head, tail, w);
        let took = self.sub(hi, head, w);
        let lo = self.sub(tail, took, w);
        let (pio2_hi, pio2_lo) = (
            self.c(std::f64::consts::FRAC_PI_2, w),
            self.c(6.123_233_995_736_766e-17, w),
        );
        let r_lo = self.mul(hi, pio2_lo, w);
        let r_lo = self.fma(lo, pio2_hi, r_lo, w);
        let r = self.fma(hi, pio2_hi, r_lo, w);
        // The sign of x, and NaN for infinities and NaN.
        let zero = self.c(0.0, w);
        let negative = self.cmp(CompareOp::Lt, x, zero);
        let minus_r = self.un(UnaryOp::Neg, r, w);
        let r = self.select(negative, minus_r, r, w);
        let finite = self.cmp_c(CompareOp::Lt, ax, f64::INFINITY, w);
        let nan = self.sub(x, x, w);
        let r = self.select(finite, r, nan, w);
        let minus_k = self.un(UnaryOp::Neg, k, w);
        let k = self.select(negative, minus_k, k, w);
        let magic = self.c(1.5 * 2f64.powi(52), w);
        let shifted = self.add(k, magic, w);
        (r, self.bitcast(shifted, i))
    }

    /// The mantissa of f64 `ax = |x|` in three 24-bit pieces `X_a` (highest first) and its
    /// biased exponent, as f64s.
    fn mantissa_pieces(&mut self, ax: usize) -> ([usize; 3], usize) {
        let (w, i) = (DType::F64, DType::I64);
        let bits = self.bitcast(ax, i);
        let field = self.op(KOp::ShiftRight(52), &[bits], i);
        let fraction_mask = self.ci((1 << 52) - 1, i);
        let fraction = self.bin(BinaryOp::And, bits, fraction_mask, i);
        let hidden = self.ci(1 << 52, i);
        let m = self.bin(BinaryOp::Or, fraction, hidden, i);
        let piece_mask = self.ci(0xFF_FFFF, i);
        let low = self.bin(BinaryOp::And, m, piece_mask, i);
        let m24 = self.op(KOp::ShiftRight(24), &[m], i);
        let middle = self.bin(BinaryOp::And, m24, piece_mask, i);
        let high = self.op(KOp::ShiftRight(48), &[m], i);
        let pieces = [high, middle, low].map(|p| self.exponent_to_float(p, w));
        (pieces, self.exponent_to_float(field, w))
    }

    /// For biased exponent `e`, the index `n0` of the first digit group `F_n0` of weight below 4
    /// (as an f64) and that weight, `2^e0`.
    fn first_digit(&mut self, e: usize) -> (usize, usize) {
        let (w, i) = (DType::F64, DType::I64);
        let offset = self.c(-1028.5, w);
        let above = self.add(e, offset, w);
        let inv24 = self.c(1.0 / 24.0, w);
        // Half a step off every multiple of 24, so the rounded quotient floors right.
        let quotient = self.mul(above, inv24, w);
        let n0 = self.un(UnaryOp::Floor, quotient, w);
        // 2^e0, the weight of F_n0: e0 = E - 1051 - 24·n0 in [-22, 1], its biased exponent
        // put in place by the 1.5·2^52 shift (whose own bits shift out).
        let minus_24 = self.c(-24.0, w);
        let below = self.c(-1051.0 + 1023.0 + 1.5 * 2f64.powi(52), w);
        let biased = self.add(e, below, w);
        let biased = self.fma(n0, minus_24, biased, w);
        let biased_bits = self.bitcast(biased, i);
        let scale_bits = self.op(KOp::ShiftLeft(52), &[biased_bits], i);
        (n0, self.bitcast(scale_bits, w))
    }

    /// `D_(n0 + c)` for `c` in `-2..WINDOW`: one select per candidate `n0`.
    fn window_digits(&mut self, n0: usize) -> Vec<usize> {
        let w = DType::F64;
        let is_n0: Vec<usize> = (FIRST + 1..=LAST)
            .map(|n| self.cmp_c(CompareOp::Eq, n0, n as f64, w))
            .collect();
        let digit = |n: usize, c: isize| -> f64 {
            let index = n as isize + c;
            if (0..DIGITS as isize).contains(&index) {
                f64::from(TWO_OVER_PI_DIGITS[index as usize])
            } else {
                0.0
            }
        };
        (-2..WINDOW as isize)
            .map(|c| {
                let mut d = self.c(digit(FIRST, c), w);
                for (n, &p) in (FIRST + 1..=LAST).zip(&is_n0) {
                    let candidate = self.c(digit(n, c), w);
                    d = self.select(p, candidate, d, w);
                }
                d
            })
            .collect()
    }

    /// The window's sums `F_(n0+j) = X0·D_(n0+j) + X1·D_(n0+j-1) + X2·D_(n0+j-2)` (`pieces` the
    /// `X_a`, `picked` the digits from [`Self::window_digits`]), carried into exact 24-bit
    /// digits.
    fn carried_digits(&mut self, pieces: [usize; 3], picked: &[usize]) -> [usize; WINDOW] {
        let w = DType::F64;
        let sums: Vec<usize> = (0..WINDOW)
            .map(|j| {
                let f = self.mul(pieces[2], picked[j], w);
                let f = self.fma(pieces[1], picked[j + 1], f, w);
                self.fma(pieces[0], picked[j + 2], f, w)
            })
            .collect();
        let inv_radix = self.c(1.0 / 16_777_216.0, w);
        let minus_radix = self.c(-16_777_216.0, w);
        let mut digits = [0; WINDOW];
        let mut carry = None;
        for j in (0..WINDOW).rev() {
            let s = match carry {
                Some(c) => self.add(sums[j], c, w),
                None => sums[j],
            };
            let scaled = self.mul(s, inv_radix, w);
            let c = self.un(UnaryOp::Floor, scaled, w);
            digits[j] = self.fma(c, minus_radix, s, w);
            carry = Some(c);
        }
        digits
    }

    /// From the carried `digits` (the first of weight `scale`): the fraction of `|x|·2/π` as
    /// `head + tail`, both of one sign (above 1/2, `fraction - 1`), and the integer part mod 4
    /// rounded to nearest.
    fn split_fraction(&mut self, digits: &[usize; WINDOW], scale: usize) -> (usize, usize, usize) {
        let w = DType::F64;
        // The integer part mod 4 and the fraction's top: exact (at most 49 bits).
        let scales: Vec<usize> = (0..7)
            .map(|j| {
                let step = self.c(2f64.powi(-24 * j), w);
                self.mul(scale, step, w)
            })
            .collect();
        let top = self.mul(digits[0], scales[0], w);
        let quarter = self.c(0.25, w);
        let fourths = self.mul(top, quarter, w);
        let whole = self.un(UnaryOp::Floor, fourths, w);
        let minus_four = self.c(-4.0, w);
        let top = self.fma(whole, minus_four, top, w);
        let y = self.fma(digits[1], scales[1], top, w);
        let k = self.un(UnaryOp::Floor, y, w);
        let head = self.sub(y, k, w);
        // Above 1/2 the fraction is taken as `fraction - 1`, its tail complemented.
        let upper = self.cmp_c(CompareOp::Ge, head, 0.5, w);
        let full_digit = self.c(16_777_215.0, w);
        let mut tail = self.c(0.0, w);
        for j in (2..7).rev() {
            let complement = self.sub(full_digit, digits[j], w);
            let d = self.select(upper, complement, digits[j], w);
            tail = self.fma(d, scales[j], tail, w);
        }
        let one = self.c(1.0, w);
        let below_one = self.sub(head, one, w);
        let below_one = self.add(below_one, scales[1], w);
        let head = self.select(upper, below_one, head, w);
        let minus_tail = self.un(UnaryOp::Neg, tail, w);
        let tail = self.select(upper, minus_tail, tail, w);
        let k_up = self.add(k, one, w);
        let k = self.select(upper, k_up, k, w);
        (head, tail, k)
    }
}

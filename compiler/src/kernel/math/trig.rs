//! sin and cos: the choice of argument reduction by `k·π/2` (in f32, in f64 by a three-part
//! π/2, or exactly for arguments of any size, `reduce`), the series on the reduced argument
//! picked and signed by the quadrant, and the magnitude bounds that let a bounded argument
//! skip the test for huge ones, or (f32 sin below [`SIN_DIRECT_F32_LIMIT`]) its reduction.

use super::{int_of, Emit};
use crate::kernel::{KOp, Kernel};
use ferrax_ir::{BinaryOp, CompareOp, DType, UnaryOp};

/// Below this |x| f32 sin and cos can reduce their argument in f32 (within an ULP), four lanes
/// to a vector instead of two.
pub const SIN_COS_F32_LIMIT: f32 = 524_288.0; // 2^19

/// From this |x| on, f64 sin and cos reduce exactly: below it the quadrant count `|x|·2/π`
/// is below 2^51, where the three-part π/2 is right.
pub const SIN_COS_F64_LIMIT: f64 = 2_251_799_813_685_248.0; // 2^51

/// Up to this |x| f32 sin is its series without reduction ([`F32_SIN_DIRECT_COEFFS`]): the
/// outer sines of `sin(sin(x)·a + b)` chains, for instance.
pub const SIN_DIRECT_F32_LIMIT: f64 = 1.5;

/// P(s) of f32 sin(r) = r·(1 + r^2·P(r^2)): the three f32 coefficients that minimise the largest
/// relative error over |r| <= 1.03·π/4 (the reduced range with room for a misrounded quadrant),
/// found as a linear program over 3,000 points: 0.08 ULP, where the Taylor series needs four
/// terms for 0.04 (three give 9 ULP).
const F32_SIN_COEFFS: [f64; 3] = [
    -0.166_666_522_622_108_46,
    0.008_332_013_152_539_73,
    -0.000_194_954_627_659_171_82,
];

/// P(s) of f32 sin(x) = x·(1 + x^2·P(x^2)) for |x| <= [`SIN_DIRECT_F32_LIMIT`], where no
/// reduction is needed, fitted the same way over that range, each coefficient's rounding to f32
/// chosen among both neighbours by the worst error of the f32 evaluation: every f32 in
/// [0, 1.5] within 2 ULP of the rounded sine (as the reduced form). Six operations instead of
/// twenty-one.
const F32_SIN_DIRECT_COEFFS: [f64; 4] = [
    -0.166_666_537_523_269_65,
    0.008_332_972_414_791_584,
    -0.000_198_047_855_519_689_62,
    0.000_002_597_954_789_962_386_7,
];

/// Q(s) of f32 cos(r) = 1 + s·Q(r^2), found the same way with the first coefficient held at
/// -1/2: 0.006 ULP, where the Taylor series needs five terms.
const F32_COS_COEFFS: [f64; 4] = [
    -0.5,
    0.041_666_641_831_398_01,
    -0.001_388_711_505_569_517_6,
    0.000_024_410_433_979_937_807,
];

/// Where sin and cos reduce their argument: in f64 (by a three-part π/2), exactly (f32
/// arguments of any size, [`Emit::reduce_half_pi_exact`]), or (f32 arguments below
/// [`SIN_COS_F32_LIMIT`]) in f32, given a bound on the argument's magnitude where one is known.
enum Reduction {
    F64,
    Exact,
    /// f64 by the three-part π/2 below [`SIN_COS_F64_LIMIT`], exactly from there on.
    F64Exact,
    F32 {
        bound: Option<f64>,
    },
}

/// A bound on the magnitude of each float kernel value, where its operands give one (constants,
/// sin and cos, tanh and logistic, clamps, and sums, products, selects of bounded values), with a
/// margin for rounding where the value is computed rather than picked; NaN aside, which every
/// expansion passes through. It spares f32 sin and cos of bounded arguments (as in
/// `sin(sin(x)·a + b)`) the test for huge ones, and small sines their reduction.
pub(super) fn magnitude_bounds(kernel: &Kernel) -> Vec<Option<f64>> {
    let mut bounds: Vec<Option<f64>> = Vec::with_capacity(kernel.body.len());
    for ins in &kernel.body {
        let arg = |i: usize| ins.args.get(i).and_then(|&a| bounds[a]);
        let float = matches!(ins.dtype, DType::F32 | DType::F64);
        let picked = |b: Option<f64>| b.map(|b| (b, false));
        let computed = |b: Option<f64>| b.map(|b| (b, true));
        let bound = match &ins.op {
            _ if !float => None,
            KOp::Const(c) => picked(Some(c.to_f64().abs())),
            KOp::Unary(u) => match u {
                UnaryOp::Sin | UnaryOp::Cos | UnaryOp::Tanh | UnaryOp::Logistic => {
                    computed(Some(1.0))
                }
                UnaryOp::Neg | UnaryOp::Abs => picked(arg(0)),
                _ => None,
            },
            KOp::Binary(b) => match (b, arg(0), arg(1)) {
                (BinaryOp::Add | BinaryOp::Sub, Some(x), Some(y)) => computed(Some(x + y)),
                (BinaryOp::Mul, Some(x), Some(y)) => computed(Some(x * y)),
                (BinaryOp::Max | BinaryOp::Min, Some(x), Some(y)) => picked(Some(x.max(y))),
                _ => None,
            },
            KOp::Select => picked(arg(1).zip(arg(2)).map(|(x, y)| x.max(y))),
            KOp::Clamp => picked(arg(0).zip(arg(2)).map(|(lo, hi)| lo.max(hi))),
            KOp::Fma => match (arg(0), arg(1), arg(2)) {
                (Some(x), Some(y), Some(z)) => computed(Some(x * y + z)),
                _ => None,
            },
            _ => None,
        };
        // Rounding moves a computed result by far less than this margin.
        bounds.push(
            bound
                .map(|(b, rounds)| {
                    if rounds {
                        b * 1.01 + f64::MIN_POSITIVE
                    } else {
                        b
                    }
                })
                .filter(|b| b.is_finite()),
        );
    }
    bounds
}

/// `(-1)^i / (2i + first)!` for `i` in `0..count`: the sin (first = 3) and cos (first = 2)
/// series after their leading terms.
fn alternating_factorials(first: u32, count: u32) -> Vec<f64> {
    (0..count)
        .map(|i| {
            let n = first + 2 * i;
            let f: f64 = (1..=n).map(f64::from).product();
            if i % 2 == 0 {
                -1.0 / f
            } else {
                1.0 / f
            }
        })
        .collect()
}

impl Emit {
    /// sin (or cos, `u`) of `x`, `bound` a bound on `|x|` where one is known, reduced in f32
    /// where `bound` allows, else the host's way beyond the short reduction's limit where
    /// `host`, else exactly.
    pub(super) fn sin_or_cos(
        &mut self,
        u: UnaryOp,
        x: usize,
        t: DType,
        bound: Option<f64>,
        host: bool,
    ) -> usize {
        let cos = u == UnaryOp::Cos;
        let f32 = t == DType::F32;
        let small = bound.is_some_and(|b| b < f64::from(SIN_COS_F32_LIMIT));
        let direct = bound.is_some_and(|b| b <= SIN_DIRECT_F32_LIMIT);
        if f32 && direct && !cos {
            let s = self.mul(x, x, t);
            self.odd_series(x, s, &F32_SIN_DIRECT_COEFFS, t)
        } else if f32 && small {
            self.sin_cos(x, t, cos, Reduction::F32 { bound })
        } else if f32 && host {
            let y = self.sin_cos(x, t, cos, Reduction::F32 { bound: None });
            self.op(KOp::Beyond(u), &[x, y], t)
        } else if f32 {
            self.sin_cos(x, t, cos, Reduction::Exact)
        } else if bound.is_some_and(|b| b < SIN_COS_F64_LIMIT) {
            self.sin_cos(x, t, cos, Reduction::F64)
        } else if host {
            let y = self.sin_cos(x, t, cos, Reduction::F64);
            self.op(KOp::Beyond(u), &[x, y], t)
        } else {
            self.sin_cos(x, t, cos, Reduction::F64Exact)
        }
    }

    /// sin (or cos) of `x`: reduction by `k·π/2`, then the sin or cos series on the reduced
    /// argument in `t`, picked and signed by the quadrant.
    fn sin_cos(&mut self, x: usize, t: DType, cos: bool, reduction: Reduction) -> usize {
        let (r, mi) = match reduction {
            Reduction::F32 { bound } => self.reduce_half_pi_f32(x, bound),
            Reduction::F64 => self.reduce_half_pi_f64(x, t),
            Reduction::Exact => self.reduce_half_pi_exact(x),
            Reduction::F64Exact => {
                let (r, k) = self.reduce_half_pi_f64(x, t);
                let (r_huge, k_huge) = self.reduce_half_pi_exact_f64(x);
                let ax = self.un(UnaryOp::Abs, x, t);
                let small = self.cmp_c(CompareOp::Lt, ax, SIN_COS_F64_LIMIT, t);
                (
                    self.select(small, r, r_huge, t),
                    self.select(small, k, k_huge, DType::I64),
                )
            }
        };
        // sin(r) = r·(1 + s·P(s)) and cos(r) = 1 + s·Q(s), s = r^2: f64 takes the Taylor series
        // to r^19 and r^20, f32 the minimax fits `F32_SIN_COEFFS` and `F32_COS_COEFFS`.
        let (sin_coeffs, cos_coeffs) = if t == DType::F32 {
            (F32_SIN_COEFFS.to_vec(), F32_COS_COEFFS.to_vec())
        } else {
            (alternating_factorials(3, 9), alternating_factorials(2, 10))
        };
        let s = self.mul(r, r, t);
        let sin_r = self.odd_series(r, s, &sin_coeffs, t);
        let cp = self.poly(s, &cos_coeffs, t);
        let one = self.c(1.0, t);
        let cos_r = self.fma(s, cp, one, t);
        // Quadrant q = k mod 4 (cos is sin a quadrant on). Odd quadrants use the other series,
        // the upper two negate.
        let it = int_of(t);
        let (one, two) = (self.ci(1, it), self.ci(2, it));
        let q = if cos { self.add(mi, one, it) } else { mi };
        let q_odd = self.bin(BinaryOp::And, q, one, it);
        let odd = self.cmp(CompareOp::Eq, q_odd, one);
        let v = self.select(odd, cos_r, sin_r, t);
        // The upper quadrants negate: q's bit 1 moved to the sign bit, and flipped into v.
        let q_upper = self.bin(BinaryOp::And, q, two, it);
        let sign_shift = if t == DType::F32 { 30 } else { 62 };
        let flip = self.op(KOp::ShiftLeft(sign_shift), &[q_upper], it);
        let vb = self.bitcast(v, it);
        let yb = self.bin(BinaryOp::Xor, vb, flip, it);
        self.bitcast(yb, t)
    }

    /// `r·(1 + s·P(s))`, `s = r^2`, P's coefficients `coeffs`: the sine series. Multiplying by
    /// `r` last gives the result `r`'s sign exactly, zeros included, where `r + r^3·P(s)` rounds
    /// -0 + +0 to +0 and needs the sign put back (two more operations). Over every f32 in
    /// [0, 1.5] both forms are within 2 ULP with the direct coefficients.
    fn odd_series(&mut self, r: usize, s: usize, coeffs: &[f64], t: DType) -> usize {
        let sp = self.poly(s, coeffs, t);
        let one = self.c(1.0, t);
        let u = self.fma(s, sp, one, t);
        self.mul(r, u, t)
    }

    /// `x - k·π/2` in f64 (`x` widened from f32 first, the result narrowed back) and the low
    /// bits of `k = rint(x·2/π)` as an integer of `t`'s width, exact while `|k| < 2^51`. The
    /// parts of π/2 are all positive (each but the last rounded down), so that for `k = 0` every
    /// step adds -0 to -0 and `r` keeps the sign of a zero `x`.
    fn reduce_half_pi_f64(&mut self, x: usize, t: DType) -> (usize, usize) {
        let w = DType::F64;
        let xd = if t == DType::F32 {
            self.convert(x, w)
        } else {
            x
        };
        let inv = self.c(std::f64::consts::FRAC_2_PI, w);
        // k = rint(x·2/π) by adding and subtracting 1.5·2^52; the sum's low bits are then k's,
        // two's complement.
        let scaled = self.mul(xd, inv, w);
        let magic = self.c(1.5 * 2f64.powi(52), w);
        let shifted = self.add(scaled, magic, w);
        let parts = [
            std::f64::consts::FRAC_PI_2,
            6.123_233_995_736_765e-17,
            1.082_856_673_921_914e-32,
        ];
        let r = self.subtract_half_pis(xd, shifted, magic, &parts, w);
        let bits = self.bitcast(shifted, DType::I64);
        if t == DType::F32 {
            (self.convert(r, t), self.convert(bits, DType::I32))
        } else {
            (r, bits)
        }
    }

    /// [`Self::reduce_half_pi_f64`] for f32 `x` below [`SIN_COS_F32_LIMIT`], in f32. `k` is
    /// rounded in the fma that scales `x` (f32's 2/π is 2.6e-8 off, which below 2^19 moves
    /// `x·2/π` by at most 0.0135, so `|r|` stays within the series' fitted 1.03·π/4). π/2 is
    /// split into three positive f32 parts, as in f64; `x - k·p1` is exact (both have a
    /// granularity of at least 2^-24 and the difference is below 1), and the later fmas round
    /// once each, so `r` is within an ULP of `x - k·π/2` (the 2^-73 left of π/2, times `k`, is
    /// far below any `r` of an f32 in range). Where `|x| < 1.5` (`|k| <= 1` and `|r| > 0.07`
    /// unless `k = 0`) the third part is below 2^-40 of `r` and is left out.
    fn reduce_half_pi_f32(&mut self, x: usize, bound: Option<f64>) -> (usize, usize) {
        let t = DType::F32;
        let inv = self.c(std::f64::consts::FRAC_2_PI, t);
        let magic = self.c(1.5 * 2f64.powi(23), t);
        let shifted = self.fma(x, inv, magic, t);
        let parts = [
            1.570_796_251_296_997,
            7.549_789_415_861_596e-8,
            5.390_302_953_474_238e-15,
        ];
        let used = if bound.is_some_and(|b| b < 1.5) { 2 } else { 3 };
        let r = self.subtract_half_pis(x, shifted, magic, &parts[..used], t);
        (r, self.bitcast(shifted, DType::I32))
    }

    /// `x - k·π/2` for `k = shifted - magic`, π/2 being the sum of `parts`: one fma per part.
    fn subtract_half_pis(
        &mut self,
        x: usize,
        shifted: usize,
        magic: usize,
        parts: &[f64],
        t: DType,
    ) -> usize {
        let k = self.sub(shifted, magic, t);
        let mut r = x;
        for part in parts {
            let p = self.c(-part, t);
            r = self.fma(k, p, r, t);
        }
        r
    }
}

//! Transcendental functions expanded into kernel IR primitives (fma, integer bit manipulation,
//! compares and selects), so a backend without a math library (PTX) needs only to render
//! primitives. Every expansion is branch-free and accurate to 3 ULP for f32 over the whole
//! domain (f64: 4 ULP); [`expand_guarded`] leaves f32 sin and cos arguments beyond 2^19, and
//! f64 ones beyond 2^51, to a backend's own path ([`KOp::Beyond`]); `tests/math_ulp.rs`
//! measures each one against an f64 reference over dense samples.
//!
//! The methods are the classic ones: exp reduces by `k·ln2` (a two-part constant, so the reduced
//! argument is exact) and rebuilds `2^k` from its bits; log splits the exponent and mantissa and
//! uses the `atanh` series of `(m-1)/(m+1)`; sin/cos reduce by `k·π/2` with a three-part
//! constant (arguments of any size: exactly, from 26-bit chunks of 2/π for f32 and Payne and
//! Hanek's digit sums for f64); tanh, logistic, expm1 and log1p are arranged so that no
//! cancellation loses accuracy.
//! Polynomials are truncated Taylor series (f32 exp, expm1, tanh, sin and cos: minimax fits,
//! one or two terms shorter) whose error is below a tenth of an ULP on the reduced range. f32
//! sin/cos reduce in f32 (four lanes to a vector, not two) where the argument is known to be
//! below 2^19 or the backend computes larger ones its own way, else exactly; f32 sin of an
//! argument known to be at most 1.5 is its series alone; f32 pow runs entirely in f64.

use super::{rewrite, use_counts, KInstr, KOp, Kernel};
use ferrax_ir::{BinaryOp, CompareOp, DType, Scalar, UnaryOp};

/// Whether `op` on `dtype` is replaced by an expansion.
pub fn expands(op: &KOp, dtype: DType) -> bool {
    let float = matches!(dtype, DType::F32 | DType::F64);
    float
        && match op {
            KOp::Unary(u) => matches!(
                u,
                UnaryOp::Exp
                    | UnaryOp::Expm1
                    | UnaryOp::Log
                    | UnaryOp::Log1p
                    | UnaryOp::Tanh
                    | UnaryOp::Logistic
                    | UnaryOp::Sin
                    | UnaryOp::Cos
                    | UnaryOp::Rsqrt
            ),
            KOp::Binary(BinaryOp::Pow) => true,
            _ => false,
        }
}

/// Below this |x| f32 sin and cos can reduce their argument in f32 (within an ULP), four lanes
/// to a vector instead of two.
pub const SIN_COS_F32_LIMIT: f32 = 524_288.0; // 2^19

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

/// From this |x| on, f64 sin and cos reduce exactly: below it the quadrant count `|x|·2/π`
/// is below 2^51, where the three-part π/2 is right.
pub const SIN_COS_F64_LIMIT: f64 = 2_251_799_813_685_248.0; // 2^51

/// Up to this |x| f32 sin is its series without reduction ([`F32_SIN_DIRECT_COEFFS`]): the
/// outer sines of `sin(sin(x)·a + b)` chains, for instance.
pub const SIN_DIRECT_F32_LIMIT: f64 = 1.5;

/// Q(s) of f32 cos(r) = 1 + s·Q(r^2), found the same way with the first coefficient held at
/// -1/2: 0.006 ULP, where the Taylor series needs five terms.
const F32_COS_COEFFS: [f64; 4] = [
    -0.5,
    0.041_666_641_831_398_01,
    -0.001_388_711_505_569_517_6,
    0.000_024_410_433_979_937_807,
];

/// P(r) of f32 exp(r) = 1 + r·P(r), P's first coefficient held at 1: a degree-6 minimax fit
/// over |r| <= 1.01·ln2/2, 0.08 ULP with its coefficients rounded to f32 (the Taylor series
/// needs degree 7).
const F32_EXP_COEFFS: [f64; 6] = [
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

/// Q(r) of f32 `expm1(2r)/2 = r + r^2·Q(r)` over |r| <= 1.01·ln2/4 (tanh's reduced range),
/// fitted the same way: 0.04 ULP.
const F32_TANH_COEFFS: [f64; 6] = [
    1.0,
    0.666_666_626_930_236_8,
    0.333_330_899_477_005,
    0.133_334_100_246_429_44,
    0.044_609_881_937_503_815,
    0.012_703_646_905_720_234,
];

/// `kernel` with every transcendental replaced by its expansion (in a row kernel, at the
/// stage of the instruction it replaces).
pub fn expand(kernel: &Kernel) -> Kernel {
    expand_with(kernel, false, &|_, _| false)
}

/// [`expand`] for a backend with a path of its own for huge arguments: f32 sin and cos reduce
/// in f32, f64 ones by a three-part π/2, and arguments beyond [`SIN_COS_F32_LIMIT`] (f64:
/// [`SIN_COS_F64_LIMIT`]) take that path ([`KOp::Beyond`]: the host's function on the CPU, a
/// branch to the exact reduction on the GPU), so they are right however large the argument.
pub fn expand_guarded(kernel: &Kernel) -> Kernel {
    expand_with(kernel, true, &|_, _| false)
}

/// [`expand_guarded`] but for the instructions `native` picks (by op and type), which stay as
/// they are for a backend to compute its own way (the GPU's approximate instructions, under
/// fast math). Where exp is native, logistic and `1 + tanh(u)` (as `2 / (1 + exp(-2u))`)
/// take it too: neither cancels.
pub fn expand_guarded_except(kernel: &Kernel, native: &dyn Fn(&KOp, DType) -> bool) -> Kernel {
    expand_with(kernel, true, native)
}

/// `kernel` with every f32 remainder (`fmod`) computed exactly in f64 primitives
/// ([`Emit::rem_f32`]) and every i32 and i64 power by squaring ([`Emit::pow_int`]), for a
/// backend without either instruction (PTX).
pub fn expand_arithmetic(kernel: &Kernel) -> Kernel {
    rewrite(kernel, |e, _, ins, args| match (&ins.op, ins.dtype) {
        (KOp::Binary(BinaryOp::Rem), DType::F32) => e.rem_f32(args[0], args[1]),
        (KOp::Binary(BinaryOp::Pow), DType::I32 | DType::I64) => {
            e.pow_int(args[0], args[1], ins.dtype)
        }
        _ => e.op(ins.op.clone(), &args, ins.dtype),
    })
}

fn expand_with(kernel: &Kernel, host: bool, native: &dyn Fn(&KOp, DType) -> bool) -> Kernel {
    let bounds = magnitude_bounds(kernel);
    let quotients = tanh_quotients(kernel);
    rewrite(kernel, |e, k, ins, args| {
        let t = ins.dtype;
        let native_exp = native(&KOp::Unary(UnaryOp::Exp), t);
        let expanded = expands(&ins.op, t) && !native(&ins.op, t);
        match (&ins.op, expanded, quotients[k]) {
            (_, _, Quotient::Folded { kept }) => args[kept],
            // 1 + tanh(u) as 2 / (1 + exp(-2u)): the tanh becomes the denominator, the sum
            // the quotient unless a product takes the denominator.
            (_, _, Quotient::Tanh { scale }) => {
                let s = e.c(scale, t);
                let x = e.mul(args[0], s, t);
                if native_exp {
                    let ex = e.un(UnaryOp::Exp, x, t);
                    let one = e.c(1.0, t);
                    e.add(one, ex, t)
                } else {
                    e.one_plus_exp(x, t)
                }
            }
            (_, _, Quotient::Sum { tanh, alone }) => {
                if alone {
                    let two = e.c(2.0, t);
                    e.div(two, args[tanh], t)
                } else {
                    args[tanh]
                }
            }
            (_, _, Quotient::Product { sum }) => e.div(args[1 - sum], args[sum], t),
            (KOp::Unary(u), true, _) => {
                let x = args[0];
                match u {
                    UnaryOp::Exp => e.exp(x, t),
                    UnaryOp::Expm1 => e.expm1(x, t),
                    UnaryOp::Log => e.log(x, t),
                    UnaryOp::Log1p => e.log1p(x, t),
                    UnaryOp::Tanh => e.tanh(x, t),
                    UnaryOp::Logistic => e.logistic(x, t, native_exp),
                    UnaryOp::Sin | UnaryOp::Cos => {
                        let cos = *u == UnaryOp::Cos;
                        let f32 = t == DType::F32;
                        let bound = bounds[ins.args[0]];
                        let small = bound.is_some_and(|b| b < f64::from(SIN_COS_F32_LIMIT));
                        let direct = bound.is_some_and(|b| b <= SIN_DIRECT_F32_LIMIT);
                        if f32 && direct && !cos {
                            let s = e.mul(x, x, t);
                            e.odd_series(x, s, &F32_SIN_DIRECT_COEFFS, t)
                        } else if f32 && small {
                            e.sin_cos(x, t, cos, Reduction::F32 { bound })
                        } else if f32 && host {
                            let y = e.sin_cos(x, t, cos, Reduction::F32 { bound: None });
                            e.op(KOp::Beyond(*u), &[x, y], t)
                        } else if f32 {
                            e.sin_cos(x, t, cos, Reduction::Exact)
                        } else if bound.is_some_and(|b| b < SIN_COS_F64_LIMIT) {
                            e.sin_cos(x, t, cos, Reduction::F64)
                        } else if host {
                            let y = e.sin_cos(x, t, cos, Reduction::F64);
                            e.op(KOp::Beyond(*u), &[x, y], t)
                        } else {
                            e.sin_cos(x, t, cos, Reduction::F64Exact)
                        }
                    }
                    // Two correctly rounded steps, as on every backend.
                    _ => {
                        let one = e.c(1.0, t);
                        let root = e.un(UnaryOp::Sqrt, x, t);
                        e.div(one, root, t)
                    }
                }
            }
            (KOp::Binary(_), true, _) => e.pow(args[0], args[1], t),
            // Between constant bounds that are not zeros (whose signs the compares would not
            // see), a clamp is two compares and selects: x86 `maxps` and `minps`, where
            // Cranelift's NaN-propagating `fmax` and `fmin` take several instructions each.
            (KOp::Clamp, _, _) if matches!(t, DType::F32 | DType::F64) => {
                let bound = |k: usize| match kernel.body[ins.args[k]].op {
                    KOp::Const(c) => Some(c.to_f64()).filter(|b| b.is_finite() && *b != 0.0),
                    _ => None,
                };
                match (bound(0), bound(2)) {
                    (Some(lo), Some(hi)) => e.clamp_c(args[1], lo, hi, t),
                    _ => e.op(KOp::Clamp, &args, t),
                }
            }
            (op, _, _) => e.op(op.clone(), &args, t),
        }
    })
}

/// What [`expand`] makes of an instruction in an f32 `1 + tanh(u)` whose tanh has no other use
/// (in a row kernel, all in one stage): the sum is computed as `2 / (1 + exp(-2u))`, the same
/// function in about half the operations of tanh's, and without cancelling where tanh(u) nears
/// -1 (in f32 the sum is 0 from u = -9 on). Within 3 ULP down to u = -44; below, 0 or
/// subnormal (see [`Emit::one_plus_exp`]). GELU's tanh form, `x·0.5·(1 + tanh(x'·c))`, spends
/// most of its time here, so its constant products fold into the quotient:
/// `x / (1 + exp(x'·(-2c)))`.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Quotient {
    None,
    /// A product by a constant that its one user folds in: it reads the product's other
    /// operand, `args[kept]`, instead. Exact: what folds into the constant is a power of two
    /// (the -2 of `exp(-2u)`, the 2 of the quotient).
    Folded {
        kept: usize,
    },
    /// The tanh: becomes the denominator `1 + exp(v·scale)`, `v` its argument (-2 the scale)
    /// or its argument's folded product's other operand (-2c the scale).
    Tanh {
        scale: f64,
    },
    /// The sum, `args[tanh]` its tanh: `2 / denominator` where it is `alone`, else the
    /// denominator, which the product takes.
    Sum {
        tanh: usize,
        alone: bool,
    },
    /// `x·0.5·(1 + tanh(u))`, `args[sum]` the sum, the other operand a folded `x·0.5`:
    /// `x / denominator`, which neither overflows nor rounds twice.
    Product {
        sum: usize,
    },
}

fn tanh_quotients(kernel: &Kernel) -> Vec<Quotient> {
    let body = &kernel.body;
    let uses = use_counts(kernel);
    let mut user = vec![0; body.len()];
    for (i, ins) in body.iter().enumerate() {
        for &a in &ins.args {
            user[a] = i;
        }
    }
    let stage = |k: usize| kernel.rows.as_ref().map(|r| r.stages[k]);
    let f32_op = |k: usize, op: KOp| body[k].op == op && body[k].dtype == DType::F32;
    let mut plan = vec![Quotient::None; body.len()];
    // A product of a constant whose only use is `by`: the other operand's position and the
    // constant.
    let const_product = |plan: &[Quotient], k: usize, by: usize| {
        let candidate = f32_op(k, KOp::Binary(BinaryOp::Mul))
            && uses[k] == 1
            && stage(k) == stage(by)
            && plan[k] == Quotient::None;
        let args = &body[k].args;
        (0..2)
            .filter(|_| candidate)
            .find_map(|i| match body[args[i]].op {
                KOp::Const(c) => Some((1 - i, c.to_f64())),
                _ => None,
            })
    };
    for (i, ins) in body.iter().enumerate() {
        if !f32_op(i, KOp::Binary(BinaryOp::Add)) {
            continue;
        }
        let is_tanh = |k: usize| body[k].op == KOp::Unary(UnaryOp::Tanh);
        let is_one = |k: usize| body[k].op == KOp::Const(Scalar::F32(1.0));
        let (a, b) = (ins.args[0], ins.args[1]);
        let tanh = match (is_tanh(a), is_tanh(b)) {
            (true, _) if is_one(b) => 0,
            (_, true) if is_one(a) => 1,
            _ => continue,
        };
        let t = ins.args[tanh];
        if uses[t] != 1 || stage(t) != stage(i) {
            continue;
        }
        plan[i] = Quotient::Sum { tanh, alone: true };
        plan[t] = Quotient::Tanh { scale: -2.0 };
        let u = body[t].args[0];
        if let Some((kept, c)) = const_product(&plan, u, t) {
            let scale = c * -2.0;
            if (scale as f32).is_normal() {
                plan[u] = Quotient::Folded { kept };
                plan[t] = Quotient::Tanh { scale };
            }
        }
        let p = user[i];
        if uses[i] == 1 && f32_op(p, KOp::Binary(BinaryOp::Mul)) && stage(p) == stage(i) {
            let sum = usize::from(body[p].args[1] == i);
            let m = body[p].args[1 - sum];
            if let Some((kept, 0.5)) = const_product(&plan, m, p) {
                plan[m] = Quotient::Folded { kept };
                plan[i] = Quotient::Sum { tanh, alone: false };
                plan[p] = Quotient::Product { sum };
            }
        }
    }
    plan
}

/// A bound on the magnitude of each float kernel value, where its operands give one (constants,
/// sin and cos, tanh and logistic, clamps, and sums, products, selects of bounded values), with a
/// margin for rounding where the value is computed rather than picked; NaN aside, which every
/// expansion passes through. It spares f32 sin and cos of bounded arguments (as in
/// `sin(sin(x)·a + b)`) the test for huge ones, and small sines their reduction.
fn magnitude_bounds(kernel: &Kernel) -> Vec<Option<f64>> {
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

/// The integer type of the same width as float type `t`.
fn int_of(t: DType) -> DType {
    if t == DType::F32 {
        DType::I32
    } else {
        DType::I64
    }
}

/// Exponent bias and mantissa width of float type `t`.
fn layout(t: DType) -> (i64, u32) {
    if t == DType::F32 {
        (127, 23)
    } else {
        (1023, 52)
    }
}

/// `1/n!` for `n` in `from..=to`.
fn inverse_factorials(from: u32, to: u32) -> Vec<f64> {
    let mut f = 1.0f64;
    let mut out = Vec::new();
    for n in 1..=to {
        f *= f64::from(n);
        if n >= from {
            out.push(1.0 / f);
        }
    }
    if from == 0 {
        out.insert(0, 1.0);
    }
    out
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

pub(super) struct Emit {
    pub(super) body: Vec<KInstr>,
}

/// The integer [`Emit::reduce_ln2`] returns: `k + offset` or `offset - k`, or (`Field`) the
/// exponent field of `2^k`, `k + bias`, in its low bits and other bits above, which
/// [`Emit::power_of_two`]'s shift drops: one instruction fewer.
enum Count {
    Plus(i64),
    Minus(i64),
    Field,
}

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

impl Emit {
    pub(super) fn op(&mut self, op: KOp, args: &[usize], dtype: DType) -> usize {
        self.body.push(KInstr {
            op,
            args: args.to_vec(),
            dtype,
        });
        self.body.len() - 1
    }

    pub(super) fn c(&mut self, v: f64, t: DType) -> usize {
        let s = if t == DType::F32 {
            Scalar::F32(v as f32)
        } else {
            Scalar::F64(v)
        };
        self.op(KOp::Const(s), &[], t)
    }

    pub(super) fn ci(&mut self, v: i64, t: DType) -> usize {
        let s = if t == DType::I32 {
            Scalar::I32(v as i32)
        } else {
            Scalar::I64(v)
        };
        self.op(KOp::Const(s), &[], t)
    }

    pub(super) fn un(&mut self, u: UnaryOp, x: usize, t: DType) -> usize {
        self.op(KOp::Unary(u), &[x], t)
    }

    pub(super) fn bin(&mut self, b: BinaryOp, x: usize, y: usize, t: DType) -> usize {
        self.op(KOp::Binary(b), &[x, y], t)
    }

    pub(super) fn add(&mut self, x: usize, y: usize, t: DType) -> usize {
        self.bin(BinaryOp::Add, x, y, t)
    }

    pub(super) fn sub(&mut self, x: usize, y: usize, t: DType) -> usize {
        self.bin(BinaryOp::Sub, x, y, t)
    }

    pub(super) fn mul(&mut self, x: usize, y: usize, t: DType) -> usize {
        self.bin(BinaryOp::Mul, x, y, t)
    }

    fn div(&mut self, x: usize, y: usize, t: DType) -> usize {
        self.bin(BinaryOp::Div, x, y, t)
    }

    fn fma(&mut self, x: usize, y: usize, z: usize, t: DType) -> usize {
        self.op(KOp::Fma, &[x, y, z], t)
    }

    pub(super) fn cmp(&mut self, c: CompareOp, x: usize, y: usize) -> usize {
        self.op(KOp::Compare(c), &[x, y], DType::Bool)
    }

    fn cmp_c(&mut self, c: CompareOp, x: usize, v: f64, t: DType) -> usize {
        let k = self.c(v, t);
        self.cmp(c, x, k)
    }

    pub(super) fn select(&mut self, p: usize, x: usize, y: usize, t: DType) -> usize {
        self.op(KOp::Select, &[p, x, y], t)
    }

    /// `v` where `p` holds, else `x`.
    fn select_c(&mut self, p: usize, v: f64, x: usize, t: DType) -> usize {
        let k = self.c(v, t);
        self.select(p, k, x, t)
    }

    fn and(&mut self, p: usize, q: usize) -> usize {
        self.bin(BinaryOp::And, p, q, DType::Bool)
    }

    pub(super) fn convert(&mut self, x: usize, to: DType) -> usize {
        self.op(KOp::Convert(to), &[x], to)
    }

    pub(super) fn bitcast(&mut self, x: usize, to: DType) -> usize {
        self.op(KOp::Bitcast, &[x], to)
    }

    /// `x` clamped to `[lo, hi]`, NaN passing through. Each bound is one constant that the
    /// compare and the select share, the pattern x86 `maxps`/`minps` implement.
    fn clamp_c(&mut self, x: usize, lo: f64, hi: f64, t: DType) -> usize {
        let lo = self.c(lo, t);
        let below = self.cmp(CompareOp::Lt, x, lo);
        let low = self.select(below, lo, x, t);
        let hi = self.c(hi, t);
        let above = self.cmp(CompareOp::Lt, hi, low);
        self.select(above, hi, low, t)
    }

    /// Integer `e` (an exponent, far below 2^51) as a float of type `t`. f64 adds it to the
    /// bits of 1.5·2^52, whose last bit has weight one, and subtracts that again: exact, and
    /// integer adds and bit casts where x86 has no two-lane i64 to f64 conversion before
    /// AVX-512 (f32 pow computes in f64, two lanes to a vector).
    fn exponent_to_float(&mut self, e: usize, t: DType) -> usize {
        if t != DType::F64 {
            return self.convert(e, t);
        }
        let magic = 1.5 * 2f64.powi(52);
        let bits = self.ci(magic.to_bits() as i64, DType::I64);
        let sum = self.add(e, bits, DType::I64);
        let f = self.bitcast(sum, t);
        let m = self.c(magic, t);
        self.sub(f, m, t)
    }

    /// Horner evaluation of `sum coeffs[i] * x^i`.
    fn poly(&mut self, x: usize, coeffs: &[f64], t: DType) -> usize {
        let mut acc = self.c(coeffs[coeffs.len() - 1], t);
        for &c in coeffs[..coeffs.len() - 1].iter().rev() {
            let k = self.c(c, t);
            acc = self.fma(acc, x, k, t);
        }
        acc
    }

    /// Keeps `x` itself where `x` is ±0, so that odd functions keep the sign of zero.
    fn keep_zero(&mut self, x: usize, y: usize, t: DType) -> usize {
        let zero = self.cmp_c(CompareOp::Eq, x, 0.0, t);
        self.select(zero, x, y, t)
    }

    /// The power of two whose biased exponent field is `field` (normal).
    fn power_of_two(&mut self, field: usize, t: DType) -> usize {
        let (_, mant) = layout(t);
        let bits = self.op(KOp::ShiftLeft(mant), &[field], int_of(t));
        self.bitcast(bits, t)
    }

    /// `x - k·ln2/scale` for integer-valued `k` (`scale` 1 or 2), exact to the working
    /// precision, and the integer `k = rint(x·scale/ln2)` as [`Count`] asks, for `|x·scale/ln2|`
    /// below 2^21 (callers clamp first). `k` is rounded by adding 1.5·2^m (m the mantissa width)
    /// to `x·scale·log2(e)` in one fma and subtracting it again: the sum's last bit has weight
    /// one, so it rounds to nearest even, and its bits minus the constant's are `k` itself (the
    /// offset folded into the constant subtracted).
    fn reduce_ln2(&mut self, x: usize, scale: f64, count: Count, t: DType) -> (usize, usize) {
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

    /// f32 `1 + exp(x)` for `2 / (1 + exp(x))`: `x` clamped to [-87, 88.8], and one power of
    /// two, which is infinite for x from 88.38 on (where the quotient's exact value is
    /// subnormal, and rounds to 0 from 88.72), so the quotient is 0 there; from -87 down the
    /// quotient is 2, as exactly. The sum is the fma of the polynomial, the power and 1.
    fn one_plus_exp(&mut self, x: usize, t: DType) -> usize {
        let xc = self.clamp_c(x, -87.0, 88.8, t);
        let (field, r) = self.reduce_ln2(xc, 1.0, Count::Field, t);
        let p = self.poly(r, &F32_EXP_COEFFS, t);
        let one = self.c(1.0, t);
        let p = self.fma(p, r, one, t);
        let scale = self.power_of_two(field, t);
        self.fma(p, scale, one, t)
    }

    fn exp(&mut self, x: usize, t: DType) -> usize {
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

    fn expm1(&mut self, x: usize, t: DType) -> usize {
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

    fn log(&mut self, x: usize, t: DType) -> usize {
        let core = self.log_core(x, t);
        self.log_specials(x, core, t)
    }

    fn log1p(&mut self, x: usize, t: DType) -> usize {
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

    /// tanh(a) for a = |x| as `(h + 1/2 - 2^-(k+1)) / (h + 1/2 + 2^-(k+1))`, from
    /// `2a = k·ln2 + 2r` and `h = expm1(2r)/2`: the quotient `(e^2a - 1)/(e^2a + 1)` divided
    /// through by `2^(k+1)`. For `k = 0` the numerator is `h` itself; above, `|h| <= 0.21`
    /// meets constants of at least 1/4, so the sums lose little. The constants hang off `k`,
    /// not off the polynomial, which keeps the chain from `x` to the result short. Exhaustively
    /// at most 3 ULP for f32 (inputs near |x| = 8, where numerator and denominator straddle 1/2).
    fn tanh(&mut self, x: usize, t: DType) -> usize {
        // |x| and x's sign bit alone, by bit masks: the sign goes back on with one `or`.
        let it = int_of(t);
        let bits = self.bitcast(x, it);
        let magnitude_mask = if t == DType::F32 {
            i64::from(i32::MAX)
        } else {
            i64::MAX
        };
        let mask = self.ci(magnitude_mask, it);
        let a_bits = self.bin(BinaryOp::And, bits, mask, it);
        let sign = self.bin(BinaryOp::Xor, bits, a_bits, it);
        let a = self.bitcast(a_bits, t);
        // From 10 (f32) or 20 (f64) on the quotient rounds to 1; NaN passes the clamp.
        let hi = if t == DType::F32 { 10.0 } else { 20.0 };
        let hi = self.c(hi, t);
        let above = self.cmp(CompareOp::Lt, hi, a);
        let ac = self.select(above, hi, a, t);
        let (bias, _) = layout(t);
        let (field, r) = self.reduce_ln2(ac, 2.0, Count::Minus(bias - 1), t);
        let coeffs = if t == DType::F32 {
            F32_TANH_COEFFS.to_vec()
        } else {
            // Q(r) = 2·q(2r), q expm1's series after `r`: 2^(j+1)/(j+2)!.
            inverse_factorials(2, 15)
                .iter()
                .zip(1..)
                .map(|(f, j)| 2f64.powi(j) * f)
                .collect()
        };
        let q = self.poly(r, &coeffs, t);
        let r2 = self.mul(r, r, t);
        let h = self.fma(r2, q, r, t);
        let half_u = self.power_of_two(field, t);
        let half = self.c(0.5, t);
        let c_num = self.sub(half, half_u, t);
        let c_den = self.add(half, half_u, t);
        let num = self.add(h, c_num, t);
        let den = self.add(h, c_den, t);
        let y = self.div(num, den, t);
        let y_bits = self.bitcast(y, it);
        let signed = self.bin(BinaryOp::Or, y_bits, sign, it);
        self.bitcast(signed, t)
    }

    /// `magnitude` (sign bit clear, or of `sign`'s sign already) with the sign of `sign`: sine
    /// is odd, ±0 included.
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

    /// `1 / (1 + exp(-x))`, its exp the backend's own where `native_exp`.
    fn logistic(&mut self, x: usize, t: DType, native_exp: bool) -> usize {
        let a = self.un(UnaryOp::Abs, x, t);
        let na = self.un(UnaryOp::Neg, a, t);
        let e = if native_exp {
            self.un(UnaryOp::Exp, na, t)
        } else {
            self.exp(na, t)
        };
        let one = self.c(1.0, t);
        let den = self.add(one, e, t);
        let pos = self.div(one, den, t);
        let neg = self.div(e, den, t);
        let is_neg = self.cmp_c(CompareOp::Lt, x, 0.0, t);
        self.select(is_neg, neg, pos, t)
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

    /// [`Self::reduce_half_pi_f64`] for f32 `x` of any size (Payne and Hanek's idea, without a
    /// table): `x·2/π mod 4` as the sum of `x·c_i mod 4` over [`TWO_OVER_PI_CHUNKS`]. Each
    /// product is exact in f64 (24 bits times 26), and so is each `mod 4` taken to [-2, 2]
    /// (`t - 4·rint(t/4)`: a small `t` is kept as it is, and a large one loses only whole
    /// multiples of 4, within its own bits), so the chunks whose product is a multiple of 4 drop
    /// out exactly however large `x`; the eight partial results are summed with their rounding
    /// errors kept (two-sum), so the fraction is right to about 2^-100 even where `x` lies within
    /// 2^-30 of a multiple of π/2. Then `k` is the sum rounded, `r = (sum - k)·π/2`, and a zero
    /// `x` gives its own zero, sign included. About 60 f64 operations: the GPU runs it only for
    /// arguments beyond [`SIN_COS_F32_LIMIT`].
    fn reduce_half_pi_exact(&mut self, x: usize) -> (usize, usize) {
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
    /// [`SIN_COS_F64_LIMIT`].
    fn reduce_half_pi_exact_f64(&mut self, x: usize) -> (usize, usize) {
        let (w, i) = (DType::F64, DType::I64);
        const DIGITS: usize = TWO_OVER_PI_DIGITS.len();
        // The exponent window: n0 = floor((E - 1029)/24) in [1, 42] for |x| >= 2^51 (E the
        // biased exponent), the first digit group `F_n0` of weight below 4.
        const FIRST: usize = 1;
        const LAST: usize = 42;
        const WINDOW: usize = 9;
        let ax = self.un(UnaryOp::Abs, x, w);
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
        let e = self.exponent_to_float(field, w);
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
        let scale = self.bitcast(scale_bits, w);
        // D_(n0 + c) for c in -2..WINDOW: one select per candidate n0.
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
        let picked: Vec<usize> = (-2..WINDOW as isize)
            .map(|c| {
                let mut d = self.c(digit(FIRST, c), w);
                for (n, &p) in (FIRST + 1..=LAST).zip(&is_n0) {
                    let candidate = self.c(digit(n, c), w);
                    d = self.select(p, candidate, d, w);
                }
                d
            })
            .collect();
        // F_(n0+j) = X0·D_(n0+j) + X1·D_(n0+j-1) + X2·D_(n0+j-2), then carried into digits.
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

    /// f32 `x % y` (C's `fmod`: truncated, the sign of `x`), exact: in f64, `|x|` is reduced by
    /// `d = |y|·2^(26i)` for i = 10 down to 0 (2^286 covers the widest f32 quotient, 2^277).
    /// Before step `i` the remainder is below `d·2^26` and a multiple of `d`'s ULP, so the
    /// quotient digit `q` is below 2^26, `q·d` is exact (50 bits), and so is `r - q·d`. `q`
    /// comes from one reciprocal of `|y|`: two roundings leave the estimate within 2^-26 of
    /// `r/d`, which, unless whole, is at least 2^-24 from an integer (`d` has 24 bits), so `q`
    /// is right or, for a whole quotient, one short, which one subtraction corrects. A zero or
    /// NaN `y`, or an infinite or NaN `x`, gives NaN; an infinite `y`, `x` itself.
    fn rem_f32(&mut self, x: usize, y: usize) -> usize {
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
    fn pow_int(&mut self, x: usize, y: usize, i: DType) -> usize {
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

    fn pow(&mut self, x: usize, y: usize, t: DType) -> usize {
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

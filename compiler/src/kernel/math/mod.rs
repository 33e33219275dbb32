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
//!
//! Here are the entry points, the choice of expansion for each instruction and the `Emit`
//! builder with its shared steps; each family has its own file: `exp_log` (exp, expm1, log,
//! log1p, pow), `tanh` (tanh, logistic and the `1 + tanh(u)` quotient), `trig` (sin and cos,
//! their short reductions and the bounds that pick one), `reduce` (the exact reductions of
//! arguments of any size) and `arithmetic` (f32 remainders and integer powers).

mod arithmetic;
mod exp_log;
mod reduce;
mod tanh;
mod trig;

pub use trig::{SIN_COS_F32_LIMIT, SIN_COS_F64_LIMIT, SIN_DIRECT_F32_LIMIT};

use super::{rewrite, KInstr, KOp, Kernel};
use ferrax_ir::{BinaryOp, CompareOp, DType, Scalar, UnaryOp};
use tanh::tanh_quotients;
use trig::magnitude_bounds;

/// Whether `op` on `dtype` is replaced by an expansion.
pub fn expands(op: &KOp, dtype: DType) -> bool {
    let float = matches!(dtype, DType::F32 | DType::F64);
    float
        && match op {
            KOp::Unary(u) => match u {
                UnaryOp::Exp
                | UnaryOp::Expm1
                | UnaryOp::Log
                | UnaryOp::Log1p
                | UnaryOp::Tanh
                | UnaryOp::Logistic
                | UnaryOp::Sin
                | UnaryOp::Cos
                | UnaryOp::Rsqrt => true,
                UnaryOp::Neg
                | UnaryOp::Abs
                | UnaryOp::Sign
                | UnaryOp::Floor
                | UnaryOp::Ceil
                | UnaryOp::Round
                | UnaryOp::RoundEven
                | UnaryOp::Sqrt
                | UnaryOp::Not => false,
                // Host steps (the support tables), never in a kernel.
                UnaryOp::Tan
                | UnaryOp::Asin
                | UnaryOp::Acos
                | UnaryOp::Atan
                | UnaryOp::Sinh
                | UnaryOp::Cosh
                | UnaryOp::Asinh
                | UnaryOp::Acosh
                | UnaryOp::Atanh
                | UnaryOp::Cbrt
                | UnaryOp::Lgamma
                | UnaryOp::Digamma
                | UnaryOp::Erf
                | UnaryOp::Erfc
                | UnaryOp::ErfInv
                | UnaryOp::BesselI0e
                | UnaryOp::BesselI1e
                | UnaryOp::Real
                | UnaryOp::Imag => false,
            },
            KOp::Binary(b) => match b {
                BinaryOp::Pow => true,
                BinaryOp::Atan2
                | BinaryOp::Complex
                | BinaryOp::Add
                | BinaryOp::Sub
                | BinaryOp::Mul
                | BinaryOp::Div
                | BinaryOp::Rem
                | BinaryOp::Max
                | BinaryOp::Min
                | BinaryOp::And
                | BinaryOp::Or
                | BinaryOp::Xor
                | BinaryOp::ShiftLeft
                | BinaryOp::ShiftRightLogical
                | BinaryOp::ShiftRightArithmetic => false,
            },
            KOp::Load(_)
            | KOp::Const(_)
            | KOp::Compare(_)
            | KOp::Select
            | KOp::Clamp
            | KOp::Convert(_)
            | KOp::Fma
            | KOp::Bitcast
            | KOp::ShiftLeft(_)
            | KOp::ShiftRight(_)
            | KOp::ShiftRightLogical(_)
            | KOp::Index { .. }
            | KOp::Store(_)
            | KOp::Reduce(_)
            | KOp::Accumulate(_)
            | KOp::Beyond(_) => false,
        }
}

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
        if let Some(y) = e.tanh_quotient(quotients[k], &args, t, native_exp) {
            return y;
        }
        let expanded = expands(&ins.op, t) && !native(&ins.op, t);
        match (&ins.op, expanded) {
            (KOp::Unary(u), true) => {
                let x = args[0];
                match u {
                    UnaryOp::Exp => e.exp(x, t),
                    UnaryOp::Expm1 => e.expm1(x, t),
                    UnaryOp::Log => e.log(x, t),
                    UnaryOp::Log1p => e.log1p(x, t),
                    UnaryOp::Tanh => e.tanh(x, t),
                    UnaryOp::Logistic => e.logistic(x, t, native_exp),
                    UnaryOp::Sin | UnaryOp::Cos => {
                        e.sin_or_cos(*u, x, t, bounds[ins.args[0]], host)
                    }
                    // Two correctly rounded steps, as on every backend.
                    UnaryOp::Rsqrt => {
                        let one = e.c(1.0, t);
                        let root = e.un(UnaryOp::Sqrt, x, t);
                        e.div(one, root, t)
                    }
                    // Not expanded ([`expands`]).
                    UnaryOp::Neg
                    | UnaryOp::Abs
                    | UnaryOp::Sign
                    | UnaryOp::Floor
                    | UnaryOp::Ceil
                    | UnaryOp::Round
                    | UnaryOp::RoundEven
                    | UnaryOp::Sqrt
                    | UnaryOp::Not
                    | UnaryOp::Tan
                    | UnaryOp::Asin
                    | UnaryOp::Acos
                    | UnaryOp::Atan
                    | UnaryOp::Sinh
                    | UnaryOp::Cosh
                    | UnaryOp::Asinh
                    | UnaryOp::Acosh
                    | UnaryOp::Atanh
                    | UnaryOp::Cbrt
                    | UnaryOp::Lgamma
                    | UnaryOp::Digamma
                    | UnaryOp::Erf
                    | UnaryOp::Erfc
                    | UnaryOp::ErfInv
                    | UnaryOp::BesselI0e
                    | UnaryOp::BesselI1e
                    | UnaryOp::Real
                    | UnaryOp::Imag => e.op(ins.op.clone(), &args, t),
                }
            }
            (KOp::Binary(_), true) => e.pow(args[0], args[1], t),
            // Between constant bounds that are not zeros (whose signs the compares would not
            // see), a clamp is two compares and selects: x86 `maxps` and `minps`, where
            // Cranelift's NaN-propagating `fmax` and `fmin` take several instructions each.
            (KOp::Clamp, _) if matches!(t, DType::F32 | DType::F64) => {
                let bound = |k: usize| match kernel.body[ins.args[k]].op {
                    KOp::Const(c) => Some(c.to_f64()).filter(|b| b.is_finite() && *b != 0.0),
                    _ => None,
                };
                match (bound(0), bound(2)) {
                    (Some(lo), Some(hi)) => e.clamp_c(args[1], lo, hi, t),
                    _ => e.op(KOp::Clamp, &args, t),
                }
            }
            (op, _) => e.op(op.clone(), &args, t),
        }
    })
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

pub(super) struct Emit {
    pub(super) body: Vec<KInstr>,
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
}

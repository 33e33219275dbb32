//! Elementwise ops. Each rule is stated once as the partial derivative of the result with
//! respect to each operand (a [`Factor`]); forward mode multiplies tangents by it, reverse
//! mode multiplies the cotangent by it. Holomorphic functions of complex numbers use the real
//! rules as they are (see the module docs of `autodiff`); the ops that take complex numbers to
//! real ones or back have factors of their own, applied differently in each direction.

use super::{or_zero, sum_terms, Emitter, R};
use crate::autodiff::{differentiable, AutodiffError};
use ferrax_ir::{BinaryOp, CompareOp, DType, UnaryOp, ValueId};

/// A partial derivative, with the common constant cases kept symbolic.
enum Factor {
    Zero,
    One,
    NegOne,
    Of(ValueId),
    /// A complex operand's real part: `t ↦ re(t)`, `g ↦ g + 0i`.
    RealPart,
    /// A complex operand's imaginary part: `t ↦ im(t)`, `g ↦ 0 − g·i`.
    ImagPart,
    /// A real function of a complex operand whose differential is `re(c·dz)`: `t ↦ re(c·t)`,
    /// `g ↦ (g + 0i)·c`.
    RealOf(ValueId),
    /// A real operand taken as a complex number's real part: `t ↦ t + 0i`, `g ↦ re(g)`.
    IntoReal,
    /// A real operand taken as a complex number's imaginary part: `t ↦ 0 + t·i`, `g ↦ −im(g)`.
    IntoImag,
}

/// `x + 0i`.
fn real_to_complex(e: &mut Emitter, x: ValueId) -> R {
    let zero = e.full_like(0.0, x)?;
    e.binary(BinaryOp::Complex, x, zero)
}

/// The complex conjugate of `z`.
pub(super) fn conj(e: &mut Emitter, z: ValueId) -> R {
    let re = e.unary(UnaryOp::Real, z)?;
    let im = e.unary(UnaryOp::Imag, z)?;
    let minus_im = e.neg(im)?;
    e.binary(BinaryOp::Complex, re, minus_im)
}

/// The factor applied to a tangent `t` (forward mode).
fn forward(e: &mut Emitter, f: &Factor, t: ValueId) -> R<Option<ValueId>> {
    Ok(Some(match f {
        Factor::Zero => return Ok(None),
        Factor::One => t,
        Factor::NegOne => e.neg(t)?,
        Factor::Of(v) => e.mul(t, *v)?,
        Factor::RealPart => e.unary(UnaryOp::Real, t)?,
        Factor::ImagPart => e.unary(UnaryOp::Imag, t)?,
        Factor::RealOf(c) => {
            let product = e.mul(t, *c)?;
            e.unary(UnaryOp::Real, product)?
        }
        Factor::IntoReal => real_to_complex(e, t)?,
        Factor::IntoImag => {
            let zero = e.full_like(0.0, t)?;
            e.binary(BinaryOp::Complex, zero, t)?
        }
    }))
}

/// The factor's transpose applied to a cotangent `g` (reverse mode).
fn backward(e: &mut Emitter, f: &Factor, g: ValueId) -> R<Option<ValueId>> {
    Ok(Some(match f {
        Factor::Zero => return Ok(None),
        Factor::One => g,
        Factor::NegOne => e.neg(g)?,
        Factor::Of(v) => e.mul(g, *v)?,
        Factor::RealPart => real_to_complex(e, g)?,
        Factor::ImagPart => {
            let zero = e.full_like(0.0, g)?;
            let minus_g = e.neg(g)?;
            e.binary(BinaryOp::Complex, zero, minus_g)?
        }
        Factor::RealOf(c) => {
            let g = real_to_complex(e, g)?;
            e.mul(g, *c)?
        }
        Factor::IntoReal => e.unary(UnaryOp::Real, g)?,
        Factor::IntoImag => {
            let im = e.unary(UnaryOp::Imag, g)?;
            e.neg(im)?
        }
    }))
}

fn recip(e: &mut Emitter, x: ValueId) -> R {
    let one = e.full_like(1.0, x)?;
    e.div(one, x)
}

/// d y / d x for `y = u(x)`.
fn unary_factor(e: &mut Emitter, u: UnaryOp, x: ValueId, y: ValueId) -> R<Factor> {
    Ok(match u {
        UnaryOp::Neg => Factor::NegOne,
        UnaryOp::Sign
        | UnaryOp::Floor
        | UnaryOp::Ceil
        | UnaryOp::Round
        | UnaryOp::RoundEven
        | UnaryOp::Not => Factor::Zero,
        // d|z| = re(conj(z)/|z|·dz), and 0 at z = 0 (JAX's choice).
        UnaryOp::Abs if e.ty(x)?.dtype.is_complex() => {
            let zero = e.full_like(0.0, y)?;
            let one = e.full_like(1.0, y)?;
            let at_zero = e.compare(CompareOp::Eq, y, zero)?;
            let magnitude = e.select(at_zero, one, y)?;
            let magnitude = real_to_complex(e, magnitude)?;
            let direction = conj(e, x)?;
            Factor::RealOf(e.div(direction, magnitude)?)
        }
        UnaryOp::Abs => Factor::Of(e.unary(UnaryOp::Sign, x)?),
        UnaryOp::Exp => Factor::Of(y),
        UnaryOp::Expm1 => {
            let one = e.full_like(1.0, y)?;
            Factor::Of(e.add(y, one)?)
        }
        UnaryOp::Log => Factor::Of(recip(e, x)?),
        UnaryOp::Log1p => {
            let one = e.full_like(1.0, x)?;
            let x1 = e.add(x, one)?;
            Factor::Of(recip(e, x1)?)
        }
        UnaryOp::Sqrt => {
            let half = e.full_like(0.5, y)?;
            Factor::Of(e.div(half, y)?)
        }
        UnaryOp::Rsqrt => {
            let half_y = e.scale(y, -0.5)?;
            Factor::Of(e.div(half_y, x)?)
        }
        UnaryOp::Tanh => {
            let one = e.full_like(1.0, y)?;
            let y2 = e.mul(y, y)?;
            Factor::Of(e.sub(one, y2)?)
        }
        UnaryOp::Logistic => {
            let one = e.full_like(1.0, y)?;
            let rest = e.sub(one, y)?;
            Factor::Of(e.mul(y, rest)?)
        }
        UnaryOp::Sin => Factor::Of(e.unary(UnaryOp::Cos, x)?),
        UnaryOp::Cos => {
            let s = e.unary(UnaryOp::Sin, x)?;
            Factor::Of(e.neg(s)?)
        }
        // JAX's rules, term for term.
        UnaryOp::Tan => {
            let one = e.full_like(1.0, y)?;
            let y2 = e.mul(y, y)?;
            Factor::Of(e.add(one, y2)?)
        }
        UnaryOp::Asin | UnaryOp::Acos => {
            let one = e.full_like(1.0, x)?;
            let x2 = e.mul(x, x)?;
            let rest = e.sub(one, x2)?;
            let r = e.unary(UnaryOp::Rsqrt, rest)?;
            Factor::Of(if u == UnaryOp::Acos { e.neg(r)? } else { r })
        }
        UnaryOp::Atan => {
            let one = e.full_like(1.0, x)?;
            let x2 = e.mul(x, x)?;
            let den = e.add(one, x2)?;
            Factor::Of(recip(e, den)?)
        }
        UnaryOp::Sinh => Factor::Of(e.unary(UnaryOp::Cosh, x)?),
        UnaryOp::Cosh => Factor::Of(e.unary(UnaryOp::Sinh, x)?),
        UnaryOp::Asinh => {
            let one = e.full_like(1.0, x)?;
            let x2 = e.mul(x, x)?;
            let sum = e.add(x2, one)?;
            Factor::Of(e.unary(UnaryOp::Rsqrt, sum)?)
        }
        // 1/(√(z−1)·√(z+1)): the principal branch's derivative, which 1/√(z²−1) is not
        // for complex z of negative real part.
        UnaryOp::Acosh if e.ty(x)?.dtype.is_complex() => {
            let one = e.full_like(1.0, x)?;
            let below = e.sub(x, one)?;
            let above = e.add(x, one)?;
            let below = e.unary(UnaryOp::Rsqrt, below)?;
            let above = e.unary(UnaryOp::Rsqrt, above)?;
            Factor::Of(e.mul(below, above)?)
        }
        UnaryOp::Acosh => {
            let one = e.full_like(1.0, x)?;
            let below = e.sub(x, one)?;
            let above = e.add(x, one)?;
            let product = e.mul(below, above)?;
            Factor::Of(e.unary(UnaryOp::Rsqrt, product)?)
        }
        UnaryOp::Atanh => {
            let one = e.full_like(1.0, x)?;
            let above = e.add(one, x)?;
            let below = e.sub(one, x)?;
            let product = e.mul(above, below)?;
            Factor::Of(recip(e, product)?)
        }
        UnaryOp::Lgamma => Factor::Of(e.unary(UnaryOp::Digamma, x)?),
        UnaryOp::Real => Factor::RealPart,
        UnaryOp::Imag => Factor::ImagPart,
        UnaryOp::Digamma => {
            return Err(AutodiffError::Unsupported(
                "the derivative of digamma (polygamma(1, x)) is not defined in ferrax".into(),
            ))
        }
        // ±2/√π·exp(-x²).
        UnaryOp::Erf | UnaryOp::Erfc => {
            let x2 = e.mul(x, x)?;
            let neg = e.neg(x2)?;
            let gauss = e.unary(UnaryOp::Exp, neg)?;
            let sign = if u == UnaryOp::Erf { 1.0 } else { -1.0 };
            let scale = e.full_like(sign * std::f64::consts::FRAC_2_SQRT_PI, x)?;
            Factor::Of(e.mul(gauss, scale)?)
        }
        // √π/2·exp(y²).
        UnaryOp::ErfInv => {
            let y2 = e.mul(y, y)?;
            let growth = e.unary(UnaryOp::Exp, y2)?;
            let scale = e.full_like(1.0 / std::f64::consts::FRAC_2_SQRT_PI, y)?;
            Factor::Of(e.mul(growth, scale)?)
        }
        // i0e' = i1e - sign(x)·i0e.
        UnaryOp::BesselI0e => {
            let i1e = e.unary(UnaryOp::BesselI1e, x)?;
            let sign = e.unary(UnaryOp::Sign, x)?;
            let scaled = e.mul(sign, y)?;
            Factor::Of(e.sub(i1e, scaled)?)
        }
        // i1e' = i0e - (sign(x) + 1/x)·i1e, and 1/2 at x = 0 (the limit), as JAX computes it:
        // with x below its dtype's epsilon replaced by it, then the result by 1/2.
        UnaryOp::BesselI1e => {
            let epsilon = match e.ty(x)?.dtype {
                DType::F64 => f64::EPSILON,
                DType::F16 => f64::powi(2.0, -10),
                DType::BF16 => f64::powi(2.0, -7),
                // Float only (the type rule); the integer arms are never reached.
                DType::F32
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
                | DType::C128 => f64::from(f32::EPSILON),
            };
            let eps = e.full_like(epsilon, x)?;
            let magnitude = e.unary(UnaryOp::Abs, x)?;
            let tiny = e.compare(CompareOp::Le, magnitude, eps)?;
            let safe = e.select(tiny, eps, x)?;
            let i0e = e.unary(UnaryOp::BesselI0e, safe)?;
            let i1e = e.unary(UnaryOp::BesselI1e, safe)?;
            let sign = e.unary(UnaryOp::Sign, safe)?;
            let inverse = recip(e, safe)?;
            let factor = e.add(sign, inverse)?;
            let scaled = e.mul(factor, i1e)?;
            let slope = e.sub(i0e, scaled)?;
            let half = e.full_like(0.5, x)?;
            Factor::Of(e.select(tiny, half, slope)?)
        }
        // (1/3) / y².
        UnaryOp::Cbrt => {
            let y2 = e.mul(y, y)?;
            let third = e.full_like(1.0 / 3.0, y)?;
            Factor::Of(e.div(third, y2)?)
        }
    })
}

pub(super) fn unary_jvp(
    e: &mut Emitter,
    u: UnaryOp,
    x: ValueId,
    t: Option<ValueId>,
    y: ValueId,
) -> R<Option<ValueId>> {
    let Some(t) = t else { return Ok(None) };
    let f = unary_factor(e, u, x, y)?;
    forward(e, &f, t)
}

pub(super) fn unary_vjp(
    e: &mut Emitter,
    u: UnaryOp,
    x: ValueId,
    y: ValueId,
    g: ValueId,
) -> R<Option<ValueId>> {
    let f = unary_factor(e, u, x, y)?;
    backward(e, &f, g)
}

/// JAX's tie rule for max/min: where both operands equal the result, each gets half.
fn balanced(e: &mut Emitter, this: ValueId, result: ValueId, other: ValueId) -> R {
    let dtype = e.ty(result)?.dtype;
    let hit = e.compare(CompareOp::Eq, this, result)?;
    let num = e.mask(hit, dtype)?;
    let tie = e.compare(CompareOp::Eq, other, result)?;
    let tie = e.mask(tie, dtype)?;
    let one = e.full_like(1.0, result)?;
    let den = e.add(one, tie)?;
    e.div(num, den)
}

/// (d y / d a, d y / d b) for `y = op(a, b)`.
fn binary_factors(
    e: &mut Emitter,
    op: BinaryOp,
    a: ValueId,
    b: ValueId,
    y: ValueId,
) -> R<(Factor, Factor)> {
    Ok(match op {
        BinaryOp::Add => (Factor::One, Factor::One),
        BinaryOp::Sub => (Factor::One, Factor::NegOne),
        BinaryOp::Mul => (Factor::Of(b), Factor::Of(a)),
        BinaryOp::Div => {
            let inv = recip(e, b)?;
            let q = e.div(y, b)?;
            (Factor::Of(inv), Factor::Of(e.neg(q)?))
        }
        BinaryOp::Rem => {
            // rem(a, b) = a - b * trunc(a / b)
            let q = e.div(a, b)?;
            let s = e.unary(UnaryOp::Sign, q)?;
            let m = e.unary(UnaryOp::Abs, q)?;
            let m = e.unary(UnaryOp::Floor, m)?;
            let trunc = e.mul(s, m)?;
            (Factor::One, Factor::Of(e.neg(trunc)?))
        }
        BinaryOp::Pow => {
            let zero = e.full_like(0.0, b)?;
            let one = e.full_like(1.0, b)?;
            let b_is_zero = e.compare(CompareOp::Eq, b, zero)?;
            let bm1 = e.sub(b, one)?;
            let p = e.binary(BinaryOp::Pow, a, bm1)?;
            let da = e.mul(b, p)?;
            let da = e.select(b_is_zero, zero, da)?;
            let a_is_zero = e.compare(CompareOp::Eq, a, zero)?;
            let safe_a = e.select(a_is_zero, one, a)?;
            let log_a = e.unary(UnaryOp::Log, safe_a)?;
            (Factor::Of(da), Factor::Of(e.mul(log_a, y)?))
        }
        BinaryOp::Atan2 => {
            // d atan2(a, b) = (b da - a db) / (a² + b²)
            let a2 = e.mul(a, a)?;
            let b2 = e.mul(b, b)?;
            let r2 = e.add(a2, b2)?;
            let inv = recip(e, r2)?;
            let fb = e.mul(a, inv)?;
            (Factor::Of(e.mul(b, inv)?), Factor::Of(e.neg(fb)?))
        }
        BinaryOp::Max | BinaryOp::Min => (
            Factor::Of(balanced(e, a, y, b)?),
            Factor::Of(balanced(e, b, y, a)?),
        ),
        // Bitwise operations on integers: piecewise constant, so nothing flows through.
        BinaryOp::And
        | BinaryOp::Or
        | BinaryOp::Xor
        | BinaryOp::ShiftLeft
        | BinaryOp::ShiftRightLogical
        | BinaryOp::ShiftRightArithmetic => (Factor::Zero, Factor::Zero),
        BinaryOp::Complex => (Factor::IntoReal, Factor::IntoImag),
    })
}

pub(super) fn binary_jvp(
    e: &mut Emitter,
    op: BinaryOp,
    x: &[ValueId],
    t: &[Option<ValueId>],
    y: ValueId,
) -> R<Option<ValueId>> {
    let (fa, fb) = binary_factors(e, op, x[0], x[1], y)?;
    let ta = match t[0] {
        Some(t) => forward(e, &fa, t)?,
        None => None,
    };
    let tb = match t[1] {
        Some(t) => forward(e, &fb, t)?,
        None => None,
    };
    sum_terms(e, [ta, tb])
}

pub(super) fn binary_vjp(
    e: &mut Emitter,
    op: BinaryOp,
    x: &[ValueId],
    y: ValueId,
    g: ValueId,
) -> R<Vec<Option<ValueId>>> {
    let (fa, fb) = binary_factors(e, op, x[0], x[1], y)?;
    Ok(vec![backward(e, &fa, g)?, backward(e, &fb, g)?])
}

pub(super) fn select_jvp(
    e: &mut Emitter,
    x: &[ValueId],
    t: &[Option<ValueId>],
) -> R<Option<ValueId>> {
    if t[1].is_none() && t[2].is_none() {
        return Ok(None);
    }
    let on_true = or_zero(e, t[1], x[1])?;
    let on_false = or_zero(e, t[2], x[2])?;
    Ok(Some(e.select(x[0], on_true, on_false)?))
}

pub(super) fn select_vjp(e: &mut Emitter, x: &[ValueId], g: ValueId) -> R<Vec<Option<ValueId>>> {
    let zero = e.full_like(0.0, g)?;
    Ok(vec![
        None,
        Some(e.select(x[0], g, zero)?),
        Some(e.select(x[0], zero, g)?),
    ])
}

/// Where each of `clamp(lo, x, hi)`'s operands passes through, following JAX: `x` strictly
/// inside the bounds, `lo` where it is above `x` (and below `hi`), `hi` where it is below `x`.
fn clamp_masks(e: &mut Emitter, x: &[ValueId]) -> R<[ValueId; 3]> {
    let shape = e.ty(x[1])?.shape;
    let lo = e.broadcast(x[0], &shape, Vec::new())?;
    let hi = e.broadcast(x[2], &shape, Vec::new())?;
    let above_lo = e.compare(CompareOp::Gt, x[1], lo)?;
    let below_hi = e.compare(CompareOp::Lt, x[1], hi)?;
    let inside = e.binary(BinaryOp::And, above_lo, below_hi)?;
    let lo_wins = e.compare(CompareOp::Gt, lo, x[1])?;
    let lo_ok = e.compare(CompareOp::Lt, lo, hi)?;
    let lo_wins = e.binary(BinaryOp::And, lo_wins, lo_ok)?;
    let hi_wins = e.compare(CompareOp::Lt, hi, x[1])?;
    Ok([lo_wins, inside, hi_wins])
}

pub(super) fn clamp_jvp(
    e: &mut Emitter,
    x: &[ValueId],
    t: &[Option<ValueId>],
) -> R<Option<ValueId>> {
    let masks = clamp_masks(e, x)?;
    let shape = e.ty(x[1])?.shape;
    let mut terms = Vec::new();
    for (k, tk) in t.iter().enumerate() {
        if let Some(tk) = tk {
            let tk = e.broadcast(*tk, &shape, Vec::new())?;
            let zero = e.full_like(0.0, tk)?;
            terms.push(Some(e.select(masks[k], tk, zero)?));
        }
    }
    sum_terms(e, terms)
}

pub(super) fn clamp_vjp(e: &mut Emitter, x: &[ValueId], g: ValueId) -> R<Vec<Option<ValueId>>> {
    let masks = clamp_masks(e, x)?;
    let zero = e.full_like(0.0, g)?;
    let mut out = Vec::with_capacity(3);
    for (k, &xk) in x.iter().enumerate() {
        let picked = e.select(masks[k], g, zero)?;
        let shape = e.ty(xk)?.shape;
        out.push(Some(e.sum_to(picked, &shape)?));
    }
    Ok(out)
}

pub(super) fn convert_jvp(
    e: &mut Emitter,
    x: ValueId,
    t: Option<ValueId>,
    to: DType,
) -> R<Option<ValueId>> {
    // Complex to real keeps the real part (a linear map), real to complex adds a zero
    // imaginary part; each is the other's transpose.
    match t {
        Some(t) if differentiable(e.ty(x)?.dtype) && differentiable(to) => {
            Ok(Some(e.convert(t, to)?))
        }
        _ => Ok(None),
    }
}

pub(super) fn convert_vjp(e: &mut Emitter, x: ValueId, g: ValueId) -> R<Option<ValueId>> {
    let from = e.ty(x)?.dtype;
    if differentiable(from) {
        Ok(Some(e.convert(g, from)?))
    } else {
        Ok(None)
    }
}

//! Elementwise ops. Each op matches on the dtype and on the op once, then runs one
//! monomorphized loop. f32/f64 arithmetic is native IEEE; f16/bf16 arithmetic goes through
//! f32 and rounds back (see [`Float`]); transcendentals of every float width are computed in
//! f64 and rounded once, so they are nearly always correctly rounded. Integers wrap.

use super::complex;
use super::num::{fmax, fmin, Arith, Float, Int};
use super::special;
use super::undefined;
use crate::{Array, RuntimeError};
use ferrax_ir::{
    bf16_from_f64, f16_from_f64, map_elements, with_elements, BinaryOp, CompareOp, Complex, DType,
    Element, Elements, UnaryOp,
};
use half::{bf16, f16};

fn map<T: Copy, U>(v: &[T], f: impl Fn(T) -> U) -> Vec<U> {
    v.iter().map(|&x| f(x)).collect()
}

/// `f(a[i], b[i])`; the type rules give both the same length.
fn zip<T: Copy, U>(a: &[T], b: &[T], f: impl Fn(T, T) -> U) -> Vec<U> {
    a.iter().zip(b).map(|(&x, &y)| f(x, y)).collect()
}

/// `f` computed in f64 and rounded once to `T`.
fn map_wide<T: Float>(v: &[T], f: impl Fn(f64) -> f64) -> Vec<T> {
    map(v, |x| T::from_f64(f(x.to_f64())))
}

fn map_arith<T: Float>(v: &[T], f: impl Fn(T::Arith) -> T::Arith) -> Vec<T> {
    map(v, |x| T::from_arith(f(x.to_arith())))
}

fn zip_wide<T: Float>(a: &[T], b: &[T], f: impl Fn(f64, f64) -> f64) -> Vec<T> {
    zip(a, b, |x, y| T::from_f64(f(x.to_f64(), y.to_f64())))
}

fn zip_arith<T: Float>(a: &[T], b: &[T], f: impl Fn(T::Arith, T::Arith) -> T::Arith) -> Vec<T> {
    zip(a, b, |x, y| T::from_arith(f(x.to_arith(), y.to_arith())))
}

/// The logistic function without overflow for large |x|.
fn logistic(x: f64) -> f64 {
    if x >= 0.0 {
        1.0 / (1.0 + (-x).exp())
    } else {
        let e = x.exp();
        e / (1.0 + e)
    }
}

/// NaN and ±0 map to themselves, everything else to ±1.
fn sign(x: f64) -> f64 {
    if x.is_nan() || x == 0.0 {
        x
    } else {
        x.signum()
    }
}

/// The f64 function the interpreter applies, then rounds once, for a float unary op (`None`
/// for the ops computed in the element type: `neg`, `abs`, and `not`, which floats lack).
/// Compiled backends call it for the same results, bit for bit.
pub fn wide_unary(u: UnaryOp) -> Option<fn(f64) -> f64> {
    Some(match u {
        UnaryOp::Neg | UnaryOp::Abs | UnaryOp::Not | UnaryOp::Real | UnaryOp::Imag => return None,
        // Exact in f64 for every narrower float.
        UnaryOp::Sign => sign,
        UnaryOp::Floor => f64::floor,
        UnaryOp::Ceil => f64::ceil,
        UnaryOp::Round => f64::round,
        UnaryOp::RoundEven => f64::round_ties_even,
        UnaryOp::Exp => f64::exp,
        UnaryOp::Expm1 => f64::exp_m1,
        UnaryOp::Log => f64::ln,
        UnaryOp::Log1p => f64::ln_1p,
        UnaryOp::Sqrt => f64::sqrt,
        UnaryOp::Rsqrt => |x| 1.0 / x.sqrt(),
        UnaryOp::Tanh => f64::tanh,
        UnaryOp::Logistic => logistic,
        UnaryOp::Sin => f64::sin,
        UnaryOp::Cos => f64::cos,
        UnaryOp::Tan => f64::tan,
        UnaryOp::Asin => f64::asin,
        UnaryOp::Acos => f64::acos,
        UnaryOp::Atan => f64::atan,
        UnaryOp::Sinh => f64::sinh,
        UnaryOp::Cosh => f64::cosh,
        UnaryOp::Asinh => f64::asinh,
        UnaryOp::Acosh => f64::acosh,
        UnaryOp::Atanh => f64::atanh,
        UnaryOp::Cbrt => f64::cbrt,
        UnaryOp::Lgamma => libm::lgamma,
        UnaryOp::Digamma => special::digamma,
        UnaryOp::Erf => libm::erf,
        UnaryOp::Erfc => libm::erfc,
        UnaryOp::ErfInv => special::erf_inv,
        UnaryOp::BesselI0e => special::bessel_i0e,
        UnaryOp::BesselI1e => special::bessel_i1e,
    })
}

fn unary_float<T: Float>(u: UnaryOp, v: &[T]) -> Result<Vec<T>, RuntimeError> {
    Ok(match (u, wide_unary(u)) {
        (_, Some(f)) => map_wide(v, f),
        (UnaryOp::Neg, _) => map_arith(v, |x| -x),
        (UnaryOp::Abs, _) => map_arith(v, Arith::abs),
        _ => return Err(undefined(u.name(), T::DTYPE)),
    })
}

fn unary_int<T: Int>(u: UnaryOp, v: &[T]) -> Result<Vec<T>, RuntimeError> {
    Ok(match u {
        UnaryOp::Neg => map(v, T::neg),
        UnaryOp::Abs => map(v, T::abs),
        UnaryOp::Sign => map(v, T::sign),
        UnaryOp::Not => map(v, |x| !x),
        _ => return Err(undefined(u.name(), T::DTYPE)),
    })
}

pub(super) fn unary(u: UnaryOp, x: &Array) -> Result<Elements, RuntimeError> {
    Ok(match x.elements() {
        Elements::F32(v) => Elements::F32(unary_float(u, v)?),
        Elements::F64(v) => Elements::F64(unary_float(u, v)?),
        Elements::F16(v) => Elements::F16(unary_float(u, v)?),
        Elements::BF16(v) => Elements::BF16(unary_float(u, v)?),
        Elements::I32(v) => Elements::I32(unary_int(u, v)?),
        Elements::I64(v) => Elements::I64(unary_int(u, v)?),
        Elements::U32(v) => Elements::U32(unary_int(u, v)?),
        Elements::U8(v) => Elements::U8(unary_int(u, v)?),
        Elements::I8(v) => Elements::I8(unary_int(u, v)?),
        Elements::I16(v) => Elements::I16(unary_int(u, v)?),
        Elements::U16(v) => Elements::U16(unary_int(u, v)?),
        Elements::U64(v) => Elements::U64(unary_int(u, v)?),
        Elements::Bool(v) if u == UnaryOp::Not => Elements::Bool(map(v, |b| !b)),
        Elements::Bool(_) => return Err(undefined(u.name(), DType::Bool)),
        Elements::C64(v) => complex::unary(u, v)?,
        Elements::C128(v) => complex::unary(u, v)?,
    })
}

fn binary_float<T: Float>(op: BinaryOp, a: &[T], b: &[T]) -> Result<Vec<T>, RuntimeError> {
    Ok(match op {
        BinaryOp::Add => zip_arith(a, b, |x, y| x + y),
        BinaryOp::Sub => zip_arith(a, b, |x, y| x - y),
        BinaryOp::Mul => zip_arith(a, b, |x, y| x * y),
        BinaryOp::Div => zip_arith(a, b, |x, y| x / y),
        BinaryOp::Rem => zip_arith(a, b, |x, y| x % y),
        BinaryOp::Max => zip_arith(a, b, fmax),
        BinaryOp::Min => zip_arith(a, b, fmin),
        BinaryOp::Pow => zip_wide(a, b, f64::powf),
        BinaryOp::Atan2 => zip_wide(a, b, f64::atan2),
        BinaryOp::And
        | BinaryOp::Or
        | BinaryOp::Xor
        | BinaryOp::ShiftLeft
        | BinaryOp::ShiftRightLogical
        | BinaryOp::ShiftRightArithmetic
        // Dispatched before the operands' type: its result is complex.
        | BinaryOp::Complex => return Err(undefined(op.name(), T::DTYPE)),
    })
}

fn binary_int<T: Int>(op: BinaryOp, a: &[T], b: &[T]) -> Result<Vec<T>, RuntimeError> {
    Ok(match op {
        BinaryOp::Add => zip(a, b, T::add),
        BinaryOp::Sub => zip(a, b, T::sub),
        BinaryOp::Mul => zip(a, b, T::mul),
        BinaryOp::Div => zip(a, b, T::div),
        BinaryOp::Rem => zip(a, b, T::rem),
        BinaryOp::Pow => zip(a, b, T::pow),
        BinaryOp::Max => zip(a, b, Ord::max),
        BinaryOp::Min => zip(a, b, Ord::min),
        BinaryOp::And => zip(a, b, |x, y| x & y),
        BinaryOp::Or => zip(a, b, |x, y| x | y),
        BinaryOp::Xor => zip(a, b, |x, y| x ^ y),
        BinaryOp::ShiftLeft => zip(a, b, T::shift_left),
        BinaryOp::ShiftRightLogical => zip(a, b, T::shift_right_logical),
        BinaryOp::ShiftRightArithmetic => zip(a, b, T::shift_right_arithmetic),
        BinaryOp::Atan2 | BinaryOp::Complex => return Err(undefined(op.name(), T::DTYPE)),
    })
}

fn binary_bool(op: BinaryOp, a: &[bool], b: &[bool]) -> Result<Vec<bool>, RuntimeError> {
    Ok(match op {
        BinaryOp::And => zip(a, b, |x, y| x & y),
        BinaryOp::Or => zip(a, b, |x, y| x | y),
        BinaryOp::Xor => zip(a, b, |x, y| x ^ y),
        _ => return Err(undefined(op.name(), DType::Bool)),
    })
}

pub(super) fn binary(op: BinaryOp, a: &Array, b: &Array) -> Result<Elements, RuntimeError> {
    if op == BinaryOp::Complex {
        return match a.elements() {
            Elements::F32(x) => Ok(complex::from_parts(x, b.as_slice()?)),
            Elements::F64(x) => Ok(complex::from_parts(x, b.as_slice()?)),
            other => Err(undefined(op.name(), other.dtype())),
        };
    }
    Ok(match a.elements() {
        Elements::F32(x) => Elements::F32(binary_float(op, x, b.as_slice()?)?),
        Elements::F64(x) => Elements::F64(binary_float(op, x, b.as_slice()?)?),
        Elements::F16(x) => Elements::F16(binary_float(op, x, b.as_slice()?)?),
        Elements::BF16(x) => Elements::BF16(binary_float(op, x, b.as_slice()?)?),
        Elements::I32(x) => Elements::I32(binary_int(op, x, b.as_slice()?)?),
        Elements::I64(x) => Elements::I64(binary_int(op, x, b.as_slice()?)?),
        Elements::U32(x) => Elements::U32(binary_int(op, x, b.as_slice()?)?),
        Elements::U8(x) => Elements::U8(binary_int(op, x, b.as_slice()?)?),
        Elements::I8(x) => Elements::I8(binary_int(op, x, b.as_slice()?)?),
        Elements::I16(x) => Elements::I16(binary_int(op, x, b.as_slice()?)?),
        Elements::U16(x) => Elements::U16(binary_int(op, x, b.as_slice()?)?),
        Elements::U64(x) => Elements::U64(binary_int(op, x, b.as_slice()?)?),
        Elements::Bool(x) => Elements::Bool(binary_bool(op, x, b.as_slice()?)?),
        Elements::C64(x) => complex::binary(op, x, b.as_slice()?)?,
        Elements::C128(x) => complex::binary(op, x, b.as_slice()?)?,
    })
}

/// Compares `key(a[i])` with `key(b[i])`; float keys give IEEE results (NaN unordered).
fn compare_by<T: Copy, K: PartialOrd>(
    c: CompareOp,
    a: &[T],
    b: &[T],
    key: impl Fn(T) -> K,
) -> Vec<bool> {
    match c {
        CompareOp::Eq => zip(a, b, |x, y| key(x) == key(y)),
        CompareOp::Ne => zip(a, b, |x, y| key(x) != key(y)),
        CompareOp::Lt => zip(a, b, |x, y| key(x) < key(y)),
        CompareOp::Le => zip(a, b, |x, y| key(x) <= key(y)),
        CompareOp::Gt => zip(a, b, |x, y| key(x) > key(y)),
        CompareOp::Ge => zip(a, b, |x, y| key(x) >= key(y)),
    }
}

pub(super) fn compare(c: CompareOp, a: &Array, b: &Array) -> Result<Elements, RuntimeError> {
    Ok(Elements::Bool(match a.elements() {
        Elements::F32(x) => compare_by(c, x, b.as_slice()?, |v| v),
        Elements::F64(x) => compare_by(c, x, b.as_slice()?, |v| v),
        Elements::F16(x) => compare_by(c, x, b.as_slice()?, f16::to_f32),
        Elements::BF16(x) => compare_by(c, x, b.as_slice()?, bf16::to_f32),
        Elements::I32(x) => compare_by(c, x, b.as_slice()?, |v| v),
        Elements::I64(x) => compare_by(c, x, b.as_slice()?, |v| v),
        Elements::U32(x) => compare_by(c, x, b.as_slice()?, |v| v),
        Elements::U8(x) => compare_by(c, x, b.as_slice()?, |v| v),
        Elements::I8(x) => compare_by(c, x, b.as_slice()?, |v| v),
        Elements::I16(x) => compare_by(c, x, b.as_slice()?, |v| v),
        Elements::U16(x) => compare_by(c, x, b.as_slice()?, |v| v),
        Elements::U64(x) => compare_by(c, x, b.as_slice()?, |v| v),
        Elements::Bool(x) => compare_by(c, x, b.as_slice()?, |v| v),
        Elements::C64(x) => complex::compare(c, x, b.as_slice()?)?,
        Elements::C128(x) => complex::compare(c, x, b.as_slice()?)?,
    }))
}

/// `pred[i] ? a[i] : b[i]`; a one-element `pred` picks a whole branch.
fn select_typed<T: Element>(pred: &[bool], a: &[T], b: &[T]) -> Vec<T> {
    match pred {
        [p] => if *p { a } else { b }.to_vec(),
        _ => pred
            .iter()
            .zip(a.iter().zip(b))
            .map(|(&p, (&x, &y))| if p { x } else { y })
            .collect(),
    }
}

pub(super) fn select(pred: &Array, a: &Array, b: &Array) -> Result<Elements, RuntimeError> {
    let p = pred.as_slice::<bool>()?;
    Ok(map_elements!(a.elements(), v => select_typed(p, v, b.as_slice()?)))
}

/// `f(lo, x, hi)` per element; `lo` and `hi` have one element or as many as `x`.
fn clamp_with<T: Copy>(lo: &[T], x: &[T], hi: &[T], f: impl Fn(T, T, T) -> T) -> Vec<T> {
    x.iter()
        .zip(lo.iter().cycle().zip(hi.iter().cycle()))
        .map(|(&v, (&l, &h))| f(l, v, h))
        .collect()
}

fn clamp_float<T: Float>(lo: &[T], x: &[T], hi: &[T]) -> Vec<T> {
    clamp_with(lo, x, hi, |l, v, h| {
        T::from_arith(fmin(fmax(v.to_arith(), l.to_arith()), h.to_arith()))
    })
}

fn clamp_int<T: Int>(lo: &[T], x: &[T], hi: &[T]) -> Vec<T> {
    clamp_with(lo, x, hi, |l, v, h| v.max(l).min(h))
}

/// `min(max(x, lo), hi)`, so `lo > hi` gives `hi` and NaN anywhere gives NaN.
pub(super) fn clamp(lo: &Array, x: &Array, hi: &Array) -> Result<Elements, RuntimeError> {
    Ok(match x.elements() {
        Elements::F32(v) => Elements::F32(clamp_float(lo.as_slice()?, v, hi.as_slice()?)),
        Elements::F64(v) => Elements::F64(clamp_float(lo.as_slice()?, v, hi.as_slice()?)),
        Elements::F16(v) => Elements::F16(clamp_float(lo.as_slice()?, v, hi.as_slice()?)),
        Elements::BF16(v) => Elements::BF16(clamp_float(lo.as_slice()?, v, hi.as_slice()?)),
        Elements::I32(v) => Elements::I32(clamp_int(lo.as_slice()?, v, hi.as_slice()?)),
        Elements::I64(v) => Elements::I64(clamp_int(lo.as_slice()?, v, hi.as_slice()?)),
        Elements::U32(v) => Elements::U32(clamp_int(lo.as_slice()?, v, hi.as_slice()?)),
        Elements::U8(v) => Elements::U8(clamp_int(lo.as_slice()?, v, hi.as_slice()?)),
        Elements::I8(v) => Elements::I8(clamp_int(lo.as_slice()?, v, hi.as_slice()?)),
        Elements::I16(v) => Elements::I16(clamp_int(lo.as_slice()?, v, hi.as_slice()?)),
        Elements::U16(v) => Elements::U16(clamp_int(lo.as_slice()?, v, hi.as_slice()?)),
        Elements::U64(v) => Elements::U64(clamp_int(lo.as_slice()?, v, hi.as_slice()?)),
        Elements::Bool(_) => return Err(undefined("clamp", DType::Bool)),
        Elements::C64(_) => return Err(undefined("clamp", DType::C64)),
        Elements::C128(_) => return Err(undefined("clamp", DType::C128)),
    })
}

/// One element converted to every dtype with `convert`'s rules.
trait Cast: Element {
    fn cast_f32(self) -> f32;
    fn cast_f64(self) -> f64;
    fn cast_f16(self) -> f16;
    fn cast_bf16(self) -> bf16;
    fn cast_i32(self) -> i32;
    fn cast_i64(self) -> i64;
    fn cast_u32(self) -> u32;
    fn cast_u8(self) -> u8;
    fn cast_i8(self) -> i8;
    fn cast_i16(self) -> i16;
    fn cast_u16(self) -> u16;
    fn cast_u64(self) -> u64;
    fn cast_bool(self) -> bool;
    /// To a complex number: the value is its real part.
    fn cast_c64(self) -> Complex<f32> {
        Complex::new(self.cast_f32(), 0.0)
    }
    fn cast_c128(self) -> Complex<f64> {
        Complex::new(self.cast_f64(), 0.0)
    }
}

/// Floats widen to f64 exactly, then round once to a float dtype, or truncate toward zero and
/// saturate to an integer (Rust's `as`, which also maps NaN to 0).
macro_rules! cast_float {
    ($t:ty) => {
        impl Cast for $t {
            fn cast_f32(self) -> f32 {
                Float::to_f64(self) as f32
            }
            fn cast_f64(self) -> f64 {
                Float::to_f64(self)
            }
            fn cast_f16(self) -> f16 {
                f16_from_f64(Float::to_f64(self))
            }
            fn cast_bf16(self) -> bf16 {
                bf16_from_f64(Float::to_f64(self))
            }
            fn cast_i32(self) -> i32 {
                Float::to_f64(self) as i32
            }
            fn cast_i64(self) -> i64 {
                Float::to_f64(self) as i64
            }
            fn cast_u32(self) -> u32 {
                Float::to_f64(self) as u32
            }
            fn cast_u8(self) -> u8 {
                Float::to_f64(self) as u8
            }
            fn cast_i8(self) -> i8 {
                Float::to_f64(self) as i8
            }
            fn cast_i16(self) -> i16 {
                Float::to_f64(self) as i16
            }
            fn cast_u16(self) -> u16 {
                Float::to_f64(self) as u16
            }
            fn cast_u64(self) -> u64 {
                Float::to_f64(self) as u64
            }
            fn cast_bool(self) -> bool {
                Float::to_f64(self) != 0.0
            }
        }
    };
}

cast_float!(f32);
cast_float!(f64);
cast_float!(f16);
cast_float!(bf16);

/// `x` as f64 rounded to odd (truncated, last bit set when inexact), so that a later rounding
/// to bf16 equals rounding `x` directly.
fn int_to_f64_odd(x: i128) -> f64 {
    let f = x as f64;
    let (exact, back) = (x, f as i128);
    if back == exact {
        return f;
    }
    let mut bits = f.to_bits();
    if back.abs() > exact.abs() {
        bits -= 1;
    }
    f64::from_bits(bits | 1)
}

/// Integers widen to i128 exactly (u64 included), round once to floats and wrap to narrower
/// integers.
macro_rules! cast_int {
    ($t:ty) => {
        impl Cast for $t {
            fn cast_f32(self) -> f32 {
                self as i128 as f32
            }
            fn cast_f64(self) -> f64 {
                self as i128 as f64
            }
            // Exact in f64 up to 2^53, far beyond f16's overflow to infinity.
            fn cast_f16(self) -> f16 {
                f16_from_f64(self as i128 as f64)
            }
            fn cast_bf16(self) -> bf16 {
                bf16_from_f64(int_to_f64_odd(self as i128))
            }
            fn cast_i32(self) -> i32 {
                self as i32
            }
            fn cast_i64(self) -> i64 {
                self as i64
            }
            fn cast_u32(self) -> u32 {
                self as u32
            }
            fn cast_u8(self) -> u8 {
                self as u8
            }
            fn cast_i8(self) -> i8 {
                self as i8
            }
            fn cast_i16(self) -> i16 {
                self as i16
            }
            fn cast_u16(self) -> u16 {
                self as u16
            }
            fn cast_u64(self) -> u64 {
                self as u64
            }
            fn cast_bool(self) -> bool {
                self != 0
            }
        }
    };
}

cast_int!(i32);
cast_int!(i64);
cast_int!(u32);
cast_int!(u8);
cast_int!(i8);
cast_int!(i16);
cast_int!(u16);
cast_int!(u64);

/// Bools are 0 or 1.
impl Cast for bool {
    fn cast_f32(self) -> f32 {
        (self as u8).cast_f32()
    }
    fn cast_f64(self) -> f64 {
        (self as u8).cast_f64()
    }
    fn cast_f16(self) -> f16 {
        (self as u8).cast_f16()
    }
    fn cast_bf16(self) -> bf16 {
        (self as u8).cast_bf16()
    }
    fn cast_i32(self) -> i32 {
        self as i32
    }
    fn cast_i64(self) -> i64 {
        self as i64
    }
    fn cast_u32(self) -> u32 {
        self as u32
    }
    fn cast_u8(self) -> u8 {
        self as u8
    }
    fn cast_i8(self) -> i8 {
        self as i8
    }
    fn cast_i16(self) -> i16 {
        self as i16
    }
    fn cast_u16(self) -> u16 {
        self as u16
    }
    fn cast_u64(self) -> u64 {
        self as u64
    }
    fn cast_bool(self) -> bool {
        self
    }
}

fn cast_all<T: Cast>(v: &[T], to: DType) -> Elements {
    match to {
        DType::F32 => Elements::F32(map(v, T::cast_f32)),
        DType::F64 => Elements::F64(map(v, T::cast_f64)),
        DType::F16 => Elements::F16(map(v, T::cast_f16)),
        DType::BF16 => Elements::BF16(map(v, T::cast_bf16)),
        DType::I32 => Elements::I32(map(v, T::cast_i32)),
        DType::I64 => Elements::I64(map(v, T::cast_i64)),
        DType::U32 => Elements::U32(map(v, T::cast_u32)),
        DType::U8 => Elements::U8(map(v, T::cast_u8)),
        DType::I8 => Elements::I8(map(v, T::cast_i8)),
        DType::I16 => Elements::I16(map(v, T::cast_i16)),
        DType::U16 => Elements::U16(map(v, T::cast_u16)),
        DType::U64 => Elements::U64(map(v, T::cast_u64)),
        DType::Bool => Elements::Bool(map(v, T::cast_bool)),
        DType::C64 => Elements::C64(map(v, T::cast_c64)),
        DType::C128 => Elements::C128(map(v, T::cast_c128)),
    }
}

/// Complex numbers convert to other types by their real part (XLA's rule), to bools by being
/// nonzero, and to complex types part by part.
macro_rules! cast_complex {
    ($t:ty) => {
        impl Cast for Complex<$t> {
            fn cast_f32(self) -> f32 {
                self.re.cast_f32()
            }
            fn cast_f64(self) -> f64 {
                self.re.cast_f64()
            }
            fn cast_f16(self) -> f16 {
                self.re.cast_f16()
            }
            fn cast_bf16(self) -> bf16 {
                self.re.cast_bf16()
            }
            fn cast_i32(self) -> i32 {
                self.re.cast_i32()
            }
            fn cast_i64(self) -> i64 {
                self.re.cast_i64()
            }
            fn cast_u32(self) -> u32 {
                self.re.cast_u32()
            }
            fn cast_u8(self) -> u8 {
                self.re.cast_u8()
            }
            fn cast_i8(self) -> i8 {
                self.re.cast_i8()
            }
            fn cast_i16(self) -> i16 {
                self.re.cast_i16()
            }
            fn cast_u16(self) -> u16 {
                self.re.cast_u16()
            }
            fn cast_u64(self) -> u64 {
                self.re.cast_u64()
            }
            fn cast_bool(self) -> bool {
                self.re != 0.0 || self.im != 0.0
            }
            fn cast_c64(self) -> Complex<f32> {
                Complex::new(self.re.cast_f32(), self.im.cast_f32())
            }
            fn cast_c128(self) -> Complex<f64> {
                Complex::new(self.re.cast_f64(), self.im.cast_f64())
            }
        }
    };
}

cast_complex!(f32);
cast_complex!(f64);

pub(super) fn convert(x: &Elements, to: DType) -> Elements {
    with_elements!(x, v => cast_all(v, to))
}

//! Complex elements (c64, c128). As real floats compute in f64 and round once, c64 values are
//! computed in c128 and each part rounded once to f32; c128 values are computed in c128.
//! The functions are principal branches (lax's): num-complex's for the exponential,
//! logarithm and trigonometric and hyperbolic functions; the square root and the inverse
//! sines and cosines written here after Kahan ("Branch cuts for complex elementary
//! functions", 1987), which keep full precision where the textbook formulas cancel; `expm1`
//! and `log1p` written so that small arguments keep theirs.

use super::undefined;
use crate::RuntimeError;
use ferrax_ir::{BinaryOp, CompareOp, Complex, DType, Element, Elements, ScatterCombine, UnaryOp};

type C = Complex<f64>;

/// The parts of a complex element type: f32 or f64.
pub(super) trait Part: Element + Default {
    fn wide(self) -> f64;
    fn narrow(x: f64) -> Self;
    fn complex_elements(v: Vec<Complex<Self>>) -> Elements;
}

impl Part for f32 {
    fn wide(self) -> f64 {
        self as f64
    }
    fn narrow(x: f64) -> f32 {
        x as f32
    }
    fn complex_elements(v: Vec<Complex<f32>>) -> Elements {
        Elements::C64(v)
    }
}

impl Part for f64 {
    fn wide(self) -> f64 {
        self
    }
    fn narrow(x: f64) -> f64 {
        x
    }
    fn complex_elements(v: Vec<Complex<f64>>) -> Elements {
        Elements::C128(v)
    }
}

pub(super) fn widen<T: Part>(z: Complex<T>) -> C {
    C::new(z.re.wide(), z.im.wide())
}

pub(super) fn narrow<T: Part>(z: C) -> Complex<T> {
    Complex::new(T::narrow(z.re), T::narrow(z.im))
}

fn complex_dtype<T: Part>() -> DType {
    T::DTYPE.complex_of().unwrap_or(T::DTYPE)
}

/// `e^z - 1`: the real part `expm1(x) cos y - 2 sin²(y/2)` loses nothing for small `z`.
fn expm1(z: C) -> C {
    let half = (z.im / 2.0).sin();
    C::new(
        z.re.exp_m1() * z.im.cos() - 2.0 * half * half,
        z.re.exp() * z.im.sin(),
    )
}

/// `ln(1 + z)`: the real part `log1p(x (2 + x) + y²) / 2` loses nothing for small `z`.
fn log1p(z: C) -> C {
    let (x, y) = (z.re, z.im);
    let re = if x.abs() < 0.5 && y.abs() < 0.5 {
        (x * (2.0 + x) + y * y).ln_1p() / 2.0
    } else {
        C::new(1.0 + x, y).norm().ln()
    };
    C::new(re, y.atan2(1.0 + x))
}

/// Beyond this, squares and sums of parts may overflow: the large-argument forms apply.
const LARGE: f64 = f64::MAX / 4.0;

/// The principal square root: `t = sqrt((|x| + |z|) / 2)`, then the other part `y / 2t`,
/// which cancels nothing (the polar form loses the small part near the negative axis).
fn sqrt(z: C) -> C {
    let (x, y) = (z.re, z.im);
    if x == 0.0 && y == 0.0 {
        return C::new(0.0, y);
    }
    if y.is_infinite() {
        return C::new(f64::INFINITY, y);
    }
    if x.is_infinite() {
        let zero_or_nan = if y.is_nan() { y } else { 0.0f64.copysign(y) };
        return if x > 0.0 {
            C::new(x, zero_or_nan)
        } else {
            C::new(zero_or_nan.abs(), f64::INFINITY.copysign(y))
        };
    }
    // Quartered parts where their modulus could overflow.
    let (scale, x4, y4) = if x.abs() > LARGE || y.abs() > LARGE {
        (2.0, x / 4.0, y / 4.0)
    } else {
        (1.0, x, y)
    };
    let t = ((x4.abs() + x4.hypot(y4)) / 2.0).sqrt();
    let other = y4 / (2.0 * t);
    if x4 >= 0.0 {
        C::new(scale * t, scale * other)
    } else {
        C::new(scale * other.abs(), (scale * t).copysign(y))
    }
}

/// `log |z| + ln 4` for huge `z` (`asinh`, `acosh` and `acos` there), without overflow.
fn log_large(z: C) -> f64 {
    (z.re / 2.0).hypot(z.im / 2.0).ln() + 2.0 * std::f64::consts::LN_2
}

/// `asinh z = log(z + sqrt(1 + z²))`, as `asinh(Im(conj(sqrt(1 - iz)) sqrt(1 + iz)))`
/// `+ i atan2(y, Re(sqrt(1 - iz) sqrt(1 + iz)))`.
fn asinh(z: C) -> C {
    if z.re.abs() > LARGE || z.im.abs() > LARGE {
        let re = if z.im >= 0.0 {
            log_large(z).copysign(z.re)
        } else {
            -log_large(z).copysign(-z.re)
        };
        return C::new(re, z.im.atan2(z.re.abs()));
    }
    let s1 = sqrt(C::new(1.0 + z.im, -z.re));
    let s2 = sqrt(C::new(1.0 - z.im, z.re));
    C::new(
        (s1.re * s2.im - s2.re * s1.im).asinh(),
        z.im.atan2(s1.re * s2.re - s1.im * s2.im),
    )
}

/// `asin z = -i asinh(iz)`.
fn asin(z: C) -> C {
    let r = asinh(C::new(-z.im, z.re));
    C::new(r.im, -r.re)
}

/// `acos z = 2 atan2(Re sqrt(1 - z), Re sqrt(1 + z)) + i asinh(Im(conj(sqrt(1 + z)) sqrt(1 - z)))`.
fn acos(z: C) -> C {
    if z.re.abs() > LARGE || z.im.abs() > LARGE {
        let re = z.im.abs().atan2(z.re);
        let im = if z.re < 0.0 {
            -log_large(z).copysign(z.im)
        } else {
            log_large(z).copysign(-z.im)
        };
        return C::new(re, im);
    }
    let s1 = sqrt(C::new(1.0 - z.re, -z.im));
    let s2 = sqrt(C::new(1.0 + z.re, z.im));
    C::new(
        2.0 * s1.re.atan2(s2.re),
        (s2.re * s1.im - s2.im * s1.re).asinh(),
    )
}

/// `acosh z = asinh(Re(conj(sqrt(z - 1)) sqrt(z + 1))) + 2i atan2(Im sqrt(z - 1), Re sqrt(z + 1))`.
fn acosh(z: C) -> C {
    if z.re.abs() > LARGE || z.im.abs() > LARGE {
        return C::new(log_large(z), z.im.atan2(z.re));
    }
    let s1 = sqrt(C::new(z.re - 1.0, z.im));
    let s2 = sqrt(C::new(z.re + 1.0, z.im));
    C::new(
        (s1.re * s2.re + s1.im * s2.im).asinh(),
        2.0 * s1.im.atan2(s2.re),
    )
}

/// `z / |z|`, and `z` itself where it is zero or NaN.
fn sign(z: C) -> C {
    let r = z.norm();
    if r == 0.0 || r.is_nan() {
        z
    } else {
        z / r
    }
}

/// `z^w = e^(w ln z)`, with `z^0 = 1` and `0^w = 0` for real `w > 0`.
fn pow(z: C, w: C) -> C {
    if w.re == 0.0 && w.im == 0.0 {
        C::new(1.0, 0.0)
    } else if z.re == 0.0 && z.im == 0.0 && w.im == 0.0 && w.re > 0.0 {
        C::new(0.0, 0.0)
    } else {
        (w * z.ln()).exp()
    }
}

/// The c128 function of a complex unary op; `None` for those that give real parts or that
/// complex numbers lack.
fn complex_function(u: UnaryOp) -> Option<fn(C) -> C> {
    Some(match u {
        UnaryOp::Neg => |z: C| -z,
        UnaryOp::Sign => sign,
        UnaryOp::Exp => C::exp,
        UnaryOp::Expm1 => expm1,
        UnaryOp::Log => C::ln,
        UnaryOp::Log1p => log1p,
        UnaryOp::Sqrt => sqrt,
        UnaryOp::Rsqrt => |z: C| C::new(1.0, 0.0) / sqrt(z),
        UnaryOp::Tanh => C::tanh,
        UnaryOp::Logistic => |z: C| C::new(1.0, 0.0) / (C::new(1.0, 0.0) + (-z).exp()),
        UnaryOp::Sin => C::sin,
        UnaryOp::Cos => C::cos,
        UnaryOp::Tan => C::tan,
        UnaryOp::Asin => asin,
        UnaryOp::Acos => acos,
        UnaryOp::Atan => C::atan,
        UnaryOp::Sinh => C::sinh,
        UnaryOp::Cosh => C::cosh,
        UnaryOp::Asinh => asinh,
        UnaryOp::Acosh => acosh,
        UnaryOp::Atanh => C::atanh,
        UnaryOp::Abs
        | UnaryOp::Real
        | UnaryOp::Imag
        | UnaryOp::Floor
        | UnaryOp::Ceil
        | UnaryOp::Round
        | UnaryOp::RoundEven
        | UnaryOp::Not
        | UnaryOp::Cbrt
        | UnaryOp::Lgamma
        | UnaryOp::Digamma
        | UnaryOp::Erf
        | UnaryOp::Erfc
        | UnaryOp::ErfInv
        | UnaryOp::BesselI0e
        | UnaryOp::BesselI1e => return None,
    })
}

pub(super) fn unary<T: Part>(u: UnaryOp, v: &[Complex<T>]) -> Result<Elements, RuntimeError>
where
    Complex<T>: Element,
{
    let parts = |f: fn(Complex<T>) -> T| T::into_elements(v.iter().map(|&z| f(z)).collect());
    Ok(match u {
        UnaryOp::Abs => parts(|z| T::narrow(widen(z).norm())),
        UnaryOp::Real => parts(|z| z.re),
        UnaryOp::Imag => parts(|z| z.im),
        _ => match complex_function(u) {
            Some(f) => T::complex_elements(v.iter().map(|&z| narrow(f(widen(z)))).collect()),
            None => return Err(undefined(u.name(), complex_dtype::<T>())),
        },
    })
}

pub(super) fn binary<T: Part>(
    op: BinaryOp,
    a: &[Complex<T>],
    b: &[Complex<T>],
) -> Result<Elements, RuntimeError> {
    let f: fn(C, C) -> C = match op {
        BinaryOp::Add => |x, y| x + y,
        BinaryOp::Sub => |x, y| x - y,
        BinaryOp::Mul => |x, y| x * y,
        BinaryOp::Div => |x, y| x / y,
        BinaryOp::Pow => pow,
        BinaryOp::Rem
        | BinaryOp::Max
        | BinaryOp::Min
        | BinaryOp::And
        | BinaryOp::Or
        | BinaryOp::Xor
        | BinaryOp::ShiftLeft
        | BinaryOp::ShiftRightLogical
        | BinaryOp::ShiftRightArithmetic
        | BinaryOp::Atan2
        | BinaryOp::Complex => return Err(undefined(op.name(), complex_dtype::<T>())),
    };
    Ok(T::complex_elements(
        a.iter()
            .zip(b)
            .map(|(&x, &y)| narrow(f(widen(x), widen(y))))
            .collect(),
    ))
}

/// A complex element and an update combined into the new element.
type Combine<T> = fn(Complex<T>, Complex<T>) -> Complex<T>;

/// How a scatter combines an element with an update (complex numbers have no maximum).
pub(super) fn scatter_combine<T: Part>(c: ScatterCombine) -> Result<Combine<T>, RuntimeError> {
    Ok(match c {
        ScatterCombine::Replace => |_, u| u,
        ScatterCombine::Add => |a, u| narrow(widen(a) + widen(u)),
        ScatterCombine::Mul => |a, u| narrow(widen(a) * widen(u)),
        ScatterCombine::Max | ScatterCombine::Min => {
            return Err(undefined(c.name(), complex_dtype::<T>()))
        }
    })
}

/// `lax.complex(re, im)` of f32 or f64 parts.
pub(super) fn from_parts<T: Part>(re: &[T], im: &[T]) -> Elements {
    T::complex_elements(
        re.iter()
            .zip(im)
            .map(|(&x, &y)| Complex::new(x, y))
            .collect(),
    )
}

/// Equality of both parts (IEEE: NaN parts are unequal); complex numbers are not ordered.
pub(super) fn compare<T: Part>(
    c: CompareOp,
    a: &[Complex<T>],
    b: &[Complex<T>],
) -> Result<Vec<bool>, RuntimeError> {
    let equal = |(x, y): (&Complex<T>, &Complex<T>)| x.re == y.re && x.im == y.im;
    Ok(match c {
        CompareOp::Eq => a.iter().zip(b).map(equal).collect(),
        CompareOp::Ne => a.iter().zip(b).map(|p| !equal(p)).collect(),
        CompareOp::Lt | CompareOp::Le | CompareOp::Gt | CompareOp::Ge => {
            return Err(undefined(c.name(), complex_dtype::<T>()))
        }
    })
}

//! Concrete element data: the payload of `constant` instructions and of host arrays.

use crate::{DType, TensorType};
use half::{bf16, f16};
pub use num_complex::Complex;
use serde::{Deserialize, Serialize};
use std::hash::{Hash, Hasher};

/// A flat, row-major vector of elements of one dtype. Serialized, float elements keep
/// infinities and NaNs in every format (`float_serde`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Elements {
    #[serde(with = "crate::float_serde::real")]
    F32(Vec<f32>),
    #[serde(with = "crate::float_serde::real")]
    F64(Vec<f64>),
    #[serde(with = "crate::float_serde::real")]
    F16(Vec<f16>),
    #[serde(with = "crate::float_serde::real")]
    BF16(Vec<bf16>),
    I32(Vec<i32>),
    I64(Vec<i64>),
    U32(Vec<u32>),
    U8(Vec<u8>),
    I8(Vec<i8>),
    I16(Vec<i16>),
    U16(Vec<u16>),
    U64(Vec<u64>),
    Bool(Vec<bool>),
    #[serde(with = "crate::float_serde::complex")]
    C64(Vec<Complex<f32>>),
    #[serde(with = "crate::float_serde::complex")]
    C128(Vec<Complex<f64>>),
}

/// Applies `$body` to the inner vector of an [`Elements`], whatever its dtype.
#[macro_export]
macro_rules! with_elements {
    ($elems:expr, $v:ident => $body:expr) => {
        match $elems {
            $crate::Elements::F32($v) => $body,
            $crate::Elements::F64($v) => $body,
            $crate::Elements::F16($v) => $body,
            $crate::Elements::BF16($v) => $body,
            $crate::Elements::I32($v) => $body,
            $crate::Elements::I64($v) => $body,
            $crate::Elements::U32($v) => $body,
            $crate::Elements::U8($v) => $body,
            $crate::Elements::I8($v) => $body,
            $crate::Elements::I16($v) => $body,
            $crate::Elements::U16($v) => $body,
            $crate::Elements::U64($v) => $body,
            $crate::Elements::Bool($v) => $body,
            $crate::Elements::C64($v) => $body,
            $crate::Elements::C128($v) => $body,
        }
    };
}

/// Applies `$body` to the inner vector and rewraps the result in the same variant.
#[macro_export]
macro_rules! map_elements {
    ($elems:expr, $v:ident => $body:expr) => {
        match $elems {
            $crate::Elements::F32($v) => $crate::Elements::F32($body),
            $crate::Elements::F64($v) => $crate::Elements::F64($body),
            $crate::Elements::F16($v) => $crate::Elements::F16($body),
            $crate::Elements::BF16($v) => $crate::Elements::BF16($body),
            $crate::Elements::I32($v) => $crate::Elements::I32($body),
            $crate::Elements::I64($v) => $crate::Elements::I64($body),
            $crate::Elements::U32($v) => $crate::Elements::U32($body),
            $crate::Elements::U8($v) => $crate::Elements::U8($body),
            $crate::Elements::I8($v) => $crate::Elements::I8($body),
            $crate::Elements::I16($v) => $crate::Elements::I16($body),
            $crate::Elements::U16($v) => $crate::Elements::U16($body),
            $crate::Elements::U64($v) => $crate::Elements::U64($body),
            $crate::Elements::Bool($v) => $crate::Elements::Bool($body),
            $crate::Elements::C64($v) => $crate::Elements::C64($body),
            $crate::Elements::C128($v) => $crate::Elements::C128($body),
        }
    };
}

impl Elements {
    pub fn dtype(&self) -> DType {
        match self {
            Elements::F32(_) => DType::F32,
            Elements::F64(_) => DType::F64,
            Elements::F16(_) => DType::F16,
            Elements::BF16(_) => DType::BF16,
            Elements::I32(_) => DType::I32,
            Elements::I64(_) => DType::I64,
            Elements::U32(_) => DType::U32,
            Elements::U8(_) => DType::U8,
            Elements::I8(_) => DType::I8,
            Elements::I16(_) => DType::I16,
            Elements::U16(_) => DType::U16,
            Elements::U64(_) => DType::U64,
            Elements::Bool(_) => DType::Bool,
            Elements::C64(_) => DType::C64,
            Elements::C128(_) => DType::C128,
        }
    }

    pub fn len(&self) -> usize {
        with_elements!(self, v => v.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `n` copies of `value`.
    pub fn splat(value: Scalar, n: usize) -> Elements {
        match value {
            Scalar::F32(x) => Elements::F32(vec![x; n]),
            Scalar::F64(x) => Elements::F64(vec![x; n]),
            Scalar::F16(x) => Elements::F16(vec![x; n]),
            Scalar::BF16(x) => Elements::BF16(vec![x; n]),
            Scalar::I32(x) => Elements::I32(vec![x; n]),
            Scalar::I64(x) => Elements::I64(vec![x; n]),
            Scalar::U32(x) => Elements::U32(vec![x; n]),
            Scalar::U8(x) => Elements::U8(vec![x; n]),
            Scalar::I8(x) => Elements::I8(vec![x; n]),
            Scalar::I16(x) => Elements::I16(vec![x; n]),
            Scalar::U16(x) => Elements::U16(vec![x; n]),
            Scalar::U64(x) => Elements::U64(vec![x; n]),
            Scalar::Bool(x) => Elements::Bool(vec![x; n]),
            Scalar::C64(x) => Elements::C64(vec![x; n]),
            Scalar::C128(x) => Elements::C128(vec![x; n]),
        }
    }

    /// `n` copies of `value`, or `None` where memory for them cannot be had (where
    /// [`Elements::splat`] would abort the process).
    pub fn try_splat(value: Scalar, n: usize) -> Option<Elements> {
        fn filled<T: Clone>(x: T, n: usize) -> Option<Vec<T>> {
            let mut v = Vec::new();
            v.try_reserve_exact(n).ok()?;
            v.resize(n, x);
            Some(v)
        }
        Some(match value {
            Scalar::F32(x) => Elements::F32(filled(x, n)?),
            Scalar::F64(x) => Elements::F64(filled(x, n)?),
            Scalar::F16(x) => Elements::F16(filled(x, n)?),
            Scalar::BF16(x) => Elements::BF16(filled(x, n)?),
            Scalar::I32(x) => Elements::I32(filled(x, n)?),
            Scalar::I64(x) => Elements::I64(filled(x, n)?),
            Scalar::U32(x) => Elements::U32(filled(x, n)?),
            Scalar::U8(x) => Elements::U8(filled(x, n)?),
            Scalar::I8(x) => Elements::I8(filled(x, n)?),
            Scalar::I16(x) => Elements::I16(filled(x, n)?),
            Scalar::U16(x) => Elements::U16(filled(x, n)?),
            Scalar::U64(x) => Elements::U64(filled(x, n)?),
            Scalar::Bool(x) => Elements::Bool(filled(x, n)?),
            Scalar::C64(x) => Elements::C64(filled(x, n)?),
            Scalar::C128(x) => Elements::C128(filled(x, n)?),
        })
    }

    /// Sets every element to `value`; false (and nothing changed) if its dtype differs.
    pub fn fill(&mut self, value: Scalar) -> bool {
        match (self, value) {
            (Elements::F32(v), Scalar::F32(x)) => v.fill(x),
            (Elements::F64(v), Scalar::F64(x)) => v.fill(x),
            (Elements::F16(v), Scalar::F16(x)) => v.fill(x),
            (Elements::BF16(v), Scalar::BF16(x)) => v.fill(x),
            (Elements::I32(v), Scalar::I32(x)) => v.fill(x),
            (Elements::I64(v), Scalar::I64(x)) => v.fill(x),
            (Elements::U32(v), Scalar::U32(x)) => v.fill(x),
            (Elements::U8(v), Scalar::U8(x)) => v.fill(x),
            (Elements::I8(v), Scalar::I8(x)) => v.fill(x),
            (Elements::I16(v), Scalar::I16(x)) => v.fill(x),
            (Elements::U16(v), Scalar::U16(x)) => v.fill(x),
            (Elements::U64(v), Scalar::U64(x)) => v.fill(x),
            (Elements::Bool(v), Scalar::Bool(x)) => v.fill(x),
            (Elements::C64(v), Scalar::C64(x)) => v.fill(x),
            (Elements::C128(v), Scalar::C128(x)) => v.fill(x),
            _ => return false,
        }
        true
    }

    pub fn zeros(dtype: DType, n: usize) -> Elements {
        Elements::splat(Scalar::zero(dtype), n)
    }

    /// The element at `i`; panics if out of range (an internal invariant, never user input).
    pub fn get(&self, i: usize) -> Scalar {
        match self {
            Elements::F32(v) => Scalar::F32(v[i]),
            Elements::F64(v) => Scalar::F64(v[i]),
            Elements::F16(v) => Scalar::F16(v[i]),
            Elements::BF16(v) => Scalar::BF16(v[i]),
            Elements::I32(v) => Scalar::I32(v[i]),
            Elements::I64(v) => Scalar::I64(v[i]),
            Elements::U32(v) => Scalar::U32(v[i]),
            Elements::U8(v) => Scalar::U8(v[i]),
            Elements::I8(v) => Scalar::I8(v[i]),
            Elements::I16(v) => Scalar::I16(v[i]),
            Elements::U16(v) => Scalar::U16(v[i]),
            Elements::U64(v) => Scalar::U64(v[i]),
            Elements::Bool(v) => Scalar::Bool(v[i]),
            Elements::C64(v) => Scalar::C64(v[i]),
            Elements::C128(v) => Scalar::C128(v[i]),
        }
    }

    /// Builds elements of `dtype` from scalars that all have that dtype.
    pub fn from_scalars(dtype: DType, values: &[Scalar]) -> Option<Elements> {
        let mut out = Elements::zeros(dtype, 0);
        for &s in values {
            match (&mut out, s) {
                (Elements::F32(v), Scalar::F32(x)) => v.push(x),
                (Elements::F64(v), Scalar::F64(x)) => v.push(x),
                (Elements::F16(v), Scalar::F16(x)) => v.push(x),
                (Elements::BF16(v), Scalar::BF16(x)) => v.push(x),
                (Elements::I32(v), Scalar::I32(x)) => v.push(x),
                (Elements::I64(v), Scalar::I64(x)) => v.push(x),
                (Elements::U32(v), Scalar::U32(x)) => v.push(x),
                (Elements::U8(v), Scalar::U8(x)) => v.push(x),
                (Elements::I8(v), Scalar::I8(x)) => v.push(x),
                (Elements::I16(v), Scalar::I16(x)) => v.push(x),
                (Elements::U16(v), Scalar::U16(x)) => v.push(x),
                (Elements::U64(v), Scalar::U64(x)) => v.push(x),
                (Elements::Bool(v), Scalar::Bool(x)) => v.push(x),
                (Elements::C64(v), Scalar::C64(x)) => v.push(x),
                (Elements::C128(v), Scalar::C128(x)) => v.push(x),
                _ => return None,
            }
        }
        Some(out)
    }

    /// Every element as f64 (integers and bools converted by value, complex numbers by their
    /// real part).
    pub fn to_f64_vec(&self) -> Vec<f64> {
        (0..self.len()).map(|i| self.get(i).to_f64()).collect()
    }

    /// The raw bits of every element, widened to u128; used for bit-exact equality and hashing.
    fn bits(&self) -> impl Iterator<Item = u128> + '_ {
        (0..self.len()).map(|i| self.get(i).bits())
    }
}

impl PartialEq for Elements {
    fn eq(&self, other: &Self) -> bool {
        self.dtype() == other.dtype() && self.len() == other.len() && self.bits().eq(other.bits())
    }
}

impl Eq for Elements {}

impl Hash for Elements {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.dtype().hash(state);
        self.len().hash(state);
        for b in self.bits() {
            b.hash(state);
        }
    }
}

/// One value of some dtype.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub enum Scalar {
    F32(f32),
    F64(f64),
    F16(f16),
    BF16(bf16),
    I32(i32),
    I64(i64),
    U32(u32),
    U8(u8),
    I8(i8),
    I16(i16),
    U16(u16),
    U64(u64),
    Bool(bool),
    C64(Complex<f32>),
    C128(Complex<f64>),
}

impl Scalar {
    pub fn dtype(self) -> DType {
        match self {
            Scalar::F32(_) => DType::F32,
            Scalar::F64(_) => DType::F64,
            Scalar::F16(_) => DType::F16,
            Scalar::BF16(_) => DType::BF16,
            Scalar::I32(_) => DType::I32,
            Scalar::I64(_) => DType::I64,
            Scalar::U32(_) => DType::U32,
            Scalar::U8(_) => DType::U8,
            Scalar::I8(_) => DType::I8,
            Scalar::I16(_) => DType::I16,
            Scalar::U16(_) => DType::U16,
            Scalar::U64(_) => DType::U64,
            Scalar::Bool(_) => DType::Bool,
            Scalar::C64(_) => DType::C64,
            Scalar::C128(_) => DType::C128,
        }
    }

    pub fn zero(dtype: DType) -> Scalar {
        Scalar::from_f64(dtype, 0.0)
    }

    /// `value` converted to `dtype`: floats round to nearest, integers truncate toward zero
    /// and saturate, bools are `value != 0`, complex numbers have it as their real part.
    /// Meant for numbers written in source code.
    pub fn from_f64(dtype: DType, value: f64) -> Scalar {
        match dtype {
            DType::F32 => Scalar::F32(value as f32),
            DType::F64 => Scalar::F64(value),
            DType::F16 => Scalar::F16(f16_from_f64(value)),
            DType::BF16 => Scalar::BF16(bf16_from_f64(value)),
            DType::I32 => Scalar::I32(value as i32),
            DType::I64 => Scalar::I64(value as i64),
            DType::U32 => Scalar::U32(value as u32),
            DType::U8 => Scalar::U8(value as u8),
            DType::I8 => Scalar::I8(value as i8),
            DType::I16 => Scalar::I16(value as i16),
            DType::U16 => Scalar::U16(value as u16),
            DType::U64 => Scalar::U64(value as u64),
            DType::Bool => Scalar::Bool(value != 0.0),
            DType::C64 => Scalar::C64(Complex::new(value as f32, 0.0)),
            DType::C128 => Scalar::C128(Complex::new(value, 0.0)),
        }
    }

    /// The value as f64; a complex number's real part.
    pub fn to_f64(self) -> f64 {
        match self {
            Scalar::F32(x) => x as f64,
            Scalar::F64(x) => x,
            Scalar::F16(x) => x.to_f64(),
            Scalar::BF16(x) => x.to_f64(),
            Scalar::I32(x) => x as f64,
            Scalar::I64(x) => x as f64,
            Scalar::U32(x) => x as f64,
            Scalar::U8(x) => x as f64,
            Scalar::I8(x) => x as f64,
            Scalar::I16(x) => x as f64,
            Scalar::U16(x) => x as f64,
            Scalar::U64(x) => x as f64,
            Scalar::Bool(x) => x as u8 as f64,
            Scalar::C64(x) => x.re as f64,
            Scalar::C128(x) => x.re,
        }
    }

    fn bits(self) -> u128 {
        match self {
            Scalar::F32(x) => u128::from(x.to_bits() as u64),
            Scalar::F64(x) => u128::from(x.to_bits()),
            Scalar::F16(x) => u128::from(x.to_bits() as u64),
            Scalar::BF16(x) => u128::from(x.to_bits() as u64),
            Scalar::I32(x) => u128::from(x as u32 as u64),
            Scalar::I64(x) => u128::from(x as u64),
            Scalar::U32(x) => u128::from(x as u64),
            Scalar::U8(x) => u128::from(x as u64),
            Scalar::I8(x) => u128::from(x as u8 as u64),
            Scalar::I16(x) => u128::from(x as u16 as u64),
            Scalar::U16(x) => u128::from(x as u64),
            Scalar::U64(x) => u128::from(x),
            Scalar::Bool(x) => u128::from(x as u64),
            Scalar::C64(x) => u128::from(x.re.to_bits()) << 64 | u128::from(x.im.to_bits()),
            Scalar::C128(x) => u128::from(x.re.to_bits()) << 64 | u128::from(x.im.to_bits()),
        }
    }
}

impl PartialEq for Scalar {
    fn eq(&self, other: &Self) -> bool {
        self.dtype() == other.dtype() && self.bits() == other.bits()
    }
}

impl Eq for Scalar {}

impl Hash for Scalar {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.dtype().hash(state);
        self.bits().hash(state);
    }
}

/// `x` as f32 rounded to odd: truncated toward zero, with the last bit set when inexact.
/// Rounding that to a format with at least two fewer significand bits is the same as rounding
/// `x` directly, which avoids double rounding on the way from f64 to f16/bf16.
fn f32_round_to_odd(x: f64) -> f32 {
    let f = x as f32;
    if f.is_nan() || f as f64 == x {
        return f;
    }
    let mut bits = f.to_bits();
    if (f as f64).abs() > x.abs() {
        bits -= 1;
    }
    f32::from_bits(bits | 1)
}

/// `x` rounded once to the nearest f16 (ties to even).
pub fn f16_from_f64(x: f64) -> f16 {
    f16::from_f32(f32_round_to_odd(x))
}

/// `x` rounded once to the nearest bf16 (ties to even).
pub fn bf16_from_f64(x: f64) -> bf16 {
    bf16::from_f32(f32_round_to_odd(x))
}

/// A Rust element type that maps onto a [`DType`].
pub trait Element: Copy + PartialEq + std::fmt::Debug + Send + Sync + 'static {
    const DTYPE: DType;
    fn into_elements(values: Vec<Self>) -> Elements;
    fn slice_of(elements: &Elements) -> Option<&[Self]>;
    fn into_scalar(self) -> Scalar;
}

macro_rules! impl_element {
    ($t:ty, $variant:ident) => {
        impl Element for $t {
            const DTYPE: DType = DType::$variant;
            fn into_elements(values: Vec<Self>) -> Elements {
                Elements::$variant(values)
            }
            fn slice_of(elements: &Elements) -> Option<&[Self]> {
                match elements {
                    Elements::$variant(v) => Some(v),
                    _ => None,
                }
            }
            fn into_scalar(self) -> Scalar {
                Scalar::$variant(self)
            }
        }
    };
}

impl_element!(f32, F32);
impl_element!(f64, F64);
impl_element!(f16, F16);
impl_element!(bf16, BF16);
impl_element!(i32, I32);
impl_element!(i64, I64);
impl_element!(u32, U32);
impl_element!(u8, U8);
impl_element!(i8, I8);
impl_element!(i16, I16);
impl_element!(u16, U16);
impl_element!(u64, U64);
impl_element!(bool, Bool);
impl_element!(Complex<f32>, C64);
impl_element!(Complex<f64>, C128);

/// The value of a `constant`: either one element repeated over the whole shape (a splat) or
/// one element per position, row-major.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Literal {
    pub ty: TensorType,
    pub data: Elements,
}

impl Literal {
    pub fn splat(value: Scalar, shape: impl Into<crate::Shape>) -> Literal {
        Literal {
            ty: TensorType::new(value.dtype(), shape),
            data: Elements::splat(value, 1),
        }
    }

    pub fn scalar(value: Scalar) -> Literal {
        Literal::splat(value, crate::Shape::scalar())
    }

    pub fn is_splat(&self) -> bool {
        self.data.len() == 1
    }

    /// The literal's data expanded to one element per position.
    pub fn to_dense(&self) -> Elements {
        if self.is_splat() {
            Elements::splat(self.data.get(0), self.ty.numel())
        } else {
            self.data.clone()
        }
    }
}

/// Distance between two floats of the same dtype in units in the last place (how many
/// representable values apart they are); NaN is 0 from NaN, and non-finite values that are not
/// identical are `u64::MAX` apart. The measure of every ULP bound in the tests.
pub fn ulp_distance(a: Scalar, b: Scalar) -> u64 {
    // Complex numbers: the larger of their parts' distances.
    if let (Scalar::C64(x), Scalar::C64(y)) = (a, b) {
        let part = |p: f32, q: f32| ulp_distance(Scalar::F32(p), Scalar::F32(q));
        return part(x.re, y.re).max(part(x.im, y.im));
    }
    if let (Scalar::C128(x), Scalar::C128(y)) = (a, b) {
        let part = |p: f64, q: f64| ulp_distance(Scalar::F64(p), Scalar::F64(q));
        return part(x.re, y.re).max(part(x.im, y.im));
    }
    let (fa, fb) = (a.to_f64(), b.to_f64());
    if !fa.is_finite() || !fb.is_finite() {
        let same = (fa.is_nan() && fb.is_nan()) || fa == fb;
        return if same { 0 } else { u64::MAX };
    }
    let ordered = |s: Scalar| -> i64 {
        let (bits, width) = match s {
            Scalar::F32(x) => (x.to_bits() as i64, 32),
            Scalar::F64(x) => (x.to_bits() as i64, 64),
            Scalar::F16(x) => (x.to_bits() as i64, 16),
            Scalar::BF16(x) => (x.to_bits() as i64, 16),
            other => return other.to_f64() as i64,
        };
        let sign = if width == 64 {
            bits < 0
        } else {
            bits >> (width - 1) & 1 == 1
        };
        let magnitude = if width == 64 {
            bits & i64::MAX
        } else {
            bits & ((1 << (width - 1)) - 1)
        };
        if sign {
            -magnitude
        } else {
            magnitude
        }
    };
    ordered(a).abs_diff(ordered(b))
}

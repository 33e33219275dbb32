//! Element-type traits shared by the op families. Each op dispatches on the dtype once and
//! then runs a loop monomorphized for one Rust type, so these traits carry the per-dtype
//! arithmetic rules: how a float widens and rounds, how an integer wraps and divides.

use ferrax_ir::{bf16_from_f64, f16_from_f64, Element};
use half::{bf16, f16};
use std::ops::{Add, BitAnd, BitOr, BitXor, Div, Mul, Neg, Not, Rem, Sub};

/// The type basic float arithmetic is carried out in: f32 or f64.
pub(super) trait Arith:
    Copy
    + Sync
    + PartialOrd
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Rem<Output = Self>
    + Neg<Output = Self>
{
    const INFINITY: Self;
    fn is_nan(self) -> bool;
    fn is_sign_negative(self) -> bool;
    fn abs(self) -> Self;
}

macro_rules! impl_arith {
    ($t:ty) => {
        impl Arith for $t {
            const INFINITY: Self = <$t>::INFINITY;
            fn is_nan(self) -> bool {
                <$t>::is_nan(self)
            }
            fn is_sign_negative(self) -> bool {
                <$t>::is_sign_negative(self)
            }
            fn abs(self) -> Self {
                <$t>::abs(self)
            }
        }
    };
}

impl_arith!(f32);
impl_arith!(f64);

/// NaN-propagating maximum with max(-0, +0) = +0 (`jnp.maximum`).
pub(super) fn fmax<A: Arith>(a: A, b: A) -> A {
    // On a tie (equal values, or -0 against +0) prefer the operand that is not -0.
    if a.is_nan() || a > b || (a == b && !a.is_sign_negative()) {
        a
    } else {
        b
    }
}

/// NaN-propagating minimum with min(-0, +0) = -0 (`jnp.minimum`).
pub(super) fn fmin<A: Arith>(a: A, b: A) -> A {
    // On a tie prefer the operand that is -0.
    if a.is_nan() || a < b || (a == b && a.is_sign_negative()) {
        a
    } else {
        b
    }
}

/// A float element type. `to_arith`/`from_arith` carry add, sub, mul, div, rem, max and min:
/// f16 and bf16 go through f32, whose precision (24 >= 2p + 2 bits) makes the final rounding
/// equal a single correctly rounded one. `to_f64` is exact and `from_f64` rounds once, which
/// the transcendentals and accumulations use.
pub(super) trait Float: Element {
    type Arith: Arith;
    fn to_arith(self) -> Self::Arith;
    fn from_arith(a: Self::Arith) -> Self;
    fn to_f64(self) -> f64;
    fn from_f64(x: f64) -> Self;
}

impl Float for f32 {
    type Arith = f32;
    fn to_arith(self) -> f32 {
        self
    }
    fn from_arith(a: f32) -> f32 {
        a
    }
    fn to_f64(self) -> f64 {
        self as f64
    }
    fn from_f64(x: f64) -> f32 {
        x as f32
    }
}

impl Float for f64 {
    type Arith = f64;
    fn to_arith(self) -> f64 {
        self
    }
    fn from_arith(a: f64) -> f64 {
        a
    }
    fn to_f64(self) -> f64 {
        self
    }
    fn from_f64(x: f64) -> f64 {
        x
    }
}

impl Float for f16 {
    type Arith = f32;
    fn to_arith(self) -> f32 {
        self.to_f32()
    }
    fn from_arith(a: f32) -> f16 {
        f16::from_f32(a)
    }
    fn to_f64(self) -> f64 {
        f16::to_f64(self)
    }
    fn from_f64(x: f64) -> f16 {
        f16_from_f64(x)
    }
}

impl Float for bf16 {
    type Arith = f32;
    fn to_arith(self) -> f32 {
        self.to_f32()
    }
    fn from_arith(a: f32) -> bf16 {
        bf16::from_f32(a)
    }
    fn to_f64(self) -> f64 {
        bf16::to_f64(self)
    }
    fn from_f64(x: f64) -> bf16 {
        bf16_from_f64(x)
    }
}

/// An integer element type with XLA's semantics: arithmetic wraps, division by zero gives all
/// bits set, remainder by zero gives the dividend, and `MIN / -1` wraps to `MIN`.
pub(super) trait Int:
    Element
    + Ord
    + BitAnd<Output = Self>
    + BitOr<Output = Self>
    + BitXor<Output = Self>
    + Not<Output = Self>
{
    const ZERO: Self;
    const ONE: Self;
    const MIN: Self;
    const MAX: Self;
    fn add(self, b: Self) -> Self;
    fn sub(self, b: Self) -> Self;
    fn mul(self, b: Self) -> Self;
    fn div(self, b: Self) -> Self;
    fn rem(self, b: Self) -> Self;
    fn pow(self, b: Self) -> Self;
    fn neg(self) -> Self;
    fn abs(self) -> Self;
    fn sign(self) -> Self;
    /// `self << b`, 0 where `b` read as unsigned is the bit width or more (lax's rule).
    fn shift_left(self, b: Self) -> Self;
    /// `self >> b` filling with zeros, 0 where `b` is the bit width or more.
    fn shift_right_logical(self, b: Self) -> Self;
    /// `self >> b` filling with the sign bit, all sign bits where `b` is the width or more.
    fn shift_right_arithmetic(self, b: Self) -> Self;
}

/// `base ** exp` for `exp >= 0` by repeated squaring, wrapping.
fn pow_unsigned<T: Int>(mut base: T, mut exp: u64) -> T {
    let mut acc = T::ONE;
    while exp > 0 {
        if exp & 1 == 1 {
            acc = acc.mul(base);
        }
        base = base.mul(base);
        exp >>= 1;
    }
    acc
}

macro_rules! impl_int_common {
    ($t:ty) => {
        const ZERO: Self = 0;
        const ONE: Self = 1;
        const MIN: Self = <$t>::MIN;
        const MAX: Self = <$t>::MAX;
        fn add(self, b: Self) -> Self {
            self.wrapping_add(b)
        }
        fn sub(self, b: Self) -> Self {
            self.wrapping_sub(b)
        }
        fn mul(self, b: Self) -> Self {
            self.wrapping_mul(b)
        }
        fn div(self, b: Self) -> Self {
            if b == 0 {
                !0
            } else {
                self.wrapping_div(b)
            }
        }
        fn rem(self, b: Self) -> Self {
            if b == 0 {
                self
            } else {
                self.wrapping_rem(b)
            }
        }
        fn neg(self) -> Self {
            self.wrapping_neg()
        }
    };
}

/// The shifts of `$t`, whose unsigned and signed counterparts of the same width are `$u` and
/// `$s`: the amount is read as `$u`, so a negative one is huge.
macro_rules! impl_shifts {
    ($t:ty, $u:ty, $s:ty) => {
        fn shift_left(self, b: Self) -> Self {
            match u32::try_from(b as $u) {
                Ok(n) if n < <$t>::BITS => self << n,
                _ => 0,
            }
        }
        fn shift_right_logical(self, b: Self) -> Self {
            match u32::try_from(b as $u) {
                Ok(n) if n < <$t>::BITS => ((self as $u) >> n) as $t,
                _ => 0,
            }
        }
        fn shift_right_arithmetic(self, b: Self) -> Self {
            let n = u32::try_from(b as $u).map_or(<$t>::BITS - 1, |n| n.min(<$t>::BITS - 1));
            ((self as $s) >> n) as $t
        }
    };
}

macro_rules! impl_signed {
    ($t:ty, $u:ty) => {
        impl Int for $t {
            impl_int_common!($t);
            impl_shifts!($t, $u, $t);
            /// A negative exponent gives 0, except for bases 1 and -1.
            fn pow(self, b: Self) -> Self {
                if b >= 0 {
                    pow_unsigned(self, b as u64)
                } else if self == 1 || (self == -1 && b % 2 == 0) {
                    1
                } else if self == -1 {
                    -1
                } else {
                    0
                }
            }
            fn abs(self) -> Self {
                self.wrapping_abs()
            }
            fn sign(self) -> Self {
                self.signum()
            }
        }
    };
}

impl_signed!(i32, u32);
impl_signed!(i64, u64);
impl_signed!(i8, u8);
impl_signed!(i16, u16);

macro_rules! impl_unsigned {
    ($t:ty, $s:ty) => {
        impl Int for $t {
            impl_int_common!($t);
            impl_shifts!($t, $t, $s);
            fn pow(self, b: Self) -> Self {
                pow_unsigned(self, b as u64)
            }
            fn abs(self) -> Self {
                self
            }
            fn sign(self) -> Self {
                (self != 0) as $t
            }
        }
    };
}

impl_unsigned!(u8, i8);
impl_unsigned!(u32, i32);
impl_unsigned!(u16, i16);
impl_unsigned!(u64, i64);

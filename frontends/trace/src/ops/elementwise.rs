//! Elementwise ops: `unary`, `binary`, `compare`, `select`, `clamp` (`clip`), `convert`
//! (`astype`) and `stop_gradient`. Unlike the IR, which wants operands of one shape, the
//! methods broadcast them with NumPy's rules first, and take Rust numbers as operands.

use super::conv::Recorder;
use super::source::number_like;
use super::{broadcast_shapes, Operand};
use crate::tensor::{apply, record, Inner};
use crate::Tensor;
use ferrax_ir::{lower_bitcast, BinaryOp, CompareOp, DType, Literal, LowerError, Op, UnaryOp};
use std::panic::Location;

impl Tensor {
    /// Broadcasts every operand to their common shape; the first failure is returned as `Err`.
    #[track_caller]
    fn broadcast_together(op: &str, args: &[&Tensor]) -> Result<Vec<Tensor>, Tensor> {
        let location = Location::caller();
        if let Some(f) = args.iter().find(|a| a.error().is_some()) {
            return Err((*f).clone());
        }
        let mut out: Vec<usize> = Vec::new();
        for (i, a) in args.iter().enumerate() {
            out = broadcast_shapes(&out, a.shape()).ok_or_else(|| {
                let prev = args[..i]
                    .iter()
                    .find(|p| broadcast_shapes(p.shape(), a.shape()).is_none())
                    .unwrap_or(&args[0]);
                let message = format!(
                    "{op}: shapes {} and {} cannot be broadcast together",
                    prev.ty(),
                    a.ty()
                );
                a.fail_at(location, message)
            })?;
        }
        let ctx = args
            .iter()
            .filter_map(|a| a.trace_ctx())
            .max_by_key(|c| c.serial())
            .cloned();
        Ok(args
            .iter()
            .map(|a| {
                if a.shape() == out.as_slice() {
                    return (*a).clone();
                }
                match (&a.0, &ctx) {
                    (Inner::Concrete(arr), Some(ctx)) if arr.numel() == 1 => {
                        let lit = Literal::splat(arr.elements().get(0), out.clone());
                        record(ctx, Op::Constant(lit), &[], location, a.ty().clone())
                    }
                    _ => a.broadcast_to_at(location, &out),
                }
            })
            .collect())
    }

    #[track_caller]
    fn unary(&self, u: UnaryOp) -> Tensor {
        apply(Op::Unary(u), &[self])
    }

    /// A binary op with broadcasting; both operands must share a dtype.
    #[track_caller]
    pub(crate) fn binary(&self, b: BinaryOp, other: &Tensor) -> Tensor {
        self.elementwise2(Op::Binary(b), other)
    }

    #[track_caller]
    fn elementwise2(&self, op: Op, other: &Tensor) -> Tensor {
        if self.dtype() != other.dtype() && self.error().is_none() && other.error().is_none() {
            return self.fail(format!(
                "{}: cannot combine {} with {} (their dtypes differ; convert one with astype)",
                op.name(),
                self.ty(),
                other.ty()
            ));
        }
        match Tensor::broadcast_together(op.name(), &[self, other]) {
            Ok(v) => apply(op, &[&v[0], &v[1]]),
            Err(f) => f,
        }
    }

    #[track_caller]
    pub(crate) fn binary_number(&self, b: BinaryOp, x: f64, number_first: bool) -> Tensor {
        let n = number_like(x, self);
        if number_first {
            n.binary(b, self)
        } else {
            self.binary(b, &n)
        }
    }

    #[track_caller]
    pub(super) fn compare<'a>(&self, c: CompareOp, other: impl Into<Operand<'a>>) -> Tensor {
        let other = other.into().resolve(self);
        self.elementwise2(Op::Compare(c), &other)
    }
}

macro_rules! unary_methods {
    ($($(#[$doc:meta])* $name:ident => $op:ident),* $(,)?) => {
        impl Tensor {$(
            $(#[$doc])*
            #[track_caller]
            pub fn $name(&self) -> Tensor {
                self.unary(UnaryOp::$op)
            }
        )*}
    };
}

unary_methods! {
    abs => Abs,
    sign => Sign,
    floor => Floor,
    ceil => Ceil,
    /// Rounds half away from zero (`lax.round`).
    round => Round,
    /// Rounds half to even (`jnp.round`).
    round_even => RoundEven,
    exp => Exp,
    expm1 => Expm1,
    log => Log,
    log1p => Log1p,
    sqrt => Sqrt,
    rsqrt => Rsqrt,
    tanh => Tanh,
    /// `1 / (1 + exp(-x))`.
    sigmoid => Logistic,
    sin => Sin,
    cos => Cos,
    /// `jnp.tan`.
    tan => Tan,
    /// `jnp.arcsin`: NaN outside [-1, 1].
    asin => Asin,
    /// `jnp.arccos`.
    acos => Acos,
    /// `jnp.arctan`.
    atan => Atan,
    /// `jnp.sinh`.
    sinh => Sinh,
    /// `jnp.cosh`.
    cosh => Cosh,
    /// `jnp.arcsinh`.
    asinh => Asinh,
    /// `jnp.arccosh`: NaN below 1.
    acosh => Acosh,
    /// `jnp.arctanh`: ±inf at ±1, NaN beyond.
    atanh => Atanh,
    /// `jnp.cbrt`: the real cube root, negative for negative `x`.
    cbrt => Cbrt,
    /// `lax.lgamma`: log |Γ(x)|; +inf at 0 and the negative integers.
    lgamma => Lgamma,
    /// `lax.digamma`: Γ'(x) / Γ(x); NaN at 0 and the negative integers. Its derivative
    /// (`polygamma(1, x)`) is not defined in ferrax.
    digamma => Digamma,
    /// `lax.bessel_i0e`: e^{-|x|}·I₀(x).
    bessel_i0e => BesselI0e,
    /// `lax.bessel_i1e`: e^{-|x|}·I₁(x).
    bessel_i1e => BesselI1e,
    /// Logical not on bools, bitwise not on integers.
    logical_not => Not,
    /// A complex number's real part (`lax.real`), of its parts' type (f32 for c64).
    real => Real,
    /// A complex number's imaginary part (`lax.imag`).
    imag => Imag,
}

impl Tensor {
    /// The complex conjugate (`jnp.conj`): the imaginary part negated; real values unchanged.
    #[track_caller]
    pub fn conj(&self) -> Tensor {
        if self.dtype().is_complex() {
            self.real().complex(&-&self.imag())
        } else {
            self.clone()
        }
    }

    /// Where the elements are NaN (`jnp.isnan`); false everywhere for integers and bools, and
    /// for complex numbers where either part is NaN.
    #[track_caller]
    pub fn is_nan(&self) -> Tensor {
        if self.dtype().is_complex() {
            return self.real().is_nan().logical_or(self.imag().is_nan());
        }
        if self.dtype().is_float() {
            self.compare(CompareOp::Ne, self)
        } else {
            Tensor::full(DType::Bool, self.shape().to_vec(), 0.0)
        }
    }

    /// Where the elements are neither infinite nor NaN (`jnp.isfinite`); true everywhere for
    /// integers and bools; both parts of a complex number.
    #[track_caller]
    pub fn is_finite(&self) -> Tensor {
        if self.dtype().is_complex() {
            return self.real().is_finite().logical_and(self.imag().is_finite());
        }
        if self.dtype().is_float() {
            self.abs().compare(CompareOp::Lt, f64::INFINITY)
        } else {
            Tensor::full(DType::Bool, self.shape().to_vec(), 1.0)
        }
    }

    /// Where the elements are +inf or -inf (`jnp.isinf`), either part of a complex number.
    #[track_caller]
    pub fn is_inf(&self) -> Tensor {
        if self.dtype().is_complex() {
            return self.real().is_inf().logical_or(self.imag().is_inf());
        }
        if self.dtype().is_float() {
            self.abs().compare(CompareOp::Eq, f64::INFINITY)
        } else {
            Tensor::full(DType::Bool, self.shape().to_vec(), 0.0)
        }
    }
}

macro_rules! binary_methods {
    ($($(#[$doc:meta])* $name:ident => $op:ident),* $(,)?) => {
        impl Tensor {$(
            $(#[$doc])*
            #[track_caller]
            pub fn $name<'a>(&self, other: impl Into<Operand<'a>>) -> Tensor {
                let other = other.into().resolve(self);
                self.binary(BinaryOp::$op, &other)
            }
        )*}
    };
}

binary_methods! {
    /// Elementwise maximum; NaN propagates.
    maximum => Max,
    /// Elementwise minimum; NaN propagates.
    minimum => Min,
    pow => Pow,
    /// Remainder with the sign of the dividend (`jnp.fmod`, `lax.rem`).
    fmod => Rem,
    /// The angle of the point (`self`, `other`) = (y, x) from the positive x axis, in
    /// [-pi, pi] (`jnp.arctan2(self, other)`, `lax.atan2`); floats only.
    atan2 => Atan2,
    /// The complex numbers `self + i·other` (`lax.complex`) of f32 parts (c64) or f64 parts
    /// (c128).
    complex => Complex,
    logical_and => And,
    logical_or => Or,
    logical_xor => Xor,
    /// `x << y` on integers; amounts of the bit width or more give 0 (`lax.shift_left`).
    shift_left => ShiftLeft,
    /// `x >> y` filling with zeros; amounts of the bit width or more give 0
    /// (`lax.shift_right_logical`).
    shift_right_logical => ShiftRightLogical,
    /// `x >> y` filling with the sign bit; amounts of the bit width or more give all sign bits
    /// (`lax.shift_right_arithmetic`).
    shift_right_arithmetic => ShiftRightArithmetic,
}

macro_rules! compare_methods {
    ($($name:ident => $op:ident),* $(,)?) => {
        impl Tensor {$(
            #[track_caller]
            pub fn $name<'a>(&self, other: impl Into<Operand<'a>>) -> Tensor {
                self.compare(CompareOp::$op, other)
            }
        )*}
    };
}

compare_methods! {
    equal => Eq,
    not_equal => Ne,
    less => Lt,
    less_equal => Le,
    greater => Gt,
    greater_equal => Ge,
}

impl Tensor {
    #[track_caller]
    pub fn square(&self) -> Tensor {
        self.binary(BinaryOp::Mul, self)
    }

    /// `self ? on_true : on_false` elementwise, with broadcasting (`jnp.where`).
    #[track_caller]
    pub fn select<'a, 'b>(
        &self,
        on_true: impl Into<Operand<'a>>,
        on_false: impl Into<Operand<'b>>,
    ) -> Tensor {
        let (t, f) = match (on_true.into(), on_false.into()) {
            (Operand::Number(a), Operand::Number(b)) => {
                let t = Tensor::scalar(a as f32);
                let f = number_like(b, &t);
                (t, f)
            }
            (Operand::Number(a), f) => {
                let f = f.resolve(self);
                (number_like(a, &f), f)
            }
            (t, f) => {
                let t = t.resolve(self);
                let f = f.resolve(&t);
                (t, f)
            }
        };
        if self.dtype() != DType::Bool && self.error().is_none() {
            return self.fail(format!(
                "select: the condition must be bool, got {}",
                self.ty()
            ));
        }
        if t.dtype() != f.dtype() {
            return self.fail(format!(
                "select: branches {} and {} have different dtypes",
                t.ty(),
                f.ty()
            ));
        }
        match Tensor::broadcast_together("select", &[self, &t, &f]) {
            Ok(v) => apply(Op::Select, &[&v[0], &v[1], &v[2]]),
            Err(e) => e,
        }
    }

    /// Limits every element to `[lo, hi]` (`lax.clamp`; `jnp.clip`'s values). At a bound the
    /// derivative is `lax.clamp`'s 0, where `jnp.clip`, a maximum then a minimum, halves it;
    /// `x.maximum(lo).minimum(hi)` is that form.
    #[track_caller]
    pub fn clip<'a, 'b>(&self, lo: impl Into<Operand<'a>>, hi: impl Into<Operand<'b>>) -> Tensor {
        let (lo, hi) = (lo.into().resolve(self), hi.into().resolve(self));
        match Tensor::broadcast_together("clip", &[&lo, self, &hi]) {
            Ok(v) => apply(Op::Clamp, &[&v[0], &v[1], &v[2]]),
            Err(e) => e,
        }
    }

    /// Converts to `dtype` (`x.astype`); floats to integers truncate toward zero.
    #[track_caller]
    pub fn astype(&self, dtype: DType) -> Tensor {
        if self.dtype() == dtype {
            return self.clone();
        }
        apply(Op::Convert { to: dtype }, &[self])
    }

    /// The bits of each element read as `dtype` (`lax.bitcast_convert_type`): u32 to f32 and
    /// back, i64 to f64, f16 to bf16; to a narrower type each element becomes a trailing
    /// dimension of its parts, least significant first (f32 `[n]` to u8 `[n, 4]`), and from
    /// a narrower one the trailing dimension, which must hold the parts, is joined (u32
    /// `[n, 2]` to u64 `[n]`).
    #[track_caller]
    pub fn bitcast(&self, dtype: DType) -> Tensor {
        let location = Location::caller();
        if self.dtype() == dtype || self.error().is_some() {
            return self.clone();
        }
        if self.dtype().size_bytes() == dtype.size_bytes() {
            return apply(Op::BitcastConvert { to: dtype }, &[self]);
        }
        let lowered = lower_bitcast(&mut Recorder(location), (self, self.ty()), dtype);
        match lowered {
            Ok(t) => t,
            Err(LowerError::Invalid(m)) => self.fail_at(location, m),
            Err(LowerError::Sink(never)) => match never {},
        }
    }

    /// The identity, with a zero derivative.
    #[track_caller]
    pub fn stop_gradient(&self) -> Tensor {
        apply(Op::StopGradient, &[self])
    }
}

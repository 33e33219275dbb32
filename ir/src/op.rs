//! The closed set of operations. Semantics follow jax.lax / StableHLO so that a StableHLO
//! program maps onto this set one to one; every pass matches on `Op` exhaustively, so adding
//! an op is a compile error everywhere it still needs handling.

use crate::{
    Cond, DType, Func, Gather, Literal, Remat, Scalar, Scan, Scatter, Shape, TensorType, While,
};
use num_complex::Complex;
use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum UnaryOp {
    Neg,
    Abs,
    Sign,
    Floor,
    Ceil,
    /// Round half away from zero (`lax.round`'s default, `stablehlo.round_nearest_afz`).
    Round,
    /// Round half to even (`stablehlo.round_nearest_even`).
    RoundEven,
    Exp,
    Expm1,
    Log,
    Log1p,
    Sqrt,
    Rsqrt,
    Tanh,
    Logistic,
    Sin,
    Cos,
    /// Bitwise not on integers, logical not on bools.
    Not,
    /// The other elementary functions of `jax.numpy` (`tan`, `arcsin`, ..., `cbrt`), float
    /// only: computed in f64 and rounded once, on the host until kernels expand them.
    Tan,
    Asin,
    Acos,
    Atan,
    Sinh,
    Cosh,
    Asinh,
    Acosh,
    Atanh,
    Cbrt,
    /// Special functions (`lax.lgamma`: log |Γ(x)|, `lax.digamma`, `lax.erf`, `lax.erfc`,
    /// `lax.erf_inv`, `lax.bessel_i0e`, `lax.bessel_i1e`), float only: computed in f64 (to a
    /// few f64 ulp; digamma within about 1e-15 absolute near its zeros) and rounded once, on
    /// the host. The tracing frontend's `lax::erf`, `erfc` and `erf_inv` of f32 and narrower
    /// types are f32-accurate composites that fuse into kernels; these ops are the f64
    /// functions (imported programs, those three of f64, and `Tensor::lgamma`, `digamma`,
    /// `bessel_i0e` and `bessel_i1e`).
    Lgamma,
    Digamma,
    Erf,
    Erfc,
    ErfInv,
    BesselI0e,
    BesselI1e,
    /// A complex number's real and imaginary parts (`lax.real`, `lax.imag`), complex only; the
    /// result is of the parts' type. On the host.
    Real,
    Imag,
}

impl UnaryOp {
    pub const ALL: [UnaryOp; 37] = [
        UnaryOp::Neg,
        UnaryOp::Abs,
        UnaryOp::Sign,
        UnaryOp::Floor,
        UnaryOp::Ceil,
        UnaryOp::Round,
        UnaryOp::RoundEven,
        UnaryOp::Exp,
        UnaryOp::Expm1,
        UnaryOp::Log,
        UnaryOp::Log1p,
        UnaryOp::Sqrt,
        UnaryOp::Rsqrt,
        UnaryOp::Tanh,
        UnaryOp::Logistic,
        UnaryOp::Sin,
        UnaryOp::Cos,
        UnaryOp::Not,
        UnaryOp::Tan,
        UnaryOp::Asin,
        UnaryOp::Acos,
        UnaryOp::Atan,
        UnaryOp::Sinh,
        UnaryOp::Cosh,
        UnaryOp::Asinh,
        UnaryOp::Acosh,
        UnaryOp::Atanh,
        UnaryOp::Cbrt,
        UnaryOp::Lgamma,
        UnaryOp::Digamma,
        UnaryOp::Erf,
        UnaryOp::Erfc,
        UnaryOp::ErfInv,
        UnaryOp::BesselI0e,
        UnaryOp::BesselI1e,
        UnaryOp::Real,
        UnaryOp::Imag,
    ];

    pub fn name(self) -> &'static str {
        match self {
            UnaryOp::Neg => "neg",
            UnaryOp::Abs => "abs",
            UnaryOp::Sign => "sign",
            UnaryOp::Floor => "floor",
            UnaryOp::Ceil => "ceil",
            UnaryOp::Round => "round",
            UnaryOp::RoundEven => "round_even",
            UnaryOp::Exp => "exp",
            UnaryOp::Expm1 => "expm1",
            UnaryOp::Log => "log",
            UnaryOp::Log1p => "log1p",
            UnaryOp::Sqrt => "sqrt",
            UnaryOp::Rsqrt => "rsqrt",
            UnaryOp::Tanh => "tanh",
            UnaryOp::Logistic => "logistic",
            UnaryOp::Sin => "sin",
            UnaryOp::Cos => "cos",
            UnaryOp::Not => "not",
            UnaryOp::Tan => "tan",
            UnaryOp::Asin => "asin",
            UnaryOp::Acos => "acos",
            UnaryOp::Atan => "atan",
            UnaryOp::Sinh => "sinh",
            UnaryOp::Cosh => "cosh",
            UnaryOp::Asinh => "asinh",
            UnaryOp::Acosh => "acosh",
            UnaryOp::Atanh => "atanh",
            UnaryOp::Cbrt => "cbrt",
            UnaryOp::Lgamma => "lgamma",
            UnaryOp::Digamma => "digamma",
            UnaryOp::Erf => "erf",
            UnaryOp::Erfc => "erfc",
            UnaryOp::ErfInv => "erf_inv",
            UnaryOp::BesselI0e => "bessel_i0e",
            UnaryOp::BesselI1e => "bessel_i1e",
            UnaryOp::Real => "real",
            UnaryOp::Imag => "imag",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    /// Float division; integer division truncates toward zero.
    Div,
    /// Remainder with the sign of the dividend (C `fmod`).
    Rem,
    Pow,
    Max,
    Min,
    And,
    Or,
    Xor,
    /// Integers only. `x << y`; an amount of the bit width or more (as unsigned) gives 0.
    ShiftLeft,
    /// Integers only. `x >> y` filling with zeros; an amount of the bit width or more (as
    /// unsigned) gives 0.
    ShiftRightLogical,
    /// Integers only. `x >> y` filling with the sign bit; an amount of the bit width or more
    /// (as unsigned) fills the whole value with it.
    ShiftRightArithmetic,
    /// Floats only. The angle of the point `(y, x)` from the positive x axis (`atan2(y, x)`,
    /// C's and lax's, signed zeros and infinities included), in `[-pi, pi]`.
    Atan2,
    /// The complex numbers `x + iy` (`lax.complex`) of f32 or f64 parts. On the host.
    Complex,
}

impl BinaryOp {
    pub const ALL: [BinaryOp; 16] = [
        BinaryOp::Add,
        BinaryOp::Sub,
        BinaryOp::Mul,
        BinaryOp::Div,
        BinaryOp::Rem,
        BinaryOp::Pow,
        BinaryOp::Max,
        BinaryOp::Min,
        BinaryOp::And,
        BinaryOp::Or,
        BinaryOp::Xor,
        BinaryOp::ShiftLeft,
        BinaryOp::ShiftRightLogical,
        BinaryOp::ShiftRightArithmetic,
        BinaryOp::Atan2,
        BinaryOp::Complex,
    ];

    pub fn name(self) -> &'static str {
        match self {
            BinaryOp::Add => "add",
            BinaryOp::Sub => "sub",
            BinaryOp::Mul => "mul",
            BinaryOp::Div => "div",
            BinaryOp::Rem => "rem",
            BinaryOp::Pow => "pow",
            BinaryOp::Max => "max",
            BinaryOp::Min => "min",
            BinaryOp::And => "and",
            BinaryOp::Or => "or",
            BinaryOp::Xor => "xor",
            BinaryOp::ShiftLeft => "shift_left",
            BinaryOp::ShiftRightLogical => "shift_right_logical",
            BinaryOp::ShiftRightArithmetic => "shift_right_arithmetic",
            BinaryOp::Atan2 => "atan2",
            BinaryOp::Complex => "complex",
        }
    }

    /// Shifts: integers only (lax semantics, amounts read as unsigned).
    pub fn is_shift(self) -> bool {
        matches!(
            self,
            BinaryOp::ShiftLeft | BinaryOp::ShiftRightLogical | BinaryOp::ShiftRightArithmetic
        )
    }

    /// Bitwise/logical ops: integers and bools only.
    pub fn is_logical(self) -> bool {
        matches!(self, BinaryOp::And | BinaryOp::Or | BinaryOp::Xor)
    }
}

/// Comparisons; on floats they follow IEEE 754 (every comparison with NaN is false but `ne`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum CompareOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl CompareOp {
    pub const ALL: [CompareOp; 6] = [
        CompareOp::Eq,
        CompareOp::Ne,
        CompareOp::Lt,
        CompareOp::Le,
        CompareOp::Gt,
        CompareOp::Ge,
    ];

    pub fn name(self) -> &'static str {
        match self {
            CompareOp::Eq => "eq",
            CompareOp::Ne => "ne",
            CompareOp::Lt => "lt",
            CompareOp::Le => "le",
            CompareOp::Gt => "gt",
            CompareOp::Ge => "ge",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ReduceOp {
    Sum,
    Max,
    Min,
    Prod,
}

impl ReduceOp {
    pub const ALL: [ReduceOp; 4] = [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min, ReduceOp::Prod];

    pub fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "reduce_sum",
            ReduceOp::Max => "reduce_max",
            ReduceOp::Min => "reduce_min",
            ReduceOp::Prod => "reduce_prod",
        }
    }

    /// The elementwise op that combines two values of `dtype` as this reduction does: on
    /// bools, sums and maxima are `or`, products and minima `and`.
    pub fn combining_op(self, dtype: DType) -> BinaryOp {
        match (self, dtype == DType::Bool) {
            (ReduceOp::Sum, false) => BinaryOp::Add,
            (ReduceOp::Prod, false) => BinaryOp::Mul,
            (ReduceOp::Max, false) => BinaryOp::Max,
            (ReduceOp::Min, false) => BinaryOp::Min,
            (ReduceOp::Sum | ReduceOp::Max, true) => BinaryOp::Or,
            (ReduceOp::Prod | ReduceOp::Min, true) => BinaryOp::And,
        }
    }

    /// The value a reduction of no elements gives, which combined with any element leaves it
    /// unchanged: the sum's is -0 for floats (IEEE's `-0 + -0` is -0, so a sum of -0s stays
    /// -0, where +0 would turn it into +0), the maximum's the lowest value of the type (-inf
    /// for floats, `false` for bools: `any`), the minimum's the highest (`all`).
    pub fn identity(self, dtype: DType) -> Scalar {
        let float = |v: f64| Scalar::from_f64(dtype, v);
        match (self, dtype) {
            (ReduceOp::Sum, DType::F32 | DType::F64 | DType::F16 | DType::BF16) => float(-0.0),
            (
                ReduceOp::Sum,
                DType::I32
                | DType::I64
                | DType::U32
                | DType::U8
                | DType::I8
                | DType::I16
                | DType::U16
                | DType::U64,
            ) => float(0.0),
            (ReduceOp::Prod, DType::F32 | DType::F64 | DType::F16 | DType::BF16) => float(1.0),
            (
                ReduceOp::Prod,
                DType::I32
                | DType::I64
                | DType::U32
                | DType::U8
                | DType::I8
                | DType::I16
                | DType::U16
                | DType::U64,
            ) => float(1.0),
            (ReduceOp::Max, DType::F32 | DType::F64 | DType::F16 | DType::BF16) => {
                float(f64::NEG_INFINITY)
            }
            (ReduceOp::Min, DType::F32 | DType::F64 | DType::F16 | DType::BF16) => {
                float(f64::INFINITY)
            }
            (ReduceOp::Max, DType::I32) => Scalar::I32(i32::MIN),
            (ReduceOp::Min, DType::I32) => Scalar::I32(i32::MAX),
            (ReduceOp::Max, DType::I64) => Scalar::I64(i64::MIN),
            (ReduceOp::Min, DType::I64) => Scalar::I64(i64::MAX),
            (ReduceOp::Max, DType::U32) => Scalar::U32(u32::MIN),
            (ReduceOp::Min, DType::U32) => Scalar::U32(u32::MAX),
            (ReduceOp::Max, DType::U8) => Scalar::U8(u8::MIN),
            (ReduceOp::Min, DType::U8) => Scalar::U8(u8::MAX),
            (ReduceOp::Max, DType::I8) => Scalar::I8(i8::MIN),
            (ReduceOp::Min, DType::I8) => Scalar::I8(i8::MAX),
            (ReduceOp::Max, DType::I16) => Scalar::I16(i16::MIN),
            (ReduceOp::Min, DType::I16) => Scalar::I16(i16::MAX),
            (ReduceOp::Max, DType::U16) => Scalar::U16(u16::MIN),
            (ReduceOp::Min, DType::U16) => Scalar::U16(u16::MAX),
            (ReduceOp::Max, DType::U64) => Scalar::U64(u64::MIN),
            (ReduceOp::Min, DType::U64) => Scalar::U64(u64::MAX),
            // Sums and maxima of bools are `any`, products and minima `all`.
            (ReduceOp::Sum | ReduceOp::Max, DType::Bool) => Scalar::Bool(false),
            (ReduceOp::Prod | ReduceOp::Min, DType::Bool) => Scalar::Bool(true),
            // Complex sums and products work on both parts; maxima and minima (which the type
            // rules refuse) would order lexicographically.
            (ReduceOp::Sum, DType::C64) => Scalar::C64(Complex::new(-0.0, -0.0)),
            (ReduceOp::Sum, DType::C128) => Scalar::C128(Complex::new(-0.0, -0.0)),
            (ReduceOp::Prod, DType::C64 | DType::C128) => float(1.0),
            (ReduceOp::Max, DType::C64) => {
                Scalar::C64(Complex::new(f32::NEG_INFINITY, f32::NEG_INFINITY))
            }
            (ReduceOp::Max, DType::C128) => {
                Scalar::C128(Complex::new(f64::NEG_INFINITY, f64::NEG_INFINITY))
            }
            (ReduceOp::Min, DType::C64) => Scalar::C64(Complex::new(f32::INFINITY, f32::INFINITY)),
            (ReduceOp::Min, DType::C128) => {
                Scalar::C128(Complex::new(f64::INFINITY, f64::INFINITY))
            }
        }
    }
}

/// The transforms of [`Op::Fft`], over trailing dimensions of sizes `lengths`: `Fft` and its
/// inverse `Ifft` (scaled by 1/n) map complex numbers to complex numbers; `Rfft` takes real
/// ones (f32, f64) and keeps the `n/2 + 1` non-negative frequencies of the last dimension;
/// `Irfft` is its inverse, reading those as a Hermitian spectrum (the imaginary parts of the
/// zero and Nyquist frequencies ignored) into `n` real values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum FftKind {
    Fft,
    Ifft,
    Rfft,
    Irfft,
}

impl FftKind {
    pub const ALL: [FftKind; 4] = [FftKind::Fft, FftKind::Ifft, FftKind::Rfft, FftKind::Irfft];

    pub fn name(self) -> &'static str {
        match self {
            FftKind::Fft => "fft",
            FftKind::Ifft => "ifft",
            FftKind::Rfft => "rfft",
            FftKind::Irfft => "irfft",
        }
    }
}

/// Dimension numbers of a `dot_general`. The result's dimensions are the batch dimensions
/// (in `lhs_batch` order), then the lhs free dimensions, then the rhs free dimensions, each in
/// their operand's order.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct DotDims {
    pub lhs_batch: Vec<usize>,
    pub rhs_batch: Vec<usize>,
    pub lhs_contract: Vec<usize>,
    pub rhs_contract: Vec<usize>,
}

/// An operation. Attributes that determine the result type live in the op, so every result
/// type follows from the op and its operand types (see [`crate::infer_type`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Op {
    /// No operands.
    Constant(Literal),
    /// No operands; element `i` holds its index along `dim`.
    Iota {
        dtype: DType,
        shape: Shape,
        dim: usize,
    },
    Unary(UnaryOp),
    /// Two operands of the same type; no implicit broadcasting.
    Binary(BinaryOp),
    /// Two operands of the same type; a `bool` result of their shape.
    Compare(CompareOp),
    /// `(pred, on_true, on_false)`: `pred` is `bool`, of the branches' shape or a scalar.
    Select,
    /// `(min, x, max)`: bounds of `x`'s type or scalars of its dtype.
    Clamp,
    /// Element type conversion (floats to integers truncate toward zero and saturate).
    Convert {
        to: DType,
    },
    /// Reinterprets each element's bits as `to`, a dtype of the same width
    /// (`lax.bitcast_convert_type` between equal widths).
    BitcastConvert {
        to: DType,
    },
    /// Operand dimension `i` becomes result dimension `dims[i]` (size 1 or equal).
    BroadcastInDim {
        shape: Shape,
        dims: Vec<usize>,
    },
    Reshape {
        shape: Shape,
    },
    /// Result dimension `i` is operand dimension `perm[i]`.
    Transpose {
        perm: Vec<usize>,
    },
    /// The operand with the order of its elements along each of `axes` (unique) reversed.
    Reverse {
        axes: Vec<usize>,
    },
    /// Reduces over `axes` (sorted, unique); the result drops them.
    Reduce {
        op: ReduceOp,
        axes: Vec<usize>,
    },
    DotGeneral(DotDims),
    Slice {
        start: Vec<usize>,
        limit: Vec<usize>,
        strides: Vec<usize>,
    },
    /// `(x, padding_value)`: negative `low`/`high` crop.
    Pad {
        low: Vec<i64>,
        high: Vec<i64>,
        interior: Vec<usize>,
    },
    /// One or more operands joined along `axis`.
    Concatenate {
        axis: usize,
    },
    /// `(operand, start_indices)`: slices of the operand at indices read from a tensor.
    Gather(Box<Gather>),
    /// `(operand, scatter_indices, updates)`: the operand with update windows combined in.
    Scatter(Box<Scatter>),
    /// `(x, start_0, .., start_{r-1})`: the slice of size `sizes` at scalar start indices,
    /// each clamped so the slice lies inside `x`.
    DynamicSlice {
        sizes: Vec<usize>,
    },
    /// `(x, update, start_0, .., start_{r-1})`: `x` with `update` written at the start
    /// indices, clamped as in `DynamicSlice`.
    DynamicUpdateSlice,
    /// Identity whose derivative is zero.
    StopGradient,
    /// The operand sorted along `dimension`, ascending or `descending` (`lax.sort` of one
    /// operand). Floats in `jax.lax.sort`'s order: -0 ties with +0 and every NaN, of either
    /// sign, ties with the others after +inf; bools `false < true`; integers by their dtype.
    Sort {
        dimension: usize,
        descending: bool,
    },
    /// The stable permutation that sorts the operand along `dimension` as `Sort` does, as
    /// `i32` positions along it (`jnp.argsort`): tied elements keep their order. Sorting
    /// several operands by keys (`lax.sort_key_val`) is this followed by gathers.
    Argsort {
        dimension: usize,
        descending: bool,
    },
    /// The discrete Fourier transform of `kind` over the trailing `lengths.len()` dimensions,
    /// of sizes `lengths` (`stablehlo.fft`, `jnp.fft`; see [`FftKind`]).
    Fft {
        kind: FftKind,
        lengths: Vec<usize>,
    },
    /// Triangular systems solved for `x` (see [`crate::TriangularSolve`]); operands `a`, `b`.
    TriangularSolve(crate::TriangularSolve),
    /// The lower Cholesky factor `l` of each Hermitian positive-definite matrix `a`
    /// (`[.., m, m]`), `a = l·lᴴ`, reading only `a`'s lower triangle
    /// (`lax.linalg.cholesky` without its symmetrization); zeros above the diagonal, and NaN
    /// everywhere for a matrix that is not positive definite (as JAX's).
    Cholesky,
    /// A part of the LU factorization with partial pivoting (see [`crate::LuPart`]).
    Lu(crate::LuPart),
    /// A factor of the QR factorization (see [`crate::Qr`]).
    Qr(crate::Qr),
    /// A part of the eigendecomposition of Hermitian matrices (see [`crate::EighPart`]).
    Eigh(crate::EighPart),
    /// A part of the singular value decomposition (see [`crate::Svd`]).
    Svd(crate::Svd),
    /// A part of the Householder QR factorization in LAPACK's compact form (see
    /// [`crate::GeqrfPart`]).
    Geqrf(crate::GeqrfPart),
    /// The first `n` columns of the product `H(0)···H(k−1)` of the Householder reflections
    /// `geqrf` packs (`lax.linalg.householder_product`); operands `a`, `[.., m, n]` with
    /// `m ≥ n`, whose columns below the diagonal hold the reflections' vectors, and `τ`,
    /// `[.., k]` with `k ≤ n`, of `a`'s type; the result has `a`'s type.
    HouseholderProduct,
    /// A part of the eigendecomposition of square matrices (see [`crate::EigPart`]).
    Eig(crate::EigPart),
    /// A part of dot-product attention (see [`crate::Attention`]).
    Attention(crate::Attention),
    /// A function with a user-defined reverse-mode derivative (`jax.custom_vjp`).
    CustomVjp(Box<CustomVjp>),
    /// A function differentiated by a forward-mode rule of the user's (see [`CustomJvp`]).
    CustomJvp(Box<CustomJvp>),
    /// `(token, x_1, .., x_n)`: runs the host function registered as `callback` (in
    /// `ferrax_runtime::callbacks`) on the operands `x_i` (`jax.debug.callback`); its value is a
    /// new `bool[]` token. The one op with an effect: tokens chain the callbacks of a program in
    /// the order they were traced, and `AddDependency` ties the last token to the results, so
    /// the passes that keep what the outputs need keep the callbacks (see docs/ir.md).
    DebugCallback {
        callback: u64,
    },
    /// `(x_1, .., x_n)`: the value the host function registered as `callback` returns for the
    /// operands' values (`jax.pure_callback`), of the instruction's type. Pure: runs may share
    /// or skip calls as they would any op's (see [`PureCallback`]).
    PureCallback(Box<PureCallback>),
    /// `(token, x_1, .., x_n)`: the value the host function registered as `callback` returns
    /// for the operands `x_i`, of the instruction's type, called where it stands among the
    /// program's effects (`jax.experimental.io_callback`): an effect, as `debug_callback` is,
    /// that gives a value; the next effects wait for it (see [`IoCallback`]).
    IoCallback(Box<IoCallback>),
    /// `(x, after)`: `x`, once `after` (of any type) is computed, with the effects behind it
    /// (XLA's `add_dependency`, whose `after` is a token). Never folded away: it is how a
    /// callback's effect reaches the outputs.
    AddDependency,
    /// A loop over carried values (see [`While`]).
    While(Box<While>),
    /// One of several branch functions, picked by an index (see [`Cond`]).
    Cond(Box<Cond>),
    /// A loop over slices of arrays, stacking per-step outputs (see [`Scan`]).
    Scan(Box<Scan>),
    /// A call whose reverse mode recomputes what its policy does not store (see [`Remat`]).
    Remat(Box<Remat>),
}

/// The three programs of a `custom_vjp` call. `primal` maps the operands to the one result;
/// `fwd` returns that result followed by residuals; `bwd` maps the residuals and the result's
/// cotangent to one cotangent per operand. Forward mode differentiates `primal`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CustomVjp {
    pub primal: Func,
    pub fwd: Func,
    pub bwd: Func,
}

/// A `pure_callback`: the host function's id, its result's type, and how `vmap` batches it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PureCallback {
    pub callback: u64,
    pub result: TensorType,
    /// Under `vmap`, one call on the whole batch (operands and result with a leading batch
    /// dimension; an unbatched operand of size 1 there), rather than one call per example.
    pub expand_dims: bool,
}

/// An `io_callback`: the host function's id, its result's type, and whether it was asked to
/// keep its order with other callbacks (JAX's `ordered`; ferrax keeps every callback's order,
/// and `vmap` refuses an ordered one, as JAX does).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct IoCallback {
    pub callback: u64,
    pub result: TensorType,
    pub ordered: bool,
}

/// The two programs of a `custom_jvp` call. `primal` maps the operands to the one result;
/// `jvp` maps the operands and one tangent per operand to the result and its tangent, and
/// must be linear in the tangents. Forward mode runs `jvp`; reverse mode transposes its
/// tangent part (JAX's `custom_jvp`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CustomJvp {
    pub primal: Func,
    pub jvp: Func,
}

impl Op {
    /// The op's name in the text format.
    pub fn name(&self) -> &'static str {
        match self {
            Op::Constant(_) => "constant",
            Op::Iota { .. } => "iota",
            Op::Unary(u) => u.name(),
            Op::Binary(b) => b.name(),
            Op::Compare(c) => c.name(),
            Op::Select => "select",
            Op::Clamp => "clamp",
            Op::Convert { .. } => "convert",
            Op::BitcastConvert { .. } => "bitcast_convert",
            Op::BroadcastInDim { .. } => "broadcast_in_dim",
            Op::Reshape { .. } => "reshape",
            Op::Transpose { .. } => "transpose",
            Op::Reverse { .. } => "reverse",
            Op::Reduce { op, .. } => op.name(),
            Op::DotGeneral(_) => "dot_general",
            Op::Slice { .. } => "slice",
            Op::Pad { .. } => "pad",
            Op::Concatenate { .. } => "concatenate",
            Op::Gather(_) => "gather",
            Op::Scatter(s) => s.combine.name(),
            Op::DynamicSlice { .. } => "dynamic_slice",
            Op::DynamicUpdateSlice => "dynamic_update_slice",
            Op::StopGradient => "stop_gradient",
            Op::Sort { .. } => "sort",
            Op::Argsort { .. } => "argsort",
            Op::Fft { kind, .. } => kind.name(),
            Op::TriangularSolve(_) => "triangular_solve",
            Op::Cholesky => "cholesky",
            Op::Lu(part) => part.name(),
            Op::Qr(qr) => qr.part.name(),
            Op::Eigh(part) => part.name(),
            Op::Svd(svd) => svd.part.name(),
            Op::Geqrf(part) => part.name(),
            Op::HouseholderProduct => "householder_product",
            Op::Eig(part) => part.name(),
            Op::Attention(a) => a.name(),
            Op::CustomVjp(_) => "custom_vjp",
            Op::CustomJvp(_) => "custom_jvp",
            Op::DebugCallback { .. } => "debug_callback",
            Op::AddDependency => "add_dependency",
            Op::PureCallback(_) => "pure_callback",
            Op::IoCallback(_) => "io_callback",
            Op::While(_) => "while",
            Op::Cond(_) => "cond",
            Op::Scan(_) => "scan",
            Op::Remat(r) => r.policy.op_name(),
        }
    }

    /// Ops that apply independently at each position of same-shaped operands.
    pub fn is_elementwise(&self) -> bool {
        matches!(
            self,
            Op::Unary(_)
                | Op::Binary(_)
                | Op::Compare(_)
                | Op::Select
                | Op::Clamp
                | Op::Convert { .. }
                | Op::BitcastConvert { .. }
                | Op::StopGradient
        )
    }

    /// Ops that only move or copy elements.
    pub fn is_movement(&self) -> bool {
        matches!(
            self,
            Op::BroadcastInDim { .. }
                | Op::Reshape { .. }
                | Op::Transpose { .. }
                | Op::Reverse { .. }
                | Op::Slice { .. }
                | Op::Pad { .. }
                | Op::Concatenate { .. }
        )
    }
}

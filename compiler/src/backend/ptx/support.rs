//! What the PTX renderer's kernels compute: the GPU's [`Target`] and support table. Fusion
//! puts into kernels what the table does not leave to the host, [`super::legalize()`] expands
//! what it marks [`Support::Expand`] and refuses any instruction it does not mark
//! [`Support::Native`] afterwards, and the renderer renders exactly those.

use super::columns::COLUMN_OPERAND;
use super::rows::ROW_LIMIT;
use super::MathMode;
use crate::target::{KernelOp, Support, Target};
use ferrax_ir::{BinaryOp, CompareOp, DType, ReduceOp, UnaryOp};

/// The GPU backend compiling with `mode`: row kernels over the rows [`ROW_LIMIT`] admits;
/// reductions over leading axes of operands of [`COLUMN_OPERAND`] elements or more folded by
/// the flat kernels that compute their operands ([`super::columns`]).
pub fn target(mode: MathMode) -> Target {
    Target {
        name: "gpu",
        table: match mode {
            MathMode::Accurate => support,
            MathMode::Fast => support_fast,
        },
        rows: ROW_LIMIT,
        columns: COLUMN_OPERAND,
    }
}

/// [`support`] under fast math: f32 exp, log, sin, cos and rsqrt are the hardware's
/// approximate instructions.
pub fn support_fast(op: KernelOp, dtype: DType) -> Support {
    let approximated = matches!(
        op,
        KernelOp::Unary(UnaryOp::Exp | UnaryOp::Log | UnaryOp::Sin | UnaryOp::Cos | UnaryOp::Rsqrt)
    );
    if approximated && dtype == DType::F32 {
        Support::Native
    } else {
        support(op, dtype)
    }
}

/// How PTX kernels compute `op` on `dtype` in accurate math. f16 and bf16 are computed in
/// f32, each operation rounded back (`kernel::halves`); transcendentals, powers and f32
/// remainders expand into primitives (`kernel::math`); integer division, remainders, abs and
/// sign follow the interpreter's edge cases (`x / 0 = -1`, `x % 0 = x`, wrapping `MIN / -1`,
/// `abs(MIN) = MIN`); u8 values are only converted. u32 values are 32-bit registers: their
/// wrapping arithmetic, bitwise logic, shifts (PTX clamps amounts above the width, lax's
/// rule), unsigned compares and bit casts are native; their division, powers and conversions
/// stay on the host.
pub fn support(op: KernelOp, dtype: DType) -> Support {
    use Support::{Expand, Host, Native};
    let half = matches!(dtype, DType::F16 | DType::BF16);
    let kept = |s: Support| if half { Expand } else { s };
    if host_only(dtype) {
        return Host;
    }
    if dtype == DType::U8 {
        return match op {
            KernelOp::Convert(to) => convert(dtype, to),
            KernelOp::Bitcast(_)
            | KernelOp::Hold
            | KernelOp::RowGather
            | KernelOp::Iota
            | KernelOp::Window
            | KernelOp::Select
            | KernelOp::Clamp
            | KernelOp::Unary(_)
            | KernelOp::Binary(_)
            | KernelOp::Compare(_)
            | KernelOp::RowReduce(_)
            | KernelOp::ColumnReduce(_) => Host,
        };
    }
    match op {
        KernelOp::Hold => Native,
        // A predicated store of whatever the kernel holds (`loops::store`).
        KernelOp::Window => Native,
        // Flat kernels compute an iota from the element index.
        KernelOp::Iota => match dtype {
            DType::I32 | DType::U32 => Native,
            DType::F32
            | DType::F64
            | DType::F16
            | DType::BF16
            | DType::I64
            | DType::U8
            | DType::I8
            | DType::I16
            | DType::U16
            | DType::U64
            | DType::Bool
            | DType::C64
            | DType::C128 => Host,
        },
        // Rows loaded by index: the index read per row, clamped, in 64-bit addresses.
        KernelOp::RowGather => match dtype {
            DType::F32 | DType::F64 | DType::F16 | DType::BF16 | DType::I32 | DType::I64 => Native,
            // (u8 and the 8-, 16- and 64-bit integers returned above.)
            DType::U32
            | DType::U8
            | DType::I8
            | DType::I16
            | DType::U16
            | DType::U64
            | DType::Bool
            | DType::C64
            | DType::C128 => Host,
        },
        KernelOp::Select => kept(Native),
        KernelOp::Clamp => match dtype {
            DType::Bool => Host,
            DType::U32 => Native,
            _ => kept(Native),
        },
        KernelOp::Unary(u) => unary(u, dtype).map_or(Host, kept),
        KernelOp::Binary(b) => binary(b, dtype).map_or(Host, kept),
        KernelOp::Compare(c) => compare(c, dtype),
        KernelOp::Convert(to) => convert(dtype, to),
        // Between 32-bit registers (halves are widened to f32 in kernels), or a move.
        KernelOp::Bitcast(to) => {
            let word = |d: DType| matches!(d, DType::F32 | DType::I32 | DType::U32);
            if (word(dtype) && word(to)) || dtype == to {
                Native
            } else {
                Host
            }
        }
        KernelOp::RowReduce(r) => match (r, dtype.is_float()) {
            (ReduceOp::Sum | ReduceOp::Max | ReduceOp::Min, true) => kept(Native),
            (ReduceOp::Sum | ReduceOp::Max | ReduceOp::Min, false) | (ReduceOp::Prod, _) => Host,
        },
        // Folded per thread in registers by a column kernel (`columns.rs`), its partials then
        // by a reduction launch.
        KernelOp::ColumnReduce(r) => match (r, dtype) {
            (ReduceOp::Sum | ReduceOp::Max | ReduceOp::Min, DType::F32 | DType::F64) => Native,
            (ReduceOp::Sum | ReduceOp::Max | ReduceOp::Min, _) | (ReduceOp::Prod, _) => Host,
        },
    }
}

fn unary(u: UnaryOp, dtype: DType) -> Option<Support> {
    let float = dtype.is_float();
    let int = matches!(dtype, DType::I32 | DType::I64);
    match u {
        UnaryOp::Not => {
            (dtype == DType::Bool || int || dtype == DType::U32).then_some(Support::Native)
        }
        UnaryOp::Neg | UnaryOp::Abs | UnaryOp::Sign => (float || int).then_some(Support::Native),
        UnaryOp::Floor | UnaryOp::Ceil | UnaryOp::Round | UnaryOp::RoundEven | UnaryOp::Sqrt => {
            float.then_some(Support::Native)
        }
        UnaryOp::Exp
        | UnaryOp::Expm1
        | UnaryOp::Log
        | UnaryOp::Log1p
        | UnaryOp::Rsqrt
        | UnaryOp::Tanh
        | UnaryOp::Logistic
        | UnaryOp::Sin
        | UnaryOp::Cos => float.then_some(Support::Expand),
        // The interpreter's (f64, rounded once), until kernels have expansions.
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
        | UnaryOp::Imag => None,
    }
}

fn binary(b: BinaryOp, dtype: DType) -> Option<Support> {
    let int = matches!(dtype, DType::I32 | DType::I64);
    match (b, dtype) {
        (BinaryOp::And | BinaryOp::Or | BinaryOp::Xor, _) => {
            (int || matches!(dtype, DType::Bool | DType::U32)).then_some(Support::Native)
        }
        (
            BinaryOp::ShiftLeft | BinaryOp::ShiftRightLogical | BinaryOp::ShiftRightArithmetic,
            DType::I32 | DType::I64 | DType::U32,
        ) => Some(Support::Native),
        (BinaryOp::ShiftLeft | BinaryOp::ShiftRightLogical | BinaryOp::ShiftRightArithmetic, _) => {
            None
        }
        (_, DType::Bool) => None,
        (BinaryOp::Div | BinaryOp::Rem | BinaryOp::Pow, DType::U32) => None,
        (BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Max | BinaryOp::Min, _) => {
            Some(Support::Native)
        }
        (BinaryOp::Div, _) => Some(Support::Native),
        // f64 remainders are a loop of their own (the significands' long division).
        (BinaryOp::Rem, DType::F32) => Some(Support::Expand),
        (BinaryOp::Rem, _) => Some(Support::Native),
        (BinaryOp::Pow, _) => Some(Support::Expand),
        // The interpreter's (f64 `atan2`, rounded once), until kernels have an expansion.
        (BinaryOp::Atan2, _) => None,
        // Complex results are the interpreter's.
        (BinaryOp::Complex, _) => None,
    }
}

/// Compares of bools are computed as logic (`kernel::compares_as_logic`).
fn compare(_: CompareOp, dtype: DType) -> Support {
    match dtype {
        DType::F32 | DType::F64 | DType::I32 | DType::I64 => Support::Native,
        DType::Bool | DType::F16 | DType::BF16 => Support::Expand,
        DType::U32 => Support::Native,
        DType::U8 | DType::I8 | DType::I16 | DType::U16 | DType::U64 | DType::C64 | DType::C128 => {
            Support::Host
        }
    }
}

/// The 8-, 16- and 64-bit integers other than u8 and i64, and complex numbers, which kernels
/// do not compute yet: every op on them, and every conversion to them, is a host step.
fn host_only(dtype: DType) -> bool {
    match dtype {
        DType::I8 | DType::I16 | DType::U16 | DType::U64 | DType::C64 | DType::C128 => true,
        DType::F32
        | DType::F64
        | DType::F16
        | DType::BF16
        | DType::I32
        | DType::I64
        | DType::U32
        | DType::U8
        | DType::Bool => false,
    }
}

/// Between any two types but bools (`cvt`, integers to and from halves rounded once); bools
/// to and from i32, f32 and f64 (`selp`, `setp`); u32 values and the 8-, 16- and 64-bit
/// integers (u8 aside) and complex numbers stay on the host.
fn convert(from: DType, to: DType) -> Support {
    let wide = |d: DType| matches!(d, DType::I32 | DType::F32 | DType::F64);
    if from == DType::U32 || to == DType::U32 || host_only(from) || host_only(to) {
        return Support::Host;
    }
    match (from == DType::Bool, to == DType::Bool) {
        (false, false) => Support::Native,
        (true, false) if wide(to) => Support::Native,
        (false, true) if wide(from) => Support::Native,
        // Bool to bool is a move (StableHLO programs have such identity conversions).
        (true, true) => Support::Native,
        (true, false) | (false, true) => Support::Host,
    }
}

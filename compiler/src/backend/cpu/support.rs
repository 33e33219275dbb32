//! What the CPU backend's kernels compute: its [`Target`] and support table. Fusion puts into
//! kernels exactly what the table does not leave to the host, and `clif` refuses a kernel the
//! table does not cover, so an op the code generator lacks is a host step, never a kernel that
//! fails to compile.

use crate::target::{KernelOp, RowLimit, Support, Target};
use ferrax_ir::{BinaryOp, CompareOp, DType, ReduceOp, UnaryOp};

/// The CPU backend: row kernels over rows of any length, column reductions of any size inside
/// flat kernels.
pub const TARGET: Target = Target {
    name: "cpu",
    table: support,
    rows: RowLimit::NONE,
    columns: 0,
};

/// How CPU kernels compute `op` on `dtype`. f16 and bf16 are computed in f32, each operation
/// rounded back (`kernel::halves`), and their conversions spelled out in integer arithmetic:
/// expansions. f32 transcendentals are polynomial expansions (`kernel::math`); f64 ones call
/// the interpreter's own functions (so f64 results are the interpreter's bits). i64, u8 and the
/// 8-, 16- and 64-bit integers stay on the host, as do the integer operations whose edge cases the interpreter
/// defines and Cranelift would trap on (`x / 0`, `MIN / -1`) or lacks (powers, abs, sign).
/// u32 values are i32 lanes: its unsigned compares, maxima, minima and clamps are expanded
/// into signed ones on biased values (`kernel::integers`), its shifts by constant amounts
/// into the kernel IR's constant shifts; bit casts between 32-bit types are moves.
pub fn support(op: KernelOp, dtype: DType) -> Support {
    use Support::{Expand, Host, Native};
    let half = matches!(dtype, DType::F16 | DType::BF16);
    let kept = |s: Support| if half { Expand } else { s };
    match dtype {
        DType::I64
        | DType::U8
        | DType::I8
        | DType::I16
        | DType::U16
        | DType::U64
        | DType::C64
        | DType::C128 => return Host,
        DType::F32
        | DType::F64
        | DType::F16
        | DType::BF16
        | DType::I32
        | DType::U32
        | DType::Bool => {}
    }
    match op {
        KernelOp::Hold | KernelOp::Select => Native,
        // Slices are the interpreter's (the GPU's kernels store windows).
        KernelOp::Window => Host,
        // Flat kernels compute an iota from the element index (i64 returned above).
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
        // Flat kernels load rows by index (the address from an index loaded per row).
        KernelOp::RowGather => match dtype {
            DType::F32 | DType::F64 | DType::F16 | DType::BF16 | DType::I32 => Native,
            // (i64, u8 and the 8-, 16- and 64-bit integers returned above.)
            DType::I64
            | DType::U32
            | DType::U8
            | DType::I8
            | DType::I16
            | DType::U16
            | DType::U64
            | DType::Bool
            | DType::C64
            | DType::C128 => Host,
        },
        KernelOp::Clamp => match dtype {
            DType::Bool => Host,
            DType::U32 => Expand,
            _ => kept(Native),
        },
        KernelOp::Unary(u) => unary(u, dtype).map_or(Host, kept),
        KernelOp::Binary(b) => binary(b, dtype).map_or(Host, kept),
        KernelOp::Compare(c) => compare(c, dtype),
        KernelOp::Convert(to) => convert(dtype, to),
        KernelOp::Bitcast(to) => bitcast(dtype, to),
        // Products stay with the interpreter, which accumulates them in f64 and so cannot
        // overflow early.
        KernelOp::RowReduce(r) => match (r, dtype.is_float()) {
            (ReduceOp::Sum | ReduceOp::Max | ReduceOp::Min, true) => kept(Native),
            (ReduceOp::Sum | ReduceOp::Max | ReduceOp::Min, false) | (ReduceOp::Prod, _) => Host,
        },
        KernelOp::ColumnReduce(r) => match (r, dtype) {
            (ReduceOp::Sum | ReduceOp::Max | ReduceOp::Min, DType::F32 | DType::F64) => Native,
            (ReduceOp::Sum | ReduceOp::Max | ReduceOp::Min, _) | (ReduceOp::Prod, _) => Host,
        },
    }
}

fn unary(u: UnaryOp, dtype: DType) -> Option<Support> {
    let float = dtype.is_float();
    let s = match u {
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
        | UnaryOp::Imag => return None,
        UnaryOp::Not => {
            return matches!(dtype, DType::Bool | DType::I32 | DType::U32)
                .then_some(Support::Native)
        }
        UnaryOp::Neg => {
            return (float || matches!(dtype, DType::I32 | DType::U32)).then_some(Support::Native)
        }
        UnaryOp::Abs
        | UnaryOp::Sign
        | UnaryOp::Floor
        | UnaryOp::Ceil
        | UnaryOp::Round
        | UnaryOp::RoundEven
        | UnaryOp::Sqrt => Support::Native,
        UnaryOp::Exp
        | UnaryOp::Expm1
        | UnaryOp::Log
        | UnaryOp::Log1p
        | UnaryOp::Rsqrt
        | UnaryOp::Tanh
        | UnaryOp::Logistic
        | UnaryOp::Sin
        | UnaryOp::Cos => match dtype {
            DType::F64 => Support::Native,
            _ => Support::Expand,
        },
    };
    float.then_some(s)
}

fn binary(b: BinaryOp, dtype: DType) -> Option<Support> {
    match (b, dtype) {
        (BinaryOp::And | BinaryOp::Or | BinaryOp::Xor, DType::Bool | DType::I32 | DType::U32) => {
            Some(Support::Native)
        }
        (BinaryOp::And | BinaryOp::Or | BinaryOp::Xor, _) => None,
        // Amounts of the width or more are selected to lax's results (`clif::isel`).
        (
            BinaryOp::ShiftLeft | BinaryOp::ShiftRightLogical | BinaryOp::ShiftRightArithmetic,
            DType::I32 | DType::U32,
        ) => Some(Support::Native),
        (BinaryOp::ShiftLeft | BinaryOp::ShiftRightLogical | BinaryOp::ShiftRightArithmetic, _) => {
            None
        }
        (_, DType::Bool) => None,
        (BinaryOp::Max | BinaryOp::Min, DType::U32) => Some(Support::Expand),
        (BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Max | BinaryOp::Min, _) => {
            Some(Support::Native)
        }
        (BinaryOp::Div | BinaryOp::Rem | BinaryOp::Pow, DType::I32 | DType::U32) => None,
        // Remainders call the host's `fmod`; f32 powers expand into f64 log and exp.
        (BinaryOp::Div | BinaryOp::Rem, _) => Some(Support::Native),
        (BinaryOp::Pow, DType::F64) => Some(Support::Native),
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
        DType::F32 | DType::F64 | DType::I32 => Support::Native,
        DType::Bool | DType::F16 | DType::BF16 | DType::U32 => Support::Expand,
        DType::I64
        | DType::U8
        | DType::I8
        | DType::I16
        | DType::U16
        | DType::U64
        | DType::C64
        | DType::C128 => Support::Host,
    }
}

/// Between the 32-bit types, whose kernel values are all 32-bit lanes (halves are widened to
/// f32 in kernels, so their bits are not at hand), and from any type to itself (a move).
fn bitcast(from: DType, to: DType) -> Support {
    let word = |d: DType| matches!(d, DType::F32 | DType::I32 | DType::U32);
    if (word(from) && word(to)) || from == to {
        Support::Native
    } else {
        Support::Host
    }
}

/// Between floats (halves spelled out in integer arithmetic), and between i32 and f32 or f64
/// (truncating and saturating, NaN to 0, as the interpreter's): i32 to a half type would
/// round twice, through f32.
fn convert(from: DType, to: DType) -> Support {
    let half = |d: DType| matches!(d, DType::F16 | DType::BF16);
    match (from, to) {
        (f, t) if f.is_float() && t.is_float() => {
            if half(f) || half(t) {
                Support::Expand
            } else {
                Support::Native
            }
        }
        (DType::I32, DType::I32 | DType::F32 | DType::F64)
        | (DType::F32 | DType::F64, DType::I32)
        | (DType::I32 | DType::U32, DType::I32 | DType::U32) => Support::Native,
        _ => Support::Host,
    }
}

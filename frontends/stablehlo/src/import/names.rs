//! StableHLO's names for the elementwise ops and compare directions, and the ferrax ops they
//! are.

use crate::lex::Tok;
use ferrax_ir::{BinaryOp, CompareOp, DType, UnaryOp};

pub(super) fn unary(name: &str) -> Option<UnaryOp> {
    Some(match name {
        "negate" => UnaryOp::Neg,
        "abs" => UnaryOp::Abs,
        "sign" => UnaryOp::Sign,
        "floor" => UnaryOp::Floor,
        "ceil" => UnaryOp::Ceil,
        "round_nearest_afz" => UnaryOp::Round,
        "round_nearest_even" => UnaryOp::RoundEven,
        "exponential" => UnaryOp::Exp,
        "exponential_minus_one" => UnaryOp::Expm1,
        "log" => UnaryOp::Log,
        "log_plus_one" => UnaryOp::Log1p,
        "sqrt" => UnaryOp::Sqrt,
        "rsqrt" => UnaryOp::Rsqrt,
        "tanh" => UnaryOp::Tanh,
        "logistic" => UnaryOp::Logistic,
        "sine" => UnaryOp::Sin,
        "cosine" => UnaryOp::Cos,
        "not" => UnaryOp::Not,
        "tan" | "chlo.tan" => UnaryOp::Tan,
        "cbrt" => UnaryOp::Cbrt,
        "chlo.lgamma" => UnaryOp::Lgamma,
        "chlo.digamma" => UnaryOp::Digamma,
        "chlo.erf" => UnaryOp::Erf,
        "chlo.erfc" => UnaryOp::Erfc,
        "chlo.erf_inv" => UnaryOp::ErfInv,
        "chlo.bessel_i0e" => UnaryOp::BesselI0e,
        "chlo.bessel_i1e" => UnaryOp::BesselI1e,
        "chlo.asin" => UnaryOp::Asin,
        "chlo.acos" => UnaryOp::Acos,
        "chlo.atan" => UnaryOp::Atan,
        "chlo.sinh" => UnaryOp::Sinh,
        "chlo.cosh" => UnaryOp::Cosh,
        "chlo.asinh" => UnaryOp::Asinh,
        "chlo.acosh" => UnaryOp::Acosh,
        "chlo.atanh" => UnaryOp::Atanh,
        "real" => UnaryOp::Real,
        "imag" => UnaryOp::Imag,
        _ => return None,
    })
}

/// The binary op for `name` on `dtype`: on booleans, arithmetic is logic (`add` is `or`).
pub(super) fn binary(name: &str, dtype: DType) -> Option<BinaryOp> {
    let op = match name {
        "add" => BinaryOp::Add,
        "subtract" => BinaryOp::Sub,
        "multiply" => BinaryOp::Mul,
        "divide" => BinaryOp::Div,
        "remainder" => BinaryOp::Rem,
        "power" => BinaryOp::Pow,
        "atan2" => BinaryOp::Atan2,
        "maximum" => BinaryOp::Max,
        "minimum" => BinaryOp::Min,
        "and" => BinaryOp::And,
        "or" => BinaryOp::Or,
        "xor" => BinaryOp::Xor,
        "shift_left" => BinaryOp::ShiftLeft,
        "shift_right_logical" => BinaryOp::ShiftRightLogical,
        "shift_right_arithmetic" => BinaryOp::ShiftRightArithmetic,
        "complex" => BinaryOp::Complex,
        _ => return None,
    };
    if dtype != DType::Bool {
        return Some(op);
    }
    Some(match op {
        BinaryOp::Add | BinaryOp::Max => BinaryOp::Or,
        BinaryOp::Mul | BinaryOp::Min => BinaryOp::And,
        BinaryOp::Sub => BinaryOp::Xor,
        other => other,
    })
}

/// The first compare direction (`EQ`, `LT`, ...) among `words`.
pub(super) fn direction(words: &[Tok]) -> Option<CompareOp> {
    words.iter().find_map(|t| match t {
        Tok::Word(w) => Some(match w.as_str() {
            "EQ" => CompareOp::Eq,
            "NE" => CompareOp::Ne,
            "LT" => CompareOp::Lt,
            "LE" => CompareOp::Le,
            "GT" => CompareOp::Gt,
            "GE" => CompareOp::Ge,
            _ => return None,
        }),
        _ => None,
    })
}

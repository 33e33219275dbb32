use crate::{DType, TensorType};

/// Why an op cannot be applied to its operands. Messages name the op and the offending
/// types so that a frontend can show them to the user unchanged.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TypeError {
    #[error("{op} expects {expected} operand(s), got {got}")]
    Arity {
        op: &'static str,
        expected: String,
        got: usize,
    },
    #[error("{op}: operand types {lhs} and {rhs} do not match")]
    Mismatch {
        op: &'static str,
        lhs: TensorType,
        rhs: TensorType,
    },
    #[error("{op} is not defined for {dtype} (expects {expected})")]
    DType {
        op: &'static str,
        dtype: DType,
        expected: &'static str,
    },
    #[error("{op}: axis {axis} is out of range for an operand of type {ty}")]
    Axis {
        op: &'static str,
        axis: i64,
        ty: TensorType,
    },
    #[error("{op}: rank {rank} exceeds the maximum rank {max}")]
    Rank {
        op: &'static str,
        rank: usize,
        max: usize,
    },
    #[error("{op}: a result of type {ty} would take more than {max} bytes", max = crate::MAX_BYTES)]
    Size { op: &'static str, ty: TensorType },
    #[error("{op}: {message}")]
    Invalid { op: &'static str, message: String },
}

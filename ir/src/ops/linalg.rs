//! `triangular_solve` (a square matrix `a`, or a batch of them, and right-hand sides `b` of
//! one type) and `cholesky` (square matrices).

use super::{arity, invalid};
use crate::{TensorType, TriangularSolve, TypeError};

pub(super) fn triangular_solve(
    s: &TriangularSolve,
    args: &[&TensorType],
) -> Result<TensorType, TypeError> {
    let op = "triangular_solve";
    let [a, b] = arity::<2>(op, args)?;
    if a.dtype != b.dtype {
        return Err(TypeError::Mismatch {
            op,
            lhs: a.clone(),
            rhs: b.clone(),
        });
    }
    let m = square(op, a)?;
    let rank = a.rank();
    let side = if s.left_side { rank - 2 } else { rank - 1 };
    if b.rank() != rank || b.dims()[..rank - 2] != a.dims()[..rank - 2] || b.dims()[side] != m {
        let (name, shape) = match s.left_side {
            true => ("left", "[.., m, n]"),
            false => ("right", "[.., n, m]"),
        };
        return Err(invalid(
            op,
            format!("b {b} does not fit a {a}: on the {name} side b is {shape} with a's batch dimensions"),
        ));
    }
    Ok(b.clone())
}

pub(super) fn cholesky(args: &[&TensorType]) -> Result<TensorType, TypeError> {
    let [a] = arity::<1>("cholesky", args)?;
    square("cholesky", a)?;
    Ok(a.clone())
}

/// The size `m` of `a`, a float or complex `[.., m, m]`.
fn square(op: &'static str, a: &TensorType) -> Result<usize, TypeError> {
    if !a.dtype.is_float() && !a.dtype.is_complex() {
        return Err(TypeError::DType {
            op,
            dtype: a.dtype,
            expected: "a floating-point or complex type",
        });
    }
    let rank = a.rank();
    if rank < 2 || a.dims()[rank - 1] != a.dims()[rank - 2] {
        return Err(invalid(
            op,
            format!("a must be a square matrix or a batch of them, not {a}"),
        ));
    }
    Ok(a.dims()[rank - 1])
}

//! `triangular_solve` (a square matrix `a`, or a batch of them, and right-hand sides `b` of
//! one type), `cholesky` and the parts of `eigh` and `eig` (square matrices), the parts of
//! `lu`, `qr`, `svd` and `geqrf` (any matrices) and `householder_product`.

use super::{arity, invalid};
use crate::{
    DType, EigPart, EighPart, GeqrfPart, LuPart, Qr, Shape, Svd, SvdPart, TensorType,
    TriangularSolve, TypeError,
};

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

/// The packed factors keep `a`'s type; pivots (`[.., min(m, n)]`) and the permutation
/// (`[.., m]`) are `i32` row numbers, so `m` must fit one.
pub(super) fn lu(part: LuPart, args: &[&TensorType]) -> Result<TensorType, TypeError> {
    let op = part.name();
    let [a] = arity::<1>(op, args)?;
    matrix(op, a)?;
    let dims = a.dims();
    let (batch, m, n) = (
        &dims[..dims.len() - 2],
        dims[dims.len() - 2],
        dims[dims.len() - 1],
    );
    if i32::try_from(m).is_err() {
        return Err(invalid(
            op,
            format!("a {a} has {m} rows, more than i32 row numbers can count"),
        ));
    }
    let rows = match part {
        LuPart::Factors => return Ok(a.clone()),
        LuPart::Pivots => m.min(n),
        LuPart::Permutation => m,
    };
    let mut shape = batch.to_vec();
    shape.push(rows);
    Ok(TensorType::new(DType::I32, Shape::new(shape)))
}

/// `q` or `r` of `a`'s type, of the sizes [`Qr::dims`] gives.
pub(super) fn qr(qr: &Qr, args: &[&TensorType]) -> Result<TensorType, TypeError> {
    let [a] = arity::<1>(qr.part.name(), args)?;
    matrix(qr.part.name(), a)?;
    let dims = a.dims();
    let rank = dims.len();
    let (rows, cols) = qr.dims(dims[rank - 2], dims[rank - 1]);
    let mut shape = dims[..rank - 2].to_vec();
    shape.extend([rows, cols]);
    Ok(TensorType::new(a.dtype, Shape::new(shape)))
}

/// `eigh`'s eigenvalues (`[.., m]` of the real type) or eigenvectors (`a`'s type) of square
/// `a`.
pub(super) fn eigh(part: EighPart, args: &[&TensorType]) -> Result<TensorType, TypeError> {
    let [a] = arity::<1>(part.name(), args)?;
    square(part.name(), a)?;
    match part {
        EighPart::Vectors => Ok(a.clone()),
        EighPart::Values => {
            let dims = a.dims();
            let dtype = a.dtype.complex_part().unwrap_or(a.dtype);
            Ok(TensorType::new(
                dtype,
                Shape::new(dims[..dims.len() - 1].to_vec()),
            ))
        }
    }
}

/// `svd`'s singular values (of the real type) or singular vectors (`a`'s type), of the sizes
/// [`Svd::dims`] gives; the values take no `full_matrices`.
pub(super) fn svd(svd: &Svd, args: &[&TensorType]) -> Result<TensorType, TypeError> {
    let op = svd.part.name();
    let [a] = arity::<1>(op, args)?;
    matrix(op, a)?;
    let dims = a.dims();
    let rank = dims.len();
    let dtype = match svd.part {
        SvdPart::Values if svd.full_matrices => {
            return Err(invalid(op, "the singular values take no full_matrices"))
        }
        SvdPart::Values => a.dtype.complex_part().unwrap_or(a.dtype),
        SvdPart::U | SvdPart::Vh => a.dtype,
    };
    let mut shape = dims[..rank - 2].to_vec();
    shape.extend(svd.dims(dims[rank - 2], dims[rank - 1]));
    Ok(TensorType::new(dtype, Shape::new(shape)))
}

/// `geqrf`'s packed factors (`a`'s type) or `τ` (`[.., min(m, n)]`, `a`'s dtype).
pub(super) fn geqrf(part: GeqrfPart, args: &[&TensorType]) -> Result<TensorType, TypeError> {
    let [a] = arity::<1>(part.name(), args)?;
    matrix(part.name(), a)?;
    match part {
        GeqrfPart::Packed => Ok(a.clone()),
        GeqrfPart::Taus => {
            let dims = a.dims();
            let rank = dims.len();
            let mut shape = dims[..rank - 2].to_vec();
            shape.push(dims[rank - 2].min(dims[rank - 1]));
            Ok(TensorType::new(a.dtype, Shape::new(shape)))
        }
    }
}

/// `a`, `[.., m, n]` with `m ≥ n`, and `τ`, `[.., k]` with `k ≤ n`, of one type: `a`'s type.
pub(super) fn householder_product(args: &[&TensorType]) -> Result<TensorType, TypeError> {
    let op = "householder_product";
    let [a, taus] = arity::<2>(op, args)?;
    matrix(op, a)?;
    if a.dtype != taus.dtype {
        return Err(TypeError::Mismatch {
            op,
            lhs: a.clone(),
            rhs: taus.clone(),
        });
    }
    let dims = a.dims();
    let rank = dims.len();
    let (m, n) = (dims[rank - 2], dims[rank - 1]);
    if m < n {
        return Err(invalid(
            op,
            format!("a {a} has fewer rows than columns (m ≥ n is required)"),
        ));
    }
    if taus.rank() != rank - 1
        || taus.dims()[..rank - 2] != dims[..rank - 2]
        || taus.dims()[rank - 2] > n
    {
        return Err(invalid(
            op,
            format!("taus {taus} does not fit a {a}: taus is [.., k] with a's batch dimensions and k ≤ n"),
        ));
    }
    Ok(a.clone())
}

/// `eig`'s eigenvalues (`[.., m]`) or eigenvectors (`[.., m, m]`) of square `a` of f32, f64,
/// c64 or c128, all complex of `a`'s precision.
pub(super) fn eig(part: EigPart, args: &[&TensorType]) -> Result<TensorType, TypeError> {
    let op = part.name();
    let [a] = arity::<1>(op, args)?;
    let dtype = match a.dtype {
        DType::C64 | DType::C128 => a.dtype,
        other => other.complex_of().ok_or(TypeError::DType {
            op,
            dtype: a.dtype,
            expected: "f32, f64, c64 or c128",
        })?,
    };
    square(op, a)?;
    let dims = a.dims();
    let shape = match part {
        EigPart::Values => dims[..dims.len() - 1].to_vec(),
        EigPart::Left | EigPart::Right => dims.to_vec(),
    };
    Ok(TensorType::new(dtype, Shape::new(shape)))
}

/// The size `m` of `a`, a float or complex `[.., m, m]`.
fn square(op: &'static str, a: &TensorType) -> Result<usize, TypeError> {
    numeric(op, a)?;
    let rank = a.rank();
    if rank < 2 || a.dims()[rank - 1] != a.dims()[rank - 2] {
        return Err(invalid(
            op,
            format!("a must be a square matrix or a batch of them, not {a}"),
        ));
    }
    Ok(a.dims()[rank - 1])
}

/// Checks that `a` is a float or complex matrix, or a batch of them.
fn matrix(op: &'static str, a: &TensorType) -> Result<(), TypeError> {
    numeric(op, a)?;
    if a.rank() < 2 {
        return Err(invalid(
            op,
            format!("a must be a matrix or a batch of them, not {a}"),
        ));
    }
    Ok(())
}

/// Checks that `a` holds floats or complex numbers.
fn numeric(op: &'static str, a: &TensorType) -> Result<(), TypeError> {
    match a.dtype.is_float() || a.dtype.is_complex() {
        true => Ok(()),
        false => Err(TypeError::DType {
            op,
            dtype: a.dtype,
            expected: "a floating-point or complex type",
        }),
    }
}

//! Elementwise ops: operands share one shape (scalars allowed where StableHLO allows them).

use super::arity;
use crate::{BinaryOp, CompareOp, DType, TensorType, TypeError, UnaryOp};

fn same_type(op: &'static str, a: &TensorType, b: &TensorType) -> Result<(), TypeError> {
    if a != b {
        return Err(TypeError::Mismatch {
            op,
            lhs: a.clone(),
            rhs: b.clone(),
        });
    }
    Ok(())
}

fn require(
    op: &'static str,
    dtype: DType,
    ok: bool,
    expected: &'static str,
) -> Result<(), TypeError> {
    if ok {
        Ok(())
    } else {
        Err(TypeError::DType {
            op,
            dtype,
            expected,
        })
    }
}

pub(super) fn unary(u: UnaryOp, args: &[&TensorType]) -> Result<TensorType, TypeError> {
    let [x] = arity::<1>(u.name(), args)?;
    let d = x.dtype;
    match u {
        UnaryOp::Not => require(u.name(), d, d.is_int() || d.is_bool(), "an integer or bool")?,
        // A complex number's absolute value, real and imaginary parts are of its parts' type.
        UnaryOp::Abs => {
            if let Some(part) = d.complex_part() {
                return Ok(x.with_dtype(part));
            }
            require(
                u.name(),
                d,
                d.is_float() || d.is_signed_int(),
                "a float, complex or signed integer",
            )?
        }
        UnaryOp::Real | UnaryOp::Imag => {
            let part = d.complex_part();
            require(u.name(), d, part.is_some(), "a complex type")?;
            return Ok(x.with_dtype(part.unwrap_or(d)));
        }
        UnaryOp::Neg | UnaryOp::Sign => require(
            u.name(),
            d,
            d.is_numeric() || d.is_complex(),
            "a numeric type",
        )?,
        UnaryOp::Exp
        | UnaryOp::Expm1
        | UnaryOp::Log
        | UnaryOp::Log1p
        | UnaryOp::Sqrt
        | UnaryOp::Rsqrt
        | UnaryOp::Tanh
        | UnaryOp::Logistic
        | UnaryOp::Sin
        | UnaryOp::Cos
        | UnaryOp::Tan
        | UnaryOp::Asin
        | UnaryOp::Acos
        | UnaryOp::Atan
        | UnaryOp::Sinh
        | UnaryOp::Cosh
        | UnaryOp::Asinh
        | UnaryOp::Acosh
        | UnaryOp::Atanh => require(
            u.name(),
            d,
            d.is_float() || d.is_complex(),
            "a floating-point or complex type",
        )?,
        UnaryOp::Floor
        | UnaryOp::Ceil
        | UnaryOp::Round
        | UnaryOp::RoundEven
        | UnaryOp::Cbrt
        | UnaryOp::Lgamma
        | UnaryOp::Digamma
        | UnaryOp::Erf
        | UnaryOp::Erfc
        | UnaryOp::ErfInv
        | UnaryOp::BesselI0e
        | UnaryOp::BesselI1e => require(u.name(), d, d.is_float(), "a floating-point type")?,
    }
    Ok(x.clone())
}

pub(super) fn binary(b: BinaryOp, args: &[&TensorType]) -> Result<TensorType, TypeError> {
    let [x, y] = arity::<2>(b.name(), args)?;
    same_type(b.name(), x, y)?;
    let d = x.dtype;
    if b == BinaryOp::Complex {
        require(b.name(), d, d.complex_of().is_some(), "f32 or f64")?;
        return Ok(x.with_dtype(d.complex_of().unwrap_or(d)));
    }
    if matches!(
        b,
        BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div | BinaryOp::Pow
    ) && d.is_complex()
    {
        return Ok(x.clone());
    }
    if b.is_shift() {
        require(b.name(), d, d.is_int(), "an integer type")?;
    } else if b == BinaryOp::Atan2 {
        require(b.name(), d, d.is_float(), "a float type")?;
    } else if b.is_logical() {
        require(b.name(), d, d.is_int() || d.is_bool(), "an integer or bool")?;
    } else {
        require(b.name(), d, d.is_numeric(), "a numeric type")?;
    }
    Ok(x.clone())
}

pub(super) fn compare(c: CompareOp, args: &[&TensorType]) -> Result<TensorType, TypeError> {
    let [x, y] = arity::<2>(c.name(), args)?;
    same_type(c.name(), x, y)?;
    if x.dtype.is_complex() && !matches!(c, CompareOp::Eq | CompareOp::Ne) {
        return Err(TypeError::DType {
            op: c.name(),
            dtype: x.dtype,
            expected: "an ordered type (complex numbers compare eq and ne only)",
        });
    }
    Ok(x.with_dtype(DType::Bool))
}

pub(super) fn select(args: &[&TensorType]) -> Result<TensorType, TypeError> {
    let [p, t, f] = arity::<3>("select", args)?;
    same_type("select", t, f)?;
    require("select", p.dtype, p.dtype.is_bool(), "a bool predicate")?;
    if p.rank() != 0 && p.shape != t.shape {
        return Err(TypeError::Mismatch {
            op: "select",
            lhs: p.clone(),
            rhs: t.clone(),
        });
    }
    Ok(t.clone())
}

pub(super) fn clamp(args: &[&TensorType]) -> Result<TensorType, TypeError> {
    let [lo, x, hi] = arity::<3>("clamp", args)?;
    require("clamp", x.dtype, x.dtype.is_numeric(), "a numeric type")?;
    for bound in [lo, hi] {
        if bound.dtype != x.dtype || (bound.rank() != 0 && bound.shape != x.shape) {
            return Err(TypeError::Mismatch {
                op: "clamp",
                lhs: bound.clone(),
                rhs: x.clone(),
            });
        }
    }
    Ok(x.clone())
}

pub(super) fn convert(to: DType, args: &[&TensorType]) -> Result<TensorType, TypeError> {
    let [x] = arity::<1>("convert", args)?;
    Ok(x.with_dtype(to))
}

pub(super) fn bitcast_convert(to: DType, args: &[&TensorType]) -> Result<TensorType, TypeError> {
    let [x] = arity::<1>("bitcast_convert", args)?;
    let from = x.dtype;
    if from == to {
        return Ok(x.clone());
    }
    if from.is_bool() || to.is_bool() {
        return Err(TypeError::Invalid {
            op: "bitcast_convert",
            message: format!("{from} to {to}: bools have no bit layout to reinterpret"),
        });
    }
    if from.size_bytes() != to.size_bytes() {
        return Err(TypeError::Invalid {
            op: "bitcast_convert",
            message: format!(
                "{from} ({} bits) to {to} ({} bits): the widths differ",
                8 * from.size_bytes(),
                8 * to.size_bytes()
            ),
        });
    }
    Ok(x.with_dtype(to))
}

pub(super) fn identity(op: &'static str, args: &[&TensorType]) -> Result<TensorType, TypeError> {
    let [x] = arity::<1>(op, args)?;
    Ok(x.clone())
}

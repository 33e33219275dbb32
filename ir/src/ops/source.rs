//! Ops without operands: `constant` and `iota`.

use super::{arity, axis_number, invalid, numel};
use crate::{DType, Literal, Shape, TensorType, TypeError};

pub(super) fn constant(lit: &Literal, args: &[&TensorType]) -> Result<TensorType, TypeError> {
    arity::<0>("constant", args)?;
    if lit.data.dtype() != lit.ty.dtype {
        return Err(invalid(
            "constant",
            format!("{} data for a {} constant", lit.data.dtype(), lit.ty),
        ));
    }
    let n = lit.data.len();
    if n != 1 && n != numel("constant", &lit.ty)? {
        return Err(invalid(
            "constant",
            format!("{n} values for a constant of type {}", lit.ty),
        ));
    }
    Ok(lit.ty.clone())
}

pub(super) fn iota(
    dtype: DType,
    shape: &Shape,
    dim: usize,
    args: &[&TensorType],
) -> Result<TensorType, TypeError> {
    arity::<0>("iota", args)?;
    let ty = TensorType::new(dtype, shape.clone());
    if !dtype.is_numeric() {
        return Err(TypeError::DType {
            op: "iota",
            dtype,
            expected: "a numeric type",
        });
    }
    if dim >= shape.rank() {
        return Err(TypeError::Axis {
            op: "iota",
            axis: axis_number(dim),
            ty,
        });
    }
    Ok(ty)
}

//! Sorting along one dimension: `sort` keeps the operand's type, `argsort` gives `i32`
//! positions along the sorted dimension, so its size must fit an `i32`.

use super::{arity, axis_number, invalid};
use crate::{DType, TensorType, TypeError};

pub(super) fn sort(
    op: &'static str,
    dimension: usize,
    args: &[&TensorType],
) -> Result<TensorType, TypeError> {
    let [x] = arity::<1>(op, args)?;
    check_dimension(op, dimension, x)?;
    Ok(x.clone())
}

pub(super) fn argsort(
    op: &'static str,
    dimension: usize,
    args: &[&TensorType],
) -> Result<TensorType, TypeError> {
    let [x] = arity::<1>(op, args)?;
    check_dimension(op, dimension, x)?;
    let size = x.dims()[dimension];
    if i32::try_from(size).is_err() {
        return Err(invalid(
            op,
            format!("dimension {dimension} has {size} elements, more than i32 positions can index"),
        ));
    }
    Ok(TensorType::new(DType::I32, x.shape.clone()))
}

fn check_dimension(op: &'static str, dimension: usize, x: &TensorType) -> Result<(), TypeError> {
    if dimension >= x.rank() {
        return Err(TypeError::Axis {
            op,
            axis: axis_number(dimension),
            ty: x.clone(),
        });
    }
    Ok(())
}

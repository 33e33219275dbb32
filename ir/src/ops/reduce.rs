//! Reductions over a set of axes.

use super::{arity, check_axes, invalid};
use crate::{ReduceOp, TensorType, TypeError};

pub(super) fn reduce(
    r: ReduceOp,
    axes: &[usize],
    args: &[&TensorType],
) -> Result<TensorType, TypeError> {
    let [x] = arity::<1>(r.name(), args)?;
    check_axes(r.name(), axes, x)?;
    if axes.windows(2).any(|w| w[0] >= w[1]) {
        return Err(invalid(r.name(), format!("axes {axes:?} must be sorted")));
    }
    let d = x.dtype;
    let ok = match r {
        ReduceOp::Sum | ReduceOp::Prod => d.is_numeric() || d.is_complex(),
        ReduceOp::Max | ReduceOp::Min => !d.is_complex(),
    };
    if !ok {
        return Err(TypeError::DType {
            op: r.name(),
            dtype: d,
            expected: "a numeric type",
        });
    }
    let dims: Vec<usize> = (0..x.rank())
        .filter(|i| !axes.contains(i))
        .map(|i| x.dims()[i])
        .collect();
    Ok(x.with_shape(dims))
}

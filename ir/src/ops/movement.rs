//! Data movement: broadcast_in_dim, reshape, transpose, slice, pad, concatenate. Sizes are
//! computed with checked (or 128-bit) arithmetic: attributes come from text and may be
//! anything up to `i64::MAX`.

use super::{arity, axis_number, check_axes, invalid, numel};
use crate::{Shape, TensorType, TypeError};

pub(super) fn broadcast_in_dim(
    shape: &Shape,
    dims: &[usize],
    args: &[&TensorType],
) -> Result<TensorType, TypeError> {
    const OP: &str = "broadcast_in_dim";
    let [x] = arity::<1>(OP, args)?;
    let out = x.with_shape(shape.clone());
    if dims.len() != x.rank() {
        return Err(invalid(
            OP,
            format!("dims {dims:?} must name one result dimension per operand dimension of {x}"),
        ));
    }
    check_axes(OP, dims, &out)?;
    for (i, &d) in dims.iter().enumerate() {
        let (from, to) = (x.dims()[i], shape.dims()[d]);
        if from != 1 && from != to {
            return Err(invalid(
                OP,
                format!("cannot broadcast {x} to {out}: dimension {i} has size {from}, result dimension {d} has size {to}"),
            ));
        }
    }
    Ok(out)
}

pub(super) fn reshape(shape: &Shape, args: &[&TensorType]) -> Result<TensorType, TypeError> {
    const OP: &str = "reshape";
    let [x] = arity::<1>(OP, args)?;
    let out = x.with_shape(shape.clone());
    let (from, to) = (numel(OP, x)?, numel(OP, &out)?);
    if from != to {
        return Err(invalid(
            OP,
            format!("cannot reshape {x} ({from} elements) to {out} ({to} elements)"),
        ));
    }
    Ok(out)
}

pub(super) fn transpose(perm: &[usize], args: &[&TensorType]) -> Result<TensorType, TypeError> {
    let [x] = arity::<1>("transpose", args)?;
    if perm.len() != x.rank() {
        return Err(invalid(
            "transpose",
            format!("permutation {perm:?} does not match the rank of {x}"),
        ));
    }
    check_axes("transpose", perm, x)?;
    Ok(x.with_shape(perm.iter().map(|&p| x.dims()[p]).collect::<Vec<_>>()))
}

pub(super) fn reverse(axes: &[usize], args: &[&TensorType]) -> Result<TensorType, TypeError> {
    let [x] = arity::<1>("reverse", args)?;
    check_axes("reverse", axes, x)?;
    Ok(x.clone())
}

pub(super) fn slice(
    start: &[usize],
    limit: &[usize],
    strides: &[usize],
    args: &[&TensorType],
) -> Result<TensorType, TypeError> {
    let [x] = arity::<1>("slice", args)?;
    let r = x.rank();
    if start.len() != r || limit.len() != r || strides.len() != r {
        return Err(invalid(
            "slice",
            format!("start {start:?}, limit {limit:?} and strides {strides:?} must each have one entry per dimension of {x}"),
        ));
    }
    let mut dims = Vec::with_capacity(r);
    for i in 0..r {
        let (s, l, st, d) = (start[i], limit[i], strides[i], x.dims()[i]);
        if s > l || l > d || st == 0 {
            return Err(invalid(
                "slice",
                format!("dimension {i} of {x}: need start <= limit <= {d} and stride >= 1, got start {s}, limit {l}, stride {st}"),
            ));
        }
        dims.push((l - s).div_ceil(st));
    }
    Ok(x.with_shape(dims))
}

pub(super) fn pad(
    low: &[i64],
    high: &[i64],
    interior: &[usize],
    args: &[&TensorType],
) -> Result<TensorType, TypeError> {
    let [x, v] = arity::<2>("pad", args)?;
    let r = x.rank();
    if v.rank() != 0 || v.dtype != x.dtype {
        return Err(invalid(
            "pad",
            format!("the padding value must be a {} scalar, got {v}", x.dtype),
        ));
    }
    if low.len() != r || high.len() != r || interior.len() != r {
        return Err(invalid(
            "pad",
            format!("low {low:?}, high {high:?} and interior {interior:?} must each have one entry per dimension of {x}"),
        ));
    }
    let mut dims = Vec::with_capacity(r);
    for i in 0..r {
        let size = match pad_size(x.dims()[i], low[i], high[i], interior[i]) {
            Some(n) if n < 0 => {
                return Err(invalid(
                    "pad",
                    format!("dimension {i} of {x} would have negative size {n}"),
                ))
            }
            n => n.and_then(|n| usize::try_from(n).ok()).ok_or_else(|| {
                invalid(
                    "pad",
                    format!(
                        "dimension {i} of {x} with low {}, high {} and interior {} overflows",
                        low[i], high[i], interior[i]
                    ),
                )
            })?,
        };
        dims.push(size);
    }
    Ok(x.with_shape(dims))
}

/// `low + high + d + (d - 1) * interior`, unless 128 bits overflow (they cannot for 64-bit
/// sizes, but the sum is checked rather than assumed).
fn pad_size(d: usize, low: i64, high: i64, interior: usize) -> Option<i128> {
    let d = i128::try_from(d).ok()?;
    (d - 1)
        .max(0)
        .checked_mul(i128::try_from(interior).ok()?)?
        .checked_add(d)?
        .checked_add(i128::from(low))?
        .checked_add(i128::from(high))
}

pub(super) fn concatenate(axis: usize, args: &[&TensorType]) -> Result<TensorType, TypeError> {
    const OP: &str = "concatenate";
    let Some(first) = args.first() else {
        return Err(TypeError::Arity {
            op: OP,
            expected: "at least 1".into(),
            got: 0,
        });
    };
    if axis >= first.rank() {
        return Err(TypeError::Axis {
            op: OP,
            axis: axis_number(axis),
            ty: (*first).clone(),
        });
    }
    let mut dims = first.dims().to_vec();
    for other in &args[1..] {
        let compatible = other.dtype == first.dtype
            && other.rank() == first.rank()
            && (0..first.rank()).all(|i| i == axis || other.dims()[i] == first.dims()[i]);
        if !compatible {
            return Err(TypeError::Mismatch {
                op: OP,
                lhs: (*first).clone(),
                rhs: (*other).clone(),
            });
        }
        dims[axis] = dims[axis]
            .checked_add(other.dims()[axis])
            .ok_or_else(|| invalid(OP, format!("the sizes along axis {axis} overflow")))?;
    }
    Ok(first.with_shape(dims))
}

//! `dot_general`: batched tensor contraction.

use super::{arity, check_axes, invalid};
use crate::{DotDims, TensorType, TypeError};

const OP: &str = "dot_general";

pub(super) fn dot_general(dims: &DotDims, args: &[&TensorType]) -> Result<TensorType, TypeError> {
    let [a, b] = arity::<2>(OP, args)?;
    if a.dtype != b.dtype {
        return Err(TypeError::Mismatch {
            op: OP,
            lhs: a.clone(),
            rhs: b.clone(),
        });
    }
    if !a.dtype.is_numeric() && !a.dtype.is_complex() {
        return Err(TypeError::DType {
            op: OP,
            dtype: a.dtype,
            expected: "a numeric type",
        });
    }
    if dims.lhs_batch.len() != dims.rhs_batch.len()
        || dims.lhs_contract.len() != dims.rhs_contract.len()
    {
        return Err(invalid(
            OP,
            format!(
                "batch {:?}x{:?} and contracting {:?}x{:?} dimensions must pair up",
                dims.lhs_batch, dims.rhs_batch, dims.lhs_contract, dims.rhs_contract
            ),
        ));
    }
    let lhs_used: Vec<usize> = dims
        .lhs_batch
        .iter()
        .chain(&dims.lhs_contract)
        .copied()
        .collect();
    let rhs_used: Vec<usize> = dims
        .rhs_batch
        .iter()
        .chain(&dims.rhs_contract)
        .copied()
        .collect();
    check_axes(OP, &lhs_used, a)?;
    check_axes(OP, &rhs_used, b)?;
    let pairs = dims
        .lhs_batch
        .iter()
        .zip(&dims.rhs_batch)
        .chain(dims.lhs_contract.iter().zip(&dims.rhs_contract));
    for (&l, &r) in pairs {
        if a.dims()[l] != b.dims()[r] {
            return Err(invalid(
                OP,
                format!(
                    "dimension {l} of {a} and dimension {r} of {b} are paired but differ in size"
                ),
            ));
        }
    }
    let mut out: Vec<usize> = dims.lhs_batch.iter().map(|&d| a.dims()[d]).collect();
    out.extend(
        (0..a.rank())
            .filter(|d| !lhs_used.contains(d))
            .map(|d| a.dims()[d]),
    );
    out.extend(
        (0..b.rank())
            .filter(|d| !rhs_used.contains(d))
            .map(|d| b.dims()[d]),
    );
    Ok(a.with_shape(out))
}

//! Bit casts between widths (`lax.bitcast_convert_type`, StableHLO's `bitcast_convert`): a
//! wider element becomes a trailing dimension of narrower ones, least significant first (the
//! order of a little-endian memory image), and a trailing dimension of narrower ones becomes
//! one wider element. The IR's `bitcast_convert` keeps shapes, so these are spelled in its
//! ops: a same-width cast to the unsigned type of each width, integer conversions, shifts by
//! each part's bit offset, and a sum of the disjoint parts (their `or`); every backend computes
//! them and their derivative is zero.

use crate::lower::{finish, Builder, LowerError, OpSink, Typed};
use crate::{DType, Elements, Literal, Op, ReduceOp, Scalar, TensorType};

/// The unsigned integer type of `bytes` bytes.
fn unsigned(bytes: usize) -> Option<DType> {
    match bytes {
        1 => Some(DType::U8),
        2 => Some(DType::U16),
        4 => Some(DType::U32),
        8 => Some(DType::U64),
        _ => None,
    }
}

/// `v` with its bits read as `dtype`, of the same width.
fn cast<'a, S: OpSink>(
    b: &mut Builder<'_, S>,
    v: Typed<'a, S::Value>,
    dtype: DType,
) -> Result<Typed<'a, S::Value>, LowerError<S::Error>> {
    match v.1.dtype == dtype {
        true => Ok(v),
        false => b.emit(Op::BitcastConvert { to: dtype }, &[&v]),
    }
}

/// `x` (of type `x_ty`) with its bits read as `to`: of the same shape for the same width,
/// with a trailing dimension of `from / to` parts for a narrower `to`, and without its
/// trailing dimension (which must be `to / from`) for a wider one. Bools and c128 are refused.
pub fn lower_bitcast<S: OpSink>(
    sink: &mut S,
    (x, x_ty): (&S::Value, &TensorType),
    to: DType,
) -> Result<S::Value, LowerError<S::Error>> {
    let from = x_ty.dtype;
    let (wide, narrow) = (from.size_bytes(), to.size_bytes());
    let invalid =
        |why: &str| LowerError::Invalid(format!("bitcast_convert from {x_ty} to {to}: {why}"));
    if from.is_bool() || to.is_bool() {
        return Err(invalid("bools have no bit layout to reinterpret"));
    }
    let (Some(from_bits), Some(to_bits)) = (unsigned(wide), unsigned(narrow)) else {
        return Err(invalid("elements of more than 64 bits cannot change width"));
    };
    let mut b = Builder { sink };
    let x: Typed<'_, S::Value> = (x.into(), x_ty.clone());
    let rank = x_ty.rank();
    if wide == narrow {
        return finish(cast(&mut b, x, to)?);
    }
    // Each part's bit offset, along the trailing dimension of `shape`.
    let offsets = |b: &mut Builder<'_, S>, dtype: DType, parts: usize, shape: &[usize]| {
        let step = (8 * wide.min(narrow)) as f64;
        let values: Vec<Scalar> = (0..parts)
            .map(|k| Scalar::from_f64(dtype, k as f64 * step))
            .collect();
        let data = Elements::from_scalars(dtype, &values)
            .ok_or_else(|| LowerError::Invalid(format!("bit offsets of {dtype}")))?;
        let ty = TensorType::new(dtype, [parts]);
        let offsets = b.emit(Op::Constant(Literal { ty, data }), &[])?;
        let dims = vec![shape.len() - 1];
        b.emit(
            Op::BroadcastInDim {
                shape: shape.into(),
                dims,
            },
            &[&offsets],
        )
    };
    if wide > narrow {
        let parts = wide / narrow;
        let bits = cast(&mut b, x, from_bits)?;
        let mut shape = x_ty.dims().to_vec();
        shape.push(parts);
        let spread = b.emit(
            Op::BroadcastInDim {
                shape: shape.clone().into(),
                dims: (0..rank).collect(),
            },
            &[&bits],
        )?;
        let offsets = offsets(&mut b, from_bits, parts, &shape)?;
        let shifted = b.emit(
            Op::Binary(crate::BinaryOp::ShiftRightLogical),
            &[&spread, &offsets],
        )?;
        let cut = b.emit(Op::Convert { to: to_bits }, &[&shifted])?;
        return finish(cast(&mut b, cut, to)?);
    }
    let parts = narrow / wide;
    if x_ty.dims().last() != Some(&parts) {
        return Err(invalid(&format!(
            "the last dimension must hold the {parts} parts of each element"
        )));
    }
    let bits = cast(&mut b, x, from_bits)?;
    let widened = b.emit(Op::Convert { to: to_bits }, &[&bits])?;
    let offsets = offsets(&mut b, to_bits, parts, x_ty.dims())?;
    let shifted = b.emit(
        Op::Binary(crate::BinaryOp::ShiftLeft),
        &[&widened, &offsets],
    )?;
    let joined = b.emit(
        Op::Reduce {
            op: ReduceOp::Sum,
            axes: vec![rank - 1],
        },
        &[&shifted],
    )?;
    finish(cast(&mut b, joined, to)?)
}

//! Movement ops. Slices and pads keep the batch dimension where it is (full range, no
//! padding there); broadcasts, reshapes, transposes and concatenations put it first, where
//! their attributes gain one leading entry.

use super::{BVal, Batcher, R};
use crate::batching::builder::shifted;
use ferrax_ir::{Literal, Op, Scalar, Shape};

fn leading(size: usize, shape: &Shape) -> Shape {
    let mut dims = vec![size];
    dims.extend_from_slice(shape.dims());
    Shape::new(dims)
}

pub(super) fn broadcast(bt: &mut Batcher, shape: &Shape, dims: &[usize], x: BVal) -> R<BVal> {
    let v = bt.materialize(x, 0)?;
    let mut new_dims = vec![0];
    new_dims.extend(dims.iter().map(|d| d + 1));
    let op = Op::BroadcastInDim {
        shape: leading(bt.size, shape),
        dims: new_dims,
    };
    Ok(BVal::at(bt.push(op, &[v])?, 0))
}

pub(super) fn reshape(bt: &mut Batcher, shape: &Shape, x: BVal) -> R<BVal> {
    let v = bt.materialize(x, 0)?;
    let op = Op::Reshape {
        shape: leading(bt.size, shape),
    };
    Ok(BVal::at(bt.push(op, &[v])?, 0))
}

/// A reverse of the example axes, which keep their places around the batch axis.
pub(super) fn reverse(bt: &mut Batcher, axes: &[usize], x: BVal) -> R<BVal> {
    let op = Op::Reverse {
        axes: axes.iter().map(|&a| shifted(a, x.bdim)).collect(),
    };
    let v = bt.push(op, &[x.v])?;
    Ok(BVal { v, bdim: x.bdim })
}

pub(super) fn transpose(bt: &mut Batcher, perm: &[usize], x: BVal) -> R<BVal> {
    let Some(b) = x.bdim else {
        let v = bt.push(
            Op::Transpose {
                perm: perm.to_vec(),
            },
            &[x.v],
        )?;
        return Ok(BVal { v, bdim: None });
    };
    let mut new_perm = vec![b];
    new_perm.extend(perm.iter().map(|&p| shifted(p, Some(b))));
    Ok(BVal::at(
        bt.push(Op::Transpose { perm: new_perm }, &[x.v])?,
        0,
    ))
}

pub(super) fn slice(
    bt: &mut Batcher,
    (start, limit, strides): (&[usize], &[usize], &[usize]),
    x: BVal,
) -> R<BVal> {
    let b = x.bdim.unwrap_or(0);
    let v = bt.materialize(x, b)?;
    let insert = |list: &[usize], value: usize| {
        let mut l = list.to_vec();
        l.insert(b, value);
        l
    };
    let op = Op::Slice {
        start: insert(start, 0),
        limit: insert(limit, bt.size),
        strides: insert(strides, 1),
    };
    Ok(BVal::at(bt.push(op, &[v])?, b))
}

/// `pad(x, value)`. A batched padding value pads with a placeholder and then selects each
/// example's value where the padding lies.
pub(super) fn pad(
    bt: &mut Batcher,
    (low, high, interior): (&[i64], &[i64], &[usize]),
    args: &[BVal],
) -> R<BVal> {
    let (x, value) = (args[0], args[1]);
    let b = if value.bdim.is_some() {
        0
    } else {
        x.bdim.unwrap_or(0)
    };
    let v = bt.materialize(x, b)?;
    let at = |list: &[i64]| {
        let mut l = list.to_vec();
        l.insert(b, 0);
        l
    };
    let mut interior_b = interior.to_vec();
    interior_b.insert(b, 0);
    let op = Op::Pad {
        low: at(low),
        high: at(high),
        interior: interior_b,
    };
    if value.bdim.is_none() {
        return Ok(BVal::at(bt.push(op, &[v, value.v])?, b));
    }
    let dtype = bt.ty(v)?.dtype;
    let zero = bt.scalar(dtype, 0.0)?;
    let padded = bt.push(op, &[v, zero])?;
    // Where the operand lands: true inside, false in the padding.
    let example = bt.example_type(x)?;
    let inside = bt.push(
        Op::Constant(Literal::splat(Scalar::Bool(true), example.shape)),
        &[],
    )?;
    let outside = bt.constant(Scalar::Bool(false), Shape::scalar())?;
    let mask = bt.push(
        Op::Pad {
            low: low.to_vec(),
            high: high.to_vec(),
            interior: interior.to_vec(),
        },
        &[inside, outside],
    )?;
    let mask = bt.materialize(
        BVal {
            v: mask,
            bdim: None,
        },
        0,
    )?;
    let fill = bt.lane_mask(value.v, padded)?;
    Ok(BVal::at(bt.push(Op::Select, &[mask, padded, fill])?, 0))
}

pub(super) fn concatenate(bt: &mut Batcher, axis: usize, args: &[BVal]) -> R<BVal> {
    let parts: Vec<_> = args
        .iter()
        .map(|a| bt.materialize(*a, 0))
        .collect::<R<_>>()?;
    let op = Op::Concatenate { axis: axis + 1 };
    Ok(BVal::at(bt.push(op, &parts)?, 0))
}

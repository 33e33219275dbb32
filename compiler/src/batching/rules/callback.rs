//! Host callbacks under `vmap`, as JAX's. A `debug_callback` runs once per example, in order,
//! on that example's operands (operands shared by the batch as they are). A `pure_callback`
//! does too and its results are stacked (JAX's `vmap_method="sequential"`), or, marked
//! `expand_dims`, it runs once on the batch: batched operands with the batch dimension first,
//! shared ones with a leading dimension of 1, returning the batch of results. An unordered
//! `io_callback` runs once per example, in order (each call after the one before), its results
//! stacked; `vmap` refuses an ordered one, as JAX does. `add_dependency` keeps its operand's
//! batch dimension, whatever it waits for. Tokens come from callbacks, which give unbatched
//! ones.

use super::{BVal, Batcher, R};
use crate::batching::BatchError;
use ferrax_ir::{IoCallback, Op, PureCallback, Scalar, Shape, TensorType, ValueId};

/// Example `k` of `x`, batched at `bdim`.
fn example(bt: &mut Batcher, x: ValueId, bdim: usize, k: usize) -> R<ValueId> {
    let ty = bt.ty(x)?;
    let mut start = vec![0; ty.rank()];
    let mut limit = ty.dims().to_vec();
    start[bdim] = k;
    limit[bdim] = k + 1;
    let strides = vec![1; ty.rank()];
    let row = bt.push(
        Op::Slice {
            start,
            limit,
            strides,
        },
        &[x],
    )?;
    let mut dims = ty.dims().to_vec();
    dims.remove(bdim);
    bt.push(Op::Reshape { shape: dims.into() }, &[row])
}

pub(super) fn debug_callback(bt: &mut Batcher, op: &Op, args: &[BVal]) -> R<BVal> {
    let (token, operands) = args
        .split_first()
        .ok_or_else(|| BatchError::Malformed(format!("{}: no token operand", op.name())))?;
    if token.bdim.is_some() {
        return Err(BatchError::Malformed(format!(
            "{}: the token operand is batched",
            op.name()
        )));
    }
    let mut token = token.v;
    for k in 0..bt.size {
        let mut call = vec![token];
        call.extend(example_operands(bt, operands, k)?);
        token = bt.push(op.clone(), &call)?;
    }
    Ok(BVal {
        v: token,
        bdim: None,
    })
}

pub(super) fn add_dependency(bt: &mut Batcher, op: &Op, args: &[BVal]) -> R<BVal> {
    let [x, after] = args else {
        return Err(BatchError::Malformed(format!(
            "{}: expects two operands",
            op.name()
        )));
    };
    Ok(BVal {
        v: bt.push(Op::AddDependency, &[x.v, after.v])?,
        bdim: x.bdim,
    })
}

pub(super) fn pure_callback(bt: &mut Batcher, c: &PureCallback, args: &[BVal]) -> R<BVal> {
    let op = Op::PureCallback(Box::new(c.clone()));
    if args.iter().all(|a| a.bdim.is_none()) {
        let operands: Vec<ValueId> = args.iter().map(|a| a.v).collect();
        return Ok(BVal {
            v: bt.push(op, &operands)?,
            bdim: None,
        });
    }
    if c.expand_dims {
        let mut batched = vec![bt.size];
        batched.extend_from_slice(c.result.dims());
        let mut operands = Vec::with_capacity(args.len());
        for a in args {
            operands.push(match a.bdim {
                Some(_) => bt.materialize(*a, 0)?,
                None => {
                    let mut dims = vec![1];
                    dims.extend_from_slice(bt.ty(a.v)?.dims());
                    bt.push(Op::Reshape { shape: dims.into() }, &[a.v])?
                }
            });
        }
        let whole = Op::PureCallback(Box::new(PureCallback {
            result: c.result.with_shape(batched),
            ..c.clone()
        }));
        return Ok(BVal::at(bt.push(whole, &operands)?, 0));
    }
    stacked(bt, &c.result, |bt, k| {
        let operands = example_operands(bt, args, k)?;
        bt.push(op.clone(), &operands)
    })
}

pub(super) fn io_callback(bt: &mut Batcher, c: &IoCallback, args: &[BVal]) -> R<BVal> {
    let op = Op::IoCallback(Box::new(c.clone()));
    let (token, operands) = args
        .split_first()
        .ok_or_else(|| BatchError::Malformed(format!("{}: no token operand", op.name())))?;
    if operands.iter().all(|a| a.bdim.is_none()) {
        let operands: Vec<ValueId> = args.iter().map(|a| a.v).collect();
        return Ok(BVal {
            v: bt.push(op, &operands)?,
            bdim: None,
        });
    }
    if c.ordered {
        return Err(BatchError::Unsupported(
            "vmap of an ordered io_callback: its calls per example would have no order among \
             the batch (as in JAX); pass ordered = false"
                .into(),
        ));
    }
    if token.bdim.is_some() {
        return Err(BatchError::Malformed(format!(
            "{}: the token operand is batched",
            op.name()
        )));
    }
    let mut token = token.v;
    stacked(bt, &c.result, |bt, k| {
        let mut call = vec![token];
        call.extend(example_operands(bt, operands, k)?);
        let row = bt.push(op.clone(), &call)?;
        // The next example's call after this one.
        token = bt.push(Op::AddDependency, &[token, row])?;
        Ok(row)
    })
}

/// Example `k`'s operands: its slices of the batched ones, the shared ones as they are.
fn example_operands(bt: &mut Batcher, args: &[BVal], k: usize) -> R<Vec<ValueId>> {
    args.iter()
        .map(|a| match a.bdim {
            None => Ok(a.v),
            Some(d) => example(bt, a.v, d, k),
        })
        .collect()
}

/// `call(k)` (of per-example type `result`) for each example in order, stacked along a new
/// leading axis; zeros for a batch of none.
fn stacked(
    bt: &mut Batcher,
    result: &TensorType,
    mut call: impl FnMut(&mut Batcher, usize) -> R<ValueId>,
) -> R<BVal> {
    let mut batched = vec![bt.size];
    batched.extend_from_slice(result.dims());
    if bt.size == 0 {
        let zero = Scalar::zero(result.dtype);
        return Ok(BVal::at(bt.constant(zero, Shape::from(batched))?, 0));
    }
    let mut one = vec![1];
    one.extend_from_slice(result.dims());
    let mut rows = Vec::with_capacity(bt.size);
    for k in 0..bt.size {
        let row = call(bt, k)?;
        rows.push(bt.push(
            Op::Reshape {
                shape: one.clone().into(),
            },
            &[row],
        )?);
    }
    Ok(BVal::at(bt.push(Op::Concatenate { axis: 0 }, &rows)?, 0))
}

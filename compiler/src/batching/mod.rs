//! Batching (`jax.vmap`) as an IR→IR transformation.
//!
//! [`vmap`] takes a function written for one example and gives the function of a batch: each
//! batched parameter gains a dimension of the batch size at its axis. Every value of the
//! program is tracked as batched (with the position of its batch dimension) or not, and each
//! op has a rule (`rules/`, one file per op family, mirroring `ir/src/ops/`) that emits the
//! op a human would write for the batch: an elementwise op on one batched operand broadcasts
//! only the other, a `dot_general` with two batched operands gains a batch dimension, one with
//! one batched operand a free dimension, a gather with batched indices uses the gather's
//! batching dimensions. Values no batched input reaches stay unbatched, so weights a
//! per-example function closes over are never copied per example, and batch dimensions move
//! only where a rule needs them in one place.
//!
//! The result is an ordinary `Func`, so batching composes with autodiff and with itself:
//! `vmap(vjp(f))` is per-example gradients, `vjp(vmap(f))` differentiates a batched program,
//! `vmap(vmap(f))` batches twice.

mod builder;
mod rules;

use builder::{BVal, Batcher};
use ferrax_ir::{verify, Func, FuncBuilder, TensorType, TypeError, ValueId, VerifyError};
use std::collections::HashMap;

#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum BatchError {
    #[error("a batching rule built an ill-typed instruction: {0}")]
    Type(#[from] TypeError),
    #[error("value {0} is not defined in the batched program")]
    Undefined(ValueId),
    #[error(transparent)]
    Verify(#[from] VerifyError),
    /// Batch axes that do not fit the function: the message says which and why.
    #[error("{0}")]
    Axes(String),
    /// A program a verified function cannot be (an op without the operands or results its
    /// rule reads).
    #[error("malformed program: {0}")]
    Malformed(String),
    /// An op `vmap` refuses, as JAX does: the message says which and why.
    #[error("{0}")]
    Unsupported(String),
}

pub(crate) type R<T = ValueId> = Result<T, BatchError>;

/// Where a batched function's output puts its batch dimension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OutAxis {
    /// At 0 if it is batched; unbatched if no batched input reaches it.
    Auto,
    /// At this axis, broadcast along the batch if no batched input reaches it.
    At(usize),
    /// Unbatched; an error if a batched input reaches it.
    Unbatched,
}

/// The batched form of `func`. `in_axes[i]` is the axis of parameter `i`'s batch dimension
/// (`None`: the parameter is the same for every example); `out_axes[k]` is where output `k`
/// puts it (`None`: the output must not depend on a batched input, as JAX's
/// `out_axes=None`). `size` is the batch size. Unbatched outputs with an axis are broadcast.
pub fn vmap(
    func: &Func,
    in_axes: &[Option<usize>],
    out_axes: &[Option<usize>],
    size: usize,
) -> Result<Func, BatchError> {
    verify(func)?;
    if in_axes.len() != func.params.len() {
        return Err(BatchError::Axes(format!(
            "vmap: {} in_axes for a function of {} inputs",
            in_axes.len(),
            func.params.len()
        )));
    }
    if out_axes.len() != func.outputs.len() {
        return Err(BatchError::Axes(format!(
            "vmap: {} out_axes for a function of {} outputs",
            out_axes.len(),
            func.outputs.len()
        )));
    }
    for (k, (t, a)) in func.output_types().iter().zip(out_axes).enumerate() {
        if let Some(a) = a.filter(|&a| a > t.rank()) {
            return Err(BatchError::Axes(format!(
                "vmap: out_axes {a} is out of range for output {k}, of type {t} per example"
            )));
        }
    }
    let out: Vec<OutAxis> = out_axes
        .iter()
        .map(|a| a.map_or(OutAxis::Unbatched, OutAxis::At))
        .collect();
    let batched = batch_func(func, in_axes, size, &out)?.0;
    let batched = crate::dce::eliminate_dead_code(&batched);
    verify(&batched)?;
    Ok(batched)
}

/// The type of a value of type `ty` per example, batched at `axis`.
pub(crate) fn batched_type(ty: &TensorType, axis: usize, size: usize) -> R<TensorType> {
    let mut dims = ty.dims().to_vec();
    if axis > dims.len() {
        return Err(BatchError::Axes(format!(
            "vmap: axis {axis} is out of range for a value of type {ty} per example"
        )));
    }
    dims.insert(axis, size);
    Ok(ty.with_shape(dims))
}

/// `func` batched with parameter batch axes `in_axes` and outputs placed by `out`; also says
/// which outputs are batched.
pub(crate) fn batch_func(
    func: &Func,
    in_axes: &[Option<usize>],
    size: usize,
    out: &[OutAxis],
) -> R<(Func, Vec<bool>)> {
    let mut bt = Batcher::new(FuncBuilder::new(format!("{}_vmap", func.name)), size);
    let mut inputs = Vec::with_capacity(func.params.len());
    for (ty, &axis) in func.params.iter().zip(in_axes) {
        let ty = match axis {
            Some(a) => batched_type(ty, a, size)?,
            None => ty.clone(),
        };
        inputs.push(BVal {
            v: bt.b.param(ty),
            bdim: axis,
        });
    }
    let results = batch_body(&mut bt, func, inputs)?;
    let mut outputs = Vec::with_capacity(results.len());
    let mut batched = Vec::with_capacity(results.len());
    for (k, (r, axis)) in results.into_iter().zip(out).enumerate() {
        let v = match (axis, r.bdim) {
            (OutAxis::Auto, Some(_)) => bt.materialize(r, 0)?,
            (OutAxis::Auto | OutAxis::Unbatched, None) => r.v,
            (OutAxis::At(a), _) => bt.materialize(r, *a)?,
            (OutAxis::Unbatched, Some(_)) => {
                return Err(BatchError::Axes(format!(
                    "vmap: output {k} depends on a batched input, but its out_axes is None"
                )))
            }
        };
        batched.push(r.bdim.is_some() || matches!(axis, OutAxis::At(_)));
        outputs.push(v);
    }
    Ok((bt.b.finish(outputs), batched))
}

/// Emits the batched instructions of `func` on `inputs` and returns its batched outputs.
pub(crate) fn batch_body(bt: &mut Batcher, func: &Func, inputs: Vec<BVal>) -> R<Vec<BVal>> {
    let mut values = inputs;
    // Results of control-flow calls batched as a whole, for the instructions yielding them.
    let mut call_results: HashMap<usize, BVal> = HashMap::new();
    for (i, ins) in func.body.iter().enumerate() {
        let args: Vec<BVal> = ins
            .args
            .iter()
            .map(|a| {
                values
                    .get(a.index())
                    .copied()
                    .ok_or(BatchError::Undefined(*a))
            })
            .collect::<R<_>>()?;
        let out = if let Some(r) = call_results.remove(&i) {
            r
        } else if args.iter().all(|a| a.bdim.is_none()) {
            let v: Vec<ValueId> = args.iter().map(|a| a.v).collect();
            BVal {
                v: bt.push(ins.op.clone(), &v)?,
                bdim: None,
            }
        } else if ins.op.call_result().is_some() {
            let results = rules::call(bt, &ins.op, &args)?;
            let mut own = None;
            for j in func.call_instructions(i) {
                let k = func.body[j].op.call_result().map_or(0, |(k, _)| k);
                let r = *results
                    .get(k)
                    .ok_or(BatchError::Undefined(ValueId(k as u32)))?;
                if j == i {
                    own = Some(r);
                } else {
                    call_results.insert(j, r);
                }
            }
            own.ok_or(BatchError::Undefined(func.instr_value(i)))?
        } else {
            rules::batch(bt, &ins.op, &args, &ins.ty)?
        };
        values.push(out);
    }
    func.outputs
        .iter()
        .map(|o| {
            values
                .get(o.index())
                .copied()
                .ok_or(BatchError::Undefined(*o))
        })
        .collect()
}

//! `jax.vmap`, `jax.jacfwd`, `jax.jacrev` and `jax.hessian`. As the autodiff transforms do,
//! `vmap` traces the user function on one example's argument types, batches the IR with
//! `ferrax_compiler::batching`, and replays the batched program on the actual arguments:
//! eagerly for concrete tensors, into the enclosing trace for tracers. So `jit(vmap(f))`,
//! `vmap(grad(f))`, `grad` of a function calling `vmap`, and `vmap(vmap(f))` compose, and the
//! batched program is traced once whatever the batch size.
//!
//! Tracers of an enclosing trace the function closes over are inputs shared by every example
//! (not batched).

mod axes;
mod jac;

pub use axes::{AxisSpec, AxisTree};
pub use jac::{hessian, hessian_tree, jacfwd, jacfwd_tree, jacrev, jacrev_tree};

use crate::tensor::Inner;
use crate::trace::trace_named;
use crate::transforms::call_func_at;
use crate::{dump, Error, Result, Tensor, Tree};
use ferrax_compiler::batching::{self, BatchError};
use std::panic::Location;
use std::sync::Arc;

/// `jax.vmap(f)`: `f` mapped over axis 0 of every input leaf, its outputs stacked along axis 0.
#[track_caller]
pub fn vmap<I: Tree, O: Tree, F: Fn(I) -> O>(f: F) -> impl Fn(I) -> O {
    vmap_axes(f, 0, 0)
}

/// `jax.vmap(f, in_axes, out_axes)`: each input leaf batched along its axis in `in_axes`
/// (`None`: the same for every example), each output leaf stacked along its axis in
/// `out_axes` (`None`: an output that does not depend on the batch, returned once). Either
/// is one value for every leaf (`0`, `-1`, `None`) or a prefix of the tree with one value per
/// argument or leaf (`(None, 0, 0)` for `f((params, x, y))`); negative axes count from the end.
/// Mistakes (axes that do not fit the inputs, batch sizes that disagree, no batched input)
/// make every output leaf a failed tensor whose error names the caller's line.
#[track_caller]
pub fn vmap_axes<I: Tree, O: Tree, F: Fn(I) -> O>(
    f: F,
    in_axes: impl AxisSpec,
    out_axes: impl AxisSpec,
) -> impl Fn(I) -> O {
    let location = Location::caller();
    let (in_axes, out_axes) = (in_axes.axis_tree(), out_axes.axis_tree());
    move |args: I| match vmap_impl(&f, &args, (&in_axes, &out_axes), location) {
        Ok(out) => out,
        Err(e) => failed_outputs(&f, &args, e),
    }
}

/// `f`'s outputs with every leaf failed with `error`: `f` run on failed arguments, which
/// pass the error on without computing.
fn failed_outputs<I: Tree, O: Tree>(f: &impl Fn(I) -> O, args: &I, error: Error) -> O {
    let error = Arc::new(error);
    let fail = |t: &Tensor| {
        Tensor(Inner::Failed {
            error: error.clone(),
            ty: t.ty().clone(),
        })
    };
    let mut leaves = Vec::new();
    let def = args.flatten(&mut leaves);
    let failed: Vec<Tensor> = leaves.iter().map(fail).collect();
    let out = match I::unflatten(&def, &mut failed.into_iter()) {
        Ok(a) => f(a),
        Err(e) => unreachable!("a Tree does not rebuild from its own flattening: {e}"),
    };
    let mut out_leaves = Vec::new();
    let out_def = out.flatten(&mut out_leaves);
    let failed: Vec<Tensor> = out_leaves.iter().map(fail).collect();
    O::unflatten(&out_def, &mut failed.into_iter())
        .unwrap_or_else(|e| unreachable!("a Tree does not rebuild from its own flattening: {e}"))
}

pub(crate) fn batch_error(location: &'static Location<'static>, e: BatchError) -> Error {
    let message = match e {
        BatchError::Axes(m) => m,
        e => format!("vmap failed: {e}"),
    };
    Error::Trace { location, message }
}

/// Each input leaf's batch axis, checked against its rank, and the batch size they agree on.
fn input_axes(
    leaves: &[Tensor],
    axes: &[Option<i64>],
    location: &'static Location<'static>,
) -> Result<(Vec<Option<usize>>, usize)> {
    let fail = |message: String| Error::Trace { location, message };
    let mut size: Option<(usize, usize)> = None;
    let mut out = Vec::with_capacity(leaves.len());
    for (k, (leaf, axis)) in leaves.iter().zip(axes).enumerate() {
        let Some(axis) = axis else {
            out.push(None);
            continue;
        };
        let a = leaf
            .ndim()
            .checked_sub(1)
            .and_then(|top| axes::normalize(*axis, top))
            .ok_or_else(|| {
                fail(format!(
                    "vmap: in_axes {axis} is out of range for input leaf {k} of type {}",
                    leaf.ty()
                ))
            })?;
        let n = leaf.shape()[a];
        match size {
            Some((m, j)) if m != n => {
                return Err(fail(format!(
                    "vmap: inputs have different batch sizes: input leaf {j} has {m}, input leaf {k} has {n} (on axis {a} of {})",
                    leaf.ty()
                )))
            }
            Some(_) => {}
            None => size = Some((n, k)),
        }
        out.push(Some(a));
    }
    let (size, _) = size.ok_or_else(|| {
        fail(
            "vmap: no input is batched (in_axes are all None), so the batch size is unknown".into(),
        )
    })?;
    Ok((out, size))
}

fn vmap_impl<I: Tree, O: Tree>(
    f: impl FnOnce(I) -> O,
    args: &I,
    (in_spec, out_spec): (&AxisTree, &AxisTree),
    location: &'static Location<'static>,
) -> Result<O> {
    let fail = |message: String| Error::Trace { location, message };
    let mut leaves = Vec::new();
    let def = args.flatten(&mut leaves);
    if let Some(e) = leaves.iter().find_map(Tensor::error) {
        return Err(e.clone());
    }
    let axes = in_spec.leaves(&def).map_err(|why| {
        fail(format!(
            "vmap: in_axes {in_spec} do not match the inputs' structure {def}: {why}"
        ))
    })?;
    let (mut in_axes, size) = input_axes(&leaves, &axes, location)?;
    let examples: Vec<Tensor> = leaves
        .iter()
        .zip(&in_axes)
        .map(|(l, a)| {
            let mut shape = l.shape().to_vec();
            if let Some(a) = a {
                shape.remove(*a);
            }
            Tensor::spec(l.dtype(), shape)
        })
        .collect();
    let example_args = I::unflatten(&def, &mut examples.into_iter())?;
    let traced = trace_named("f", f, &example_args)?;
    let out_axes = out_spec.leaves(&traced.out_def).map_err(|why| {
        fail(format!(
            "vmap: out_axes {out_spec} do not match the outputs' structure {}: {why}",
            traced.out_def
        ))
    })?;
    let mut outs = Vec::with_capacity(out_axes.len());
    for (k, (axis, ty)) in out_axes.iter().zip(traced.func.output_types()).enumerate() {
        outs.push(match axis {
            None => None,
            Some(a) => Some(axes::normalize(*a, ty.rank()).ok_or_else(|| {
                fail(format!(
                    "vmap: out_axes {a} is out of range for output leaf {k}, of type {ty} per example"
                ))
            })?),
        });
    }
    in_axes.extend(traced.captures.iter().map(|_| None));
    let batched = batching::vmap(&traced.func, &in_axes, &outs, size)
        .map_err(|e| batch_error(location, e))?;
    dump::write("vmap", &batched);
    leaves.extend(traced.captures);
    let results = call_func_at(location, &batched, &leaves);
    if let Some(e) = results.iter().find_map(|t| t.error().cloned()) {
        return Err(e);
    }
    O::unflatten(&traced.out_def, &mut results.into_iter())
}

//! `jax.pure_callback`: a host function as an operation of a traced program, for what the
//! compiler cannot express (a library call, a lookup). The function must be pure: a compiled
//! program may call it fewer times than the trace did (equal calls are one) or more (under
//! `vmap`), and never where its result is not needed. It has no derivative (as in JAX): give
//! it one with `custom_jvp` or `custom_vjp`. Like `debug` callbacks, it is this process's: a
//! program that calls one makes no artifact and skips the persistent cache.
//!
//! `jax.experimental.io_callback` is a host function with effects that gives a value (reading
//! a file, a sensor, a counter): it runs exactly where and as often as the traced function
//! calls it, in order with the other callbacks, whether or not its result is used.

use crate::tensor::{apply_at, innermost_ctx, traced, Tensor};
use crate::trace_ctx::current_trace;
use ferrax_ir::{IoCallback, Op, PureCallback, TensorType};
use ferrax_runtime::callbacks;
use ferrax_runtime::Array;
use std::panic::Location;
use std::sync::Arc;

/// How `vmap` batches a [`pure_callback`] (JAX's `vmap_method`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum VmapMethod {
    /// One call per example, the results stacked (`"sequential"`).
    #[default]
    Sequential,
    /// One call on the whole batch: batched operands with the batch dimension first, shared
    /// ones with a leading dimension of 1; the function returns the batch of results
    /// (`"expand_dims"`).
    ExpandDims,
}

/// The value `f` returns for the values of `args`, which must be of type `result`
/// (`jax.pure_callback(f, result_shape_dtypes, *args, vmap_method=...)`). Outside a trace, `f`
/// runs at once; a result of another type, an `Err` or a panic of `f` is the error.
#[track_caller]
pub fn pure_callback(
    f: impl Fn(&[Array]) -> Result<Array, String> + Send + Sync + 'static,
    result: TensorType,
    args: &[&Tensor],
    vmap: VmapMethod,
) -> Tensor {
    let location = Location::caller();
    let staged = innermost_ctx(args).is_some() || (args.is_empty() && current_trace().is_some());
    if !staged {
        return call_now("pure_callback", &f, result, args, location);
    }
    let callback = callbacks::register(Arc::new(move |values: &[Array]| Ok(vec![f(values)?])));
    let op = Op::PureCallback(Box::new(PureCallback {
        callback,
        result,
        expand_dims: vmap == VmapMethod::ExpandDims,
    }));
    apply_at(location, op, args)
}

/// The value `f` returns for the values of `args`, which must be of type `result`, where the
/// traced function calls it (`jax.experimental.io_callback(f, result_shape_dtypes, *args,
/// ordered)`): in order with the program's other callbacks, once per call, kept whether or not
/// the result is used. `ordered` is JAX's: ferrax keeps every callback in order, and `vmap`
/// refuses an ordered one (an unordered one runs once per example). It has no derivative.
/// Outside a trace, `f` runs at once.
#[track_caller]
pub fn io_callback(
    f: impl Fn(&[Array]) -> Result<Array, String> + Send + Sync + 'static,
    result: TensorType,
    args: &[&Tensor],
    ordered: bool,
) -> Tensor {
    let location = Location::caller();
    // The innermost running trace: a loop body's call runs once per iteration, whatever
    // trace its operands come from.
    let Some(ctx) = current_trace() else {
        return call_now("io_callback", &f, result, args, location);
    };
    let callback = callbacks::register(Arc::new(move |values: &[Array]| Ok(vec![f(values)?])));
    let op = Op::IoCallback(Box::new(IoCallback {
        callback,
        result: result.clone(),
        ordered,
    }));
    traced(ctx.push_effect(op, args, location), result)
}

/// `f` on the values of `args` now, its result checked against `result` (`op` names the
/// call in errors).
fn call_now(
    op: &str,
    f: &dyn Fn(&[Array]) -> Result<Array, String>,
    result: TensorType,
    args: &[&Tensor],
    location: &'static Location<'static>,
) -> Tensor {
    let values: Result<Vec<Array>, _> = args.iter().map(|a| a.to_array()).collect();
    let value = values
        .map_err(|e| e.to_string())
        .and_then(|values| f(&values))
        .and_then(|value| match value.ty() == &result {
            true => Ok(value),
            false => Err(format!(
                "{op} promised {result}, the host function returned {}",
                value.ty()
            )),
        });
    match value {
        Ok(value) => Tensor::new(value),
        Err(message) => Tensor::failed(location, message, result),
    }
}

//! `jax.pure_callback`: a host function as an operation of a traced program, for what the
//! compiler cannot express (a library call, a lookup). The function must be pure: a compiled
//! program may call it fewer times than the trace did (equal calls are one) or more (under
//! `vmap`), and never where its result is not needed. It has no derivative (as in JAX): give
//! it one with `custom_jvp` or `custom_vjp`. Like `debug` callbacks, it is this process's: a
//! program that calls one makes no artifact and skips the persistent cache.

use crate::tensor::{apply_at, innermost_ctx, Tensor};
use crate::trace_ctx::current_trace;
use ferrax_ir::{Op, PureCallback, TensorType};
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
        let values: Result<Vec<Array>, _> = args.iter().map(|a| a.to_array()).collect();
        let value = values
            .map_err(|e| e.to_string())
            .and_then(|values| f(&values))
            .and_then(|value| match value.ty() == &result {
                true => Ok(value),
                false => Err(format!(
                    "pure_callback promised {result}, the host function returned {}",
                    value.ty()
                )),
            });
        return match value {
            Ok(value) => Tensor::new(value),
            Err(message) => Tensor::failed(location, message, result),
        };
    }
    let callback = callbacks::register(Arc::new(move |values: &[Array]| Ok(vec![f(values)?])));
    let op = Op::PureCallback(Box::new(PureCallback {
        callback,
        result,
        expand_dims: vmap == VmapMethod::ExpandDims,
    }));
    apply_at(location, op, args)
}

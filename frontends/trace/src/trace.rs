//! Tracing: running a user function on tracer tensors to record its IR (`jax.make_jaxpr`).
//!
//! The recording itself (nesting, captured tracers of enclosing traces) is `trace_ctx`'s;
//! this module runs the function between the inputs' tracers and its outputs' leaves, and
//! hands the recorded program on cleaned up and verified.

use crate::tensor::Inner;
use crate::trace_ctx::{ActiveGuard, TraceCtx};
use crate::{Error, Result, Tensor, Tree, TreeDef};
use ferrax_compiler::dce::eliminate_dead_code;
use ferrax_ir::{verify, Func};

/// A traced function with the structure of its outputs and the enclosing-trace tracers it
/// captured (extra parameters after the declared inputs).
pub(crate) struct Traced {
    pub func: Func,
    pub out_def: TreeDef,
    pub captures: Vec<Tensor>,
}

/// Traces `f` on tracers shaped like `inputs` (concrete tensors or [`Tensor::spec`]s) and
/// returns its IR. User mistakes inside `f` come back as [`Error::Trace`] with their location.
pub fn trace<I: Tree, O: Tree>(f: impl FnOnce(I) -> O, inputs: &I) -> Result<Func> {
    let traced = trace_named("main", f, inputs)?;
    if let Some(c) = traced.captures.first() {
        return Err(Error::Tree {
            expected: "a function of its inputs".into(),
            found: format!(
                "a function that closes over a traced {} value of an enclosing trace",
                c.ty()
            ),
        });
    }
    Ok(traced.func)
}

pub(crate) fn trace_named<I: Tree, O: Tree>(
    name: &str,
    f: impl FnOnce(I) -> O,
    inputs: &I,
) -> Result<Traced> {
    trace_with_outputs(name, f, inputs)?.1
}

/// [`trace_named`], also giving the structure and leaf types of `f`'s result, which exist
/// where `f` ran, even if an operation in it failed.
pub(crate) fn trace_with_outputs<I: Tree, O: Tree>(
    name: &str,
    f: impl FnOnce(I) -> O,
    inputs: &I,
) -> Result<(Outputs, Result<Traced>)> {
    let mut leaves = Vec::new();
    let in_def = inputs.flatten(&mut leaves);
    if let Some(e) = leaves.iter().find_map(|l| l.error()) {
        return Err(e.clone());
    }
    let ctx = TraceCtx::new();
    let params: Vec<Tensor> = leaves
        .iter()
        .map(|l| Tensor(Inner::Traced(ctx.input(l.ty().clone()))))
        .collect();
    let args = I::unflatten(&in_def, &mut params.into_iter())?;
    let guard = ActiveGuard::enter(&ctx);
    let out = f(args);
    drop(guard);
    let mut out_leaves = Vec::new();
    let out_def = out.flatten(&mut out_leaves);
    drop(out);
    let outputs = Outputs {
        def: out_def.clone(),
        types: out_leaves.iter().map(|l| l.ty().clone()).collect(),
    };
    let traced = ctx.finish(name, &out_leaves).and_then(|(func, captures)| {
        // Values the outputs do not depend on (e.g. the primal result inside `grad`) are
        // dropped.
        let func = eliminate_dead_code(&func);
        verify(&func)?;
        Ok(Traced {
            func,
            out_def,
            captures: captures
                .into_iter()
                .map(|t| Tensor(Inner::Traced(t)))
                .collect(),
        })
    });
    Ok((outputs, traced))
}

/// The structure and leaf types of a traced function's result.
pub(crate) struct Outputs {
    pub def: TreeDef,
    pub types: Vec<ferrax_ir::TensorType>,
}

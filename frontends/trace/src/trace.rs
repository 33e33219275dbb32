//! Tracing: running a user function on tracer tensors to record its IR (`jax.make_jaxpr`).

use crate::tensor::{literal_of, Inner};
use crate::{Error, Result, Tensor, Tree, TreeDef};
use ferrax_ir::{verify, Func, FuncBuilder, Op, TensorType, ValueId};
use std::cell::RefCell;
use std::panic::Location;
use std::rc::Rc;

/// The state of one trace: the function being built and the first user error met.
pub(crate) struct TraceCtx {
    state: RefCell<State>,
}

struct State {
    builder: FuncBuilder,
    error: Option<Error>,
    finished: bool,
}

impl TraceCtx {
    fn new(name: &str) -> Rc<TraceCtx> {
        Rc::new(TraceCtx {
            state: RefCell::new(State {
                builder: FuncBuilder::new(name),
                error: None,
                finished: false,
            }),
        })
    }

    fn param(self: &Rc<Self>, ty: TensorType) -> Tensor {
        let id = self.state.borrow_mut().builder.param(ty.clone());
        Tensor(Inner::Traced {
            ctx: self.clone(),
            id,
            ty,
        })
    }

    /// Records `op(args)`; concrete arguments become constants.
    pub(crate) fn push(
        self: &Rc<Self>,
        op: Op,
        args: &[&Tensor],
        location: &'static Location<'static>,
        guess: TensorType,
    ) -> Tensor {
        let mut state = self.state.borrow_mut();
        let result = if state.finished {
            Err(format!(
                "{}: a traced tensor was used after its trace ended (it escaped the traced function)",
                op.name()
            ))
        } else {
            lift_all(&mut state.builder, args)
                .and_then(|ids| state.builder.push(op, &ids).map_err(|e| e.to_string()))
        };
        match result {
            Ok(id) => {
                let ty = state.builder.value_type(id).cloned().unwrap_or(guess);
                Tensor(Inner::Traced {
                    ctx: self.clone(),
                    id,
                    ty,
                })
            }
            Err(message) => {
                let failed = Tensor::failed(location, message, guess);
                if state.error.is_none() {
                    state.error = failed.error().cloned();
                }
                failed
            }
        }
    }
}

fn lift_all(builder: &mut FuncBuilder, args: &[&Tensor]) -> Result<Vec<ValueId>, String> {
    args.iter().map(|a| lift(builder, a)).collect()
}

fn lift(builder: &mut FuncBuilder, t: &Tensor) -> Result<ValueId, String> {
    match &t.0 {
        Inner::Traced { id, .. } => Ok(*id),
        Inner::Concrete(a) => builder
            .push(Op::Constant(literal_of(a)), &[])
            .map_err(|e| e.to_string()),
        Inner::Abstract(ty) => Err(format!(
            "a {ty} specification has no data; pass it as an input of the traced function"
        )),
        Inner::Failed { error, .. } => Err(error.to_string()),
    }
}

/// A traced function with the structure of its inputs and outputs.
pub(crate) struct Traced {
    pub func: Func,
    pub out_def: TreeDef,
}

/// Traces `f` on tracers shaped like `inputs` (concrete tensors or [`Tensor::spec`]s) and
/// returns its IR. User mistakes inside `f` come back as [`Error::Trace`] with their location.
pub fn trace<I: Tree, O: Tree>(f: impl FnOnce(I) -> O, inputs: &I) -> Result<Func> {
    trace_named("main", f, inputs).map(|t| t.func)
}

pub(crate) fn trace_named<I: Tree, O: Tree>(
    name: &str,
    f: impl FnOnce(I) -> O,
    inputs: &I,
) -> Result<Traced> {
    let mut leaves = Vec::new();
    let in_def = inputs.flatten(&mut leaves);
    if let Some(e) = leaves.iter().find_map(|l| l.error()) {
        return Err(e.clone());
    }
    let ctx = TraceCtx::new(name);
    let params: Vec<Tensor> = leaves.iter().map(|l| ctx.param(l.ty().clone())).collect();
    let args = I::unflatten(&in_def, &mut params.into_iter())?;
    let out = f(args);
    let mut out_leaves = Vec::new();
    let out_def = out.flatten(&mut out_leaves);
    drop(out);
    let mut state = ctx.state.borrow_mut();
    state.finished = true;
    if let Some(e) = state.error.take() {
        return Err(e);
    }
    let mut outputs = Vec::with_capacity(out_leaves.len());
    for leaf in &out_leaves {
        if let Some(e) = leaf.error() {
            return Err(e.clone());
        }
        if leaf.trace_ctx().is_some_and(|c| !Rc::ptr_eq(c, &ctx)) {
            return Err(Error::Tree {
                expected: "outputs computed by the traced function".into(),
                found: "a tensor from another trace".into(),
            });
        }
        outputs.push(lift(&mut state.builder, leaf).map_err(|found| Error::Tree {
            expected: "an output with data".into(),
            found,
        })?);
    }
    let builder = std::mem::replace(&mut state.builder, FuncBuilder::new(name));
    let func = builder.finish(outputs);
    verify(&func)?;
    Ok(Traced { func, out_def })
}

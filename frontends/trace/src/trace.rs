//! Tracing: running a user function on tracer tensors to record its IR (`jax.make_jaxpr`).
//!
//! Traces nest (a transform traces its function while an enclosing `jit` or `grad` is
//! tracing). A tracer of an enclosing trace that the inner function closes over is captured:
//! it becomes an extra parameter of the inner program, after the declared inputs, and the
//! transform passes the outer tracer for it.

use crate::tensor::{literal_of, Inner};
use crate::{Error, Result, Tensor, Tree, TreeDef};
use ferrax_compiler::dce::eliminate_dead_code;
use ferrax_ir::{infer_type, verify, Func, Instr, Op, TensorType, ValueId};
use std::cell::{Cell, RefCell};
use std::panic::Location;
use std::rc::Rc;

/// A value of a trace in progress. Its final `ValueId` is known only when the trace ends,
/// because captured values become parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Local {
    Input(usize),
    Capture(usize),
    Instr(usize),
}

thread_local! {
    static NEXT_SERIAL: Cell<u64> = const { Cell::new(0) };
    /// The traces whose functions are running, innermost last.
    static ACTIVE: RefCell<Vec<Rc<TraceCtx>>> = const { RefCell::new(Vec::new()) };
}

/// The innermost trace whose function is running, if any: where operations without tensor
/// operands (`Tensor::iota`, `Tensor::zeros`, ...) are recorded.
pub(crate) fn current_trace() -> Option<Rc<TraceCtx>> {
    ACTIVE.with(|a| a.borrow().last().cloned())
}

/// Marks a trace active while the user function runs; unmarks it even if the function panics.
struct ActiveGuard;

impl ActiveGuard {
    fn enter(ctx: &Rc<TraceCtx>) -> ActiveGuard {
        ACTIVE.with(|a| a.borrow_mut().push(ctx.clone()));
        ActiveGuard
    }
}

impl Drop for ActiveGuard {
    fn drop(&mut self) {
        ACTIVE.with(|a| {
            a.borrow_mut().pop();
        });
    }
}

/// The state of one trace: what has been recorded and the first user error met.
pub(crate) struct TraceCtx {
    serial: u64,
    state: RefCell<State>,
}

struct State {
    inputs: Vec<TensorType>,
    /// Tracers of enclosing traces used here, with their types.
    captures: Vec<Tensor>,
    instrs: Vec<(Op, Vec<Local>, TensorType)>,
    error: Option<Error>,
    finished: bool,
}

impl State {
    fn ty(&self, l: Local) -> &TensorType {
        match l {
            Local::Input(k) => &self.inputs[k],
            Local::Capture(k) => self.captures[k].ty(),
            Local::Instr(k) => &self.instrs[k].2,
        }
    }

    fn record(&mut self, op: Op, args: Vec<Local>) -> Result<Local, String> {
        let types: Vec<&TensorType> = args.iter().map(|&a| self.ty(a)).collect();
        let ty = infer_type(&op, &types).map_err(|e| e.to_string())?;
        self.instrs.push((op, args, ty));
        Ok(Local::Instr(self.instrs.len() - 1))
    }

    /// The local value for an operand: a tracer of this trace, a captured tracer of an
    /// enclosing one, or a constant.
    fn lift(&mut self, serial: u64, t: &Tensor) -> Result<Local, String> {
        match &t.0 {
            Inner::Traced { ctx, id, .. } if ctx.serial == serial => Ok(*id),
            Inner::Traced { ctx, ty, .. } => {
                if ctx.serial > serial || ctx.state.borrow().finished {
                    return Err(format!(
                        "a traced {ty} value was used outside the function that produced it (it escaped its trace)"
                    ));
                }
                let same = |c: &Tensor| match (&c.0, &t.0) {
                    (Inner::Traced { ctx: a, id: x, .. }, Inner::Traced { ctx: b, id: y, .. }) => {
                        Rc::ptr_eq(a, b) && x == y
                    }
                    _ => false,
                };
                let k = match self.captures.iter().position(same) {
                    Some(k) => k,
                    None => {
                        self.captures.push(t.clone());
                        self.captures.len() - 1
                    }
                };
                Ok(Local::Capture(k))
            }
            Inner::Concrete(a) => self.record(Op::Constant(literal_of(a)), Vec::new()),
            Inner::Device { .. } => {
                let a = t.to_array().map_err(|e| e.to_string())?;
                self.record(Op::Constant(literal_of(&a)), Vec::new())
            }
            Inner::Abstract(ty) => Err(format!(
                "a {ty} specification has no data; pass it as an input of the traced function"
            )),
            Inner::Failed { error, .. } => Err(error.to_string()),
        }
    }
}

impl TraceCtx {
    fn new() -> Rc<TraceCtx> {
        let serial = NEXT_SERIAL.with(|n| {
            let s = n.get();
            n.set(s + 1);
            s
        });
        Rc::new(TraceCtx {
            serial,
            state: RefCell::new(State {
                inputs: Vec::new(),
                captures: Vec::new(),
                instrs: Vec::new(),
                error: None,
                finished: false,
            }),
        })
    }

    /// Traces started later have larger serials; the largest among an op's operands is the
    /// innermost trace.
    pub(crate) fn serial(&self) -> u64 {
        self.serial
    }

    fn input(self: &Rc<Self>, ty: TensorType) -> Tensor {
        let mut state = self.state.borrow_mut();
        state.inputs.push(ty.clone());
        Tensor(Inner::Traced {
            ctx: self.clone(),
            id: Local::Input(state.inputs.len() - 1),
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
                "{}: a traced value was used after its trace ended (it escaped the traced function)",
                op.name()
            ))
        } else {
            args.iter()
                .map(|a| state.lift(self.serial, a))
                .collect::<Result<Vec<_>, _>>()
                .and_then(|ids| state.record(op, ids))
        };
        match result {
            Ok(id) => Tensor(Inner::Traced {
                ctx: self.clone(),
                id,
                ty: state.ty(id).clone(),
            }),
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
    let mut leaves = Vec::new();
    let in_def = inputs.flatten(&mut leaves);
    if let Some(e) = leaves.iter().find_map(|l| l.error()) {
        return Err(e.clone());
    }
    let ctx = TraceCtx::new();
    let params: Vec<Tensor> = leaves.iter().map(|l| ctx.input(l.ty().clone())).collect();
    let args = I::unflatten(&in_def, &mut params.into_iter())?;
    let guard = ActiveGuard::enter(&ctx);
    let out = f(args);
    drop(guard);
    let mut out_leaves = Vec::new();
    let out_def = out.flatten(&mut out_leaves);
    drop(out);
    let mut state = ctx.state.borrow_mut();
    if let Some(e) = state.error.take() {
        state.finished = true;
        return Err(e);
    }
    let mut outputs = Vec::with_capacity(out_leaves.len());
    for leaf in &out_leaves {
        if let Some(e) = leaf.error() {
            state.finished = true;
            return Err(e.clone());
        }
        let local = state.lift(ctx.serial, leaf).map_err(|found| Error::Tree {
            expected: "outputs computed by the traced function".into(),
            found,
        });
        match local {
            Ok(l) => outputs.push(l),
            Err(e) => {
                state.finished = true;
                return Err(e);
            }
        }
    }
    state.finished = true;
    let (n_in, n_cap) = (state.inputs.len(), state.captures.len());
    let value = |l: Local| {
        ValueId(match l {
            Local::Input(k) => k,
            Local::Capture(k) => n_in + k,
            Local::Instr(k) => n_in + n_cap + k,
        } as u32)
    };
    let mut params = state.inputs.clone();
    params.extend(state.captures.iter().map(|c| c.ty().clone()));
    let body = state
        .instrs
        .drain(..)
        .map(|(op, args, ty)| Instr {
            op,
            args: args.into_iter().map(value).collect(),
            ty,
        })
        .collect();
    // Values the outputs do not depend on (e.g. the primal result inside `grad`) are dropped.
    let func = eliminate_dead_code(&Func {
        name: name.to_string(),
        params,
        body,
        outputs: outputs.into_iter().map(value).collect(),
    });
    verify(&func)?;
    Ok(Traced {
        func,
        out_def,
        captures: std::mem::take(&mut state.captures),
    })
}

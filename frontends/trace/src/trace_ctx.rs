//! The state of traces in progress: what each has recorded, the first user error it met, and
//! which traces are running (innermost last).
//!
//! Traces nest (a transform traces its function while an enclosing `jit` or `grad` is
//! tracing). A tracer of an enclosing trace that the inner function closes over is captured:
//! it becomes an extra parameter of the inner program, after the declared inputs, and the
//! transform passes the outer tracer for it.
//!
//! This module sits below `tensor`: a traced tensor holds its [`Tracer`], and operands reach a
//! trace through the [`Lift`] trait, which `tensor` implements. So the state never names the
//! tensor type, and making tensors out of tracers is left to the modules above
//! (`tensor::apply`, `trace::trace`).
//!
//! Tensors are `Send + Sync`, so a trace's state sits behind a mutex and serials come from one
//! process-wide counter (a tracer moved to another thread still compares by serial). Which
//! traces are running stays per thread: a function is traced on the thread that calls it. No
//! code path holds two traces' locks at once: whether an enclosing trace has ended is an atomic
//! flag, read without its lock.

use crate::{Error, Result};
use ferrax_ir::{infer_type, Func, Instr, Literal, Op, Scalar, TensorType, ValueId};
use std::cell::RefCell;
use std::fmt;
use std::marker::PhantomData;
use std::panic::Location;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// A value of a trace in progress. Its final `ValueId` is known only when the trace ends,
/// because captured values become parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Local {
    Input(usize),
    Capture(usize),
    Instr(usize),
}

/// A value recorded in a trace: what a traced tensor holds.
#[derive(Clone)]
pub(crate) struct Tracer {
    ctx: Arc<TraceCtx>,
    id: Local,
    ty: TensorType,
}

impl Tracer {
    pub(crate) fn ty(&self) -> &TensorType {
        &self.ty
    }

    /// The trace the value belongs to.
    pub(crate) fn ctx(&self) -> &Arc<TraceCtx> {
        &self.ctx
    }

    /// Whether `other` is the same value of the same trace.
    pub(crate) fn same(&self, other: &Tracer) -> bool {
        Arc::ptr_eq(&self.ctx, &other.ctx) && self.id == other.id
    }
}

impl fmt::Debug for Tracer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "traced {:?}: {}", self.id, self.ty)
    }
}

/// An operand as a trace sees it.
pub(crate) enum Lifted<'a> {
    /// A value of this trace, or of an enclosing one (which this trace then captures).
    Tracer(&'a Tracer),
    /// Data from outside any trace, recorded as a `constant`.
    Constant(Literal),
    /// The result of a failed operation.
    Failed(&'a Error),
    /// A value no trace can use, and why.
    Unusable(String),
}

/// What can be an operand of a recorded operation (the tensor type). Operands are lifted one
/// by one, in order, as the operation is recorded.
pub(crate) trait Lift {
    fn lift(&self) -> Lifted<'_>;
}

/// The next trace's serial, unique across threads.
static NEXT_SERIAL: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// The traces whose functions are running on this thread, innermost last.
    static ACTIVE: RefCell<Vec<Arc<TraceCtx>>> = const { RefCell::new(Vec::new()) };
}

/// The innermost trace whose function is running, if any: where operations without tensor
/// operands (`Tensor::iota`, `Tensor::zeros`, ...) are recorded.
pub(crate) fn current_trace() -> Option<Arc<TraceCtx>> {
    ACTIVE.with(|a| a.borrow().last().cloned())
}

/// Marks a trace active while the user function runs; unmarks it even if the function panics.
/// Not `Send`: it must be dropped on the thread whose stack it pushed.
pub(crate) struct ActiveGuard(PhantomData<*const ()>);

impl ActiveGuard {
    pub(crate) fn enter(ctx: &Arc<TraceCtx>) -> ActiveGuard {
        ACTIVE.with(|a| a.borrow_mut().push(ctx.clone()));
        ActiveGuard(PhantomData)
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
    /// Set when the trace ends; outside `state` so that an inner trace can check it while
    /// holding its own lock.
    finished: AtomicBool,
    state: Mutex<State>,
}

struct State {
    inputs: Vec<TensorType>,
    /// Tracers of enclosing traces used here, with their types.
    captures: Vec<Tracer>,
    instrs: Vec<(Op, Vec<Local>, TensorType)>,
    /// The value the trace's effects so far are behind (see [`TraceCtx::push_effect`]).
    token: Option<Local>,
    /// The last call with effects recorded: its op, its operands as given, and as recorded
    /// (after the effects before it), so its other results' instructions read the same ones.
    effect_call: Option<(Op, Vec<Local>, Vec<Local>)>,
    error: Option<Error>,
}

impl State {
    fn ty(&self, l: Local) -> &TensorType {
        match l {
            Local::Input(k) => &self.inputs[k],
            Local::Capture(k) => self.captures[k].ty(),
            Local::Instr(k) => &self.instrs[k].2,
        }
    }

    /// Records `op(args)`. An op that holds a function with effects (a loop whose body calls
    /// back) joins the token chain, so it is kept as a callback is and runs in its place
    /// among them: its first operand waits for the effects before it, and the effects after
    /// it wait for its result.
    fn record(&mut self, op: Op, mut args: Vec<Local>) -> Result<Local, String> {
        // A callback itself is chained by `push_effect` (or, copied from another program, is
        // there with its token).
        let effect = op.has_effect() && !matches!(op, Op::DebugCallback { .. } | Op::IoCallback(_));
        if effect {
            args = self.after_effects(&op, args)?;
        }
        let types: Vec<&TensorType> = args.iter().map(|&a| self.ty(a)).collect();
        let ty = infer_type(&op, &types).map_err(|e| e.to_string())?;
        self.instrs.push((op, args, ty));
        let value = Local::Instr(self.instrs.len() - 1);
        if effect {
            let token = self.token()?;
            self.token = Some(self.record(Op::AddDependency, vec![token, value])?);
        }
        Ok(value)
    }

    /// The operands of the call `op` with effects, its first one behind the trace's effects;
    /// those of the call before where this is another result of it.
    fn after_effects(&mut self, op: &Op, args: Vec<Local>) -> Result<Vec<Local>, String> {
        if let Some((call, given, recorded)) = &self.effect_call {
            if *given == args && call.same_call(op) {
                return Ok(recorded.clone());
            }
        }
        let mut recorded = args.clone();
        if let Some(first) = recorded.first_mut() {
            let token = self.token()?;
            *first = self.record(Op::AddDependency, vec![*first, token])?;
        }
        self.effect_call = Some((op.clone(), args, recorded.clone()));
        Ok(recorded)
    }

    /// The token of the effects so far: a `false` constant before the first.
    fn token(&mut self) -> Result<Local, String> {
        match self.token {
            Some(t) => Ok(t),
            None => self.record(
                Op::Constant(Literal::scalar(Scalar::Bool(false))),
                Vec::new(),
            ),
        }
    }

    /// The local value for an operand: a tracer of this trace, a captured tracer of an
    /// enclosing one, or a constant.
    fn lift(&mut self, serial: u64, value: Lifted) -> Result<Local, String> {
        match value {
            Lifted::Tracer(t) if t.ctx.serial == serial => Ok(t.id),
            Lifted::Tracer(t) => {
                if t.ctx.serial > serial || t.ctx.is_finished() {
                    return Err(format!(
                        "a traced {} value was used outside the function that produced it (it escaped its trace)",
                        t.ty
                    ));
                }
                let k = match self.captures.iter().position(|c| c.same(t)) {
                    Some(k) => k,
                    None => {
                        self.captures.push(t.clone());
                        self.captures.len() - 1
                    }
                };
                Ok(Local::Capture(k))
            }
            Lifted::Constant(literal) => self.record(Op::Constant(literal), Vec::new()),
            Lifted::Failed(error) => Err(error.to_string()),
            Lifted::Unusable(message) => Err(message),
        }
    }
}

impl TraceCtx {
    pub(crate) fn new() -> Arc<TraceCtx> {
        Arc::new(TraceCtx {
            serial: NEXT_SERIAL.fetch_add(1, Ordering::Relaxed),
            finished: AtomicBool::new(false),
            state: Mutex::new(State {
                inputs: Vec::new(),
                captures: Vec::new(),
                instrs: Vec::new(),
                token: None,
                effect_call: None,
                error: None,
            }),
        })
    }

    /// The state, locked. A panic in a user function never happens while it is held (user
    /// code runs between operations), so a poisoned lock still holds a consistent state.
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn is_finished(&self) -> bool {
        self.finished.load(Ordering::Acquire)
    }

    /// Traces started later have larger serials; the largest among an op's operands is the
    /// innermost trace.
    pub(crate) fn serial(&self) -> u64 {
        self.serial
    }

    /// A new input of the traced function.
    pub(crate) fn input(self: &Arc<Self>, ty: TensorType) -> Tracer {
        let mut state = self.state();
        state.inputs.push(ty.clone());
        Tracer {
            ctx: self.clone(),
            id: Local::Input(state.inputs.len() - 1),
            ty,
        }
    }

    /// Records `op(args)`; data from outside the trace becomes constants. A user error is
    /// returned with `location`, and the first one is kept as the trace's error.
    pub(crate) fn push<T: Lift>(
        self: &Arc<Self>,
        op: Op,
        args: &[&T],
        location: &'static Location<'static>,
    ) -> Result<Tracer> {
        let mut state = self.state();
        let result = if self.is_finished() {
            Err(format!(
                "{}: a traced value was used after its trace ended (it escaped the traced function)",
                op.name()
            ))
        } else {
            args.iter()
                .map(|a| state.lift(self.serial, a.lift()))
                .collect::<Result<Vec<_>, _>>()
                .and_then(|ids| state.record(op, ids))
        };
        match result {
            Ok(id) => Ok(Tracer {
                ctx: self.clone(),
                id,
                ty: state.ty(id).clone(),
            }),
            Err(message) => {
                let error = Error::Trace { location, message };
                if state.error.is_none() {
                    state.error = Some(error.clone());
                }
                Err(error)
            }
        }
    }

    /// Records the host callback `op` on `args` after the trace's earlier effects: it takes
    /// their token, and gives the next one (a `debug_callback`) or a value the next effects
    /// wait for (an `io_callback`), which is returned. When the trace ends, each output waits
    /// for the last token (`add_dependency`), so whatever keeps an output keeps every
    /// callback, in the order they were traced.
    pub(crate) fn push_effect<T: Lift>(
        self: &Arc<Self>,
        op: Op,
        args: &[&T],
        location: &'static Location<'static>,
    ) -> Result<Tracer> {
        let mut state = self.state();
        let result = if self.is_finished() {
            Err(format!(
                "{}: the trace of the function ended before this call",
                op.name()
            ))
        } else {
            args.iter()
                .map(|a| state.lift(self.serial, a.lift()))
                .collect::<Result<Vec<_>, _>>()
                .and_then(|ids| {
                    let before = state.token()?;
                    let gives_token = matches!(op, Op::DebugCallback { .. });
                    let mut operands = vec![before];
                    operands.extend(ids);
                    let value = state.record(op, operands)?;
                    state.token = Some(match gives_token {
                        true => value,
                        false => state.record(Op::AddDependency, vec![before, value])?,
                    });
                    Ok(value)
                })
        };
        result
            .map(|id| Tracer {
                ctx: self.clone(),
                id,
                ty: state.ty(id).clone(),
            })
            .map_err(|message| {
                let error = Error::Trace { location, message };
                if state.error.is_none() {
                    state.error = Some(error.clone());
                }
                error
            })
    }

    /// Ends the trace: the recorded function named `name` returning `outputs`, its parameters
    /// the inputs and then the captured tracers, which come back in that order. The first user
    /// error met while tracing is the error, else the first output that is not a value this
    /// trace can return. The trace's tracers cannot be used afterwards.
    pub(crate) fn finish<T: Lift>(&self, name: &str, outputs: &[T]) -> Result<(Func, Vec<Tracer>)> {
        let mut state = self.state();
        self.finished.store(true, Ordering::Release);
        if let Some(e) = state.error.take() {
            return Err(e);
        }
        let mut locals = Vec::with_capacity(outputs.len());
        for output in outputs {
            let local = match output.lift() {
                Lifted::Failed(e) => Err(e.clone()),
                value => state.lift(self.serial, value).map_err(|found| Error::Tree {
                    expected: "outputs computed by the traced function".into(),
                    found,
                }),
            };
            locals.push(local?);
        }
        if let Some(token) = state.token {
            for l in &mut locals {
                *l = state
                    .record(Op::AddDependency, vec![*l, token])
                    .map_err(|found| Error::Tree {
                        expected: "outputs that can wait for the function's callbacks".into(),
                        found,
                    })?;
            }
        }
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
        let func = Func {
            name: name.to_string(),
            params,
            body,
            outputs: locals.into_iter().map(value).collect(),
        };
        Ok((func, std::mem::take(&mut state.captures)))
    }
}

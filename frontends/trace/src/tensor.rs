//! `Tensor`: the one array type users write code against. Outside a trace it holds concrete
//! data and evaluates eagerly through the reference interpreter; inside `trace`/`jit` it is a
//! tracer that records IR. Operations never panic on user mistakes: a failed operation yields a
//! failed tensor that carries the error (with the user's source line) to the point where a
//! result is demanded (`trace`, `jit(..).call`, `Tensor::to_array`).
//!
//! A traced tensor holds a `trace_ctx::Tracer`, and operations are recorded through
//! `trace_ctx`, which sits below this module: this module makes the tensors (`apply`,
//! `record`) and says what each kind of tensor is to a trace (`Lift`).

use crate::trace_ctx::{current_trace, Lift, Lifted, TraceCtx, Tracer};
use crate::Error;
use ferrax_ir::{infer_type, DType, Element, Elements, Literal, Op, Shape, TensorType};
use ferrax_runtime::{eval_op, Array, DeviceArray};
use std::fmt;
use std::panic::Location;
use std::sync::Arc;

#[derive(Clone)]
pub struct Tensor(pub(crate) Inner);

#[derive(Clone)]
pub(crate) enum Inner {
    Concrete(Array),
    /// Data in GPU memory (`ty` mirrors the array's type, so shape queries stay cheap).
    Device {
        array: DeviceArray,
        ty: TensorType,
    },
    /// A type without data: an input specification for tracing (`jax.ShapeDtypeStruct`).
    Abstract(TensorType),
    Traced(Tracer),
    /// The result of a failed operation; `ty` is a best guess so that shape queries still work.
    Failed {
        error: Arc<Error>,
        ty: TensorType,
    },
}

impl Tensor {
    /// A tensor holding `array`.
    pub fn new(array: Array) -> Tensor {
        Tensor(Inner::Concrete(array))
    }

    /// A tensor over GPU data.
    pub(crate) fn on_device(array: DeviceArray) -> Tensor {
        let ty = TensorType::new(array.dtype(), array.shape().clone());
        Tensor(Inner::Device { array, ty })
    }

    /// A tensor of the given shape with data from `values` (row-major); a wrong length gives a
    /// failed tensor whose error names the shape and the length.
    #[track_caller]
    pub fn from_vec<T: Element>(shape: impl Into<Shape>, values: Vec<T>) -> Tensor {
        let shape = shape.into();
        let ty = TensorType::new(T::DTYPE, shape.clone());
        match Array::from_vec(shape, values) {
            Ok(a) => Tensor::new(a),
            Err(e) => Tensor::failed(Location::caller(), e.to_string(), ty),
        }
    }

    /// A rank-0 tensor.
    pub fn scalar<T: Element>(value: T) -> Tensor {
        Tensor::new(Array::scalar(value))
    }

    /// A data-less tensor of the given type, to trace or lower a function without inputs.
    pub fn spec(dtype: DType, shape: impl Into<Shape>) -> Tensor {
        Tensor(Inner::Abstract(TensorType::new(dtype, shape)))
    }

    pub fn ty(&self) -> &TensorType {
        match &self.0 {
            Inner::Concrete(a) => a.ty(),
            Inner::Traced(t) => t.ty(),
            Inner::Abstract(ty) | Inner::Device { ty, .. } | Inner::Failed { ty, .. } => ty,
        }
    }

    pub fn shape(&self) -> &[usize] {
        self.ty().dims()
    }

    pub fn dtype(&self) -> DType {
        self.ty().dtype
    }

    pub fn ndim(&self) -> usize {
        self.ty().rank()
    }

    pub fn numel(&self) -> usize {
        self.ty().numel()
    }

    pub fn is_traced(&self) -> bool {
        matches!(self.0, Inner::Traced(_))
    }

    /// The concrete value, moved out (so that a tensor given away can donate its buffer).
    pub fn into_array(self) -> Result<Array, Error> {
        match self.0 {
            Inner::Concrete(a) => Ok(a),
            other => Tensor(other).to_array(),
        }
    }

    /// The concrete value, or why there is none (a tracer, a spec, or a failed operation).
    pub fn to_array(&self) -> Result<Array, Error> {
        match &self.0 {
            Inner::Concrete(a) => Ok(a.clone()),
            Inner::Device { array, .. } => {
                array.to_host().map_err(|e| Error::Device(e.to_string()))
            }
            Inner::Failed { error, .. } => Err((**error).clone()),
            Inner::Abstract(ty) => Err(Error::Tree {
                expected: "a tensor with data".into(),
                found: format!("a {ty} specification without data"),
            }),
            Inner::Traced(t) => Err(Error::Tree {
                expected: "a tensor with data".into(),
                found: format!(
                    "a traced {} value (its data exists only when the compiled function runs)",
                    t.ty()
                ),
            }),
        }
    }

    /// The values as a `Vec<T>`.
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>, Error> {
        Ok(self.to_array()?.to_vec()?)
    }

    pub(crate) fn failed(
        location: &'static Location<'static>,
        message: String,
        ty: TensorType,
    ) -> Tensor {
        Tensor(Inner::Failed {
            error: Arc::new(Error::Trace { location, message }),
            ty,
        })
    }

    /// The error carried by a failed tensor.
    pub(crate) fn error(&self) -> Option<&Error> {
        match &self.0 {
            Inner::Failed { error, .. } => Some(error),
            _ => None,
        }
    }

    /// Whether both are the same traced value (a value captured twice, say).
    pub(crate) fn same_traced(&self, other: &Tensor) -> bool {
        match (&self.0, &other.0) {
            (Inner::Traced(a), Inner::Traced(b)) => a.same(b),
            _ => false,
        }
    }

    pub(crate) fn trace_ctx(&self) -> Option<&Arc<TraceCtx>> {
        match &self.0 {
            Inner::Traced(t) => Some(t.ctx()),
            _ => None,
        }
    }
}

impl From<Array> for Tensor {
    fn from(a: Array) -> Tensor {
        Tensor::new(a)
    }
}

impl<T: Element> From<Vec<T>> for Tensor {
    fn from(v: Vec<T>) -> Tensor {
        Tensor::new(Array::from(v))
    }
}

impl fmt::Debug for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Inner::Concrete(a) => write!(f, "Tensor({a})"),
            Inner::Device { array, .. } => write!(f, "Tensor({array:?})"),
            Inner::Abstract(ty) => write!(f, "Tensor(spec {ty})"),
            Inner::Traced(t) => write!(f, "Tensor({t:?})"),
            Inner::Failed { error, .. } => write!(f, "Tensor(failed: {error})"),
        }
    }
}

impl fmt::Display for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Inner::Concrete(a) => write!(f, "{a}"),
            Inner::Device { .. } => match self.to_array() {
                Ok(a) => write!(f, "{a}"),
                Err(e) => write!(f, "<{e}>"),
            },
            _ => fmt::Debug::fmt(self, f),
        }
    }
}

/// Applies `op` to `args`: records it in the active trace if any argument is traced, and
/// evaluates it otherwise. All primitive operations funnel through here.
#[track_caller]
pub(crate) fn apply(op: Op, args: &[&Tensor]) -> Tensor {
    apply_at(Location::caller(), op, args)
}

/// [`apply`] with an explicit user location, for callers inside closures.
pub(crate) fn apply_at(location: &'static Location<'static>, op: Op, args: &[&Tensor]) -> Tensor {
    let guess = args
        .first()
        .map(|a| a.ty().clone())
        .unwrap_or_else(|| TensorType::scalar(DType::F32));
    let failed = args.iter().find_map(|a| match &a.0 {
        Inner::Failed { error, .. } => Some(error.clone()),
        _ => None,
    });
    if let Some(error) = failed {
        // The error goes on with the type the op would give, where the operands' types give
        // one, so that what reads the result sees its dtype and shape.
        let types: Vec<&TensorType> = args.iter().map(|a| a.ty()).collect();
        return Tensor(Inner::Failed {
            error,
            ty: infer_type(&op, &types).unwrap_or(guess),
        });
    }
    match innermost_ctx(args).or_else(|| args.is_empty().then(current_trace).flatten()) {
        Some(ctx) => record(&ctx, op, args, location, guess),
        None => {
            // Eager operations run on the host; GPU operands are copied back first.
            let mut fetched = Vec::new();
            for a in args {
                if let Inner::Device { .. } = &a.0 {
                    match a.to_array() {
                        Ok(arr) => fetched.push(arr),
                        Err(e) => return Tensor::failed(location, e.to_string(), guess),
                    }
                }
            }
            let mut fetched = fetched.iter();
            let mut arrays = Vec::with_capacity(args.len());
            for a in args {
                match &a.0 {
                    Inner::Concrete(arr) => arrays.push(arr),
                    Inner::Device { .. } => arrays.extend(fetched.next()),
                    _ => {
                        let message = format!(
                            "{}: operand {} has no data outside a trace",
                            op.name(),
                            a.ty()
                        );
                        return Tensor::failed(location, message, guess);
                    }
                }
            }
            match eval_op(&op, &arrays) {
                Ok(a) => Tensor::new(a),
                Err(e) => Tensor::failed(location, e.to_string(), guess),
            }
        }
    }
}

/// The trace an operation on `args` is recorded in: the innermost (most recently started)
/// trace among the traced arguments. Tracers of enclosing traces are captured by it.
pub(crate) fn innermost_ctx(args: &[&Tensor]) -> Option<Arc<TraceCtx>> {
    args.iter()
        .filter_map(|a| a.trace_ctx())
        .max_by_key(|c| c.serial())
        .cloned()
}

/// Records `op(args)` in the trace `ctx`: a tracer, or a failed tensor (of type `guess`) if
/// the operation is a user error, which the trace also keeps.
pub(crate) fn record(
    ctx: &Arc<TraceCtx>,
    op: Op,
    args: &[&Tensor],
    location: &'static Location<'static>,
    guess: TensorType,
) -> Tensor {
    traced(ctx.push(op, args, location), guess)
}

/// The tensor of a recorded value, or the failed one of type `guess` carrying the error.
pub(crate) fn traced(recorded: crate::Result<Tracer>, guess: TensorType) -> Tensor {
    match recorded {
        Ok(tracer) => Tensor(Inner::Traced(tracer)),
        Err(error) => Tensor(Inner::Failed {
            error: Arc::new(error),
            ty: guess,
        }),
    }
}

/// What a tensor is to a trace it is an operand of: concrete and GPU data become constants.
impl Lift for Tensor {
    fn lift(&self) -> Lifted<'_> {
        match &self.0 {
            Inner::Traced(t) => Lifted::Tracer(t),
            Inner::Concrete(a) => Lifted::Constant(literal_of(a)),
            Inner::Device { .. } => match self.to_array() {
                Ok(a) => Lifted::Constant(literal_of(&a)),
                Err(e) => Lifted::Unusable(e.to_string()),
            },
            Inner::Abstract(ty) => Lifted::Unusable(format!(
                "a {ty} specification has no data; pass it as an input of the traced function"
            )),
            Inner::Failed { error, .. } => Lifted::Failed(error),
        }
    }
}

/// A literal for `array`, stored as a splat when every element is equal.
fn literal_of(array: &Array) -> Literal {
    let data = array.elements();
    let first = (!data.is_empty()).then(|| data.get(0));
    let splat = first.filter(|&f| (1..data.len()).all(|i| data.get(i) == f));
    match splat {
        Some(value) => Literal {
            ty: array.ty().clone(),
            data: Elements::splat(value, 1),
        },
        None => array.to_literal(),
    }
}

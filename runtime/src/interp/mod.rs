//! The reference interpreter: evaluates a verified `Func` op by op on host arrays. It is the
//! numerical oracle for every backend, so it favours accuracy over speed: float sums and dot
//! products accumulate in f64 and round once, and transcendentals are computed in f64 and
//! rounded to the dtype. Each op dispatches on its dtype once and then runs a loop generic
//! over the element type (see `num`). Files mirror `ir/src/ops/`.

mod balance;
mod bits;
mod complex;
mod contract;
mod control;
mod decompose;
mod eig;
mod elementwise;
mod fft;
mod indexing;
mod linalg;

pub use control::branch_index;
pub use elementwise::wide_unary;
pub use shared::SharedParts;
mod movement;
mod num;
mod real_schur;
mod reduce;
mod shared;
mod sort;
mod source;
mod special;

use crate::{Array, RuntimeError};
use ferrax_ir::{infer_type, verify, DType, Func, Op, TensorType, TypeError};

/// Checks that `args` fit `func`'s parameters: their count and every type.
pub fn check_args(func: &Func, args: &[Array]) -> Result<(), RuntimeError> {
    if args.len() != func.params.len() {
        return Err(RuntimeError::ArgCount {
            expected: func.params.len(),
            got: args.len(),
        });
    }
    for (index, (a, p)) in args.iter().zip(&func.params).enumerate() {
        if a.ty() != p {
            return Err(RuntimeError::ArgType {
                index,
                expected: p.clone(),
                got: a.ty().clone(),
            });
        }
    }
    Ok(())
}

/// Evaluates `func` on `args`, which must match its parameter types.
pub fn interpret(func: &Func, args: &[Array]) -> Result<Vec<Array>, RuntimeError> {
    verify(func)?;
    check_args(func, args)?;
    run(func, args.to_vec())
}

/// Every result of the call `op` (a `while` or `cond`, whose functions are taken as verified)
/// on `args`; for other ops, `op`'s one result.
pub fn eval_call(op: &Op, args: &[&Array]) -> Result<Vec<Array>, RuntimeError> {
    let types: Vec<&TensorType> = args.iter().map(|a| a.ty()).collect();
    infer_type(op, &types)?;
    control::call(op, args)
}

/// Evaluates the verified `func` on `args` of its parameter types.
fn run(func: &Func, args: Vec<Array>) -> Result<Vec<Array>, RuntimeError> {
    check_args(func, &args)?;
    // A value is released after the instruction that uses it last, or right away if nothing
    // uses it, unless it is an output. That bounds memory by the live values.
    let n = func.num_values();
    let mut last_use: Vec<Option<usize>> = vec![None; n];
    for (i, ins) in func.body.iter().enumerate() {
        for a in &ins.args {
            last_use[a.index()] = Some(i);
        }
    }
    let mut keep = vec![false; n];
    for o in &func.outputs {
        keep[o.index()] = true;
    }
    let mut values: Vec<Option<Array>> = args.into_iter().map(Some).collect();
    let mut calls = Calls::default();
    let mut shared = SharedParts::default();
    for (i, ins) in func.body.iter().enumerate() {
        let operands = ins
            .args
            .iter()
            .map(|a| {
                values[a.index()]
                    .as_ref()
                    .ok_or(RuntimeError::Freed { value: a.0 })
            })
            .collect::<Result<Vec<&Array>, RuntimeError>>()?;
        let out = match ins.op.call_result() {
            Some(_) => calls.result(func, i, &operands)?,
            None => match shared.value(func, i, &operands)? {
                Some(part) => part,
                None => eval_typed(&ins.op, &operands, &ins.ty)?,
            },
        };
        let v = func.instr_value(i).index();
        values.push((keep[v] || last_use[v].is_some()).then_some(out));
        for a in &ins.args {
            if last_use[a.index()] == Some(i) && !keep[a.index()] {
                values[a.index()] = None;
            }
        }
    }
    func.outputs
        .iter()
        .map(|o| {
            values[o.index()]
                .clone()
                .ok_or(RuntimeError::Freed { value: o.0 })
        })
        .collect()
}

/// The results of control-flow calls that instructions still to run will yield: one call of
/// several results is written as one instruction per result, and runs once.
#[derive(Default)]
struct Calls {
    /// The instruction that ran the call, its results, and how many instructions yield them.
    pending: Vec<(usize, Vec<Array>, usize)>,
}

impl Calls {
    /// The value of instruction `i` of `func`, a control-flow op on `operands`.
    fn result(
        &mut self,
        func: &Func,
        i: usize,
        operands: &[&Array],
    ) -> Result<Array, RuntimeError> {
        let ins = &func.body[i];
        let (k, _) = ins.op.call_result().unwrap_or((0, 1));
        let same = |j: usize| {
            let other = &func.body[j];
            other.args == ins.args && other.op.same_call(&ins.op)
        };
        let at = match self.pending.iter().position(|(j, _, _)| same(*j)) {
            Some(at) => at,
            None => {
                let results = control::call(&ins.op, operands)?;
                let users = (i..func.body.len()).filter(|&j| same(j)).count();
                self.pending.push((i, results, users));
                self.pending.len() - 1
            }
        };
        let (_, results, users) = &mut self.pending[at];
        let out = results.get(k).cloned().ok_or(RuntimeError::ArgCount {
            expected: k + 1,
            got: results.len(),
        })?;
        *users -= 1;
        if *users == 0 {
            self.pending.swap_remove(at);
        }
        Ok(out)
    }
}

/// Evaluates one op on concrete operands (eager mode), checking their types first.
pub fn eval_op(op: &Op, args: &[&Array]) -> Result<Array, RuntimeError> {
    let types: Vec<&TensorType> = args.iter().map(|a| a.ty()).collect();
    let ty = infer_type(op, &types)?;
    eval_typed(op, args, &ty)
}

/// Results from this size up are allocated fallibly once before they are computed.
const PROBED_BYTES: usize = 64 << 20;

/// An error where memory for an array of type `ty` cannot be had. Evaluation allocates its
/// results as Rust does, aborting the process where the system refuses; so a large result is
/// first allocated (and released) fallibly, turning a refusal into an `Err`.
pub fn ensure_allocatable(ty: &TensorType) -> Result<(), RuntimeError> {
    let out_of_memory = || RuntimeError::OutOfMemory { ty: ty.clone() };
    let bytes = ty.checked_bytes().ok_or_else(out_of_memory)?;
    if bytes >= PROBED_BYTES {
        let mut probe: Vec<u8> = Vec::new();
        probe
            .try_reserve_exact(bytes)
            .map_err(|_| out_of_memory())?;
    }
    Ok(())
}

/// The one result of a custom-derivative call's primal function.
fn call_primal(primal: &Func, args: &[&Array]) -> Result<Array, RuntimeError> {
    let owned: Vec<Array> = args.iter().map(|&a| a.clone()).collect();
    interpret(primal, &owned)?
        .pop()
        .ok_or(RuntimeError::ArgCount {
            expected: 1,
            got: 0,
        })
}

/// Evaluates `op` on operands whose types the shape rules accept, giving a result of type `ty`.
fn eval_typed(op: &Op, args: &[&Array], ty: &TensorType) -> Result<Array, RuntimeError> {
    ensure_allocatable(ty)?;
    let data = match op {
        Op::Constant(lit) => return Ok(Array::from_literal(lit)),
        Op::Attention(a) => {
            let types: Vec<&TensorType> = args.iter().map(|a| a.ty()).collect();
            let owned: Vec<Array> = args.iter().map(|&a| a.clone()).collect();
            let mut out = interpret(&a.decompose(&types)?, &owned)?;
            return out.pop().ok_or(RuntimeError::ArgCount {
                expected: 1,
                got: 0,
            });
        }
        Op::CustomVjp(c) => return call_primal(&c.primal, args),
        Op::CustomJvp(c) => return call_primal(&c.primal, args),
        Op::While(_) | Op::Cond(_) | Op::Scan(_) | Op::Remat(_) => {
            let (k, _) = op.call_result().unwrap_or((0, 1));
            let mut out = control::call(op, args)?;
            return if k < out.len() {
                Ok(out.swap_remove(k))
            } else {
                Err(RuntimeError::ArgCount {
                    expected: k + 1,
                    got: out.len(),
                })
            };
        }
        Op::StopGradient | Op::AddDependency => return Ok(args[0].clone()),
        Op::DebugCallback { callback } => {
            crate::callbacks::call(*callback, &args[1..])?;
            return Ok(Array::scalar(false));
        }
        Op::IoCallback(c) => {
            let results = crate::callbacks::call(c.callback, &args[1..])?;
            return callback_value("io_callback", c.callback, results, ty);
        }
        Op::PureCallback(c) => {
            let results = crate::callbacks::call(c.callback, args)?;
            return callback_value("pure_callback", c.callback, results, ty);
        }
        Op::Convert { to } | Op::BitcastConvert { to } if *to == args[0].dtype() => {
            return Ok(args[0].clone())
        }
        Op::Iota { dim, .. } => source::iota(ty, *dim),
        Op::Unary(u) => elementwise::unary(*u, args[0])?,
        Op::Binary(b) => elementwise::binary(*b, args[0], args[1])?,
        Op::Compare(c) => elementwise::compare(*c, args[0], args[1])?,
        Op::Select => elementwise::select(args[0], args[1], args[2])?,
        Op::Clamp => elementwise::clamp(args[0], args[1], args[2])?,
        Op::Convert { to } => elementwise::convert(args[0].elements(), *to),
        Op::BitcastConvert { to } => bits::bitcast_convert(args[0].elements(), *to)?,
        // The same elements under another shape: shared, not copied.
        Op::Reshape { shape } => return args[0].reshaped(shape.clone()),
        Op::BroadcastInDim { dims, .. } => movement::broadcast_in_dim(args[0], ty, dims),
        Op::Transpose { perm } => movement::transpose(args[0], perm),
        Op::Reverse { axes } => movement::reverse(args[0], axes),
        Op::Slice { start, strides, .. } => movement::slice(args[0], ty, start, strides),
        Op::Pad { low, interior, .. } => movement::pad(args[0], args[1], ty, low, interior)?,
        Op::Concatenate { axis } => movement::concatenate(args, ty, *axis)?,
        Op::Gather(g) => indexing::gather(g, args[0], args[1], ty.dims())?,
        Op::Scatter(s) => indexing::scatter(s, args[0], args[1], args[2])?,
        Op::DynamicSlice { sizes } => indexing::dynamic_slice(args[0], &args[1..], sizes)?,
        Op::DynamicUpdateSlice => indexing::dynamic_update_slice(args[0], args[1], &args[2..])?,
        Op::Reduce { op, axes } => reduce::reduce(*op, args[0], axes)?,
        Op::DotGeneral(dims) => contract::dot_general(args[0], args[1], dims)?,
        Op::Sort {
            dimension,
            descending,
        } => sort::sort(args[0], *dimension, *descending)?,
        Op::Argsort {
            dimension,
            descending,
        } => sort::argsort(args[0], *dimension, *descending)?,
        Op::Fft { kind, lengths } => fft::fft(*kind, lengths, args[0], ty)?,
        Op::TriangularSolve(s) => linalg::triangular_solve(s, args[0], args[1])?,
        Op::Cholesky => linalg::cholesky(args[0])?,
        Op::Lu(_) | Op::Qr(_) | Op::Eigh(_) | Op::Svd(_) | Op::Geqrf(_) | Op::Eig(_) => {
            decompose::one_part(op, args[0])?
        }
        Op::HouseholderProduct => linalg::householder_product(args[0], args[1])?,
    };
    Array::new(ty.shape.clone(), data)
}

/// The error for an op applied to a dtype it is not defined on. The shape rules reject these
/// before evaluation, so this only guards the typed loops.
fn undefined(op: &'static str, dtype: DType) -> RuntimeError {
    RuntimeError::Type(TypeError::DType {
        op,
        dtype,
        expected: "a dtype the op is defined on",
    })
}

/// The one value of type `ty` a host callback (`op`) promised, or the error naming what it
/// returned instead.
fn callback_value(
    op: &str,
    callback: u64,
    results: Vec<Array>,
    ty: &TensorType,
) -> Result<Array, RuntimeError> {
    match results.as_slice() {
        [value] if value.ty() == ty => Ok(value.clone()),
        _ => Err(RuntimeError::Callback {
            callback,
            message: format!(
                "{op} promised {ty}, the host function returned ({})",
                results
                    .iter()
                    .map(|r| r.ty().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }),
    }
}

//! Control-flow calls (`while`, `cond`, `scan`) as host steps: the instructions of one call
//! (one per result) run once and each gets its result. The compiler compiles each region
//! into an executable of its own ([`CompiledCall`]), which the step runs per iteration without
//! planning again: carried values are given to it by value, so their buffers are reused in
//! place where nothing else holds them. Artifacts carry the regions' executables with the
//! program's. A call without compiled regions runs on the interpreter.

use crate::memory::live;
use ferrax_ir::{with_elements, Func, Op, Shape, TensorType};
use ferrax_runtime::{eval_call, Array, RuntimeError};

/// A region compiled: an executable run on its operands (given by value, so their buffers may
/// be reused).
pub trait Region {
    fn run_donated(&self, args: Vec<Array>) -> Result<Vec<Array>, RuntimeError>;
    fn output_types(&self) -> Vec<TensorType>;
}

/// A call's regions, each compiled into an executable of its own (`R`).
pub enum CompiledCall<R> {
    While {
        cond: Box<R>,
        body: Box<R>,
    },
    Cond(Vec<R>),
    Scan {
        body: Box<R>,
        consts: usize,
        carry: usize,
        length: usize,
        reverse: bool,
    },
}

impl<R> CompiledCall<R> {
    /// The call `op` with `regions`, its regions compiled in order (a loop's condition and
    /// body, a cond's branches, a scan's body); `None` for another op or another count.
    pub fn of(op: &Op, regions: Vec<R>) -> Option<CompiledCall<R>> {
        let mut regions = regions.into_iter();
        let call = match op {
            Op::While(_) => CompiledCall::While {
                cond: Box::new(regions.next()?),
                body: Box::new(regions.next()?),
            },
            Op::Cond(c) => {
                let branches: Vec<R> = regions.by_ref().take(c.branches.len()).collect();
                if branches.len() != c.branches.len() {
                    return None;
                }
                CompiledCall::Cond(branches)
            }
            Op::Scan(s) => CompiledCall::Scan {
                body: Box::new(regions.next()?),
                consts: s.consts,
                carry: s.carry,
                length: s.length,
                reverse: s.reverse,
            },
            // Simplification inlines `remat`; one left runs on the interpreter.
            Op::Remat(_)
            | Op::CustomVjp(_)
            | Op::Constant(_)
            | Op::Iota { .. }
            | Op::Unary(_)
            | Op::Binary(_)
            | Op::Compare(_)
            | Op::Select
            | Op::Clamp
            | Op::Convert { .. }
            | Op::BitcastConvert { .. }
            | Op::BroadcastInDim { .. }
            | Op::Reshape { .. }
            | Op::Transpose { .. }
            | Op::Reduce { .. }
            | Op::DotGeneral(_)
            | Op::Slice { .. }
            | Op::Pad { .. }
            | Op::Concatenate { .. }
            | Op::Gather(_)
            | Op::Scatter(_)
            | Op::DynamicSlice { .. }
            | Op::DynamicUpdateSlice
            | Op::StopGradient
            | Op::Sort { .. }
            | Op::Argsort { .. } => return None,
        };
        regions.next().is_none().then_some(call)
    }

    /// The compiled regions, in the order [`CompiledCall::of`] takes them.
    pub fn regions(&self) -> Vec<&R> {
        match self {
            CompiledCall::While { cond, body } => vec![cond, body],
            CompiledCall::Cond(branches) => branches.iter().collect(),
            CompiledCall::Scan { body, .. } => vec![body],
        }
    }
}

/// Runs the call whose instructions are `members` (the first one's op and operands), on its
/// compiled regions where there are some, and stores each instruction's result in `values`.
pub(crate) fn run_call<R: Region>(
    func: &Func,
    members: &[usize],
    compiled: Option<&CompiledCall<R>>,
    values: &mut [Option<Array>],
) -> Result<(), RuntimeError> {
    let Some(&first) = members.first() else {
        return Ok(());
    };
    let ins = &func.body[first];
    let operands = ins
        .args
        .iter()
        .map(|&a| live(values, a))
        .collect::<Result<Vec<_>, _>>()?;
    let results = match compiled {
        Some(c) => run_compiled(c, operands)?,
        None => eval_call(&ins.op, &operands.iter().collect::<Vec<_>>())?,
    };
    for &j in members {
        let (k, _) = func.body[j].op.call_result().unwrap_or((0, 1));
        let out = results.get(k).cloned().ok_or(RuntimeError::ArgCount {
            expected: k + 1,
            got: results.len(),
        })?;
        values[func.instr_value(j).index()] = Some(out);
    }
    Ok(())
}

fn run_compiled<R: Region>(
    c: &CompiledCall<R>,
    mut args: Vec<Array>,
) -> Result<Vec<Array>, RuntimeError> {
    match c {
        CompiledCall::While { cond, body } => loop {
            let holds = cond.run_donated(args.clone())?;
            if holds.first().map(|p| p.elements().get(0)) != Some(ferrax_ir::Scalar::Bool(true)) {
                return Ok(args);
            }
            args = body.run_donated(args)?;
        },
        CompiledCall::Cond(branches) => {
            if args.is_empty() {
                return Err(RuntimeError::ArgCount {
                    expected: 1,
                    got: 0,
                });
            }
            let index = args.remove(0);
            match branches.get(ferrax_runtime::branch_index(&index, branches.len())) {
                Some(b) => b.run_donated(args),
                None => Err(RuntimeError::ArgCount {
                    expected: 1,
                    got: 0,
                }),
            }
        }
        CompiledCall::Scan {
            body,
            consts,
            carry,
            length,
            reverse,
        } => scan(&**body, args, (*consts, *carry), *length, *reverse),
    }
}

/// Slice `t` of `x` along its leading dimension, without that dimension.
fn row(x: &Array, t: usize) -> Result<Array, RuntimeError> {
    let dims = x.dims();
    let size: usize = dims.iter().skip(1).product();
    let data = ferrax_ir::map_elements!(x.elements(), v => v
        .get(t * size..(t + 1) * size)
        .unwrap_or_default()
        .to_vec());
    Array::new(Shape::new(dims.get(1..).unwrap_or_default().to_vec()), data)
}

/// `rows` (each of type `ty`) stacked along a new leading dimension.
fn stack(rows: Vec<Array>, ty: &TensorType) -> Result<Array, RuntimeError> {
    let mut dims = vec![rows.len()];
    dims.extend_from_slice(ty.dims());
    let mut data = ferrax_ir::Elements::zeros(ty.dtype, 0);
    with_elements!(&mut data, v => {
        v.reserve(rows.len() * ty.numel());
        for r in &rows {
            v.extend_from_slice(r.as_slice()?);
        }
    });
    Array::new(Shape::new(dims), data)
}

fn scan(
    body: &dyn Region,
    args: Vec<Array>,
    (consts, carry): (usize, usize),
    length: usize,
    reverse: bool,
) -> Result<Vec<Array>, RuntimeError> {
    let mut rest = args;
    let xs = rest.split_off((consts + carry).min(rest.len()));
    let mut carried = rest.split_off(consts.min(rest.len()));
    let consts = rest;
    let outputs = body.output_types();
    let per_step = outputs.get(carry..).unwrap_or_default();
    let mut ys: Vec<Vec<Array>> = vec![Vec::with_capacity(length); per_step.len()];
    for step in 0..length {
        let t = if reverse { length - 1 - step } else { step };
        let mut inputs = consts.clone();
        inputs.append(&mut carried);
        for x in &xs {
            inputs.push(row(x, t)?);
        }
        let mut out = body.run_donated(inputs)?;
        let y = out.split_off(carry.min(out.len()));
        carried = out;
        for (stacked, y) in ys.iter_mut().zip(y) {
            stacked.push(y);
        }
    }
    for (mut rows, ty) in ys.into_iter().zip(per_step) {
        if reverse {
            rows.reverse();
        }
        carried.push(stack(rows, ty)?);
    }
    Ok(carried)
}

//! Control-flow calls (`while`, `cond`, `scan`) as host steps. A call of several results is
//! one instruction per result; the instructions of one call (the same op but for `result`,
//! the same operands) become one step at the first of them, which runs the call once and
//! defines all their values. Each region is compiled once, with the program, into an
//! executable of its own, which the step runs per iteration without planning again: carried
//! values are given to it by value, so their buffers are reused in place where nothing else
//! holds them. The regions' code is not in artifacts yet: loading one compiles its regions
//! again.

use super::{BackendError, CpuExecutable};
use ferrax_ir::{with_elements, Func, Op, Shape, TensorType};
use ferrax_runtime::{eval_call, Array, RuntimeError};
use std::collections::HashMap;

/// The instructions that make up the calls of a program.
pub(super) struct Calls {
    /// Instructions that are part of an earlier instruction's call, and that instruction.
    taken: HashMap<usize, usize>,
}

impl Calls {
    pub(super) fn new() -> Calls {
        Calls {
            taken: HashMap::new(),
        }
    }

    /// For control-flow instruction `i`, taken in program order: the instructions of its
    /// call (`i` first), or the earlier instruction whose step runs it.
    pub(super) fn step(&mut self, func: &Func, i: usize) -> Result<Vec<usize>, usize> {
        if let Some(&first) = self.taken.get(&i) {
            return Err(first);
        }
        let ins = &func.body[i];
        let members: Vec<usize> = (i..func.body.len())
            .filter(|&j| {
                let other = &func.body[j];
                other.args == ins.args && other.op.same_call(&ins.op)
            })
            .collect();
        self.taken.extend(members.iter().map(|&j| (j, i)));
        Ok(members)
    }
}

/// A call's regions, compiled.
pub(super) enum Compiled {
    While {
        cond: Box<CpuExecutable>,
        body: Box<CpuExecutable>,
    },
    Cond(Vec<CpuExecutable>),
    Scan {
        body: Box<CpuExecutable>,
        consts: usize,
        carry: usize,
        length: usize,
        reverse: bool,
    },
}

/// The regions of the control-flow op `op` compiled, `None` for any other op.
fn compile(op: &Op) -> Result<Option<Compiled>, BackendError> {
    Ok(Some(match op {
        Op::While(w) => Compiled::While {
            cond: Box::new(CpuExecutable::compile(&w.cond)?),
            body: Box::new(CpuExecutable::compile(&w.body)?),
        },
        Op::Cond(c) => Compiled::Cond(
            c.branches
                .iter()
                .map(CpuExecutable::compile)
                .collect::<Result<_, _>>()?,
        ),
        Op::Scan(s) => Compiled::Scan {
            body: Box::new(CpuExecutable::compile(&s.body)?),
            consts: s.consts,
            carry: s.carry,
            length: s.length,
            reverse: s.reverse,
        },
        _ => return Ok(None),
    }))
}

/// The compiled regions of every call among `steps`, by the call's first instruction.
pub(super) fn compile_steps(
    func: &Func,
    steps: &[super::ExecStep],
) -> Result<HashMap<usize, Compiled>, BackendError> {
    let mut compiled = HashMap::new();
    for step in steps {
        if let super::ExecStep::Call(members) = step {
            let first = members
                .first()
                .and_then(|&i| func.body.get(i).map(|ins| (i, ins)));
            if let Some((i, ins)) = first {
                if let Some(c) = compile(&ins.op)? {
                    compiled.insert(i, c);
                }
            }
        }
    }
    Ok(compiled)
}

/// Runs the call whose instructions are `members` (the first one's op and operands), on its
/// compiled regions where there are some, and stores each instruction's result in `values`.
pub(super) fn run_call(
    func: &Func,
    members: &[usize],
    compiled: Option<&Compiled>,
    values: &mut [Option<Array>],
) -> Result<(), RuntimeError> {
    let Some(&first) = members.first() else {
        return Ok(());
    };
    let ins = &func.body[first];
    let operands = ins
        .args
        .iter()
        .map(|&a| super::live(values, a))
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

fn run_compiled(c: &Compiled, mut args: Vec<Array>) -> Result<Vec<Array>, RuntimeError> {
    match c {
        Compiled::While { cond, body } => loop {
            let holds = cond.run(&args)?;
            if holds.first().map(|p| p.elements().get(0)) != Some(ferrax_ir::Scalar::Bool(true)) {
                return Ok(args);
            }
            args = body.run_donated(args)?;
        },
        Compiled::Cond(branches) => {
            if args.is_empty() {
                return Err(RuntimeError::ArgCount {
                    expected: 1,
                    got: 0,
                });
            }
            let index = args.remove(0);
            let last = branches.len().saturating_sub(1);
            let k = match index.elements().get(0) {
                ferrax_ir::Scalar::Bool(p) => usize::from(p),
                ferrax_ir::Scalar::I32(i) => usize::try_from(i).map_or(last, |i| i.min(last)),
                _ => last,
            };
            match branches.get(k) {
                Some(b) => b.run_donated(args),
                None => Err(RuntimeError::ArgCount {
                    expected: 1,
                    got: 0,
                }),
            }
        }
        Compiled::Scan {
            body,
            consts,
            carry,
            length,
            reverse,
        } => scan(body, args, (*consts, *carry), *length, *reverse),
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
    body: &CpuExecutable,
    args: Vec<Array>,
    (consts, carry): (usize, usize),
    length: usize,
    reverse: bool,
) -> Result<Vec<Array>, RuntimeError> {
    let mut rest = args;
    let xs = rest.split_off((consts + carry).min(rest.len()));
    let mut carried = rest.split_off(consts.min(rest.len()));
    let consts = rest;
    let outputs = body.func.output_types();
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

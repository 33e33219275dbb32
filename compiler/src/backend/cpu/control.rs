//! Control-flow calls (`while`, `cond`, `scan`) as host steps. A call of several results is
//! one instruction per result; the instructions of one call (the same op but for `result`,
//! the same operands) become one step at the first of them, which runs the call once and
//! defines all their values (the runtime's `ExecStep::Call`). Each region is compiled once,
//! with the program, into an executable of its own, which the step runs per iteration (and
//! which artifacts carry beside the program's).

use super::{BackendError, CpuExecutable};
use ferrax_aot_runtime::{CompiledCall, ExecStep, Executable};
use ferrax_ir::{Func, Op};
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

/// The regions of the control-flow op `op` compiled, `None` for any other op.
fn compile(op: &Op) -> Result<Option<CompiledCall<Executable>>, BackendError> {
    if op.call_result().is_none() {
        return Ok(None);
    }
    let regions = op
        .regions()
        .into_iter()
        .map(|(_, region)| Ok(CpuExecutable::compile(region)?.exe))
        .collect::<Result<Vec<_>, BackendError>>()?;
    Ok(CompiledCall::of(op, regions))
}

/// The compiled regions of every call among `steps`, by the call's first instruction.
pub(super) fn compile_steps(
    func: &Func,
    steps: &[ExecStep],
) -> Result<HashMap<usize, CompiledCall<Executable>>, BackendError> {
    let mut compiled = HashMap::new();
    for step in steps {
        if let ExecStep::Call(members) = step {
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

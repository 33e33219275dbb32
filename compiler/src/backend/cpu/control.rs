//! Control-flow calls (`while`, `cond`) as host steps. A call of several results is one
//! instruction per result; the instructions of one call (the same op but for `result`, the
//! same operands) become one step at the first of them, which runs the call once on the
//! interpreter and defines all their values. The interpreter runs a region without
//! verifying it again per iteration.

use ferrax_ir::Func;
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

/// Runs the call whose instructions are `members` (the first one's op and operands), and
/// stores each instruction's result in `values`.
pub(super) fn run_call(
    func: &Func,
    members: &[usize],
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
    let refs: Vec<&Array> = operands.iter().collect();
    let results = eval_call(&ins.op, &refs)?;
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

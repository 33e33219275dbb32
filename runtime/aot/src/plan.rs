//! What a run does, as data: the program as scheduled, the step that runs each part of it,
//! the kernels' launches and the memory plan. The compiler makes a plan; an artifact stores
//! one; the executor runs one.

use crate::gemm::Gemm;
use crate::kernel::{KernelLaunch, Role};
use crate::memory::{MemoryReport, StepValues};
use crate::rounding::Rounding;
use ferrax_ir::{Func, Gather, Scatter, ValueId};
use serde::{Deserialize, Serialize};

/// What runs one step.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum ExecStep {
    /// Kernel `k` of the plan.
    Kernel(usize),
    /// Instruction `i`, a matrix product on `gemm`, its operands first permuted into
    /// batched-matrix layout where the `Permutes` say so (batch dimensions that do not lead,
    /// as in attention), its result rounded to a half type and widened back where the
    /// `Rounding` says so (the rounding's output is then the value it defines).
    Gemm(usize, Gemm, Option<Box<Permutes>>, Option<Rounding>),
    /// Instruction `i`, a gather or scatter, by `indexing` where it takes the dtype, else the
    /// interpreter.
    Gather(usize, Gather),
    Scatter(usize, Scatter),
    /// Instruction `i`, on the interpreter.
    Op(usize),
    /// A control-flow call on the interpreter, run once for all its instructions (one per
    /// result, the first's op and operands).
    Call(Vec<usize>),
}

/// The permutations of a product's operands (lhs, rhs) that its GEMM reads.
pub type Permutes = (Vec<usize>, Vec<usize>);

/// What a run does: the program as scheduled, its steps and kernels, and the memory plan.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunPlan {
    pub func: Func,
    /// `func` annotated with the step that runs each instruction.
    pub fused: String,
    pub steps: Vec<ExecStep>,
    pub kernels: Vec<KernelLaunch>,
    /// Per step, the values whose last use it is (never a program output).
    pub frees: Vec<Vec<ValueId>>,
    pub memory: MemoryReport,
}

/// The operands each step reads and the values it defines.
pub fn step_values(func: &Func, kernels: &[KernelLaunch], step: &ExecStep) -> StepValues {
    match *step {
        ExecStep::Op(i)
        | ExecStep::Gather(i, _)
        | ExecStep::Scatter(i, _)
        | ExecStep::Gemm(i, _, _, None) => StepValues {
            reads: func.body[i].args.clone(),
            writes: vec![func.instr_value(i)],
        },
        ExecStep::Gemm(i, _, _, Some(r)) => StepValues {
            reads: func.body[i].args.clone(),
            writes: vec![r.output],
        },
        ExecStep::Call(ref members) => StepValues {
            reads: members
                .first()
                .map_or_else(Vec::new, |&i| func.body[i].args.clone()),
            writes: members.iter().map(|&j| func.instr_value(j)).collect(),
        },
        ExecStep::Kernel(k) => {
            let of = |made: bool| {
                kernels[k]
                    .sig
                    .buffers
                    .iter()
                    .filter(|b| match b.role {
                        Role::Input => !made,
                        Role::Output | Role::Partial(_) => made,
                        Role::Scratch => false,
                    })
                    .map(|b| b.value)
                    .collect()
            };
            StepValues {
                reads: of(false),
                writes: of(true),
            }
        }
    }
}

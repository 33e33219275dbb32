//! ferrax's GPU programs at run time, without the compiler: the plan as data ([`GpuRunPlan`]),
//! the executor that loads its PTX modules on a [`GpuMachine`] (a CUDA device, or the PTX
//! emulator) and queues its steps. A GPU artifact stores such a plan.

mod check;
mod control;
mod graph;
mod plan;
mod program;

pub(crate) use check::check_gpu_plan;
pub use ferrax_runtime::cuda::MatmulPrecision;
pub use ferrax_runtime::machine::{GpuMachine, MachineError};
pub use graph::Recording;
pub use plan::{
    BlocksLaunchSpec, CallKind, CopySpec, Cubins, ElementsSpec, GpuCallPlan, GpuRunPlan, GpuStep,
    GpuTarget, KernelLaunchSpec, Param, ReduceLaunchSpec, ScanShape, ScatterLaunches, ScatterSpec,
    BLOCK,
};
pub use program::GpuProgram;

use crate::error::ArtifactError;
use ferrax_runtime::cuda::CudaError;
use ferrax_runtime::RuntimeError;

/// Why a GPU program could not be loaded or run.
#[derive(Debug, thiserror::Error)]
pub enum GpuRunError {
    #[error(transparent)]
    Cuda(#[from] CudaError),
    #[error(transparent)]
    Machine(#[from] MachineError),
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// A plan that failed its checks ([`GpuProgram::load`]).
    #[error(transparent)]
    Plan(#[from] ArtifactError),
    /// The memory plan needs more device memory than allocations can get: refused before any
    /// work is queued.
    #[error(
        "out of device memory: the program needs {needed} bytes beyond its inputs at its peak \
         (step {peak_step}), and {available} bytes are available"
    )]
    OutOfMemory {
        needed: usize,
        available: usize,
        peak_step: usize,
    },
    /// A run with work on the host (step `.0` is the first) cannot be recorded as a graph.
    #[error(
        "a run with steps on the host (the first is step {0}: a host instruction or control \
         flow) cannot be recorded as a graph"
    )]
    NotRecordable(usize),
    #[error("a recording of another program")]
    ForeignRecording,
    #[error("internal error: value %{0} is not on the device")]
    Missing(u32),
    #[error("internal error: a control-flow call lacks its region or result {0}")]
    MissingCallPart(usize),
}

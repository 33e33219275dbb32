//! The GPU executable: the program fused as on the CPU (elementwise kernels, and row kernels
//! that fold softmax- and layernorm-like rows into one launch), its kernels rendered to one PTX
//! module and launched on the device's stream, independent kernels launched together,
//! reductions and strided copies as kernels of their own, `dot_general` run by cuBLAS, reshapes
//! kept as views of the same buffer, integer matrix products by kernels of their own, control
//! flow by its regions' own programs, queued by the host (`control`). What has
//! no GPU form (arithmetic on u8 values, which kernels only convert) runs on the host: its
//! operands are copied back, evaluated by the
//! reference interpreter and copied up again. That keeps every program correct while
//! the GPU kernel set grows; [`GpuExecutable::host_steps`] says how much of a program takes
//! that path.
//!
//! This module plans (needing no device); the plan's executor part ([`GpuPlan::run`]) runs on
//! `ferrax_aot_runtime::gpu`'s executor, which also loads it from a GPU artifact.

use super::ptx::{MathMode, PtxError, PtxTarget};
use ferrax_aot_runtime::gpu::{GpuRunError, GpuStep, BLOCK};
use ferrax_aot_runtime::ArtifactError;
use ferrax_runtime::cuda::{CudaDevice, CudaError, MatmulPrecision};
use ferrax_runtime::RuntimeError;
use std::sync::Arc;

pub use ferrax_runtime::machine::{GemmOperand, GpuMachine, MachineError};
mod control;
mod grouping;
mod plan;
mod program;
mod windows;

pub use ferrax_aot_runtime::gpu::Recording;
pub use plan::GpuPlan;
pub use program::{compile_artifact, gpu_target};
pub use windows::move_across_windows;

#[derive(Debug, thiserror::Error)]
pub enum GpuError {
    #[error(transparent)]
    Cuda(#[from] CudaError),
    #[error(transparent)]
    Machine(#[from] MachineError),
    #[error(transparent)]
    Ptx(#[from] PtxError),
    #[error(transparent)]
    Verify(#[from] ferrax_ir::VerifyError),
    #[error(transparent)]
    Type(#[from] ferrax_ir::TypeError),
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    #[error("could not lower instructions {start}..{end} to a kernel")]
    Lowering { start: usize, end: usize },
    #[error(transparent)]
    Run(#[from] GpuRunError),
    #[error(transparent)]
    Artifact(#[from] ArtifactError),
    #[error("internal error: a launch binds value %{0}, which has no type, or partial results no reduction folds")]
    Missing(u32),
    #[error("internal error: `{0}` planned as a control-flow call")]
    NotACall(String),
    #[error("internal error: copy `{0}` is launched by no step")]
    Unused(String),
}

/// How a program's GPU code computes: transcendentals, square roots and quotients in kernels
/// ([`MathMode`]), f32 matrix products on cuBLAS ([`MatmulPrecision`]), and float scatter-adds
/// (`atomic_float_scatter`: by atomics, in an order that varies from run to run, as JAX's;
/// otherwise sorted, deterministic and the interpreter's bit for bit). The default is JAX's on
/// a GPU, except that scatters stay deterministic: accurate kernels, TF32 products.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct GpuOptions {
    pub math: MathMode,
    pub matmul: MatmulPrecision,
    pub atomic_float_scatter: bool,
}

impl GpuOptions {
    /// Accurate kernels, true f32 products, deterministic scatters: results within rounding of
    /// the CPU's.
    pub const HIGHEST: GpuOptions = GpuOptions {
        math: MathMode::Accurate,
        matmul: MatmulPrecision::Highest,
        atomic_float_scatter: false,
    };
}

/// A program compiled for one GPU: its plan (kernels, PTX, the executor's plan) and the
/// runtime's program loaded from it.
pub struct GpuProgram<M: GpuMachine> {
    plan: GpuPlan,
    target: PtxTarget,
    program: ferrax_aot_runtime::gpu::GpuProgram<M>,
}

/// A program compiled for a CUDA device.
pub type GpuExecutable = GpuProgram<Arc<CudaDevice>>;

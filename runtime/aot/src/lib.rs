//! ferrax's CPU executables at run time, without the compiler: the executor that runs a
//! compiled program's steps (kernel launches across the cores, matrix products on `gemm`,
//! gathers and scatters, the reference interpreter's ops), and the loader of ahead-of-time
//! artifacts, which maps their machine code and runs it with no code generation. `jit` builds
//! its executables on the same executor, so an artifact runs exactly as `jit` would.
//!
//! [`Artifact`] runs a function exported by `ferrax` (`Lowered::export`) with its calling
//! convention: the leaves of its input tree in, those of its output tree out, each checked
//! and named by its path.
//!
//! This crate depends on neither Cranelift, egg nor the IR's text parser (`tests/layering.rs`
//! checks its dependency tree): a program that only runs artifacts ships without them.
//!
//! An artifact is code: load only artifacts you built or trust. Its hash detects corruption,
//! not a forger, who can recompute it; its plan is checked so that no plan runs outside its
//! buffers, but the machine code, its relocations and the kernels' launch parameters are
//! trusted as code is.

mod artifact;
mod check;
mod code;
mod container;
mod control;
mod error;
mod executable;
mod gemm;
#[cfg(target_arch = "x86_64")]
mod gemm_bf16;
pub mod gpu;
mod gpu_artifact;
pub mod host;
pub mod image;
mod indexing;
pub mod kernel;
mod launch;
mod memory;
mod plan;
mod reuse;
mod rounding;
mod signature;
mod target;

pub use code::Code;
pub use container::{inspect_artifact, ArtifactInfo, ArtifactTarget};
pub use control::{CompiledCall, Region};
pub use error::ArtifactError;
pub use executable::Executable;
/// The array type runs take and return, and its element and tensor types.
pub use ferrax_ir::{DType, Shape, TensorType};
pub use ferrax_runtime::{Array, RuntimeError};
pub use gemm::Gemm;
pub use gpu_artifact::gpu_artifact;
pub use memory::{MemoryReport, StepValues};
pub use plan::{step_values, ExecStep, Permutes, RunPlan};
pub use reuse::reused;
pub use rounding::Rounding;
pub use signature::{Artifact, Signature, Structure};
pub use target::CpuTarget;

/// The format this build writes and reads: the container, the plan's types and the kernels'
/// calling convention.
pub const FORMAT_VERSION: u32 = 9;

/// Elements per kernel launch below which splitting across threads does not pay.
const PARALLEL_THRESHOLD: usize = 1 << 16;

fn threads() -> usize {
    rayon::current_num_threads()
}

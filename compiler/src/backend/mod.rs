//! The backends: each turns a fused program into an executable and publishes the
//! [`crate::target::Target`] fusion and lowering receive. `cpu` compiles kernels with
//! Cranelift; `ptx` renders kernels as PTX text and `gpu` plans and runs them on a
//! [`ferrax_runtime::machine::GpuMachine`]; `gemm` decides which products are batched matrix
//! products, and `liveness` when a run lets go of each value, for both.

pub mod cpu;
pub mod gemm;
pub mod gpu;
pub mod liveness;
pub mod ptx;

pub use cpu::{
    inspect_artifact, ArtifactError, ArtifactInfo, BackendError, CpuExecutable, CpuTarget,
};
pub use liveness::MemoryReport;

//! The compile pipeline: a traced program (autodiff already applied, by the transformations
//! the tracer ran) is simplified by equality saturation, then fused and compiled by the
//! [`Backend`] asked for. Scans with `unroll` > 1 are unrolled first ([`crate::unroll`]), so
//! that the simplifier sees the unrolled steps side by side. `jit`, the dumps, the conformance runner and file tests ask here for
//! an [`Executable`], so every way into the compiler takes the same stages in the same order.

use crate::backend::gpu::{GpuError, GpuExecutable, GpuOptions, GpuPlan};
use crate::backend::ptx::attention;
use crate::backend::ptx::PtxTarget;
use crate::backend::{BackendError, CpuExecutable, MemoryReport};
use crate::expand_attention::{expand_attention, expand_attention_except};
use crate::simplify::{simplify, SimplifyError};
use crate::unroll::{unroll_scans, UnrollError};
use ferrax_ir::{Func, TypeError};
use ferrax_runtime::cuda::CudaDevice;
use ferrax_runtime::{interpret, Array, RuntimeError};
use std::sync::Arc;

/// Where a program runs.
#[derive(Clone)]
pub enum Backend {
    /// The reference interpreter, op by op: nothing is compiled.
    Interpreter,
    /// Cranelift kernels, `gemm` products, the interpreter for the rest.
    Cpu,
    /// PTX kernels, reductions and cuBLAS products on a CUDA device.
    Gpu {
        device: Arc<CudaDevice>,
        options: GpuOptions,
    },
}

impl std::fmt::Debug for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Backend::Interpreter => f.write_str("Interpreter"),
            Backend::Cpu => f.write_str("Cpu"),
            Backend::Gpu { device, options } => f
                .debug_struct("Gpu")
                .field("ordinal", &device.ordinal())
                .field("options", options)
                .finish(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    #[error(transparent)]
    Unroll(#[from] UnrollError),
    #[error(transparent)]
    Simplify(#[from] SimplifyError),
    #[error(transparent)]
    Cpu(#[from] BackendError),
    #[error(transparent)]
    Gpu(#[from] GpuError),
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    #[error(transparent)]
    Type(#[from] TypeError),
}

/// A program compiled for one backend (boxed: an executable is made once and run many times).
pub enum Executable {
    Interpreter(Box<Func>),
    Cpu(Box<CpuExecutable>),
    Gpu(Box<GpuExecutable>),
}

/// A program through every stage of the pipeline.
pub struct Compiled {
    /// The program after simplification (what the backend compiled).
    pub simplified: Func,
    /// What the simplifier did: stop reasons and the rewrites that fired.
    pub simplify_report: String,
    pub executable: Executable,
}

/// `func` with its scans unrolled, its attention spelled in plain ops where `backend` has no
/// kernel for it, simplified and compiled for `backend`.
pub fn compile(func: &Func, backend: &Backend) -> Result<Compiled, PipelineError> {
    let (simplified, simplify_report) = match backend {
        Backend::Interpreter => unrolled_and_simplified(func)?,
        Backend::Cpu => unrolled_and_simplified(&expand_attention(func)?)?,
        Backend::Gpu { .. } => simplify_for_gpu(func)?,
    };
    let executable = compile_simplified(&simplified, backend)?;
    Ok(Compiled {
        simplified,
        simplify_report,
        executable,
    })
}

/// `func` as a GPU compiles it, with no device needed: its attention spelled in plain ops where
/// no GPU kernel computes it, its scans unrolled, simplified; and what the simplifier did.
pub fn simplify_for_gpu(func: &Func) -> Result<(Func, String), PipelineError> {
    unrolled_and_simplified(&expand_attention_except(func, &attention::supports)?)
}

/// `func` with its scans unrolled, simplified; and what the simplifier did.
fn unrolled_and_simplified(func: &Func) -> Result<(Func, String), PipelineError> {
    let (simplified, report) = simplify(&unroll_scans(func)?)?;
    Ok((simplified, report.to_string()))
}

/// `func` compiled for `backend` as it is, without simplifying it first (a program already
/// simplified, or one whose exact instructions are under test). Its scans' `unroll` is not
/// lowered here: they run as plain loops, with the same results.
pub fn compile_simplified(func: &Func, backend: &Backend) -> Result<Executable, PipelineError> {
    Ok(match backend {
        Backend::Interpreter => {
            ferrax_ir::verify(func).map_err(BackendError::from)?;
            Executable::Interpreter(Box::new(func.clone()))
        }
        Backend::Cpu => Executable::Cpu(Box::new(CpuExecutable::compile(func)?)),
        Backend::Gpu { device, options } => {
            Executable::Gpu(Box::new(GpuExecutable::compile(func, device, *options)?))
        }
    })
}

impl Executable {
    /// Runs on host arrays, which the run may consume (their buffers are reused where no one
    /// else holds them); a GPU program copies them to its device and its results back.
    pub fn run(&self, args: Vec<Array>) -> Result<Vec<Array>, PipelineError> {
        Ok(match self {
            Executable::Interpreter(func) => interpret(func, &args)?,
            Executable::Cpu(exe) => exe.run_donated(args)?,
            Executable::Gpu(exe) => exe.run(&args)?,
        })
    }

    /// The program as fused for the backend, each step headed by what runs it (CPU programs).
    pub fn fused(&self) -> Option<&str> {
        match self {
            Executable::Cpu(exe) => Some(exe.fused()),
            Executable::Interpreter(_) | Executable::Gpu(_) => None,
        }
    }

    /// The kernels, each in kernel IR followed by its machine-level form (Cranelift IR on the
    /// CPU; a GPU program's are in its [`Executable::ptx`]).
    pub fn kernels(&self) -> Vec<String> {
        match self {
            Executable::Cpu(exe) => exe
                .kernels()
                .map(|(k, clif)| format!("{k}\n{clif}"))
                .collect(),
            Executable::Gpu(exe) => exe.kernels().iter().map(ToString::to_string).collect(),
            Executable::Interpreter(_) => Vec::new(),
        }
    }

    /// The memory plan's figures (peak bytes of live values).
    pub fn memory(&self) -> Option<MemoryReport> {
        match self {
            Executable::Cpu(exe) => Some(exe.memory()),
            Executable::Gpu(exe) => Some(exe.memory()),
            Executable::Interpreter(_) => None,
        }
    }

    /// The values live when the memory plan peaks, largest first (CPU programs).
    pub fn live_at_peak(&self) -> Option<String> {
        match self {
            Executable::Cpu(exe) => Some(exe.live_at_peak()),
            Executable::Interpreter(_) | Executable::Gpu(_) => None,
        }
    }

    /// The PTX module a GPU program loaded.
    pub fn ptx(&self) -> Option<&str> {
        match self {
            Executable::Gpu(exe) => Some(exe.ptx()),
            Executable::Interpreter(_) | Executable::Cpu(_) => None,
        }
    }
}

/// The PTX module of `func` fused for the GPU, rendered for `target` without a device.
pub fn render_ptx(
    func: &Func,
    target: PtxTarget,
    options: GpuOptions,
) -> Result<String, PipelineError> {
    Ok(GpuPlan::new(func, target, options.math)?.ptx)
}

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

use super::gemm::Gemm;
use super::ptx::{MathMode, PtxError};
use ferrax_runtime::cuda::{CudaDevice, CudaError, MatmulPrecision};
use ferrax_runtime::RuntimeError;
use std::sync::Arc;

pub use ferrax_runtime::machine::{GemmOperand, GpuMachine, MachineError};
mod control;
mod grouping;
mod plan;
mod program;

pub use plan::GpuPlan;

/// Threads per block of elementwise kernels.
const BLOCK: u32 = 256;

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
    #[error("internal error: value %{0} is not on the device")]
    Missing(u32),
    #[error("internal error: `{0}` planned as a control-flow call")]
    NotACall(String),
    #[error("internal error: a control-flow call lacks its region or result {0}")]
    MissingCallPart(usize),
}

enum GpuStep {
    /// Launch `l`: one kernel, or several independent ones in one entry (before
    /// [`grouping::group_launches`], kernel `l` alone).
    Launch(usize),
    /// A `dot_general` on cuBLAS, or for integers by kernel `int` of `int_gemms`, its operands
    /// first copied into matrix layout where given.
    Gemm {
        index: usize,
        gemm: Gemm,
        lhs_copy: Option<usize>,
        rhs_copy: Option<usize>,
        int: Option<usize>,
    },
    /// Reduction launch `launch` computing instructions `instrs`, one per part (before
    /// [`grouping::group_launches`], reduction kernel `launch` alone).
    Reduce { launch: usize, instrs: Vec<usize> },
    /// Instruction `index`, a reduction split in two launches: `partial` into a buffer of
    /// partial results, then `total` of those (before [`grouping::group_launches`], reduction
    /// kernels).
    SplitReduce {
        index: usize,
        partial: usize,
        total: usize,
    },
    /// Instruction and the strided copies that write its result, each with the operand it
    /// reads, in order.
    Copies(usize, Vec<(usize, usize)>),
    /// Instruction `index`, a scatter by the entries of scatter `kernels`.
    Scatter { index: usize, kernels: usize },
    /// Instruction `index`, a gather by gather kernel `kernel`.
    Gather { index: usize, kernel: usize },
    /// A reshape: the result shares the operand's buffer.
    View(usize),
    /// A constant (or an iota), copied to the device once, when the program is loaded.
    Constant(usize),
    /// An instruction run on the host.
    Host(usize),
    /// The instructions of one control-flow call (one per result, the same operands), which
    /// run the call once by the regions of the plan's call `call`.
    Call { members: Vec<usize>, call: usize },
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

/// A program compiled for one GPU: its plan, and its module and constants loaded there.
pub struct GpuProgram<M: GpuMachine> {
    plan: GpuPlan,
    machine: M,
    constants: std::collections::HashMap<usize, M::Array>,
    /// Per launch, its entry.
    functions: Vec<M::Function>,
    reduce_functions: Vec<M::Function>,
    copy_functions: Vec<M::Function>,
    int_gemm_functions: Vec<M::Function>,
    /// Per scatter, its entries in launch order.
    scatter_functions: Vec<Vec<M::Function>>,
    gather_functions: Vec<M::Function>,
    /// Per control-flow call, its regions' programs.
    calls: Vec<control::Call<M>>,
    matmul: MatmulPrecision,
}

/// A program compiled for a CUDA device.
pub type GpuExecutable = GpuProgram<Arc<CudaDevice>>;

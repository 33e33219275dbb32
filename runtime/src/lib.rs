//! ferrax's runtime: concrete arrays and the reference interpreter, the numerical oracle that
//! every backend is tested against; the CUDA device, and the [`GpuMachine`] trait it implements
//! (what running a GPU program asks of a GPU).

mod array;
pub mod callbacks;
pub mod cuda;
mod interp;
pub mod machine;
pub mod parallel;
pub mod recycle;

pub use array::Array;
pub use cuda::{CudaDevice, CudaError, DeviceArray, MatmulPrecision};
pub use interp::{
    branch_index, check_args, ensure_allocatable, eval_call, eval_op, interpret, wide_unary,
    SharedParts,
};
pub use machine::{GemmOperand, GpuMachine, MachineError};

use ferrax_ir::{DType, Shape, TensorType, VerifyError};

#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum RuntimeError {
    #[error("{len} elements cannot fill shape {shape}")]
    DataLength { shape: Shape, len: usize },
    #[error("expected {expected} data, the array holds {got}")]
    DType { expected: DType, got: DType },
    #[error("expected a one-element array, got {ty}")]
    NotScalar { ty: TensorType },
    #[error("function takes {expected} argument(s), got {got}")]
    ArgCount { expected: usize, got: usize },
    #[error("argument {index} should be {expected}, got {got}")]
    ArgType {
        index: usize,
        expected: TensorType,
        got: TensorType,
    },
    #[error(transparent)]
    Verify(#[from] VerifyError),
    #[error(transparent)]
    Type(#[from] ferrax_ir::TypeError),
    #[error("out of memory: an array of type {ty} cannot be allocated")]
    OutOfMemory { ty: TensorType },
    #[error("host callback {callback}: {message}")]
    Callback { callback: u64, message: String },
    #[error("internal error: value %{value} was released before its last use")]
    Freed { value: u32 },
}

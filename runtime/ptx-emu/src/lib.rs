//! An emulator for the PTX ferrax's renderer emits, so that kernels are run, not only
//! assembled, where there is no GPU: each thread is interpreted on its own (registers,
//! predicates, its own program counter, so divergent branches need nothing special);
//! `shfl.sync` and `mma.sync` wait for every live lane of the warp and `bar.sync` for every live thread of the
//! block, as on the hardware; the warps of a block run in a varying order, each as far as it can
//! alone (through its shuffles, up to a barrier).
//!
//! It implements what the renderer uses, with PTX's semantics: IEEE arithmetic rounded to
//! nearest (`.rn`; fma fused), ordered and unordered compares, conversions with their rounding
//! modes (float to integer saturating, NaN to 0), `copysign`, predicated instructions, 128-bit
//! vector loads and stores, reductions into global memory (`red`), shared memory, butterfly
//! shuffles, packing conversions (`cvt.rn.bf16x2.f32`) and the tensor cores' bf16 matrix product
//! (`mma.sync ... m16n8k16 ... bf16`, a warp instruction like a shuffle), and kernel parameters
//! read through their addresses (`mov` of a parameter's name, `ld.param` at an offset: 8
//! bytes a parameter, in order, as the CUDA ABI lays out `.u64` ones). Fast math's
//! approximate instructions are computed correctly rounded.
//!
//! Kernels run one launch at a time ([`Module::parse`], [`Module::entry`], [`launch`] over a
//! [`Memory`]), or whole programs run on an [`Emulator`], a
//! [`GpuMachine`](ferrax_runtime::GpuMachine) like the CUDA device, through the same executor.
//!
//! # Errors and panics
//!
//! What the toolchain or the driver would refuse is an [`EmulatorError`]: PTX it cannot read, a
//! register the entry does not declare (as `ptxas` refuses it), an entry the module lacks, a
//! launch the driver would not start (see [`launch`]), a host copy outside every buffer.
//!
//! A bug in a running kernel **panics**, deliberately, naming the thread and instruction: that
//! is what the emulator is for in tests. Reading a register no instruction has written, touching
//! global memory outside every buffer (the padding between buffers and the next buffer
//! included), a load or store not aligned to its size, shared memory out of bounds, threads
//! waiting at different barriers, a shuffle or matrix product with exited lanes, dividing an integer by zero, or
//! shared memory one warp uses after another wrote it (or writes after another used it) with no
//! barrier between. So does an instruction, type, rounding mode or operand it does not know,
//! which it rejects by name.
#![warn(clippy::panic)]

mod block;
mod bytes;
mod exec;
mod machine;
mod memory;
mod parse;
mod values;

pub use block::launch;
pub use bytes::{array_of, bytes_of};
pub use machine::{EmulatedArray, EmulatedGraph, Emulator};
pub use memory::Memory;
pub use parse::{Entry, Module};

/// What the emulator refuses, as the toolchain, driver or host copy would.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EmulatorError {
    #[error("cannot read {what}: {line}")]
    Parse { line: String, what: String },
    #[error("{entry}: register {register} not declared")]
    Undeclared { entry: String, register: String },
    #[error("no entry {0}")]
    NoEntry(String),
    #[error("launch refused: {0}")]
    Launch(String),
    #[error("out of memory: {bytes} bytes asked, {available} available")]
    OutOfMemory { bytes: usize, available: usize },
    #[error("{len} bytes at {address:#x} outside every buffer")]
    Outside { address: u64, len: usize },
}

//! ferrax's compiler: IR→IR transformations (autodiff, batching, equality-saturation
//! simplification, dead-code elimination), fusion into kernels, the kernel IR, and the CPU
//! backend (Cranelift).

pub mod autodiff;
pub mod backend;
pub mod batching;
pub mod dce;
pub mod fuse;
pub mod kernel;
pub mod pipeline;
pub mod simplify;
pub mod target;

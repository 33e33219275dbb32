//! ferrax's compiler: IR→IR transformations (autodiff, batching, equality-saturation
//! simplification, dead-code elimination), fusion into kernels, the kernel IR, and the CPU
//! backend (Cranelift).

/// A fingerprint of the sources this compiler was built from (its own, the IR's and the
/// runtime's; see `build.rs`): part of the persistent compile cache's key.
pub const SOURCE_FINGERPRINT: &str = env!("FERRAX_SOURCE_FINGERPRINT");

pub mod autodiff;
pub mod backend;
pub mod batching;
pub mod dce;
pub mod expand_attention;
pub mod fuse;
pub mod kernel;
pub mod pipeline;
pub mod remat;
pub mod simplify;
pub mod target;
pub mod unroll;

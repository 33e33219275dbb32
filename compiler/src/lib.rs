//! ferrax's compiler: IR→IR transformations (autodiff, equality-saturation simplification,
//! dead-code elimination) and, in time, the backends (fusion, kernel IR, Cranelift and PTX
//! codegen).

pub mod autodiff;
pub mod dce;
pub mod simplify;

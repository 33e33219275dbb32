//! ferrax's compiler: IR→IR transformations and, in time, the backends (egg simplification,
//! fusion, kernel IR, Cranelift and PTX codegen).

pub mod autodiff;
pub mod dce;

#![doc = include_str!("../README.md")]

pub use ferrax_compiler as compiler;
pub use ferrax_derive::Tree;
pub use ferrax_ir as ir;
pub use ferrax_ir::{DType, Func, Shape, TensorType};
pub use ferrax_runtime as runtime;
pub use ferrax_runtime::{Array, MatmulPrecision};
pub use ferrax_stablehlo as stablehlo;
pub use ferrax_trace::Tree;
pub use ferrax_trace::{
    custom_vjp, custom_vjp_named, grad, grad_with_aux, hessian, jit, jvp, nn, trace,
    value_and_grad, value_and_grad_with_aux, vjp, At, Axes, Compiled, Device, Error, IndexMode,
    Jit, Lowered, Operand, Pullback, Result, Signature, Static, Tensor, TreeDef,
};

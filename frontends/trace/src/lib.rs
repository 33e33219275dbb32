//! ferrax's tracing frontend: the [`Tensor`] users program against, pytrees ([`Tree`]),
//! [`trace`] (`jax.make_jaxpr`), [`jit`], and the autodiff transforms ([`grad`], [`jvp`], ...).

mod error;
mod jit;
pub mod nn;
mod operators;
mod ops;
mod tensor;
mod trace;
mod transforms;
mod tree;

pub use error::{Error, Result};
pub use jit::{jit, Jit, Signature};
pub use ops::{Axes, Operand, ShapeArg};
pub use tensor::Tensor;
pub use trace::trace;
pub use transforms::{grad, hessian, jvp, value_and_grad, vjp, Pullback};
pub use tree::{Tree, TreeDef};

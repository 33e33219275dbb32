//! ferrax's tracing frontend: the [`Tensor`] users program against, pytrees ([`Tree`]),
//! [`trace`] (`jax.make_jaxpr`), [`jit`], the autodiff transforms ([`grad`], [`jvp`], ...), tree
//! utilities ([`tree_map`], ...), optimizers ([`optim`]), random numbers ([`random`]) and
//! [`checkpoint`]s.

mod aot;
mod callback;
pub mod checkpoint;
pub mod debug;
mod device;
mod dump;
mod error;
pub mod fft;
mod jit;
pub mod lax;
pub mod nn;
mod operators;
mod ops;
pub mod optim;
mod persistent;
pub mod random;
pub mod scipy;
mod tensor;
mod trace;
mod trace_ctx;
mod transforms;
mod tree;
mod tree_util;
mod vmap;

pub use aot::{Artifact, Batch};
pub use callback::{io_callback, pure_callback, VmapMethod};
pub use device::Device;
pub use error::{Error, Result};
pub use ferrax_ir::{ConvDims, ConvPadding, Convolution};
pub use jit::{jit, Compiled, Jit, Lowered, Signature};
pub use lax::{remat, remat_with, RematPolicy};
pub use ops::{
    custom_jvp, custom_jvp_named, custom_vjp, custom_vjp_named, At, Axes, ConvolveMode,
    DotPrecision, IndexMode, MatrixNorm, Operand, PadMode, Padding, QuantileMethod, ShapeArg,
    Window,
};
pub use tensor::Tensor;
pub use trace::trace;
pub use transforms::{
    grad, grad_with_aux, jvp, value_and_grad, value_and_grad_with_aux, vjp, Pullback,
};
pub use tree::{Static, StaticValue, Tree, TreeDef};
pub use tree_util::{
    global_norm, ravel_pytree, tree_flatten, tree_leaves, tree_map, tree_map2, tree_map_n,
    tree_structure, tree_sum, tree_unflatten, zeros_like,
};
pub use vmap::{
    hessian, hessian_tree, jacfwd, jacfwd_tree, jacrev, jacrev_tree, vmap, vmap_axes, AxisSpec,
    AxisTree,
};

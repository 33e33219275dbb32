#![doc = include_str!("../README.md")]

pub use ferrax_aot_runtime as aot_runtime;
pub use ferrax_compiler as compiler;
pub use ferrax_compiler::backend::ptx::PtxTarget;
pub use ferrax_derive::Tree;
pub use ferrax_ir as ir;
pub use ferrax_ir::{DType, Func, Shape, TensorType};
pub use ferrax_runtime as runtime;
pub use ferrax_runtime::{Array, MatmulPrecision};
pub use ferrax_stablehlo as stablehlo;

mod exported;
pub use exported::{Exported, ExportedError};
pub use ferrax_trace::Tree;
pub use ferrax_trace::{
    checkpoint, custom_jvp, custom_jvp_named, custom_vjp, custom_vjp_named, debug, fft,
    global_norm, grad, grad_with_aux, hessian, hessian_tree, io_callback, jacfwd, jacfwd_tree,
    jacrev, jacrev_tree, jit, jvp, lax, nn, optim, pure_callback, random, ravel_pytree, remat,
    remat_with, scipy, trace, tree_flatten, tree_leaves, tree_map, tree_map2, tree_map_n,
    tree_structure, tree_sum, tree_unflatten, value_and_grad, value_and_grad_with_aux, vjp, vmap,
    vmap_axes, zeros_like, Artifact, At, Axes, AxisSpec, AxisTree, Batch, Compiled, ConvDims,
    ConvPadding, Convolution, ConvolveMode, Device, DotPrecision, Error, IndexMode, Jit, Lowered,
    MatrixNorm, Operand, PadMode, Padding, Pullback, QuantileMethod, RematPolicy, Result,
    Signature, Static, Tensor, TreeDef, VmapMethod, Window,
};

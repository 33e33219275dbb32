//! Neural-network layers and helpers (`jax.nn`, with the layers flax and optax provide), as
//! plain functions over [`Tensor`]s and parameter [`Tree`](crate::Tree)s in the style of JAX's
//! functional libraries: no module objects, no hidden state. A model's parameters are a tree
//! (of [`Linear`]s, [`Attention`]s, `BTreeMap`s, derived structs) that `jit`, `grad` and
//! [`optim`](crate::optim) take as they are, and a layer is a function of its inputs and its
//! parameters. Everything is written with tensor methods, so it traces to plain IR that the
//! compiler fuses (a layer norm or a softmax becomes one row kernel), and its derivatives are
//! autodiff's. Initializers ([`initializers`]) and [`dropout`] draw from
//! [`random`](crate::random) keys.
//!
//! ```
//! use ferrax_ir::DType;
//! use ferrax_trace::{nn, random, Tensor};
//! use ferrax_trace::nn::initializers;
//! let key = random::key(0);
//! let layer = nn::Linear {
//!     w: initializers::glorot_uniform().init(&key, [4, 3], DType::F32),
//!     b: Some(initializers::zeros().init(&key, [3], DType::F32)),
//! };
//! let x = Tensor::ones(DType::F32, [2, 4]);
//! let y = nn::gelu(&nn::layer_norm(&nn::linear(&x, &layer), &Tensor::scalar(1.0f32),
//!                                  &Tensor::scalar(0.0f32), 1e-5), true);
//! assert_eq!(y.shape(), [2, 3]);
//! ```

mod activation;
mod attention;
mod dropout;
pub mod initializers;
mod linear;
mod loss;
mod norm;
mod pool;

pub use crate::lax::{erf, erfc};
pub use activation::{
    celu, elu, gelu, glu, hard_sigmoid, hard_silu, hard_tanh, leaky_relu, log_sigmoid, mish, relu6,
    selu, silu, soft_sign, softplus, sparse_plus, sparse_sigmoid, squareplus, standardize,
};
pub use attention::{
    causal_self_attention, causal_self_attention_with, dot_product_attention,
    dot_product_attention_with, Attention, AttentionOptions,
};
pub use dropout::dropout;
pub use linear::{linear, linear_with, Linear};
pub use loss::{
    accuracy, cosine_distance, cosine_similarity, hinge_loss, huber_loss, kl_divergence,
    kl_divergence_with_log_targets, l2_loss, log_cosh, poly_loss_cross_entropy,
    sigmoid_binary_cross_entropy, sigmoid_focal_loss, smooth_labels, softmax_cross_entropy,
    softmax_cross_entropy_with_integer_labels, squared_error,
};
pub use norm::{layer_norm, rms_norm};
pub use pool::{avg_pool, max_pool};

use crate::ops::Axes;
use crate::Tensor;

/// `max(x, 0)`, with JAX's derivative in both modes (a `custom_jvp`, as JAX's): 1 where
/// `x > 0`, else 0 (no half-split at zero).
#[track_caller]
pub fn relu(x: &Tensor) -> Tensor {
    let f = crate::custom_jvp_named(
        "relu",
        |x: Tensor| x.maximum(0.0),
        |x: Tensor, t: Tensor| (x.maximum(0.0), x.greater(0.0).select(t, 0.0)),
    );
    f(x.clone())
}

/// `log(sum(exp(x)))` over `axes`, computed stably: the maximum is subtracted first and held
/// constant under differentiation, as in `jax.nn.logsumexp`; an infinite maximum is taken as
/// 0, so that a slice of `-inf` (fully masked) gives `-inf` and one holding `+inf` gives
/// `+inf`, not NaN.
#[track_caller]
pub fn logsumexp(x: &Tensor, axes: impl Into<Axes>) -> Tensor {
    let axes = axes.into();
    let largest = x.max_keepdims(axes.clone());
    let m = largest.is_finite().select(&largest, 0.0).stop_gradient();
    let s = (x - &m).exp().sum_keepdims(axes.clone()).log() + &m;
    match axes {
        Axes::All => s.reshape(Vec::<usize>::new()),
        list => s.squeeze(list),
    }
}

/// `exp(x) / sum(exp(x))` along `axis`.
#[track_caller]
pub fn softmax(x: &Tensor, axis: i32) -> Tensor {
    let unnormalized = (x - x.max_keepdims(axis).stop_gradient()).exp();
    let total = unnormalized.sum_keepdims(axis);
    unnormalized / total
}

/// `x - logsumexp(x)` along `axis`.
#[track_caller]
pub fn log_softmax(x: &Tensor, axis: i32) -> Tensor {
    let shifted = x - x.max_keepdims(axis).stop_gradient();
    let lse = shifted.exp().sum_keepdims(axis).log();
    shifted - lse
}

/// Rows of `table` (`[vocab, ..]`) picked by integer `ids` (`table[ids]`): shape
/// `ids.shape + table.shape[1:]`. Out-of-range ids clamp, negative ones count from the end;
/// the gradient with respect to `table` is a scatter-add of the rows' cotangents. On both
/// backends the lookup is read in place by the kernel that uses it.
#[track_caller]
pub fn embedding(table: &Tensor, ids: &Tensor) -> Tensor {
    table.at(ids).get()
}

/// `ids` one-hot over `classes` as `dtype` (`jax.nn.one_hot`); ids outside `0..classes` give
/// rows of zeros.
#[track_caller]
pub fn one_hot(ids: &Tensor, classes: usize, dtype: ferrax_ir::DType) -> Tensor {
    ids.one_hot(classes, dtype)
}

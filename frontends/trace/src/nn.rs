//! Neural-network helpers (`jax.nn`), written with tensor methods so they trace to plain IR.

use crate::ops::Axes;
use crate::Tensor;

/// `max(x, 0)`, with JAX's derivative: 1 where `x > 0`, else 0 (no half-split at zero).
#[track_caller]
pub fn relu(x: &Tensor) -> Tensor {
    let f = crate::custom_vjp_named(
        "relu",
        |x: Tensor| x.maximum(0.0),
        |x: Tensor| (x.maximum(0.0), x),
        |x: Tensor, g: Tensor| x.greater(0.0).select(g, 0.0),
    );
    f(x.clone())
}

/// `log(sum(exp(x)))` over `axes`, computed stably: the maximum is subtracted first and held
/// constant under differentiation, as in `jax.nn.logsumexp`.
#[track_caller]
pub fn logsumexp(x: &Tensor, axes: impl Into<Axes>) -> Tensor {
    let axes = axes.into();
    let m = x.max_keepdims(axes.clone()).stop_gradient();
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

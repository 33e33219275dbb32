//! Losses and metrics as optax computes them: against integer labels (indices, so no one-hot
//! matrix of the vocabulary's size is built), label distributions, binary labels, and the
//! regression losses.
//!
//! The label's logit is picked by comparing every class index with the label inside the
//! row's sum, not gathered: a gather from the shifted logits would make a fused kernel write
//! them all out for one element a row, and its gradient would be a scatter into an array of
//! the logits' size. Compared, the pick fuses into the row's reductions and its gradient
//! into the softmax's, so the loss and its gradient each read the logits' rows once.

use crate::tensor::Tensor;
use ferrax_ir::{DType, TensorType};
use std::panic::Location;

/// The per-example cross-entropy `logsumexp(logits) - logits[label]` over the last axis
/// (`optax.softmax_cross_entropy_with_integer_labels`): `logits` `[.., classes]`, `labels`
/// integer `[..]`; the result has the labels' shape. The maximum is subtracted first and held
/// constant under differentiation, so large logits neither overflow nor change the gradient.
#[track_caller]
pub fn softmax_cross_entropy_with_integer_labels(logits: &Tensor, labels: &Tensor) -> Tensor {
    let op = "softmax_cross_entropy_with_integer_labels";
    let ty = TensorType::new(logits.dtype(), labels.shape().to_vec());
    if let Some(failed) = check_labels(op, logits, labels, ty) {
        return failed;
    }
    let shifted = logits - logits.max_keepdims(-1).stop_gradient();
    let classes = logits.shape().last().copied().unwrap_or(0);
    let label_logits = is_label(labels, classes).select(&shifted, 0.0).sum(-1);
    let log_normalizers = shifted.exp().sum(-1).log();
    log_normalizers - label_logits
}

/// `[.., classes]` booleans, true at each row's label: the class `take_along_axis` reads
/// (negative labels count from the end, then labels clamp to `0..classes`), for labels of any
/// integer type, compared in a type that holds every label and class index exactly.
#[track_caller]
fn is_label(labels: &Tensor, classes: usize) -> Tensor {
    let dtype = labels.dtype();
    let last = classes.saturating_sub(1);
    let wide = if matches!(dtype, DType::I64 | DType::U64 | DType::U32)
        || i32::try_from(classes).is_err()
    {
        DType::I64
    } else {
        DType::I32
    };
    let index = if dtype.is_signed_int() {
        labels
            .astype(wide)
            .normalized_index(classes)
            .clip(0, last as f64)
    } else {
        // Clamped in their own type where it holds the last class (else every label is below
        // it), so that widening keeps their values.
        let bits = 8 * dtype.size_bytes() as u32;
        let largest = u128::MAX >> (128 - bits);
        let clamped = match last as u128 <= largest {
            true => labels.clip(0, last as f64),
            false => labels.clone(),
        };
        clamped.astype(wide)
    };
    let mut dims = labels.shape().to_vec();
    dims.push(classes);
    let class = Tensor::iota(wide, dims.clone(), dims.len() - 1);
    index
        .expand_dims(-1)
        .broadcast_to(dims.as_slice())
        .equal(&class)
}

/// The fraction of rows whose largest logit is at the label's index, as an f32 scalar (the
/// first maximum on ties, as `jnp.argmax`).
#[track_caller]
pub fn accuracy(logits: &Tensor, labels: &Tensor) -> Tensor {
    if let Some(failed) = check_labels("accuracy", logits, labels, TensorType::scalar(DType::F32)) {
        return failed;
    }
    let predicted = logits.argmax(-1);
    predicted
        .equal(labels.astype(predicted.dtype()))
        .astype(DType::F32)
        .mean(..)
}

/// A failed tensor of type `ty` unless `labels` is an integer tensor of `logits`' shape
/// without its last axis (or an operand has failed already: operations pass that on).
#[track_caller]
fn check_labels(op: &str, logits: &Tensor, labels: &Tensor, ty: TensorType) -> Option<Tensor> {
    if logits.error().is_some() || labels.error().is_some() {
        return None;
    }
    let shape = logits.shape();
    let message = if logits.ndim() == 0 {
        format!("{op}: logits {} need a class axis", logits.ty())
    } else if !labels.dtype().is_int() {
        format!("{op}: labels {} must be integers", labels.ty())
    } else if labels.shape() != &shape[..shape.len() - 1] {
        format!(
            "{op}: labels {} must have the shape of logits {} without its last axis",
            labels.ty(),
            logits.ty()
        )
    } else {
        return None;
    };
    Some(Tensor::failed(Location::caller(), message, ty))
}

/// The cross-entropy against label distributions (`optax.softmax_cross_entropy`):
/// `−Σ labels·log_softmax(logits)` over the last axis; the result has the batch's shape.
#[track_caller]
pub fn softmax_cross_entropy(logits: &Tensor, labels: &Tensor) -> Tensor {
    -(labels * super::log_softmax(logits, -1)).sum(-1)
}

/// The elementwise binary cross-entropy of logits against labels in [0, 1]
/// (`optax.sigmoid_binary_cross_entropy`): `−labels·log σ(x) − (1 − labels)·log σ(−x)`, by
/// log-sigmoids so that large logits neither overflow nor lose the small probability.
#[track_caller]
pub fn sigmoid_binary_cross_entropy(logits: &Tensor, labels: &Tensor) -> Tensor {
    let log_p = super::log_sigmoid(logits);
    let log_not_p = super::log_sigmoid(&-logits);
    -(labels * log_p) - (-labels + 1.0) * log_not_p
}

/// The focal loss for binary labels (`optax.sigmoid_focal_loss`): the sigmoid cross-entropy
/// scaled by `(1 − p_t)^gamma`, `p_t` the probability of the label (`p·y + (1 − p)(1 − y)`,
/// soft labels too), taken in log space as optax does; with `alpha`, positives weighted by
/// `alpha` and negatives by `1 − alpha`.
#[track_caller]
pub fn sigmoid_focal_loss(
    logits: &Tensor,
    labels: &Tensor,
    alpha: Option<f64>,
    gamma: f64,
) -> Tensor {
    let labels = labels.astype(logits.dtype());
    let ce = sigmoid_binary_cross_entropy(logits, &labels);
    let not_labels = -&labels + 1.0;
    // log((1 − y)·p + y·(1 − p)) as a weighted log-sum-exp of log p and log(1 − p), each term
    // of weight 0 left out.
    let log_p = not_labels
        .not_equal(0.0)
        .select(super::log_sigmoid(logits), f64::NEG_INFINITY);
    let log_q = labels
        .not_equal(0.0)
        .select(super::log_sigmoid(&-logits), f64::NEG_INFINITY);
    let max = log_p.maximum(&log_q);
    let max = max.is_finite().select(&max, 0.0).stop_gradient();
    let sum = (&log_p - &max).exp() * &not_labels + (&log_q - &max).exp() * &labels;
    let log_one_minus_p_t = sum.abs().log() + max;
    let loss = ce * (log_one_minus_p_t * gamma).exp();
    match alpha {
        None => loss,
        Some(a) => (&labels * a + not_labels * (1.0 - a)) * loss,
    }
}

/// `½·(predictions − targets)²` elementwise (`optax.l2_loss`).
#[track_caller]
pub fn l2_loss(predictions: &Tensor, targets: &Tensor) -> Tensor {
    (predictions - targets).square() * 0.5
}

/// The Huber loss elementwise (`optax.huber_loss`): `½·e²` where `|e| ≤ delta`, else
/// `delta·(|e| − ½·delta)`, `e = predictions − targets`.
#[track_caller]
pub fn huber_loss(predictions: &Tensor, targets: &Tensor, delta: f64) -> Tensor {
    let errors = (predictions - targets).abs();
    let quadratic = errors.minimum(delta);
    let linear = errors - &quadratic;
    quadratic.square() * 0.5 + linear * delta
}

/// `(predictions − targets)²` elementwise (`optax.squared_error`).
#[track_caller]
pub fn squared_error(predictions: &Tensor, targets: &Tensor) -> Tensor {
    (predictions - targets).square()
}

/// `log(cosh(predictions − targets))` elementwise, without overflow (`optax.log_cosh`:
/// `logaddexp(e, −e) − log 2`).
#[track_caller]
pub fn log_cosh(predictions: &Tensor, targets: &Tensor) -> Tensor {
    let errors = predictions - targets;
    errors.logaddexp(&-&errors) - std::f64::consts::LN_2
}

/// The cosine of the angle between predictions and targets over the last axis
/// (`optax.cosine_similarity`): each divided by its norm, the squared norm clipped below at
/// `epsilon`.
#[track_caller]
pub fn cosine_similarity(predictions: &Tensor, targets: &Tensor, epsilon: f64) -> Tensor {
    let norm = |x: &Tensor| x.square().sum_keepdims(-1).maximum(epsilon).sqrt();
    ((predictions / norm(predictions)) * (targets / norm(targets))).sum(-1)
}

/// `1 − cosine_similarity` (`optax.cosine_distance`).
#[track_caller]
pub fn cosine_distance(predictions: &Tensor, targets: &Tensor, epsilon: f64) -> Tensor {
    -cosine_similarity(predictions, targets, epsilon) + 1.0
}

/// `Σ targets·(log targets − log_predictions)` over the last axis, `0·log 0` taken as 0
/// (`optax.kl_divergence`).
#[track_caller]
pub fn kl_divergence(log_predictions: &Tensor, targets: &Tensor) -> Tensor {
    let log_targets = targets.equal(0.0).select(0.0, targets.log());
    (targets * (log_targets - log_predictions)).sum(-1)
}

/// `Σ exp(log_targets)·(log_targets − log_predictions)` over the last axis
/// (`optax.kl_divergence_with_log_targets`).
#[track_caller]
pub fn kl_divergence_with_log_targets(log_predictions: &Tensor, log_targets: &Tensor) -> Tensor {
    (log_targets.exp() * (log_targets - log_predictions)).sum(-1)
}

/// `max(0, 1 − outputs·targets)` elementwise, targets in {−1, 1} (`optax.hinge_loss`).
#[track_caller]
pub fn hinge_loss(predictor_outputs: &Tensor, targets: &Tensor) -> Tensor {
    (-(predictor_outputs * targets) + 1.0).maximum(0.0)
}

/// Labels mixed with the uniform distribution over the last axis' `n` classes:
/// `(1 − alpha)·labels + alpha / n` (`optax.smooth_labels`).
#[track_caller]
pub fn smooth_labels(labels: &Tensor, alpha: f64) -> Tensor {
    let classes = labels.shape().last().copied().unwrap_or(1).max(1) as f64;
    labels * (1.0 - alpha) + alpha / classes
}

/// The Poly-1 loss (`optax.poly_loss_cross_entropy`): the cross-entropy against label
/// distributions plus `epsilon·Σ labels·(1 − softmax(logits))` over the last axis.
#[track_caller]
pub fn poly_loss_cross_entropy(logits: &Tensor, labels: &Tensor, epsilon: f64) -> Tensor {
    let p = super::softmax(logits, -1);
    let one_minus_pt = (labels * (-p + 1.0)).sum(-1);
    softmax_cross_entropy(logits, labels) + one_minus_pt * epsilon
}

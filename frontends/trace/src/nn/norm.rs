//! Normalization over the last axis: LayerNorm and RMSNorm, as flax computes them (the
//! variance of the centred values, not `E[x²] - E[x]²`, which cancels when the mean is large).

use crate::Tensor;

/// `(x - mean) / sqrt(var + eps) * gamma + beta` over the last axis (`flax.linen.LayerNorm`
/// with `use_fast_variance=False`); `gamma` and `beta` broadcast against it (`[features]`).
#[track_caller]
pub fn layer_norm(x: &Tensor, gamma: &Tensor, beta: &Tensor, eps: f64) -> Tensor {
    let centred = x - x.mean_keepdims(-1);
    let var = centred.square().mean_keepdims(-1);
    centred * (var + eps).rsqrt() * gamma + beta
}

/// `x / sqrt(mean(x²) + eps) * gamma` over the last axis (`flax.linen.RMSNorm`).
#[track_caller]
pub fn rms_norm(x: &Tensor, gamma: &Tensor, eps: f64) -> Tensor {
    x * (x.square().mean_keepdims(-1) + eps).rsqrt() * gamma
}

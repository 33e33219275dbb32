//! Dropout (`flax.linen.Dropout`): each element is kept with probability `1 - rate` and scaled
//! by `1 / (1 - rate)`, so the expected value is unchanged; the mask is a pure function of
//! the key, as flax draws it (`random.bernoulli(key, 1 - rate, x.shape)`).

use crate::random::{bernoulli, Key};
use crate::Tensor;
use std::panic::Location;

/// `x` with each element zeroed with probability `rate` and the rest divided by `1 - rate`
/// (`flax.linen.Dropout(rate)(x, deterministic=False)`). A rate of 0 returns `x`, a rate of
/// 1 zeros; a rate outside [0, 1] is an error.
#[track_caller]
pub fn dropout(key: &Key, x: &Tensor, rate: f64) -> Tensor {
    if !(0.0..=1.0).contains(&rate) {
        let message = format!("dropout: the rate must be in [0, 1], it is {rate}");
        return Tensor::failed(Location::caller(), message, x.ty().clone());
    }
    if rate == 0.0 {
        return x.clone();
    }
    if rate == 1.0 {
        return Tensor::zeros(x.dtype(), x.shape());
    }
    let keep = 1.0 - rate;
    let mask = bernoulli(key, keep, x.shape());
    mask.select(&(x / keep), 0.0)
}

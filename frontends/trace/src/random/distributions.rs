//! Distributions `jax.random` draws by transforming one uniform draw, with its bounds and
//! formulas: exponential, Laplace, logistic and Rademacher.

use super::sample::{bernoulli, uniform, uniform_in};
use super::Key;
use crate::Tensor;
use ferrax_ir::{DType, Shape};

/// The gap below 1 (`finfo(dtype).epsneg`) of a float dtype.
fn epsneg(dtype: DType) -> f64 {
    match dtype {
        DType::F16 => (-11f64).exp2(),
        DType::BF16 => (-9f64).exp2(),
        DType::F64 => (-53f64).exp2(),
        _ => (-24f64).exp2(),
    }
}

/// The smallest normal value (`finfo(dtype).tiny`) of a float dtype.
fn tiny(dtype: DType) -> f64 {
    match dtype {
        DType::F16 => (-14f64).exp2(),
        DType::F64 => f64::MIN_POSITIVE,
        _ => (-126f64).exp2(),
    }
}

/// Standard exponential floats (`jax.random.exponential`): `−log1p(−u)`, `u` uniform in
/// [0, 1).
#[track_caller]
pub fn exponential(key: &Key, shape: impl Into<Shape>, dtype: DType) -> Tensor {
    -(-uniform(key, shape, dtype)).log1p()
}

/// Standard Laplace floats (`jax.random.laplace`): `sign(u)·log1p(−|u|)`, `u` uniform in
/// [−1 + epsneg, 1).
#[track_caller]
pub fn laplace(key: &Key, shape: impl Into<Shape>, dtype: DType) -> Tensor {
    let u = uniform_in(key, shape, dtype, -1.0 + epsneg(dtype), 1.0);
    u.sign() * (-u.abs()).log1p()
}

/// Standard logistic floats (`jax.random.logistic`): `log(x) − log1p(−x)`, `x` uniform in
/// [tiny, 1).
#[track_caller]
pub fn logistic(key: &Key, shape: impl Into<Shape>, dtype: DType) -> Tensor {
    let x = uniform_in(key, shape, dtype, tiny(dtype), 1.0);
    x.log() - (-&x).log1p()
}

/// −1 or 1 with equal probability, of `dtype` (`jax.random.rademacher`): `2·bernoulli(0.5) − 1`.
#[track_caller]
pub fn rademacher(key: &Key, shape: impl Into<Shape>, dtype: DType) -> Tensor {
    bernoulli(key, 0.5, shape).astype(dtype) * 2.0 - 1.0
}

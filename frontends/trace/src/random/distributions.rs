//! Distributions `jax.random` draws by transforming uniform draws, with its bounds and
//! formulas: exponential, Laplace, logistic and Rademacher, and `choice`.

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

/// The gap above 1 (`finfo(dtype).eps`) of a float dtype.
pub(super) fn eps(dtype: DType) -> f64 {
    match dtype {
        DType::F16 => (-10f64).exp2(),
        DType::BF16 => (-7f64).exp2(),
        DType::F64 => (-52f64).exp2(),
        _ => (-23f64).exp2(),
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

/// −1 or 1 with equal probability, of `dtype` (`jax.random.rademacher`): `2·bernoulli(0.5) − 1`,
/// the uniform draw behind it in f32, or in f64 for f64 signs (JAX's with 64-bit types
/// enabled, the only JAX that draws them).
#[track_caller]
pub fn rademacher(key: &Key, shape: impl Into<Shape>, dtype: DType) -> Tensor {
    let half = match dtype {
        DType::F64 => Tensor::scalar(0.5f64),
        _ => Tensor::scalar(0.5f32),
    };
    bernoulli(key, &half, shape).astype(dtype) * 2.0 - 1.0
}

/// Indices in `0..n` (`i32`, of `shape`) drawn as `jax.random.choice(key, n, shape, replace,
/// p)` draws them: uniformly (`randint`) or, without replacement, the first of a permutation;
/// by probabilities `p` (`[n]`, floats, normalized by their sum) through the cumulative sum
/// and `searchsorted`, or without replacement by the Gumbel top-k trick. Taking `x`'s rows is
/// `x.take(&indices, axis)`.
#[track_caller]
pub fn choice(key: &Key, n: usize, shape: &[usize], replace: bool, p: Option<&Tensor>) -> Tensor {
    let location = std::panic::Location::caller();
    let draws: usize = shape.iter().product();
    let fail = |message: String| {
        Tensor::failed(
            location,
            format!("choice: {message}"),
            ferrax_ir::TensorType::new(DType::I32, shape.to_vec()),
        )
    };
    if draws == 0 {
        return Tensor::zeros(DType::I32, shape.to_vec());
    }
    if n == 0 {
        return fail("a population of 0 unless no samples are taken".to_string());
    }
    if !replace && draws > n {
        return fail(format!(
            "a sample of {draws} from a population of {n} without replacement"
        ));
    }
    let Ok(top) = i64::try_from(n) else {
        return fail(format!("a population of {n}"));
    };
    match p {
        None if replace => super::integers::randint(key, shape.to_vec(), 0, top, DType::I32),
        None => super::permutation(key, n)
            .slice(&[0], &[draws])
            .astype(DType::I32)
            .reshape(shape.to_vec()),
        Some(p) if p.shape() != [n] => fail(format!("p is {}, not [{n}]", p.ty())),
        Some(p) if replace => {
            let cumulative = p.cumsum(0);
            let total = cumulative
                .slice(&[n - 1], &[n])
                .reshape(Vec::<usize>::new());
            let u = uniform(key, shape.to_vec(), p.dtype());
            let r = (-u + 1.0) * total;
            cumulative.searchsorted(&r, false)
        }
        Some(p) => {
            let g = super::gumbel(key, [n], p.dtype()) + p.log();
            g.top_k(draws).1.astype(DType::I32).reshape(shape.to_vec())
        }
    }
}

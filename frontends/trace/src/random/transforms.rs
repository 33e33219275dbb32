//! Distributions `jax.random` draws by transforming its uniform, normal, exponential and gamma
//! draws, with JAX's formulas and key splits, so the same key gives JAX's values: Cauchy,
//! log-normal, Pareto, Weibull, Rayleigh, Wald, geometric, triangular, Maxwell, Student's t,
//! chi-squared, F, generalized normal, points in an Lp ball, orthogonal matrices and the
//! multivariate normal. Parameters are numbers or tensors broadcast to the shape.

use super::distributions::{eps, exponential, rademacher};
use super::gamma::{gamma, loggamma};
use super::sample::{normal, uniform, uniform_in};
use super::{split2, Key};
use crate::{Operand, Tensor};
use ferrax_ir::{DType, Shape, TensorType};
use std::panic::Location;

/// A distribution's parameter as a tensor of `dtype`.
pub(super) fn param<'a>(p: impl Into<Operand<'a>>, dtype: DType) -> Tensor {
    match p.into() {
        Operand::Number(x) => Tensor::full(dtype, Vec::<usize>::new(), x),
        Operand::Borrowed(t) => t.astype(dtype),
        Operand::Owned(t) => t.astype(dtype),
    }
}

/// Standard Cauchy floats (`jax.random.cauchy`): `tan(π(u − ½))`, `u` uniform in [eps, 1).
#[track_caller]
pub fn cauchy(key: &Key, shape: impl Into<Shape>, dtype: DType) -> Tensor {
    let u = uniform_in(key, shape, dtype, eps(dtype), 1.0);
    ((u - 0.5) * std::f64::consts::PI).tan()
}

/// Log-normal floats (`jax.random.lognormal`): `exp(σ·n)`, `n` standard normal.
#[track_caller]
pub fn lognormal<'a>(
    key: &Key,
    sigma: impl Into<Operand<'a>>,
    shape: impl Into<Shape>,
    dtype: DType,
) -> Tensor {
    (normal(key, shape, dtype) * param(sigma, dtype)).exp()
}

/// Pareto floats of shape `b` (`jax.random.pareto`): `exp(e / b)`, `e` standard exponential.
#[track_caller]
pub fn pareto<'a>(
    key: &Key,
    b: impl Into<Operand<'a>>,
    shape: impl Into<Shape>,
    dtype: DType,
) -> Tensor {
    (exponential(key, shape, dtype) / param(b, dtype)).exp()
}

/// Weibull floats (`jax.random.weibull_min`): the inverse CDF `(−log1p(−u))^(1/k)·scale`.
#[track_caller]
pub fn weibull_min<'a, 'b>(
    key: &Key,
    scale: impl Into<Operand<'a>>,
    concentration: impl Into<Operand<'b>>,
    shape: impl Into<Shape>,
    dtype: DType,
) -> Tensor {
    let u = uniform(key, shape, dtype);
    let exponent = param(1.0, dtype) / param(concentration, dtype);
    (-(-u).log1p()).pow(&exponent) * param(scale, dtype)
}

/// Rayleigh floats (`jax.random.rayleigh`): `scale·√(−2·log u)`.
#[track_caller]
pub fn rayleigh<'a>(
    key: &Key,
    scale: impl Into<Operand<'a>>,
    shape: impl Into<Shape>,
    dtype: DType,
) -> Tensor {
    let u = uniform(key, shape, dtype);
    param(scale, dtype) * (u.log() * -2.0).sqrt()
}

/// Wald (inverse Gaussian) floats of mean `mean` (`jax.random.wald`), by Michael, Schucany
/// and Haas's transformation of a normal draw, with JAX's arithmetic.
#[track_caller]
pub fn wald<'a>(
    key: &Key,
    mean: impl Into<Operand<'a>>,
    shape: impl Into<Shape>,
    dtype: DType,
) -> Tensor {
    let shape = shape.into();
    let (k1, k2) = split2(key);
    let mean = param(mean, dtype).broadcast_to(shape.dims().to_vec());
    let v = normal(&k1, shape.clone(), dtype);
    let z = uniform(&k2, shape, dtype);
    let y = &v * &v;
    let y_sq = &y * &y;
    let mean_sq = &mean * &mean;
    let sqrt_term = (&mean * 4.0 * &y + &mean_sq * &y_sq).sqrt();
    let x = &mean + &mean_sq * &y / 2.0 - &mean / 2.0 * sqrt_term;
    let keep = z.less_equal(&(&mean / (&mean + &x)));
    keep.select(&x, &(mean_sq / &x))
}

/// Geometric draws of success probability `p`, counting trials (from 1), of integer or float
/// `dtype` (`jax.random.geometric`): `⌊log u / log1p(−p)⌋ + 1`, `u` uniform in (0, 1].
#[track_caller]
pub fn geometric(key: &Key, p: &Tensor, shape: impl Into<Shape>, dtype: DType) -> Tensor {
    let shape = shape.into();
    let p = match p.dtype().is_float() {
        true => p.clone(),
        false => p.astype(DType::F32),
    };
    let u = uniform(key, shape.clone(), p.dtype());
    let u = u.equal(0.0).select(1.0, &u);
    let log_one_minus_p = (-&p).log1p().broadcast_to(shape.dims().to_vec());
    ((u.log() / log_one_minus_p).floor() + 1.0).astype(dtype)
}

/// Triangular floats on [`left`, `right`] with peak `mode` (`jax.random.triangular`), by the
/// inverse CDF on either side of the mode.
#[track_caller]
pub fn triangular<'a, 'b, 'c>(
    key: &Key,
    left: impl Into<Operand<'a>>,
    mode: impl Into<Operand<'b>>,
    right: impl Into<Operand<'c>>,
    shape: impl Into<Shape>,
    dtype: DType,
) -> Tensor {
    let shape = shape.into();
    let dims = shape.dims().to_vec();
    let left = param(left, dtype).broadcast_to(dims.clone());
    let right = param(right, dtype).broadcast_to(dims.clone());
    let mode = param(mode, dtype).broadcast_to(dims);
    let width = &right - &left;
    let fc = (&mode - &left) / &width;
    let u = uniform(key, shape, dtype);
    let below = &left + (&u * &width * (&mode - &left)).sqrt();
    let above = &right - ((-&u + 1.0) * &width * (&right - &mode)).sqrt();
    u.less(&fc).select(&below, &above)
}

/// Maxwell floats (`jax.random.maxwell`): the length of a standard normal vector in three
/// dimensions.
#[track_caller]
pub fn maxwell(key: &Key, shape: impl Into<Shape>, dtype: DType) -> Tensor {
    let mut dims = shape.into().dims().to_vec();
    let axis = dims.len();
    dims.push(3);
    let n = normal(key, dims, dtype);
    (&n * &n).sum(axis).sqrt()
}

/// Double-sided Maxwell floats (`jax.random.double_sided_maxwell`): a Maxwell draw with a
/// random sign, `sign·m·scale + loc`.
#[track_caller]
pub fn double_sided_maxwell<'a, 'b>(
    key: &Key,
    loc: impl Into<Operand<'a>>,
    scale: impl Into<Operand<'b>>,
    shape: impl Into<Shape>,
    dtype: DType,
) -> Tensor {
    let shape = shape.into();
    let (maxwell_key, sign_key) = split2(key);
    let m = maxwell(&maxwell_key, shape.clone(), dtype);
    let sign = rademacher(&sign_key, shape, dtype);
    sign * m * param(scale, dtype) + param(loc, dtype)
}

/// Student's t floats with `df` degrees of freedom (`jax.random.t`): `n·√((df/2) / g)`, `n`
/// normal and `g` Gamma(df/2) from the key's halves.
#[track_caller]
pub fn t<'a>(
    key: &Key,
    df: impl Into<Operand<'a>>,
    shape: impl Into<Shape>,
    dtype: DType,
) -> Tensor {
    let shape = shape.into();
    let (key_n, key_g) = split2(key);
    let n = normal(&key_n, shape.clone(), dtype);
    let half_df = param(df, dtype) / 2.0;
    let g = gamma(&key_g, &half_df, shape, dtype);
    n * (half_df / g).sqrt()
}

/// Chi-squared floats with `df` degrees of freedom (`jax.random.chisquare`): twice a
/// Gamma(df/2) draw, taken in log space.
#[track_caller]
pub fn chisquare<'a>(
    key: &Key,
    df: impl Into<Operand<'a>>,
    shape: impl Into<Shape>,
    dtype: DType,
) -> Tensor {
    let half_df = param(df, dtype) / 2.0;
    loggamma(key, &half_df, shape, dtype).exp() * 2.0
}

/// F floats with `dfnum` and `dfden` degrees of freedom (`jax.random.f`): the ratio of two
/// chi-squared draws, each over its degrees of freedom.
#[track_caller]
pub fn f<'a, 'b>(
    key: &Key,
    dfnum: impl Into<Operand<'a>>,
    dfden: impl Into<Operand<'b>>,
    shape: impl Into<Shape>,
    dtype: DType,
) -> Tensor {
    let shape = shape.into();
    let (dfnum, dfden) = (param(dfnum, dtype), param(dfden, dtype));
    let (key_den, key_num) = split2(key);
    let num = chisquare(&key_num, &dfnum, shape.clone(), dtype) / dfnum;
    let den = chisquare(&key_den, &dfden, shape, dtype) / dfden;
    num / den
}

/// Generalized normal floats of power `p` (`jax.random.generalized_normal`): density
/// proportional to `exp(−|x|^p)`; `r·g^(1/p)`, `g` Gamma(1/p) and `r` a random sign.
#[track_caller]
pub fn generalized_normal(key: &Key, p: f64, shape: impl Into<Shape>, dtype: DType) -> Tensor {
    let shape = shape.into();
    let (key_g, key_r) = split2(key);
    let exponent = Tensor::full(dtype, Vec::<usize>::new(), 1.0 / p);
    let g = gamma(&key_g, &exponent, shape.clone(), dtype);
    rademacher(&key_r, shape, dtype) * g.pow(&exponent)
}

/// Points uniform in the unit `p`-norm ball of dimension `d` (`jax.random.ball`), `[..shape,
/// d]`: generalized normal coordinates over their norm with an exponential draw added.
#[track_caller]
pub fn ball(key: &Key, d: usize, p: f64, shape: impl Into<Shape>, dtype: DType) -> Tensor {
    let shape = shape.into();
    let (k1, k2) = split2(key);
    let mut dims = shape.dims().to_vec();
    let axis = dims.len();
    dims.push(d);
    let g = generalized_normal(&k1, p, dims, dtype);
    let e = exponential(&k2, shape, dtype);
    let norm = (g.abs().pow(p).sum(axis) + e).pow(1.0 / p);
    g / norm.expand_dims(-1)
}

/// Matrices `[..shape, n, m]` (`m` defaults to `n`) with orthonormal columns or rows, uniform
/// under the Haar measure (`jax.random.orthogonal`): the QR factor of a normal matrix, each
/// column's sign flipped to make `r`'s diagonal positive.
#[track_caller]
pub fn orthogonal(
    key: &Key,
    n: usize,
    m: Option<usize>,
    shape: impl Into<Shape>,
    dtype: DType,
) -> Tensor {
    let m = m.unwrap_or(n);
    let mut dims = shape.into().dims().to_vec();
    let rank = dims.len();
    dims.extend([n.max(m), n.min(m)]);
    let z = normal(key, dims, dtype);
    let (q, r) = z.qr(false);
    let signs = r.diagonal().sign().expand_dims(-2);
    let x = q * signs;
    match n < m {
        true => {
            let mut perm: Vec<usize> = (0..rank + 2).collect();
            perm.swap(rank, rank + 1);
            x.transpose(perm)
        }
        false => x,
    }
}

/// How [`multivariate_normal`] factors the covariance (`jax.random.multivariate_normal`'s
/// `method`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CovarianceFactor {
    /// The Cholesky factor (positive-definite covariances).
    Cholesky,
    /// `u·√s` from the singular value decomposition (JAX's default; semi-definite ones too).
    #[default]
    Svd,
    /// `v·√w` from the Hermitian eigendecomposition.
    Eigh,
}

/// Multivariate normal floats (`jax.random.multivariate_normal`): `mean + factor·n` for each
/// standard normal vector `n`, `[..shape, k]` where `mean` is `[.., k]` and `cov` `[.., k, k]`
/// (`shape` defaults to their batch dimensions broadcast).
#[track_caller]
pub fn multivariate_normal(
    key: &Key,
    mean: &Tensor,
    cov: &Tensor,
    shape: Option<&[usize]>,
    method: CovarianceFactor,
    dtype: DType,
) -> Tensor {
    let location = Location::caller();
    let (Some((&k, mean_batch)), Some((cov_square, cov_batch))) = (
        mean.shape().split_last(),
        cov.shape().split_last_chunk::<2>().map(|(b, s)| (s, b)),
    ) else {
        return fail(location, mean, cov, dtype);
    };
    if cov_square != &[k, k] {
        return fail(location, mean, cov, dtype);
    }
    let batch = match shape {
        Some(s) => s.to_vec(),
        None => match broadcast_dims(mean_batch, cov_batch) {
            Some(b) => b,
            None => return fail(location, mean, cov, dtype),
        },
    };
    let (mean, cov) = (mean.astype(dtype), cov.astype(dtype));
    let factor = match method {
        CovarianceFactor::Cholesky => cov.cholesky(),
        CovarianceFactor::Svd => {
            let (u, s, _) = cov.svd(false);
            u * s.sqrt().expand_dims(-2)
        }
        CovarianceFactor::Eigh => {
            let (w, v) = cov.eigh();
            v * w.sqrt().expand_dims(-2)
        }
    };
    let mut dims = batch;
    dims.push(k);
    let n = normal(key, dims.clone(), dtype);
    dims.push(k);
    let factor = factor.broadcast_to(dims);
    mean + Tensor::einsum("...ij,...j->...i", &[&factor, &n])
}

/// The broadcast of two batch shapes, if they broadcast.
fn broadcast_dims(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let rank = a.len().max(b.len());
    let at = |d: &[usize], i: usize| match (i + d.len()).checked_sub(rank) {
        Some(j) => d[j],
        None => 1,
    };
    (0..rank)
        .map(|i| match (at(a, i), at(b, i)) {
            (x, y) if x == y || y == 1 => Some(x),
            (1, y) => Some(y),
            _ => None,
        })
        .collect()
}

fn fail(location: &'static Location<'static>, mean: &Tensor, cov: &Tensor, dtype: DType) -> Tensor {
    Tensor::failed(
        location,
        format!(
            "multivariate_normal: mean must be [.., k] and cov [.., k, k] with batch dimensions that broadcast; they are {} and {}",
            mean.ty(),
            cov.ty()
        ),
        TensorType::new(dtype, mean.shape().to_vec()),
    )
}

//! `jax.scipy.special`: `xlogy`, `xlog1py`, `entr`, `logit`, `expit`, `ndtr`, `betaln`, and the
//! functions the IR and `lax` already have under SciPy's names (`gammaln`, `digamma`, `erf`,
//! `erfc`, `erfinv`).

use crate::Tensor;

/// `x·log(y)`, 0 where `x = 0` unless `y` is NaN (`jax.scipy.special.xlogy`).
#[track_caller]
pub fn xlogy(x: &Tensor, y: &Tensor) -> Tensor {
    let defined = x.not_equal(0.0).logical_or(y.is_nan());
    let safe_x = defined.select(x, 0.0);
    let safe_y = defined.select(y, 1.0);
    defined.select(&(safe_x * safe_y.log()), 0.0)
}

/// `x·log(1 + y)`, 0 where `x = 0` unless `y` is NaN (`jax.scipy.special.xlog1py`).
#[track_caller]
pub fn xlog1py(x: &Tensor, y: &Tensor) -> Tensor {
    let defined = x.not_equal(0.0).logical_or(y.is_nan());
    let safe_x = defined.select(x, 0.0);
    let safe_y = defined.select(y, 0.0);
    defined.select(&(safe_x * safe_y.log1p()), 0.0)
}

/// `−x·log(x)` for `x > 0`, 0 at 0, `−inf` below (`jax.scipy.special.entr`).
#[track_caller]
pub fn entr(x: &Tensor) -> Tensor {
    x.less(0.0).select(f64::NEG_INFINITY, &-xlogy(x, x))
}

/// `log(p / (1 − p))` (`jax.scipy.special.logit`).
#[track_caller]
pub fn logit(p: &Tensor) -> Tensor {
    (p / (-p + 1.0)).log()
}

/// The logistic sigmoid `1 / (1 + exp(−x))` (`jax.scipy.special.expit`).
#[track_caller]
pub fn expit(x: &Tensor) -> Tensor {
    x.sigmoid()
}

/// The standard normal CDF (`jax.scipy.special.ndtr`): `(1 + erf(x/√2))/2` near 0, by `erfc`
/// in the tails so that small probabilities keep their digits.
#[track_caller]
pub fn ndtr(x: &Tensor) -> Tensor {
    let half_sqrt_2 = 0.5 * std::f64::consts::SQRT_2;
    let w = x * half_sqrt_2;
    let z = w.abs();
    let tail = w
        .greater(0.0)
        .select(&(-crate::lax::erfc(&z) + 2.0), crate::lax::erfc(&z));
    let y = z
        .less(half_sqrt_2)
        .select(&(crate::lax::erf(&w) + 1.0), &tail);
    y * 0.5
}

/// `log B(a, b) = lgamma(a) + lgamma(b) − lgamma(a + b)` (`jax.scipy.special.betaln`).
#[track_caller]
pub fn betaln(a: &Tensor, b: &Tensor) -> Tensor {
    a.lgamma() + b.lgamma() - (a + b).lgamma()
}

/// `log |Γ(x)|` (`jax.scipy.special.gammaln`).
#[track_caller]
pub fn gammaln(x: &Tensor) -> Tensor {
    x.lgamma()
}

/// `ψ(x)` (`jax.scipy.special.digamma`).
#[track_caller]
pub fn digamma(x: &Tensor) -> Tensor {
    x.digamma()
}

pub use crate::lax::{erf, erf_inv as erfinv, erfc};

//! `jax.scipy.special`: `xlogy`, `xlog1py`, `entr`, `rel_entr`, `kl_div`, `logit`, `expit`,
//! `ndtr`, `ndtri`, `log_ndtr`, `betaln`, and the functions the IR and `lax` already have under
//! SciPy's names (`gammaln`, `digamma`, `erf`, `erfc`, `erfinv`).

use crate::{custom_jvp, Tensor};
use ferrax_ir::DType;

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

/// The standard normal quantile, `ndtr⁻¹(p)` (`jax.scipy.special.ndtri`): Acklam's rational
/// approximation refined by one Halley step against `ndtr` (through `erfc`, exact to f64
/// rounding), computed in f64 and rounded once; `−inf` at 0, `inf` at 1, NaN outside [0, 1].
/// Its derivative is the exact `√(2π)·exp(x²/2)`.
#[track_caller]
pub fn ndtri(p: &Tensor) -> Tensor {
    let dtype = p.dtype();
    let quantile = custom_jvp(
        |p: Tensor| ndtri_f64(&p),
        |p: Tensor, t: Tensor| {
            let x = ndtri_f64(&p);
            let slope = (x.square() * 0.5).exp() * (2.0 * std::f64::consts::PI).sqrt();
            (x, t * slope)
        },
    );
    quantile(p.astype(DType::F64)).astype(dtype)
}

fn ndtri_f64(p: &Tensor) -> Tensor {
    const A: [f64; 6] = [
        -3.969683028665376e1,
        2.209460984245205e2,
        -2.759285104469687e2,
        1.38357751867269e2,
        -3.066479806614716e1,
        2.506628277459239,
    ];
    const B: [f64; 5] = [
        -5.447609879822406e1,
        1.615858368580409e2,
        -1.556989798598866e2,
        6.680131188771972e1,
        -1.328068155288572e1,
    ];
    const C: [f64; 6] = [
        -7.784894002430293e-3,
        -3.223964580411365e-1,
        -2.400758277161838,
        -2.549732539343734,
        4.374664141464968,
        2.938163982698783,
    ];
    const D: [f64; 4] = [
        7.784695709041462e-3,
        3.224671290700398e-1,
        2.445134137142996,
        3.754408661907416,
    ];
    let horner = |coefficients: &[f64], x: &Tensor, last: f64| {
        coefficients.iter().fold(
            Tensor::full(DType::F64, x.shape().to_vec(), 0.0),
            |acc, &c| acc * x + c,
        ) * x
            + last
    };
    let low = 0.02425;
    // The central region, and the tails by symmetry (`q` the smaller tail probability).
    let q = p.minimum(&(-p + 1.0));
    let central = {
        let r = p - 0.5;
        let s = r.square();
        horner(&A[..5], &s, A[5]) * &r / horner(&B, &s, 1.0)
    };
    let tail = {
        let s = (q.maximum(f64::MIN_POSITIVE).log() * -2.0).sqrt();
        horner(&C[..5], &s, C[5]) / horner(&D, &s, 1.0)
    };
    // The tail formula gives the lower tail's (negative) quantile.
    let tail = p.greater(0.5).select(&-&tail, &tail);
    let x = q.less(low).select(&tail, &central);
    // Halley's step on ndtr(x) − p, with the tail probability where it is smaller, so that
    // tiny ones keep their digits.
    let upper = p.greater(0.5);
    let signed = upper.select(&-&x, &x);
    let e = (crate::lax::erfc(&(&signed * -std::f64::consts::FRAC_1_SQRT_2)) * 0.5) - &q;
    let u = e * (2.0 * std::f64::consts::PI).sqrt() * (signed.square() * 0.5).exp();
    let refined = &signed - &u / ((&signed * &u) * 0.5 + 1.0);
    let refined = upper.select(&-&refined, &refined);
    let refined = q.equal(0.0).select(&x, &refined);
    let outside = p
        .less(0.0)
        .logical_or(p.greater(1.0))
        .logical_or(p.is_nan());
    let at_ends = p.equal(0.0).select(
        f64::NEG_INFINITY,
        p.equal(1.0).select(f64::INFINITY, &refined),
    );
    outside.select(f64::NAN, &at_ends)
}

/// `log ndtr(x)` accurate in both tails (`jax.scipy.special.log_ndtr`, its series of order 3):
/// `−ndtr(−x)` above 8 (5 in f32), `log ndtr(x)` down to −20 (−10), the asymptotic series
/// `−x²/2 − log(−x) − ½·log 2π + log(1 − 1/x² + 3/x⁴ − 15/x⁶)` below. Its derivative is
/// `exp(log φ(x) − log_ndtr(x))`, as JAX's rule.
#[track_caller]
pub fn log_ndtr(x: &Tensor) -> Tensor {
    let f = custom_jvp(
        |x: Tensor| log_ndtr_value(&x),
        |x: Tensor, t: Tensor| {
            let value = log_ndtr_value(&x);
            let log_density = -(x.square() * 0.5) - (2.0 * std::f64::consts::PI).sqrt().ln();
            let slope = (log_density - &value).exp();
            (value, t * slope)
        },
    );
    f(x.clone())
}

fn log_ndtr_value(x: &Tensor) -> Tensor {
    let (lower, upper) = match x.dtype() {
        DType::F64 => (-20.0, 8.0),
        _ => (-10.0, 5.0),
    };
    let above = x.greater(upper);
    let ndtr_arg = above.select(&-x, x.maximum(lower));
    let ndtr_res = ndtr(&ndtr_arg);
    let low = x.minimum(lower);
    let x_2 = low.square();
    let log_scale = -(&x_2 * 0.5) - (-&low).log() - 0.5 * (2.0 * std::f64::consts::PI).ln();
    // 1 + even terms − odd terms, the terms (2n−1)!!/x^{2n} for n = 1, 2, 3.
    let x_4 = &x_2 * &x_2;
    let x_6 = &x_4 * &x_2;
    let odd = Tensor::full(x.dtype(), Vec::<usize>::new(), 1.0) / &x_2
        + Tensor::full(x.dtype(), Vec::<usize>::new(), 15.0) / &x_6;
    let even = Tensor::full(x.dtype(), Vec::<usize>::new(), 3.0) / &x_4;
    let series = log_scale + (even + 1.0 - odd).log();
    above.select(
        &-&ndtr_res,
        x.greater(lower).select(ndtr_res.log(), &series),
    )
}

/// `x·log(x/y)` for positive `x` and `y`, 0 at `x = 0` (`y ≥ 0`), `inf` otherwise
/// (`jax.scipy.special.rel_entr`).
#[track_caller]
pub fn rel_entr(x: &Tensor, y: &Tensor) -> Tensor {
    let inf = Tensor::full(x.dtype(), Vec::<usize>::new(), f64::INFINITY);
    entropy_term(
        x,
        y,
        |x, y| x * (x / y).log(),
        |zero| zero.select(0.0, &inf),
    )
}

/// `x·log(x/y) − x + y` for positive `x` and `y`, `y` at `x = 0` (`y ≥ 0`), `inf` otherwise
/// (`jax.scipy.special.kl_div`).
#[track_caller]
pub fn kl_div(x: &Tensor, y: &Tensor) -> Tensor {
    entropy_term(
        x,
        y,
        |x, y| x * (x / y).log() - x + y,
        |zero| zero.select(y, f64::INFINITY),
    )
}

/// `positive(x, y)` where both are positive (computed on safe values elsewhere, so that its
/// gradient there is zero, not NaN), `boundary(x = 0 and y ≥ 0)` otherwise.
fn entropy_term(
    x: &Tensor,
    y: &Tensor,
    positive: impl Fn(&Tensor, &Tensor) -> Tensor,
    boundary: impl Fn(&Tensor) -> Tensor,
) -> Tensor {
    let both_positive = x.greater(0.0).logical_and(y.greater(0.0));
    let safe_x = both_positive.select(x, 1.0);
    let safe_y = both_positive.select(y, 1.0);
    let zero = x.equal(0.0).logical_and(y.greater_equal(0.0));
    both_positive.select(positive(&safe_x, &safe_y), boundary(&zero))
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

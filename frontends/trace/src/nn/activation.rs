//! GELU (both forms), SiLU, and the error function that GELU's exact form needs.
//!
//! The IR has no `erf`, so [`erfc`] and [`erf`] are composites of `exp`, arithmetic and
//! `select`: they trace to plain IR that fuses into elementwise kernels on every backend, and
//! their derivatives are autodiff's of the composite. The approximation (coefficients fitted
//! for this crate) is `erfc(t) = s·exp(-t² + P(2s - 1))` with `s = 2 / (2 + t)`, `t = |x|`,
//! and `P` a degree-11 polynomial fitted in f64 to `log(erfc(t)·exp(t²)/s)` at Chebyshev
//! points of `s ∈ [0, 1]` (every `t ≥ 0`; 1.4e-8 interpolation error). One formula for every
//! `t` keeps the negative tail of GELU accurate (it is `0.5·x·erfc(|x|/√2)` there, as JAX
//! computes it with `erfc`) with no branch that could leak a NaN into a derivative.
//! `tests/nn.rs` checks GELU, its derivative and `erf` over a dense sweep of [-6, 6] against
//! JAX (the measured errors are in `docs/training.md`). Accuracy is f32's for every float
//! dtype: f64 inputs get f32-accurate values.

use crate::Tensor;

/// `P` of the module docs, highest degree first (f32 values).
const ERFC_LOG_POLY: [f64; 12] = [
    -9.246458e-05,
    8.508317e-06,
    5.880717e-04,
    -2.2919226e-04,
    -2.3031435e-03,
    1.7952014e-03,
    8.815157e-03,
    -9.880432e-03,
    -4.689478e-02,
    4.734394e-02,
    6.726432e-01,
    -6.717941e-01,
];

/// Taylor coefficients of `erf(x)/x` in `x²`, highest first: `2/√π·(-1)^n / (n!·(2n+1))` for
/// n = 7..0. Within 2.5 ULP of erf in f32 for |x| < 0.5.
const ERF_TAYLOR: [f64; 8] = [
    -1.492565e-05,
    1.20553326e-04,
    -8.548327e-04,
    5.223978e-03,
    -2.6866172e-02,
    1.1283792e-01,
    -3.7612638e-01,
    1.1283792e+00,
];

/// `sqrt(2 / pi)`, the tanh form's scale.
const SQRT_2_OVER_PI: f64 = 0.797_884_560_802_865_4;

/// Evaluates the polynomial `coeffs` (highest degree first, at least linear) at `u` by
/// Horner's rule.
fn horner<const N: usize>(u: &Tensor, coeffs: &[f64; N]) -> Tensor {
    const { assert!(N >= 2) };
    let first = u * coeffs[0] + coeffs[1];
    coeffs[2..].iter().fold(first, |acc, &c| acc * u + c)
}

/// `erfc(t)` for `t ≥ 0` (the module docs' formula).
fn erfc_nonnegative(t: &Tensor) -> Tensor {
    let s = 2.0 / (t + 2.0);
    let p = horner(&(&s * 2.0 - 1.0), &ERFC_LOG_POLY);
    (-(t * t) + p).exp() * s
}

/// The complementary error function `1 - erf(x)` (`lax.erfc`), as a composite (see the
/// module docs): within a few f32 ULP where `erfc(x) ≥ 1e-3`; relatively within `~t²·6e-8`
/// in the far tail, where `exp(-t²)` inherits the rounding of `t²` (as XLA's does).
#[track_caller]
pub fn erfc(x: &Tensor) -> Tensor {
    let e = erfc_nonnegative(&x.abs());
    x.greater_equal(0.0).select(&e, 2.0 - &e)
}

/// The error function (`lax.erf`), as a composite: a Taylor polynomial for `|x| < 0.5`
/// (relative accuracy near zero), `±(1 - erfc(|x|))` elsewhere; within 2e-7 of the exact
/// value everywhere.
#[track_caller]
pub fn erf(x: &Tensor) -> Tensor {
    let small = x.abs().less(0.5);
    // The unused branch sees a safe input, so its derivative is finite (the zero cotangent
    // `select` sends it must not meet an infinite one).
    let xs = small.select(x, 0.0);
    let near_zero = &xs * horner(&xs.square(), &ERF_TAYLOR);
    let far = (1.0 - erfc_nonnegative(&x.abs())) * x.sign();
    small.select(&near_zero, &far)
}

/// The Gaussian error linear unit (`jax.nn.gelu`). `approximate: true` is the tanh form,
/// `x·0.5·(1 + tanh(√(2/π)·(x + 0.044715·x³)))`, the one GPT-2 uses and the backends compute
/// as one quotient of an exp; `false` is the exact `x·Φ(x) = 0.5·x·erfc(-x/√2)`, computed as
/// `0.5·x·erfc(|x|/√2)` for `x < 0` and `x - 0.5·x·erfc(x/√2)` otherwise (no cancellation
/// on either side).
#[track_caller]
pub fn gelu(x: &Tensor, approximate: bool) -> Tensor {
    if approximate {
        let inner = (x * x * x * 0.044715 + x) * SQRT_2_OVER_PI;
        (x * 0.5) * (inner.tanh() + 1.0)
    } else {
        let e = erfc_nonnegative(&(x.abs() * std::f64::consts::FRAC_1_SQRT_2));
        let half = x * 0.5 * e;
        x.greater_equal(0.0).select(x - &half, &half)
    }
}

/// `x·sigmoid(x)` (`jax.nn.silu`, also called swish).
#[track_caller]
pub fn silu(x: &Tensor) -> Tensor {
    x * x.sigmoid()
}

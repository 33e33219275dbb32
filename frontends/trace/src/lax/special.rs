//! Special functions the IR has no op for (`lax.erf`, `lax.erfc`, `lax.erf_inv`), as
//! composites of its elementwise ops: they trace to plain IR that fuses into elementwise
//! kernels on every backend, and autodiff differentiates the composite.
//!
//! `erfc(t) = s·exp(-t² + P(2s - 1))` with `s = 2 / (2 + t)`, `t = |x|`, and `P` a degree-11
//! polynomial (coefficients fitted for this crate) fitted in f64 to `log(erfc(t)·exp(t²)/s)`
//! at Chebyshev points of `s ∈ [0, 1]` (every `t ≥ 0`; 1.4e-8 interpolation error). One
//! formula for every `t` keeps the negative tail of GELU accurate (it is `0.5·x·erfc(|x|/√2)`
//! there, as JAX computes it with `erfc`) with no branch that could leak a NaN into a
//! derivative. `tests/nn.rs` checks GELU, its derivative and `erf` over a dense sweep of
//! [-6, 6] against JAX (the measured errors are in `docs/training.md`). Accuracy is f32's for
//! f32 and narrower inputs; f64 inputs get the IR's `erf`, `erfc` and `erf_inv` ops instead,
//! the exact functions rounded once (host steps, which do not fuse).

use crate::tensor::apply;
use crate::Tensor;
use ferrax_ir::{DType, Op, UnaryOp};

/// The IR's exact `op` for f64 inputs, where the f32-accurate composites would lose digits.
#[track_caller]
fn exact_f64(x: &Tensor, op: UnaryOp) -> Option<Tensor> {
    (x.dtype() == DType::F64).then(|| apply(Op::Unary(op), &[x]))
}

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

/// `erfc(t)` for `t ≥ 0` (the module docs' formula).
pub(crate) fn erfc_nonnegative(t: &Tensor) -> Tensor {
    let s = 2.0 / (t + 2.0);
    let p = horner(&(&s * 2.0 - 1.0), &ERFC_LOG_POLY);
    (-(t * t) + p).exp() * s
}

/// The complementary error function `1 - erf(x)` (`lax.erfc`), as a composite (see the
/// module docs): within a few f32 ULP where `erfc(x) ≥ 1e-3`; relatively within `~t²·6e-8`
/// in the far tail, where `exp(-t²)` inherits the rounding of `t²` (as XLA's does).
#[track_caller]
pub fn erfc(x: &Tensor) -> Tensor {
    if let Some(exact) = exact_f64(x, UnaryOp::Erfc) {
        return exact;
    }
    let e = erfc_nonnegative(&x.abs());
    x.greater_equal(0.0).select(&e, 2.0 - &e)
}

/// The error function (`lax.erf`), as a composite: a Taylor polynomial for `|x| < 0.5`
/// (relative accuracy near zero), `±(1 - erfc(|x|))` elsewhere; within 2e-7 of the exact
/// value everywhere.
#[track_caller]
pub fn erf(x: &Tensor) -> Tensor {
    if let Some(exact) = exact_f64(x, UnaryOp::Erf) {
        return exact;
    }
    let small = x.abs().less(0.5);
    // The unused branch sees a safe input, so its derivative is finite (the zero cotangent
    // `select` sends it must not meet an infinite one).
    let xs = small.select(x, 0.0);
    let near_zero = &xs * horner(&xs.square(), &ERF_TAYLOR);
    let far = (1.0 - erfc_nonnegative(&x.abs())) * x.sign();
    small.select(&near_zero, &far)
}

/// Giles' single-precision coefficients for `w = -log(1 - x²) < 5`, highest degree first, in
/// `w - 2.5` ("Approximating the erfinv function", GPU Computing Gems, 2011); XLA's f32
/// `erf_inv` evaluates the same polynomials.
const CENTRAL: [f64; 9] = [
    2.810_226_36e-08,
    3.432_739_39e-07,
    -3.523_387_7e-06,
    -4.391_506_54e-06,
    0.000_218_580_87,
    -0.001_253_725_03,
    -0.004_177_681_64,
    0.246_640_727,
    1.501_409_41,
];

/// The same for `w ≥ 5` (the tails), in `sqrt(w) - 3`.
const TAIL: [f64; 9] = [
    -0.000_200_214_257,
    0.000_100_950_558,
    0.001_349_343_22,
    -0.003_673_428_44,
    0.005_739_507_73,
    -0.007_622_461_3,
    0.009_438_870_47,
    1.001_674_06,
    2.832_976_82,
];

/// The inverse error function (`lax.erf_inv`): `erf(erf_inv(x)) = x` on (-1, 1), ±inf at ±1
/// and NaN outside. Giles' approximation (about 4 ULP in f32); f16 and bf16 are computed in
/// f32 and rounded once, f64 inputs exactly (the IR's `erf_inv`).
#[track_caller]
pub fn erf_inv(x: &Tensor) -> Tensor {
    if let Some(exact) = exact_f64(x, UnaryOp::ErfInv) {
        return exact;
    }
    let dtype = x.dtype();
    let narrow = matches!(dtype, DType::F16 | DType::BF16);
    let x32 = if narrow {
        x.astype(DType::F32)
    } else {
        x.clone()
    };
    let w = -(-(&x32 * &x32)).log1p();
    let central = w.less(5.0);
    // Each branch sees an input that keeps it finite, so the unused one cannot leak a NaN
    // into a derivative.
    let w_central = central.select(&w, 2.5) - 2.5;
    let w_tail = central.select(9.0, &w).sqrt() - 3.0;
    let p_central = horner(&w_central, &CENTRAL);
    let p_tail = horner(&w_tail, &TAIL);
    let p = central.select(&p_central, &p_tail);
    let ends = x32.abs().equal(1.0);
    let y = ends.select(&x32 * f64::INFINITY, &p * &x32);
    if narrow {
        y.astype(dtype)
    } else {
        y
    }
}

/// Evaluates the polynomial `coeffs` (highest degree first, at least linear) at `u` by
/// Horner's rule.
pub(crate) fn horner<const N: usize>(u: &Tensor, coeffs: &[f64; N]) -> Tensor {
    const { assert!(N >= 2) };
    let first = u * coeffs[0] + coeffs[1];
    coeffs[2..].iter().fold(first, |acc, &c| acc * u + c)
}

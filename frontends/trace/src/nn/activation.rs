//! GELU (both forms) and SiLU. GELU's exact form uses the composite `erfc` of
//! [`crate::lax::special`].

use crate::lax::special::erfc_nonnegative;
use crate::Tensor;

/// `sqrt(2 / pi)`, the tanh form's scale.
const SQRT_2_OVER_PI: f64 = 0.797_884_560_802_865_4;

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

//! GELU (both forms), SiLU and the other activations of `jax.nn` (softplus, log-sigmoid,
//! leaky ReLU, ELU, CELU, SELU, ReLU6, hard tanh, hard sigmoid and SiLU, soft sign, sparse
//! plus and sigmoid, squareplus, mish, GLU) and `standardize`. GELU's exact form uses the composite `erfc` of
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

/// `log(1 + exp(x))` without overflow (`jax.nn.softplus`, `logaddexp(x, 0)`).
#[track_caller]
pub fn softplus(x: &Tensor) -> Tensor {
    x.logaddexp(&Tensor::zeros(x.dtype(), Vec::<usize>::new()))
}

/// `log(sigmoid(x)) = −softplus(−x)` (`jax.nn.log_sigmoid`).
#[track_caller]
pub fn log_sigmoid(x: &Tensor) -> Tensor {
    -softplus(&-x)
}

/// `x` where `x ≥ 0`, else `negative_slope·x` (`jax.nn.leaky_relu`; JAX's default slope is
/// 0.01).
#[track_caller]
pub fn leaky_relu(x: &Tensor, negative_slope: f64) -> Tensor {
    x.greater_equal(0.0).select(x, x * negative_slope)
}

/// `x` where `x > 0`, else `alpha·(exp(x) − 1)` (`jax.nn.elu`; JAX's default alpha is 1).
#[track_caller]
pub fn elu(x: &Tensor, alpha: f64) -> Tensor {
    let positive = x.greater(0.0);
    let safe = positive.select(0.0, x);
    positive.select(x, safe.expm1() * alpha)
}

/// `min(max(x, 0), 6)` (`jax.nn.relu6`), with JAX's derivative: 1 strictly between 0 and 6,
/// else 0.
#[track_caller]
pub fn relu6(x: &Tensor) -> Tensor {
    let f = crate::custom_jvp_named(
        "relu6",
        |x: Tensor| x.clip(0.0, 6.0),
        |x: Tensor, t: Tensor| {
            let inside = x.greater(0.0).logical_and(x.less(6.0));
            (x.clip(0.0, 6.0), inside.select(t, 0.0))
        },
    );
    f(x.clone())
}

/// `x` clipped to [−1, 1] (`jax.nn.hard_tanh`).
#[track_caller]
pub fn hard_tanh(x: &Tensor) -> Tensor {
    x.greater(1.0).select(1.0, x.less(-1.0).select(-1.0, x))
}

/// The gated linear unit (`jax.nn.glu`): `x` split in two halves along `axis`, `a·sigmoid(b)`.
#[track_caller]
pub fn glu(x: &Tensor, axis: i64) -> Tensor {
    let rank = x.ndim() as i64;
    let at = if axis < 0 { axis + rank } else { axis };
    if !(0..rank).contains(&at) || !x.shape()[at as usize].is_multiple_of(2) {
        return Tensor::failed(
            std::panic::Location::caller(),
            format!(
                "glu: axis {axis} of {} must exist and have an even size",
                x.ty()
            ),
            x.ty().clone(),
        );
    }
    let at = at as usize;
    let half = x.shape()[at] / 2;
    let mut limit = x.shape().to_vec();
    limit[at] = half;
    let a = x.slice(&vec![0; x.ndim()], &limit);
    let mut start = vec![0; x.ndim()];
    start[at] = half;
    let b = x.slice(&start, x.shape());
    a * b.sigmoid()
}

/// `max(x, 0) + alpha·expm1(min(x, 0) / alpha)` (`jax.nn.celu`; JAX's default alpha is 1).
#[track_caller]
pub fn celu(x: &Tensor, alpha: f64) -> Tensor {
    x.maximum(0.0) + (x.minimum(0.0) / alpha).expm1() * alpha
}

/// The scaled ELU of self-normalizing networks (`jax.nn.selu`).
#[track_caller]
pub fn selu(x: &Tensor) -> Tensor {
    const ALPHA: f64 = 1.673_263_242_354_377_3;
    const SCALE: f64 = 1.050_700_987_355_480_5;
    elu(x, ALPHA) * SCALE
}

/// `relu6(x + 3) / 6` (`jax.nn.hard_sigmoid`).
#[track_caller]
pub fn hard_sigmoid(x: &Tensor) -> Tensor {
    relu6(&(x + 3.0)) / 6.0
}

/// `x·hard_sigmoid(x)` (`jax.nn.hard_silu`, also `hard_swish`).
#[track_caller]
pub fn hard_silu(x: &Tensor) -> Tensor {
    x * hard_sigmoid(x)
}

/// `x / (|x| + 1)` (`jax.nn.soft_sign`).
#[track_caller]
pub fn soft_sign(x: &Tensor) -> Tensor {
    x / (x.abs() + 1.0)
}

/// 0 below −1, `x` above 1, `(x + 1)² / 4` between (`jax.nn.sparse_plus`).
#[track_caller]
pub fn sparse_plus(x: &Tensor) -> Tensor {
    let between = (x + 1.0).square() / 4.0;
    x.less_equal(-1.0)
        .select(0.0, x.greater_equal(1.0).select(x, &between))
}

/// `clip(x + 1, 0, 2) / 2` (`jax.nn.sparse_sigmoid`; `jnp.clip`'s maximum and minimum, whose
/// derivative is halved at the bounds).
#[track_caller]
pub fn sparse_sigmoid(x: &Tensor) -> Tensor {
    (x + 1.0).maximum(0.0).minimum(2.0) * 0.5
}

/// `(x + sqrt(x² + b)) / 2` (`jax.nn.squareplus`; JAX's default `b` is 4).
#[track_caller]
pub fn squareplus(x: &Tensor, b: f64) -> Tensor {
    (x + (x.square() + b).sqrt()) / 2.0
}

/// `x·tanh(softplus(x))` (`jax.nn.mish`).
#[track_caller]
pub fn mish(x: &Tensor) -> Tensor {
    x * softplus(x).tanh()
}

/// `(x − mean) / sqrt(variance + epsilon)` over `axis` (`jax.nn.standardize`, its default
/// "fast" variance `mean(x²) − mean(x)²`, clipped at 0).
#[track_caller]
pub fn standardize(x: &Tensor, axis: i32, epsilon: f64) -> Tensor {
    let mean = x.mean_keepdims(axis);
    let variance = (x.square().mean_keepdims(axis) - mean.square()).maximum(0.0);
    (x - mean) * (variance + epsilon).rsqrt()
}

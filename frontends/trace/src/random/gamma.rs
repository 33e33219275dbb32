//! Gamma, beta and Dirichlet draws with JAX's bits: each element's key split from the key in
//! row-major order, then Marsaglia and Tsang's rejection method with JAX's constants and
//! key splits (`_gamma_one`), shape parameters below 1 boosted by a uniform power (a log in
//! log space, as `loggamma` draws them for `beta` and `dirichlet`). The loops are `while`
//! instructions batched over the elements with `vmap`.
//!
//! The derivative with respect to the shape parameter is the implicit reparameterization
//! one, as JAX's (`random_gamma_grad`): `dx/dα = −(∂P(α, x)/∂α) / p(x; α)` with `P` the
//! regularized lower incomplete gamma function and `p` the density, `∂P/∂α` summed from
//! `P`'s series `Σ e^{−x} x^{α+n} / Γ(α+n+1)` term by term, in f64. It is a `custom_jvp` rule,
//! so both modes use it.

use super::distributions::exponential;
use super::sample::{normal, uniform};
use super::{split, split2, Key};
use crate::lax::while_loop;
use crate::{custom_jvp, vmap, Tensor};
use ferrax_ir::{DType, Shape};
use std::panic::Location;

/// Gamma(`a`, 1) floats of `dtype` and `shape` (`a` broadcast to it; `jax.random.gamma`).
#[track_caller]
pub fn gamma(key: &Key, a: &Tensor, shape: impl Into<Shape>, dtype: DType) -> Tensor {
    draw(key, a, shape.into(), dtype, false, Location::caller())
}

/// The logarithms of Gamma(`a`, 1) draws, computed in log space so that small `a` does not
/// underflow (`jax.random.loggamma`).
#[track_caller]
pub fn loggamma(key: &Key, a: &Tensor, shape: impl Into<Shape>, dtype: DType) -> Tensor {
    draw(key, a, shape.into(), dtype, true, Location::caller())
}

/// Beta(`a`, `b`) floats (`jax.random.beta`): two log-gamma draws from the key's halves,
/// `ga / (ga + gb)` scaled by their maximum.
#[track_caller]
pub fn beta(key: &Key, a: &Tensor, b: &Tensor, shape: impl Into<Shape>, dtype: DType) -> Tensor {
    let location = Location::caller();
    let shape = shape.into();
    let (key_a, key_b) = split2(key);
    let log_a = draw(&key_a, a, shape.clone(), dtype, true, location);
    let log_b = draw(&key_b, b, shape, dtype, true, location);
    let log_max = log_a.maximum(&log_b);
    let scaled_a = (log_a - &log_max).exp();
    let scaled_b = (log_b - log_max).exp();
    &scaled_a / (&scaled_a + scaled_b)
}

/// Dirichlet(`alpha`) draws over `alpha`'s last axis (`jax.random.dirichlet`): `shape` is
/// the batch (`alpha`'s leading axes when `None`), the result `shape + [k]`; the softmax of
/// `k` log-gamma draws.
#[track_caller]
pub fn dirichlet(key: &Key, alpha: &Tensor, shape: Option<&[usize]>, dtype: DType) -> Tensor {
    let location = Location::caller();
    let Some((&k, batch)) = alpha.shape().split_last() else {
        return Tensor::failed(
            location,
            format!(
                "dirichlet: alpha needs an axis of categories, it is {}",
                alpha.ty()
            ),
            alpha.ty().clone(),
        );
    };
    let mut full = shape.unwrap_or(batch).to_vec();
    full.push(k);
    let logs = draw(key, alpha, Shape::new(full), dtype, true, location);
    // JAX's softmax over the last axis (written out: `nn` draws from `random`).
    let unnormalized = (&logs - logs.max_keepdims(-1).stop_gradient()).exp();
    &unnormalized / unnormalized.sum_keepdims(-1)
}

fn draw(
    key: &Key,
    a: &Tensor,
    shape: Shape,
    dtype: DType,
    log_space: bool,
    location: &'static Location<'static>,
) -> Tensor {
    let dims = shape.dims().to_vec();
    if !dtype.is_float() {
        return Tensor::failed(
            location,
            format!("gamma: the dtype must be a float, it is {dtype}"),
            ferrax_ir::TensorType::new(dtype, dims),
        );
    }
    let n: usize = dims.iter().product();
    let alphas = a.astype(dtype).broadcast_to(dims.clone()).reshape([n]);
    let keys = split(key, n);
    let one = move |(k, alpha): (Key, Tensor)| {
        let sample = custom_jvp(
            move |(alpha, k): (Tensor, Key)| gamma_one(&k, &alpha, log_space),
            move |(alpha, k): (Tensor, Key), (t, _): (Tensor, Key)| {
                let sample = gamma_one(&k, &alpha, log_space);
                let slope = shape_derivative(&alpha, &sample, log_space);
                (sample, t * slope)
            },
        );
        sample((alpha, k))
    };
    vmap(one)((keys, alphas)).reshape(dims)
}

/// One draw for a scalar key and shape parameter (JAX's `_gamma_one`).
fn gamma_one(key: &Key, alpha: &Tensor, log_space: bool) -> Tensor {
    let dtype = alpha.dtype();
    let scalar = |v: f64| Tensor::full(dtype, Vec::<usize>::new(), v);
    let boost = alpha.greater_equal(1.0);
    let boosted = boost.select(alpha, &(alpha + 1.0));
    let d = &boosted - 1.0 / 3.0;
    let c = scalar(1.0 / 3.0) / d.sqrt();
    let (key, subkey) = split2(key);
    // Rejected while U ≥ 1 − 0.0331 X² and log U ≥ X/2 + d (1 − V + log V), X = x².
    let rejected = {
        let d = d.clone();
        move |(_, x, v, u): (Key, Tensor, Tensor, Tensor)| {
            let squeeze = u.greater_equal(-(&x * &x * 0.0331) + 1.0);
            let log_test = u.log().greater_equal(&x * 0.5 + &d * (-&v + 1.0 + v.log()));
            squeeze.logical_and(log_test)
        }
    };
    let propose = {
        let c = c.clone();
        move |(k, _, _, _): (Key, Tensor, Tensor, Tensor)| {
            let keys = split(&k, 3);
            let (k, x_key, u_key) = (keys.get(0), keys.get(1), keys.get(2));
            let c = c.clone();
            // A normal x with v = 1 + c x > 0.
            let (_, x, v) = while_loop(
                |(_, _, v): (Key, Tensor, Tensor)| v.less_equal(0.0),
                move |(k, _, _): (Key, Tensor, Tensor)| {
                    let (k, sub) = split2(&k);
                    let x = normal(&sub, Vec::<usize>::new(), dtype);
                    let v = &x * &c + 1.0;
                    (k, x, v)
                },
                (x_key, scalar(0.0), scalar(-1.0)),
            );
            let u = uniform(&u_key, Vec::<usize>::new(), dtype);
            (k, &x * &x, &v * &v * &v, u)
        }
    };
    let (_, _, v, _) = while_loop(
        rejected,
        propose,
        (key, scalar(0.0), scalar(1.0), scalar(2.0)),
    );
    match log_space {
        false => {
            let u = -uniform(&subkey, Vec::<usize>::new(), dtype) + 1.0;
            let power = u.pow(scalar(1.0) / alpha);
            d * v * boost.select(1.0, &power)
        }
        true => {
            let log_u = -exponential(&subkey, Vec::<usize>::new(), dtype);
            let none = boost.logical_or(log_u.equal(0.0));
            let log_boost = none.select(0.0, &(&log_u * (scalar(1.0) / alpha)));
            d.log() + v.log() + log_boost
        }
    }
}

/// `d sample / d alpha` for a Gamma(`alpha`) draw (`log_space`: of its logarithm), in f64.
fn shape_derivative(alpha: &Tensor, sample: &Tensor, log_space: bool) -> Tensor {
    let dtype = alpha.dtype();
    let a = alpha.astype(DType::F64);
    let x = match log_space {
        true => sample.astype(DType::F64).exp(),
        false => sample.astype(DType::F64),
    };
    let log_x = x.log();
    // ∂P/∂α = Σ t_n (log x − ψ(α + n + 1)), t_n = exp(−x + (α + n) log x − lgamma(α + n + 1)).
    let term = |n: &Tensor| {
        let an = &a + n;
        (-&x + &an * &log_x - (&an + 1.0).lgamma()).exp() * (&log_x - (&an + 1.0).digamma())
    };
    let zero = Tensor::zeros(DType::F64, Vec::<usize>::new());
    let (_, dp, _) = while_loop(
        {
            let (a, x) = (a.clone(), x.clone());
            move |(n, total, last): (Tensor, Tensor, Tensor)| {
                // Past the terms' peak (n > x − α) and negligible, or 100,000 terms.
                let small = last.abs().less_equal(total.abs() * 1e-17);
                let past = n.greater(&x - &a);
                let done = small.logical_and(past).logical_or(n.greater_equal(1e5));
                done.logical_not().logical_and(total.is_finite())
            }
        },
        move |(n, total, _): (Tensor, Tensor, Tensor)| {
            let t = term(&n);
            (n + 1.0, total + &t, t)
        },
        (
            zero.clone(),
            zero,
            Tensor::full(DType::F64, Vec::<usize>::new(), 1.0),
        ),
    );
    let log_density = (&a - 1.0) * &log_x - &x - a.lgamma();
    let dx = -dp / log_density.exp();
    let slope = match log_space {
        true => dx / x,
        false => dx,
    };
    slope.astype(dtype)
}

//! Poisson draws as `jax.random.poisson` makes them, so the same key gives JAX's counts:
//! Knuth's product of uniforms for rates below 10, Hörmann's transformed rejection above,
//! each a `while` loop over the whole array (one key split per round, every element drawing
//! until all are done), computed in f32 whatever the result's integer type.

use super::sample::uniform;
use super::transforms::param;
use super::{split, split2, Key};
use crate::lax::while_loop;
use crate::{Operand, Tensor};
use ferrax_ir::{DType, Shape, TensorType};
use std::panic::Location;

/// Poisson counts of rate `lam` (broadcast to `shape`) as integers of `dtype`
/// (`jax.random.poisson`).
#[track_caller]
pub fn poisson<'a>(
    key: &Key,
    lam: impl Into<Operand<'a>>,
    shape: impl Into<Shape>,
    dtype: DType,
) -> Tensor {
    let location = Location::caller();
    let dims = shape.into().dims().to_vec();
    let Some(max_rounds) = max_rounds(dtype) else {
        return Tensor::failed(
            location,
            format!("poisson: the dtype must be an integer, it is {dtype}"),
            TensorType::new(dtype, dims),
        );
    };
    let lam = param(lam, DType::F32).broadcast_to(dims.clone());
    let use_knuth = lam.is_nan().logical_or(lam.less(10.0));
    let lam_knuth = use_knuth.select(&lam, 0.0);
    // The rejection method's acceptance rate tends to 89% as the rate grows: any large rate
    // keeps the elements Knuth's method draws from slowing its loop.
    let lam_rejection = use_knuth.select(1e5, &lam);
    let counts = use_knuth.select(
        knuth(key, &lam_knuth, &dims, dtype, max_rounds),
        rejection(key, &lam_rejection, &dims, dtype, max_rounds),
    );
    lam.equal(0.0).select(0, &counts)
}

/// JAX's bound on the rounds of either loop: the result type's largest value (no bound in
/// practice), as an `i32` counter can count.
fn max_rounds(dtype: DType) -> Option<f64> {
    match dtype {
        DType::I8 => Some(i8::MAX.into()),
        DType::U8 => Some(u8::MAX.into()),
        DType::I16 => Some(i16::MAX.into()),
        DType::U16 => Some(u16::MAX.into()),
        DType::I32 | DType::U32 | DType::I64 | DType::U64 => Some(i32::MAX.into()),
        _ => None,
    }
}

/// Knuth's method: count the uniforms whose running product stays above `exp(−λ)`.
fn knuth(key: &Key, lam: &Tensor, dims: &[usize], dtype: DType, max_rounds: f64) -> Tensor {
    let shape = dims.to_vec();
    let above = {
        let lam = lam.clone();
        move |log_product: &Tensor| log_product.greater(&-&lam)
    };
    let unfinished = {
        let above = above.clone();
        move |(round, _, _, log_product): (Tensor, Tensor, Key, Tensor)| {
            above(&log_product)
                .any(..)
                .logical_and(round.less(max_rounds))
        }
    };
    let step = move |(round, k, rng, log_product): (Tensor, Tensor, Key, Tensor)| {
        let (rng, sub) = split2(&rng);
        let k = above(&log_product).select(&(&k + 1), &k);
        let u = uniform(&sub, shape.clone(), DType::F32);
        (round + 1, k, rng, log_product + u.log())
    };
    let init = (
        Tensor::scalar(0i32),
        Tensor::zeros(dtype, dims.to_vec()),
        key.clone(),
        Tensor::zeros(DType::F32, dims.to_vec()),
    );
    let (_, k, _, _) = while_loop(unfinished, step, init);
    k - 1
}

/// Hörmann's transformed rejection (PTRS), with JAX's constants and arithmetic order.
fn rejection(key: &Key, lam: &Tensor, dims: &[usize], dtype: DType, max_rounds: f64) -> Tensor {
    let shape = dims.to_vec();
    let scalar = |v: f64| Tensor::full(DType::F32, Vec::<usize>::new(), v);
    let log_lam = lam.log();
    let b = lam.sqrt() * 2.53 + 0.931;
    let a = &b * 0.02483 - 0.059;
    let inv_alpha = scalar(1.1328) / (&b - 3.4) + 1.1239;
    let v_r = -(scalar(3.6224) / (&b - 2.0)) + 0.9277;
    let lam = lam.clone();
    let step = move |(round, k_out, accepted, rng): (Tensor, Tensor, Tensor, Key)| {
        let keys = split(&rng, 3);
        let (rng, key_u, key_v) = (keys.get(0), keys.get(1), keys.get(2));
        let u = uniform(&key_u, shape.clone(), DType::F32) - 0.5;
        let v = uniform(&key_v, shape.clone(), DType::F32);
        let u_shifted = -u.abs() + 0.5;
        let k = ((&a * 2.0 / &u_shifted + &b) * &u + &lam + 0.43).floor();
        let s = (&v * &inv_alpha / (&a / (&u_shifted * &u_shifted) + &b)).log();
        let t = -&lam + &k * &log_lam - (&k + 1.0).lgamma();
        let accept_early = u_shifted
            .greater_equal(0.07)
            .logical_and(v.less_equal(&v_r));
        let reject = k
            .less(0.0)
            .logical_or(u_shifted.less(0.013).logical_and(v.greater(&u_shifted)));
        let accept = accept_early.logical_or(reject.logical_not().logical_and(s.less_equal(&t)));
        let k_out = accept.select(&k, &k_out);
        (round + 1, k_out, accepted.logical_or(&accept), rng)
    };
    let unfinished = move |(round, _, accepted, _): (Tensor, Tensor, Tensor, Key)| {
        accepted
            .logical_not()
            .any(..)
            .logical_and(round.less(max_rounds))
    };
    let init = (
        Tensor::scalar(0i32),
        Tensor::full(DType::F32, dims.to_vec(), -1.0),
        Tensor::full(DType::Bool, dims.to_vec(), 0.0),
        key.clone(),
    );
    let (_, k, _, _) = while_loop(unfinished, step, init);
    k.astype(dtype)
}

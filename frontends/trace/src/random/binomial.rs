//! Binomial draws as `jax.random.binomial` makes them, so the same key gives JAX's counts:
//! with `q = min(p, 1 − p)`, the inversion of geometric waiting times where `n·q ≤ 10`, and
//! Hörmann's transformed rejection (BTRS) above, each a `while` loop over the whole array
//! (its key split per round, every element drawing until all are done); `n − k` where `p ≥ ½`.

use super::sample::uniform;
use super::transforms::param;
use super::{split, split2, Key};
use crate::lax::while_loop;
use crate::{Operand, Tensor};
use ferrax_ir::{DType, Shape, TensorType};
use std::panic::Location;

/// Binomial counts of `n` trials of success probability `p` (both broadcast to `shape`), as
/// floats of `dtype` (`jax.random.binomial`): NaN where `n` is NaN or negative or `p` is NaN
/// or negative, infinity where `n` is; a fractional `n` is floored. Computed in f64 for f64
/// results, else in f32 (JAX computes in `p`'s type: the same for a number or an array of the
/// result's type).
#[track_caller]
pub fn binomial<'a, 'b>(
    key: &Key,
    n: impl Into<Operand<'a>>,
    p: impl Into<Operand<'b>>,
    shape: impl Into<Shape>,
    dtype: DType,
) -> Tensor {
    let location = Location::caller();
    let dims = shape.into().dims().to_vec();
    if !dtype.is_float() {
        return Tensor::failed(
            location,
            format!("binomial: the dtype must be a float type, it is {dtype}"),
            TensorType::new(dtype, dims),
        );
    }
    let work = match dtype {
        DType::F64 => DType::F64,
        _ => DType::F32,
    };
    let p = param(p, work).broadcast_to(dims.clone());
    let n = param(n, work).broadcast_to(dims.clone());
    let p_below_half = p.less(0.5);
    let q = p_below_half.select(&p, &(1.0 - &p));
    let n_invalid = n.is_nan().logical_or(n.less(0.0));
    let n_infinite = n.is_inf();
    let q_nan = q.is_nan();
    let q_negative = q.less(0.0);
    let q = q_nan.logical_or(&q_negative).select(0.01, &q);
    let use_inversion = n_invalid.logical_or((&n * &q).less_equal(10.0));
    let n = n.floor();
    // Each method's elements get harmless parameters where the other one draws.
    let n_inversion = use_inversion.select(&n, 0.0);
    let n_rejection = use_inversion.select(1e4, &n);
    let q_rejection = use_inversion.select(0.5, &q);
    let k = use_inversion.select(
        inversion(key, &n_inversion, &q, &dims).astype(dtype),
        rejection(key, &n_rejection, &q_rejection, &dims).astype(dtype),
    );
    let invalid = q_negative.logical_or(&q_nan).logical_or(&n_invalid);
    let k = invalid.select(f64::NAN, &k);
    let k = n_infinite
        .logical_and(invalid.logical_not())
        .select(f64::INFINITY, &k);
    let as_drawn = p_below_half
        .logical_or(&n_invalid)
        .logical_or(&q_nan)
        .logical_or(&n_infinite);
    as_drawn.select(&k, &(n.astype(dtype) - &k))
}

/// Counts geometric waiting times of probability `q` until their sum passes `n`.
fn inversion(key: &Key, n: &Tensor, q: &Tensor, dims: &[usize]) -> Tensor {
    let shape = dims.to_vec();
    let dtype = q.dtype();
    let log_complement = (-q).log1p();
    let within = {
        let n = n.clone();
        move |sum: &Tensor| sum.less_equal(&n)
    };
    let unfinished = {
        let within = within.clone();
        move |(_, sum, _): (Tensor, Tensor, Key)| within(&sum).any(..)
    };
    let step = move |(count, sum, rng): (Tensor, Tensor, Key)| {
        let (sub, rng) = split2(&rng);
        let count = within(&sum).select(&(&count + 1.0), &count);
        let u = uniform(&sub, shape.clone(), dtype);
        let waiting = (u.log() / &log_complement).ceil();
        (count, sum + waiting, rng)
    };
    let init = (
        Tensor::zeros(dtype, dims.to_vec()),
        Tensor::zeros(dtype, dims.to_vec()),
        key.clone(),
    );
    let (count, _, _) = while_loop(unfinished, step, init);
    count - 1.0
}

/// The tail of Stirling's series for `log k!`, as JAX computes it: a table for `k ≤ 9`, else
/// the series' first terms, which JAX evaluates at `k` clamped to [0, 9] (so at 9 for every
/// larger `k`: the draws keep its value).
fn stirling_tail(k: &Tensor) -> Tensor {
    const TABLE: [f64; 10] = [
        0.0810614667953272,
        0.0413406959554092,
        0.0276779256849983,
        0.02079067210376509,
        0.0166446911898211,
        0.0138761288230707,
        0.0118967099458917,
        0.0104112652619720,
        0.00925546218271273,
        0.00833056343336287,
    ];
    let dtype = k.dtype();
    let tabled = k.less_equal(9.0);
    let k = k.clip(0.0, 9.0);
    let next_squared = (&k + 1.0) * (&k + 1.0);
    let series =
        (1.0 / 12.0 - (1.0 / 360.0 - 1.0 / 1260.0 / &next_squared) / &next_squared) / (&k + 1.0);
    let table = Tensor::from_vec([TABLE.len()], TABLE.to_vec()).astype(dtype);
    let looked_up = table.take(&k.floor().astype(DType::I32), 0);
    tabled.select(&looked_up, &series)
}

/// Hörmann's BTRS, with JAX's constants and arithmetic order.
fn rejection(key: &Key, n: &Tensor, q: &Tensor, dims: &[usize]) -> Tensor {
    let shape = dims.to_vec();
    let dtype = q.dtype();
    let stddev = (n * q * (1.0 - q)).sqrt();
    let b = 1.15 + 2.53 * &stddev;
    let a = -0.0873 + 0.0248 * &b + 0.01 * q;
    let c = n * q + 0.5;
    let v_r = 0.92 - 4.2 / &b;
    let r = q / (1.0 - q);
    let alpha = (2.83 + 5.1 / &b) * &stddev;
    let m = ((n + 1.0) * q).floor();
    let n = n.clone();
    let step = move |(k_out, accepted, rng): (Tensor, Tensor, Key)| {
        let keys = split(&rng, 3);
        let (rng, key_u, key_v) = (keys.get(0), keys.get(1), keys.get(2));
        let u = uniform(&key_u, shape.clone(), dtype) - 0.5;
        let v = uniform(&key_v, shape.clone(), dtype);
        let us = 0.5 - u.abs();
        let accept_early = us.greater_equal(0.07).logical_and(v.less_equal(&v_r));
        let k = ((2.0 * &a / &us + &b) * &u + &c).floor();
        let reject = k.less(0.0).logical_or(k.greater(&n));
        let v = (&v * &alpha / (&a / (&us * &us) + &b)).log();
        let bound = (&m + 0.5) * ((&m + 1.0) / (&r * (&n - &m + 1.0))).log()
            + (&n + 1.0) * ((&n - &m + 1.0) / (&n - &k + 1.0)).log()
            + (&k + 0.5) * (&r * (&n - &k + 1.0) / (&k + 1.0)).log()
            + stirling_tail(&m)
            + stirling_tail(&(&n - &m))
            - stirling_tail(&k)
            - stirling_tail(&(&n - &k));
        let accept =
            accept_early.logical_or(reject.logical_not().logical_and(v.less_equal(&bound)));
        let k_out = accept.select(&k, &k_out);
        (k_out, accepted.logical_or(&accept), rng)
    };
    let unfinished = move |(_, accepted, _): (Tensor, Tensor, Key)| accepted.logical_not().any(..);
    let init = (
        Tensor::full(dtype, dims.to_vec(), -1.0),
        Tensor::full(DType::Bool, dims.to_vec(), 0.0),
        key.clone(),
    );
    let (k, _, _) = while_loop(unfinished, step, init);
    k
}

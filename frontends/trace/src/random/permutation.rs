//! Random permutations (`jax.random.permutation`) by JAX's algorithm, so the same key gives
//! JAX's permutation: rather than Fisher-Yates, which is sequential, the array is sorted
//! stably by fresh random `u32` keys, a few rounds (enough that with high probability some
//! round gives every element a distinct key, which makes the result a uniform sample).

use super::key::{split2, Key};
use super::sample::bits;
use crate::Tensor;
use ferrax_ir::DType;

/// `0..n` in random order, as `i32` (`jax.random.permutation(key, n)`).
#[track_caller]
pub fn permutation(key: &Key, n: usize) -> Tensor {
    shuffle(key, &Tensor::arange(DType::I32, n), 0)
}

/// `x` with its slices along `axis` in random order, the same order for every other
/// position (`jax.random.permutation(key, x, axis)`); a negative axis counts from the end.
#[track_caller]
pub fn permutation_of(key: &Key, x: &Tensor, axis: i64) -> Tensor {
    if x.ndim() == 1 {
        return shuffle(key, x, axis);
    }
    let size = match usize::try_from(if axis < 0 {
        axis + x.ndim() as i64
    } else {
        axis
    }) {
        Ok(a) if a < x.ndim() => x.shape()[a],
        // Out of range: `take` reports the axis.
        Ok(_) | Err(_) => 0,
    };
    x.take(&permutation(key, size), axis)
}

/// Each line of `x` along `axis` shuffled independently of the others
/// (`jax.random.permutation(key, x, axis, independent=True)`, JAX's `_shuffle`): rounds of
/// a stable sort by random bits, `ceil(3 ln(size) / ln(2^32 - 1))` of them.
#[track_caller]
pub fn shuffle(key: &Key, x: &Tensor, axis: i64) -> Tensor {
    let size = x.shape().iter().product::<usize>().max(1) as f64;
    let rounds = (3.0 * size.ln() / f64::from(u32::MAX).ln()).ceil() as usize;
    let (mut key, mut x) = (key.clone(), x.clone());
    for _ in 0..rounds {
        let (next, subkey) = split2(&key);
        let sort_keys = bits(&subkey, x.shape().to_vec());
        x = crate::lax::sort_key_val(&sort_keys, &x, axis).1;
        key = next;
    }
    x
}

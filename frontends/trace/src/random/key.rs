//! Typed PRNG keys (`jax.random.key`): a value holding the generator's state, split and
//! folded purely, never mutated.

use super::threefry::{iota_2x32, schedule, threefry2x32, word};
use crate::tensor::Inner;
use crate::{Error, Operand, Result, Tensor, Tree, TreeDef};
use ferrax_ir::{DType, TensorType};
use std::panic::Location;
use std::sync::Arc;

/// A threefry2x32 PRNG key, or an array of them (JAX's typed key, `jax.random.key`).
///
/// Its data is a `u32` tensor of shape `[..shape, 2]` ([`Key::data`], `jax.random.key_data`).
/// A key is a `Tree` leaf, so it passes through `jit`, `grad` and `vmap` like a tensor: a key
/// array of shape `[n]` vmapped on axis 0 gives each example a scalar key. The sampling
/// functions take scalar keys, as JAX's do.
#[derive(Clone, Debug)]
pub struct Key {
    data: Tensor,
}

/// The key for `seed` (`jax.random.key(seed)`): its data is `[0, seed]`, the key JAX makes
/// from any seed below 2^32.
#[track_caller]
pub fn key(seed: u32) -> Key {
    Key {
        data: Tensor::concatenate(&[word(0).reshape([1]), word(seed).reshape([1])], 0),
    }
}

/// `num` new keys from `key` (`jax.random.split(key, num)`): a key array of shape `[num]`.
#[track_caller]
pub fn split(key: &Key, num: usize) -> Key {
    key.split_shape(&[num])
}

/// Two new keys from `key` (`k1, k2 = jax.random.split(key)`).
#[track_caller]
pub fn split2(key: &Key) -> (Key, Key) {
    let keys = key.split_shape(&[2]);
    (keys.get(0), keys.get(1))
}

/// A new key from `key` and an integer scalar `data` (`jax.random.fold_in`): a Rust number
/// or a traced integer tensor (a step counter), taken modulo 2^32.
#[track_caller]
pub fn fold_in<'a>(key: &Key, data: impl Into<Operand<'a>>) -> Key {
    let location = Location::caller();
    let data = data.into().resolve(&word(0));
    let (k1, k2) = match key.words("fold_in") {
        Ok(words) => words,
        Err(unusable) => return unusable.key(location, &[]),
    };
    if data.ndim() != 0 || !data.dtype().is_int() {
        return Key::failed(
            location,
            format!(
                "fold_in: the data must be an integer scalar, it is {}",
                data.ty()
            ),
            &[],
        );
    }
    // JAX hashes the counter pair (0, data): `threefry_2x32(key, threefry_seed(data))`.
    let schedule = schedule(&k1, &k2);
    let [b1, b2] = threefry2x32(&schedule, [word(0), data.astype(DType::U32)]);
    Key {
        data: Tensor::concatenate(&[b1.reshape([1]), b2.reshape([1])], 0),
    }
}

impl Key {
    /// The key for raw data (`jax.random.wrap_key_data`): a `u32` tensor of shape
    /// `[..shape, 2]`; anything else gives a key whose uses fail with that error.
    #[track_caller]
    pub fn from_data(data: Tensor) -> Key {
        let location = Location::caller();
        if data.dtype() != DType::U32 || data.shape().last() != Some(&2) {
            let message = format!(
                "a key's data must be u32[..., 2] (jax.random.key_data), it is {}",
                data.ty()
            );
            let shape = data.shape().split_last().map_or(&[][..], |(_, s)| s);
            return Key::failed(location, message, shape);
        }
        Key { data }
    }

    /// The raw `u32[..shape, 2]` data (`jax.random.key_data`).
    pub fn data(&self) -> &Tensor {
        &self.data
    }

    /// The shape of the key array: `[]` for one key.
    pub fn shape(&self) -> &[usize] {
        let shape = self.data.shape();
        &shape[..shape.len().saturating_sub(1)]
    }

    /// Keys of shape `shape` from this one (`jax.random.split(key, shape)`): element `i`
    /// (row-major) is the threefry hash of the counter `i` under this key.
    #[track_caller]
    pub fn split_shape(&self, shape: &[usize]) -> Key {
        let location = Location::caller();
        let (k1, k2) = match self.words("split") {
            Ok(words) => words,
            Err(unusable) => return unusable.key(location, shape),
        };
        let schedule = schedule(&k1, &k2);
        let counts = match iota_2x32(shape) {
            Ok(counts) => counts,
            Err(message) => return Key::failed(location, format!("split: {message}"), shape),
        };
        let [b1, b2] = threefry2x32(&schedule, counts);
        Key {
            data: Tensor::concatenate(&[b1.expand_dims(-1), b2.expand_dims(-1)], -1),
        }
    }

    /// Key `i` of a key array (along its first axis).
    #[track_caller]
    pub fn get(&self, i: usize) -> Key {
        let location = Location::caller();
        match self.shape().first() {
            Some(&n) if i < n => {
                let mut start = vec![0; self.data.ndim()];
                let mut limit = self.data.shape().to_vec();
                start[0] = i;
                limit[0] = i + 1;
                Key {
                    data: self.data.slice(&start, &limit).squeeze(0),
                }
            }
            _ => Key::failed(
                location,
                format!(
                    "key index {i} is out of range for a key array of shape {:?}",
                    self.shape()
                ),
                self.shape().get(1..).unwrap_or(&[]),
            ),
        }
    }

    /// The keys of a key array along its first axis.
    #[track_caller]
    pub fn unstack(&self) -> Vec<Key> {
        let n = self.shape().first().copied().unwrap_or(0);
        (0..n).map(|i| self.get(i)).collect()
    }

    /// The two `u32[]` words of a scalar key, or why it cannot be used by `op`: it is a key
    /// array, or carries an error.
    pub(super) fn words(&self, op: &str) -> std::result::Result<(Tensor, Tensor), Unusable> {
        if let Inner::Failed { error, .. } = &self.data.0 {
            return Err(Unusable::Carried(error.clone()));
        }
        if !self.shape().is_empty() {
            return Err(Unusable::New(format!(
                "{op} takes a single key, this is a key array of shape {:?}; use vmap (or Key::get) to apply it to each",
                self.shape()
            )));
        }
        let word_at = |i: usize| self.data.slice(&[i], &[i + 1]).squeeze(0);
        Ok((word_at(0), word_at(1)))
    }

    /// A key array of `shape` whose uses fail with `message`.
    fn failed(location: &'static Location<'static>, message: String, shape: &[usize]) -> Key {
        Unusable::New(message).key(location, shape)
    }
}

/// Why a key cannot be used: the error its data already carries, or a new one.
pub(super) enum Unusable {
    Carried(Arc<Error>),
    New(String),
}

impl Unusable {
    /// A failed tensor of type `ty` carrying this error.
    pub(super) fn tensor(self, location: &'static Location<'static>, ty: TensorType) -> Tensor {
        match self {
            Unusable::Carried(error) => Tensor(Inner::Failed { error, ty }),
            Unusable::New(message) => Tensor::failed(location, message, ty),
        }
    }

    /// A failed key array of `shape` carrying this error.
    fn key(self, location: &'static Location<'static>, shape: &[usize]) -> Key {
        let mut dims = shape.to_vec();
        dims.push(2);
        Key {
            data: self.tensor(location, TensorType::new(DType::U32, dims)),
        }
    }
}

impl Tree for Key {
    fn flatten(&self, leaves: &mut Vec<Tensor>) -> TreeDef {
        leaves.push(self.data.clone());
        TreeDef::Leaf
    }

    fn unflatten(def: &TreeDef, leaves: &mut dyn Iterator<Item = Tensor>) -> Result<Self> {
        let data = Tensor::unflatten(def, leaves)?;
        if data.dtype() != DType::U32 || data.shape().last() != Some(&2) {
            return Err(Error::Tree {
                expected: "a key's u32[..., 2] data".into(),
                found: data.ty().to_string(),
            });
        }
        Ok(Key { data })
    }
}

//! Adam and AdamW: optax's `scale_by_adam` (bias-corrected moments), decoupled weight decay
//! (`add_decayed_weights`, with a mask choosing the leaves it applies to), and the
//! optimizers chaining them with the learning rate.

use super::{increment, leaves_of, or_failed, scale_by_learning_rate, zero_count, Chain};
use super::{GradientTransformation, LearningRate, ScaleByLearningRate};
use crate::tree::child_key_paths;
use crate::tree_util::{tree_unflatten, zeros_like};
use crate::{Error, Result, Tensor, Tree, TreeDef};
use ferrax_ir::DType;
use std::fmt;
use std::sync::Arc;

/// Adam's scaling (`optax.scale_by_adam`): `mu = b1 mu + (1 - b1) g`,
/// `nu = b2 nu + (1 - b2) g^2`, and the update `mu_hat / (sqrt(nu_hat + eps_root) + eps)`
/// with `mu_hat = mu / (1 - b1^count)`, `nu_hat = nu / (1 - b2^count)` (count from 1).
#[derive(Clone, Debug)]
pub struct ScaleByAdam {
    pub b1: f64,
    pub b2: f64,
    pub eps: f64,
    /// Added to `nu_hat` inside the square root (0 in Adam; optax's `eps_root`).
    pub eps_root: f64,
}

/// Adam's step count and moments; `mu` and `nu` have the parameters' structure.
#[derive(Clone, Debug)]
pub struct AdamState<P> {
    /// An `i32` scalar: the updates made so far.
    pub count: Tensor,
    pub mu: P,
    pub nu: P,
}

impl<P: Tree> Tree for AdamState<P> {
    fn flatten(&self, leaves: &mut Vec<Tensor>) -> TreeDef {
        TreeDef::Node(vec![
            self.count.flatten(leaves),
            self.mu.flatten(leaves),
            self.nu.flatten(leaves),
        ])
    }

    fn unflatten(def: &TreeDef, leaves: &mut dyn Iterator<Item = Tensor>) -> Result<Self> {
        let c = def.children(3)?;
        Ok(AdamState {
            count: Tensor::unflatten(&c[0], leaves)?,
            mu: P::unflatten(&c[1], leaves)?,
            nu: P::unflatten(&c[2], leaves)?,
        })
    }

    fn key_paths(&self, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
        child_key_paths("count", &self.count, prefix, out);
        child_key_paths("mu", &self.mu, prefix, out);
        child_key_paths("nu", &self.nu, prefix, out);
    }
}

/// `1 - decay^count` in `dtype` (optax's bias correction, with its float `decay`).
fn bias_correction(decay: f64, count: &Tensor, dtype: DType) -> Tensor {
    let power = Tensor::full(dtype, Vec::<usize>::new(), decay).pow(count.astype(dtype));
    -power + 1.0
}

impl<P: Tree> GradientTransformation<P> for ScaleByAdam {
    type State = AdamState<P>;

    fn init(&self, params: &P) -> AdamState<P> {
        AdamState {
            count: zero_count(),
            mu: zeros_like(params),
            nu: zeros_like(params),
        }
    }

    fn update(&self, updates: &P, state: &AdamState<P>, _: &P) -> (P, AdamState<P>) {
        let result = leaves_of(
            updates,
            [
                (&state.mu, "the first moment"),
                (&state.nu, "the second moment"),
            ],
        )
        .and_then(|(def, g, [mu, nu])| {
            let mu: Vec<Tensor> = g
                .iter()
                .zip(&mu)
                .map(|(g, m)| g * (1.0 - self.b1) + m * self.b1)
                .collect();
            let nu: Vec<Tensor> = g
                .iter()
                .zip(&nu)
                .map(|(g, v)| (g * g) * (1.0 - self.b2) + v * self.b2)
                .collect();
            let count = increment(&state.count);
            // optax computes the corrections in its default float type: f64 only with f64 leaves.
            let wide = if g.iter().any(|g| g.dtype() == DType::F64) {
                DType::F64
            } else {
                DType::F32
            };
            let (c1, c2) = (
                bias_correction(self.b1, &count, wide),
                bias_correction(self.b2, &count, wide),
            );
            let out = mu
                .iter()
                .zip(&nu)
                .map(|(m, v)| {
                    let m_hat = m / c1.astype(m.dtype());
                    let v_hat = v / c2.astype(v.dtype());
                    m_hat / ((v_hat + self.eps_root).sqrt() + self.eps)
                })
                .collect();
            Ok((
                tree_unflatten(&def, out)?,
                AdamState {
                    count,
                    mu: tree_unflatten(&def, mu)?,
                    nu: tree_unflatten(&def, nu)?,
                },
            ))
        });
        or_failed(result, updates, state)
    }
}

/// A choice of leaves by index (in flattening order) and value.
pub type LeafPredicate = dyn Fn(usize, &Tensor) -> bool + Send + Sync;

/// Which leaves weight decay applies to (optax's `mask`): all of them, those a function of
/// the leaf's index (in flattening order) and value picks, or one flag per leaf.
#[derive(Clone)]
pub enum Mask {
    All,
    /// `f(index, leaf)`: whether leaf `index` decays (say `|_, w| w.ndim() >= 2`, matrices but
    /// not biases or norm scales).
    ByLeaf(Arc<LeafPredicate>),
    /// One flag per leaf in flattening order; another count is a structure error.
    Leaves(Vec<bool>),
}

impl Mask {
    /// A mask chosen by `f(index, leaf)` for each leaf.
    pub fn by_leaf(f: impl Fn(usize, &Tensor) -> bool + Send + Sync + 'static) -> Mask {
        Mask::ByLeaf(Arc::new(f))
    }

    /// The flags of `leaves`.
    fn flags(&self, leaves: &[Tensor]) -> Result<Vec<bool>> {
        match self {
            Mask::All => Ok(vec![true; leaves.len()]),
            Mask::ByLeaf(f) => Ok(leaves.iter().enumerate().map(|(i, l)| f(i, l)).collect()),
            Mask::Leaves(v) if v.len() == leaves.len() => Ok(v.clone()),
            Mask::Leaves(v) => Err(Error::Tree {
                expected: format!(
                    "a weight decay mask of {} flags, one per leaf",
                    leaves.len()
                ),
                found: format!("{} flags", v.len()),
            }),
        }
    }
}

impl fmt::Debug for Mask {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Mask::All => f.write_str("All"),
            Mask::ByLeaf(_) => f.write_str("ByLeaf(..)"),
            Mask::Leaves(v) => f.debug_tuple("Leaves").field(v).finish(),
        }
    }
}

/// Decoupled weight decay (`optax.add_decayed_weights`, masked as `optax.masked` would):
/// `updates + weight_decay * params` on the masked leaves, the others unchanged.
#[derive(Clone, Debug)]
pub struct AddDecayedWeights {
    pub weight_decay: f64,
    pub mask: Mask,
}

impl<P: Tree> GradientTransformation<P> for AddDecayedWeights {
    type State = ();

    fn init(&self, _: &P) {}

    fn update(&self, updates: &P, state: &(), params: &P) -> (P, ()) {
        let result = leaves_of(updates, [(params, "the parameters")]).and_then(|(def, g, [p])| {
            let flags = self.mask.flags(&p)?;
            let out = g
                .iter()
                .zip(&p)
                .zip(flags)
                .map(|((g, p), on)| {
                    if on {
                        g + p * self.weight_decay
                    } else {
                        g.clone()
                    }
                })
                .collect();
            Ok((tree_unflatten(&def, out)?, ()))
        });
        or_failed(result, updates, state)
    }
}

/// Adam: [`ScaleByAdam`] then the learning rate.
pub type Adam = Chain<(ScaleByAdam, ScaleByLearningRate)>;

/// AdamW: [`ScaleByAdam`], [`AddDecayedWeights`], then the learning rate.
pub type AdamW = Chain<(ScaleByAdam, AddDecayedWeights, ScaleByLearningRate)>;

/// Adam (`optax.adam(lr, b1, b2, eps)`; the usual values are 0.9, 0.999, 1e-8).
pub fn adam(learning_rate: impl Into<LearningRate>, b1: f64, b2: f64, eps: f64) -> Adam {
    Chain((
        ScaleByAdam {
            b1,
            b2,
            eps,
            eps_root: 0.0,
        },
        scale_by_learning_rate(learning_rate),
    ))
}

/// AdamW (`optax.adamw`): Adam with weight decay decoupled from the moments,
/// `updates = adam(g) + weight_decay * params` on the leaves `mask` picks, times `-lr`.
pub fn adamw(
    learning_rate: impl Into<LearningRate>,
    b1: f64,
    b2: f64,
    eps: f64,
    weight_decay: f64,
    mask: Mask,
) -> AdamW {
    Chain((
        ScaleByAdam {
            b1,
            b2,
            eps,
            eps_root: 0.0,
        },
        AddDecayedWeights { weight_decay, mask },
        scale_by_learning_rate(learning_rate),
    ))
}

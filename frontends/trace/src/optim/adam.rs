//! Adam, AdamW and Nadam: optax's `scale_by_adam` (bias-corrected moments, Nesterov's
//! look-ahead for Nadam), decoupled weight decay (`add_decayed_weights`, with a mask choosing
//! the leaves it applies to), and the optimizers chaining them with the learning rate.

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
    /// Nadam's Nesterov momentum: `mu_hat = b1 mu / (1 - b1^(count+1)) + (1 - b1) g /
    /// (1 - b1^count)`.
    pub nesterov: bool,
}

impl ScaleByAdam {
    /// Adam's scaling without `eps_root`, Nadam's with `nesterov`.
    pub fn new(b1: f64, b2: f64, eps: f64, nesterov: bool) -> ScaleByAdam {
        ScaleByAdam {
            b1,
            b2,
            eps,
            eps_root: 0.0,
            nesterov,
        }
    }
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

impl<P: Tree> AdamState<P> {
    /// The initial state: a zero count and zero moments of `params`' shapes.
    pub(super) fn zeros(params: &P) -> AdamState<P> {
        AdamState {
            count: zero_count(),
            mu: zeros_like(params),
            nu: zeros_like(params),
        }
    }
}

/// `1 - decay^count` in `dtype` (optax's bias correction, with its float `decay`).
pub(super) fn bias_correction(decay: f64, count: &Tensor, dtype: DType) -> Tensor {
    let power = Tensor::full(dtype, Vec::<usize>::new(), decay).pow(count.astype(dtype));
    -power + 1.0
}

impl<P: Tree> GradientTransformation<P> for ScaleByAdam {
    type State = AdamState<P>;

    fn init(&self, params: &P) -> AdamState<P> {
        AdamState::zeros(params)
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
            let (mu, nu) = (
                first_moments(&g, &mu, self.b1),
                second_moments(&g, &nu, self.b2),
            );
            let count = increment(&state.count);
            let wide = correction_type(&g);
            let m_hat = corrected_first(&g, &mu, self.b1, &count, self.nesterov);
            let c2 = bias_correction(self.b2, &count, wide);
            let out = adaptive_updates(&m_hat, &nu, &c2, self.eps_root, self.eps);
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

/// `mu = b1 mu + (1 - b1) g` per leaf (optax's `update_moment`, order 1).
/// Adam's step from the corrected first moments and the second moments with their bias
/// correction `c2`: `m_hat / (sqrt(nu / c2 + eps_root) + eps)`.
pub(super) fn adaptive_updates(
    m_hat: &[Tensor],
    nu: &[Tensor],
    c2: &Tensor,
    eps_root: f64,
    eps: f64,
) -> Vec<Tensor> {
    m_hat
        .iter()
        .zip(nu)
        .map(|(m, v)| {
            let v_hat = v / c2.astype(v.dtype());
            m / ((v_hat + eps_root).sqrt() + eps)
        })
        .collect()
}

pub(super) fn first_moments(g: &[Tensor], mu: &[Tensor], b1: f64) -> Vec<Tensor> {
    g.iter()
        .zip(mu)
        .map(|(g, m)| g * (1.0 - b1) + m * b1)
        .collect()
}

/// `nu = b2 nu + (1 - b2) g²` per leaf (`update_moment_per_elem_norm`, order 2).
pub(super) fn second_moments(g: &[Tensor], nu: &[Tensor], b2: f64) -> Vec<Tensor> {
    g.iter()
        .zip(nu)
        .map(|(g, v)| (g * g) * (1.0 - b2) + v * b2)
        .collect()
}

/// The type optax computes bias corrections in, its default float type: f64 only with f64
/// leaves.
pub(super) fn correction_type(g: &[Tensor]) -> DType {
    match g.iter().any(|g| g.dtype() == DType::F64) {
        true => DType::F64,
        false => DType::F32,
    }
}

/// The bias-corrected first moments at the new `count`: `mu / (1 - b1^count)`, or with
/// `nesterov` Nadam's look-ahead `b1 mu / (1 - b1^(count+1)) + (1 - b1) g / (1 - b1^count)`.
pub(super) fn corrected_first(
    g: &[Tensor],
    mu: &[Tensor],
    b1: f64,
    count: &Tensor,
    nesterov: bool,
) -> Vec<Tensor> {
    let wide = correction_type(g);
    let c1 = bias_correction(b1, count, wide);
    match nesterov {
        false => mu.iter().map(|m| m / c1.astype(m.dtype())).collect(),
        true => {
            let ahead = bias_correction(b1, &increment(count), wide);
            mu.iter()
                .zip(g)
                .map(|(m, g)| {
                    (m / ahead.astype(m.dtype())) * b1 + (g / c1.astype(g.dtype())) * (1.0 - b1)
                })
                .collect()
        }
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
    pub(super) fn flags(&self, leaves: &[Tensor]) -> Result<Vec<bool>> {
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

/// Nadam (`optax.nadam(lr, b1, b2, eps)`): Adam with Nesterov momentum.
pub fn nadam(learning_rate: impl Into<LearningRate>, b1: f64, b2: f64, eps: f64) -> Adam {
    Chain((
        ScaleByAdam::new(b1, b2, eps, true),
        scale_by_learning_rate(learning_rate),
    ))
}

/// Adam: [`ScaleByAdam`] then the learning rate.
pub type Adam = Chain<(ScaleByAdam, ScaleByLearningRate)>;

/// AdamW: [`ScaleByAdam`], [`AddDecayedWeights`], then the learning rate.
pub type AdamW = Chain<(ScaleByAdam, AddDecayedWeights, ScaleByLearningRate)>;

/// Adam (`optax.adam(lr, b1, b2, eps)`; the usual values are 0.9, 0.999, 1e-8).
pub fn adam(learning_rate: impl Into<LearningRate>, b1: f64, b2: f64, eps: f64) -> Adam {
    Chain((
        ScaleByAdam::new(b1, b2, eps, false),
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
        ScaleByAdam::new(b1, b2, eps, false),
        AddDecayedWeights { weight_decay, mask },
        scale_by_learning_rate(learning_rate),
    ))
}

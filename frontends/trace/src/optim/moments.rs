//! The optimizers that keep one moment per parameter: RMSProp (optax's `scale_by_rms`, a
//! decaying mean of squared gradients, bias-corrected for schedule-free AdamW), Adagrad (`scale_by_rss`, their running sum) and Lion
//! (`scale_by_lion`, the sign of an interpolated momentum), each chained with the learning
//! rate as optax's aliases are (Lion with decoupled weight decay, as `optax.lion`).

use super::adam::{bias_correction, correction_type, second_moments};
use super::{
    increment, leaves_of, or_failed, scale_by_learning_rate, zero_count, AddDecayedWeights, Chain,
    Mask,
};
use super::{GradientTransformation, LearningRate, ScaleByLearningRate};
use crate::tree::child_key_paths;
use crate::tree_util::{tree_map, tree_unflatten, zeros_like};
use crate::{Result, Tensor, Tree, TreeDef};

/// One accumulator of the parameters' structure: RMSProp's `nu`, Adagrad's sum of squares,
/// Lion's `mu`.
#[derive(Clone, Debug)]
pub struct MomentState<P> {
    pub moment: P,
}

impl<P: Tree> Tree for MomentState<P> {
    fn flatten(&self, leaves: &mut Vec<Tensor>) -> TreeDef {
        TreeDef::Node(vec![self.moment.flatten(leaves)])
    }

    fn unflatten(def: &TreeDef, leaves: &mut dyn Iterator<Item = Tensor>) -> Result<Self> {
        let c = def.children(1)?;
        Ok(MomentState {
            moment: P::unflatten(&c[0], leaves)?,
        })
    }

    fn key_paths(&self, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
        child_key_paths("moment", &self.moment, prefix, out);
    }
}

/// `f(gradient, moment)` per leaf giving the update and the new moment.
fn per_leaf<P: Tree>(
    updates: &P,
    state: &MomentState<P>,
    f: impl Fn(&Tensor, &Tensor) -> (Tensor, Tensor),
) -> (P, MomentState<P>) {
    let result = leaves_of(updates, [(&state.moment, "the moment")]).and_then(|(def, g, [m])| {
        let (out, moment): (Vec<Tensor>, Vec<Tensor>) =
            g.iter().zip(&m).map(|(g, m)| f(g, m)).unzip();
        Ok((
            tree_unflatten(&def, out)?,
            MomentState {
                moment: tree_unflatten(&def, moment)?,
            },
        ))
    });
    or_failed(result, updates, state)
}

/// RMSProp's scaling (`optax.scale_by_rms`, `eps` inside the square root):
/// `nu = decay·nu + (1 − decay)·g²`, the update `g / sqrt(nu + eps)`.
#[derive(Clone, Debug)]
pub struct ScaleByRms {
    pub decay: f64,
    pub eps: f64,
    /// `nu`'s initial value.
    pub initial_scale: f64,
}

impl<P: Tree> GradientTransformation<P> for ScaleByRms {
    type State = MomentState<P>;

    fn init(&self, params: &P) -> MomentState<P> {
        let scale = self.initial_scale;
        MomentState {
            moment: tree_map(params, |p| {
                Tensor::full(p.dtype(), p.shape().to_vec(), scale)
            }),
        }
    }

    fn update(&self, updates: &P, state: &MomentState<P>, _: &P) -> (P, MomentState<P>) {
        per_leaf(updates, state, |g, nu| {
            let nu = (g * g) * (1.0 - self.decay) + nu * self.decay;
            ((&nu + self.eps).rsqrt() * g, nu)
        })
    }
}

/// RMSProp's scaling with bias correction and `eps` outside the square root
/// (`optax.scale_by_rms(decay, eps, eps_in_sqrt=False, bias_correction=True)`; Adam's second
/// moment alone): `nu = decay·nu + (1 − decay)·g²`, the update `g / (sqrt(nu / (1 −
/// decay^t)) + eps)` at step `t`.
#[derive(Clone, Debug)]
pub struct ScaleByRmsCorrected {
    pub decay: f64,
    pub eps: f64,
}

/// [`ScaleByRmsCorrected`]'s state: an `i32` step count and the second moment.
#[derive(Clone, Debug, ferrax_derive::Tree)]
#[tree(crate = "crate")]
pub struct RmsCountState<P> {
    pub count: Tensor,
    pub nu: P,
}

impl<P: Tree> GradientTransformation<P> for ScaleByRmsCorrected {
    type State = RmsCountState<P>;

    fn init(&self, params: &P) -> RmsCountState<P> {
        RmsCountState {
            count: zero_count(),
            nu: zeros_like(params),
        }
    }

    fn update(&self, updates: &P, state: &RmsCountState<P>, _: &P) -> (P, RmsCountState<P>) {
        let result =
            leaves_of(updates, [(&state.nu, "the second moment")]).and_then(|(def, g, [nu])| {
                let nu = second_moments(&g, &nu, self.decay);
                let count = increment(&state.count);
                let correction = bias_correction(self.decay, &count, correction_type(&g));
                let out = g
                    .iter()
                    .zip(&nu)
                    .map(|(g, nu)| {
                        let nu_hat = nu / correction.astype(nu.dtype());
                        (1.0 / (nu_hat.sqrt() + self.eps)) * g
                    })
                    .collect();
                Ok((
                    tree_unflatten(&def, out)?,
                    RmsCountState {
                        count,
                        nu: tree_unflatten(&def, nu)?,
                    },
                ))
            });
        or_failed(result, updates, state)
    }
}

/// Adagrad's scaling (`optax.scale_by_rss`): the sum of squared gradients `s += g²`, the
/// update `g / sqrt(s + eps)` where `s > 0`, else 0.
#[derive(Clone, Debug)]
pub struct ScaleByRss {
    pub initial_accumulator_value: f64,
    pub eps: f64,
}

impl<P: Tree> GradientTransformation<P> for ScaleByRss {
    type State = MomentState<P>;

    fn init(&self, params: &P) -> MomentState<P> {
        let value = self.initial_accumulator_value;
        MomentState {
            moment: tree_map(params, |p| {
                Tensor::full(p.dtype(), p.shape().to_vec(), value)
            }),
        }
    }

    fn update(&self, updates: &P, state: &MomentState<P>, _: &P) -> (P, MomentState<P>) {
        per_leaf(updates, state, |g, sum| {
            let sum = g * g + sum;
            let scale = sum.greater(0.0).select((&sum + self.eps).rsqrt(), 0.0);
            (scale * g, sum)
        })
    }
}

/// Lion's scaling (`optax.scale_by_lion`): the update `sign((1 − b1)·g + b1·mu)`, then
/// `mu = b2·mu + (1 − b2)·g`.
#[derive(Clone, Debug)]
pub struct ScaleByLion {
    pub b1: f64,
    pub b2: f64,
}

impl<P: Tree> GradientTransformation<P> for ScaleByLion {
    type State = MomentState<P>;

    fn init(&self, params: &P) -> MomentState<P> {
        MomentState {
            moment: zeros_like(params),
        }
    }

    fn update(&self, updates: &P, state: &MomentState<P>, _: &P) -> (P, MomentState<P>) {
        per_leaf(updates, state, |g, mu| {
            let update = (g * (1.0 - self.b1) + mu * self.b1).sign();
            (update, g * (1.0 - self.b2) + mu * self.b2)
        })
    }
}

/// RMSProp: [`ScaleByRms`] then the learning rate.
pub type RmsProp = Chain<(ScaleByRms, ScaleByLearningRate)>;

/// Adagrad: [`ScaleByRss`] then the learning rate.
pub type Adagrad = Chain<(ScaleByRss, ScaleByLearningRate)>;

/// Lion: [`ScaleByLion`], [`AddDecayedWeights`], then the learning rate.
pub type Lion = Chain<(ScaleByLion, AddDecayedWeights, ScaleByLearningRate)>;

/// RMSProp (`optax.rmsprop(lr, decay, eps)`, no momentum or centring; the usual values are 0.9
/// and 1e-8).
pub fn rmsprop(learning_rate: impl Into<LearningRate>, decay: f64, eps: f64) -> RmsProp {
    Chain((
        ScaleByRms {
            decay,
            eps,
            initial_scale: 0.0,
        },
        scale_by_learning_rate(learning_rate),
    ))
}

/// Adagrad (`optax.adagrad(lr, initial_accumulator_value, eps)`; optax's defaults are 0.1 and
/// 1e-7).
pub fn adagrad(
    learning_rate: impl Into<LearningRate>,
    initial_accumulator_value: f64,
    eps: f64,
) -> Adagrad {
    Chain((
        ScaleByRss {
            initial_accumulator_value,
            eps,
        },
        scale_by_learning_rate(learning_rate),
    ))
}

/// Lion (`optax.lion(lr, b1, b2, weight_decay)`; optax's defaults are 0.9, 0.99 and 1e-3),
/// weight decay on the leaves `mask` picks.
pub fn lion(
    learning_rate: impl Into<LearningRate>,
    b1: f64,
    b2: f64,
    weight_decay: f64,
    mask: Mask,
) -> Lion {
    Chain((
        ScaleByLion { b1, b2 },
        AddDecayedWeights { weight_decay, mask },
        scale_by_learning_rate(learning_rate),
    ))
}

/// Adadelta's accumulators: the decaying means of squared gradients and of squared updates.
#[derive(Clone, Debug)]
pub struct AdadeltaState<P> {
    pub e_g: P,
    pub e_x: P,
}

impl<P: Tree> Tree for AdadeltaState<P> {
    fn flatten(&self, leaves: &mut Vec<Tensor>) -> TreeDef {
        TreeDef::Node(vec![self.e_g.flatten(leaves), self.e_x.flatten(leaves)])
    }

    fn unflatten(def: &TreeDef, leaves: &mut dyn Iterator<Item = Tensor>) -> Result<Self> {
        let c = def.children(2)?;
        Ok(AdadeltaState {
            e_g: P::unflatten(&c[0], leaves)?,
            e_x: P::unflatten(&c[1], leaves)?,
        })
    }

    fn key_paths(&self, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
        child_key_paths("e_g", &self.e_g, prefix, out);
        child_key_paths("e_x", &self.e_x, prefix, out);
    }
}

/// Adadelta's scaling (`optax.scale_by_adadelta`): `e_g = rho·e_g + (1 − rho)·g²`, the update
/// `sqrt(e_x + eps) / sqrt(e_g + eps)·g` (with the previous `e_x`), then `e_x = rho·e_x + (1 −
/// rho)·update²`.
#[derive(Clone, Debug)]
pub struct ScaleByAdadelta {
    pub rho: f64,
    pub eps: f64,
}

impl<P: Tree> GradientTransformation<P> for ScaleByAdadelta {
    type State = AdadeltaState<P>;

    fn init(&self, params: &P) -> AdadeltaState<P> {
        AdadeltaState {
            e_g: zeros_like(params),
            e_x: zeros_like(params),
        }
    }

    fn update(&self, updates: &P, state: &AdadeltaState<P>, _: &P) -> (P, AdadeltaState<P>) {
        let result = leaves_of(updates, [(&state.e_g, "e_g"), (&state.e_x, "e_x")]).and_then(
            |(def, g, [e_g, e_x])| {
                let e_g = second_moments(&g, &e_g, self.rho);
                let out: Vec<Tensor> = g
                    .iter()
                    .zip(e_g.iter().zip(&e_x))
                    .map(|(g, (eg, ex))| (ex + self.eps).sqrt() / (eg + self.eps).sqrt() * g)
                    .collect();
                let e_x = second_moments(&out, &e_x, self.rho);
                Ok((
                    tree_unflatten(&def, out)?,
                    AdadeltaState {
                        e_g: tree_unflatten(&def, e_g)?,
                        e_x: tree_unflatten(&def, e_x)?,
                    },
                ))
            },
        );
        or_failed(result, updates, state)
    }
}

/// Adadelta: weight decay, [`ScaleByAdadelta`], then the learning rate.
pub type Adadelta = Chain<(AddDecayedWeights, ScaleByAdadelta, ScaleByLearningRate)>;

/// Adadelta (`optax.adadelta(lr, rho, eps, weight_decay, weight_decay_mask)`; optax's defaults
/// are 0.9, 1e-6 and no decay).
pub fn adadelta(
    learning_rate: impl Into<LearningRate>,
    rho: f64,
    eps: f64,
    weight_decay: f64,
    mask: Mask,
) -> Adadelta {
    Chain((
        AddDecayedWeights { weight_decay, mask },
        ScaleByAdadelta { rho, eps },
        scale_by_learning_rate(learning_rate),
    ))
}

//! Stochastic gradient descent with optional (Nesterov) momentum: optax's `trace`
//! accumulator followed by the learning rate.

use super::{leaves_of, or_failed, scale_by_learning_rate, Chain, GradientTransformation};
use super::{LearningRate, ScaleByLearningRate};
use crate::tree::child_key_paths;
use crate::tree_util::{tree_unflatten, zeros_like};
use crate::{Result, Tensor, Tree, TreeDef};

/// Momentum (`optax.trace`): `t = g + decay * t`, and the updates are `t`, or with Nesterov
/// momentum `g + decay * t` (the new `t`).
#[derive(Clone, Debug)]
pub struct Trace {
    decay: f64,
    nesterov: bool,
}

/// The momentum accumulator `t` of [`Trace`], of the parameters' structure.
#[derive(Clone, Debug)]
pub struct TraceState<P> {
    pub trace: P,
}

impl<P: Tree> Tree for TraceState<P> {
    fn flatten(&self, leaves: &mut Vec<Tensor>) -> TreeDef {
        TreeDef::Node(vec![self.trace.flatten(leaves)])
    }

    fn unflatten(def: &TreeDef, leaves: &mut dyn Iterator<Item = Tensor>) -> Result<Self> {
        let c = def.children(1)?;
        Ok(TraceState {
            trace: P::unflatten(&c[0], leaves)?,
        })
    }

    fn key_paths(&self, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
        child_key_paths("trace", &self.trace, prefix, out);
    }
}

/// Momentum with `decay`, Nesterov's form if `nesterov` (`optax.trace`).
pub fn trace(decay: f64, nesterov: bool) -> Trace {
    Trace { decay, nesterov }
}

impl<P: Tree> GradientTransformation<P> for Trace {
    type State = TraceState<P>;

    fn init(&self, params: &P) -> TraceState<P> {
        TraceState {
            trace: zeros_like(params),
        }
    }

    fn update(&self, updates: &P, state: &TraceState<P>, _: &P) -> (P, TraceState<P>) {
        let result =
            leaves_of(updates, [(&state.trace, "the momentum")]).and_then(|(def, g, [t])| {
                let f = |g: &Tensor, t: &Tensor| g + t * self.decay;
                let new: Vec<Tensor> = g.iter().zip(&t).map(|(g, t)| f(g, t)).collect();
                let out = if self.nesterov {
                    g.iter().zip(&new).map(|(g, t)| f(g, t)).collect()
                } else {
                    new.clone()
                };
                Ok((
                    tree_unflatten(&def, out)?,
                    TraceState {
                        trace: tree_unflatten(&def, new)?,
                    },
                ))
            });
        or_failed(result, updates, state)
    }
}

/// SGD, optionally with momentum: a [`Trace`] (when there is momentum) then the learning rate.
pub type Sgd = Chain<(Option<Trace>, ScaleByLearningRate)>;

/// Plain SGD: `params -= learning_rate * grads` (`optax.sgd(lr)`).
pub fn sgd(learning_rate: impl Into<LearningRate>) -> Sgd {
    Chain((None, scale_by_learning_rate(learning_rate)))
}

/// SGD with momentum `momentum`, Nesterov's if `nesterov` (`optax.sgd(lr, momentum,
/// nesterov)`): `t = g + momentum * t; params -= learning_rate * t`.
pub fn sgd_momentum(learning_rate: impl Into<LearningRate>, momentum: f64, nesterov: bool) -> Sgd {
    Chain((
        Some(trace(momentum, nesterov)),
        scale_by_learning_rate(learning_rate),
    ))
}

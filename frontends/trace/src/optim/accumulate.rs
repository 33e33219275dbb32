//! Gradient accumulation (`optax.MultiSteps`): the mean of `every_k` steps' gradients goes to
//! the inner optimizer at every `every_k`-th step; the steps between give zero updates and
//! leave the inner state as it was. Inside `jit` both paths are computed and the step's chosen
//! by the mini-step count, as optax's `where`s choose them.

use super::{increment, leaves_of, or_failed, zero_count, GradientTransformation};
use crate::tree::child_key_paths;
use crate::tree_util::{tree_map, tree_map2, tree_unflatten, zeros_like};
use crate::{Result, Tensor, Tree, TreeDef};
use ferrax_ir::DType;

/// [`multi_steps`]'s transformation.
#[derive(Clone, Debug)]
pub struct MultiSteps<O> {
    inner: O,
    every_k: u32,
}

/// Accumulates gradients over `every_k` steps before `inner` sees their mean
/// (`optax.MultiSteps(inner, every_k_schedule=every_k)`, `use_grad_mean=True`).
pub fn multi_steps<O>(inner: O, every_k: u32) -> MultiSteps<O> {
    MultiSteps {
        inner,
        every_k: every_k.max(1),
    }
}

/// [`MultiSteps`]' state: the step within the current accumulation, the inner optimizer's
/// steps, its state and the running mean of the gradients.
#[derive(Clone, Debug)]
pub struct MultiStepsState<P, S> {
    /// `i32`: gradients accumulated so far in this round.
    pub mini_step: Tensor,
    /// `i32`: updates the inner optimizer has made.
    pub gradient_step: Tensor,
    pub inner: S,
    pub acc_grads: P,
}

impl<P: Tree, S: Tree> Tree for MultiStepsState<P, S> {
    fn flatten(&self, leaves: &mut Vec<Tensor>) -> TreeDef {
        TreeDef::Node(vec![
            self.mini_step.flatten(leaves),
            self.gradient_step.flatten(leaves),
            self.inner.flatten(leaves),
            self.acc_grads.flatten(leaves),
        ])
    }

    fn unflatten(def: &TreeDef, leaves: &mut dyn Iterator<Item = Tensor>) -> Result<Self> {
        let c = def.children(4)?;
        Ok(MultiStepsState {
            mini_step: Tensor::unflatten(&c[0], leaves)?,
            gradient_step: Tensor::unflatten(&c[1], leaves)?,
            inner: S::unflatten(&c[2], leaves)?,
            acc_grads: P::unflatten(&c[3], leaves)?,
        })
    }

    fn key_paths(&self, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
        child_key_paths("mini_step", &self.mini_step, prefix, out);
        child_key_paths("gradient_step", &self.gradient_step, prefix, out);
        child_key_paths("inner", &self.inner, prefix, out);
        child_key_paths("acc_grads", &self.acc_grads, prefix, out);
    }
}

impl<P: Tree, O: GradientTransformation<P>> GradientTransformation<P> for MultiSteps<O> {
    type State = MultiStepsState<P, O::State>;

    fn init(&self, params: &P) -> Self::State {
        MultiStepsState {
            mini_step: zero_count(),
            gradient_step: zero_count(),
            inner: self.inner.init(params),
            acc_grads: zeros_like(params),
        }
    }

    fn update(&self, updates: &P, state: &Self::State, params: &P) -> (P, Self::State) {
        let k = f64::from(self.every_k);
        let result = leaves_of(updates, [(&state.acc_grads, "the accumulated gradients")])
            .and_then(|(def, g, [acc])| {
                // The running mean: acc + (g − acc) / (mini_step + 1).
                let mean: Vec<Tensor> = g
                    .iter()
                    .zip(&acc)
                    .map(|(g, a)| a + (g - a) / (&state.mini_step + 1).astype(a.dtype()))
                    .collect();
                let mean_tree: P = tree_unflatten(&def, mean.clone())?;
                let (inner_updates, inner_state) =
                    self.inner.update(&mean_tree, &state.inner, params);
                let emit = state.mini_step.equal(k - 1.0);
                let inner =
                    tree_map2(&state.inner, &inner_state, |old, new| emit.select(new, old))?;
                let as_float = |like: &Tensor| emit.astype(like.dtype());
                let out = tree_map(&inner_updates, |u| as_float(u) * u);
                let acc_grads: Vec<Tensor> =
                    mean.iter().map(|a| (-as_float(a) + 1.0) * a).collect();
                let gradient_step =
                    emit.select(increment(&state.gradient_step), &state.gradient_step);
                let mini_step = (increment(&state.mini_step) % k).astype(DType::I32);
                Ok((
                    out,
                    MultiStepsState {
                        mini_step,
                        gradient_step,
                        inner,
                        acc_grads: tree_unflatten(&def, acc_grads)?,
                    },
                ))
            });
        or_failed(result, updates, state)
    }
}

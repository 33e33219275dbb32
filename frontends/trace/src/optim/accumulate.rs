//! Gradient accumulation (`optax.MultiSteps`): the mean of `every_k` steps' gradients goes to
//! the inner optimizer at every `every_k`-th step; the steps between give zero updates and
//! leave the inner state as it was. Inside `jit` both paths are computed and the step's chosen
//! by the mini-step count, as optax's `where`s choose them. A [`SkipUpdate`] rule leaves out a
//! step's gradients altogether (zero updates, the state as it was but for the rule's own).

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
    skip: Option<SkipUpdate>,
}

/// Accumulates gradients over `every_k` steps before `inner` sees their mean
/// (`optax.MultiSteps(inner, every_k_schedule=every_k)`, `use_grad_mean=True`).
pub fn multi_steps<O>(inner: O, every_k: u32) -> MultiSteps<O> {
    MultiSteps {
        inner,
        every_k: every_k.max(1),
        skip: None,
    }
}

/// [`multi_steps`] that leaves out the gradients of the steps `skip` names (optax's
/// `should_skip_update_fn`).
pub fn multi_steps_skipping<O>(inner: O, every_k: u32, skip: SkipUpdate) -> MultiSteps<O> {
    MultiSteps {
        skip: Some(skip),
        ..multi_steps(inner, every_k)
    }
}

/// Which steps' gradients [`multi_steps_skipping`] leaves out.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SkipUpdate {
    /// Those with a NaN or an infinity (`optax.skip_not_finite`).
    NotFinite,
    /// Those whose squared norm is not below `max_squared_norm`, NaN included
    /// (`optax.skip_large_updates`).
    LargeUpdates { max_squared_norm: f64 },
}

/// What a [`SkipUpdate`] rule found at the last step: whether it skipped it, and its measure
/// (the count of non-finite gradients as `i32`, or their squared norm).
#[derive(Clone, Debug, ferrax_derive::Tree)]
#[tree(crate = "crate")]
pub struct SkipState {
    pub should_skip: Tensor,
    pub measure: Tensor,
}

impl SkipUpdate {
    /// The rule's verdict on gradient leaves `g`, as optax computes it.
    fn judge(self, g: &[Tensor]) -> SkipState {
        let scalar = |dtype: DType| Tensor::zeros(dtype, Vec::<usize>::new());
        match self {
            SkipUpdate::NotFinite => {
                let measure = g
                    .iter()
                    .map(|t| t.is_finite().logical_not().astype(DType::I32).sum(..))
                    .fold(scalar(DType::I32), |a, b| a + b);
                SkipState {
                    should_skip: measure.greater(0.0),
                    measure,
                }
            }
            SkipUpdate::LargeUpdates { max_squared_norm } => {
                let measure = g
                    .iter()
                    .map(|t| (t * t).sum(..).astype(DType::F32))
                    .fold(scalar(DType::F32), |a, b| a + b);
                SkipState {
                    should_skip: measure.less(max_squared_norm).logical_not(),
                    measure,
                }
            }
        }
    }

    /// The state before any step: nothing skipped, a zero measure.
    fn initial(self) -> SkipState {
        let measure = match self {
            SkipUpdate::NotFinite => DType::I32,
            SkipUpdate::LargeUpdates { .. } => DType::F32,
        };
        SkipState {
            should_skip: Tensor::full(DType::Bool, Vec::<usize>::new(), 0.0),
            measure: Tensor::zeros(measure, Vec::<usize>::new()),
        }
    }
}

/// [`MultiSteps`]' state: the step within the current accumulation, the inner optimizer's
/// steps, its state, the running mean of the gradients and, with a [`SkipUpdate`] rule, what
/// the rule found at the last step.
#[derive(Clone, Debug)]
pub struct MultiStepsState<P, S> {
    /// `i32`: gradients accumulated so far in this round.
    pub mini_step: Tensor,
    /// `i32`: updates the inner optimizer has made.
    pub gradient_step: Tensor,
    pub inner: S,
    pub acc_grads: P,
    pub skip_state: Option<SkipState>,
}

impl<P: Tree, S: Tree> Tree for MultiStepsState<P, S> {
    fn flatten(&self, leaves: &mut Vec<Tensor>) -> TreeDef {
        TreeDef::Node(vec![
            self.mini_step.flatten(leaves),
            self.gradient_step.flatten(leaves),
            self.inner.flatten(leaves),
            self.acc_grads.flatten(leaves),
            self.skip_state.flatten(leaves),
        ])
    }

    fn unflatten(def: &TreeDef, leaves: &mut dyn Iterator<Item = Tensor>) -> Result<Self> {
        let c = def.children(5)?;
        Ok(MultiStepsState {
            mini_step: Tensor::unflatten(&c[0], leaves)?,
            gradient_step: Tensor::unflatten(&c[1], leaves)?,
            inner: S::unflatten(&c[2], leaves)?,
            acc_grads: P::unflatten(&c[3], leaves)?,
            skip_state: Option::unflatten(&c[4], leaves)?,
        })
    }

    fn key_paths(&self, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
        child_key_paths("mini_step", &self.mini_step, prefix, out);
        child_key_paths("gradient_step", &self.gradient_step, prefix, out);
        child_key_paths("inner", &self.inner, prefix, out);
        child_key_paths("acc_grads", &self.acc_grads, prefix, out);
        child_key_paths("skip_state", &self.skip_state, prefix, out);
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
            skip_state: self.skip.map(SkipUpdate::initial),
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
                let acc_grads: P = tree_unflatten(&def, acc_grads)?;
                let Some(rule) = self.skip else {
                    let next = MultiStepsState {
                        mini_step,
                        gradient_step,
                        inner,
                        acc_grads,
                        skip_state: None,
                    };
                    return Ok((out, next));
                };
                // A skipped step: zero updates, the state as it was but for the rule's.
                let verdict = rule.judge(&g);
                let skip = verdict.should_skip.clone();
                let kept = |new: &Tensor, old: &Tensor| skip.select(old, new);
                let out = tree_map(&out, |u| skip.select(0.0, u));
                let next = MultiStepsState {
                    mini_step: kept(&mini_step, &state.mini_step),
                    gradient_step: kept(&gradient_step, &state.gradient_step),
                    inner: tree_map2(&inner, &state.inner, kept)?,
                    acc_grads: tree_map2(&acc_grads, &state.acc_grads, kept)?,
                    skip_state: Some(verdict),
                };
                Ok((out, next))
            });
        or_failed(result, updates, state)
    }
}

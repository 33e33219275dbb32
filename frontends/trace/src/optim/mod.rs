//! Optimizers as composable gradient transformations, after optax: a
//! [`GradientTransformation`] turns gradients into updates, keeping its own state (moments, a
//! step count) as a [`Tree`], and [`apply_updates`] adds the updates to the parameters.
//!
//! Everything here is a pure function of tensors and trees, so a whole training step (the
//! gradient, the optimizer update, the new parameters and state) traces into one `jit`
//! program, with the state passed in and out like the parameters. The formulas are optax's,
//! operation by operation (`tests/optim.rs` checks them against its formulas run in JAX). The
//! step count is an `i32` tensor in the state, like optax's `count`, so learning-rate
//! schedules are computed inside the program and a step count change does not recompile.
//!
//! Structure errors (a state that does not match the gradients, say) cannot be `Err`s inside
//! `jit`, so they follow the crate's convention for failed operations: the results are
//! tensors carrying the error, which surfaces from `jit(..).call`, `trace` or `to_array`.
//!
//! ```
//! use ferrax_trace::{optim::{self, GradientTransformation}, Tensor};
//! let params = vec![Tensor::from_vec([2], vec![1.0f32, -1.0])];
//! let opt = optim::chain((optim::clip_by_global_norm(1.0), optim::adam(1e-3, 0.9, 0.999, 1e-8)));
//! let state = opt.init(&params);
//! let grads = vec![Tensor::from_vec([2], vec![0.5f32, 0.5])];
//! let (updates, _state) = opt.update(&grads, &state, &params);
//! let params = optim::apply_updates(&params, &updates);
//! assert!(params[0].to_vec::<f32>().unwrap()[0] < 1.0);
//! ```

mod accumulate;
mod adafactor;
mod adam;
mod adam_variants;
mod clip;
mod guards;
mod moments;
mod schedule;
mod schedule_free;
mod sgd;
mod sm3;

pub use accumulate::{
    multi_steps, multi_steps_skipping, MultiSteps, MultiStepsState, SkipState, SkipUpdate,
};
pub use adafactor::{adafactor, Adafactor, AdafactorState};
pub use adam::{
    adam, adamw, nadam, Adam, AdamState, AdamW, AddDecayedWeights, LeafPredicate, Mask, ScaleByAdam,
};
pub use adam_variants::{
    adabelief, adamax, amsgrad, lamb, radam, yogi, AdaBelief, Adamax, Amsgrad, AmsgradState, Lamb,
    Radam, ScaleByAdamax, ScaleByAmsgrad, ScaleByBelief, ScaleByRadam, ScaleByTrustRatio,
    ScaleByYogi, Yogi,
};
pub use clip::{clip_by_global_norm, ClipByGlobalNorm};
pub use guards::{
    apply_if_finite, clip, zero_nans, ApplyIfFinite, ApplyIfFiniteState, Clip, ZeroNans,
    ZeroNansState,
};
pub use moments::{
    adadelta, adagrad, lion, rmsprop, Adadelta, AdadeltaState, Adagrad, Lion, MomentState,
    RmsCountState, RmsProp, ScaleByAdadelta, ScaleByLion, ScaleByRms, ScaleByRmsCorrected,
    ScaleByRss,
};
pub use schedule::{
    constant_schedule, cosine_decay_schedule, cosine_onecycle_schedule, exponential_decay,
    join_schedules, linear_onecycle_schedule, linear_schedule, piecewise_constant_schedule,
    piecewise_interpolate_schedule, polynomial_schedule, scale_by_learning_rate, sgdr_schedule,
    warmup_cosine_decay_schedule, warmup_exponential_decay_schedule, CountState, Interpolation,
    LearningRate, ScaleByLearningRate, Schedule, WarmupCosine,
};
pub use schedule_free::{
    schedule_free, schedule_free_adamw, schedule_free_eval_params, schedule_free_sgd, ScheduleFree,
    ScheduleFreeAdamW, ScheduleFreeSgd, ScheduleFreeState,
};
pub use sgd::{sgd, sgd_momentum, trace, Sgd, Trace, TraceState};
pub use sm3::{sm3, ScaleBySm3, Sm3, Sm3State};

use crate::tree_util::{failed_like, leaves_matching, tree_flatten, tree_map, tree_map2};
use crate::{Error, Result, Tensor, Tree, TreeDef};
use ferrax_ir::DType;

/// A gradient transformation over parameter trees of type `P` (optax's
/// `GradientTransformation`): `init` makes the state from the parameters, `update` turns
/// gradients (or the previous transformation's updates) into updates and a new state.
pub trait GradientTransformation<P: Tree> {
    /// What the transformation carries from step to step; a tree, so it passes through `jit`.
    type State: Tree;

    /// The initial state for `params`.
    fn init(&self, params: &P) -> Self::State;

    /// The updates for `updates` (of `params`' structure) and the next state. Structure
    /// mismatches give failed tensors (see the module docs).
    fn update(&self, updates: &P, state: &Self::State, params: &P) -> (P, Self::State);
}

/// The transformations of a tuple applied in order, each to the previous one's updates
/// (`optax.chain`); the state is the tuple of their states.
#[derive(Clone, Debug)]
pub struct Chain<T>(pub T);

/// Chains the transformations of a tuple (up to 6): `chain((clip_by_global_norm(1.0),
/// adam(..)))`.
pub fn chain<T>(transformations: T) -> Chain<T> {
    Chain(transformations)
}

/// A chain's `init` and `update` for each tuple length; the first transformation reads the
/// gradients, each later one the previous one's updates.
macro_rules! impl_chains {
    ($(($($t:ident $i:tt),+)),+ $(,)?) => {$(
        impl<P: Tree, $($t: GradientTransformation<P>),+> GradientTransformation<P>
            for Chain<($($t,)+)>
        {
            type State = ($($t::State,)+);

            fn init(&self, params: &P) -> Self::State {
                ($(self.0.$i.init(params),)+)
            }

            fn update(&self, updates: &P, state: &Self::State, params: &P) -> (P, Self::State) {
                let mut current: Option<P> = None;
                let new = ($({
                    let input = current.as_ref().unwrap_or(updates);
                    let (next, s) = self.0.$i.update(input, &state.$i, params);
                    current = Some(next);
                    s
                },)+);
                (current.unwrap_or_else(|| tree_map(updates, Tensor::clone)), new)
            }
        }
    )+};
}

impl_chains!(
    (A 0),
    (A 0, B 1),
    (A 0, B 1, C 2),
    (A 0, B 1, C 2, D 3),
    (A 0, B 1, C 2, D 3, E 4),
    (A 0, B 1, C 2, D 3, E 4, F 5),
);

/// An optional transformation: `None` leaves updates unchanged, with a `None` state.
impl<P: Tree, T: GradientTransformation<P>> GradientTransformation<P> for Option<T> {
    type State = Option<T::State>;

    fn init(&self, params: &P) -> Self::State {
        self.as_ref().map(|t| t.init(params))
    }

    fn update(&self, updates: &P, state: &Self::State, params: &P) -> (P, Self::State) {
        match (self, state) {
            (Some(t), Some(s)) => {
                let (u, s) = t.update(updates, s, params);
                (u, Some(s))
            }
            (None, None) => (tree_map(updates, Tensor::clone), None),
            _ => {
                let (want, got) = match self {
                    Some(_) => ("a state (the transformation is Some)", "None"),
                    None => ("no state (the transformation is None)", "a state"),
                };
                let e = Error::Tree {
                    expected: want.into(),
                    found: got.into(),
                };
                (failed_like(updates, e.clone()), failed_like(state, e))
            }
        }
    }
}

/// `params + updates` leaf by leaf, in each parameter's dtype (`optax.apply_updates`). A
/// structure mismatch gives failed tensors naming both structures.
pub fn apply_updates<P: Tree>(params: &P, updates: &P) -> P {
    tree_map2(params, updates, |p, u| p + u.astype(p.dtype()))
        .unwrap_or_else(|e| failed_like(params, e))
}

/// The leaves of `updates` with its structure, and those of each tree of `others` (named by
/// its label), which must share it.
pub(crate) fn leaves_of<P: Tree, const N: usize>(
    updates: &P,
    others: [(&P, &str); N],
) -> Result<(TreeDef, Vec<Tensor>, [Vec<Tensor>; N])> {
    let (leaves, def) = tree_flatten(updates);
    let mut out: [Vec<Tensor>; N] = std::array::from_fn(|_| Vec::new());
    for (slot, (tree, what)) in out.iter_mut().zip(others) {
        *slot = leaves_matching(&def, tree, what)?;
    }
    Ok((def, leaves, out))
}

/// `result`, or on error the updates and state turned into failed tensors carrying it.
pub(crate) fn or_failed<P: Tree, S: Tree>(
    result: Result<(P, S)>,
    updates: &P,
    state: &S,
) -> (P, S) {
    result.unwrap_or_else(|e| (failed_like(updates, e.clone()), failed_like(state, e)))
}

/// A new step count from `count` (an `i32` scalar): `count + 1`, saturating at `i32::MAX`
/// (optax's `safe_increment`).
pub(crate) fn increment(count: &Tensor) -> Tensor {
    count
        .less(f64::from(i32::MAX))
        .select(count + 1, i32::MAX as f64)
}

/// The initial step count: an `i32` zero.
pub(crate) fn zero_count() -> Tensor {
    Tensor::zeros(DType::I32, Vec::<usize>::new())
}

//! Schedule-free learning (`optax.contrib.schedule_free`, Defazio et al. 2024): the base
//! optimizer's updates move a sequence `z`; the parameters are the interpolation
//! `y = b1·x + (1 − b1)·z` between `z` and the running average `x` of the `z`s, weighted by
//! the largest learning rate so far to the power `weight_lr_power`. Evaluate at `x`
//! ([`schedule_free_eval_params`]).

use super::adam::AddDecayedWeights;
use super::moments::ScaleByRmsCorrected;
use super::schedule::{linear_schedule, scale_by_learning_rate, LearningRate, ScaleByLearningRate};
use super::{increment, leaves_of, or_failed, sgd, Chain, GradientTransformation, Mask, Sgd};
use crate::tree_util::{failed_like, tree_flatten, tree_map, tree_map2, tree_unflatten};
use crate::{Tensor, Tree};
use ferrax_ir::DType;

/// `inner` made schedule-free (`optax.contrib.schedule_free`); `inner` should have no
/// momentum of its own.
#[derive(Clone, Debug)]
pub struct ScheduleFree<T> {
    pub inner: T,
    pub learning_rate: LearningRate,
    /// The interpolation's weight of `x`, in (0, 1].
    pub b1: f64,
    pub weight_lr_power: f64,
}

/// See [`ScheduleFree`].
pub fn schedule_free<T>(
    inner: T,
    learning_rate: impl Into<LearningRate>,
    b1: f64,
    weight_lr_power: f64,
) -> ScheduleFree<T> {
    ScheduleFree {
        inner,
        learning_rate: learning_rate.into(),
        b1,
        weight_lr_power,
    }
}

/// [`ScheduleFree`]'s state: scalars in the parameters' narrowest float type (`b1`, the sum
/// of the averaging weights, the largest learning rate so far), an `i32` step count from 1,
/// the inner optimizer's state and the sequence `z`.
#[derive(Clone, Debug, ferrax_derive::Tree)]
#[tree(crate = "crate")]
pub struct ScheduleFreeState<S, P> {
    pub b1: Tensor,
    pub weight_sum: Tensor,
    pub step_count: Tensor,
    pub max_lr: Tensor,
    pub base_optimizer_state: S,
    pub z: P,
}

/// The narrowest float type among `params`' leaves (optax's `tree.dtype(.., 'lowest')`), f32
/// where there is none.
fn narrowest_float<P: Tree>(params: &P) -> DType {
    let (leaves, _) = tree_flatten(params);
    leaves
        .iter()
        .map(Tensor::dtype)
        .filter(|d| d.is_float())
        .min_by_key(|d| d.size_bytes())
        .unwrap_or(DType::F32)
}

impl<P: Tree, T: GradientTransformation<P>> GradientTransformation<P> for ScheduleFree<T> {
    type State = ScheduleFreeState<T::State, P>;

    fn init(&self, params: &P) -> Self::State {
        let dtype = narrowest_float(params);
        let scalar = |v: f64| Tensor::full(dtype, Vec::<usize>::new(), v);
        ScheduleFreeState {
            b1: scalar(self.b1),
            weight_sum: scalar(0.0),
            step_count: Tensor::full(DType::I32, Vec::<usize>::new(), 1.0),
            max_lr: scalar(0.0),
            base_optimizer_state: self.inner.init(params),
            z: tree_map(params, Tensor::clone),
        }
    }

    fn update(&self, updates: &P, state: &Self::State, params: &P) -> (P, Self::State) {
        let dtype = state.max_lr.dtype();
        let lr = match &self.learning_rate {
            LearningRate::Constant(v) => Tensor::full(dtype, Vec::<usize>::new(), *v),
            LearningRate::Schedule(s) => s.value(&state.step_count).astype(dtype),
        };
        let max_lr = state.max_lr.maximum(&lr);
        let weight = max_lr.pow(self.weight_lr_power);
        let weight_sum = &state.weight_sum + &weight;
        // optax's `nan_to_num(weight / sum, nan=0)`, NaN again where either is NaN.
        let ratio = &weight / &weight_sum;
        let ck = weight
            .is_nan()
            .logical_or(weight_sum.is_nan())
            .select(f64::NAN, ratio.is_nan().select(0.0, &ratio));
        let (base_updates, base_optimizer_state) =
            self.inner
                .update(updates, &state.base_optimizer_state, params);
        let b1 = self.b1;
        let result = leaves_of(
            params,
            [(&state.z, "the z sequence"), (&base_updates, "the updates")],
        )
        .and_then(|(def, y, [z_old, u])| {
            let mut z = Vec::with_capacity(y.len());
            let mut out = Vec::with_capacity(y.len());
            for ((y, z_old), u) in y.iter().zip(&z_old).zip(&u) {
                let z_new = (z_old + u).astype(z_old.dtype());
                let prev_x = (y - (1.0 - b1) * z_old) / b1;
                let x = (1.0 - &ck) * &prev_x + &ck * &z_new;
                let new_y = b1 * &x + (1.0 - b1) * &z_new;
                out.push(new_y - y);
                z.push(z_new);
            }
            let next = ScheduleFreeState {
                b1: state.b1.clone(),
                weight_sum,
                step_count: increment(&state.step_count),
                max_lr,
                base_optimizer_state,
                z: tree_unflatten(&def, z)?,
            };
            Ok((tree_unflatten(&def, out)?, next))
        });
        or_failed(result, updates, state)
    }
}

/// The parameters to evaluate a schedule-free model at, `x = (y − (1 − b1)·z) / b1`
/// (`optax.contrib.schedule_free_eval_params`).
pub fn schedule_free_eval_params<S, P: Tree>(state: &ScheduleFreeState<S, P>, params: &P) -> P {
    let b1 = &state.b1;
    tree_map2(params, &state.z, |y, z| (y - (1.0 - b1) * z) / b1)
        .unwrap_or_else(|e| failed_like(params, e))
}

/// The learning rate, warmed up linearly from 0 over `warmup_steps` where given (optax's
/// `warmup_constant_schedule`).
fn warmed_up(learning_rate: f64, warmup_steps: Option<u32>) -> LearningRate {
    match warmup_steps {
        Some(steps) => linear_schedule(0.0, learning_rate, steps, 0).into(),
        None => learning_rate.into(),
    }
}

/// Schedule-free SGD (`optax.contrib.schedule_free_sgd`), with weight decay (multiplied by
/// the learning rate) where given.
pub type ScheduleFreeSgd = ScheduleFree<Chain<(Option<AddDecayedWeights>, Sgd)>>;

/// See [`ScheduleFreeSgd`].
pub fn schedule_free_sgd(
    learning_rate: f64,
    warmup_steps: Option<u32>,
    b1: f64,
    weight_decay: Option<f64>,
    weight_lr_power: f64,
) -> ScheduleFreeSgd {
    let lr = warmed_up(learning_rate, warmup_steps);
    let decay = weight_decay.map(|weight_decay| AddDecayedWeights {
        weight_decay,
        mask: Mask::All,
    });
    schedule_free(Chain((decay, sgd(lr.clone()))), lr, b1, weight_lr_power)
}

/// Schedule-free AdamW (`optax.contrib.schedule_free_adamw`): Adam's scaling without its
/// momentum (a bias-corrected RMS), decoupled weight decay, the learning rate.
pub type ScheduleFreeAdamW =
    ScheduleFree<Chain<(ScaleByRmsCorrected, AddDecayedWeights, ScaleByLearningRate)>>;

/// See [`ScheduleFreeAdamW`]; `b2` and `eps` are the RMS scaling's.
pub fn schedule_free_adamw(
    learning_rate: f64,
    warmup_steps: Option<u32>,
    (b1, b2, eps): (f64, f64, f64),
    weight_decay: f64,
    weight_lr_power: f64,
) -> ScheduleFreeAdamW {
    let lr = warmed_up(learning_rate, warmup_steps);
    let inner = Chain((
        ScaleByRmsCorrected { decay: b2, eps },
        AddDecayedWeights {
            weight_decay,
            mask: Mask::All,
        },
        scale_by_learning_rate(lr.clone()),
    ));
    schedule_free(inner, lr, b1, weight_lr_power)
}

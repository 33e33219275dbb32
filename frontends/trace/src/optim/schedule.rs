//! Learning rates: a constant or a [`Schedule`] of the step count (optax's schedules, same
//! formulas), and [`ScaleByLearningRate`], the last transformation of most optimizers, which
//! multiplies updates by `-lr`. A schedule is a function of the `i32` count tensor, so inside
//! `jit` its value is computed in the program from the count carried in the state.

use super::{increment, leaves_of, or_failed, zero_count, GradientTransformation};
use crate::tree::child_key_paths;
use crate::tree_util::tree_unflatten;
use crate::{Error, Result, Tensor, Tree, TreeDef};
use ferrax_ir::DType;
use std::f64::consts::PI;
use std::fmt;
use std::sync::Arc;

/// A function of the step count (an `i32` scalar tensor) giving an `f32` scalar: a learning
/// rate that changes over training (optax's `Schedule`).
#[derive(Clone)]
pub struct Schedule(Arc<dyn Fn(&Tensor) -> Tensor + Send + Sync>);

impl fmt::Debug for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Schedule(..)")
    }
}

impl Schedule {
    /// A schedule computed by `f` from the `i32` step count; `f` must return an `f32` scalar.
    pub fn new(f: impl Fn(&Tensor) -> Tensor + Send + Sync + 'static) -> Schedule {
        Schedule(Arc::new(f))
    }

    /// The value at the step count `count` (an `i32` scalar, traced or not).
    #[track_caller]
    pub fn value(&self, count: &Tensor) -> Tensor {
        (self.0)(count)
    }

    /// The value at step `step`, computed now.
    pub fn at(&self, step: i32) -> Result<f32> {
        let v = self.value(&Tensor::scalar(step)).astype(DType::F32);
        Ok(v.to_vec::<f32>()?.first().copied().unwrap_or(f32::NAN))
    }
}

/// The count as `f32` (exact below 2^24 steps): the schedules' arithmetic, as optax's int32
/// count divided by Python numbers is.
fn steps(count: &Tensor) -> Tensor {
    count.astype(DType::F32)
}

/// `value` at every step (`optax.constant_schedule`).
pub fn constant_schedule(value: f64) -> Schedule {
    Schedule::new(move |_| Tensor::full(DType::F32, Vec::<usize>::new(), value))
}

/// From `init_value` to `end_value` linearly over `transition_steps` steps starting at step
/// `transition_begin`, constant before and after (`optax.linear_schedule`); a linear warm-up
/// from 0 is `linear_schedule(0.0, peak, warmup_steps, 0)`. `transition_steps == 0` gives
/// `init_value` throughout.
pub fn linear_schedule(
    init_value: f64,
    end_value: f64,
    transition_steps: u32,
    transition_begin: u32,
) -> Schedule {
    polynomial_schedule(
        init_value,
        end_value,
        1.0,
        transition_steps,
        transition_begin,
    )
}

/// `init_value * ((1 - alpha) * (0.5 * (1 + cos(pi * min(t, decay_steps) / decay_steps)))
/// ^ exponent + alpha)` (`optax.cosine_decay_schedule`): from `init_value` down to
/// `alpha * init_value` at `decay_steps`, then constant. `decay_steps == 0` gives `init_value`.
pub fn cosine_decay_schedule(
    init_value: f64,
    decay_steps: u32,
    alpha: f64,
    exponent: f64,
) -> Schedule {
    if decay_steps == 0 {
        return constant_schedule(init_value);
    }
    let n = f64::from(decay_steps);
    Schedule::new(move |count| {
        let count = steps(count).minimum(n);
        let cosine = ((count * PI / n).cos() + 1.0) * 0.5;
        let decayed = cosine.pow(exponent) * (1.0 - alpha) + alpha;
        decayed * init_value
    })
}

/// `init_value·decay_rate^((count − transition_begin) / transition_steps)` from step
/// `transition_begin` on, `init_value` before it (`optax.exponential_decay`); with `staircase`
/// the exponent is floored, and `end_value` bounds the value (below for a decay rate under 1,
/// above otherwise). `transition_steps == 0` gives `init_value` throughout.
pub fn exponential_decay(
    init_value: f64,
    transition_steps: u32,
    decay_rate: f64,
    transition_begin: u32,
    staircase: bool,
    end_value: Option<f64>,
) -> Schedule {
    Schedule::new(move |count| {
        let init = Tensor::full(DType::F32, Vec::<usize>::new(), init_value);
        if transition_steps == 0 {
            return init;
        }
        let elapsed = steps(count) - f64::from(transition_begin);
        let mut exponent = &elapsed / f64::from(transition_steps);
        if staircase {
            exponent = exponent.floor();
        }
        let rate = Tensor::full(DType::F32, Vec::<usize>::new(), decay_rate);
        let decayed = rate.pow(&exponent) * init_value;
        let mut value = elapsed.less_equal(0.0).select(&init, &decayed);
        if let Some(end) = end_value {
            value = match decay_rate < 1.0 {
                true => value.maximum(end),
                false => value.minimum(end),
            };
        }
        value
    })
}

/// `init_value`, multiplied by each scale once the count reaches its boundary
/// (`optax.piecewise_constant_schedule`; boundaries in increasing order).
pub fn piecewise_constant_schedule(
    init_value: f64,
    boundaries_and_scales: Vec<(u32, f64)>,
) -> Schedule {
    Schedule::new(move |count| {
        let mut sorted = boundaries_and_scales.clone();
        sorted.sort_by_key(|&(boundary, _)| boundary);
        let mut value = Tensor::full(DType::F32, Vec::<usize>::new(), init_value);
        for (boundary, scale) in sorted {
            let reached = count.greater_equal(f64::from(boundary));
            value = reached.select(&value * scale, &value);
        }
        value
    })
}

/// `schedules[0]` until `boundaries[0]`, then `schedules[1]` counted from that boundary, and
/// so on (`optax.join_schedules`); there is one boundary fewer than schedules.
pub fn join_schedules(schedules: Vec<Schedule>, boundaries: Vec<u32>) -> Schedule {
    Schedule::new(move |count| {
        let Some((first, rest)) = schedules.split_first() else {
            return Tensor::zeros(DType::F32, Vec::<usize>::new());
        };
        let mut out = first.value(count);
        for (&b, s) in boundaries.iter().zip(rest) {
            let boundary = f64::from(b);
            let later = s.value(&(count - boundary));
            out = count.less(boundary).select(&out, &later);
        }
        out
    })
}

/// A linear warm-up from `init_value` to `peak_value` over `warmup_steps`, then a cosine
/// decay to `end_value` at step `decay_steps` (counted from 0, warm-up included)
/// (`optax.warmup_cosine_decay_schedule`).
pub fn warmup_cosine_decay_schedule(
    init_value: f64,
    peak_value: f64,
    warmup_steps: u32,
    decay_steps: u32,
    end_value: f64,
    exponent: f64,
) -> Schedule {
    let alpha = if peak_value == 0.0 {
        0.0
    } else {
        end_value / peak_value
    };
    join_schedules(
        vec![
            linear_schedule(init_value, peak_value, warmup_steps, 0),
            cosine_decay_schedule(
                peak_value,
                decay_steps.saturating_sub(warmup_steps),
                alpha,
                exponent,
            ),
        ],
        vec![warmup_steps],
    )
}

/// One cycle of [`sgdr_schedule`]: [`warmup_cosine_decay_schedule`]'s arguments.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WarmupCosine {
    pub init_value: f64,
    pub peak_value: f64,
    pub warmup_steps: u32,
    pub decay_steps: u32,
    pub end_value: f64,
    pub exponent: f64,
}

/// Warm restarts (`optax.sgdr_schedule`): each cycle a warm-up and cosine decay, the next
/// starting where the last one's `decay_steps` end.
pub fn sgdr_schedule(cycles: &[WarmupCosine]) -> Schedule {
    let mut schedules = Vec::with_capacity(cycles.len());
    let mut boundaries = Vec::with_capacity(cycles.len());
    let mut step = 0u32;
    for c in cycles {
        schedules.push(warmup_cosine_decay_schedule(
            c.init_value,
            c.peak_value,
            c.warmup_steps,
            c.decay_steps,
            c.end_value,
            c.exponent,
        ));
        step = step.saturating_add(c.decay_steps);
        boundaries.push(step);
    }
    boundaries.pop();
    join_schedules(schedules, boundaries)
}

/// `(init_value − end_value)·(1 − t/transition_steps)^power + end_value` with `t` the steps
/// since `transition_begin`, clipped to `[0, transition_steps]` (`optax.polynomial_schedule`,
/// of which [`linear_schedule`] is power 1); `transition_steps == 0` gives `init_value`.
pub fn polynomial_schedule(
    init_value: f64,
    end_value: f64,
    power: f64,
    transition_steps: u32,
    transition_begin: u32,
) -> Schedule {
    if transition_steps == 0 {
        return constant_schedule(init_value);
    }
    let (n, begin) = (f64::from(transition_steps), f64::from(transition_begin));
    Schedule::new(move |count| {
        let count = (steps(count) - begin).clip(0.0, n);
        let frac = -(count / n) + 1.0;
        // XLA simplifies a power of 1 away; so does this.
        let scaled = match power == 1.0 {
            true => frac,
            false => frac.pow(power),
        };
        scaled * (init_value - end_value) + end_value
    })
}

/// A linear warm-up from `init_value` to `peak_value` over `warmup_steps`, then
/// [`exponential_decay`] from `peak_value` (`optax.warmup_exponential_decay_schedule`).
#[allow(clippy::too_many_arguments)]
pub fn warmup_exponential_decay_schedule(
    init_value: f64,
    peak_value: f64,
    warmup_steps: u32,
    transition_steps: u32,
    decay_rate: f64,
    transition_begin: u32,
    staircase: bool,
    end_value: Option<f64>,
) -> Schedule {
    join_schedules(
        vec![
            linear_schedule(init_value, peak_value, warmup_steps, 0),
            exponential_decay(
                peak_value,
                transition_steps,
                decay_rate,
                transition_begin,
                staircase,
                end_value,
            ),
        ],
        vec![warmup_steps],
    )
}

/// How [`piecewise_interpolate_schedule`] moves between its values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Interpolation {
    /// `start + (end − start)·pct`.
    Linear,
    /// `end + (start − end)/2·(cos(π·pct) + 1)`.
    Cosine,
}

/// From `init_value`, the value multiplied by each boundary's scale in turn, interpolated
/// between boundaries (`optax.piecewise_interpolate_schedule`): the scales accumulate, and
/// after the last boundary the value stays.
pub fn piecewise_interpolate_schedule(
    interpolation: Interpolation,
    init_value: f64,
    mut boundaries_and_scales: Vec<(u32, f64)>,
) -> Schedule {
    boundaries_and_scales.sort_by_key(|&(b, _)| b);
    let mut bounds = vec![0u32];
    // The accumulated values, in f32 as optax's `cumprod` computes them.
    let mut values = vec![init_value as f32];
    for &(b, scale) in &boundaries_and_scales {
        bounds.push(b);
        let last = values.last().copied().unwrap_or(0.0);
        values.push(last * scale as f32);
    }
    Schedule::new(move |count| {
        let t = steps(count);
        let scalar = |v: f32| Tensor::full(DType::F32, Vec::<usize>::new(), f64::from(v));
        let last = values.last().copied().unwrap_or(0.0);
        let end = bounds.last().copied().unwrap_or(0);
        let mut out = t.greater_equal(f64::from(end)).select(scalar(last), 0.0);
        for (i, pair) in bounds.windows(2).enumerate() {
            let (lo, hi) = (f64::from(pair[0]), f64::from(pair[1]));
            let pct = (&t - lo) / (hi - lo).max(1.0);
            let (start, stop) = (scalar(values[i]), scalar(values[i + 1]));
            let value = match interpolation {
                Interpolation::Linear => (&stop - &start) * pct + start,
                Interpolation::Cosine => (start - &stop) / 2.0 * ((pct * PI).cos() + 1.0) + stop,
            };
            let inside = t.greater_equal(lo).logical_and(t.less(hi));
            out = inside.select(&value, &out);
        }
        out
    })
}

/// The one-cycle policy with linear pieces (`optax.linear_onecycle_schedule`): from
/// `peak_value / div_factor` up to `peak_value` at `pct_start` of the steps, back down by
/// `pct_final`, then to `peak_value / div_factor / final_div_factor` at `transition_steps`.
pub fn linear_onecycle_schedule(
    transition_steps: u32,
    peak_value: f64,
    pct_start: f64,
    pct_final: f64,
    div_factor: f64,
    final_div_factor: f64,
) -> Schedule {
    let n = f64::from(transition_steps);
    piecewise_interpolate_schedule(
        Interpolation::Linear,
        peak_value / div_factor,
        vec![
            ((pct_start * n) as u32, div_factor),
            ((pct_final * n) as u32, 1.0 / div_factor),
            (transition_steps, 1.0 / final_div_factor),
        ],
    )
}

/// The one-cycle policy with cosine pieces (`optax.cosine_onecycle_schedule`): from
/// `peak_value / div_factor` up to `peak_value` at `pct_start` of the steps, then down to
/// `peak_value / div_factor / final_div_factor` at `transition_steps`.
pub fn cosine_onecycle_schedule(
    transition_steps: u32,
    peak_value: f64,
    pct_start: f64,
    div_factor: f64,
    final_div_factor: f64,
) -> Schedule {
    piecewise_interpolate_schedule(
        Interpolation::Cosine,
        peak_value / div_factor,
        vec![
            ((pct_start * f64::from(transition_steps)) as u32, div_factor),
            (transition_steps, 1.0 / (div_factor * final_div_factor)),
        ],
    )
}

/// A learning rate: a number, or a [`Schedule`] of the step count. Optimizers take
/// `impl Into<LearningRate>`, so `adam(1e-3, ..)` and `adam(cosine_decay_schedule(..), ..)`
/// both work.
#[derive(Clone, Debug)]
pub enum LearningRate {
    Constant(f64),
    Schedule(Schedule),
}

impl From<f64> for LearningRate {
    fn from(v: f64) -> LearningRate {
        LearningRate::Constant(v)
    }
}

impl From<Schedule> for LearningRate {
    fn from(s: Schedule) -> LearningRate {
        LearningRate::Schedule(s)
    }
}

/// The state of a transformation that counts steps: how many updates it has made.
#[derive(Clone, Debug)]
pub struct CountState {
    /// An `i32` scalar.
    pub count: Tensor,
}

impl Tree for CountState {
    fn flatten(&self, leaves: &mut Vec<Tensor>) -> TreeDef {
        TreeDef::Node(vec![self.count.flatten(leaves)])
    }

    fn unflatten(def: &TreeDef, leaves: &mut dyn Iterator<Item = Tensor>) -> Result<Self> {
        let c = def.children(1)?;
        Ok(CountState {
            count: Tensor::unflatten(&c[0], leaves)?,
        })
    }

    fn key_paths(&self, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
        child_key_paths("count", &self.count, prefix, out);
    }
}

/// Multiplies updates by `-lr` (`optax.scale_by_learning_rate`): gradients become descent
/// steps. Its state is a step count for a schedule, `None` for a constant rate.
#[derive(Clone, Debug)]
pub struct ScaleByLearningRate {
    lr: LearningRate,
}

/// Updates times `-learning_rate` (a number or a [`Schedule`]).
pub fn scale_by_learning_rate(learning_rate: impl Into<LearningRate>) -> ScaleByLearningRate {
    ScaleByLearningRate {
        lr: learning_rate.into(),
    }
}

/// A step count only for a schedule: a constant rate keeps no state (as in optax).
impl<P: Tree> GradientTransformation<P> for ScaleByLearningRate {
    type State = Option<CountState>;

    fn init(&self, _: &P) -> Option<CountState> {
        match self.lr {
            LearningRate::Constant(_) => None,
            LearningRate::Schedule(_) => Some(CountState {
                count: zero_count(),
            }),
        }
    }

    fn update(&self, updates: &P, state: &Option<CountState>, _: &P) -> (P, Option<CountState>) {
        let result = leaves_of(updates, []).and_then(|(def, g, [])| {
            let (scaled, next) = match (&self.lr, state) {
                (LearningRate::Constant(lr), None) => (g.iter().map(|g| g * -lr).collect(), None),
                (LearningRate::Schedule(s), Some(CountState { count })) => {
                    let step = -s.value(count);
                    let scaled = g.iter().map(|g| g * step.astype(g.dtype())).collect();
                    let count = increment(count);
                    (scaled, Some(CountState { count }))
                }
                (_, state) => {
                    return Err(Error::Tree {
                        expected: match self.lr {
                            LearningRate::Constant(_) => "no state for a constant learning rate",
                            LearningRate::Schedule(_) => "a step count for a schedule",
                        }
                        .into(),
                        found: if state.is_some() {
                            "a step count"
                        } else {
                            "None"
                        }
                        .into(),
                    })
                }
            };
            Ok((tree_unflatten(&def, scaled)?, next))
        });
        or_failed(result, updates, state)
    }
}

//! Guards against bad gradients, after optax: [`clip`] bounds each update elementwise,
//! [`zero_nans`] replaces NaNs by zeros (and records, per leaf, that it met one), and
//! [`apply_if_finite`] skips a step whose gradients are not all finite, leaving the inner
//! optimizer's state as it was, unless more than a given number came in a row.

use super::{increment, zero_count, GradientTransformation};
use crate::tree::child_key_paths;
use crate::tree_util::{tree_flatten, tree_map, tree_unflatten, zeros_like};
use crate::{Result, Tensor, Tree, TreeDef};
use ferrax_ir::DType;

/// Each update clipped to `[−max_delta, max_delta]` (`optax.clip`).
#[derive(Clone, Debug)]
pub struct Clip {
    pub max_delta: f64,
}

/// See [`Clip`].
pub fn clip(max_delta: f64) -> Clip {
    Clip { max_delta }
}

impl<P: Tree> GradientTransformation<P> for Clip {
    type State = ();

    fn init(&self, _: &P) {}

    fn update(&self, updates: &P, state: &(), _: &P) -> (P, ()) {
        let clipped = tree_map(updates, |t| t.clip(-self.max_delta, self.max_delta));
        (clipped, *state)
    }
}

/// NaN updates replaced by zeros (`optax.zero_nans`).
#[derive(Clone, Debug)]
pub struct ZeroNans;

/// See [`ZeroNans`].
pub fn zero_nans() -> ZeroNans {
    ZeroNans
}

/// Per leaf of the parameters, a `bool` scalar: whether the last updates held a NaN.
#[derive(Clone, Debug)]
pub struct ZeroNansState<P> {
    pub found_nan: P,
}

impl<P: Tree> Tree for ZeroNansState<P> {
    fn flatten(&self, leaves: &mut Vec<Tensor>) -> TreeDef {
        TreeDef::Node(vec![self.found_nan.flatten(leaves)])
    }

    fn unflatten(def: &TreeDef, leaves: &mut dyn Iterator<Item = Tensor>) -> Result<Self> {
        let c = def.children(1)?;
        Ok(ZeroNansState {
            found_nan: P::unflatten(&c[0], leaves)?,
        })
    }

    fn key_paths(&self, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
        child_key_paths("found_nan", &self.found_nan, prefix, out);
    }
}

impl<P: Tree> GradientTransformation<P> for ZeroNans {
    type State = ZeroNansState<P>;

    fn init(&self, params: &P) -> ZeroNansState<P> {
        ZeroNansState {
            found_nan: tree_map(params, |_| {
                Tensor::full(DType::Bool, Vec::<usize>::new(), 0.0)
            }),
        }
    }

    fn update(&self, updates: &P, _: &ZeroNansState<P>, _: &P) -> (P, ZeroNansState<P>) {
        let found_nan = tree_map(updates, |t| t.is_nan().any(..));
        let zeroed = tree_map(updates, |t| t.is_nan().select(0.0, t));
        (zeroed, ZeroNansState { found_nan })
    }
}

/// `inner` applied only where every gradient is finite (`optax.apply_if_finite`): a step with
/// a NaN or infinity gives zero updates and keeps the inner state, unless it is more than
/// `max_consecutive_errors` such steps in a row, which are applied.
#[derive(Clone, Debug)]
pub struct ApplyIfFinite<T> {
    pub inner: T,
    pub max_consecutive_errors: i32,
}

/// See [`ApplyIfFinite`].
pub fn apply_if_finite<T>(inner: T, max_consecutive_errors: i32) -> ApplyIfFinite<T> {
    ApplyIfFinite {
        inner,
        max_consecutive_errors,
    }
}

/// [`ApplyIfFinite`]'s state: `i32` and `bool` scalars and the inner optimizer's state.
#[derive(Clone, Debug)]
pub struct ApplyIfFiniteState<S> {
    /// Non-finite steps in a row, up to the last one.
    pub notfinite_count: Tensor,
    /// Whether the last step's gradients were finite.
    pub last_finite: Tensor,
    /// Non-finite steps in all.
    pub total_notfinite: Tensor,
    pub inner_state: S,
}

impl<S: Tree> Tree for ApplyIfFiniteState<S> {
    fn flatten(&self, leaves: &mut Vec<Tensor>) -> TreeDef {
        TreeDef::Node(vec![
            self.notfinite_count.flatten(leaves),
            self.last_finite.flatten(leaves),
            self.total_notfinite.flatten(leaves),
            self.inner_state.flatten(leaves),
        ])
    }

    fn unflatten(def: &TreeDef, leaves: &mut dyn Iterator<Item = Tensor>) -> Result<Self> {
        let c = def.children(4)?;
        Ok(ApplyIfFiniteState {
            notfinite_count: Tensor::unflatten(&c[0], leaves)?,
            last_finite: Tensor::unflatten(&c[1], leaves)?,
            total_notfinite: Tensor::unflatten(&c[2], leaves)?,
            inner_state: S::unflatten(&c[3], leaves)?,
        })
    }

    fn key_paths(&self, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
        child_key_paths("notfinite_count", &self.notfinite_count, prefix, out);
        child_key_paths("last_finite", &self.last_finite, prefix, out);
        child_key_paths("total_notfinite", &self.total_notfinite, prefix, out);
        child_key_paths("inner_state", &self.inner_state, prefix, out);
    }
}

impl<P: Tree, T: GradientTransformation<P>> GradientTransformation<P> for ApplyIfFinite<T> {
    type State = ApplyIfFiniteState<T::State>;

    fn init(&self, params: &P) -> Self::State {
        ApplyIfFiniteState {
            notfinite_count: zero_count(),
            last_finite: Tensor::full(DType::Bool, Vec::<usize>::new(), 1.0),
            total_notfinite: zero_count(),
            inner_state: self.inner.init(params),
        }
    }

    fn update(&self, updates: &P, state: &Self::State, params: &P) -> (P, Self::State) {
        let (leaves, _) = tree_flatten(updates);
        let finite = leaves
            .iter()
            .map(|t| t.is_finite().all(..))
            .reduce(|a, b| a.logical_and(&b))
            .unwrap_or_else(|| Tensor::full(DType::Bool, Vec::<usize>::new(), 1.0));
        let notfinite_count = finite.select(zero_count(), increment(&state.notfinite_count));
        let apply =
            finite.logical_or(notfinite_count.greater(f64::from(self.max_consecutive_errors)));
        // Both outcomes are computed and one is selected, leaf by leaf (optax's `cond`).
        let (applied, inner_next) = self.inner.update(updates, &state.inner_state, params);
        let skipped = zeros_like(updates);
        let out = select_trees(&apply, &applied, &skipped);
        let inner_state = select_trees(&apply, &inner_next, &state.inner_state);
        let total_notfinite =
            finite.select(&state.total_notfinite, increment(&state.total_notfinite));
        (
            out,
            ApplyIfFiniteState {
                notfinite_count,
                last_finite: finite,
                total_notfinite,
                inner_state,
            },
        )
    }
}

/// `on_true` where the `bool` scalar `pred` holds, else `on_false`, leaf by leaf (trees of one
/// structure).
fn select_trees<S: Tree>(pred: &Tensor, on_true: &S, on_false: &S) -> S {
    let (a, def) = tree_flatten(on_true);
    let (b, _) = tree_flatten(on_false);
    let chosen = a.iter().zip(&b).map(|(x, y)| pred.select(x, y)).collect();
    tree_unflatten(&def, chosen).unwrap_or_else(|e| crate::tree_util::failed_like(on_true, e))
}

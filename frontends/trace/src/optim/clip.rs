//! Gradient clipping by the global norm (`optax.clip_by_global_norm`): bounds the size of a
//! step without changing its direction, the usual guard against loss spikes.

use super::GradientTransformation;
use crate::tree_util::{global_norm, tree_map};
use crate::Tree;

/// Scales updates whose global norm exceeds `max_norm` down to that norm.
#[derive(Clone, Debug)]
pub struct ClipByGlobalNorm {
    pub max_norm: f64,
}

/// `g` if `‖g‖ < max_norm`, else `g / ‖g‖ * max_norm`, with `‖g‖` the norm of all leaves
/// together ([`crate::global_norm`]).
pub fn clip_by_global_norm(max_norm: f64) -> ClipByGlobalNorm {
    ClipByGlobalNorm { max_norm }
}

impl<P: Tree> GradientTransformation<P> for ClipByGlobalNorm {
    type State = ();

    fn init(&self, _: &P) {}

    fn update(&self, updates: &P, state: &(), _: &P) -> (P, ()) {
        let norm = global_norm(updates);
        let keep = norm.less(self.max_norm);
        let clipped = tree_map(updates, |t| {
            keep.select(t, (t / norm.astype(t.dtype())) * self.max_norm)
        });
        (clipped, *state)
    }
}

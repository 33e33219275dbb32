//! The memory plan's vocabulary: what each step reads and defines, and the plan's figures.
//! The compiler derives the plan (`liveness`); a run follows it, letting go of each value after
//! its last use.

use ferrax_ir::ValueId;
use ferrax_runtime::{Array, RuntimeError};
use serde::{Deserialize, Serialize};

/// The memory plan's figures, in bytes: every value is released after its last use, so the
/// peak is the largest set of values alive at once (inputs included while still needed).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryReport {
    pub inputs: usize,
    pub outputs: usize,
    /// Peak of live values over the run, inputs included and let go of after their last use
    /// (where given by value, so donated).
    pub peak: usize,
    /// What keeping every value to the end (no plan) would take.
    pub unplanned: usize,
    /// The first step at which the peak is reached.
    pub peak_step: usize,
}

/// What one step of a plan reads and what it defines.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StepValues {
    pub reads: Vec<ValueId>,
    pub writes: Vec<ValueId>,
}

/// The live value `v` of a run, an error where the plan let go of it already.
pub(crate) fn live(values: &[Option<Array>], v: ValueId) -> Result<Array, RuntimeError> {
    values[v.index()]
        .clone()
        .ok_or(RuntimeError::Freed { value: v.0 })
}

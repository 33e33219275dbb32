//! The memory plan both executors follow: a value is let go of after the last step that reads
//! or writes it (program results excepted), so a run's peak memory is what is live at once,
//! not everything it computes. The CPU executor returns such buffers to its pool; the GPU
//! executor to the allocator's cache, which the stream orders after every use.

use ferrax_ir::{Func, ValueId};

/// The memory plan's figures, in bytes: every value is released after its last use, so the
/// peak is the largest set of values alive at once (inputs included while still needed).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct MemoryReport {
    pub inputs: usize,
    pub outputs: usize,
    /// Peak of live values over the run, with nothing freed early by donation.
    pub peak: usize,
    /// What keeping every value to the end (no plan) would take.
    pub unplanned: usize,
}

/// What one step of a plan reads and what it defines.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StepValues {
    pub reads: Vec<ValueId>,
    pub writes: Vec<ValueId>,
}

/// A plan's releases and its memory figures.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Liveness {
    /// Per step, the values whose last use it is, in value order.
    pub frees: Vec<Vec<ValueId>>,
    pub memory: MemoryReport,
}

/// The liveness of `func` run as `steps` (what each step reads and defines, in order).
pub fn liveness(func: &Func, steps: &[StepValues]) -> Liveness {
    let bytes = |v: ValueId| {
        func.value_type(v)
            .map_or(0, |t| t.numel().saturating_mul(t.dtype.size_bytes()))
    };
    let mut last = vec![None; func.num_values()];
    for (s, step) in steps.iter().enumerate() {
        for v in step.reads.iter().chain(&step.writes) {
            if let Some(l) = last.get_mut(v.index()) {
                *l = Some(s);
            }
        }
    }
    let mut frees = vec![Vec::new(); steps.len()];
    for (v, l) in last.iter().enumerate() {
        let value = ValueId(v as u32);
        if let Some(s) = l {
            if !func.outputs.contains(&value) {
                frees[*s].push(value);
            }
        }
    }
    let inputs: usize = (0..func.params.len())
        .map(|p| bytes(ValueId(p as u32)))
        .sum();
    let outputs: usize = func.outputs.iter().map(|&o| bytes(o)).sum();
    let (mut live, mut peak, mut unplanned) = (inputs, inputs, inputs);
    for (step, freed) in steps.iter().zip(&frees) {
        let defined: usize = step.writes.iter().map(|&v| bytes(v)).sum();
        live += defined;
        unplanned += defined;
        peak = peak.max(live);
        live = live.saturating_sub(freed.iter().map(|&v| bytes(v)).sum::<usize>());
    }
    Liveness {
        frees,
        memory: MemoryReport {
            inputs,
            outputs,
            peak,
            unplanned,
        },
    }
}

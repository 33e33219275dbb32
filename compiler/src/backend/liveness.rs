//! The memory plan both executors follow: a value is let go of after the last step that reads
//! or writes it (program results excepted), so a run's peak memory is what is live at once,
//! not everything it computes. The CPU executor returns such buffers to its pool; the GPU
//! executor to the allocator's cache, which the stream orders after every use.

pub use ferrax_aot_runtime::{MemoryReport, StepValues};
use ferrax_ir::{Func, ValueId};

/// The bytes of value `v` of `func`.
fn bytes(func: &Func, v: ValueId) -> usize {
    func.value_type(v)
        .map_or(0, |t| t.numel().saturating_mul(t.dtype.size_bytes()))
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
    let memory = memory(func, steps, &frees, &vec![Vec::new(); steps.len()]);
    Liveness { frees, memory }
}

/// The memory figures of a plan that lets go of `frees[s]` after step `s`, where step `s`
/// writes its results over the buffers of `reused[s]` (values it reads for the last time,
/// so the result takes no memory of its own).
pub fn memory(
    func: &Func,
    steps: &[StepValues],
    frees: &[Vec<ValueId>],
    reused: &[Vec<ValueId>],
) -> MemoryReport {
    let bytes = |v: &ValueId| bytes(func, *v);
    let inputs: usize = (0..func.params.len())
        .map(|p| bytes(&ValueId(p as u32)))
        .sum();
    let outputs: usize = func.outputs.iter().map(bytes).sum();
    let (mut live, mut peak, mut unplanned, mut peak_step) = (inputs, inputs, inputs, 0);
    for (s, ((step, freed), over)) in steps.iter().zip(frees).zip(reused).enumerate() {
        let defined: usize = step.writes.iter().map(bytes).sum();
        live = (live + defined).saturating_sub(over.iter().map(bytes).sum::<usize>());
        unplanned += defined;
        if live > peak {
            (peak, peak_step) = (live, s);
        }
        let gone = freed.iter().filter(|v| !over.contains(v));
        live = live.saturating_sub(gone.map(bytes).sum::<usize>());
    }
    MemoryReport {
        inputs,
        outputs,
        peak,
        unplanned,
        peak_step,
    }
}

/// The values live at the plan's peak, largest first, one a line: their bytes, then the
/// instruction that makes each as `func` prints it (an input's type for an input). What to
/// shorten or fuse away to lower the peak.
pub fn peak_listing(
    func: &Func,
    steps: &[StepValues],
    (frees, reused): (&[Vec<ValueId>], &[Vec<ValueId>]),
    memory: &MemoryReport,
) -> String {
    let at = memory.peak_step;
    let mut live = vec![false; func.num_values()];
    live[..func.params.len()].fill(true);
    for (s, step) in steps.iter().enumerate().take(at + 1) {
        for v in &step.writes {
            live[v.index()] = true;
        }
        let gone = frees[s].iter().filter(|v| s < at || reused[s].contains(v));
        for v in gone {
            live[v.index()] = false;
        }
    }
    let mut values: Vec<(usize, ValueId)> = (0..live.len())
        .filter(|&v| live[v])
        .map(|v| (bytes(func, ValueId(v as u32)), ValueId(v as u32)))
        .collect();
    values.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let text = func.to_string();
    let lines: Vec<&str> = text.lines().skip(1).collect();
    let mut out = format!(
        "// peak {} B at step {} of {}\n",
        memory.peak,
        at,
        steps.len()
    );
    for (size, v) in values {
        let made = match v.index().checked_sub(func.params.len()) {
            Some(i) => lines.get(i).map_or("", |l| l.trim()).to_string(),
            None => match func.value_type(v) {
                Some(ty) => format!("%{}: {ty} (input)", v.0),
                None => continue,
            },
        };
        out.push_str(&format!("{size:>10} {made}\n"));
    }
    out
}

//! Horizontal fusion of launches: flat kernels and small reductions wait until a step of
//! another kind reads what they compute, then launch in waves, each wave's kernels as one
//! entry (or several, where a wave has more parameters or code than one should take) and its
//! reductions of each dtype as another.

use crate::backend::ptx::reduce::{ReduceKernel, ReduceLaunch};
use crate::backend::ptx::{symbol, Launch};
use crate::kernel::{Kernel, Role};
use ferrax_ir::{Func, TensorType, ValueId};
use std::collections::HashMap;

use super::plan::step_values;
use super::*;
const MAX_LAUNCH_BUFFERS: usize = 4096 / 8;
/// The most kernel instructions a launch's distinct kernels add up to (repeats of one count
/// once). The driver compiles an entry on one thread, so a wave of more is several entries,
/// which it compiles at once: GPT-2's optimizer wave of 402 made the longest module (0.49 s
/// of `ptxas`; 0.35 s cut at this bound, one launch more), and an MLP step's six updates are 36.
const MAX_LAUNCH_CODE: usize = 256;

/// `steps`, whose launches are one kernel or reduction each (`Launch(k)` runs kernel `k`,
/// `Reduce { launch: r, .. }` reduction `r`), with flat kernels and small reductions deferred
/// until a step of another kind reads what they compute (or the program ends), then launched
/// in waves: those no other waiting work reads go last, those only they read just before, and
/// so on, each wave's kernels as one entry and its reductions of each dtype as another (XLA's
/// horizontal fusion). Small independent kernels, such as an optimizer's update of each
/// parameter, and reductions, such as a backward pass's bias gradients, then cost one launch
/// instead of one each. Values are immutable, so running a kernel later reads the same inputs.
///
/// A column kernel (one with `totals`: per kernel, per partial buffer, the reductions that
/// fold its partials in turn) launches alone, each fold then as a reduction launch alone.
pub(super) fn group_launches(
    func: &Func,
    steps: Vec<GpuStep>,
    (kernels, totals): (&[Kernel], &[Vec<Vec<usize>>]),
    reductions: &[ReduceKernel],
) -> (Vec<GpuStep>, Vec<Launch>, Vec<ReduceLaunch>) {
    let mut grouping = Grouping {
        func,
        kernels,
        reductions,
        grouped: Vec::with_capacity(steps.len()),
        launches: Vec::new(),
        reduce_launches: Vec::new(),
        waiting: Vec::new(),
    };
    for step in steps {
        // Row kernels launch alone (their blocks are rows), as do column kernels (their
        // threads own columns).
        match step {
            GpuStep::Launch(k) if kernels[k].rows.is_none() && totals[k].is_empty() => {
                let kernel = &kernels[k];
                let of = |role: Role| {
                    let buffers = kernel.sig.buffers.iter().filter(move |b| b.role == role);
                    buffers.map(|b| b.value).collect()
                };
                grouping.waiting.push(Waiting {
                    work: Work::Kernel(k),
                    reads: of(Role::Input),
                    outputs: of(Role::Output),
                    buffers: kernel.sig.buffers.len(),
                });
            }
            GpuStep::Reduce { launch: r, instrs } if reductions[r].groups() => {
                for i in instrs {
                    grouping.waiting.push(Waiting {
                        work: Work::Reduction(i, r),
                        reads: func.body[i].args.clone(),
                        outputs: vec![func.instr_value(i)],
                        buffers: 2,
                    });
                }
            }
            step => {
                let reads = step_values(func, &step, &|k| vec![&kernels[k]]).reads;
                grouping.flush(Some(&reads));
                match step {
                    GpuStep::Launch(k) => {
                        let folds = totals[k].iter().map(|chain| {
                            chain.iter().map(|&r| grouping.reduction_alone(r)).collect()
                        });
                        let folds = folds.collect();
                        grouping.launch(vec![k]);
                        if let Some(l) = grouping.launches.last_mut() {
                            l.totals = folds;
                        }
                    }
                    GpuStep::Reduce { launch: r, instrs } => {
                        grouping.launch_reductions(instrs.into_iter().map(|i| (i, r)).collect())
                    }
                    GpuStep::SplitReduce {
                        index,
                        partial,
                        total,
                        partials,
                    } => grouping.launch_split(index, (partial, total), partials),
                    other => grouping.grouped.push(other),
                }
            }
        }
    }
    grouping.flush(None);
    (
        grouping.grouped,
        grouping.launches,
        grouping.reduce_launches,
    )
}

/// Work [`group_launches`] may launch with other work.
#[derive(Clone, Copy)]
enum Work {
    Kernel(usize),
    /// Instruction and reduction kernel.
    Reduction(usize, usize),
}

struct Waiting {
    work: Work,
    reads: Vec<ValueId>,
    outputs: Vec<ValueId>,
    /// Parameters it adds to a launch.
    buffers: usize,
}

/// The state of [`group_launches`]: the steps so far, and the work waiting, in program order.
struct Grouping<'p> {
    func: &'p Func,
    kernels: &'p [Kernel],
    reductions: &'p [ReduceKernel],
    grouped: Vec<GpuStep>,
    launches: Vec<Launch>,
    reduce_launches: Vec<ReduceLaunch>,
    waiting: Vec<Waiting>,
}

impl Grouping<'_> {
    /// Launches `together` (if any) as one step.
    fn launch(&mut self, together: Vec<usize>) {
        let name = match together.as_slice() {
            [] => return,
            [k] => symbol(&self.kernels[*k].name),
            _ => symbol(&format!("{}_l{}", self.func.name, self.launches.len())),
        };
        self.grouped.push(GpuStep::Launch(self.launches.len()));
        self.launches.push(Launch {
            name,
            kernels: together,
            totals: Vec::new(),
        });
    }

    /// A launch of reduction `r` alone, which a step of another kind runs; its index.
    fn reduction_alone(&mut self, r: usize) -> usize {
        self.reduce_launches.push(ReduceLaunch {
            name: self.reductions[r].name.clone(),
            parts: vec![r],
        });
        self.reduce_launches.len() - 1
    }

    /// Launches reductions `parts` (instruction and reduction kernel, of one dtype) as one
    /// step.
    fn launch_reductions(&mut self, parts: Vec<(usize, usize)>) {
        let name = match parts.as_slice() {
            [] => return,
            [(_, r)] => self.reductions[*r].name.clone(),
            _ => symbol(&format!(
                "{}_rl{}",
                self.func.name,
                self.reduce_launches.len()
            )),
        };
        self.grouped.push(GpuStep::Reduce {
            launch: self.reduce_launches.len(),
            instrs: parts.iter().map(|p| p.0).collect(),
        });
        self.reduce_launches.push(ReduceLaunch {
            name,
            parts: parts.iter().map(|p| p.1).collect(),
        });
    }

    /// Launches split reduction `index` (its partial and total reduction kernels) as one
    /// step of two launches.
    fn launch_split(
        &mut self,
        index: usize,
        (partial, total): (usize, usize),
        partials: TensorType,
    ) {
        let partial = self.reduction_alone(partial);
        let total = self.reduction_alone(total);
        self.grouped.push(GpuStep::SplitReduce {
            index,
            partial,
            total,
            partials,
        });
    }

    /// Launches the waiting work that computes `reads` (with what it reads in turn), or all
    /// of it: in waves, each after every wave that computes what it reads, as late as that
    /// allows; the rest waits on.
    fn flush(&mut self, reads: Option<&[ValueId]>) {
        let waiting = std::mem::take(&mut self.waiting);
        let mut producer = HashMap::new();
        for (j, w) in waiting.iter().enumerate() {
            producer.extend(w.outputs.iter().map(|&v| (v, j)));
        }
        let mut needed = vec![reads.is_none(); waiting.len()];
        for v in reads.unwrap_or_default() {
            if let Some(&j) = producer.get(v) {
                needed[j] = true;
            }
        }
        // Producers come first: one backward pass settles what is needed and each one's wave,
        // counted from the last.
        let mut wave = vec![0; waiting.len()];
        for l in (0..waiting.len()).rev() {
            if !needed[l] {
                continue;
            }
            for j in waiting[l].reads.iter().filter_map(|v| producer.get(v)) {
                needed[*j] = true;
                wave[*j] = wave[*j].max(wave[l] + 1);
            }
        }
        let last = (0..waiting.len()).filter(|&j| needed[j]).map(|j| wave[j]);
        for w in (0..=last.max().unwrap_or(0)).rev() {
            let now = |j: &usize| needed[*j] && wave[*j] == w;
            let mut wave_kernels = Vec::new();
            let mut reductions: Vec<(usize, usize)> = Vec::new();
            let mut buffers = (0, 0);
            for j in (0..waiting.len()).filter(now) {
                match waiting[j].work {
                    Work::Kernel(k) => wave_kernels.push((j, k)),
                    Work::Reduction(i, r) => {
                        if buffers.1 + waiting[j].buffers > MAX_LAUNCH_BUFFERS {
                            self.flush_reductions(std::mem::take(&mut reductions));
                            buffers.1 = 0;
                        }
                        buffers.1 += waiting[j].buffers;
                        reductions.push((i, r));
                    }
                }
            }
            let mut kernels: Vec<usize> = Vec::new();
            let mut code = 0;
            for (j, k) in repeats_together(self.kernels, wave_kernels) {
                let kernel = &self.kernels[k];
                let repeat = kernels
                    .last()
                    .is_some_and(|&last| self.kernels[last].same_code(kernel));
                let added = if repeat { 0 } else { kernel.body.len() };
                let full = buffers.0 + waiting[j].buffers > MAX_LAUNCH_BUFFERS
                    || (!kernels.is_empty() && code + added > MAX_LAUNCH_CODE);
                if full {
                    self.launch(std::mem::take(&mut kernels));
                    (buffers.0, code) = (0, 0);
                }
                buffers.0 += waiting[j].buffers;
                code += if full { kernel.body.len() } else { added };
                kernels.push(k);
            }
            self.launch(kernels);
            self.flush_reductions(reductions);
        }
        self.waiting = waiting
            .into_iter()
            .zip(needed)
            .filter_map(|(w, needed)| (!needed).then_some(w))
            .collect();
    }

    /// Launches independent `reductions`, those of each dtype together.
    fn flush_reductions(&mut self, mut reductions: Vec<(usize, usize)>) {
        while let Some(&(_, first)) = reductions.first() {
            let dtype = self.reductions[first].dtype;
            let (same, rest) = reductions
                .into_iter()
                .partition(|&(_, r)| self.reductions[r].dtype == dtype);
            self.launch_reductions(same);
            reductions = rest;
        }
    }
}

/// `wave` (waiting work and its kernel, independent of one another) with the kernels of the
/// same code ([`Kernel::same_code`]) next to one another, in the order of each code's first:
/// a launch renders such a run as one loop over them.
fn repeats_together(kernels: &[Kernel], wave: Vec<(usize, usize)>) -> Vec<(usize, usize)> {
    let mut codes: HashMap<(usize, usize, usize), Vec<(usize, usize)>> = HashMap::new();
    let mut count = 0;
    let mut coded: Vec<(usize, (usize, usize))> = Vec::with_capacity(wave.len());
    for (j, k) in wave {
        let kernel = &kernels[k];
        let key = (kernel.len, kernel.body.len(), kernel.sig.buffers.len());
        let same = codes.entry(key).or_default();
        let code = match same
            .iter()
            .find(|&&(first, _)| kernels[first].same_code(kernel))
        {
            Some(&(_, code)) => code,
            None => {
                same.push((k, count));
                count += 1;
                count - 1
            }
        };
        coded.push((code, (j, k)));
    }
    coded.sort_by_key(|&(code, _)| code);
    coded.into_iter().map(|(_, work)| work).collect()
}

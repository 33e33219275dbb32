//! The GPU executable: the program fused as on the CPU (elementwise kernels, and row kernels
//! that fold softmax- and layernorm-like rows into one launch), its kernels rendered to one PTX
//! module and launched on the device's stream, independent kernels launched together,
//! reductions and strided copies as kernels of their own, `dot_general` run by cuBLAS, reshapes
//! kept as views of the same buffer, integer matrix products by kernels of their own. What has
//! no GPU form (arithmetic on u8 values, which kernels only convert) runs on the host: its
//! operands are copied back, evaluated by the
//! reference interpreter and copied up again. That keeps every program correct while
//! the GPU kernel set grows; [`GpuExecutable::host_steps`] says how much of a program takes
//! that path.

use super::gemm::{plan_gemm, plan_permuted_gemm, Gemm};
use super::ptx::copy::CopyKernel;
use super::ptx::matmul::IntGemmKernel;
use super::ptx::reduce::{ReduceKernel, ReduceLaunch};
use super::ptx::rows::row_layout;
use super::ptx::{
    legal_kernel, render_legal_launches, symbol, Launch, MathMode, PtxError, PtxTarget,
};
use crate::fuse::{partition, schedule, Step};
use crate::kernel::rows::lower_rows;
use crate::kernel::{Kernel, Role};
use ferrax_ir::{verify, DType, DotDims, Func, FuncBuilder, Op, TensorType, ValueId};
use ferrax_runtime::cuda::{CudaDevice, CudaError, MatmulPrecision};
use ferrax_runtime::{check_args, eval_op, Array, RuntimeError};
use std::sync::Arc;

pub use ferrax_runtime::machine::{GemmOperand, GpuMachine, MachineError};

/// Threads per block of elementwise kernels.
const BLOCK: u32 = 256;

#[derive(Debug, thiserror::Error)]
pub enum GpuError {
    #[error(transparent)]
    Cuda(#[from] CudaError),
    #[error(transparent)]
    Machine(#[from] MachineError),
    #[error(transparent)]
    Ptx(#[from] PtxError),
    #[error(transparent)]
    Verify(#[from] ferrax_ir::VerifyError),
    #[error(transparent)]
    Type(#[from] ferrax_ir::TypeError),
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    #[error("could not lower instructions {start}..{end} to a kernel")]
    Lowering { start: usize, end: usize },
    #[error("internal error: value %{0} is not on the device")]
    Missing(u32),
}

enum GpuStep {
    /// Launch `l`: one kernel, or several independent ones in one entry (before
    /// [`group_launches`], kernel `l` alone).
    Launch(usize),
    /// A `dot_general` on cuBLAS, or for integers by kernel `int` of `int_gemms`, its operands
    /// first copied into matrix layout where given.
    Gemm {
        index: usize,
        gemm: Gemm,
        lhs_copy: Option<usize>,
        rhs_copy: Option<usize>,
        int: Option<usize>,
    },
    /// Reduction launch `launch` computing instructions `instrs`, one per part (before
    /// [`group_launches`], reduction kernel `launch` alone).
    Reduce { launch: usize, instrs: Vec<usize> },
    /// Instruction `index`, a reduction split in two launches: `partial` into a buffer of
    /// partial results, then `total` of those (before [`group_launches`], reduction kernels).
    SplitReduce {
        index: usize,
        partial: usize,
        total: usize,
    },
    /// Instruction and the strided copies that write its result, each with the operand it
    /// reads, in order.
    Copies(usize, Vec<(usize, usize)>),
    /// A reshape: the result shares the operand's buffer.
    View(usize),
    /// A constant (or an iota), copied to the device once, when the program is loaded.
    Constant(usize),
    /// Instructions run one by one on the host.
    Host(std::ops::Range<usize>),
}

/// How a program's GPU code computes: transcendentals, square roots and quotients in kernels
/// ([`MathMode`]), and f32 matrix products on cuBLAS ([`MatmulPrecision`]). The default is
/// JAX's on a GPU: accurate kernels, TF32 products.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct GpuOptions {
    pub math: MathMode,
    pub matmul: MatmulPrecision,
}

impl GpuOptions {
    /// Accurate kernels and true f32 products: results within rounding of the CPU's.
    pub const HIGHEST: GpuOptions = GpuOptions {
        math: MathMode::Accurate,
        matmul: MatmulPrecision::Highest,
    };
}

/// A program compiled for one GPU: its plan, and its module and constants loaded there.
pub struct GpuProgram<M: GpuMachine> {
    plan: GpuPlan,
    machine: M,
    constants: std::collections::HashMap<usize, M::Array>,
    /// Per launch, its entry.
    functions: Vec<M::Function>,
    reduce_functions: Vec<M::Function>,
    copy_functions: Vec<M::Function>,
    int_gemm_functions: Vec<M::Function>,
    matmul: MatmulPrecision,
}

/// A program compiled for a CUDA device.
pub type GpuExecutable = GpuProgram<Arc<CudaDevice>>;

/// What a program becomes on the GPU, before any device is involved: its steps, kernels and
/// PTX module.
pub struct GpuPlan {
    /// The program as planned: scheduled for fusion (see [`schedule`]).
    pub func: Func,
    steps: Vec<GpuStep>,
    /// Per step, the values let go of after it ([`releases`]).
    pub releases: Vec<Vec<ValueId>>,
    pub kernels: Vec<Kernel>,
    /// How the kernels are launched (see [`group_launches`]).
    pub launches: Vec<Launch>,
    pub reductions: Vec<ReduceKernel>,
    /// How the reductions are launched (see [`group_launches`]).
    pub reduce_launches: Vec<ReduceLaunch>,
    pub copies: Vec<CopyKernel>,
    pub int_gemms: Vec<IntGemmKernel>,
    pub ptx: String,
}

impl GpuPlan {
    /// The plan of `func` for `target`, its transcendentals computed as `mode` says.
    pub fn new(func: &Func, target: PtxTarget, mode: MathMode) -> Result<GpuPlan, GpuError> {
        verify(func)?;
        let kernels_target = super::ptx::support::target(mode);
        let func = &schedule(&split_reductions(func)?, &kernels_target);
        let mut steps = Vec::new();
        let mut kernels = Vec::new();
        // Each kernel legalized, as the module renders it.
        let mut legal_kernels = Vec::new();
        let mut reductions = Vec::new();
        let mut copies = Vec::new();
        let mut int_gemms = Vec::new();
        // A reduction alone keeps its reduction kernel, which strides its row with any
        // number of threads.
        let lone = |step| match step {
            Step::Rows { start, end, .. } if end == start + 1 => Step::Op { index: start },
            step => step,
        };
        for step in partition(func, &kernels_target).into_iter().map(lone) {
            match step {
                Step::Rows { start, end, .. } | Step::Kernel { start, end } => {
                    let name = format!("{}_k{}", func.name, kernels.len());
                    let kernel = match &step {
                        Step::Rows {
                            rows, cols, roles, ..
                        } => lower_rows(func, (start, end), (*rows, *cols), roles, name),
                        _ => crate::kernel::lower(func, start, end, name),
                    }
                    .ok_or(GpuError::Lowering { start, end })?;
                    match legal_kernel(&kernel, mode) {
                        Some(legal) => {
                            steps.push(GpuStep::Launch(kernels.len()));
                            kernels.push(kernel);
                            legal_kernels.push(legal);
                        }
                        None => steps.push(GpuStep::Host(start..end)),
                    }
                }
                Step::Op { index } => steps.push(match &func.body[index].op {
                    Op::DotGeneral(dims) => {
                        plan_product(func, index, dims, &mut copies, &mut int_gemms)
                    }
                    Op::Reshape { .. } => GpuStep::View(index),
                    // An iota has no operands: a constant like any other.
                    Op::Constant(_) | Op::Iota { .. } => GpuStep::Constant(index),
                    // An empty result of data movement is allocated and left as it is.
                    Op::BroadcastInDim { .. }
                    | Op::Transpose { .. }
                    | Op::Slice { .. }
                    | Op::Concatenate { .. }
                    | Op::Pad { .. }
                        if func.body[index].ty.numel() == 0 =>
                    {
                        GpuStep::Copies(index, Vec::new())
                    }
                    // Data movement the CPU leaves to the interpreter is a strided copy here:
                    // the alternative is a trip through the host.
                    op @ (Op::BroadcastInDim { .. } | Op::Transpose { .. } | Op::Slice { .. }) => {
                        let ins = &func.body[index];
                        let name = format!("{}_c{}", func.name, copies.len());
                        let input = func.value_type(ins.args[0]);
                        match input.and_then(|t| CopyKernel::plan(name, op, t, &ins.ty)) {
                            Some(c) => {
                                copies.push(c);
                                GpuStep::Copies(index, vec![(copies.len() - 1, 0)])
                            }
                            None => GpuStep::Host(index..index + 1),
                        }
                    }
                    op @ (Op::Concatenate { .. } | Op::Pad { .. }) => {
                        let ins = &func.body[index];
                        let name = format!("{}_c{}", func.name, copies.len());
                        let inputs: Option<Vec<_>> =
                            ins.args.iter().map(|&a| func.value_type(a)).collect();
                        match inputs.and_then(|t| CopyKernel::plan_parts(&name, op, &t, &ins.ty)) {
                            Some(parts) => {
                                let mut launches = Vec::with_capacity(parts.len());
                                for (c, operand) in parts {
                                    launches.push((copies.len(), operand));
                                    copies.push(c);
                                }
                                GpuStep::Copies(index, launches)
                            }
                            None => GpuStep::Host(index..index + 1),
                        }
                    }
                    Op::Reduce { op, axes } => {
                        let name = format!("{}_r{}", func.name, reductions.len());
                        let input = func.value_type(func.body[index].args[0]);
                        let planned = input.and_then(|t| ReduceKernel::plan(name, *op, t, axes));
                        let total_name = format!("{}_r{}", func.name, reductions.len() + 1);
                        let split = planned.as_ref().and_then(|r| r.split(total_name));
                        match (planned, split) {
                            (_, Some(split)) => {
                                reductions.extend([split.partial, split.total]);
                                GpuStep::SplitReduce {
                                    index,
                                    partial: reductions.len() - 2,
                                    total: reductions.len() - 1,
                                }
                            }
                            (Some(r), None) => {
                                reductions.push(r);
                                GpuStep::Reduce {
                                    launch: reductions.len() - 1,
                                    instrs: vec![index],
                                }
                            }
                            (None, _) => GpuStep::Host(index..index + 1),
                        }
                    }
                    _ => GpuStep::Host(index..index + 1),
                }),
            }
        }
        let (steps, launches, reduce_launches) = group_launches(func, steps, &kernels, &reductions);
        let ptx = render_legal_launches(
            &legal_kernels,
            &launches,
            (&reductions, &reduce_launches),
            &copies,
            &int_gemms,
            target,
            mode,
        )?;
        Ok(GpuPlan {
            func: func.clone(),
            releases: releases(func, &steps, &kernels, &launches),
            steps,
            kernels,
            launches,
            reductions,
            reduce_launches,
            copies,
            int_gemms,
            ptx,
        })
    }

    /// The instructions computed by strided copies: each with its copies (indices into
    /// `copies`) and the operand each reads, in launch order.
    pub fn copy_steps(&self) -> Vec<(usize, &[(usize, usize)])> {
        self.steps
            .iter()
            .filter_map(|s| match s {
                GpuStep::Copies(i, parts) => Some((*i, parts.as_slice())),
                _ => None,
            })
            .collect()
    }

    /// The reduction launches (indices into `reduce_launches`), each with the instructions it
    /// computes, one per part, in launch order.
    pub fn reduce_steps(&self) -> Vec<(usize, &[usize])> {
        self.steps
            .iter()
            .filter_map(|s| match s {
                GpuStep::Reduce { launch, instrs } => Some((*launch, instrs.as_slice())),
                _ => None,
            })
            .collect()
    }

    /// The split reductions: each instruction with its partial and total launches (indices
    /// into `reduce_launches`).
    pub fn split_reductions(&self) -> Vec<(usize, usize, usize)> {
        self.steps
            .iter()
            .filter_map(|s| match s {
                GpuStep::SplitReduce {
                    index,
                    partial,
                    total,
                } => Some((*index, *partial, *total)),
                _ => None,
            })
            .collect()
    }

    /// The instructions that run on the host path, by op name.
    pub fn host_ops(&self) -> Vec<&str> {
        host_ops(&self.steps, &self.func)
    }

    /// Launch `l`'s threads and its block size: a block per row for a row kernel, elements
    /// for a flat launch, whose grid strides over them.
    pub fn launch_shape(&self, l: usize) -> (usize, u32) {
        let mut len = 0;
        let mut block = BLOCK;
        for kernel in self.launches[l].kernels.iter().map(|&k| &self.kernels[k]) {
            len = len.max(kernel.len);
            if let (Some(r), Some(layout)) = (&kernel.rows, row_layout(kernel)) {
                block = layout.threads;
                len = r.rows * block as usize;
            }
        }
        (len, block)
    }
}

/// The step computing `dot_general` `index` (of any type it takes, the numeric ones): a GEMM on
/// its operands, or on copies of them permuted into batched-matrix layout, on cuBLAS for floats
/// (f16 and bf16 summing in f32) and by an [`IntGemmKernel`] for integers; the host path where
/// neither fits.
fn plan_product(
    func: &Func,
    index: usize,
    dims: &DotDims,
    copies: &mut Vec<CopyKernel>,
    int_gemms: &mut Vec<IntGemmKernel>,
) -> GpuStep {
    let host = GpuStep::Host(index..index + 1);
    let (gemm, perms) = match plan_gemm(func, index, dims, &DType::ALL) {
        Some(gemm) => (gemm, None),
        None => match plan_permuted_gemm(func, index, dims, &DType::ALL) {
            Some((lhs_perm, rhs_perm, gemm)) => (gemm, Some((lhs_perm, rhs_perm))),
            None => return host,
        },
    };
    let dtype = func.body[index].ty.dtype;
    // Planned before anything is kept, so that a product left to the host leaves no entry.
    let int_gemm = match dtype {
        DType::I32 | DType::I64 | DType::U8 => {
            let name = format!("{}_m{}", func.name, int_gemms.len());
            match IntGemmKernel::plan(name, dtype, gemm) {
                Some(k) => Some(k),
                None => return host,
            }
        }
        _ => None,
    };
    let (lhs_copy, rhs_copy) = match perms {
        None => (None, None),
        Some((lhs_perm, rhs_perm)) => {
            let args = &func.body[index].args;
            let copy = |operand: ValueId, perm: Vec<usize>| {
                let ty = func.value_type(operand)?;
                if perm.iter().enumerate().all(|(i, &p)| i == p) {
                    return Some(None);
                }
                let dims: Vec<usize> = perm.iter().map(|&p| ty.dims()[p]).collect();
                let out = ferrax_ir::TensorType::new(ty.dtype, dims);
                CopyKernel::plan(String::new(), &Op::Transpose { perm }, ty, &out).map(Some)
            };
            match (copy(args[0], lhs_perm), copy(args[1], rhs_perm)) {
                (Some(lhs), Some(rhs)) => (lhs, rhs),
                _ => return host,
            }
        }
    };
    let mut keep = |c: Option<CopyKernel>| {
        c.map(|mut c| {
            c.name = format!("{}_c{}", func.name, copies.len());
            copies.push(c);
            copies.len() - 1
        })
    };
    let (lhs_copy, rhs_copy) = (keep(lhs_copy), keep(rhs_copy));
    let int = int_gemm.map(|k| {
        int_gemms.push(k);
        int_gemms.len() - 1
    });
    GpuStep::Gemm {
        index,
        gemm,
        lhs_copy,
        rhs_copy,
        int,
    }
}

/// Parameters one launch may take: CUDA's 4 KiB of kernel parameters, in addresses.
const MAX_LAUNCH_BUFFERS: usize = 4096 / 8;

/// `steps`, whose launches are one kernel or reduction each (`Launch(k)` runs kernel `k`,
/// `Reduce { launch: r, .. }` reduction `r`), with flat kernels and small reductions deferred
/// until a step of another kind reads what they compute (or the program ends), then launched
/// in waves: those no other waiting work reads go last, those only they read just before, and
/// so on, each wave's kernels as one entry and its reductions of each dtype as another (XLA's
/// horizontal fusion). Small independent kernels, such as an optimizer's update of each
/// parameter, and reductions, such as a backward pass's bias gradients, then cost one launch
/// instead of one each. Values are immutable, so running a kernel later reads the same inputs.
fn group_launches(
    func: &Func,
    steps: Vec<GpuStep>,
    kernels: &[Kernel],
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
        // Row kernels launch alone: their blocks are rows.
        match step {
            GpuStep::Launch(k) if kernels[k].rows.is_none() => {
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
                let reads = step_values(func, &step, &|k| vec![&kernels[k]]).0;
                grouping.flush(Some(&reads));
                match step {
                    GpuStep::Launch(k) => grouping.launch(vec![k]),
                    GpuStep::Reduce { launch: r, instrs } => {
                        grouping.launch_reductions(instrs.into_iter().map(|i| (i, r)).collect())
                    }
                    GpuStep::SplitReduce {
                        index,
                        partial,
                        total,
                    } => grouping.launch_split(index, partial, total),
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
        });
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
    fn launch_split(&mut self, index: usize, partial: usize, total: usize) {
        let launches = self.reduce_launches.len();
        self.reduce_launches
            .extend([partial, total].map(|r| ReduceLaunch {
                name: self.reductions[r].name.clone(),
                parts: vec![r],
            }));
        self.grouped.push(GpuStep::SplitReduce {
            index,
            partial: launches,
            total: launches + 1,
        });
    }

    /// Launches the waiting work that computes `reads` (with what it reads in turn), or all
    /// of it: in waves, each after every wave that computes what it reads, as late as that
    /// allows; the rest waits on.
    fn flush(&mut self, reads: Option<&[ValueId]>) {
        let waiting = std::mem::take(&mut self.waiting);
        let mut producer = std::collections::HashMap::new();
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
            let mut kernels = Vec::new();
            let mut reductions: Vec<(usize, usize)> = Vec::new();
            let mut buffers = (0, 0);
            for j in (0..waiting.len()).filter(now) {
                match waiting[j].work {
                    Work::Kernel(k) => {
                        if buffers.0 + waiting[j].buffers > MAX_LAUNCH_BUFFERS {
                            self.launch(std::mem::take(&mut kernels));
                            buffers.0 = 0;
                        }
                        buffers.0 += waiting[j].buffers;
                        kernels.push(k);
                    }
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

/// The values `step` reads and those it writes, `launch` giving the kernels of a launch.
fn step_values<'k>(
    func: &Func,
    step: &GpuStep,
    launch: &dyn Fn(usize) -> Vec<&'k Kernel>,
) -> (Vec<ValueId>, Vec<ValueId>) {
    match step {
        GpuStep::Launch(l) => {
            let kernels = launch(*l);
            let of = |role: Role| {
                kernels
                    .iter()
                    .flat_map(|k| &k.sig.buffers)
                    .filter(|b| b.role == role)
                    .map(|b| b.value)
                    .collect()
            };
            (of(Role::Input), of(Role::Output))
        }
        GpuStep::Reduce { instrs, .. } => (
            instrs
                .iter()
                .flat_map(|&i| func.body[i].args.clone())
                .collect(),
            instrs.iter().map(|&i| func.instr_value(i)).collect(),
        ),
        GpuStep::Gemm { index: i, .. }
        | GpuStep::SplitReduce { index: i, .. }
        | GpuStep::Copies(i, _)
        | GpuStep::View(i) => (func.body[*i].args.clone(), vec![func.instr_value(*i)]),
        GpuStep::Constant(i) => (Vec::new(), vec![func.instr_value(*i)]),
        GpuStep::Host(range) => (
            range
                .clone()
                .flat_map(|i| func.body[i].args.clone())
                .collect(),
            range.clone().map(|i| func.instr_value(i)).collect(),
        ),
    }
}

/// Per step, the values no later step reads (and that are not results): the run lets go of
/// them there, so their buffers go back to the allocator's cache for the steps after, which
/// the stream orders after every use. A program's peak memory is then what is live at once,
/// not all it computes, and a buffer is reused while it is likely still in the L2 cache.
fn releases(
    func: &Func,
    steps: &[GpuStep],
    kernels: &[Kernel],
    launches: &[Launch],
) -> Vec<Vec<ValueId>> {
    let launch = |l: usize| launches[l].kernels.iter().map(|&k| &kernels[k]).collect();
    let mut last = std::collections::HashMap::new();
    for (s, step) in steps.iter().enumerate() {
        let (reads, writes) = step_values(func, step, &launch);
        for v in reads.into_iter().chain(writes) {
            last.insert(v, s);
        }
    }
    let mut out = vec![Vec::new(); steps.len()];
    for (v, s) in last {
        if !func.outputs.contains(&v) {
            out[s].push(v);
        }
    }
    out
}

/// `func` with each reduction over axes that are not consecutive split into reductions over
/// their consecutive runs, the last run first (batch norm's `sum(x, [0, 2, 3])` over NCHW
/// becomes `sum(sum(x, [2, 3]), [0])`): reduction and row kernels take consecutive axes, and
/// the host path is a round trip through host memory. Float sums and products then round in
/// another order, as they do on the GPU anyway; integer ones wrap to the same result.
fn split_reductions(func: &Func) -> Result<Func, GpuError> {
    let separated = |axes: &[usize]| axes.windows(2).any(|w| w[1] != w[0] + 1);
    let split = func
        .body
        .iter()
        .any(|ins| matches!(&ins.op, Op::Reduce { axes, .. } if separated(axes)));
    if !split {
        return Ok(func.clone());
    }
    let mut b = FuncBuilder::new(func.name.clone());
    let mut values: Vec<ValueId> = func.params.iter().map(|t| b.param(t.clone())).collect();
    for ins in &func.body {
        let args: Vec<ValueId> = ins.args.iter().map(|a| values[a.index()]).collect();
        let value = match &ins.op {
            Op::Reduce { op, axes } if separated(axes) => {
                let mut runs: Vec<Vec<usize>> = Vec::new();
                for &a in axes {
                    match runs.last_mut() {
                        Some(run) if run.last().map(|l| l + 1) == Some(a) => run.push(a),
                        _ => runs.push(vec![a]),
                    }
                }
                let mut v = args[0];
                for axes in runs.into_iter().rev() {
                    v = b.push(Op::Reduce { op: *op, axes }, &[v])?;
                }
                v
            }
            op => b.push(op.clone(), &args)?,
        };
        values.push(value);
    }
    Ok(b.finish(func.outputs.iter().map(|o| values[o.index()]).collect()))
}

fn host_ops<'f>(steps: &[GpuStep], func: &'f Func) -> Vec<&'f str> {
    steps
        .iter()
        .flat_map(|s| match s {
            GpuStep::Host(r) => r.clone().map(|i| func.body[i].op.name()).collect(),
            _ => Vec::new(),
        })
        .collect()
}

impl<M: GpuMachine> GpuProgram<M> {
    pub fn compile(func: &Func, machine: &M, options: GpuOptions) -> Result<GpuProgram<M>, GpuError>
    where
        M: Clone,
    {
        let (major, minor) = machine.compute_capability();
        let target = PtxTarget::for_compute_capability(major, minor);
        let plan = GpuPlan::new(func, target, options.math)?;
        let mut names: Vec<&str> = plan.launches.iter().map(|l| l.name.as_str()).collect();
        names.extend(plan.reduce_launches.iter().map(|r| r.name.as_str()));
        names.extend(plan.copies.iter().map(|c| c.name.as_str()));
        names.extend(plan.int_gemms.iter().map(|g| g.name.as_str()));
        let mut functions = if names.is_empty() {
            Vec::new()
        } else {
            machine.load(&plan.ptx, &names)?
        };
        let int_gemm_functions = functions.split_off(functions.len() - plan.int_gemms.len());
        let copy_functions = functions.split_off(functions.len() - plan.copies.len());
        let reduce_functions = functions.split_off(functions.len() - plan.reduce_launches.len());
        let constants = plan
            .steps
            .iter()
            .filter_map(|s| match s {
                GpuStep::Constant(i) => Some(*i),
                _ => None,
            })
            .map(|i| {
                // The interpreter materializes splats to their full shape.
                let host = eval_op(&plan.func.body[i].op, &[])?;
                Ok((i, machine.upload(&host)?))
            })
            .collect::<Result<_, GpuError>>()?;
        Ok(GpuProgram {
            plan,
            machine: machine.clone(),
            constants,
            functions,
            reduce_functions,
            copy_functions,
            int_gemm_functions,
            matmul: options.matmul,
        })
    }

    /// The PTX module of the program's kernels.
    pub fn ptx(&self) -> &str {
        &self.plan.ptx
    }

    pub fn kernels(&self) -> &[Kernel] {
        &self.plan.kernels
    }

    /// How many instructions run on the host path.
    pub fn host_steps(&self) -> usize {
        self.plan.host_ops().len()
    }

    /// Strided copy `c` of `input` into a new array.
    fn copy(&self, c: usize, input: &M::Array) -> Result<M::Array, GpuError> {
        let ty = M::array_type(input);
        let ty = ferrax_ir::TensorType::new(ty.dtype, self.plan.copies[c].dims.clone());
        let out = self.machine.alloc(&ty)?;
        self.copy_into(c, input, &out)?;
        Ok(out)
    }

    /// Strided copy `c` of `input` into `out`, which it writes part or all of.
    fn copy_into(&self, c: usize, input: &M::Array, out: &M::Array) -> Result<(), GpuError> {
        let grid = self.machine.grid_for(self.plan.copies[c].len(), BLOCK);
        // SAFETY: the copy reads within the operand and writes within the result: the plan
        // took its strides and bases from their shapes.
        unsafe {
            self.machine.launch(
                &self.copy_functions[c],
                grid,
                BLOCK,
                &[M::address(input), M::address(out)],
            )?;
        }
        Ok(())
    }

    /// Copies `args` to the device, runs, and copies the results back.
    pub fn run(&self, args: &[Array]) -> Result<Vec<Array>, GpuError> {
        check_args(&self.plan.func, args)?;
        let up = args
            .iter()
            .map(|a| self.machine.upload(a))
            .collect::<Result<Vec<_>, _>>()?;
        let results = self.run_device(&up)?;
        Ok(results
            .iter()
            .map(|a| self.machine.download(a))
            .collect::<Result<_, _>>()?)
    }

    /// Runs on arrays already on the device; the results stay there. Work is queued, not
    /// waited for, unless a host step needs a value.
    pub fn run_device(&self, args: &[M::Array]) -> Result<Vec<M::Array>, GpuError> {
        let func = &self.plan.func;
        if args.len() != func.params.len() {
            return Err(RuntimeError::ArgCount {
                expected: func.params.len(),
                got: args.len(),
            }
            .into());
        }
        for (index, (a, p)) in args.iter().zip(&func.params).enumerate() {
            let got = M::array_type(a);
            if &got != p {
                return Err(RuntimeError::ArgType {
                    index,
                    expected: p.clone(),
                    got,
                }
                .into());
            }
        }
        let mut values: Vec<Option<M::Array>> = args.iter().cloned().map(Some).collect();
        values.resize(func.num_values(), None);
        let get = |values: &[Option<M::Array>], v: ValueId| {
            values[v.index()].clone().ok_or(GpuError::Missing(v.0))
        };
        let machine = &self.machine;
        for (step, released) in self.plan.steps.iter().zip(&self.plan.releases) {
            match step {
                GpuStep::Launch(l) => {
                    let mut addresses = Vec::new();
                    let mut outputs = Vec::new();
                    for &k in &self.plan.launches[*l].kernels {
                        for b in &self.plan.kernels[k].sig.buffers {
                            match b.role {
                                Role::Input => addresses.push(M::address(&get(&values, b.value)?)),
                                Role::Output => {
                                    let ty = func
                                        .value_type(b.value)
                                        .ok_or(GpuError::Missing(b.value.0))?;
                                    let array = machine.alloc(ty)?;
                                    addresses.push(M::address(&array));
                                    outputs.push((b.value, array));
                                }
                                // A row kernel keeps its scratch rows in registers.
                                Role::Scratch => {}
                                Role::Partial(_) => return Err(GpuError::Missing(b.value.0)),
                            }
                        }
                    }
                    let (len, block) = self.plan.launch_shape(*l);
                    let grid = machine.grid_for(len, block);
                    // SAFETY: every address is a live buffer of its kernel's element count
                    // (inputs are kept alive in `values`, outputs in `outputs`).
                    unsafe { machine.launch(&self.functions[*l], grid, block, &addresses)? };
                    for (v, a) in outputs {
                        values[v.index()] = Some(a);
                    }
                }
                GpuStep::Gemm {
                    index,
                    gemm: g,
                    lhs_copy,
                    rhs_copy,
                    int,
                } => {
                    let ins = &func.body[*index];
                    let operand = |k: usize, copy: Option<usize>| {
                        let value = get(&values, ins.args[k])?;
                        match copy {
                            Some(c) => self.copy(c, &value),
                            None => Ok(value),
                        }
                    };
                    let (lhs, rhs) = (operand(0, *lhs_copy)?, operand(1, *rhs_copy)?);
                    let ty = &ins.ty;
                    let out = machine.alloc(ty)?;
                    match int {
                        Some(k) => {
                            let grid = machine.grid_for(self.plan.int_gemms[*k].results(), BLOCK);
                            let addresses = [M::address(&lhs), M::address(&rhs), M::address(&out)];
                            // SAFETY: operands and result hold exactly the kernel's shapes.
                            unsafe {
                                machine.launch(
                                    &self.int_gemm_functions[*k],
                                    grid,
                                    BLOCK,
                                    &addresses,
                                )?
                            };
                        }
                        None => {
                            let lda = if g.lhs_k_first { g.m } else { g.k };
                            let ldb = if g.rhs_k_last { g.k } else { g.n };
                            // Row-major C = A·B is column-major Cᵀ = Bᵀ·Aᵀ.
                            // SAFETY: operand and result buffers hold exactly these shapes.
                            unsafe {
                                machine.gemm(
                                    ty.dtype,
                                    (g.rhs_k_last, g.lhs_k_first),
                                    (g.n, g.m, g.k),
                                    (M::address(&rhs), ldb, g.k * g.n),
                                    (M::address(&lhs), lda, g.m * g.k),
                                    (M::address(&out), g.n, g.m * g.n),
                                    g.batch,
                                    self.matmul,
                                )?
                            }
                        }
                    }
                    values[func.instr_value(*index).index()] = Some(out);
                }
                GpuStep::Reduce { launch, instrs } => {
                    let mut addresses = Vec::with_capacity(2 * instrs.len());
                    let mut outputs = Vec::with_capacity(instrs.len());
                    for &i in instrs {
                        let ins = &func.body[i];
                        let out = machine.alloc(&ins.ty)?;
                        addresses.push(M::address(&get(&values, ins.args[0])?));
                        addresses.push(M::address(&out));
                        outputs.push((func.instr_value(i), out));
                    }
                    let reductions = &self.plan.reductions;
                    let l = &self.plan.reduce_launches[*launch];
                    let grid = l.grid(reductions, machine.multiprocessors());
                    // SAFETY: each input holds `outputs * reduced` elements of its part, each
                    // result `outputs` (inputs are kept alive in `values`, results in `outputs`).
                    unsafe {
                        machine.launch(
                            &self.reduce_functions[*launch],
                            grid,
                            l.block(reductions),
                            &addresses,
                        )?
                    };
                    for (v, out) in outputs {
                        values[v.index()] = Some(out);
                    }
                }
                GpuStep::SplitReduce {
                    index,
                    partial,
                    total,
                } => {
                    let ins = &func.body[*index];
                    let reductions = &self.plan.reductions;
                    let launches = &self.plan.reduce_launches;
                    let first = &reductions[launches[*partial].parts[0]];
                    let partials = machine.alloc(&TensorType::new(
                        first.result,
                        [first.outputs * first.segments],
                    ))?;
                    let out = machine.alloc(&ins.ty)?;
                    let input = get(&values, ins.args[0])?;
                    for (l, from, to) in [(*partial, &input, &partials), (*total, &partials, &out)]
                    {
                        let launch = &launches[l];
                        // SAFETY: the input holds the reduction's elements, the partials
                        // buffer `outputs × segments` partial results, the result `outputs`.
                        unsafe {
                            machine.launch(
                                &self.reduce_functions[l],
                                launch.grid(reductions, machine.multiprocessors()),
                                launch.block(reductions),
                                &[M::address(from), M::address(to)],
                            )?
                        };
                    }
                    values[func.instr_value(*index).index()] = Some(out);
                }
                GpuStep::Copies(i, parts) => {
                    let ins = &func.body[*i];
                    let out = machine.alloc(&ins.ty)?;
                    for &(c, operand) in parts {
                        self.copy_into(c, &get(&values, ins.args[operand])?, &out)?;
                    }
                    values[func.instr_value(*i).index()] = Some(out);
                }
                GpuStep::Constant(i) => {
                    let c = self
                        .constants
                        .get(i)
                        .ok_or(GpuError::Missing(func.instr_value(*i).0))?;
                    values[func.instr_value(*i).index()] = Some(c.clone());
                }
                GpuStep::View(i) => {
                    let ins = &func.body[*i];
                    let operand = get(&values, ins.args[0])?;
                    values[func.instr_value(*i).index()] =
                        Some(M::reshaped(&operand, ins.ty.shape.clone()));
                }
                GpuStep::Host(range) => {
                    let mut local: std::collections::HashMap<ValueId, Array> = Default::default();
                    for i in range.clone() {
                        let ins = &func.body[i];
                        let operands = ins
                            .args
                            .iter()
                            .map(|a| match local.get(a) {
                                Some(x) => Ok(x.clone()),
                                None => Ok(machine.download(&get(&values, *a)?)?),
                            })
                            .collect::<Result<Vec<_>, GpuError>>()?;
                        let refs: Vec<&Array> = operands.iter().collect();
                        local.insert(func.instr_value(i), eval_op(&ins.op, &refs)?);
                    }
                    for (v, a) in local {
                        values[v.index()] = Some(machine.upload(&a)?);
                    }
                }
            }
            for v in released {
                values[v.index()] = None;
            }
        }
        func.outputs.iter().map(|&o| get(&values, o)).collect()
    }
}

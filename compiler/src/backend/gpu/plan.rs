//! Planning a program for the GPU without a device: its steps (kernels, reductions, copies,
//! matrix products, views, constants and host steps), their launches, the PTX module, and
//! when each value is let go of.

use super::windows::move_across_windows;
use crate::backend::gemm::{plan_gemm, plan_permuted_gemm};
use crate::backend::liveness::{liveness, Liveness, StepValues};
use crate::backend::ptx::attention::{render_attention, supports, AttentionKernel};
use crate::backend::ptx::attention_grad::{render_attention_grad, AttentionGradKernel};
use crate::backend::ptx::columns::ColumnSplit;
use crate::backend::ptx::copy::CopyKernel;
use crate::backend::ptx::distinct::distinct_entries;
use crate::backend::ptx::element_scatter::ElementScatter;
use crate::backend::ptx::gather::GatherKernel;
use crate::backend::ptx::matmul::IntGemmKernel;
use crate::backend::ptx::reduce::{ReduceKernel, ReduceLaunch};
use crate::backend::ptx::rows::row_layout;
use crate::backend::ptx::scatter::{RowScatterMode, ScatterKernels, RANK_BLOCK};
use crate::backend::ptx::Scatters;
use crate::backend::ptx::{
    legal_kernel, module_text, render_pieces, split_modules, Launch, MathMode, PtxTarget,
};
use crate::expand_attention::expand_attention_except;
use crate::fuse::{partition, schedule, Step};
use crate::kernel::parts::independent_parts;
use crate::kernel::rows::lower_rows;
use crate::kernel::LastReads;
use crate::kernel::{Access, Kernel, Role};
use ferrax_aot_runtime::gpu::{
    BlocksLaunchSpec, CopySpec, ElementsSpec, GpuCallPlan, GpuRunPlan, KernelLaunchSpec, Param,
    ReduceLaunchSpec, ScatterLaunches, ScatterSpec,
};
use ferrax_aot_runtime::MemoryReport;
use ferrax_ir::{
    verify, AttentionPart, DType, DotDims, Func, FuncBuilder, Op, ReduceOp, TensorType, ValueId,
};
use std::collections::HashMap;

use super::control::CallPlan;
use super::grouping::group_launches;
use super::*;
/// What a program becomes on the GPU, before any device is involved: its steps, kernels and
/// PTX module.
pub struct GpuPlan {
    /// The program as planned: scheduled for fusion (see [`schedule`]).
    pub func: Func,
    pub steps: Vec<GpuStep>,
    /// Per step, the values let go of after it ([`plan_liveness`]).
    pub releases: Vec<Vec<ValueId>>,
    /// The peak of live device memory over a run.
    pub memory: MemoryReport,
    pub kernels: Vec<Kernel>,
    /// How the kernels are launched (see [`group_launches`]).
    pub launches: Vec<Launch>,
    pub reductions: Vec<ReduceKernel>,
    /// How the reductions are launched (see [`group_launches`]).
    pub reduce_launches: Vec<ReduceLaunch>,
    pub copies: Vec<CopyKernel>,
    pub int_gemms: Vec<IntGemmKernel>,
    pub scatters: Vec<Scatters>,
    pub gathers: Vec<GatherKernel>,
    pub attentions: Vec<AttentionLaunch>,
    /// The entries of the launches, each once: a launch whose entry repeats an earlier one's
    /// (but for its name) launches that one instead ([`GpuPlan::entry`]).
    pub ptx: String,
    /// Per launch whose entry repeats an earlier one, the name of that one.
    pub repeated: HashMap<String, String>,
    /// The same entries in modules of about [`crate::backend::ptx::MODULE_BYTES`] each, in order, with how many
    /// entry points each defines: what a device loads.
    pub modules: Vec<(String, usize)>,
    /// Per control-flow call, its regions' plans.
    pub(super) calls: Vec<CallPlan>,
    /// What the executor runs: the launches' entries, parameters and shapes, the modules.
    pub run: GpuRunPlan,
}

impl GpuPlan {
    /// The plan of `func` for `target`, its transcendentals computed as `mode` says, its
    /// scatters deterministic.
    pub fn new(func: &Func, target: PtxTarget, mode: MathMode) -> Result<GpuPlan, GpuError> {
        let options = GpuOptions {
            math: mode,
            ..GpuOptions::HIGHEST
        };
        GpuPlan::with_options(func, target, options)
    }

    /// The plan of `func` for `target`, computing as `options` say (products' precision is the
    /// executor's choice, not the plan's).
    pub fn with_options(
        func: &Func,
        target: PtxTarget,
        options: GpuOptions,
    ) -> Result<GpuPlan, GpuError> {
        let mode = options.math;
        verify(func)?;
        let kernels_target = crate::backend::ptx::support::target(mode);
        let func = &expand_attention_except(func, &supports)?;
        let func = &move_across_windows(func, &kernels_target)?;
        let func = &schedule(&split_reductions(func)?, &kernels_target);
        let func =
            &crate::remat::rematerialize(func, &kernels_target, crate::remat::Remat::ExtendLives);
        let mut steps = Vec::new();
        let mut p = Parts {
            atomic_float_scatter: options.atomic_float_scatter,
            ..Parts::default()
        };
        // A reduction alone keeps its reduction kernel, which strides its row with any
        // number of threads, or folds its columns with no partials buffer; a slice or a
        // concatenation alone is copies, with no window tests. (Not where it reads a splat
        // constant, which its kernel inlines and no step makes.)
        let reads_splat = |i: usize| {
            let args = &func.body[i].args;
            args.iter()
                .any(|&a| crate::kernel::splat_constant(func, a).is_some())
        };
        let lone = |step| match step {
            Step::Rows { start, end, .. } if end == start + 1 && !reads_splat(start) => {
                Step::Op { index: start }
            }
            Step::Kernel { start, end }
                if end == start + 1
                    && matches!(
                        func.body[start].op,
                        Op::Reduce { .. } | Op::Slice { .. } | Op::Concatenate { .. }
                    )
                    && !reads_splat(start) =>
            {
                Step::Op { index: start }
            }
            step => step,
        };
        let reads = LastReads::of(func);
        for step in partition(func, &kernels_target).into_iter().map(lone) {
            match step {
                Step::Rows { start, end, .. } | Step::Kernel { start, end } => {
                    let name = format!("{}_k{}", func.name, p.kernels.len());
                    let kernel = match &step {
                        Step::Rows {
                            rows, cols, roles, ..
                        } => lower_rows(func, &reads, (start, end), (*rows, *cols), roles, name),
                        _ => crate::kernel::lower(func, &reads, (start, end), name),
                    }
                    .ok_or(GpuError::Lowering { start, end })?;
                    for part in independent_parts(kernel) {
                        // Fusion asked the support table: a kernel the renderer refuses is a
                        // bug, not a program for the host.
                        let legal = legal_kernel(&part, mode)?;
                        let totals = p.fold_partials(func, &legal)?;
                        steps.push(GpuStep::Launch(p.kernels.len()));
                        p.kernels.push(part);
                        p.legal_kernels.push(legal);
                        p.totals.push(totals);
                    }
                }
                // The later instructions of a call are the call's step.
                Step::Op { index } if p.called.contains(&index) => {}
                Step::Op { index } => steps.push(p.op_step(func, index)),
            }
        }
        let Parts {
            kernels,
            legal_kernels,
            totals,
            reductions,
            copies,
            int_gemms,
            scatters,
            gathers,
            attentions,
            atomic_float_scatter: _,
            called: _,
            calls,
        } = p;
        let calls = calls
            .iter()
            .map(|&i| CallPlan::new(&func.body[i].op, target, options))
            .collect::<Result<Vec<_>, _>>()?;
        let (steps, launches, reduce_launches) =
            group_launches(func, steps, (&kernels, &totals), &reductions);
        let mut pieces = render_pieces(
            &legal_kernels,
            &launches,
            (&reductions, &reduce_launches),
            (&copies, &int_gemms, &scatters, &gathers),
            mode,
        )?;
        for a in &attentions {
            pieces.push((a.render(mode)?, 1));
        }
        let names = piece_names(
            (&launches, &reduce_launches, &copies, &int_gemms),
            (&scatters, &gathers, &attentions),
        );
        let (pieces, repeated) = distinct_entries(pieces, &names);
        let ptx = module_text(target, &pieces);
        let modules = split_modules(target, &pieces);
        let Liveness { frees, memory } = plan_liveness(func, &steps, &kernels, &launches);
        let mut run = run_plan(
            func,
            (&steps, &frees, memory),
            (&kernels, &launches),
            (&reductions, &reduce_launches),
            (&copies, &int_gemms, &scatters, &gathers),
            (&modules, &calls),
        )?;
        run.attentions = attention_launches(func, &steps, &attentions)?;
        launch_kept_entries(&mut run, &repeated);
        Ok(GpuPlan {
            run,
            func: func.clone(),
            releases: frees,
            memory,
            steps,
            kernels,
            launches,
            reductions,
            reduce_launches,
            copies,
            int_gemms,
            scatters,
            gathers,
            attentions,
            ptx,
            repeated,
            modules,
            calls,
        })
    }

    /// The name of the entry in [`GpuPlan::ptx`] that launch `name` (a kernel launch's, a
    /// reduction's, a copy's, ...) runs: its own, or the earlier one it repeats.
    pub fn entry<'a>(&'a self, name: &'a str) -> &'a str {
        self.repeated.get(name).map_or(name, String::as_str)
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
                    ..
                } => Some((*index, *partial, *total)),
                _ => None,
            })
            .collect()
    }

    /// The instructions that run on the host path, by op name, those of control-flow
    /// regions included.
    pub fn host_ops(&self) -> Vec<&str> {
        let mut ops: Vec<&str> = self
            .steps
            .iter()
            .filter_map(|s| match s {
                GpuStep::Host(i) => Some(self.func.body[*i].op.name()),
                _ => None,
            })
            .collect();
        for call in &self.calls {
            ops.extend(call.regions().iter().flat_map(GpuPlan::host_ops));
        }
        ops
    }

    /// The plans of the program's control-flow regions, those nested in them included
    /// (each after the region it is in).
    pub fn regions(&self) -> Vec<&GpuPlan> {
        let mut plans = Vec::new();
        for region in self.calls.iter().flat_map(CallPlan::regions) {
            plans.push(region);
            plans.extend(region.regions());
        }
        plans
    }

    /// Launch `l`'s threads and its block size: a block per row for a row kernel, elements
    /// for a flat launch, whose grid strides over them.
    pub fn launch_shape(&self, l: usize) -> (usize, u32) {
        launch_shape(&self.kernels, &self.launches[l])
    }
}

/// What the executor needs of a plan: each launch's entry, parameters (with the types they
/// were compiled for) and shape, each reduction's, copy's, product's, scatter's and gather's,
/// the modules and the regions'.
fn run_plan(
    func: &Func,
    (steps, frees, memory): (&[GpuStep], &[Vec<ValueId>], MemoryReport),
    (kernels, launches): (&[Kernel], &[Launch]),
    (reductions, reduce_launches): (&[ReduceKernel], &[ReduceLaunch]),
    (copies, int_gemms, scatters, gathers): (
        &[CopyKernel],
        &[IntGemmKernel],
        &[Scatters],
        &[GatherKernel],
    ),
    (modules, calls): (&[(String, usize)], &[CallPlan]),
) -> Result<GpuRunPlan, GpuError> {
    let typed = |v: ValueId| func.value_type(v).cloned().ok_or(GpuError::Missing(v.0));
    let mut kernel_launches = Vec::with_capacity(launches.len());
    // The types each reduction launch reads and writes, from the steps that make it.
    let mut reduce_parts = vec![Vec::new(); reduce_launches.len()];
    for launch in launches {
        let mut params = Vec::new();
        let mut folds = launch.totals.iter();
        for &k in &launch.kernels {
            let split = ColumnSplit::of(&kernels[k]);
            for b in &kernels[k].sig.buffers {
                match (b.role, b.access, split) {
                    (Role::Input, ..) => params.push(Param::Input(b.value, typed(b.value)?)),
                    (Role::Output, ..) => params.push(Param::Output(b.value, typed(b.value)?)),
                    // A row kernel keeps its scratch rows in registers.
                    (Role::Scratch, ..) => {}
                    (Role::Partial(_), Access::Inner(cols), Some(split)) => {
                        let partials = TensorType::new(b.dtype, split.partials(cols));
                        let chain = folds.next().ok_or(GpuError::Missing(b.value.0))?;
                        let mut read = partials.clone();
                        let mut totals = Vec::with_capacity(chain.len());
                        for (n, &l) in chain.iter().enumerate() {
                            // A split's partial kernel writes its partials, the last fold
                            // the reduction's result.
                            let partial = reduce_launches[l]
                                .parts
                                .first()
                                .filter(|_| n + 1 < chain.len());
                            let written = match partial {
                                Some(&r) => reductions[r].partials_type(),
                                None => typed(b.value)?,
                            };
                            reduce_parts[l] = vec![(read, written.clone())];
                            totals.push((l, written.clone()));
                            read = written;
                        }
                        params.push(Param::Partial {
                            value: b.value,
                            partials,
                            totals,
                        });
                    }
                    (Role::Partial(_), ..) => return Err(GpuError::Missing(b.value.0)),
                }
            }
        }
        let (threads, block) = launch_shape(kernels, launch);
        kernel_launches.push(KernelLaunchSpec {
            name: launch.name.clone(),
            params,
            threads,
            block,
        });
    }
    // The types each launch reads and writes, from the steps that make it.
    let mut copy_types = vec![None; copies.len()];
    let mut int_gemm_types = vec![Vec::new(); int_gemms.len()];
    let mut gather_types = vec![Vec::new(); gathers.len()];
    for step in steps {
        let ins = |i: usize| &func.body[i];
        let arg = |i: usize, k: usize| typed(ins(i).args[k]);
        match step {
            GpuStep::Copies(i, parts) => {
                for &(c, k) in parts {
                    copy_types[c] = Some((arg(*i, k)?, ins(*i).ty.clone()));
                }
            }
            GpuStep::Gemm {
                index,
                lhs_copy,
                rhs_copy,
                int,
                ..
            } => {
                let mut read = Vec::with_capacity(3);
                for (k, copy) in [(0, lhs_copy), (1, rhs_copy)] {
                    let operand = arg(*index, k)?;
                    read.push(match copy {
                        Some(c) => {
                            let out = TensorType::new(operand.dtype, copies[*c].dims.clone());
                            copy_types[*c] = Some((operand, out.clone()));
                            out
                        }
                        None => operand,
                    });
                }
                read.push(ins(*index).ty.clone());
                if let Some(k) = int {
                    int_gemm_types[*k] = read;
                }
            }
            GpuStep::Gather { index, kernel } => {
                gather_types[*kernel] =
                    vec![arg(*index, 0)?, arg(*index, 1)?, ins(*index).ty.clone()];
            }
            GpuStep::Reduce { launch, instrs } => {
                for &i in instrs {
                    reduce_parts[*launch].push((arg(i, 0)?, ins(i).ty.clone()));
                }
            }
            GpuStep::SplitReduce {
                index,
                partial,
                total,
                partials,
            } => {
                reduce_parts[*partial] = vec![(arg(*index, 0)?, partials.clone())];
                reduce_parts[*total] = vec![(partials.clone(), ins(*index).ty.clone())];
            }
            GpuStep::Launch(_)
            | GpuStep::Attention { .. }
            | GpuStep::Scatter { .. }
            | GpuStep::View(_)
            | GpuStep::Constant(_)
            | GpuStep::Host(_)
            | GpuStep::Call { .. } => {}
        }
    }
    let reduce_launches = reduce_launches
        .iter()
        .zip(reduce_parts)
        .map(|(l, parts)| ReduceLaunchSpec {
            name: l.name.clone(),
            parts,
            block: l.block(reductions),
            blocks: l.parts.iter().map(|&r| reductions[r].blocks()).sum(),
            alone: l.parts.len() == 1,
        })
        .collect();
    let copies = copies
        .iter()
        .zip(copy_types)
        .map(|(c, types)| {
            let (input, output) = types.ok_or(GpuError::Unused(c.name.clone()))?;
            let starts = c
                .starts
                .iter()
                .map(|s| {
                    (
                        s.operand,
                        TensorType::new(
                            if s.wide { DType::I64 } else { DType::I32 },
                            Vec::<usize>::new(),
                        ),
                    )
                })
                .collect();
            Ok(CopySpec {
                name: c.name.clone(),
                input,
                output,
                len: c.len(),
                starts,
            })
        })
        .collect::<Result<_, GpuError>>()?;
    let int_gemms = int_gemms
        .iter()
        .zip(int_gemm_types)
        .map(|(g, types)| ElementsSpec {
            name: g.name.clone(),
            len: g.results(),
            types,
        })
        .collect();
    let scatters = scatters
        .iter()
        .map(|s| ScatterSpec {
            entries: s.entry_names(),
            launches: match s {
                Scatters::Rows(r) if r.mode == RowScatterMode::Atomic => ScatterLaunches::Atomic {
                    len: r.len(),
                    update_elements: r.updates * r.n,
                },
                Scatters::Rows(r) => ScatterLaunches::Sorted {
                    updates: r.updates,
                    rows: r.rows,
                    len: r.len(),
                    rank_block: RANK_BLOCK,
                },
                Scatters::Elements(e) => ScatterLaunches::Elements {
                    updates: e.updates,
                    operand_len: e.operand_len,
                },
            },
        })
        .collect();
    let gathers = gathers
        .iter()
        .zip(gather_types)
        .map(|(g, types)| ElementsSpec {
            name: g.name.clone(),
            len: g.len(),
            types,
        })
        .collect();
    let calls = calls
        .iter()
        .map(|c| GpuCallPlan {
            kind: c.kind(),
            regions: c.regions().iter().map(|r| r.run.clone()).collect(),
        })
        .collect();
    Ok(GpuRunPlan {
        func: func.clone(),
        steps: steps.to_vec(),
        releases: frees.to_vec(),
        memory,
        launches: kernel_launches,
        reduce_launches,
        copies,
        int_gemms,
        scatters,
        gathers,
        attentions: Vec::new(),
        modules: modules.to_vec(),
        calls,
        cubins: None,
    })
}

/// Per entry piece of a plan (in [`render_pieces`]'s order, then the attention kernels), the
/// names of its entry points.
fn piece_names(
    (launches, reduce_launches, copies, int_gemms): (
        &[Launch],
        &[ReduceLaunch],
        &[CopyKernel],
        &[IntGemmKernel],
    ),
    (scatters, gathers, attentions): (&[Scatters], &[GatherKernel], &[AttentionLaunch]),
) -> Vec<Vec<String>> {
    let one = |name: &str| vec![name.to_string()];
    let mut names: Vec<Vec<String>> = launches.iter().map(|l| one(&l.name)).collect();
    names.extend(reduce_launches.iter().map(|r| one(&r.name)));
    names.extend(copies.iter().map(|c| one(&c.name)));
    names.extend(int_gemms.iter().map(|g| one(&g.name)));
    names.extend(scatters.iter().map(Scatters::entry_names));
    names.extend(gathers.iter().map(|g| one(&g.name)));
    names.extend(attentions.iter().map(|a| one(a.name())));
    names
}

/// `run`'s launches of entries dropped as repeats ([`distinct_entries`]) launching the entry
/// they repeat.
fn launch_kept_entries(run: &mut GpuRunPlan, renamed: &HashMap<String, String>) {
    let kept = |name: &mut String| {
        if let Some(first) = renamed.get(name.as_str()) {
            name.clone_from(first);
        }
    };
    run.launches.iter_mut().for_each(|l| kept(&mut l.name));
    run.reduce_launches
        .iter_mut()
        .for_each(|r| kept(&mut r.name));
    run.copies.iter_mut().for_each(|c| kept(&mut c.name));
    run.int_gemms.iter_mut().for_each(|g| kept(&mut g.name));
    run.scatters
        .iter_mut()
        .for_each(|s| s.entries.iter_mut().for_each(kept));
    run.gathers.iter_mut().for_each(|g| kept(&mut g.name));
    run.attentions.iter_mut().for_each(|a| kept(&mut a.name));
}

/// An attention kernel of a plan: an attention's forward parts, or one gradient part.
#[derive(Clone, Debug, PartialEq)]
pub enum AttentionLaunch {
    Forward(AttentionKernel),
    Grad(AttentionGradKernel),
}

impl AttentionLaunch {
    pub fn name(&self) -> &str {
        match self {
            AttentionLaunch::Forward(k) => &k.name,
            AttentionLaunch::Grad(k) => &k.name,
        }
    }

    /// Blocks of the launch, one unit of work each.
    pub fn blocks(&self) -> usize {
        match self {
            AttentionLaunch::Forward(k) => k.blocks(),
            AttentionLaunch::Grad(k) => k.blocks(),
        }
    }

    /// Threads of a block.
    pub fn threads(&self) -> usize {
        match self {
            AttentionLaunch::Forward(k) => k.threads(),
            AttentionLaunch::Grad(k) => k.threads(),
        }
    }

    /// The kernel's `.entry`.
    pub fn render(&self, mode: MathMode) -> Result<String, PtxError> {
        match self {
            AttentionLaunch::Forward(k) => render_attention(k, mode),
            AttentionLaunch::Grad(k) => render_attention_grad(k, mode),
        }
    }
}

/// What the executor needs of each attention kernel: its entry, parameters (operands, then the
/// results it writes) and blocks, from the step that runs it.
fn attention_launches(
    func: &Func,
    steps: &[GpuStep],
    attentions: &[AttentionLaunch],
) -> Result<Vec<BlocksLaunchSpec>, GpuError> {
    let typed = |v: ValueId| func.value_type(v).cloned().ok_or(GpuError::Missing(v.0));
    let mut specs: Vec<Option<BlocksLaunchSpec>> = vec![None; attentions.len()];
    for step in steps {
        let GpuStep::Attention { members, launch } = step else {
            continue;
        };
        let first = members
            .first()
            .map(|&i| &func.body[i])
            .ok_or_else(|| GpuError::Unused(attentions[*launch].name().to_string()))?;
        let mut params = Vec::new();
        for &v in &first.args {
            params.push(Param::Input(v, typed(v)?));
        }
        for &i in members {
            let v = func.instr_value(i);
            params.push(Param::Output(v, typed(v)?));
        }
        let k = &attentions[*launch];
        specs[*launch] = Some(BlocksLaunchSpec {
            name: k.name().to_string(),
            params,
            blocks: k.blocks(),
            block: k.threads() as u32,
        });
    }
    specs
        .into_iter()
        .zip(attentions)
        .map(|(s, k)| s.ok_or_else(|| GpuError::Unused(k.name().to_string())))
        .collect()
}

/// Launch `launch`'s threads and its block size: a block per row for a row kernel, a thread
/// per slot for a column kernel, elements for a flat launch, whose grid strides over them.
fn launch_shape(kernels: &[Kernel], launch: &Launch) -> (usize, u32) {
    let mut len = 0;
    let mut block = BLOCK;
    for kernel in launch.kernels.iter().map(|&k| &kernels[k]) {
        len = len.max(kernel.len);
        if let (Some(r), Some(layout)) = (&kernel.rows, row_layout(kernel)) {
            block = layout.threads;
            len = r.rows * block as usize;
        }
        if let Some(split) = ColumnSplit::of(kernel) {
            len = split.slots();
        }
    }
    (len, block)
}

/// Whether `v` is a constant of one value repeated.
fn splat_constant(func: &Func, v: ValueId) -> bool {
    let defining = v.index().checked_sub(func.params.len());
    defining
        .and_then(|i| func.body.get(i))
        .is_some_and(|d| matches!(&d.op, Op::Constant(l) if l.is_splat()))
}

/// What a plan's steps launch, gathered as the steps are planned.
#[derive(Default)]
struct Parts {
    kernels: Vec<Kernel>,
    /// Each kernel legalized, as the module renders it.
    legal_kernels: Vec<Kernel>,
    reductions: Vec<ReduceKernel>,
    copies: Vec<CopyKernel>,
    int_gemms: Vec<IntGemmKernel>,
    scatters: Vec<Scatters>,
    gathers: Vec<GatherKernel>,
    attentions: Vec<AttentionLaunch>,
    /// Float scatter-adds may combine by atomics ([`GpuOptions::atomic_float_scatter`]).
    atomic_float_scatter: bool,
    /// Per kernel, per partial buffer of a column kernel, the reductions folding its
    /// partials in turn ([`Parts::fold_partials`]).
    totals: Vec<Vec<Vec<usize>>>,
    /// Control-flow instructions whose call a step runs.
    called: std::collections::HashSet<usize>,
    /// The control-flow calls, by their first instruction.
    calls: Vec<usize>,
}

impl Parts {
    /// The step of instruction `index`, which fusion left out of every kernel.
    fn op_step(&mut self, func: &Func, index: usize) -> GpuStep {
        let ins = &func.body[index];
        let host = GpuStep::Host(index);
        match &ins.op {
            Op::DotGeneral(dims) => {
                plan_product(func, index, dims, &mut self.copies, &mut self.int_gemms)
            }
            // A dependency's value is its operand's buffer; the token only orders the steps.
            Op::Reshape { .. } | Op::AddDependency => GpuStep::View(index),
            // Host functions run on the host, on their operands copied there.
            Op::DebugCallback { .. } | Op::PureCallback(_) | Op::IoCallback(_) => host,
            // An iota has no operands: a constant like any other.
            Op::Constant(_) | Op::Iota { .. } => GpuStep::Constant(index),
            // An empty result of data movement is allocated and left as it is.
            Op::BroadcastInDim { .. }
            | Op::Transpose { .. }
            | Op::Slice { .. }
            | Op::Concatenate { .. }
            | Op::Pad { .. }
            | Op::DynamicSlice { .. }
            | Op::DynamicUpdateSlice
            | Op::Reverse { .. }
                if ins.ty.numel() == 0 =>
            {
                GpuStep::Copies(index, Vec::new())
            }
            // Data movement the CPU leaves to the interpreter is a strided copy here: the
            // alternative is a trip through the host.
            op @ (Op::BroadcastInDim { .. } | Op::Transpose { .. } | Op::Slice { .. }) => {
                let name = format!("{}_c{}", func.name, self.copies.len());
                let input = func.value_type(ins.args[0]);
                match input.and_then(|t| CopyKernel::plan(name, op, t, &ins.ty)) {
                    Some(c) => {
                        self.copies.push(c);
                        GpuStep::Copies(index, vec![(self.copies.len() - 1, 0)])
                    }
                    None => host,
                }
            }
            op @ (Op::Concatenate { .. } | Op::Pad { .. }) => {
                let planned =
                    |name: &str, t: &[&TensorType]| CopyKernel::plan_parts(name, op, t, &ins.ty);
                self.copies_step(func, index, planned)
            }
            Op::DynamicSlice { sizes } => {
                let planned = |name: &str, t: &[&TensorType]| {
                    CopyKernel::plan_dynamic_slice(name, sizes, t, &ins.ty)
                };
                self.copies_step(func, index, planned)
            }
            Op::DynamicUpdateSlice => {
                let planned = |name: &str, t: &[&TensorType]| {
                    CopyKernel::plan_dynamic_update(name, t, &ins.ty)
                };
                self.copies_step(func, index, planned)
            }
            Op::Reduce { op, axes } => self.reduce_step(func, index, *op, axes),
            // Elementwise work the support table leaves to the host (fusion put the rest into
            // kernels), and custom_vjp calls, which simplification inlines.
            Op::Unary(_)
            | Op::Binary(_)
            | Op::Compare(_)
            | Op::Select
            | Op::Clamp
            | Op::Convert { .. }
            | Op::BitcastConvert { .. }
            | Op::StopGradient
            | Op::CustomVjp(_)
            | Op::CustomJvp(_) => host,
            // Sorting runs on the host's interpreter: a GPU sort kernel is left for later; so
            // do reverses (a strided copy with negative strides is left for later too).
            Op::Sort { .. } | Op::Argsort { .. } | Op::Reverse { .. } => host,
            // Fourier transforms are the interpreter's (complex numbers are), and so are
            // triangular solves (a sequential substitution per right-hand side).
            Op::Fft { .. }
            | Op::TriangularSolve(_)
            | Op::Cholesky
            | Op::Lu(_)
            | Op::Qr(_)
            | Op::Eigh(_)
            | Op::Svd(_)
            | Op::Geqrf(_)
            | Op::HouseholderProduct
            | Op::Eig(_) => host,
            // A control-flow call is one step for all its instructions (one per result, the
            // same operands), its regions planned as programs of their own.
            Op::While(_) | Op::Cond(_) | Op::Scan(_) | Op::Remat(_) => {
                let members = func.call_instructions(index);
                self.called.extend(members.iter().copied());
                self.calls.push(index);
                GpuStep::Call {
                    members,
                    call: self.calls.len() - 1,
                }
            }
            Op::Scatter(s) if ins.ty.numel() > 0 => {
                let name = format!("{}_s{}", func.name, self.scatters.len());
                let types: Option<Vec<_>> = ins.args.iter().map(|&a| func.value_type(a)).collect();
                // Whole rows ranked by row where it can (any number of elements a row), else
                // the update elements ranked one by one.
                let planned = types.and_then(|t| match t.as_slice() {
                    [x, i, u] => {
                        ScatterKernels::plan(name.clone(), s, (x, i, u), self.atomic_float_scatter)
                            .map(|k| k.with_splat_operand(splat_constant(func, ins.args[0])))
                            .map(Scatters::Rows)
                            .or_else(|| {
                                ElementScatter::plan(name, s, (x, i, u)).map(Scatters::Elements)
                            })
                    }
                    _ => None,
                });
                match planned {
                    Some(k) => {
                        self.scatters.push(k);
                        GpuStep::Scatter {
                            index,
                            kernels: self.scatters.len() - 1,
                        }
                    }
                    None => host,
                }
            }
            // A gradient part: a kernel of its own, but for the keys' and the values' gradients
            // of the same operands, which one kernel computes where it can (the later one's
            // instruction joins this step).
            Op::Attention(a)
                if !matches!(a.part, AttentionPart::Output | AttentionPart::LogSumExp) =>
            {
                let partner = match a.part {
                    AttentionPart::KeyGrad => Some(AttentionPart::ValueGrad),
                    AttentionPart::ValueGrad => Some(AttentionPart::KeyGrad),
                    AttentionPart::QueryGrad | AttentionPart::Output | AttentionPart::LogSumExp => {
                        None
                    }
                };
                let joins = |j: usize| {
                    let Op::Attention(b) = &func.body[j].op else {
                        return false;
                    };
                    func.body[j].args == ins.args
                        && Some(b.part) == partner
                        && (b.causal, b.precision) == (a.causal, a.precision)
                };
                let name = format!("{}_a{}", func.name, self.attentions.len());
                let types: Option<Vec<_>> = ins.args.iter().map(|&v| func.value_type(v)).collect();
                let planned = types.and_then(|t| AttentionGradKernel::plan(name, a, &t));
                match planned {
                    Some(mut k) => {
                        let mut members = vec![index];
                        let later = (index + 1..func.body.len()).find(|&j| joins(j));
                        if let Some(j) = later.filter(|_| k.pairs()) {
                            members.push(j);
                            // The keys' gradient first, then the values'.
                            if a.part == AttentionPart::ValueGrad {
                                members.reverse();
                            }
                            k.part = AttentionPart::KeyGrad;
                            k.values_too = true;
                            self.called.extend(members.iter().copied());
                        }
                        self.attentions.push(AttentionLaunch::Grad(k));
                        GpuStep::Attention {
                            members,
                            launch: self.attentions.len() - 1,
                        }
                    }
                    None => host,
                }
            }
            // The forward parts of an attention: one kernel for the output and the log-sum-exps
            // of the same operands (the later one's instruction joins this step).
            Op::Attention(a) => {
                // The part instruction `j` computes, where it is an attention like this one.
                let forward = |j: usize| {
                    let Op::Attention(b) = &func.body[j].op else {
                        return None;
                    };
                    let same = func.body[j].args == ins.args
                        && b.causal == a.causal
                        && b.precision == a.precision;
                    same.then_some(b.part)
                };
                let mut members = vec![index];
                for j in index + 1..func.body.len() {
                    let part = forward(j);
                    let joins =
                        matches!(part, Some(AttentionPart::Output | AttentionPart::LogSumExp))
                            && part != Some(a.part)
                            && members.len() < 2;
                    if joins {
                        members.push(j);
                    }
                }
                let writes = |part| members.iter().any(|&j| forward(j) == Some(part));
                let (out, lse) = (
                    writes(AttentionPart::Output),
                    writes(AttentionPart::LogSumExp),
                );
                let name = format!("{}_a{}", func.name, self.attentions.len());
                let types: Option<Vec<_>> = ins.args.iter().map(|&v| func.value_type(v)).collect();
                let planned = types.and_then(|t| AttentionKernel::plan(name, a, &t, (out, lse)));
                match planned {
                    Some(k) => {
                        // The results in parameter order: the output, then the log-sum-exps.
                        members.sort_by_key(|&j| forward(j) != Some(AttentionPart::Output));
                        self.called.extend(members.iter().copied());
                        self.attentions.push(AttentionLaunch::Forward(k));
                        GpuStep::Attention {
                            members,
                            launch: self.attentions.len() - 1,
                        }
                    }
                    None => host,
                }
            }
            // Gathers fusion did not read in place: a kernel of their own.
            Op::Gather(g) if ins.ty.numel() > 0 => {
                let name = format!("{}_g{}", func.name, self.gathers.len());
                let types: Option<Vec<_>> = ins.args.iter().map(|&a| func.value_type(a)).collect();
                let planned = types.and_then(|t| match t.as_slice() {
                    [x, i] => GatherKernel::plan(name, g, (x, i, &ins.ty)),
                    _ => None,
                });
                match planned {
                    Some(k) => {
                        self.gathers.push(k);
                        GpuStep::Gather {
                            index,
                            kernel: self.gathers.len() - 1,
                        }
                    }
                    None => host,
                }
            }
            // Empty gathers and scatters, those by u8 indices, and scatters the GPU does not
            // compute exactly run on the interpreter.
            Op::Gather(_) | Op::Scatter(_) => host,
        }
    }

    /// The step of instruction `index` as the copies `planned` gives for its operand types
    /// (each with the operand it reads), named after the step; the host where none fits.
    fn copies_step(
        &mut self,
        func: &Func,
        index: usize,
        planned: impl Fn(&str, &[&TensorType]) -> Option<Vec<(CopyKernel, usize)>>,
    ) -> GpuStep {
        let name = format!("{}_c{}", func.name, self.copies.len());
        let inputs: Option<Vec<_>> = func.body[index]
            .args
            .iter()
            .map(|&a| func.value_type(a))
            .collect();
        match inputs.and_then(|t| planned(&name, &t)) {
            Some(parts) => {
                let mut launches = Vec::with_capacity(parts.len());
                for (c, operand) in parts {
                    launches.push((self.copies.len(), operand));
                    self.copies.push(c);
                }
                GpuStep::Copies(index, launches)
            }
            None => GpuStep::Host(index),
        }
    }

    /// Per partial buffer of `kernel` (legalized; none unless it is a column kernel), the
    /// reductions that fold its partials (`[stride / cols, cols]`) over the leading axis:
    /// one, or two where one would leave blocks folding many elements each.
    fn fold_partials(&mut self, func: &Func, kernel: &Kernel) -> Result<Vec<Vec<usize>>, GpuError> {
        let Some(split) = ColumnSplit::of(kernel) else {
            return Ok(Vec::new());
        };
        let mut totals = Vec::new();
        for b in &kernel.sig.buffers {
            let (Role::Partial(op), Access::Inner(cols)) = (b.role, b.access) else {
                continue;
            };
            let partials = TensorType::new(b.dtype, split.partials(cols));
            let folds = self
                .reduction(func, op, &partials, &[0])
                .ok_or(GpuError::Missing(b.value.0))?;
            totals.push(folds);
        }
        Ok(totals)
    }

    /// The reduction kernels that reduce `input` over `axes`, kept in the plan: one, or the
    /// partial and total kernels of a split where one would leave blocks folding many
    /// elements each; `None` where no kernel takes it.
    fn reduction(
        &mut self,
        func: &Func,
        op: ReduceOp,
        input: &TensorType,
        axes: &[usize],
    ) -> Option<Vec<usize>> {
        let first = self.reductions.len();
        let name = |k: usize| format!("{}_r{}", func.name, first + k);
        let whole = ReduceKernel::plan(name(0), op, input, axes)?;
        match whole.split(name(1)) {
            Some(split) => {
                self.reductions.extend([split.partial, split.total]);
                Some(vec![first, first + 1])
            }
            None => {
                self.reductions.push(whole);
                Some(vec![first])
            }
        }
    }

    /// A reduction kernel for instruction `index`, split in two launches where its blocks
    /// would each fold many elements; the host where no kernel takes it.
    fn reduce_step(&mut self, func: &Func, index: usize, op: ReduceOp, axes: &[usize]) -> GpuStep {
        let input = func.value_type(func.body[index].args[0]).cloned();
        let planned = input.and_then(|t| self.reduction(func, op, &t, axes));
        match planned.as_deref() {
            Some(&[partial, total]) => GpuStep::SplitReduce {
                index,
                partial,
                total,
                partials: self.reductions[partial].partials_type(),
            },
            Some(&[whole]) => GpuStep::Reduce {
                launch: whole,
                instrs: vec![index],
            },
            Some(_) | None => GpuStep::Host(index),
        }
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
    let host = GpuStep::Host(index);
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
        // u32 and the 8-, 16- and 64-bit integers' products are the interpreter's (no kernel
        // of their own yet).
        DType::U32 | DType::I8 | DType::I16 | DType::U16 | DType::U64 => return host,
        // Complex products are the interpreter's.
        DType::C64 | DType::C128 => return host,
        DType::F32 | DType::F64 | DType::F16 | DType::BF16 | DType::Bool => None,
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
/// The values `step` reads and those it writes, `launch` giving the kernels of a launch.
pub(super) fn step_values<'k>(
    func: &Func,
    step: &GpuStep,
    launch: &dyn Fn(usize) -> Vec<&'k Kernel>,
) -> StepValues {
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
            let mut writes: Vec<ValueId> = of(Role::Output);
            writes.extend(
                kernels
                    .iter()
                    .flat_map(|k| &k.sig.buffers)
                    .filter(|b| matches!(b.role, Role::Partial(_)))
                    .map(|b| b.value),
            );
            StepValues {
                reads: of(Role::Input),
                writes,
            }
        }
        GpuStep::Reduce { instrs, .. } => StepValues {
            reads: instrs
                .iter()
                .flat_map(|&i| func.body[i].args.clone())
                .collect(),
            writes: instrs.iter().map(|&i| func.instr_value(i)).collect(),
        },
        GpuStep::Gemm { index: i, .. }
        | GpuStep::Scatter { index: i, .. }
        | GpuStep::Gather { index: i, .. }
        | GpuStep::SplitReduce { index: i, .. }
        | GpuStep::Copies(i, _)
        | GpuStep::Host(i)
        | GpuStep::View(i) => StepValues {
            reads: func.body[*i].args.clone(),
            writes: vec![func.instr_value(*i)],
        },
        GpuStep::Constant(i) => StepValues {
            reads: Vec::new(),
            writes: vec![func.instr_value(*i)],
        },
        GpuStep::Call { members, .. } | GpuStep::Attention { members, .. } => StepValues {
            reads: members
                .iter()
                .flat_map(|&i| func.body[i].args.clone())
                .collect(),
            writes: members.iter().map(|&i| func.instr_value(i)).collect(),
        },
    }
}

/// The plan's liveness ([`liveness`]): per step, the values no later step uses (and that are
/// not results), which the run lets go of there, so a buffer is reused while it is likely
/// still in the L2 cache; and the peak of live device memory, counted by buffer: a view
/// shares its operand's, which stays in use until the last use of either.
fn plan_liveness(
    func: &Func,
    steps: &[GpuStep],
    kernels: &[Kernel],
    launches: &[Launch],
) -> Liveness {
    let launch = |l: usize| launches[l].kernels.iter().map(|&k| &kernels[k]).collect();
    let values: Vec<StepValues> = steps
        .iter()
        .map(|step| step_values(func, step, &launch))
        .collect();
    let Liveness { frees, .. } = liveness(func, &values);
    // Each value's buffer: its own, or for a view its operand's.
    let mut buffer: Vec<ValueId> = (0..func.num_values()).map(|v| ValueId(v as u32)).collect();
    let mut buffers: Vec<StepValues> = steps
        .iter()
        .zip(&values)
        .map(|(step, values)| match step {
            GpuStep::View(i) => {
                let operand = buffer[func.body[*i].args[0].index()];
                buffer[func.instr_value(*i).index()] = operand;
                StepValues {
                    reads: vec![operand],
                    writes: Vec::new(),
                }
            }
            GpuStep::Launch(_)
            | GpuStep::Gemm { .. }
            | GpuStep::Reduce { .. }
            | GpuStep::SplitReduce { .. }
            | GpuStep::Copies(..)
            | GpuStep::Scatter { .. }
            | GpuStep::Gather { .. }
            | GpuStep::Attention { .. }
            | GpuStep::Constant(_)
            | GpuStep::Host(_)
            | GpuStep::Call { .. } => StepValues {
                reads: values.reads.iter().map(|v| buffer[v.index()]).collect(),
                writes: values.writes.clone(),
            },
        })
        .collect();
    // A result's buffer is held to the end.
    if let Some(last) = buffers.last_mut() {
        last.reads
            .extend(func.outputs.iter().map(|o| buffer[o.index()]));
    }
    let memory = liveness(func, &buffers).memory;
    Liveness { frees, memory }
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

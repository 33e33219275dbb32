//! The CPU backend: a fused program whose kernels are compiled with Cranelift, whose matrix
//! products run on the `gemm` crate's packed SIMD kernels (f32 accumulates in f32, as XLA
//! does; f16 and bf16 products are widened to f32 ones before fusion, `widen`), and whose
//! other ops run on the reference interpreter's op evaluator. The executable runs on
//! `ferrax_aot_runtime`'s executor, the same one that runs ahead-of-time artifacts; this module
//! plans it (steps, kernels, memory) and generates its code.

pub mod clif;
mod control;
mod rounding;
pub mod support;
mod widen;

use crate::backend::gemm::{plan_gemm, plan_permuted_gemm, Gemm};
use crate::backend::liveness::{
    liveness, memory, peak_listing, Liveness, MemoryReport, StepValues,
};
use crate::expand_attention::expand_attention;
use crate::fuse::{listing, partition, schedule, Step};
use crate::kernel::rows::lower_rows;
use crate::kernel::LastReads;
use crate::kernel::{lower, Kernel, KernelLaunch};
pub use ferrax_aot_runtime::{
    inspect_artifact, ArtifactError, ArtifactInfo, CpuTarget, ExecStep, FORMAT_VERSION,
};
use ferrax_aot_runtime::{reused, step_values, Executable, RunPlan};
use ferrax_ir::{verify, DType, Func, Op};
use ferrax_runtime::{Array, RuntimeError};
use rounding::plan_rounding;

#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    #[error(transparent)]
    Codegen(#[from] clif::CodegenError),
    #[error(transparent)]
    Verify(#[from] ferrax_ir::VerifyError),
    #[error("could not lower instructions {start}..{end} to a kernel")]
    Lowering { start: usize, end: usize },
    #[error("the executor refused the plan: {0}")]
    Plan(#[from] ArtifactError),
    #[error(transparent)]
    Type(#[from] ferrax_ir::TypeError),
}

/// A program compiled for the CPU: the executable the runtime runs, with the kernels it was
/// compiled from and their Cranelift IR, for dumps.
pub struct CpuExecutable {
    exe: Executable,
    kernels: Vec<Kernel>,
    /// The Cranelift IR of each kernel, where it is known (empty for code loaded from an
    /// artifact, which holds machine code only).
    clif: Vec<String>,
}

impl CpuExecutable {
    pub fn compile(func: &Func) -> Result<CpuExecutable, BackendError> {
        verify(func)?;
        let func = &expand_attention(func)?;
        let func = &schedule(&widen::widen_half_products(func), &support::TARGET);
        let func =
            &crate::remat::rematerialize(func, &support::TARGET, crate::remat::Remat::KeepLives);
        let mut steps = Vec::new();
        let mut kernels = Vec::new();
        let partition = partition(func, &support::TARGET);
        let reads = LastReads::of(func);
        let uses = rounding::uses(func);
        let mut names = Vec::with_capacity(partition.len());
        let mut calls = control::Calls::new();
        for step in &partition {
            match *step {
                Step::Op { index } => {
                    let step = match &func.body[index].op {
                        Op::DotGeneral(dims) => {
                            let dtypes = [DType::F32, DType::F64];
                            let bf16_operands = func.body[index]
                                .args
                                .iter()
                                .all(|&a| widen::holds_bf16(func, a));
                            let with = |g: Gemm| Gemm { bf16_operands, ..g };
                            match plan_gemm(func, index, dims, &dtypes) {
                                Some(g) => ExecStep::Gemm(index, with(g), None, None),
                                None => match plan_permuted_gemm(func, index, dims, &dtypes) {
                                    Some((l, r, g)) => {
                                        ExecStep::Gemm(index, with(g), Some(Box::new((l, r))), None)
                                    }
                                    None => ExecStep::Op(index),
                                },
                            }
                        }
                        Op::Gather(g) => ExecStep::Gather(index, (**g).clone()),
                        Op::Scatter(sc) => ExecStep::Scatter(index, (**sc).clone()),
                        op if op.call_result().is_some() => match calls.step(func, index) {
                            Ok(members) => ExecStep::Call(members),
                            Err(first) => {
                                let by = func.instr_value(first);
                                names.push(format!("interpreter: the call of {by}"));
                                continue;
                            }
                        },
                        _ => ExecStep::Op(index),
                    };
                    let runner = match step {
                        ExecStep::Gemm(_, g, ..) if g.bf16_operands => "gemm, bf16 operands",
                        ExecStep::Gemm(..) => "gemm",
                        ExecStep::Gather(..) | ExecStep::Scatter(..) => "indexing",
                        _ => "interpreter",
                    };
                    names.push(runner.to_string());
                    steps.push(step);
                }
                Step::Kernel { start, end } => {
                    // A product's rounding, with nothing else, is done by the product's step
                    // (which is the only reader of the product, so nothing between them reads
                    // it).
                    let product = func.body[start].args.first().map(|v| v.index());
                    let dot = product.and_then(|v| v.checked_sub(func.params.len()));
                    let at = dot.and_then(|d| {
                        steps
                            .iter()
                            .rposition(|s| matches!(s, ExecStep::Gemm(i, ..) if *i == d))
                    });
                    if let Some(ExecStep::Gemm(dot, _, _, rounded @ None)) =
                        at.and_then(|at| steps.get_mut(at))
                    {
                        if let Some(r) = plan_rounding(func, &uses, *dot, (start, end)) {
                            *rounded = Some(r);
                            names.push(format!("gemm's rounding to {}", r.dtype));
                            continue;
                        }
                    }
                    let name = format!("{}_k{}", func.name, kernels.len());
                    names.push(format!("kernel @{name}"));
                    let kernel = lower(func, &reads, (start, end), name)
                        .ok_or(BackendError::Lowering { start, end })?;
                    steps.push(ExecStep::Kernel(kernels.len()));
                    kernels.push(kernel);
                }
                Step::Rows {
                    start,
                    end,
                    rows,
                    cols,
                    ref roles,
                } => {
                    let name = format!("{}_k{}", func.name, kernels.len());
                    names.push(format!("row kernel @{name}"));
                    let kernel = lower_rows(func, &reads, (start, end), (rows, cols), roles, name)
                        .ok_or(BackendError::Lowering { start, end })?;
                    steps.push(ExecStep::Kernel(kernels.len()));
                    kernels.push(kernel);
                }
            }
        }
        // Fusion's contract with the code generator: no kernel holds what the table leaves to
        // the host (expansions' own primitives come later and are the generator's).
        if let Some((kernel, ins)) = kernels
            .iter()
            .find_map(|k| k.unsupported(&support::TARGET).map(|ins| (k, ins)))
        {
            return Err(BackendError::Codegen(clif::CodegenError::Unsupported {
                kernel: kernel.name.clone(),
                what: format!("{:?} on {}", ins.op, ins.dtype),
            }));
        }
        let compiled = clif::compile(&kernels)?;
        let launches: Vec<KernelLaunch> = kernels
            .iter()
            .map(|k| k.launch(clif::chunk_len(k).unwrap_or(clif::FLAT_STEP)))
            .collect();
        let values: Vec<StepValues> = steps
            .iter()
            .map(|step| step_values(func, &launches, step))
            .collect();
        let Liveness { frees, .. } = liveness(func, &values);
        let reused = reused(func, &steps, &launches, &frees);
        let memory = memory(func, &values, &frees, &reused);
        let regions = control::compile_steps(func, &steps)?;
        let plan = RunPlan {
            func: func.clone(),
            fused: listing(func, &partition, &names),
            steps,
            kernels: launches,
            frees,
            memory,
        };
        Ok(CpuExecutable {
            exe: Executable::new(plan, compiled.code)?.with_calls(regions),
            kernels,
            clif: compiled.clif,
        })
    }

    /// The fused program: the program as scheduled for fusion, each step headed by what runs
    /// it (a kernel by name, gemm or the interpreter). Kernels name values as it does.
    pub fn fused(&self) -> &str {
        self.exe.fused()
    }

    /// The program as compiled (scheduled for fusion).
    pub fn program(&self) -> &Func {
        self.exe.program()
    }

    /// The memory plan's figures (peak bytes of live values, against keeping them all).
    pub fn memory(&self) -> MemoryReport {
        self.exe.memory()
    }

    /// The values live when the memory plan peaks, largest first ([`peak_listing`]).
    pub fn live_at_peak(&self) -> String {
        let plan = self.exe.plan();
        let steps: Vec<StepValues> = plan
            .steps
            .iter()
            .map(|step| step_values(&plan.func, &plan.kernels, step))
            .collect();
        let reused = reused(&plan.func, &plan.steps, &plan.kernels, &plan.frees);
        peak_listing(&plan.func, &steps, (&plan.frees, &reused), &plan.memory)
    }

    /// Bytes held for reuse by later steps and runs.
    pub fn pooled_bytes(&self) -> usize {
        self.exe.pooled_bytes()
    }

    /// The kernels, with the Cranelift IR of each (empty where not known).
    pub fn kernels(&self) -> impl Iterator<Item = (&Kernel, &str)> {
        let clif = self
            .clif
            .iter()
            .map(String::as_str)
            .chain(std::iter::repeat(""));
        self.kernels.iter().zip(clif)
    }

    /// The Cranelift IR of each kernel, where it is known (empty for code loaded from an
    /// artifact, which holds machine code only).
    pub fn clif(&self) -> &[String] {
        &self.clif
    }

    /// Gives loaded kernels the Cranelift IR they were compiled from (kept beside their
    /// artifact, as the persistent cache does), for dumps; ignored unless one per kernel.
    pub fn set_clif(&mut self, clif: Vec<String>) {
        if clif.len() == self.kernels.len() {
            self.clif = clif;
        }
    }

    /// The executable the runtime runs.
    pub fn executable(&self) -> &Executable {
        &self.exe
    }

    pub fn run(&self, args: &[Array]) -> Result<Vec<Array>, RuntimeError> {
        self.exe.run(args)
    }

    /// Runs on `args` given by value: an input nothing else holds is donated, its buffer
    /// reused for later values once the program no longer needs it.
    pub fn run_donated(&self, args: Vec<Array>) -> Result<Vec<Array>, RuntimeError> {
        self.exe.run_donated(args)
    }

    /// This executable as an artifact for this machine's CPU.
    pub fn to_artifact(&self) -> Result<Vec<u8>, ArtifactError> {
        self.to_artifact_with(&[])
    }

    /// This executable as an artifact, with the caller's `metadata` (returned by
    /// [`inspect_artifact`]). The kernels' bodies go with it, for dumps of the loaded one.
    pub fn to_artifact_with(&self, metadata: &[u8]) -> Result<Vec<u8>, ArtifactError> {
        let mut notes = Vec::new();
        ciborium::into_writer(&self.kernels, &mut notes)
            .map_err(|e| ArtifactError::Malformed(e.to_string()))?;
        self.exe.to_artifact(metadata, &notes)
    }

    /// The executable an artifact holds, its code loaded with no compilation, after every
    /// check the runtime makes (see `ferrax_aot_runtime`).
    pub fn from_artifact(bytes: &[u8]) -> Result<CpuExecutable, ArtifactError> {
        Ok(CpuExecutable::from_artifact_with_info(bytes)?.0)
    }

    /// [`CpuExecutable::from_artifact`], with what [`inspect_artifact`] tells of it (read
    /// once).
    pub fn from_artifact_with_info(
        bytes: &[u8],
    ) -> Result<(CpuExecutable, ArtifactInfo), ArtifactError> {
        let (exe, info) = Executable::from_artifact(bytes)?;
        let kernels: Vec<Kernel> = ciborium::from_reader(info.notes.as_slice())
            .map_err(|e| ArtifactError::Malformed(format!("its kernels: {e}")))?;
        if kernels.len() != exe.plan().kernels.len() {
            return Err(ArtifactError::Malformed(
                "its kernels do not match its plan".into(),
            ));
        }
        let exe = CpuExecutable {
            exe,
            kernels,
            clif: Vec::new(),
        };
        Ok((exe, info))
    }
}

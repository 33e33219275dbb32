//! What compiling the w10 step for a GPU costs, measured without one: tracing and simplifying
//! as a GPU compiles it, planning (kernels, launches, PTX), the PTX's size and entries, and
//! `ptxas`'s time on each module (one process after another; a device's driver compiles the
//! same PTX on its host's cores, one module a thread). The driver's compile dominates a cold
//! GPU compile, and `ptxas` is what it runs.
//!
//! `cargo run --release -p ferrax-bench -- gpu-compile [w9|w10] [sm_80|sm_90]`, with
//! `FERRAX_PTXAS` or a `ptxas` on `PATH` for the assembler's times, and `PTX_OUT=file` to keep
//! the PTX.

use crate::gpt;
use ferrax::aot_runtime::gpu::GpuStep;
use ferrax::compiler::backend::gpu::GpuPlan;
use ferrax::compiler::backend::ptx::assemble::{assemble, ptxas};
use ferrax::compiler::backend::ptx::MathMode;
use ferrax::compiler::pipeline::simplify_for_gpu;
use ferrax::optim::GradientTransformation;
use ferrax::{trace, DType, DotPrecision, PtxTarget, Result, Tensor};
use std::time::Instant;

/// The GPU plan of the w9 or w10 step for `target`, with the times of tracing, simplifying
/// and planning it.
pub struct GptPlan {
    pub plan: GpuPlan,
    pub instructions: usize,
    pub seconds: [f64; 3],
}

/// Traces, simplifies (as a GPU compiles) and plans w9's step (`w9`) or w10's.
pub fn plan_gpt(w9: bool, target: PtxTarget) -> Result<GptPlan> {
    let (c, precision) = match w9 {
        true => (gpt::Config::W9, None),
        false => (
            gpt::Config::W10,
            Some(DotPrecision::new(DType::BF16, DType::BF16)),
        ),
    };
    let opt = gpt::optimizer(3e-4);
    let params = gpt::init(&c, &ferrax::random::key(0));
    let state = opt.init(&params);
    let idx = Tensor::zeros(DType::I32, [c.batch, c.time]);
    let xs = (params, state, idx.clone(), idx);
    let start = Instant::now();
    let traced = match precision {
        Some(p) => trace(gpt::train_step_with(c, opt, p), &xs)?,
        None => trace(gpt::train_step(c, opt), &xs)?,
    };
    let trace = start.elapsed().as_secs_f64();
    let start = Instant::now();
    let (simple, _) = simplify_for_gpu(&traced)?;
    let simplify = start.elapsed().as_secs_f64();
    let start = Instant::now();
    let plan = GpuPlan::new(&simple, target, MathMode::Accurate)
        .map_err(|e| ferrax::Error::Artifact(e.to_string()))?;
    let planning = start.elapsed().as_secs_f64();
    Ok(GptPlan {
        plan,
        instructions: simple.body.len(),
        seconds: [trace, simplify, planning],
    })
}

/// Runs with the arguments after the subcommand.
pub fn run(args: &[String]) -> Result<()> {
    let w9 = args.iter().any(|a| a == "w9");
    let target = match args.iter().any(|a| a == "sm_80") {
        true => PtxTarget::Sm80,
        false => PtxTarget::Sm90,
    };
    let GptPlan {
        plan,
        instructions,
        seconds: [trace, simplify, planning],
    } = plan_gpt(w9, target)?;
    let launches = plan.run.launches.len()
        + plan.run.reduce_launches.len()
        + plan.run.copies.len()
        + plan.run.int_gemms.len()
        + plan.run.scatters.len()
        + plan.run.gathers.len()
        + plan.run.attentions.len();
    println!(
        "{}: {} instructions; trace {trace:.3} s, simplify {simplify:.3} s, plan {planning:.3} s",
        if w9 { "w9" } else { "w10" },
        instructions
    );
    println!(
        "PTX for {}: {} bytes, {} entries for {launches} launches, {} modules",
        target.arch(),
        plan.ptx.len(),
        plan.ptx.matches(".entry ").count(),
        plan.modules.len()
    );
    let mut steps = std::collections::BTreeMap::new();
    for step in &plan.run.steps {
        let kind = match step {
            GpuStep::Launch(_) => "kernels",
            GpuStep::Gemm { .. } => "products",
            GpuStep::Reduce { .. } | GpuStep::SplitReduce { .. } => "reductions",
            GpuStep::Copies(..) => "copies",
            GpuStep::Scatter { .. } | GpuStep::Gather { .. } => "indexing",
            GpuStep::Attention { .. } => "attention",
            GpuStep::View(_) | GpuStep::Constant(_) => "views and constants",
            GpuStep::Host(_) | GpuStep::Call { .. } => "host and control flow",
        };
        *steps.entry(kind).or_insert(0usize) += 1;
    }
    println!("steps: {steps:?}");
    if std::env::var_os("COPIES").is_some() {
        for c in &plan.run.copies {
            println!("copy {} -> {}", c.input, c.output);
        }
    }
    if let Ok(path) = std::env::var("PTX_OUT") {
        let _ = std::fs::write(path, &plan.ptx);
    }
    let Some(ptxas) = ptxas() else {
        println!("no ptxas: set FERRAX_PTXAS");
        return Ok(());
    };
    let mut times = Vec::with_capacity(plan.modules.len());
    for (module, _) in &plan.modules {
        let start = Instant::now();
        assemble(&ptxas, module, target).map_err(|e| ferrax::Error::Artifact(e.to_string()))?;
        times.push(start.elapsed().as_secs_f64());
    }
    let total: f64 = times.iter().sum();
    let longest = times.iter().copied().fold(0.0, f64::max);
    println!("ptxas: {total:.2} s in all, the longest module {longest:.2} s");
    Ok(())
}

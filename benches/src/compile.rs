//! Compile-time rows: trace, simplify and compile programs that grow (chains, gradients of
//! chains, wide updates, an unrolled RNN) and report each phase, so that compile time per
//! instruction can be seen to stay flat (issue #26), with w11's rows against JAX.

use crate::{backend, normal, Args};
use ferrax::{grad, DType, Result, Tensor, Tree};
use std::time::Instant;

/// The compile-time rows `args` asks for.
pub fn rows(args: &Args) -> Result<()> {
    for steps in [1000, 10000] {
        let name = format!("w11_compile_grad_chain_{steps}");
        if args.want(&name) {
            let x = normal(&[1024], 11);
            let f = move |x: Tensor| tanh_chain(x, steps).sum(..);
            compile_phases(&name, grad(f), &x)?;
        }
    }
    // About 1k, 10k and 100k traced instructions: every step alike (kernels share code), and
    // each step with its own constants (no two kernels alike).
    for steps in [200, 2000, 20000] {
        let x = normal(&[1024], 11);
        let name = format!("compile_chain_{steps}");
        if args.want(&name) {
            compile_phases(&name, move |x: Tensor| tanh_chain(x, steps), &x)?;
        }
        let name = format!("compile_varied_chain_{steps}");
        if args.want(&name) {
            compile_phases(&name, move |x: Tensor| varied_chain(x, steps), &x)?;
        }
    }
    if args.want("compile_chain_100000") {
        let x = normal(&[1024], 11);
        compile_phases(
            "compile_chain_100000",
            |x: Tensor| tanh_chain(x, 100000),
            &x,
        )?;
    }
    for steps in [100, 1000, 10000] {
        let name = format!("compile_varied_grad_chain_{steps}");
        if args.want(&name) {
            let x = normal(&[1024], 11);
            let f = move |x: Tensor| varied_chain(x, steps).sum(..);
            compile_phases(&name, grad(f), &x)?;
        }
    }
    for n in [1000, 10000] {
        let name = format!("compile_wide_{n}");
        if args.want(&name) {
            // An SGD-like update of n separate parameters: wide rather than deep.
            let ps: Vec<Tensor> = (0..n).map(|k| normal(&[64], 20 + k as u64)).collect();
            let update = |ps: Vec<Tensor>| -> Vec<Tensor> {
                ps.iter().map(|p| p - (p * 0.01).tanh() * 0.1).collect()
            };
            compile_phases(&name, update, &ps)?;
        }
    }
    if args.want("compile_rnn_grad_1000") {
        // The gradient of a 1,000-step Elman RNN unrolled by Rust's loop, each step a slice
        // of one input tensor (issue target: under 0.5 s); no JAX counterpart.
        let (steps, batch, input, hidden) = (1000, 16, 32, 64);
        let params = (
            normal(&[input, hidden], 12) * 0.1,
            normal(&[hidden, hidden], 13) * 0.1,
            Tensor::zeros(DType::F32, [hidden]),
        );
        let xs = normal(&[steps, batch, input], 14);
        let loss = move |((wx, wh, b), xs): ((Tensor, Tensor, Tensor), Tensor)| {
            let mut h = Tensor::zeros(DType::F32, [batch, hidden]);
            let mut total = Tensor::zeros(DType::F32, []);
            for t in 0..steps {
                let x = xs
                    .slice(&[t, 0, 0], &[t + 1, batch, input])
                    .reshape([batch, input]);
                h = (x.matmul(&wx) + h.matmul(&wh) + &b).tanh();
                total = total + h.square().sum(..);
            }
            total
        };
        compile_phases("compile_rnn_grad_1000", grad(loss), &(params, xs))?;
    }
    Ok(())
}

/// w11's chain: `steps` times `y = tanh(y * 1.0001 + 0.5)`.
fn tanh_chain(x: Tensor, steps: usize) -> Tensor {
    let mut y = x;
    for _ in 0..steps {
        y = (y * 1.0001 + 0.5).tanh();
    }
    y
}

/// w11's chain with a constant of its own in every step, so that no two kernels are alike.
fn varied_chain(x: Tensor, steps: usize) -> Tensor {
    let mut y = x;
    for k in 0..steps {
        y = (y * (1.0001 + k as f64 * 1e-6) + 0.5).tanh();
    }
    y
}

/// Traces, simplifies and compiles `f` for the CPU once, and prints the total (what JAX's
/// `lower(...).compile()` is compared with) with each phase's share and the time per traced
/// instruction, the figure that must stay flat as programs grow.
pub fn compile_phases<I: Tree, O: Tree>(name: &str, f: impl Fn(I) -> O, x: &I) -> Result<()> {
    let start = Instant::now();
    let traced = ferrax::trace(f, x)?;
    let traced_at = start.elapsed().as_secs_f64();
    let (simplified, _) = ferrax::compiler::simplify::simplify(&traced).map_err(backend)?;
    let simplified_at = start.elapsed().as_secs_f64();
    let backend_cpu = ferrax::compiler::pipeline::Backend::Cpu;
    ferrax::compiler::pipeline::compile_simplified(&simplified, &backend_cpu).map_err(backend)?;
    let total = start.elapsed().as_secs_f64();
    let n = traced.body.len();
    println!(
        r#"{{"name": "{name}", "impl": "ferrax-cpu", "seconds": {total:e}, "min_seconds": {total:e}, "trace_s": {traced_at:e}, "simplify_s": {:e}, "codegen_s": {:e}, "instructions": {n}, "us_per_instruction": {}}}"#,
        simplified_at - traced_at,
        total - simplified_at,
        total / n.max(1) as f64 * 1e6
    );
    Ok(())
}

/// What a shipped program does instead of compiling: `f` exported once, its artifact's size
/// printed to stderr, and the time to load it (check, map, link; no code generation) as row
/// `name`.
pub fn artifact_load<I: Tree + Clone, O: Tree>(
    name: &str,
    f: impl Fn(I) -> O + Send + Sync,
    args: &I,
    reps: usize,
) -> Result<()> {
    let lowered = ferrax::jit(f).lower(args)?;
    let bytes = lowered.export()?;
    let gpu = lowered.export_gpu(ferrax::PtxTarget::Sm90)?;
    eprintln!(
        "{name}: artifact of {} bytes (for sm_90: {} bytes)",
        bytes.len(),
        gpu.len()
    );
    let t = crate::timed(reps, || ferrax::Artifact::<I, O>::load(&bytes).map(drop))?;
    crate::emit(name, t, None, None);
    Ok(())
}

/// What a shipped GPU program does instead of compiling: `f` exported for `gpu`'s
/// architecture (its modules assembled by `ptxas` where one is at hand, else PTX), and the time
/// to load it there as row `name`: checks, then the modules loaded (the driver compiles PTX
/// where there is no machine code; its own cache may hold it from an earlier load). The size,
/// whether it holds machine code, and the first load's time go to stderr.
pub fn gpu_artifact_load<I: Tree + Clone, O: Tree>(
    gpu: &crate::Gpu,
    name: &str,
    f: impl Fn(I) -> O + Send + Sync,
    args: &I,
    reps: usize,
) -> Result<()> {
    use ferrax::runtime::GpuMachine;
    let (major, minor) = gpu.dev.compute_capability();
    let target = ferrax::PtxTarget::for_compute_capability(major, minor);
    let bytes = ferrax::jit(f).lower(args)?.export_gpu(target)?;
    let info = ferrax::aot_runtime::inspect_artifact(&bytes)
        .map_err(|e| ferrax::Error::Artifact(e.to_string()))?;
    let start = std::time::Instant::now();
    ferrax::Artifact::<I, O>::load_on(&bytes, &gpu.dev)?;
    let first = start.elapsed().as_secs_f64();
    eprintln!(
        "{name}: GPU artifact of {} bytes for {}, {}; first load {first:.4} s",
        bytes.len(),
        target.arch(),
        match info.cubins {
            Some(_) => "with machine code",
            None => "PTX only",
        }
    );
    let t = crate::timed(reps, || {
        ferrax::Artifact::<I, O>::load_on(&bytes, &gpu.dev).map(drop)
    })?;
    crate::emit_as(gpu.imp, name, t, None, None);
    Ok(())
}

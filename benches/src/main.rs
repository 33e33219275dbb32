//! The workloads of `../shared/bench/workloads.md`, one JSON line each, in the format
//! `../shared/bench/compare.py` pairs with JAX:
//!
//! `cargo run --release -p ferrax-bench -- [--only w2_softmax,w5_mlp_step] [--reps 20]
//! [--device cuda [--fast-math] [--cuda-graphs]]`
//!
//! On the CPU (`impl` is `ferrax-cpu`), programs run through `jit`: fused elementwise kernels
//! compiled with Cranelift, other ops on the reference interpreter's evaluator. With
//! `--device cuda` (`ferrax-gpu`), the same simplified programs are compiled for GPU 0 and run
//! on arrays already on the device, each call timed until the device is idle. The compile rows
//! time tracing, differentiation, simplification and code generation from nothing.
//! `--fast-math` renders the GPU programs with the approximate instructions
//! ([`MathMode::Fast`]) and reports them as `ferrax-gpu-fast-math`, apart from the accurate
//! rows that are compared with JAX. `--cuda-graphs` records each program's run once as a
//! CUDA graph and times its replays (`ferrax-gpu-graphs`: arguments copied in, results
//! copied out, one launch for the rest).
//!
//! Two subcommands measure the GPT step otherwise: `gpu-compile` (what compiling it for a GPU
//! costs, without one; [`gpu_compile_time`]) and `loss-curve` (its training loss, for JAX's to be
//! set beside it; [`loss_curve`]).

use ferrax::compiler::backend::gpu::{GpuExecutable, GpuOptions};
use ferrax::compiler::backend::ptx::MathMode;
use ferrax::runtime::{CudaDevice, DeviceArray};
use ferrax::{grad, jit, nn, ConvPadding, DType, DotPrecision, Error, Result, Tensor, Tree};
use std::sync::Arc;
use std::time::Instant;

mod cnn;
// The w9 GPT, shared with examples/train_gpt.rs and tests/gpt.rs (not all of it used here).
#[allow(dead_code)]
mod compile;
mod gpt;
mod gpu_compile_time;
mod gpu_gpt;
mod gpu_traffic;
mod loss_curve;
mod per_example;
mod random;
mod rnn;

struct Args {
    only: Vec<String>,
    reps: usize,
    cuda: bool,
    fast_math: bool,
    /// GPU steps recorded once as CUDA graphs and replayed.
    graphs: bool,
}

impl Args {
    fn parse() -> Args {
        let mut args = Args {
            only: Vec::new(),
            reps: 20,
            cuda: false,
            fast_math: false,
            graphs: false,
        };
        let mut it = std::env::args().skip(1);
        while let Some(a) = it.next() {
            match a.as_str() {
                "--only" => {
                    args.only = it
                        .next()
                        .unwrap_or_default()
                        .split(',')
                        .map(String::from)
                        .collect()
                }
                "--reps" => args.reps = it.next().and_then(|n| n.parse().ok()).unwrap_or(20),
                "--device" => args.cuda = it.next().as_deref() == Some("cuda"),
                "--fast-math" => args.fast_math = true,
                "--cuda-graphs" => args.graphs = true,
                other => eprintln!("ignoring unknown argument {other}"),
            }
        }
        args
    }

    fn want(&self, name: &str) -> bool {
        self.only.is_empty() || self.only.iter().any(|o| o == name)
    }
}

/// The yardstick of w14's gather: copying as many f32s as it writes (the rows it reads and the
/// result it writes move the same bytes) from one buffer to another, each core copying its
/// share, into a destination that stays allocated (as ferrax's recycled buffers do).
fn copy_reference(reps: usize, len: usize) -> Result<(f64, f64)> {
    let source: Vec<f32> = (0..len).map(|k| k as f32).collect();
    let mut target = vec![0f32; len];
    let threads = std::thread::available_parallelism().map_or(1, usize::from);
    let share = len.div_ceil(threads).max(1);
    timed(reps, || {
        std::thread::scope(|s| {
            for (to, from) in target.chunks_mut(share).zip(source.chunks(share)) {
                s.spawn(move || to.copy_from_slice(from));
            }
        });
        Ok(())
    })
}

/// Median and minimum seconds of `reps` calls after one warm-up call.
fn timed(reps: usize, mut f: impl FnMut() -> Result<()>) -> Result<(f64, f64)> {
    f()?;
    let mut times = Vec::with_capacity(reps);
    for _ in 0..reps.max(1) {
        let start = Instant::now();
        f()?;
        times.push(start.elapsed().as_secs_f64());
    }
    times.sort_by(f64::total_cmp);
    Ok((times[times.len() / 2], times[0]))
}

fn emit(name: &str, (median, min): (f64, f64), bytes: Option<f64>, flops: Option<f64>) {
    emit_as("ferrax-cpu", name, (median, min), bytes, flops);
}

fn emit_as(imp: &str, name: &str, times: (f64, f64), bytes: Option<f64>, flops: Option<f64>) {
    emit_with(imp, name, times, bytes, flops, &[]);
}

/// A row with more fields (`"key": value`) after the standard ones.
fn emit_with(
    imp: &str,
    name: &str,
    (median, min): (f64, f64),
    bytes: Option<f64>,
    flops: Option<f64>,
    extra: &[(&str, f64)],
) {
    let mut row = format!(
        r#"{{"name": "{name}", "impl": "{imp}", "seconds": {median:e}, "min_seconds": {min:e}"#
    );
    if let Some(b) = bytes {
        row.push_str(&format!(r#", "gbps": {}"#, b / median / 1e9));
    }
    if let Some(f) = flops {
        row.push_str(&format!(r#", "gflops": {}"#, f / median / 1e9));
    }
    for (key, value) in extra {
        row.push_str(&format!(r#", "{key}": {value}"#));
    }
    row.push('}');
    println!("{row}");
}

/// Deterministic standard-normal-ish values (sum of uniforms).
fn normal(shape: &[usize], seed: u64) -> Tensor {
    let mut s = seed.wrapping_mul(0x9E3779B97F4A7C15) | 1;
    let n: usize = shape.iter().product();
    let data = (0..n)
        .map(|_| {
            (0..4)
                .map(|_| {
                    s ^= s << 13;
                    s ^= s >> 7;
                    s ^= s << 17;
                    (s >> 40) as f32 / (1u64 << 24) as f32
                })
                .sum::<f32>()
                * 1.7320508
                - 3.4641016
        })
        .collect();
    Tensor::from_vec(shape.to_vec(), data)
}

/// Uniform i32 indices in `0..n` (the w14 token ids).
fn uniform_indices(shape: &[usize], n: usize, seed: u64) -> Tensor {
    let mut s = seed.wrapping_mul(0x9E3779B97F4A7C15) | 1;
    let count: usize = shape.iter().product();
    let data: Vec<i32> = (0..count)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 11) % n as u64) as i32
        })
        .collect();
    Tensor::from_vec(shape.to_vec(), data)
}

fn gelu(x: Tensor) -> Tensor {
    (&x * 0.5) * ((((&x * &x * &x) * 0.044715 + &x) * 0.7978845608).tanh() + 1.0) * 1.5 + 0.25
}

fn layernorm((a, g, b): (Tensor, Tensor, Tensor)) -> Tensor {
    let m = a.mean_keepdims(-1);
    let c = &a - &m;
    let v = c.square().mean_keepdims(-1);
    c * (v + 1e-5).rsqrt() * g + b
}

#[derive(Tree, Clone)]
struct Layer {
    w: Tensor,
    b: Tensor,
}

fn mlp_init(sizes: &[usize]) -> Vec<Layer> {
    sizes
        .windows(2)
        .enumerate()
        .map(|(i, s)| Layer {
            w: normal(&[s[0], s[1]], 10 + i as u64) * (1.0 / (s[0] as f64).sqrt()),
            b: Tensor::zeros(DType::F32, [s[1]]),
        })
        .collect()
}

fn mlp_loss((ps, x, y): (Vec<Layer>, Tensor, Tensor)) -> Tensor {
    let mut h = x;
    for (i, l) in ps.iter().enumerate() {
        h = h.matmul(&l.w) + &l.b;
        if i + 1 < ps.len() {
            h = nn::relu(&h);
        }
    }
    -(nn::log_softmax(&h, -1) * y).sum(-1).mean(..)
}

fn mlp_step((ps, x, y): (Vec<Layer>, Tensor, Tensor)) -> Vec<Layer> {
    let (gs, _, _) = grad(mlp_loss)((ps.clone(), x, y));
    ps.iter()
        .zip(&gs)
        .map(|(p, g)| Layer {
            w: &p.w - &g.w * 0.01,
            b: &p.b - &g.b * 0.01,
        })
        .collect()
}

fn sin_chain(x: Tensor) -> Tensor {
    let mut y = x;
    for _ in 0..8 {
        y = y.sin() * 1.01 + 0.1;
    }
    y
}

fn one_hot(rows: usize) -> Tensor {
    let data = (0..rows * 10)
        .map(|i| if i % 10 == (i / 10) % 10 { 1.0f32 } else { 0.0 })
        .collect();
    Tensor::from_vec([rows, 10], data)
}

fn backend(e: impl std::fmt::Display) -> Error {
    Error::Backend(e.to_string())
}

/// The GPU the benchmarks run on, the math its programs are compiled with, and the name
/// their rows are reported under.
struct Gpu {
    dev: Arc<CudaDevice>,
    options: GpuOptions,
    imp: &'static str,
    /// Whether steps run as recorded graphs.
    graphs: bool,
}

/// Traces, simplifies and compiles `f` for the GPU from nothing (its attention by the GPU's
/// kernels).
fn gpu_compile<I: Tree, O: Tree>(
    gpu: &Gpu,
    f: impl Fn(I) -> O + Send + Sync,
    args: &I,
) -> Result<GpuExecutable> {
    let traced = ferrax::trace(f, args)?;
    let (func, _) = ferrax::compiler::pipeline::simplify_for_gpu(&traced).map_err(backend)?;
    GpuExecutable::compile(&func, &gpu.dev, gpu.options).map_err(backend)
}

/// Times `f` on the GPU on inputs already there, waiting for the device after each call.
fn gpu_case<I: Tree, O: Tree>(
    gpu: &Gpu,
    reps: usize,
    name: &str,
    f: impl Fn(I) -> O + Send + Sync,
    args: I,
    (bytes, flops): (Option<f64>, Option<f64>),
) -> Result<()> {
    let exe = gpu_compile(gpu, f, &args)?;
    let dev = &gpu.dev;
    let mut leaves = Vec::new();
    args.flatten(&mut leaves);
    let inputs = leaves
        .iter()
        .map(|t| dev.upload(&t.to_array()?).map_err(backend))
        .collect::<Result<Vec<DeviceArray>>>()?;
    let recorded = match gpu.graphs {
        true => Some(exe.record().map_err(backend)?),
        false => None,
    };
    let t = timed(reps, || {
        match &recorded {
            Some(r) => exe.replay(r, &inputs).map_err(backend)?,
            None => exe.run_device(&inputs).map_err(backend)?,
        };
        dev.synchronize().map_err(backend)
    })?;
    emit_as(gpu.imp, name, t, bytes, flops);
    if exe.host_steps() > 0 {
        eprintln!(
            "{name}: {} instruction(s) on the host path",
            exe.host_steps()
        );
    }
    Ok(())
}

fn main_gpu(args: &Args) -> Result<()> {
    let dev = CudaDevice::new(0).map_err(backend)?;
    eprintln!("device: {dev:?}");
    // JAX's defaults (TF32 products, accurate transcendentals), or fast math on top.
    let gpu = &if args.fast_math {
        Gpu {
            dev,
            options: GpuOptions {
                math: MathMode::Fast,
                ..GpuOptions::default()
            },
            imp: "ferrax-gpu-fast-math",
            graphs: args.graphs,
        }
    } else {
        Gpu {
            dev,
            options: GpuOptions::default(),
            imp: if args.graphs {
                "ferrax-gpu-graphs"
            } else {
                "ferrax-gpu"
            },
            graphs: args.graphs,
        }
    };
    let reps = args.reps;
    let sizes = [784, 1024, 1024, 10];
    let (ps, xb, yb) = (mlp_init(&sizes), normal(&[256, 784], 1), one_hot(256));
    let a = normal(&[4096, 1024], 2);
    let mlp = (ps.clone(), xb.clone(), yb.clone());
    if args.want("w6_compile_mlp_step") {
        let start = Instant::now();
        gpu_compile(gpu, mlp_step, &mlp)?;
        let t = start.elapsed().as_secs_f64();
        emit_as(gpu.imp, "w6_compile_mlp_step", (t, t), None, None);
    }
    if args.want("w6_compile_softmax") {
        let start = Instant::now();
        gpu_compile(gpu, |x: Tensor| nn::softmax(&x, -1), &a)?;
        let t = start.elapsed().as_secs_f64();
        emit_as(gpu.imp, "w6_compile_softmax", (t, t), None, None);
    }
    let bytes = |n: usize, per: f64| (Some(per * n as f64), None);
    if args.want("w1_gelu") {
        let x = normal(&[1 << 24], 3);
        gpu_case(gpu, reps, "w1_gelu", gelu, x, bytes(1 << 24, 8.0))?;
    }
    if args.want("w2_softmax") {
        let f = |x: Tensor| nn::softmax(&x, -1);
        gpu_case(gpu, reps, "w2_softmax", f, a.clone(), bytes(a.numel(), 8.0))?;
    }
    if args.want("w3_layernorm") {
        let g = Tensor::ones(DType::F32, [1024]);
        let b = Tensor::zeros(DType::F32, [1024]);
        let inputs = (a.clone(), g, b);
        gpu_case(
            gpu,
            reps,
            "w3_layernorm",
            layernorm,
            inputs,
            bytes(a.numel(), 8.0),
        )?;
    }
    if args.want("w4_matmul") {
        let (m1, m2) = (normal(&[1024, 1024], 4), normal(&[1024, 1024], 5));
        let f = |(a, b): (Tensor, Tensor)| a.matmul(&b);
        let flops = (None, Some(2.0 * 1024f64.powi(3)));
        gpu_case(gpu, reps, "w4_matmul", f, (m1, m2), flops)?;
    }
    if args.want("w5_artifact_load") {
        compile::gpu_artifact_load(gpu, "w5_artifact_load", mlp_step, &mlp, reps)?;
    }
    if args.want("w5_mlp_step") {
        let flops = 6.0 * 256.0 * (784.0 * 1024.0 + 1024.0 * 1024.0 + 1024.0 * 10.0);
        gpu_case(gpu, reps, "w5_mlp_step", mlp_step, mlp, (None, Some(flops)))?;
    }
    if args.want("w7_rowsum") {
        let r = normal(&[4096, 4096], 6);
        let n = r.numel();
        gpu_case(
            gpu,
            reps,
            "w7_rowsum",
            |r: Tensor| r.sum(-1),
            r,
            bytes(n, 4.0),
        )?;
    }
    if args.want("w8_sin_chain") {
        let x = normal(&[1 << 22], 7);
        gpu_case(gpu, reps, "w8_sin_chain", sin_chain, x, bytes(1 << 22, 8.0))?;
    }
    rnn::gpu_rows(args, gpu)?;
    gpu_gpt::rows(args, gpu)?;
    let atomic = "w14_embedding_scatter_add_atomic";
    let scatters = [args.want("w14_embedding_scatter_add"), args.want(atomic)];
    if args.want("w14_embedding_gather") || scatters.contains(&true) {
        let (vocab, width) = (50304, 768);
        let idx = uniform_indices(&[8, 1024], vocab, 8);
        let gathered = 8 * 1024 * width;
        if args.want("w14_embedding_gather") {
            let (table, pos) = (normal(&[vocab, width], 9), normal(&[1024, width], 10));
            let f = |(t, p, i): (Tensor, Tensor, Tensor)| nn::embedding(&t, &i) + p;
            let moved = bytes(gathered, 12.0);
            gpu_case(
                gpu,
                reps,
                "w14_embedding_gather",
                f,
                (table, pos, idx.clone()),
                moved,
            )?;
        }
        let g = normal(&[8, 1024, width], 11);
        let f = move |(g, i): (Tensor, Tensor)| {
            Tensor::zeros(DType::F32, [vocab, width]).at(&i).add(&g)
        };
        let moved = bytes(2 * gathered + vocab * width, 4.0);
        if scatters[0] {
            let inputs = (g.clone(), idx.clone());
            gpu_case(gpu, reps, "w14_embedding_scatter_add", f, inputs, moved)?;
        }
        if scatters[1] {
            // The sums by atomics, in a varying order, as JAX's (`atomic_float_scatter`).
            let options = GpuOptions {
                atomic_float_scatter: true,
                ..gpu.options
            };
            let (dev, imp, graphs) = (gpu.dev.clone(), gpu.imp, gpu.graphs);
            let gpu = &Gpu {
                dev,
                options,
                imp,
                graphs,
            };
            gpu_case(gpu, reps, atomic, f, (g, idx), moved)?;
        }
    }
    Ok(())
}

fn main() -> Result<()> {
    // Compile rows time compilation, not loads from the persistent cache an earlier run filled
    // (set before any thread starts).
    std::env::set_var("FERRAX_CACHE_DIR", "off");
    let argv: Vec<String> = std::env::args().skip(1).collect();
    match argv.first().map(String::as_str) {
        Some("gpu-compile") => return gpu_compile_time::run(&argv[1..]),
        Some("gpu-traffic") => return gpu_traffic::run(&argv[1..]),
        Some("loss-curve") => return loss_curve::run(&argv[1..]),
        _ => {}
    }
    let args = Args::parse();
    if args.cuda {
        return main_gpu(&args);
    }
    let reps = args.reps;
    let sizes = [784, 1024, 1024, 10];
    let (ps, xb, yb) = (mlp_init(&sizes), normal(&[256, 784], 1), one_hot(256));
    let a = normal(&[4096, 1024], 2);
    if args.want("w6_compile_mlp_step") {
        let start = Instant::now();
        jit(mlp_step).lower(&(ps.clone(), xb.clone(), yb.clone()))?;
        let t = start.elapsed().as_secs_f64();
        emit("w6_compile_mlp_step", (t, t), None, None);
    }
    if args.want("simplify_mlp_step") {
        // The equality-saturation pass alone on the traced w5 step (the optimizer issue's
        // budget: under 20 ms); no JAX counterpart.
        let traced = ferrax::trace(mlp_step, &(ps.clone(), xb.clone(), yb.clone()))?;
        let t = timed(reps, || {
            ferrax::compiler::simplify::simplify(&traced)?;
            Ok(())
        })?;
        emit("simplify_mlp_step", t, None, None);
    }
    compile::rows(&args)?;
    rnn::rows(&args)?;
    cnn::rows(&args)?;
    per_example::rows(&args)?;
    random::rows(&args)?;
    if args.want("w6_compile_softmax") {
        let start = Instant::now();
        jit(|x: Tensor| nn::softmax(&x, -1)).lower(&a)?;
        let t = start.elapsed().as_secs_f64();
        emit("w6_compile_softmax", (t, t), None, None);
    }
    if args.want("w1_gelu") {
        let x = normal(&[1 << 24], 3);
        let f = jit(gelu);
        emit(
            "w1_gelu",
            timed(reps, || f.call(x.clone()).map(drop))?,
            Some(8.0 * (1 << 24) as f64),
            None,
        );
    }
    if args.want("w2_softmax") {
        let f = jit(|x: Tensor| nn::softmax(&x, -1));
        emit(
            "w2_softmax",
            timed(reps, || f.call(a.clone()).map(drop))?,
            Some(8.0 * a.numel() as f64),
            None,
        );
    }
    if args.want("w3_layernorm") {
        let (g, b) = (
            Tensor::ones(DType::F32, [1024]),
            Tensor::zeros(DType::F32, [1024]),
        );
        let f = jit(layernorm);
        let t = timed(reps, || f.call((a.clone(), g.clone(), b.clone())).map(drop))?;
        emit("w3_layernorm", t, Some(8.0 * a.numel() as f64), None);
    }
    if args.want("w4_matmul") {
        let (m1, m2) = (normal(&[1024, 1024], 4), normal(&[1024, 1024], 5));
        let f = jit(|(a, b): (Tensor, Tensor)| a.matmul(&b));
        let t = timed(reps, || f.call((m1.clone(), m2.clone())).map(drop))?;
        emit("w4_matmul", t, None, Some(2.0 * 1024f64.powi(3)));
    }
    if args.want("w5_mlp_step") {
        let f = jit(mlp_step);
        let t = timed(reps, || {
            f.call((ps.clone(), xb.clone(), yb.clone())).map(drop)
        })?;
        let flops = 6.0 * 256.0 * (784.0 * 1024.0 + 1024.0 * 1024.0 + 1024.0 * 10.0);
        emit("w5_mlp_step", t, None, Some(flops));
    }
    if args.want("w5_artifact_load") {
        let mlp = (ps.clone(), xb.clone(), yb.clone());
        compile::artifact_load("w5_artifact_load", mlp_step, &mlp, reps)?;
    }
    if args.want("w7_rowsum") {
        let r = normal(&[4096, 4096], 6);
        let f = jit(|r: Tensor| r.sum(-1));
        emit(
            "w7_rowsum",
            timed(reps, || f.call(r.clone()).map(drop))?,
            Some(4.0 * r.numel() as f64),
            None,
        );
    }
    if args.want("w8_sin_chain") {
        let x = normal(&[1 << 22], 7);
        let f = jit(sin_chain);
        emit(
            "w8_sin_chain",
            timed(reps, || f.call(x.clone()).map(drop))?,
            Some(8.0 * (1 << 22) as f64),
            None,
        );
    }
    if args.want("conv2d_3x3") || args.want("conv2d_3x3_grad") {
        // A CNN layer: [32, 64, 32, 32] (NCHW) by [64, 64, 3, 3] (OIHW), SAME; partnered by
        // benches/jax_conv.py.
        let (x, k) = (normal(&[32, 64, 32, 32], 15), normal(&[64, 64, 3, 3], 16));
        let conv = |x: &Tensor, k: &Tensor| x.conv(k, &[1, 1], ConvPadding::Same);
        let flops = Some(2.0 * 32.0 * 64.0 * 64.0 * 9.0 * 1024.0);
        if args.want("conv2d_3x3") {
            let f = jit(move |(x, k): (Tensor, Tensor)| conv(&x, &k));
            let t = timed(reps, || f.call((x.clone(), k.clone())).map(drop))?;
            emit("conv2d_3x3", t, None, flops);
        }
        if args.want("conv2d_3x3_grad") {
            let f = jit(move |(x, k): (Tensor, Tensor)| {
                grad(|(x, k): (Tensor, Tensor)| conv(&x, &k).square().sum(..))((x, k))
            });
            let t = timed(reps, || f.call((x.clone(), k.clone())).map(drop))?;
            emit("conv2d_3x3_grad", t, None, flops.map(|f| 3.0 * f));
        }
    }
    if args.want("w14_copy_reference") {
        let t = copy_reference(reps, 8 * 1024 * 768)?;
        emit(
            "w14_copy_reference",
            t,
            Some(2.0 * (8 * 1024 * 768 * 4) as f64),
            None,
        );
    }
    if args.want("w14_embedding_gather") || args.want("w14_embedding_scatter_add") {
        let (vocab, width) = (50304, 768);
        let idx = uniform_indices(&[8, 1024], vocab, 8);
        let gathered = (8 * 1024 * width * 4) as f64;
        if args.want("w14_embedding_gather") {
            let (table, pos) = (normal(&[vocab, width], 9), normal(&[1024, width], 10));
            let f = jit(|(t, p, i): (Tensor, Tensor, Tensor)| nn::embedding(&t, &i) + p);
            let t = timed(reps, || {
                f.call((table.clone(), pos.clone(), idx.clone())).map(drop)
            })?;
            emit("w14_embedding_gather", t, Some(3.0 * gathered), None);
        }
        if args.want("w14_embedding_scatter_add") {
            let g = normal(&[8, 1024, width], 11);
            let f = jit(move |(g, i): (Tensor, Tensor)| {
                Tensor::zeros(DType::F32, [vocab, width]).at(&i).add(&g)
            });
            let t = timed(reps, || f.call((g.clone(), idx.clone())).map(drop))?;
            let table_bytes = (vocab * width * 4) as f64;
            emit(
                "w14_embedding_scatter_add",
                t,
                Some(2.0 * gathered + table_bytes),
                None,
            );
        }
    }
    let gpt_rows = [
        "w9_compile_gpt_step",
        "w9_gpt_step",
        "w9_gpt_step_bf16",
        "w9_artifact_load",
    ];
    if gpt_rows.iter().any(|r| args.want(r)) {
        use ferrax::optim::GradientTransformation;
        let (c, opt) = (gpt::Config::W9, gpt::optimizer(3e-4));
        let params = gpt::init(&c, &ferrax::random::key(0));
        let state = opt.init(&params);
        let idx = uniform_indices(&[c.batch, c.time], c.vocab, 12);
        let tgt = uniform_indices(&[c.batch, c.time], c.vocab, 13);
        let xs = (params, state, idx, tgt);
        if args.want("w9_compile_gpt_step") {
            let step = gpt::train_step(c, opt.clone());
            compile::compile_phases("w9_compile_gpt_step", step, &xs)?;
        }
        if args.want("w9_artifact_load") {
            let step = gpt::train_step(c, opt.clone());
            compile::artifact_load("w9_artifact_load", step, &xs, reps)?;
        }
        if args.want("w9_gpt_step") {
            let f = jit(gpt::train_step(c, opt.clone()));
            let t = timed(reps, || f.call(xs.clone()).map(drop))?;
            emit("w9_gpt_step", t, None, Some(c.flops()));
        }
        if args.want("w9_gpt_step_bf16") {
            // jax_reference.py's gpt_loss with cdt=bfloat16: bf16 products, f32 elsewhere.
            let bf16 = DotPrecision::new(DType::BF16, DType::BF16);
            let f = jit(gpt::train_step_with(c, opt, bf16));
            let t = timed(reps, || f.call(xs.clone()).map(drop))?;
            emit("w9_gpt_step_bf16", t, None, Some(c.flops()));
        }
    }
    Ok(())
}

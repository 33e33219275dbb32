//! The GPT that `examples/train_gpt.rs` trains and `ferrax-bench`'s `w9_gpt_step` times
//! (`benches/src/gpt.rs`, included here), at a toy size so that a debug build runs it in
//! seconds: its jitted AdamW step learns the synthetic corpus, its step's loss is the eager
//! loss, its losses are JAX's step by step, and its parameters and optimizer state survive a
//! checkpoint.

// The benchmark's model; the test uses most, not all, of it.
#[allow(dead_code)]
#[path = "../benches/src/gpt.rs"]
mod gpt;

use ferrax::optim::GradientTransformation;
use ferrax::{checkpoint, jit, Tensor};
use gpt::Config;

const TINY: Config = Config {
    vocab: 64,
    time: 16,
    width: 32,
    heads: 2,
    layers: 2,
    batch: 4,
};

fn scalar(t: &Tensor) -> f32 {
    t.to_vec::<f32>().expect("a value")[0]
}

/// 30 jitted AdamW steps on fresh batches take the loss from about ln 64 to well below half.
#[test]
fn the_benchmark_gpt_trains_on_its_synthetic_corpus() {
    let c = TINY;
    let corpus = gpt::corpus(c.vocab, 4096);
    let opt = gpt::optimizer(1e-2);
    let params = gpt::init(&c, &ferrax::random::key(0));
    let state = opt.init(&params);
    let step = jit(gpt::train_step(c, opt));

    let (idx, tgt) = gpt::batch(&c, &corpus, 0);
    let eager = scalar(&gpt::loss(&params, &idx, &tgt, c.heads));
    assert!(
        (eager - (c.vocab as f32).ln()).abs() < 0.1,
        "initial loss {eager}"
    );
    let (mut p, mut s) = (params, state);
    let mut losses = Vec::new();
    for k in 0..30 {
        let (idx, tgt) = gpt::batch(&c, &corpus, k);
        let (loss, np, ns) = step.call((p, s, idx, tgt)).expect("a step");
        (p, s) = (np, ns);
        losses.push(scalar(&loss));
    }
    // The compiled step's first loss is the eager loss of the same batch.
    assert!(
        (losses[0] - eager).abs() < 1e-4 * eager,
        "jitted {} vs eager {eager}",
        losses[0]
    );
    let (idx, tgt) = gpt::batch(&c, &corpus, 30);
    let held = scalar(&gpt::loss(&p, &idx, &tgt, c.heads));
    eprintln!("loss {eager} -> {held} (steps: {losses:?})");
    assert!(held < 0.5 * eager, "loss {eager} -> {held}");
    assert_eq!(step.trace_count(), 1, "one compile for every batch");

    // A checkpoint of parameters and optimizer state restores the same model.
    let bytes = checkpoint::safetensors_to_bytes(&(p.clone(), s.clone())).expect("saved");
    let (p2, _) = checkpoint::safetensors_from_bytes(&bytes, &(p, s)).expect("loaded");
    assert_eq!(scalar(&gpt::loss(&p2, &idx, &tgt, c.heads)), held);
}

/// `gpt_flops` of jax_reference.py at the w9 size: 21.3 GFLOP a step.
#[test]
fn w9_flops_are_jax_references() {
    let (v, t, d, l, b) = (256.0, 128.0, 256.0, 4.0, 8.0);
    let per_token = 6.0 * (l * 12.0 * d * d + d * v) + 6.0 * l * 2.0 * t * d;
    assert_eq!(Config::W9.flops(), per_token * b * t);
    assert_eq!(Config::W9.flops(), 21_340_618_752.0);
}

/// The w10 step's program (GPT-2's: bf16 products summed in f32, f32 statistics, loss and
/// AdamW) at a reduced size, simplified, with inputs for it and the number of parameter
/// leaves.
fn reduced_w10_step() -> (ferrax::Func, Vec<ferrax::Array>, usize) {
    use ferrax::{DType, DotPrecision, Tree};
    let c = Config {
        vocab: 1003,
        time: 32,
        width: 64,
        heads: 2,
        layers: 2,
        batch: 2,
    };
    let opt = gpt::optimizer(3e-4);
    let params = gpt::init(&c, &ferrax::random::key(0));
    let state = opt.init(&params);
    let corpus = gpt::corpus(c.vocab, 4096);
    let (idx, tgt) = gpt::batch(&c, &corpus, 0);
    let xs = (params, state, idx, tgt);
    let precision = DotPrecision::new(DType::BF16, DType::BF16);
    let func = ferrax::trace(gpt::train_step_with(c, opt, precision), &xs).expect("traced");
    let (simple, _) = ferrax::compiler::simplify::simplify(&func).expect("simplified");
    let mut leaves = Vec::new();
    xs.flatten(&mut leaves);
    let args = leaves
        .iter()
        .map(|t| t.to_array().expect("a value"))
        .collect();
    let mut params = Vec::new();
    xs.0.flatten(&mut params);
    (simple, args, params.len())
}

/// The GPT step's parameter updates fuse with the updates of their moments (w9's model with
/// w10's bf16 products, planned for a GPU): the bias corrections and moment decays AdamW
/// traces after the whole backward pass are placed where the updates read them, so no launch
/// reads back a new moment or parameter (a result of the step) that another launch wrote.
#[test]
fn the_gpt_steps_parameter_updates_fuse_with_their_moments() {
    use ferrax::compiler::backend::gpu::GpuPlan;
    use ferrax::compiler::backend::ptx::{MathMode, PtxTarget};
    use ferrax::{DType, DotPrecision, Tensor};
    use ferrax_aot_runtime::gpu::Param;
    let c = Config::W9;
    let opt = gpt::optimizer(3e-4);
    let params = gpt::init(&c, &ferrax::random::key(0));
    let state = opt.init(&params);
    let idx = Tensor::zeros(DType::I32, [c.batch, c.time]);
    let xs = (params, state, idx.clone(), idx);
    let precision = DotPrecision::new(DType::BF16, DType::BF16);
    let func = ferrax::trace(gpt::train_step_with(c, opt, precision), &xs).expect("traced");
    let (simple, _) = ferrax::compiler::pipeline::simplify_for_gpu(&func).expect("simplified");
    let plan = GpuPlan::new(&simple, PtxTarget::Sm80, MathMode::Accurate).expect("planned");
    let results: std::collections::HashSet<_> = plan.run.func.outputs.iter().collect();
    let mut written = std::collections::HashSet::new();
    let mut read_back = Vec::new();
    for launch in &plan.run.launches {
        for p in &launch.params {
            match p {
                Param::Input(v, t) if written.contains(v) => read_back.push(t.dims().to_vec()),
                Param::Input(..) => {}
                Param::Output(v, _) | Param::Partial { value: v, .. } if results.contains(v) => {
                    written.insert(*v);
                }
                Param::Output(..) | Param::Partial { .. } => {}
            }
        }
    }
    // Left: the embedding tables, whose gradients (a scatter, a sum over the batch) no kernel
    // computes, so their readers wait in trace order. Before, 150 values were read back.
    let tables = [vec![c.vocab, c.width], vec![c.time, c.width]];
    assert!(
        read_back.iter().all(|d| tables.contains(d)) && read_back.len() <= 2,
        "{read_back:?}"
    );
}

/// The w10 step at a reduced size runs whole on the emulated GPU, through the executor the
/// CUDA device uses: every step a kernel, a copy or a GEMM (none on the host), attention by
/// its flash kernels, products on their operands as stored, the optimizer's updates grouped
/// into few launches, and its loss, parameters and optimizer state are the interpreter's;
/// recorded as a graph, it replays to the same bits.
#[test]
fn the_w10_step_at_a_reduced_size_runs_on_the_emulated_gpu() {
    use ferrax::compiler::backend::gpu::{GpuOptions, GpuProgram};
    use ferrax::runtime::GpuMachine;
    use ferrax_aot_runtime::gpu::GpuStep;
    let (simple, args, params_len) = reduced_w10_step();
    let emulator = ferrax_ptx_emu::Emulator::default();
    let program = GpuProgram::compile(&simple, &emulator, GpuOptions::default()).expect("planned");
    assert_eq!(program.host_steps(), 0, "host steps");
    // Attention by its kernels, in each layer: the forward parts, the queries' gradient, and
    // the keys' and values' gradients (one kernel on the tensor cores).
    assert_eq!(program.plan().attentions.len(), 3 * 2, "attention kernels");
    // Every matrix product reads its operands where they lie (cuBLAS's transpose flags), with
    // no transposed copy.
    let copied = program.plan().run.steps.iter().filter(|s| {
        matches!(s, GpuStep::Gemm { lhs_copy, rhs_copy, .. } if lhs_copy.is_some() || rhs_copy.is_some())
    });
    assert_eq!(copied.count(), 0, "products with transposed operands");
    let got = program.run(&args).expect("ran");
    let want = ferrax::runtime::interpret(&simple, &args).expect("interpreted");
    assert_eq!(got.len(), want.len());
    // The AdamW update of every parameter, the gradients' last reductions and the scatter
    // into the embedding follow the last GEMM in a few grouped launches, not one a tensor.
    let launched = emulator.launched();
    let after_products = launched.iter().rev().take_while(|l| *l != "gemm").count();
    assert!(after_products < params_len, "{launched:?}");
    // Results: the loss, the parameters, AdamW's count, then `mu` and `nu`, leaf by leaf.
    let n = params_len;
    let close = |i: usize, rtol: f64, atol: f64| {
        let (g, w) = (got[i].to_f64_vec(), want[i].to_f64_vec());
        let scale = w.iter().fold(0f64, |m, x| m.max(x.abs()));
        for (k, (a, b)) in g.iter().zip(&w).enumerate() {
            let d = (a - b).abs();
            assert!(
                d <= rtol * scale + atol,
                "result {i} [{k}]: {a} vs {b} (scale {scale})"
            );
        }
    };
    // Products round to bf16 (a relative 2^-8), summed in another order than the
    // interpreter's: a value may land on the next bf16, which the loss averages away.
    close(0, 1e-5, 0.0);
    // AdamW's first step moves each weight by about the learning rate times the sign of its
    // gradient, so where a gradient is rounding noise (the key biases' is zero exactly: the
    // softmax ignores them) the two may step apart by twice the learning rate; elsewhere
    // they agree to within bf16's rounding of the steps.
    for i in 1..=n {
        close(i, 0.0, 2.0 * 3e-4 * 1.001);
    }
    assert_eq!(got[n + 1], want[n + 1], "AdamW's count");
    // The moments hold the gradients and their squares: bf16 roundings apart, more than the
    // loss's, as the attention kernel rounds its weights relative to the running maximum
    // where the plain-op spelling rounds the normalized ones (a few 2^-8 relative).
    for i in n + 2..got.len() {
        close(i, 3e-2, 0.0);
    }
    // Recorded once as a graph (every step on the device), the step replays to the bits of
    // the plain run.
    let up: Vec<_> = args
        .iter()
        .map(|a| emulator.upload(a).expect("uploaded"))
        .collect();
    let recording = program.record().expect("recorded");
    let replayed = program.replay(&recording, &up).expect("replayed");
    for (i, (r, g)) in replayed.iter().zip(&got).enumerate() {
        assert_eq!(&emulator.download(r).expect("downloaded"), g, "result {i}");
    }
}

/// A device that cannot hold the step's memory plan refuses it with an `Err` before anything
/// runs, naming what it needs; one that holds the plan but runs out of memory on the way (the
/// emulator never reuses a buffer) stops with an `Err` too, never a crash.
#[test]
fn a_gpu_without_the_memory_a_plan_needs_refuses_it() {
    use ferrax::compiler::backend::gpu::{GpuOptions, GpuProgram};
    use ferrax::runtime::GpuMachine;
    let (simple, args, _) = reduced_w10_step();
    let planned = |emulator: &ferrax_ptx_emu::Emulator| {
        GpuProgram::compile(&simple, emulator, GpuOptions::default()).expect("planned")
    };
    // Loading uploads the program's constants, which stay on the device.
    let probe = ferrax_ptx_emu::Emulator::with_capacity(usize::MAX);
    let memory = planned(&probe).memory();
    let constants = usize::MAX - probe.memory_available().expect("a figure");
    let needed = memory.peak - memory.inputs;
    assert!(needed > 0 && memory.peak < memory.unplanned, "{memory:?}");

    let small = ferrax_ptx_emu::Emulator::with_capacity(constants + memory.inputs + needed - 1);
    let error = planned(&small).run(&args).expect_err("refused").to_string();
    assert!(
        error.contains(&format!("needs {needed} bytes beyond its inputs")),
        "{error}"
    );
    assert!(small.launched().is_empty(), "{:?}", small.launched());

    let tight = ferrax_ptx_emu::Emulator::with_capacity(constants + memory.inputs + needed);
    let error = planned(&tight).run(&args).expect_err("ran out").to_string();
    assert!(error.contains("out of memory"), "{error}");
    assert!(!tight.launched().is_empty());
}

/// The loss over GPT-2's vocabulary (w10's 50,304 classes, rows streamed through the row
/// kernels in chunks) and its gradient run on the emulated GPU without host steps and give
/// the interpreter's values.
#[test]
fn the_w10_loss_over_its_whole_vocabulary_runs_on_the_emulated_gpu() {
    use ferrax::compiler::backend::gpu::{GpuOptions, GpuProgram};
    use ferrax::{nn, DType};
    let (rows, vocab) = (3, Config::W10.vocab);
    let loss = |logits: Tensor, labels: Tensor| {
        nn::softmax_cross_entropy_with_integer_labels(&logits, &labels).mean(..)
    };
    let func = ferrax::trace(
        |(logits, labels): (Tensor, Tensor)| {
            ferrax::value_and_grad(|logits: Tensor| loss(logits, labels.clone()))(logits)
        },
        &(
            Tensor::spec(DType::F32, [rows, vocab]),
            Tensor::spec(DType::I32, [rows]),
        ),
    )
    .expect("traced");
    let (simple, _) = ferrax::compiler::simplify::simplify(&func).expect("simplified");
    let logits: Vec<f32> = (0..rows * vocab)
        .map(|i| ((i * 7919 % 10007) as f32 / 10007.0 - 0.5) * 8.0)
        .collect();
    let args = vec![
        ferrax::Array::from_vec([rows, vocab], logits).expect("logits"),
        ferrax::Array::from_vec([rows], vec![0i32, 50303, 12345]).expect("labels"),
    ];
    let emulator = ferrax_ptx_emu::Emulator::default();
    let program = GpuProgram::compile(&simple, &emulator, GpuOptions::default()).expect("planned");
    assert_eq!(program.host_steps(), 0, "host steps");
    let got = program.run(&args).expect("ran");
    let want = ferrax::runtime::interpret(&simple, &args).expect("interpreted");
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        let (g, w) = (g.to_f64_vec(), w.to_f64_vec());
        let scale = w.iter().fold(0f64, |m, x| m.max(x.abs()));
        for (k, (a, b)) in g.iter().zip(&w).enumerate() {
            // Sums of 50,304 terms in another order: a few ulp of the largest.
            assert!(
                (a - b).abs() <= 1e-5 * scale,
                "result {i} [{k}]: {a} vs {b}"
            );
        }
    }
}

/// The benchmark's model and optimizer are `jax_reference.py`'s: from JAX's own initial
/// parameters of a two-layer GPT (`tests/jax/generate_gpt.py` wrote them, with the batches and
/// JAX's losses, to `tests/jax/gpt_reference.json`), 20 jitted f32 AdamW steps give JAX's loss
/// at every step. Within 2e-6 relative: the two sum in different orders, and f32 roundings
/// compound over the steps (measured: 1.7e-7 here, 4e-7 at w9's size over 300 steps; AdamW's
/// second-moment decay at 0.999 instead of 0.95 is 1.6e-5 off by the fifth step).
#[test]
fn the_training_loss_matches_jaxs_step_by_step() {
    use serde_json::Value;
    let reference: Value =
        serde_json::from_str(include_str!("jax/gpt_reference.json")).expect("reference");
    let size = |k: &str| reference["config"][k].as_u64().expect("config") as usize;
    let c = Config {
        vocab: size("V"),
        time: size("T"),
        width: size("D"),
        heads: size("H"),
        layers: size("L"),
        batch: size("B"),
    };
    let tensors: std::collections::HashMap<&str, Tensor> = reference["params"]
        .as_array()
        .expect("params")
        .iter()
        .map(|p| {
            let shape: Vec<usize> = p["shape"]
                .as_array()
                .expect("shape")
                .iter()
                .map(|d| d.as_u64().expect("size") as usize)
                .collect();
            let data: Vec<f32> = p["data"]
                .as_array()
                .expect("data")
                .iter()
                .map(|x| x.as_f64().expect("value") as f32)
                .collect();
            (
                p["name"].as_str().expect("name"),
                Tensor::from_vec(shape, data),
            )
        })
        .collect();
    let t = |name: String| tensors[name.as_str()].clone();
    let linear = |w: String, b: String| ferrax::nn::Linear {
        w: t(w),
        b: Some(t(b)),
    };
    let params = gpt::Gpt {
        wte: t("wte".into()),
        wpe: t("wpe".into()),
        blocks: (0..c.layers)
            .map(|i| {
                let n = |k: &str| format!("layers.{i}.{k}");
                gpt::Block {
                    ln1: (t(n("ln1_g")), t(n("ln1_b"))),
                    attn: ferrax::nn::Attention {
                        qkv: linear(n("w_qkv"), n("b_qkv")),
                        proj: linear(n("w_o"), n("b_o")),
                    },
                    ln2: (t(n("ln2_g")), t(n("ln2_b"))),
                    fc: linear(n("w_fc"), n("b_fc")),
                    proj: linear(n("w_proj"), n("b_proj")),
                }
            })
            .collect(),
        lnf: (t("lnf_g".into()), t("lnf_b".into())),
        head: ferrax::nn::Linear {
            w: t("w_head".into()),
            b: None,
        },
    };
    let batch = |s: &Value| -> Tensor {
        let ids: Vec<i32> = s
            .as_array()
            .expect("rows")
            .iter()
            .flat_map(|row| row.as_array().expect("row").iter())
            .map(|x| x.as_i64().expect("token") as i32)
            .collect();
        Tensor::from_vec([c.batch, c.time], ids)
    };
    let opt = gpt::optimizer(3e-4);
    let mut state = opt.init(&params);
    let mut params = params;
    let step = jit(gpt::train_step(c, opt));
    let batches = reference["batches"].as_array().expect("batches");
    let losses = reference["losses"].as_array().expect("losses");
    assert_eq!(batches.len(), losses.len());
    for (s, (b, want)) in batches.iter().zip(losses).enumerate() {
        let (loss, p, st) = step
            .call((params, state, batch(&b[0]), batch(&b[1])))
            .expect("a step");
        let (got, want) = (scalar(&loss), want.as_f64().expect("loss") as f32);
        assert!(
            ((got - want) / want).abs() < 2e-6,
            "step {}: loss {got}, JAX's {want}",
            s + 1
        );
        (params, state) = (p, st);
    }
}

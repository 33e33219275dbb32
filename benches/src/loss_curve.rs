//! The GPT step's training loss over a fixed batch stream (windows of Shakespeare's text), to
//! set beside JAX's (issue 31's loss curve): writes the initial parameters and every batch for `benches/gpu/jax_loss_curve.py`,
//! which trains `jax_reference.py`'s step from the same start on the same batches, then trains
//! with `jit` and writes its losses. Both sides start from these parameters, so the curves
//! differ only by how each computes: rounding, and at w10 the bf16 products.
//!
//! `cargo run --release -p ferrax-bench -- loss-curve [w9|w10] [--steps N]
//! [--device cpu|cuda] [--out DIR]` (w9, 300 steps, the CPU and `/tmp/ferrax-loss` by default),
//! then `python3 benches/gpu/jax_loss_curve.py DIR`.
//!
//! Files in DIR: `params.json` (each parameter's name in `gpt_init`'s tree and its shape, in
//! the order of `params.f32`, little-endian f32), `batches.i32` (per step, its token ids then
//! its targets, `[batch, time]` each), `run.json` (the configuration) and `ferrax.json` (the
//! losses).

use crate::gpt;
use ferrax::optim::GradientTransformation;
use ferrax::{jit, DType, Device, DotPrecision, Error, Result, Tensor, Tree};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The batches' text, the training example's (bytes as tokens): unlike the benchmark's
/// synthetic corpus, not learnt by heart in a few hundred steps, so the loss falls smoothly.
const TEXT: &[u8] = include_bytes!("../../examples/data/shakespeare.txt");

/// The parameters under their names in `gpt_init`'s tree (`layers.{i}.{name}` for a block's).
fn named(p: &gpt::Gpt) -> Vec<(String, &Tensor)> {
    let mut out = vec![("wte".to_string(), &p.wte), ("wpe".to_string(), &p.wpe)];
    for (i, b) in p.blocks.iter().enumerate() {
        let parts = [
            ("ln1_g", Some(&b.ln1.0)),
            ("ln1_b", Some(&b.ln1.1)),
            ("w_qkv", Some(&b.attn.qkv.w)),
            ("b_qkv", b.attn.qkv.b.as_ref()),
            ("w_o", Some(&b.attn.proj.w)),
            ("b_o", b.attn.proj.b.as_ref()),
            ("ln2_g", Some(&b.ln2.0)),
            ("ln2_b", Some(&b.ln2.1)),
            ("w_fc", Some(&b.fc.w)),
            ("b_fc", b.fc.b.as_ref()),
            ("w_proj", Some(&b.proj.w)),
            ("b_proj", b.proj.b.as_ref()),
        ];
        for (name, t) in parts {
            if let Some(t) = t {
                out.push((format!("layers.{i}.{name}"), t));
            }
        }
    }
    out.push(("lnf_g".to_string(), &p.lnf.0));
    out.push(("lnf_b".to_string(), &p.lnf.1));
    out.push(("w_head".to_string(), &p.head.w));
    out
}

fn io(e: std::io::Error) -> Error {
    Error::Artifact(e.to_string())
}

/// `values` as little-endian bytes appended to `file`.
fn write_all<T: Copy>(file: &mut impl Write, values: &[T], bytes: fn(T) -> [u8; 4]) -> Result<()> {
    for &v in values {
        file.write_all(&bytes(v)).map_err(io)?;
    }
    Ok(())
}

/// The parameters (`params.json`, `params.f32`) and the batches of `steps` steps
/// (`batches.i32`) for the JAX side.
fn write_inputs(dir: &Path, params: &gpt::Gpt, batches: &[(Tensor, Tensor)]) -> Result<()> {
    let mut manifest = Vec::new();
    let mut data =
        std::io::BufWriter::new(std::fs::File::create(dir.join("params.f32")).map_err(io)?);
    for (name, t) in named(params) {
        let shape: Vec<String> = t.shape().iter().map(usize::to_string).collect();
        manifest.push(format!("[\"{name}\", [{}]]", shape.join(", ")));
        write_all(&mut data, &t.to_vec::<f32>()?, f32::to_le_bytes)?;
    }
    data.flush().map_err(io)?;
    std::fs::write(
        dir.join("params.json"),
        format!("[{}]\n", manifest.join(",\n ")),
    )
    .map_err(io)?;
    let mut tokens =
        std::io::BufWriter::new(std::fs::File::create(dir.join("batches.i32")).map_err(io)?);
    for (idx, tgt) in batches {
        write_all(&mut tokens, &idx.to_vec::<i32>()?, i32::to_le_bytes)?;
        write_all(&mut tokens, &tgt.to_vec::<i32>()?, i32::to_le_bytes)?;
    }
    tokens.flush().map_err(io)
}

/// `tree` with every leaf on `device`.
fn on<T: Tree>(tree: &T, device: &Device) -> Result<T> {
    let mut failed = None;
    let moved = ferrax::tree_map(tree, |t| match t.to_device(device) {
        Ok(t) => t,
        Err(e) => {
            failed.get_or_insert(e);
            t.clone()
        }
    });
    failed.map_or(Ok(moved), Err)
}

/// Runs with the arguments after the subcommand.
pub fn run(args: &[String]) -> Result<()> {
    let value = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
    };
    let w10 = args.iter().any(|a| a == "w10");
    let steps: usize = value("--steps").and_then(|s| s.parse().ok()).unwrap_or(300);
    let dir = PathBuf::from(value("--out").map_or("/tmp/ferrax-loss", String::as_str));
    let device = match value("--device").map(String::as_str) {
        Some("cuda") => Device::cuda(0)?,
        _ => Device::Cpu,
    };
    let (name, c, precision) = match w10 {
        true => (
            "w10",
            gpt::Config::W10,
            Some(DotPrecision::new(DType::BF16, DType::BF16)),
        ),
        false => ("w9", gpt::Config::W9, None),
    };
    std::fs::create_dir_all(&dir).map_err(io)?;
    let opt = gpt::optimizer(3e-4);
    let params = gpt::init(&c, &ferrax::random::key(0));
    let state = opt.init(&params);
    let corpus: Vec<i32> = TEXT.iter().map(|&b| i32::from(b)).collect();
    let batches: Vec<(Tensor, Tensor)> = (0..steps).map(|s| gpt::batch(&c, &corpus, s)).collect();
    write_inputs(&dir, &params, &batches)?;
    let config = format!(
        "{{\"config\": \"{name}\", \"steps\": {steps}, \"batch\": {}, \"time\": {}}}\n",
        c.batch, c.time
    );
    std::fs::write(dir.join("run.json"), config).map_err(io)?;
    type Step = Box<dyn Fn(gpt::StepArgs) -> Result<(Tensor, gpt::Gpt, gpt::OptState)>>;
    let step: Step = match precision {
        Some(p) => {
            let step = jit(gpt::train_step_with(c, opt, p));
            Box::new(move |args| step.call(args))
        }
        None => {
            let step = jit(gpt::train_step(c, opt));
            Box::new(move |args| step.call(args))
        }
    };
    let (mut params, mut state) = (on(&params, &device)?, on(&state, &device)?);
    let mut losses = Vec::with_capacity(steps);
    let start = Instant::now();
    for (idx, tgt) in &batches {
        let args = (params, state, on(idx, &device)?, on(tgt, &device)?);
        let (loss, p, s) = step(args)?;
        losses.push(loss.to_vec::<f32>()?.first().copied().unwrap_or(f32::NAN));
        (params, state) = (p, s);
    }
    let seconds = start.elapsed().as_secs_f64();
    let listed: Vec<String> = losses.iter().map(|l| format!("{l:e}")).collect();
    std::fs::write(
        dir.join("ferrax.json"),
        format!("{{\"losses\": [{}]}}\n", listed.join(", ")),
    )
    .map_err(io)?;
    println!(
        "{name}: {steps} steps in {seconds:.1} s (compile included), loss {} -> {}; wrote {}",
        losses.first().copied().unwrap_or(f32::NAN),
        losses.last().copied().unwrap_or(f32::NAN),
        dir.display()
    );
    Ok(())
}

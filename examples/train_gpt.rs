//! Trains the w9 GPT of `../shared/bench/workloads.md` (4 layers of width 256, 4 heads, a
//! byte vocabulary, context 128, batch 8) on a synthetic, deterministic corpus with one jitted
//! AdamW step, printing the loss, steps per second and compile time, then saves the
//! parameters and optimizer state as a safetensors checkpoint and loads them back.
//!
//! The model is `benches/src/gpt.rs`, the same code the `w9_gpt_step` benchmark times.
//!
//! `cargo run --release --example train_gpt [-- STEPS]` (60 steps by default)

// The benchmark's model; this example uses most, not all, of it.
#[allow(dead_code)]
#[path = "../benches/src/gpt.rs"]
mod gpt;

use ferrax::{checkpoint, jit, Tensor};
use gpt::{Config, StepArgs};
use std::time::Instant;

/// The bigram baseline: the cross-entropy of predicting each token from the one before it
/// with the corpus's own bigram frequencies, what a model without context reaches at best.
fn bigram_baseline(corpus: &[i32], vocab: usize) -> f64 {
    let mut pairs = vec![0usize; vocab * vocab];
    let mut firsts = vec![0usize; vocab];
    for w in corpus.windows(2) {
        let (a, b) = (w[0] as usize % vocab, w[1] as usize % vocab);
        pairs[a * vocab + b] += 1;
        firsts[a] += 1;
    }
    let total = corpus.len().saturating_sub(1).max(1) as f64;
    pairs
        .iter()
        .enumerate()
        .filter(|&(_, &n)| n > 0)
        .map(|(k, &n)| -(n as f64) * (n as f64 / firsts[k / vocab] as f64).ln())
        .sum::<f64>()
        / total
}

fn scalar(t: &Tensor) -> ferrax::Result<f32> {
    Ok(t.to_vec::<f32>()?.first().copied().unwrap_or(f32::NAN))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let steps: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    let c = Config::W9;
    let corpus = gpt::corpus(c.vocab, 1 << 16);
    let opt = gpt::optimizer(3e-4);
    let params = gpt::init(&c, 0);
    let state = ferrax::optim::GradientTransformation::init(&opt, &params);
    let count: usize = ferrax::tree_leaves(&params).iter().map(Tensor::numel).sum();
    println!(
        "GPT: {} layers, width {}, {} heads, vocab {}, context {}, batch {}: {:.2}M parameters",
        c.layers,
        c.width,
        c.heads,
        c.vocab,
        c.time,
        c.batch,
        count as f64 / 1e6
    );

    let step = jit(gpt::train_step(c, opt));
    let (idx, tgt) = gpt::batch(&c, &corpus, 0);
    let start = Instant::now();
    let compiled = step.lower(&(params.clone(), state.clone(), idx, tgt))?;
    println!(
        "compile: {:.2} s (trace, simplify, code generation)",
        start.elapsed().as_secs_f64()
    );
    if let Some(m) = compiled.memory() {
        let mb = |b: usize| b as f64 / 1e6;
        println!(
            "memory plan: peak {:.0} MB of live values (parameters and state {:.0} MB)",
            mb(m.peak),
            mb(m.inputs)
        );
    }
    let compiled = compiled.compile();

    let (mut p, mut s) = (params, state);
    let (mut first, mut last) = (f32::NAN, f32::NAN);
    let start = Instant::now();
    for k in 0..steps {
        let (idx, tgt) = gpt::batch(&c, &corpus, k);
        let args: StepArgs = (p, s, idx, tgt);
        let (loss, np, ns) = compiled.call(args)?;
        (p, s, last) = (np, ns, scalar(&loss)?);
        if k == 0 {
            first = last;
        }
        if k % 5 == 0 || k + 1 == steps {
            println!("step {k:3}: loss {last:.4}");
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    let rate = steps as f64 / seconds;
    println!(
        "{steps} steps in {seconds:.2} s: {rate:.2} steps/s, {:.0} tokens/s, {:.1} GFLOP/s; loss {first:.4} -> {last:.4} (ln {} = {:.4})",
        rate * (c.batch * c.time) as f64,
        rate * c.flops() / 1e9,
        c.vocab,
        (c.vocab as f64).ln()
    );

    println!(
        "bigram baseline {:.4}: the model is {} it",
        bigram_baseline(&corpus, c.vocab),
        if f64::from(last) < bigram_baseline(&corpus, c.vocab) {
            "below"
        } else {
            "not yet below"
        }
    );

    let path = std::env::temp_dir().join("ferrax_train_gpt.safetensors");
    checkpoint::save_safetensors(&path, &(p.clone(), s.clone()))?;
    let (p2, _) = checkpoint::load_safetensors(&path, &(p.clone(), s))?;
    let (idx, tgt) = gpt::batch(&c, &corpus, steps);
    let before = scalar(&gpt::loss(&p, &idx, &tgt, c.heads))?;
    let after = scalar(&gpt::loss(&p2, &idx, &tgt, c.heads))?;
    println!(
        "checkpoint: {} ({} bytes); loss on a new batch {before:.4}, reloaded {after:.4}",
        path.display(),
        std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0)
    );
    Ok(())
}

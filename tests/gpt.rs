//! The GPT that `examples/train_gpt.rs` trains and `ferrax-bench`'s `w9_gpt_step` times
//! (`benches/src/gpt.rs`, included here), at a toy size so that a debug build runs it in
//! seconds: its jitted AdamW step learns the synthetic corpus, its step's loss is the eager
//! loss, and its parameters and optimizer state survive a checkpoint.

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

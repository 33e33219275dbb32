//! `examples/train_gpt.rs` shortened: its `train` at a toy size on the first 200 kB of the
//! Shakespeare text, quick in a debug build, so that CI runs the example's whole path (data
//! split, random batches, the jitted step, evaluation, the bigram baseline and sampling).

#[allow(dead_code)]
#[path = "../examples/train_gpt.rs"]
mod train_gpt;

use train_gpt::gpt::Config;
use train_gpt::{bigram_loss, train, Settings, PROMPT, TEXT};

/// 300 steps at width 64 take the validation loss from ln 256 to near the bigram baseline,
/// every loss finite, and the sample continues the prompt.
#[test]
fn a_short_run_learns_the_text() {
    let config = Config {
        vocab: 256,
        time: 64,
        width: 64,
        heads: 4,
        layers: 2,
        batch: 8,
    };
    let settings = Settings {
        config,
        steps: 300,
        lr: 1e-2,
        warmup: 20,
        eval_every: 150,
        eval_batches: 2,
        sample_len: 20,
        seed: 1,
        progress: false,
    };
    let (_, _, report) = train(&TEXT[..200_000], &settings).expect("a run");
    let sample = String::from_utf8_lossy(&report.sample);
    eprintln!(
        "evaluations {:?}, bigram {}, sample {sample:?}",
        report.evals, report.bigram
    );
    assert_eq!(report.evals.len(), 3, "at steps 0, 30 and 60");
    assert!(report
        .evals
        .iter()
        .all(|&(_, t, v)| t.is_finite() && v.is_finite()));
    let (first, last) = (report.evals[0].2, report.evals[2].2);
    assert!((first - 256f32.ln()).abs() < 0.2, "initial loss {first}");
    // Past the bigram baseline takes longer; within reach of it is a model that learns.
    assert!(
        last < first - 2.5 && f64::from(last) < report.bigram + 0.3,
        "validation loss {first} -> {last}, bigram {}",
        report.bigram
    );
    assert!(report.steps_per_s > 0.0 && report.compile_s.iter().all(|&s| s >= 0.0));
    assert_eq!(report.sample.len(), PROMPT.len() + settings.sample_len);
    assert!(report.sample.starts_with(PROMPT));
}

/// The bigram baseline of a text that alternates two bytes is near zero; of one whose
/// validation part has bytes training never saw, it is the smoothed cost, ln 256 or more.
#[test]
fn the_bigram_baseline_counts_training_pairs() {
    let ab = b"ab".repeat(10_000);
    assert!(bigram_loss(&ab, &ab[..100]) < 0.03);
    assert!(bigram_loss(&ab, b"xyz") >= 256f64.ln() - 1e-9);
}

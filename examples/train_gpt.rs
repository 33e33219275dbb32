//! Trains a byte-level GPT on Shakespeare's tragedies (`data/shakespeare.txt`, 1.6 MB of
//! Project Gutenberg text) with one jitted AdamW step, and shows that it learns: training and
//! validation loss against a bigram model's on the same split, tokens per second, compile
//! time, a safetensors checkpoint, and a sample of generated text.
//!
//! The model is `benches/src/gpt.rs` at the w9 size (4 layers of width 256, 4 heads, context
//! 128, batch 8), the same code the `w9_gpt_step` benchmark times. The text is split 90/10 into
//! contiguous training and validation parts (the validation part is the end of the last
//! plays, never trained on); each step trains on random windows of the training part.
//! `tests/train_gpt.rs` runs `train` shortened, at a toy size.
//!
//! `cargo run --release --example train_gpt [-- --steps N | --quick]` (1000 steps by
//! default, about four minutes on two cores; `--quick` is 100)

// The benchmark's model; this example uses most, not all, of it.
#[allow(dead_code)]
#[path = "../benches/src/gpt.rs"]
pub mod gpt;

use ferrax::optim::{self, GradientTransformation};
use ferrax::random::{self, Key};
use ferrax::{checkpoint, jit, Compiled, DType, Tensor};
use gpt::{Config, Gpt, OptState, StepArgs};
use indicatif::{ProgressBar, ProgressStyle};
use std::time::Instant;

/// The training text, embedded so that the example runs from any directory. Its bytes are
/// the tokens.
pub const TEXT: &[u8] = include_bytes!("data/shakespeare.txt");

/// What generation starts from: a speaker's name, as the text sets it.
pub const PROMPT: &[u8] = b"Ham.\n";

/// The sampling temperature: below 1 favours likelier bytes, for fewer misspellings.
const TEMPERATURE: f64 = 0.8;

pub type Error = Box<dyn std::error::Error>;

/// What to train, for how long, and how to report it.
#[derive(Clone, Debug)]
pub struct Settings {
    pub config: Config,
    pub steps: usize,
    /// The peak learning rate, reached after `warmup` steps, then a cosine decay to a tenth.
    pub lr: f64,
    pub warmup: usize,
    /// Evaluate every this many steps (and after the last).
    pub eval_every: usize,
    /// Batches in the fixed training and validation evaluation sets.
    pub eval_batches: usize,
    /// Bytes to generate after the prompt.
    pub sample_len: usize,
    pub seed: u32,
    pub progress: bool,
}

impl Settings {
    /// The defaults: the w9 model, trained clearly past the bigram baseline in minutes.
    pub fn w9(steps: usize) -> Settings {
        Settings {
            config: Config::W9,
            steps,
            lr: 2e-3,
            warmup: 100.min(steps / 10),
            eval_every: 200,
            eval_batches: 8,
            sample_len: 200,
            seed: 0,
            progress: true,
        }
    }
}

/// The results of a run.
#[derive(Clone, Debug)]
pub struct Report {
    /// Losses on the fixed evaluation sets at each evaluation: (step, train, validation).
    pub evals: Vec<(usize, f32, f32)>,
    pub bigram: f64,
    /// Seconds to compile the step, and the loss and logits functions.
    pub compile_s: [f64; 3],
    pub steps_per_s: f64,
    pub tokens_per_s: f64,
    pub sample: Vec<u8>,
}

/// The first 90% of `text` for training and the rest for validation.
pub fn split(text: &[u8]) -> (&[u8], &[u8]) {
    text.split_at(text.len() * 9 / 10)
}

/// Token ids and next-token targets (`i32[batch, time]`) of the windows of `data` at `starts`.
fn windows(c: &Config, data: &[u8], starts: impl Iterator<Item = usize>) -> (Tensor, Tensor) {
    let (mut idx, mut tgt) = (Vec::new(), Vec::new());
    for s in starts {
        let w = &data[s..s + c.time + 1];
        idx.extend(w[..c.time].iter().map(|&b| i32::from(b)));
        tgt.extend(w[1..].iter().map(|&b| i32::from(b)));
    }
    let shape = [c.batch, c.time];
    (Tensor::from_vec(shape, idx), Tensor::from_vec(shape, tgt))
}

/// A batch of windows at random offsets of `data` drawn with `key`; `data` must be longer
/// than a window and shorter than 2^31 bytes.
pub fn random_batch(c: &Config, data: &[u8], key: &Key) -> ferrax::Result<(Tensor, Tensor)> {
    let span = (data.len() - c.time) as i64;
    let starts = random::randint(key, [c.batch], 0, span, DType::I32).to_vec::<i32>()?;
    Ok(windows(c, data, starts.into_iter().map(|s| s as usize)))
}

/// `n` batches of windows evenly spaced over `data`: a fixed evaluation set.
pub fn fixed_batches(c: &Config, data: &[u8], n: usize) -> Vec<(Tensor, Tensor)> {
    let (rows, span) = (n * c.batch, data.len() - c.time - 1);
    (0..n)
        .map(|k| {
            windows(
                c,
                data,
                (0..c.batch).map(|r| (k * c.batch + r) * span / rows),
            )
        })
        .collect()
}

/// The bigram baseline: the mean cross-entropy (nats) on `val` of predicting each byte from
/// the one before it with `train`'s byte-pair counts, add-one smoothed so that pairs unseen in
/// training cost a finite amount. What a model without context reaches.
pub fn bigram_loss(train: &[u8], val: &[u8]) -> f64 {
    let mut pairs = vec![0u32; 256 * 256];
    let mut firsts = vec![0u32; 256];
    for w in train.windows(2) {
        pairs[usize::from(w[0]) * 256 + usize::from(w[1])] += 1;
        firsts[usize::from(w[0])] += 1;
    }
    let nll = |w: &[u8]| {
        let (a, b) = (usize::from(w[0]), usize::from(w[1]));
        -((f64::from(pairs[a * 256 + b]) + 1.0) / (f64::from(firsts[a]) + 256.0)).ln()
    };
    val.windows(2).map(nll).sum::<f64>() / val.len().saturating_sub(1).max(1) as f64
}

fn scalar(t: &Tensor) -> ferrax::Result<f32> {
    Ok(t.to_vec::<f32>()?.first().copied().unwrap_or(f32::NAN))
}

type LossFn = Compiled<(Gpt, Tensor, Tensor), Tensor>;

/// The mean loss of `p` over `batches`.
fn evaluate(loss: &LossFn, p: &Gpt, batches: &[(Tensor, Tensor)]) -> ferrax::Result<f32> {
    let mut sum = 0.0;
    for (idx, tgt) in batches {
        sum += scalar(&loss.call((p.clone(), idx.clone(), tgt.clone()))?)?;
    }
    Ok(sum / batches.len().max(1) as f32)
}

/// A byte drawn with `key` from `softmax(logits / temperature)`.
fn draw(logits: &[f32], temperature: f64, key: &Key) -> ferrax::Result<u8> {
    let scaled = Tensor::from_vec([logits.len()], logits.to_vec()) / temperature;
    let byte = random::categorical(key, &scaled, -1, None).to_vec::<i32>()?;
    Ok(byte.first().map_or(0, |&b| b as u8))
}

/// `len` bytes generated after `prompt`, one at a time. The model sees a fixed window of
/// `c.time` bytes: the text so far left-aligned (padded after it with spaces, which causal
/// attention never lets the last real position see), or its last `c.time` bytes once longer.
pub fn sample(
    logits: &Compiled<(Gpt, Tensor), Tensor>,
    c: &Config,
    p: &Gpt,
    prompt: &[u8],
    len: usize,
    key: &Key,
) -> ferrax::Result<Vec<u8>> {
    let mut text = prompt.to_vec();
    for i in 0..len {
        let window = &text[text.len().saturating_sub(c.time)..];
        let mut ids: Vec<i32> = window.iter().map(|&b| i32::from(b)).collect();
        let last = ids.len().saturating_sub(1);
        ids.resize(c.time, i32::from(b' '));
        let out = logits.call((p.clone(), Tensor::from_vec([1, c.time], ids)))?;
        let row = out.to_vec::<f32>()?;
        let v = c.vocab;
        let key = random::fold_in(key, i as f64);
        text.push(draw(&row[last * v..(last + 1) * v], TEMPERATURE, &key)?);
    }
    Ok(text)
}

/// Trains on `text` as `s` says, printing progress and evaluations; the final parameters,
/// optimizer state and report.
pub fn train(text: &[u8], s: &Settings) -> Result<(Gpt, OptState, Report), Error> {
    let c = s.config;
    let (train_text, val_text) = split(text);
    if c.vocab != 256 {
        return Err(format!("the tokens are bytes: vocabulary 256, not {}", c.vocab).into());
    }
    if val_text.len() <= c.time + 1 {
        return Err(format!(
            "{} bytes of text is too few for context {}",
            text.len(),
            c.time
        )
        .into());
    }
    if s.eval_every == 0 {
        return Err("eval_every must be at least 1".into());
    }
    let bigram = bigram_loss(train_text, val_text);
    let (train_set, val_set) = (
        fixed_batches(&c, train_text, s.eval_batches),
        fixed_batches(&c, val_text, s.eval_batches),
    );
    println!(
        "text: {} bytes, {} for training and {} for validation; bigram baseline {bigram:.4}",
        text.len(),
        train_text.len(),
        val_text.len()
    );

    let steps = u32::try_from(s.steps)?;
    let schedule = optim::warmup_cosine_decay_schedule(
        0.0,
        s.lr,
        u32::try_from(s.warmup)?,
        steps,
        s.lr / 10.0,
        1.0,
    );
    let opt = gpt::optimizer(schedule);
    let (init_key, batch_key, sample_key) = {
        let keys = random::split(&random::key(s.seed), 3);
        (keys.get(0), keys.get(1), keys.get(2))
    };
    let params = gpt::init(&c, &init_key);
    let state = opt.init(&params);
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

    // The three programs, compiled up front so that their compile times are on record.
    let tokens = Tensor::spec(DType::I32, [c.batch, c.time]);
    let heads = c.heads;
    let start = Instant::now();
    let step = jit(gpt::train_step(c, opt))
        .lower(&(
            params.clone(),
            state.clone(),
            tokens.clone(),
            tokens.clone(),
        ))?
        .compile();
    let step_s = start.elapsed().as_secs_f64();
    let start = Instant::now();
    let loss = jit(move |(p, idx, tgt): (Gpt, Tensor, Tensor)| gpt::loss(&p, &idx, &tgt, heads))
        .lower(&(params.clone(), tokens.clone(), tokens))?
        .compile();
    let loss_s = start.elapsed().as_secs_f64();
    let start = Instant::now();
    let logits = jit(move |(p, idx): (Gpt, Tensor)| gpt::logits(&p, &idx, heads))
        .lower(&(params.clone(), Tensor::spec(DType::I32, [1, c.time])))?
        .compile();
    let logits_s = start.elapsed().as_secs_f64();
    println!("compile: step {step_s:.2} s, loss {loss_s:.2} s, logits {logits_s:.2} s");

    let bar = if s.progress {
        ProgressBar::new(s.steps as u64)
    } else {
        ProgressBar::hidden()
    };
    let style =
        ProgressStyle::with_template("{elapsed_precise} [{bar:30}] step {pos}/{len} {msg}")?;
    bar.set_style(style.progress_chars("=> "));
    let (mut p, mut st) = (params, state);
    let mut evals = Vec::new();
    let mut train_time = 0.0;
    let eval = |k: usize, p: &Gpt| -> ferrax::Result<(usize, f32, f32)> {
        let (t, v) = (
            evaluate(&loss, p, &train_set)?,
            evaluate(&loss, p, &val_set)?,
        );
        bar.suspend(|| println!("step {k:5}: train loss {t:.4}, validation loss {v:.4}"));
        Ok((k, t, v))
    };
    evals.push(eval(0, &p)?);
    for k in 1..=s.steps {
        let (idx, tgt) = random_batch(&c, train_text, &random::fold_in(&batch_key, k as f64))?;
        let args: StepArgs = (p, st, idx, tgt);
        let start = Instant::now();
        let (l, np, ns) = step.call(args)?;
        (p, st) = (np, ns);
        let l = scalar(&l)?;
        train_time += start.elapsed().as_secs_f64();
        bar.inc(1);
        let rate = k as f64 * (c.batch * c.time) as f64 / train_time;
        bar.set_message(format!("loss {l:.3}, {rate:.0} tokens/s"));
        if k % s.eval_every == 0 || k == s.steps {
            evals.push(eval(k, &p)?);
        }
    }
    bar.finish_and_clear();
    let steps_per_s = s.steps as f64 / train_time;
    let sample = sample(&logits, &c, &p, PROMPT, s.sample_len, &sample_key)?;
    let report = Report {
        evals,
        bigram,
        compile_s: [step_s, loss_s, logits_s],
        steps_per_s,
        tokens_per_s: steps_per_s * (c.batch * c.time) as f64,
        sample,
    };
    Ok((p, st, report))
}

/// `--steps N` or `--quick` (100 steps); 1000 steps by default.
fn parse_steps() -> Result<usize, Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        [] => Ok(1000),
        ["--quick"] => Ok(100),
        ["--steps", n] if n.parse::<usize>().is_ok_and(|n| n > 0) => Ok(n.parse()?),
        _ => Err(format!("usage: train_gpt [--steps N | --quick], not {args:?}").into()),
    }
}

fn main() -> Result<(), Error> {
    let settings = Settings::w9(parse_steps()?);
    let run = Instant::now();
    let (p, s, report) = train(TEXT, &settings)?;
    let c = settings.config;
    let &(_, train_loss, val_loss) = report.evals.last().ok_or("no evaluation")?;
    println!(
        "{} steps: {:.2} steps/s, {:.0} tokens/s, {:.1} GFLOP/s",
        settings.steps,
        report.steps_per_s,
        report.tokens_per_s,
        report.steps_per_s * c.flops() / 1e9
    );
    println!(
        "final loss: train {train_loss:.4}, validation {val_loss:.4}; bigram baseline {:.4}: \
         validation is {}",
        report.bigram,
        if f64::from(val_loss) < report.bigram {
            "below it"
        } else {
            "not yet below it"
        }
    );

    let path = std::env::temp_dir().join("ferrax_train_gpt.safetensors");
    checkpoint::save_safetensors(&path, &(p.clone(), s.clone()))?;
    let (reloaded, _) = checkpoint::load_safetensors(&path, &(p.clone(), s))?;
    let (idx, tgt) = fixed_batches(&c, split(TEXT).1, 1).remove(0);
    let before = scalar(&gpt::loss(&p, &idx, &tgt, c.heads))?;
    let after = scalar(&gpt::loss(&reloaded, &idx, &tgt, c.heads))?;
    println!(
        "checkpoint: {} ({} bytes); validation batch loss {before:.4}, reloaded {after:.4}",
        path.display(),
        std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0)
    );
    println!(
        "sample:\n{}\n\ntotal {:.0} s",
        String::from_utf8_lossy(&report.sample),
        run.elapsed().as_secs_f64()
    );
    Ok(())
}

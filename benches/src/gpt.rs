//! The w9 GPT of `../shared/bench/workloads.md`, written the way a user writes it: parameters
//! as a derived `Tree`, layers from `ferrax::nn`, AdamW from `ferrax::optim`. One model for
//! three users, so that what is benchmarked is what trains: the `w9_*` rows of ferrax-bench,
//! `examples/train_gpt.rs` and `tests/gpt.rs` (the last two include this file by `#[path]`).
//!
//! It follows `jax_reference.py`'s `gpt_init`, `gpt_loss` and `adamw_step`: embeddings plus
//! learned positions, pre-LayerNorm (eps 1e-5) blocks of causal attention and a tanh-GELU MLP,
//! a final LayerNorm, an untied head without bias, mean cross-entropy; matrices and embeddings
//! N(0, 0.02), biases 0, gains 1; AdamW with weight decay on matrices only. JAX passes the
//! step number in as `t`; here it is the optimizer state's `count`, the same bias correction.

use ferrax::nn::{self, initializers, Attention, Linear};
use ferrax::optim::{self, AdamW, GradientTransformation, LearningRate, Mask};
use ferrax::random::{self, Key};
use ferrax::{value_and_grad, DType, DotPrecision, Tensor, Tree};

/// The model and batch sizes (`gpt_config` in `jax_reference.py`).
#[derive(Clone, Copy, Debug)]
pub struct Config {
    pub vocab: usize,
    pub time: usize,
    pub width: usize,
    pub heads: usize,
    pub layers: usize,
    pub batch: usize,
}

impl Config {
    /// `gpt_config(False)`: the CPU size of w9.
    pub const W9: Config = Config {
        vocab: 256,
        time: 128,
        width: 256,
        heads: 4,
        layers: 4,
        batch: 8,
    };

    /// `gpt_config(True)`: GPT-2 124M at w10's size (the GPU's).
    pub const W10: Config = Config {
        vocab: 50304,
        time: 1024,
        width: 768,
        heads: 12,
        layers: 12,
        batch: 8,
    };

    /// Floating-point operations of one step, as `gpt_flops` counts them: six per weight and
    /// token, plus attention scores and mixing.
    pub fn flops(&self) -> f64 {
        let (v, t, d, l, b) = (
            self.vocab as f64,
            self.time as f64,
            self.width as f64,
            self.layers as f64,
            self.batch as f64,
        );
        let per_token = 6.0 * (l * 12.0 * d * d + d * v) + 6.0 * l * 2.0 * t * d;
        per_token * b * t
    }
}

#[derive(Tree, Clone)]
pub struct Block {
    pub ln1: (Tensor, Tensor),
    pub attn: Attention,
    pub ln2: (Tensor, Tensor),
    pub fc: Linear,
    pub proj: Linear,
}

#[derive(Tree, Clone)]
pub struct Gpt {
    pub wte: Tensor,
    pub wpe: Tensor,
    pub blocks: Vec<Block>,
    pub lnf: (Tensor, Tensor),
    pub head: Linear,
}

/// `gpt_init`: matrices and embeddings N(0, 0.02) (a key each, split off `key` in turn),
/// biases 0, LayerNorm gains 1.
pub fn init(c: &Config, key: &Key) -> Gpt {
    let (f, d) = (DType::F32, c.width);
    let mut key = key.clone();
    let mut n = |shape: [usize; 2]| {
        let (rest, sub) = random::split2(&key);
        key = rest;
        initializers::normal(0.02).init(&sub, shape.to_vec(), f)
    };
    let dense = |w: Tensor| {
        let out = w.shape()[1];
        Linear {
            w,
            b: Some(Tensor::zeros(f, [out])),
        }
    };
    let ln = || (Tensor::ones(f, [d]), Tensor::zeros(f, [d]));
    Gpt {
        wte: n([c.vocab, d]),
        wpe: n([c.time, d]),
        blocks: (0..c.layers)
            .map(|_| Block {
                ln1: ln(),
                attn: Attention {
                    qkv: dense(n([d, 3 * d])),
                    proj: dense(n([d, d])),
                },
                ln2: ln(),
                fc: dense(n([d, 4 * d])),
                proj: dense(n([4 * d, d])),
            })
            .collect(),
        lnf: ln(),
        head: Linear {
            w: n([d, c.vocab]),
            b: None,
        },
    }
}

/// Next-token logits `[B, T, V]` for token ids `idx` (`i32[B, T]`).
pub fn logits(p: &Gpt, idx: &Tensor, heads: usize) -> Tensor {
    let time = idx.shape().get(1).copied().unwrap_or(0);
    let positions = p.wpe.slice(&[0, 0], &[time, p.wpe.shape()[1]]);
    let mut x = nn::embedding(&p.wte, idx) + positions;
    for b in &p.blocks {
        let a = nn::layer_norm(&x, &b.ln1.0, &b.ln1.1, 1e-5);
        x = &x + nn::causal_self_attention(&a, &b.attn, heads);
        let h = nn::linear(&nn::layer_norm(&x, &b.ln2.0, &b.ln2.1, 1e-5), &b.fc);
        x = &x + nn::linear(&nn::gelu(&h, true), &b.proj);
    }
    nn::linear(&nn::layer_norm(&x, &p.lnf.0, &p.lnf.1, 1e-5), &p.head)
}

/// Mean cross-entropy of the logits of `idx` against the targets `tgt` (`gpt_loss`).
pub fn loss(p: &Gpt, idx: &Tensor, tgt: &Tensor, heads: usize) -> Tensor {
    nn::softmax_cross_entropy_with_integer_labels(&logits(p, idx, heads), tgt).mean(..)
}

/// `adamw_step`'s AdamW at learning rate `lr` (w9 uses 3e-4; `train_gpt` a schedule): betas
/// 0.9 and 0.95, eps 1e-8, weight decay 0.1 on the leaves of two or more dimensions.
pub fn optimizer(lr: impl Into<LearningRate>) -> AdamW {
    optim::adamw(
        lr,
        0.9,
        0.95,
        1e-8,
        0.1,
        Mask::by_leaf(|_, w| w.ndim() >= 2),
    )
}

/// The optimizer state: AdamW's chain of states, `mu` and `nu` shaped like a [`Gpt`].
pub type OptState = <AdamW as GradientTransformation<Gpt>>::State;

/// The inputs of one step: parameters, optimizer state, token ids and targets.
pub type StepArgs = (Gpt, OptState, Tensor, Tensor);

/// One training step `(params, opt_state, idx, tgt) -> (loss, params, opt_state)`, to `jit`.
pub fn train_step(
    c: Config,
    opt: AdamW,
) -> impl Fn(StepArgs) -> (Tensor, Gpt, OptState) + Send + Sync {
    move |(p, s, idx, tgt): StepArgs| {
        let f = |(p, idx, tgt): (Gpt, Tensor, Tensor)| loss(&p, &idx, &tgt, c.heads);
        let (l, (g, _, _)) = value_and_grad(f)((p.clone(), idx, tgt));
        let (updates, s) = opt.update(&g, &s, &p);
        (l, optim::apply_updates(&p, &updates), s)
    }
}

/// [`logits`] with every matrix product at `precision`, its result converted back to f32:
/// `DotPrecision::new(DType::BF16, DType::BF16)` is `gpt_loss(..., cdt=jnp.bfloat16)`'s
/// `mm` (operands rounded to bf16, each product summed in f32 and rounded to bf16, then
/// widened); LayerNorm statistics, softmax and the loss stay in f32.
pub fn logits_with(p: &Gpt, idx: &Tensor, heads: usize, precision: DotPrecision) -> Tensor {
    let time = idx.shape().get(1).copied().unwrap_or(0);
    let positions = p.wpe.slice(&[0, 0], &[time, p.wpe.shape()[1]]);
    let mut x = nn::embedding(&p.wte, idx) + positions;
    for b in &p.blocks {
        let a = nn::layer_norm(&x, &b.ln1.0, &b.ln1.1, 1e-5);
        x = &x + nn::causal_self_attention_with(&a, &b.attn, heads, precision);
        let a = nn::layer_norm(&x, &b.ln2.0, &b.ln2.1, 1e-5);
        let h = nn::linear_with(&a, &b.fc, precision);
        x = &x + nn::linear_with(&nn::gelu(&h, true), &b.proj, precision);
    }
    let a = nn::layer_norm(&x, &p.lnf.0, &p.lnf.1, 1e-5);
    nn::linear_with(&a, &p.head, precision)
}

/// [`train_step`] with the model's matrix products at `precision` ([`logits_with`]); the
/// parameters, gradients and optimizer stay f32.
pub fn train_step_with(
    c: Config,
    opt: AdamW,
    precision: DotPrecision,
) -> impl Fn(StepArgs) -> (Tensor, Gpt, OptState) + Send + Sync {
    move |(p, s, idx, tgt): StepArgs| {
        let f = |(p, idx, tgt): (Gpt, Tensor, Tensor)| {
            let logits = logits_with(&p, &idx, c.heads, precision);
            nn::softmax_cross_entropy_with_integer_labels(&logits, &tgt).mean(..)
        };
        let (l, (g, _, _)) = value_and_grad(f)((p.clone(), idx, tgt));
        let (updates, s) = opt.update(&g, &s, &p);
        (l, optim::apply_updates(&p, &updates), s)
    }
}

/// A deterministic synthetic corpus: a sentence's bytes (below `vocab`) repeated. Its
/// structure (a few dozen distinct bytes in a fixed order) is learnable in a few dozen steps.
#[allow(
    dead_code,
    reason = "the example and the test train on it; the benchmark times uniform tokens, as JAX's does"
)]
pub fn corpus(vocab: usize, len: usize) -> Vec<i32> {
    let text = b"the quick brown fox jumps over the lazy dog, then naps in the sun. ";
    text.iter()
        .cycle()
        .take(len)
        .map(|&b| (b as usize % vocab) as i32)
        .collect()
}

/// Batch `step` of `corpus`: `c.batch` windows of `c.time + 1` tokens at offsets that move
/// with the step and row; token ids and the targets one position later.
#[allow(dead_code, reason = "as for `corpus`")]
pub fn batch(c: &Config, corpus: &[i32], step: usize) -> (Tensor, Tensor) {
    let span = corpus.len().saturating_sub(c.time + 1).max(1);
    let (mut idx, mut tgt) = (Vec::new(), Vec::new());
    for row in 0..c.batch {
        let start = (step * c.batch + row).wrapping_mul(7919) % span;
        let window = &corpus[start..(start + c.time + 1).min(corpus.len())];
        let window: Vec<i32> = window.iter().copied().cycle().take(c.time + 1).collect();
        idx.extend_from_slice(&window[..c.time]);
        tgt.extend_from_slice(&window[1..]);
    }
    (
        Tensor::from_vec([c.batch, c.time], idx),
        Tensor::from_vec([c.batch, c.time], tgt),
    )
}

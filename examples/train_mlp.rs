//! Trains a 64-128-10 MLP on the 8x8 handwritten digits with `jit` of a `value_and_grad` step
//! (SGD with momentum, from `ferrax::optim`), then reports test accuracy, compile time and
//! steps per second: the README's second command, seconds where `train_gpt` takes minutes.
//!
//! `cargo run --release --example train_mlp [-- EPOCHS]`

use ferrax::optim::{self, GradientTransformation};
use ferrax::{jit, nn, random, value_and_grad, DType, Device, Tensor, Tree};
use std::time::Instant;

#[derive(Tree, Clone)]
pub struct Layer {
    w: Tensor,
    b: Tensor,
}

#[derive(Tree, Clone)]
pub struct Mlp {
    hidden: Layer,
    out: Layer,
}

const PIXELS: usize = 64;
const CLASSES: usize = 10;
const HIDDEN: usize = 128;
const BATCH: usize = 64;
const LEARNING_RATE: f64 = 0.05;
const MOMENTUM: f64 = 0.9;

/// Images scaled to [0, 1] and labels, in file order.
pub struct Digits {
    images: Vec<f32>,
    labels: Vec<usize>,
}

impl Digits {
    pub fn load() -> Digits {
        let (mut images, mut labels) = (Vec::new(), Vec::new());
        for line in include_str!("data/digits.txt").lines() {
            let (label, pixels) = line.split_once(' ').unwrap_or(("0", ""));
            labels.push(label.parse().unwrap_or(0));
            images.extend(
                pixels
                    .chars()
                    .map(|c| c.to_digit(17).unwrap_or(0) as f32 / 16.0),
            );
        }
        Digits { images, labels }
    }

    fn len(&self) -> usize {
        self.labels.len()
    }

    /// The images and one-hot labels of `rows`.
    fn batch(&self, rows: &[usize]) -> (Tensor, Tensor) {
        let mut x = Vec::with_capacity(rows.len() * PIXELS);
        let mut y = vec![0.0f32; rows.len() * CLASSES];
        for (k, &r) in rows.iter().enumerate() {
            x.extend_from_slice(&self.images[r * PIXELS..(r + 1) * PIXELS]);
            y[k * CLASSES + self.labels[r]] = 1.0;
        }
        (
            Tensor::from_vec([rows.len(), PIXELS], x),
            Tensor::from_vec([rows.len(), CLASSES], y),
        )
    }
}

/// A dense layer initialised as `jax.nn.initializers.he_normal` does (a truncated normal of
/// variance `2 / fan_in`), biases zero.
fn layer(key: &random::Key, fan_in: usize, fan_out: usize) -> Layer {
    Layer {
        w: nn::initializers::he_normal().init(key, [fan_in, fan_out], DType::F32),
        b: Tensor::zeros(DType::F32, [fan_out]),
    }
}

/// `rows` in the random order `random::permutation` draws from `key`.
fn shuffled(key: &random::Key, rows: &[usize]) -> ferrax::Result<Vec<usize>> {
    let order = random::permutation(key, rows.len()).to_vec::<i32>()?;
    Ok(order.into_iter().map(|i| rows[i as usize]).collect())
}

fn forward(p: &Mlp, x: &Tensor) -> Tensor {
    let h = nn::relu(&(x.matmul(&p.hidden.w) + &p.hidden.b));
    h.matmul(&p.out.w) + &p.out.b
}

fn loss((p, x, y): (Mlp, Tensor, Tensor)) -> Tensor {
    -(nn::log_softmax(&forward(&p, &x), -1) * y).sum(-1).mean(..)
}

/// Momentum SGD (optax's `sgd(lr, momentum)`): `v = g + momentum * v; p -= lr * v`.
fn optimizer() -> optim::Sgd {
    optim::sgd_momentum(LEARNING_RATE, MOMENTUM, false)
}

/// The optimizer's state: the velocities, shaped like the parameters, and a step count.
type OptState = <optim::Sgd as GradientTransformation<Mlp>>::State;

/// One training step: the loss, and the updated parameters and optimizer state.
fn step((p, s, x, y): (Mlp, OptState, Tensor, Tensor)) -> (Tensor, Mlp, OptState) {
    let (value, (g, _, _)) = value_and_grad(loss)((p.clone(), x, y));
    let (updates, s) = optimizer().update(&g, &s, &p);
    (value, optim::apply_updates(&p, &updates), s)
}

pub struct Report {
    pub test_accuracy: f64,
    pub final_loss: f32,
    pub compile_seconds: f64,
    pub steps_per_second: f64,
}

/// Every leaf of `tree` copied to `device`.
fn to_device<T: Tree>(tree: T, device: &Device) -> ferrax::Result<T> {
    let (leaves, def) = ferrax::tree_flatten(&tree);
    let moved = leaves
        .iter()
        .map(|t| t.to_device(device))
        .collect::<ferrax::Result<Vec<_>>>()?;
    ferrax::tree_unflatten(&def, moved)
}

/// Trains for `epochs` over 80% of the digits and evaluates on the other 20%; parameters live
/// on `device`, so `jit` runs the training step there.
pub fn train(epochs: usize, verbose: bool, device: &Device) -> ferrax::Result<Report> {
    let data = Digits::load();
    let keys = random::split(&random::key(0x5EED_F00D), 4);
    let all: Vec<usize> = (0..data.len()).collect();
    let order = shuffled(&keys.get(0), &all)?;
    let (train_rows, test_rows) = order.split_at(data.len() * 4 / 5);
    let params = Mlp {
        hidden: layer(&keys.get(1), PIXELS, HIDDEN),
        out: layer(&keys.get(2), HIDDEN, CLASSES),
    };
    let epoch_key = keys.get(3);
    let state = optimizer().init(&params);

    let (mut params, mut state) = (to_device(params, device)?, to_device(state, device)?);
    let step = jit(step).named("train_step");
    let (x0, y0) = data.batch(&train_rows[..BATCH]);
    let start = Instant::now();
    step.lower(&(params.clone(), state.clone(), x0, y0))?;
    let compile_seconds = start.elapsed().as_secs_f64();

    let batches = train_rows.len() / BATCH;
    let (mut steps, mut final_loss) = (0usize, f32::NAN);
    let start = Instant::now();
    for epoch in 1..=epochs {
        let rows = shuffled(&random::fold_in(&epoch_key, epoch as u32), train_rows)?;
        let mut total = 0.0;
        for b in 0..batches {
            let (x, y) = data.batch(&rows[b * BATCH..(b + 1) * BATCH]);
            let (value, p, s) = step.call((params, state, x, y))?;
            (params, state) = (p, s);
            total += value.to_vec::<f32>()?[0];
            steps += 1;
        }
        final_loss = total / batches as f32;
        if verbose {
            let done = epoch * 30 / epochs;
            let bar = format!("{}{}", "#".repeat(done), ".".repeat(30 - done));
            println!("epoch {epoch:3}/{epochs} [{bar}] loss {final_loss:.4}");
        }
    }
    let steps_per_second = steps as f64 / start.elapsed().as_secs_f64();

    let (x, _) = data.batch(test_rows);
    let logits = jit(|(p, x): (Mlp, Tensor)| forward(&p, &x))
        .call((params, x))?
        .to_vec::<f32>()?;
    let correct = logits
        .chunks(CLASSES)
        .zip(test_rows)
        .filter(|(row, &r)| {
            let best = (0..CLASSES)
                .max_by(|&a, &b| row[a].total_cmp(&row[b]))
                .unwrap_or(0);
            best == data.labels[r]
        })
        .count();
    Ok(Report {
        test_accuracy: correct as f64 / test_rows.len() as f64,
        final_loss,
        compile_seconds,
        steps_per_second,
    })
}

/// `train_mlp [EPOCHS] [--device cpu|cuda]`
fn main() -> ferrax::Result<()> {
    let mut epochs = 30;
    let mut device = Device::Cpu;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--device" => {
                device = match args.next().as_deref() {
                    Some("cuda") => Device::cuda(0)?,
                    _ => Device::Cpu,
                }
            }
            n => epochs = n.parse().unwrap_or(epochs),
        }
    }
    println!("device: {device:?}");
    let report = train(epochs, true, &device)?;
    println!("final training loss {:.4}", report.final_loss);
    println!("test accuracy {:.2}%", report.test_accuracy * 100.0);
    println!(
        "compile time {:.1} ms (trace, differentiate, simplify, code generation)",
        report.compile_seconds * 1e3
    );
    println!("{:.0} steps/s", report.steps_per_second);
    Ok(())
}

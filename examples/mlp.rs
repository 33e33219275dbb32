//! Traces a 3-layer MLP's loss, prints its IR, and runs it with `jit` on a batch of data.
//!
//! `cargo run --release --example mlp`

use ferrax::{jit, nn, trace, DType, Tensor, Tree};

#[derive(Tree, Clone)]
struct Layer {
    w: Tensor,
    b: Tensor,
}

#[derive(Tree, Clone)]
struct Mlp {
    layers: Vec<Layer>,
}

fn forward(p: &Mlp, x: &Tensor) -> Tensor {
    let mut h = x.clone();
    for (i, layer) in p.layers.iter().enumerate() {
        h = h.matmul(&layer.w) + &layer.b;
        if i + 1 < p.layers.len() {
            h = nn::relu(&h);
        }
    }
    h
}

/// Mean softmax cross-entropy against one-hot labels.
fn loss(p: &Mlp, x: &Tensor, y: &Tensor) -> Tensor {
    -(nn::log_softmax(&forward(p, x), -1) * y).sum(-1).mean(..)
}

/// Deterministic pseudo-random values in [-scale, scale] (a small LCG; no dependencies).
fn uniform(shape: [usize; 2], seed: u64, scale: f32) -> Tensor {
    let mut state = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let data = (0..shape[0] * shape[1])
        .map(|_| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((state >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * scale
        })
        .collect();
    Tensor::from_vec(shape, data)
}

fn main() -> ferrax::Result<()> {
    let sizes = [64, 128, 128, 10];
    let batch = 256;
    let params = Mlp {
        layers: sizes
            .windows(2)
            .enumerate()
            .map(|(i, w)| Layer {
                w: uniform([w[0], w[1]], i as u64, (1.0 / w[0] as f32).sqrt()),
                b: Tensor::zeros(DType::F32, [w[1]]),
            })
            .collect(),
    };
    let x = uniform([batch, sizes[0]], 99, 1.0);
    let labels: Vec<f32> = (0..batch * 10)
        .map(|i| if i % 10 == (i / 10) % 10 { 1.0 } else { 0.0 })
        .collect();
    let y = Tensor::from_vec([batch, 10], labels);

    let ir = trace(
        |(p, x, y): (Mlp, Tensor, Tensor)| loss(&p, &x, &y),
        &(params.clone(), x.clone(), y.clone()),
    )?;
    println!("{ir}");

    let step = jit(|(p, x, y): (Mlp, Tensor, Tensor)| loss(&p, &x, &y));
    let start = std::time::Instant::now();
    let value = step.call((params.clone(), x.clone(), y.clone()))?;
    let first = start.elapsed();
    let start = std::time::Instant::now();
    let again = step.call((params, x, y))?;
    let second = start.elapsed();
    println!(
        "loss = {:.6} (first call {:.1} ms incl. tracing, cached call {:.1} ms, traced {} time)",
        value.to_vec::<f32>()?[0],
        first.as_secs_f64() * 1e3,
        second.as_secs_f64() * 1e3,
        step.trace_count()
    );
    assert_eq!(value.to_vec::<f32>()?, again.to_vec::<f32>()?);
    Ok(())
}

//! Trains a 64-128-10 MLP on the 8x8 handwritten digits from artifacts compiled at build time
//! (`build.rs`) and embedded in this binary. Its only ferrax dependency is
//! `ferrax-aot-runtime`: no compiler ships in it, and the first training step runs as soon as
//! the data is loaded.
//!
//! `cargo run --release -p ferrax-example-embedded [-- EPOCHS]`

use ferrax_aot_runtime::{Array, Artifact, DType};
use std::error::Error;
use std::process::ExitCode;
use std::time::{Duration, Instant};

static TRAIN_STEP: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/train_step.fxa"));
static PREDICT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/predict.fxa"));

const PIXELS: usize = 64;
const CLASSES: usize = 10;

/// Images scaled to [0, 1] and labels, in file order.
struct Digits {
    images: Vec<f32>,
    labels: Vec<usize>,
}

impl Digits {
    fn load() -> Digits {
        let (mut images, mut labels) = (Vec::new(), Vec::new());
        for line in include_str!("../../data/digits.txt").lines() {
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

    /// The images and one-hot labels of `rows`.
    fn batch(&self, rows: &[usize]) -> Result<(Array, Array), Box<dyn Error>> {
        let mut x = Vec::with_capacity(rows.len() * PIXELS);
        let mut y = vec![0.0f32; rows.len() * CLASSES];
        for (k, &r) in rows.iter().enumerate() {
            x.extend_from_slice(&self.images[r * PIXELS..(r + 1) * PIXELS]);
            y[k * CLASSES + self.labels[r]] = 1.0;
        }
        Ok((
            Array::from_vec([rows.len(), PIXELS], x)?,
            Array::from_vec([rows.len(), CLASSES], y)?,
        ))
    }
}

/// A small deterministic generator (xorshift) for initialisation and shuffling.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// Approximately standard normal (sum of 12 uniforms).
    fn normal(&mut self) -> f32 {
        (0..12)
            .map(|_| (self.next() >> 11) as f32 / (1u64 << 53) as f32)
            .sum::<f32>()
            - 6.0
    }

    fn shuffle(&mut self, v: &mut [usize]) {
        for i in (1..v.len()).rev() {
            v.swap(i, (self.next() % (i as u64 + 1)) as usize);
        }
    }
}

/// What a run reports.
struct Report {
    /// From the start of `main` to the first step's loss, data loading excluded.
    first_step: Duration,
    loading_data: Duration,
    first_loss: f32,
    final_loss: f32,
    steps_per_second: f64,
    test_accuracy: f64,
}

/// The step's inputs before training, found by their paths: weights (`0.*.w`) drawn with He
/// scaling, everything else (biases, the optimizer's state) zero.
fn initial_state(step: &Artifact, rng: &mut Rng) -> Result<Vec<Array>, Box<dyn Error>> {
    let carried = step.inputs().count().saturating_sub(2);
    step.inputs()
        .take(carried)
        .map(|(path, ty)| {
            let dims = ty.dims();
            if path.starts_with("0.") && path.ends_with(".w") && ty.dtype == DType::F32 {
                let scale = (2.0 / dims[0] as f32).sqrt();
                let w = (0..ty.numel()).map(|_| rng.normal() * scale).collect();
                Ok(Array::from_vec(dims.to_vec(), w)?)
            } else {
                Ok(Array::zeros(ty.dtype, dims.to_vec()))
            }
        })
        .collect()
}

fn train(epochs: usize) -> Result<Report, Box<dyn Error>> {
    let start = Instant::now();
    let data = Digits::load();
    let loading_data = start.elapsed();
    let step = Artifact::load(TRAIN_STEP)?;
    let predict = Artifact::load(PREDICT)?;
    let batch = step
        .inputs()
        .last()
        .map_or(0, |(_, ty)| ty.dims().first().copied().unwrap_or(0));
    let mut rng = Rng(0x5EED_F00D);
    let mut order: Vec<usize> = (0..data.labels.len()).collect();
    rng.shuffle(&mut order);
    let (train_rows, test_rows) = order.split_at(data.labels.len() * 4 / 5);
    let mut state = initial_state(&step, &mut rng)?;

    let mut rows = train_rows.to_vec();
    let batches = rows.len() / batch.max(1);
    let (mut first_step, mut first_loss, mut final_loss) = (None, f32::NAN, f32::NAN);
    let mut steps = 0usize;
    let training = Instant::now();
    for _ in 0..epochs {
        rng.shuffle(&mut rows);
        let mut total = 0.0;
        for b in 0..batches {
            let (x, y) = data.batch(&rows[b * batch..(b + 1) * batch])?;
            state.extend([x, y]);
            let mut outputs = step.call(std::mem::take(&mut state))?.into_iter();
            let loss = outputs
                .next()
                .ok_or("the step returned no loss")?
                .item::<f32>()?;
            state = outputs.collect();
            if first_step.is_none() {
                first_step = Some(start.elapsed() - loading_data);
                first_loss = loss;
            }
            total += loss;
            steps += 1;
        }
        final_loss = total / batches as f32;
    }
    let steps_per_second = steps as f64 / training.elapsed().as_secs_f64();

    // The parameters are the state's leaves the evaluation takes first.
    let params = predict.inputs().count().saturating_sub(1);
    let (x, _) = data.batch(test_rows)?;
    let mut inputs: Vec<Array> = state.into_iter().take(params).collect();
    inputs.push(x);
    let logits = predict.call(inputs)?;
    let logits = logits.first().ok_or("no logits")?.to_vec::<f32>()?;
    let correct = logits
        .chunks(CLASSES)
        .zip(test_rows)
        .filter(|(row, &r)| {
            let best = (0..CLASSES).fold(0, |b, c| if row[c] > row[b] { c } else { b });
            best == data.labels[r]
        })
        .count();
    Ok(Report {
        first_step: first_step.unwrap_or_default(),
        loading_data,
        first_loss,
        final_loss,
        steps_per_second,
        test_accuracy: correct as f64 / test_rows.len() as f64,
    })
}

fn main() -> ExitCode {
    let epochs = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(10);
    match train(epochs) {
        Ok(r) => {
            println!(
                "first step {:.2} ms after start (data loading {:.2} ms more)",
                r.first_step.as_secs_f64() * 1e3,
                r.loading_data.as_secs_f64() * 1e3
            );
            println!(
                "loss {:.4} -> {:.4} over {epochs} epochs, {:.0} steps/s, test accuracy {:.1}%",
                r.first_loss,
                r.final_loss,
                r.steps_per_second,
                r.test_accuracy * 100.0
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("embedded: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The embedded step trains: the loss falls and the held-out digits are mostly right.
    #[test]
    fn the_embedded_step_trains() {
        let r = train(3).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            r.final_loss < r.first_loss * 0.3,
            "{} -> {}",
            r.first_loss,
            r.final_loss
        );
        assert!(r.test_accuracy > 0.9, "accuracy {}", r.test_accuracy);
    }
}

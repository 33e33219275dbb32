//! Compiles the training step and the evaluation of a 64-128-10 MLP on the 8x8 digits ahead of
//! time, at build time and in parallel (`ferrax::Batch`), into artifacts that `src/main.rs`
//! embeds: the shipped binary starts training with no compiler in it.

use ferrax::optim::{self, GradientTransformation};
use ferrax::{jit, nn, value_and_grad, Batch, DType, Tensor};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

/// Parameters by name (a map, so that the artifact names each leaf: `0.hidden.w`, ...).
type Params = BTreeMap<String, Tensor>;

const PIXELS: usize = 64;
const HIDDEN: usize = 128;
const CLASSES: usize = 10;
/// Rows per training step, and of the evaluation (the 20% of the 1,797 digits held out).
const BATCH: usize = 64;
const TEST_ROWS: usize = 360;

fn forward(p: &Params, x: &Tensor) -> Tensor {
    let h = nn::relu(&(x.matmul(&p["hidden.w"]) + &p["hidden.b"]));
    h.matmul(&p["out.w"]) + &p["out.b"]
}

fn loss((p, x, y): (Params, Tensor, Tensor)) -> Tensor {
    -(nn::log_softmax(&forward(&p, &x), -1) * y).sum(-1).mean(..)
}

/// Momentum SGD (optax's `sgd(0.05, momentum=0.9)`).
fn optimizer() -> optim::Sgd {
    optim::sgd_momentum(0.05, 0.9, false)
}

type OptState = <optim::Sgd as GradientTransformation<Params>>::State;

/// One training step: the loss, and the updated parameters and optimizer state.
fn step((p, s, x, y): (Params, OptState, Tensor, Tensor)) -> (Tensor, Params, OptState) {
    let (value, (g, _, _)) = value_and_grad(loss)((p.clone(), x, y));
    let (updates, s) = optimizer().update(&g, &s, &p);
    (value, optim::apply_updates(&p, &updates), s)
}

fn params() -> Params {
    [
        ("hidden.w", vec![PIXELS, HIDDEN]),
        ("hidden.b", vec![HIDDEN]),
        ("out.w", vec![HIDDEN, CLASSES]),
        ("out.b", vec![CLASSES]),
    ]
    .into_iter()
    .map(|(name, dims)| (name.to_string(), Tensor::zeros(DType::F32, dims)))
    .collect()
}

fn main() -> ExitCode {
    println!("cargo::rerun-if-changed=build.rs");
    let Some(out) = std::env::var_os("OUT_DIR").map(PathBuf::from) else {
        eprintln!("OUT_DIR is not set: run this through cargo");
        return ExitCode::FAILURE;
    };
    let batch = Batch::new()
        .add("train_step", || {
            let p = params();
            let s = optimizer().init(&p);
            let x = Tensor::spec(DType::F32, [BATCH, PIXELS]);
            let y = Tensor::spec(DType::F32, [BATCH, CLASSES]);
            jit(step).lower(&(p, s, x, y))?.export()
        })
        .add("predict", || {
            let x = Tensor::spec(DType::F32, [TEST_ROWS, PIXELS]);
            jit(|(p, x): (Params, Tensor)| forward(&p, &x))
                .lower(&(params(), x))?
                .export()
        });
    match batch.write_to(&out) {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("compiling the artifacts: {e}");
            ExitCode::FAILURE
        }
    }
}

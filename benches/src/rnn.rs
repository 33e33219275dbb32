//! w13 (workloads.md): the gradient of an Elman RNN over 1000 steps written with `lax::scan`,
//! its run time and its compile time; the compile row also at 100,000 steps, which compiles
//! in the same time (the body is traced and compiled once).

use crate::{emit, normal, timed, Args};
use ferrax::{grad, jit, lax, DType, Result, Tensor, Tree};
use std::time::Instant;

#[derive(Tree, Clone)]
struct Rnn {
    wx: Tensor,
    wh: Tensor,
    b: Tensor,
}

/// The sum over steps of `sum(h²)`, `h = tanh(x·wx + h·wh + b)` (JAX's `rnn_loss`).
fn rnn_loss(p: &Rnn, xs: Tensor, h0: Tensor) -> Tensor {
    let cell = |h: Tensor, x: Tensor| {
        let h = (x.matmul(&p.wx) + h.matmul(&p.wh) + &p.b).tanh();
        (h.clone(), h.square().sum(..))
    };
    lax::scan(cell, h0, xs).1.sum(..)
}

/// The gradient with respect to the parameters, as JAX's `jax.grad(rnn_loss)`.
fn rnn_grad((p, xs, h0): (Rnn, Tensor, Tensor)) -> Rnn {
    grad(|p: Rnn| rnn_loss(&p, xs.clone(), h0.clone()))(p)
}

pub fn rows(args: &Args) -> Result<()> {
    let p = Rnn {
        wx: normal(&[128, 256], 21) * 0.05,
        wh: normal(&[256, 256], 22) * 0.05,
        b: Tensor::zeros(DType::F32, [256]),
    };
    let h0 = Tensor::zeros(DType::F32, [32, 256]);
    for (name, steps) in [
        ("w13_compile_scan_rnn", 1000),
        ("w13_compile_scan_rnn_100000", 100_000),
    ] {
        if args.want(name) {
            let xs = Tensor::spec(DType::F32, [steps, 32, 128]);
            let start = Instant::now();
            jit(rnn_grad).lower(&(p.clone(), xs, h0.clone()))?;
            let t = start.elapsed().as_secs_f64();
            emit(name, (t, t), None, None);
        }
    }
    if args.want("w13_scan_rnn_grad") {
        let xs = normal(&[1000, 32, 128], 23);
        let f = jit(rnn_grad);
        let t = timed(args.reps, || {
            f.call((p.clone(), xs.clone(), h0.clone()))?;
            Ok(())
        })?;
        let flops = 6.0 * 1000.0 * 32.0 * (128.0 * 256.0 + 256.0 * 256.0);
        emit("w13_scan_rnn_grad", t, None, Some(flops));
    }
    Ok(())
}

//! w13 (workloads.md): the gradient of an Elman RNN over 1000 steps written with `lax::scan`,
//! its run time and its compile time; the compile row also at 100,000 steps, which compiles
//! in the same time (the body is traced and compiled once). The run rows report the memory
//! plan's peak (`peak_mib`), also with the body under `remat` (`jax.checkpoint`), which stores
//! only each step's carried state for the backward pass. On the GPU, the gradient's run row.

use crate::{emit, emit_with, gpu_case, normal, timed, Args, Gpu};
use ferrax::{grad, jit, lax, remat, DType, Result, Tensor, Tree};
use std::time::Instant;

#[derive(Tree, Clone)]
struct Rnn {
    wx: Tensor,
    wh: Tensor,
    b: Tensor,
}

/// The sum over steps of `sum(h²)`, `h = tanh(x·wx + h·wh + b)` (JAX's `rnn_loss`), the
/// step checkpointed where `checkpointed`.
fn rnn_loss(p: &Rnn, xs: Tensor, h0: Tensor, checkpointed: bool) -> Tensor {
    let cell = |(h, x): (Tensor, Tensor)| {
        let h = (x.matmul(&p.wx) + h.matmul(&p.wh) + &p.b).tanh();
        (h.clone(), h.square().sum(..))
    };
    let ys = match checkpointed {
        false => lax::scan(|h, x| cell((h, x)), h0, xs).1,
        true => {
            let step = remat(cell);
            lax::scan(|h, x| step((h, x)), h0, xs).1
        }
    };
    ys.sum(..)
}

/// The gradient with respect to the parameters, as JAX's `jax.grad(rnn_loss)`.
fn rnn_grad((p, xs, h0): (Rnn, Tensor, Tensor)) -> Rnn {
    grad(|p: Rnn| rnn_loss(&p, xs.clone(), h0.clone(), false))(p)
}

/// [`rnn_grad`] with the step under `remat` (`jax.checkpoint`).
fn rnn_grad_remat((p, xs, h0): (Rnn, Tensor, Tensor)) -> Rnn {
    grad(|p: Rnn| rnn_loss(&p, xs.clone(), h0.clone(), true))(p)
}

/// Floating-point operations of one gradient (workloads.md).
const FLOPS: f64 = 6.0 * 1000.0 * 32.0 * (128.0 * 256.0 + 256.0 * 256.0);

/// The parameters and the initial state.
fn inputs() -> (Rnn, Tensor) {
    let p = Rnn {
        wx: normal(&[128, 256], 21) * 0.05,
        wh: normal(&[256, 256], 22) * 0.05,
        b: Tensor::zeros(DType::F32, [256]),
    };
    (p, Tensor::zeros(DType::F32, [32, 256]))
}

/// The run row on the GPU: both scans' steps queued on the device.
pub fn gpu_rows(args: &Args, gpu: &Gpu) -> Result<()> {
    if args.want("w13_scan_rnn_grad") {
        let (p, h0) = inputs();
        let xs = normal(&[1000, 32, 128], 23);
        let row = "w13_scan_rnn_grad";
        gpu_case(
            gpu,
            args.reps,
            row,
            rnn_grad,
            (p, xs, h0),
            (None, Some(FLOPS)),
        )?;
    }
    Ok(())
}

pub fn rows(args: &Args) -> Result<()> {
    let (p, h0) = inputs();
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
    for (name, f) in [
        (
            "w13_scan_rnn_grad",
            rnn_grad as fn((Rnn, Tensor, Tensor)) -> Rnn,
        ),
        ("w13_scan_rnn_grad_remat", rnn_grad_remat),
    ] {
        if !args.want(name) {
            continue;
        }
        let xs = normal(&[1000, 32, 128], 23);
        let f = jit(f);
        let inputs = (p.clone(), xs, h0.clone());
        let peak = f.lower(&inputs)?.memory().map_or(0, |m| m.peak);
        let t = timed(args.reps, || {
            f.call(inputs.clone())?;
            Ok(())
        })?;
        let mib = peak as f64 / (1 << 20) as f64;
        emit_with(
            "ferrax-cpu",
            name,
            t,
            None,
            Some(FLOPS),
            &[("peak_mib", mib)],
        );
    }
    Ok(())
}

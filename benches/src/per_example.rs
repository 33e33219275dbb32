//! w15 (workloads.md): per-example gradients of the w5 MLP at 64→128→10 with
//! `vmap(grad(loss), in_axes=(None, 0, 0))` under `jit`, at batch 256; and its compile time
//! at batch 16, 64 and 256, which should not grow with the batch (the per-example gradient is
//! traced once and batched as a program).

use crate::{emit, mlp_init, mlp_loss, normal, one_hot, timed, Args, Layer};
use ferrax::{grad, jit, vmap_axes, DType, Result, Tensor};
use std::time::Instant;

/// The gradient of one example's loss, for every example (JAX's
/// `vmap(grad(one), in_axes=(None, 0, 0))` with `one = lambda p, x, y: loss(p, x[None], y[None])`).
fn per_example_grads((ps, x, y): (Vec<Layer>, Tensor, Tensor)) -> Vec<Layer> {
    let one =
        |(p, x, y): (Vec<Layer>, Tensor, Tensor)| mlp_loss((p, x.expand_dims(0), y.expand_dims(0)));
    vmap_axes(grad(one), (None, 0, 0), 0)((ps, x, y)).0
}

pub fn rows(args: &Args) -> Result<()> {
    let ps = mlp_init(&[64, 128, 10]);
    for batch in [16, 64, 256] {
        let name = format!("w15_compile_per_example_grads_{batch}");
        if args.want(&name) {
            let specs = (
                ps.clone(),
                Tensor::spec(DType::F32, [batch, 64]),
                Tensor::spec(DType::F32, [batch, 10]),
            );
            let start = Instant::now();
            jit(per_example_grads).lower(&specs)?;
            let t = start.elapsed().as_secs_f64();
            emit(&name, (t, t), None, None);
        }
    }
    if args.want("w15_per_example_grads") {
        let (x, y) = (normal(&[256, 64], 31), one_hot(256));
        let f = jit(per_example_grads);
        let t = timed(args.reps, || {
            f.call((ps.clone(), x.clone(), y.clone()))?;
            Ok(())
        })?;
        emit("w15_per_example_grads", t, None, None);
    }
    Ok(())
}

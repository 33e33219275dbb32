//! Control flow on the GPU: every region's kernels on the device, queued by the host, the
//! loops' values never leaving the device but for a `while`'s predicate and a `cond`'s index.

use super::{assert_close, device, Emulator};
use ferrax::compiler::backend::gpu::{GpuMachine, GpuOptions, GpuProgram};
use ferrax::runtime::interpret;
use ferrax::{grad, jit, lax, Array, DType, Tensor, Tree};

#[derive(Tree, Clone)]
struct Rnn {
    wx: Tensor,
    wh: Tensor,
    b: Tensor,
}

/// w13's loss at a small size, the sum over steps of `sum(h²)`, `h = tanh(x·wx + h·wh + b)`,
/// plus a `cond` on the sign of the last state.
fn loss((p, xs, h0): (Rnn, Tensor, Tensor)) -> Tensor {
    let cell = |h: Tensor, x: Tensor| {
        let h = (x.matmul(&p.wx) + h.matmul(&p.wh) + &p.b).tanh();
        (h.clone(), h.square().sum(..))
    };
    let (last, ys) = lax::scan(cell, h0, xs);
    let sign = last.sum(..).greater(0.0);
    let picked = lax::cond(&sign, |h: Tensor| h.sin(), |h: Tensor| h.cos(), last);
    ys.sum(..) + picked.sum(..)
}

/// The gradients, and that of `wh` halved by a data-dependent `while` until its absolute
/// values sum to at most 1.
fn rnn_grad((p, xs, h0): (Rnn, Tensor, Tensor)) -> (Rnn, Tensor, Tensor) {
    let (g, gxs) = grad(|(p, xs): (Rnn, Tensor)| loss((p, xs, h0.clone())))((p, xs));
    let halved = lax::while_loop(
        |w: Tensor| w.abs().sum(..).greater(1.0),
        |w: Tensor| w * 0.5,
        g.wh.clone(),
    );
    (g, gxs, halved)
}

fn data(dims: &[usize], scale: f32, seed: f32) -> Array {
    let n: usize = dims.iter().product();
    let v = (0..n).map(|i| ((i as f32 + seed) * 0.7371).sin() * scale);
    Array::from_vec(dims.to_vec(), v.collect()).unwrap()
}

fn gradients_of_an_rnn_on<M: GpuMachine + Clone>(gpu: &M, steps: usize) {
    let (batch, inputs, hidden) = (4, 8, 16);
    let spec = |d: &[usize]| Tensor::spec(DType::F32, d.to_vec());
    let p = Rnn {
        wx: spec(&[inputs, hidden]),
        wh: spec(&[hidden, hidden]),
        b: spec(&[hidden]),
    };
    let specs = (p, spec(&[steps, batch, inputs]), spec(&[batch, hidden]));
    let lowered = jit(rnn_grad).lower(&specs).unwrap();
    let func = lowered.simplified();
    let exe = GpuProgram::compile(func, gpu, GpuOptions::HIGHEST).unwrap();
    assert_eq!(exe.host_steps(), 0, "{steps} steps");
    let args = [
        data(&[inputs, hidden], 0.3, 1.0),
        data(&[hidden, hidden], 0.3, 2.0),
        data(&[hidden], 0.1, 3.0),
        data(&[steps, batch, inputs], 1.0, 4.0),
        data(&[batch, hidden], 0.5, 5.0),
    ];
    let want = interpret(func, &args).unwrap();
    // Twice: the second run reuses the first one's buffers.
    for _ in 0..2 {
        let got = exe.run(&args).unwrap();
        for (k, (g, w)) in got.iter().zip(&want).enumerate() {
            // 2e-5 a step's rounding (reassociated sums), over the steps' chain.
            assert_close(g, w, 1e-4, &format!("{steps} steps, result {k}"));
        }
    }
}

#[test]
fn gradients_through_scan_while_and_cond_run_on_the_device() {
    if let Some(dev) = device() {
        for steps in [0, 1, 300] {
            gradients_of_an_rnn_on(&dev, steps);
        }
    }
    for steps in [0, 3] {
        gradients_of_an_rnn_on(&Emulator::default(), steps);
    }
}

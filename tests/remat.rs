//! `remat` (`jax.checkpoint`): values, forward mode, gradients, second derivatives and
//! per-example gradients are those of the plain function under every policy, eagerly and under
//! `jit`, outside and inside a `scan`; a checkpointed scan body stores less for the backward
//! pass (the memory plan's peak drops); a mistake inside the function is an error.
#![allow(clippy::unwrap_used)]

use ferrax::{grad, jit, jvp, lax, remat_with, trace, vmap, RematPolicy, Tensor};

const POLICIES: [RematPolicy; 4] = RematPolicy::ALL;

fn f64s(shape: &[usize], seed: u64) -> Tensor {
    let n: usize = shape.iter().product();
    let data = (0..n)
        .map(|i| (((i as u64 + 1) * (seed * 2 + 7)) % 97) as f64 / 97.0 - 0.5)
        .collect();
    Tensor::from_vec(shape.to_vec(), data)
}

fn values(t: &Tensor) -> Vec<f64> {
    t.to_vec::<f64>().unwrap()
}

/// Equal within a few ULPs of their size: the backward pass computes the same values again
/// with the same operations, but fusion may associate the sums of cotangents differently.
fn close(got: &Tensor, want: &Tensor, what: &str) {
    let (got, want) = (values(got), values(want));
    assert_eq!(got.len(), want.len(), "{what}");
    let scale = want.iter().fold(1.0f64, |m, w| m.max(w.abs()));
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-13 * scale,
            "{what}[{i}]: {g} where {w} is expected"
        );
    }
}

/// A layer with two results, checkpointed under `policy` (plain where `None`).
fn layer(policy: Option<RematPolicy>) -> impl Fn((Tensor, Tensor)) -> (Tensor, Tensor) {
    let plain = |(w, x): (Tensor, Tensor)| {
        let a = x.matmul(&w);
        (a.tanh() * a.sin(), (a.exp() + 1.0).log())
    };
    move |args| match policy {
        Some(p) => remat_with(p, plain)(args),
        None => plain(args),
    }
}

fn loss(policy: Option<RematPolicy>) -> impl Fn((Tensor, Tensor)) -> Tensor {
    move |(w, x): (Tensor, Tensor)| {
        let (a, b) = layer(policy)((w.clone(), x));
        let (c, _) = layer(policy)((w, a * b));
        c.sum(..)
    }
}

#[test]
fn values_and_derivatives_are_the_plain_functions() {
    let (w, x) = (f64s(&[4, 4], 1), f64s(&[3, 4], 2));
    let plain = loss(None);
    let want = plain((w.clone(), x.clone()));
    let (dw_want, dx_want) = grad(loss(None))((w.clone(), x.clone()));
    let tangents = (f64s(&[4, 4], 3), f64s(&[3, 4], 4));
    let (_, t_want) = jvp(loss(None), &(w.clone(), x.clone()), &tangents).unwrap();
    for policy in POLICIES {
        let what = format!("{policy:?}");
        let f = loss(Some(policy));
        assert_eq!(values(&f((w.clone(), x.clone()))), values(&want), "{what}");
        let (dw, dx) = grad(loss(Some(policy)))((w.clone(), x.clone()));
        close(&dw, &dw_want, &format!("{what} eager dw"));
        close(&dx, &dx_want, &format!("{what} eager dx"));
        let (dw, dx) = jit(grad(loss(Some(policy))))
            .call((w.clone(), x.clone()))
            .unwrap();
        close(&dw, &dw_want, &format!("{what} jit dw"));
        close(&dx, &dx_want, &format!("{what} jit dx"));
        let (_, t) = jvp(loss(Some(policy)), &(w.clone(), x.clone()), &tangents).unwrap();
        close(&t, &t_want, &format!("{what} jvp"));
    }
}

#[test]
fn second_derivatives_and_per_example_gradients() {
    let cube = |policy: Option<RematPolicy>| {
        move |x: Tensor| {
            let f = |x: Tensor| (x.sin() * &x).sum(..);
            match policy {
                Some(p) => remat_with(p, f)(x),
                None => f(x),
            }
        }
    };
    let x = f64s(&[5], 5);
    let want = grad(|x: Tensor| grad(cube(None))(x).sum(..))(x.clone());
    let xs = f64s(&[3, 5], 6);
    let per_example = vmap(grad(cube(None)))(xs.clone());
    for policy in POLICIES {
        let got = grad(|x: Tensor| grad(cube(Some(policy)))(x).sum(..))(x.clone());
        close(&got, &want, &format!("{policy:?} second derivative"));
        let got = jit(vmap(grad(cube(Some(policy)))))
            .call(xs.clone())
            .unwrap();
        close(&got, &per_example, &format!("{policy:?} vmap of grad"));
    }
}

/// An Elman RNN's loss over `xs`, the step checkpointed under `policy`.
fn rnn_loss(policy: Option<RematPolicy>) -> impl Fn((Tensor, Tensor, Tensor)) -> Tensor {
    move |(w, u, xs): (Tensor, Tensor, Tensor)| {
        let step = |(h, x): (Tensor, Tensor)| {
            let h = (x.matmul(&u) + h.matmul(&w)).tanh();
            (h.clone(), h.square().sum(..))
        };
        let h0 = Tensor::zeros(ferrax::DType::F64, [xs.shape()[1], w.shape()[0]]);
        let ys = match policy {
            Some(p) => {
                let step = remat_with(p, step);
                lax::scan(|h, x| step((h, x)), h0, xs).1
            }
            None => lax::scan(|h, x| step((h, x)), h0, xs).1,
        };
        ys.sum(..)
    }
}

fn rnn_grad(policy: Option<RematPolicy>) -> impl Fn((Tensor, Tensor, Tensor)) -> (Tensor, Tensor) {
    move |(w, u, xs): (Tensor, Tensor, Tensor)| {
        grad(|(w, u): (Tensor, Tensor)| rnn_loss(policy)((w, u, xs.clone())))((w, u))
    }
}

#[test]
fn a_checkpointed_scan_body_differentiates_as_the_plain_one() {
    let args = (f64s(&[6, 6], 7), f64s(&[3, 6], 8), f64s(&[9, 2, 3], 9));
    let (dw_want, du_want) = jit(rnn_grad(None)).call(args.clone()).unwrap();
    for policy in POLICIES {
        let (dw, du) = jit(rnn_grad(Some(policy))).call(args.clone()).unwrap();
        close(&dw, &dw_want, &format!("{policy:?} dw"));
        close(&du, &du_want, &format!("{policy:?} du"));
    }
}

#[test]
fn a_checkpointed_scan_body_stores_less() {
    // 200 steps of a batch of 16 with 64 hidden units: each stored [16, 64] per step is 1.6 MB.
    let args = (
        f64s(&[64, 64], 10),
        f64s(&[8, 64], 11),
        f64s(&[200, 16, 8], 12),
    );
    let peak = |policy| {
        jit(rnn_grad(policy))
            .lower(&args)
            .unwrap()
            .memory()
            .unwrap()
            .peak
    };
    let plain = peak(None);
    let per_step = 200 * 16 * 64 * 8;
    // The plain gradient stores the step's input state and what the derivatives of tanh and
    // the square read; the checkpointed one the input state alone.
    let checkpointed = peak(Some(RematPolicy::NothingSaveable));
    assert!(
        checkpointed + per_step <= plain,
        "a peak of {checkpointed} B against {plain} B without remat"
    );
}

#[test]
fn a_mistake_inside_is_an_error() {
    let f = |x: Tensor| {
        remat_with(RematPolicy::NothingSaveable, |x: Tensor| {
            x.matmul(&Tensor::zeros(ferrax::DType::F64, [3, 3]))
        })(x)
    };
    let err = trace(f, &Tensor::spec(ferrax::DType::F64, [2, 4]))
        .unwrap_err()
        .to_string();
    assert!(err.contains("tests/remat.rs"), "{err}");
}

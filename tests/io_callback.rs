//! `ferrax::io_callback` (`jax.experimental.io_callback`): a host function with effects that
//! gives a value runs where the traced function calls it, once per call (per loop iteration,
//! per example under an unordered `vmap`), in order with `debug` callbacks, whether or not its
//! value is used, on every backend; an ordered one refuses `vmap`, a differentiated one
//! `grad`, and wrong results are errors.
#![allow(clippy::unwrap_used)]

mod common;

use common::callbacks::{masked_text, run_on_every_backend};
use ferrax::{debug, grad, io_callback, jit, lax, trace, vmap, Array, DType, Tensor, TensorType};
use std::sync::{Arc, Mutex};

/// A host counter: each call logs `label`, its operands' sum (0 for none) and their number,
/// and returns the number of calls so far as an f32 scalar.
#[derive(Clone, Default)]
struct Counter(Arc<Mutex<Vec<String>>>);

impl Counter {
    fn call(&self, label: &'static str, args: &[&Tensor]) -> Tensor {
        let log = self.0.clone();
        io_callback(
            move |values: &[Array]| {
                let mut log = log.lock().unwrap();
                let sum = values
                    .iter()
                    .flat_map(|v| v.to_f64_vec())
                    .fold(0.0, |a, b| a + b);
                log.push(format!("{label} {sum} of {}", values.len()));
                Ok(Array::scalar(log.len() as f32))
            },
            TensorType::scalar(DType::F32),
            args,
            false,
        )
    }

    fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

#[test]
fn eagerly_the_host_function_runs_at_once() {
    let counter = Counter::default();
    let x = Tensor::from_vec([2], vec![1.0f32, 2.0]);
    let first = counter.call("a", &[&x]);
    let second = counter.call("b", &[]);
    assert_eq!(first.to_vec::<f32>().unwrap(), [1.0]);
    assert_eq!(second.to_vec::<f32>().unwrap(), [2.0]);
    assert_eq!(counter.take(), ["a 3 of 1", "b 0 of 0"]);
}

#[test]
fn jitted_calls_run_each_time_in_order_used_or_not() {
    let counter = Counter::default();
    let c = counter.clone();
    let f = jit(move |x: Tensor| {
        let unused = c.call("unused", &[&x]);
        drop(unused);
        debug::print("between", &[]).unwrap();
        let used = c.call("used", &[&(&x * 2.0)]);
        x + used
    });
    let x = Tensor::from_vec([2], vec![1.0f32, 2.0]);
    for call in 0..2 {
        let y = f.call(x.clone()).unwrap();
        // The second call of each run is the counter's 2nd, then 4th.
        let n = (2 * call + 2) as f32;
        assert_eq!(y.to_vec::<f32>().unwrap(), [1.0 + n, 2.0 + n]);
    }
    assert_eq!(
        counter.take(),
        [
            "unused 3 of 1",
            "used 6 of 1",
            "unused 3 of 1",
            "used 6 of 1"
        ]
    );
}

#[test]
fn loops_call_once_per_iteration() {
    let counter = Counter::default();
    let c = counter.clone();
    let f = jit(move |x: Tensor| {
        lax::fori_loop(
            0,
            3,
            |i, acc: Tensor| {
                let read = c.call("step", &[&i.astype(DType::F32)]);
                acc + read
            },
            x,
        )
    });
    let got = f.call(Tensor::scalar(0.5f32)).unwrap();
    assert_eq!(got.to_vec::<f32>().unwrap(), [0.5 + 1.0 + 2.0 + 3.0]);
    assert_eq!(
        counter.take(),
        ["step 0 of 1", "step 1 of 1", "step 2 of 1"]
    );
}

#[test]
fn every_backend_calls_the_host_where_the_program_does() {
    let counter = Counter::default();
    let c = counter.clone();
    let func = trace(
        move |x: Tensor| {
            let before = c.call("before", &[&x]);
            let looped = lax::fori_loop(0, 2, |_, acc: Tensor| &acc + c.call("loop", &[&acc]), x);
            looped * before
        },
        &Tensor::spec(DType::F32, [2]),
    )
    .unwrap();
    insta::assert_snapshot!(masked_text(&func));
    let input = [Array::from_vec([2], vec![1.0f32, 2.0]).unwrap()];
    // before = 1; the loop adds 2, then 3: [6, 7].
    let want = ["before 3 of 1", "loop 3 of 1", "loop 7 of 1"];
    let out = run_on_every_backend(&func, &input, |backend| {
        assert_eq!(counter.take(), want, "{backend}");
    });
    assert_eq!(out[0].as_slice::<f32>().unwrap(), [6.0, 7.0]);
}

#[test]
fn vmap_calls_unordered_callbacks_per_example_and_refuses_ordered_ones() {
    let counter = Counter::default();
    let c = counter.clone();
    let f = jit(vmap(move |x: Tensor| &x * c.call("row", &[&x])));
    let xs = Tensor::from_vec([3, 2], vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let got = f.call(xs.clone()).unwrap();
    assert_eq!(
        got.to_vec::<f32>().unwrap(),
        [1.0, 2.0, 6.0, 8.0, 15.0, 18.0]
    );
    assert_eq!(counter.take(), ["row 3 of 1", "row 7 of 1", "row 11 of 1"]);
    let ordered = jit(vmap(|x: Tensor| {
        let one = io_callback(
            |_: &[Array]| Ok(Array::scalar(1.0f32)),
            TensorType::scalar(DType::F32),
            &[&x],
            true,
        );
        x * one
    }));
    let e = ordered.call(xs).unwrap_err().to_string();
    assert!(e.contains("vmap of an ordered io_callback"), "{e}");
}

#[test]
fn grad_passes_values_that_carry_no_derivative_and_refuses_the_others() {
    let counter = Counter::default();
    let c = counter.clone();
    // The callback's operand is not differentiated: its value is a constant of the gradient.
    let g = jit(grad(move |x: Tensor| {
        let scale = c.call("scale", &[]);
        (&x * &x * scale).sum(..)
    }))
    .call(Tensor::scalar(3.0f32))
    .unwrap();
    assert_eq!(g.to_vec::<f32>().unwrap(), [6.0]);
    assert_eq!(counter.take(), ["scale 0 of 0"]);
    let c = counter.clone();
    let e = jit(grad(move |x: Tensor| c.call("x", &[&x])))
        .call(Tensor::scalar(3.0f32))
        .unwrap_err()
        .to_string();
    assert!(e.contains("io_callback has no derivative"), "{e}");
}

#[test]
fn wrong_results_and_failures_are_errors_and_no_artifact_is_made() {
    let x = Tensor::from_vec([2], vec![1.0f32, 2.0]);
    let wrong = |x: &Tensor| {
        io_callback(
            |_: &[Array]| Ok(Array::scalar(1i32)),
            TensorType::scalar(DType::F32),
            &[x],
            false,
        )
    };
    let e = wrong(&x).to_vec::<f32>().unwrap_err().to_string();
    assert!(
        e.contains("io_callback promised f32[], the host function returned i32[]"),
        "{e}"
    );
    let e = jit(move |x: Tensor| wrong(&x))
        .call(x.clone())
        .unwrap_err()
        .to_string();
    assert!(e.contains("io_callback promised f32[]"), "{e}");
    let failing = jit(|x: Tensor| {
        io_callback(
            |_| Err("the sensor is offline".to_string()),
            x.ty().clone(),
            &[&x],
            false,
        )
    });
    let e = failing.call(x.clone()).unwrap_err().to_string();
    assert!(e.contains("the sensor is offline"), "{e}");
    let counter = Counter::default();
    let e = jit(move |x: Tensor| &x + counter.call("a", &[]))
        .lower(&x)
        .unwrap()
        .export()
        .unwrap_err()
        .to_string();
    assert!(e.contains("host functions"), "{e}");
}

//! `ferrax::pure_callback` (`jax.pure_callback`): a host function as an operation, eagerly and
//! under `jit` on every backend, under `vmap` one call per example or one on the batch
//! (`VmapMethod`), skipped where its result is unused, without a derivative unless
//! `custom_jvp` gives it one; wrong results and failing functions are errors, and programs
//! calling one make no artifacts.
#![allow(clippy::unwrap_used)]

mod common;

use common::callbacks::run_on_every_backend;
use ferrax::{
    custom_jvp, grad, jit, pure_callback, trace, vmap, Array, DType, Tensor, TensorType, VmapMethod,
};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// `x ↦ x³` elementwise on f32 arrays, computed on the host.
fn cube(values: &[Array]) -> Result<Array, String> {
    let x = values[0].as_slice::<f32>().map_err(|e| e.to_string())?;
    let cubed: Vec<f32> = x.iter().map(|v| v * v * v).collect();
    Array::from_vec(values[0].shape().clone(), cubed).map_err(|e| e.to_string())
}

fn host_cube(x: &Tensor) -> Tensor {
    pure_callback(cube, x.ty().clone(), &[x], VmapMethod::Sequential)
}

#[test]
fn eagerly_and_jitted_the_host_computes_the_value() {
    let x = Tensor::from_vec([3], vec![1.0f32, 2.0, -3.0]);
    assert_eq!(host_cube(&x).to_vec::<f32>().unwrap(), [1.0, 8.0, -27.0]);
    let f = jit(|x: Tensor| host_cube(&(&x + 1.0)) * 2.0);
    assert_eq!(
        f.call(x).unwrap().to_vec::<f32>().unwrap(),
        [16.0, 54.0, -16.0]
    );
}

#[test]
fn every_backend_calls_the_host_and_unused_results_are_not_computed() {
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = {
        let calls = calls.clone();
        move |values: &[Array]| {
            calls.fetch_add(1, Ordering::SeqCst);
            cube(values)
        }
    };
    let func = trace(
        move |x: Tensor| {
            let used = pure_callback(
                counted.clone(),
                x.ty().clone(),
                &[&x],
                VmapMethod::Sequential,
            );
            let _unused = pure_callback(
                counted.clone(),
                x.ty().clone(),
                &[&used],
                VmapMethod::Sequential,
            );
            used + 1.0
        },
        &Tensor::spec(DType::F32, [2]),
    )
    .unwrap();
    let text = func.to_string();
    assert!(text.contains("pure_callback %0, callback="), "{text}");
    assert_eq!(ferrax::ir::parse_func(&text).unwrap(), func);
    let input = [Array::from_vec([2], vec![2.0f32, 3.0]).unwrap()];
    let out = run_on_every_backend(&func, &input, |backend| {
        assert_eq!(calls.swap(0, Ordering::SeqCst), 1, "{backend}");
    });
    assert_eq!(out[0].as_slice::<f32>().unwrap(), [9.0, 28.0]);
}

#[test]
fn vmap_calls_per_example_or_once_on_the_batch() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let method_f = |method: VmapMethod| {
        let seen = seen.clone();
        move |(x, shared): (Tensor, Tensor)| {
            let seen = seen.clone();
            let result = x.ty().clone();
            pure_callback(
                move |values: &[Array]| {
                    let shapes: Vec<String> = values.iter().map(|v| v.ty().to_string()).collect();
                    seen.lock().unwrap().push(shapes.join(" "));
                    let x = values[0].as_slice::<f32>().map_err(|e| e.to_string())?;
                    let s = values[1].as_slice::<f32>().map_err(|e| e.to_string())?[0];
                    let out: Vec<f32> = x.iter().map(|v| v * s).collect();
                    Array::from_vec(values[0].shape().clone(), out).map_err(|e| e.to_string())
                },
                result,
                &[&x, &shared],
                method,
            )
        }
    };
    let xs = Tensor::from_vec([2, 3], vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let shared = Tensor::scalar(10.0f32);
    let want = [10.0, 20.0, 30.0, 40.0, 50.0, 60.0];
    let per_example = ferrax::vmap_axes(method_f(VmapMethod::Sequential), (0, None), 0);
    let got = jit(move |(xs, s): (Tensor, Tensor)| per_example((xs, s)))
        .call((xs.clone(), shared.clone()))
        .unwrap();
    assert_eq!(got.to_vec::<f32>().unwrap(), want);
    assert_eq!(
        std::mem::take(&mut *seen.lock().unwrap()),
        ["f32[3] f32[]", "f32[3] f32[]"]
    );
    let batched = ferrax::vmap_axes(method_f(VmapMethod::ExpandDims), (0, None), 0);
    let got = jit(move |(xs, s): (Tensor, Tensor)| batched((xs, s)))
        .call((xs, shared))
        .unwrap();
    assert_eq!(got.to_vec::<f32>().unwrap(), want);
    assert_eq!(
        std::mem::take(&mut *seen.lock().unwrap()),
        ["f32[2,3] f32[1]"]
    );
    // A batch of none calls nothing.
    let empty = vmap(|x: Tensor| host_cube(&x));
    let got = jit(empty).call(Tensor::zeros(DType::F32, [0, 2])).unwrap();
    assert_eq!(got.shape(), [0, 2]);
}

#[test]
fn derivatives_need_a_rule_of_the_users() {
    let x = Tensor::scalar(2.0f32);
    let e = jit(grad(|x: Tensor| host_cube(&x)))
        .call(x.clone())
        .unwrap_err()
        .to_string();
    assert!(e.contains("pure_callback has no derivative"), "{e}");
    let with_rule = custom_jvp(
        |x: Tensor| host_cube(&x),
        |x: Tensor, t: Tensor| (host_cube(&x), &x * &x * 3.0 * t),
    );
    let g = jit(grad(with_rule)).call(x).unwrap();
    assert_eq!(g.to_vec::<f32>().unwrap(), [12.0]);
}

#[test]
fn wrong_results_and_failures_are_errors() {
    let x = Tensor::from_vec([2], vec![1.0f32, 2.0]);
    let promised = TensorType::new(DType::F32, [3]);
    let e = pure_callback(cube, promised.clone(), &[&x], VmapMethod::Sequential)
        .to_vec::<f32>()
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("promised f32[3], the host function returned f32[2]"),
        "{e}"
    );
    assert!(e.contains("pure_callback.rs"), "{e}");
    let f =
        jit(move |x: Tensor| pure_callback(cube, promised.clone(), &[&x], VmapMethod::Sequential));
    let e = f.call(x.clone()).unwrap_err().to_string();
    assert!(e.contains("promised f32[3]"), "{e}");
    let failing = jit(|x: Tensor| {
        pure_callback(
            |_| Err("no such table".to_string()),
            x.ty().clone(),
            &[&x],
            VmapMethod::Sequential,
        )
    });
    let e = failing.call(x.clone()).unwrap_err().to_string();
    assert!(e.contains("no such table"), "{e}");
    let e = jit(|x: Tensor| host_cube(&x))
        .lower(&x)
        .unwrap()
        .export()
        .unwrap_err()
        .to_string();
    assert!(e.contains("host functions"), "{e}");
}

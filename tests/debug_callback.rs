//! `ferrax::debug` (`jax.debug.callback`, `jax.debug.print`): a callback runs where its call is
//! in the traced function, as often as that point runs: at once eagerly, each time a jitted
//! function runs, once per loop iteration and per taken branch, once per example under `vmap`,
//! on the primal values under `grad` and `jvp`, in the order traced, and on every backend
//! (interpreter, CPU, emulated GPU). Programs with callbacks make no artifacts and skip the
//! persistent cache; misuse and failing callbacks are errors, never crashes.
#![allow(clippy::unwrap_used)]

mod common;

use common::callbacks::{masked_text, run_on_every_backend};
use ferrax::compiler::backend::CpuExecutable;
use ferrax::{debug, grad, jit, jvp, lax, trace, vmap, Array, DType, Error, Tensor};
use std::sync::{Arc, Mutex};

/// What the callbacks of one test saw, as `label values...` lines.
#[derive(Clone, Default)]
struct Log(Arc<Mutex<Vec<String>>>);

impl Log {
    /// Stages (or, eagerly, runs) a callback that logs `label` and `args`' values.
    fn record(&self, label: &'static str, args: &[&Tensor]) {
        let log = self.clone();
        debug::callback(
            move |values| {
                let format = vec!["{}"; values.len()].join(" ");
                let text = debug::format(&format, values).unwrap();
                log.0.lock().unwrap().push(format!("{label} {text}"));
            },
            args,
        )
        .unwrap();
    }

    fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

fn vec3(v: [f32; 3]) -> Tensor {
    Tensor::from_vec([3], v.to_vec())
}

#[test]
fn eager_callbacks_run_at_once() {
    let log = Log::default();
    let x = vec3([1.0, 2.0, 3.0]);
    log.record("x", &[&x]);
    log.record("sum", &[&x.sum(..), &Tensor::scalar(7i32)]);
    assert_eq!(log.take(), ["x [1.0, 2.0, 3.0]", "sum 6.0 7"]);
}

#[test]
fn jitted_callbacks_run_every_call_in_order_even_on_values_the_result_ignores() {
    let log = Log::default();
    let l = log.clone();
    let f = jit(move |x: Tensor| {
        let doubled = &x * 2.0;
        l.record("doubled", &[&doubled]);
        l.record("both", &[&x, &x.sum(..)]);
        x + 1.0
    });
    let y = f.call(vec3([1.0, 2.0, 3.0])).unwrap();
    assert_eq!(y.to_vec::<f32>().unwrap(), [2.0, 3.0, 4.0]);
    f.call(vec3([0.0, 0.0, 1.0])).unwrap();
    assert_eq!(
        log.take(),
        [
            "doubled [2.0, 4.0, 6.0]",
            "both [1.0, 2.0, 3.0] 6.0",
            "doubled [0.0, 0.0, 2.0]",
            "both [0.0, 0.0, 1.0] 1.0",
        ]
    );
}

#[test]
fn callbacks_in_loops_run_per_iteration_and_in_branches_when_taken() {
    let log = Log::default();
    let l = log.clone();
    let f = jit(move |x: Tensor| {
        // The constant is the same every iteration: the callback still runs each time.
        let unit = Tensor::scalar(1i32);
        let x = lax::fori_loop(
            0,
            3,
            |i, acc: Tensor| {
                l.record("fori", &[&i, &unit]);
                acc * 2.0
            },
            x,
        );
        let (x, ys) = lax::scan(
            |c: Tensor, t: Tensor| {
                l.record("scan", &[&t]);
                (&c + &t, &c * &t)
            },
            x,
            Tensor::from_vec([2], vec![10.0f32, 20.0]),
        );
        let x = lax::cond(
            &x.greater(0.0),
            |x: Tensor| {
                l.record("positive", &[&x]);
                x
            },
            |x: Tensor| {
                l.record("negative", &[&x]);
                -x
            },
            x,
        );
        x + ys.sum(..)
    });
    let y = f.call(Tensor::scalar(1.0f32)).unwrap();
    assert_eq!(y.to_vec::<f32>().unwrap(), [38.0 + 80.0 + 360.0]);
    assert_eq!(
        log.take(),
        [
            "fori 0 1",
            "fori 1 1",
            "fori 2 1",
            "scan 10.0",
            "scan 20.0",
            "positive 38.0"
        ]
    );
}

#[test]
fn a_scan_unrolled_still_calls_back_once_per_step() {
    let log = Log::default();
    let l = log.clone();
    let f = jit(move |xs: Tensor| {
        lax::fori_loop_unrolled(
            0,
            4,
            |_, acc: Tensor| {
                l.record("step", &[&acc]);
                acc + 1.0
            },
            xs,
            2,
        )
    });
    f.call(Tensor::scalar(0.0f32)).unwrap();
    assert_eq!(log.take(), ["step 0.0", "step 1.0", "step 2.0", "step 3.0"]);
}

#[test]
fn derivatives_call_back_once_on_primal_values() {
    let log = Log::default();
    let l = log.clone();
    let loss = move |x: Tensor| {
        let y = &x * &x;
        l.record("y", &[&y]);
        y.sum(..)
    };
    let g = grad(loss.clone())(vec3([1.0, 2.0, 3.0]));
    assert_eq!(g.to_vec::<f32>().unwrap(), [2.0, 4.0, 6.0]);
    assert_eq!(log.take(), ["y [1.0, 4.0, 9.0]"]);
    let g = jit(grad(loss.clone())).call(vec3([1.0, 0.0, 0.0])).unwrap();
    assert_eq!(g.to_vec::<f32>().unwrap(), [2.0, 0.0, 0.0]);
    assert_eq!(log.take(), ["y [1.0, 0.0, 0.0]"]);
    let (y, dy) = jvp(loss, &vec3([1.0, 2.0, 0.0]), &vec3([1.0, 0.0, 0.0])).unwrap();
    assert_eq!(y.to_vec::<f32>().unwrap(), [5.0]);
    assert_eq!(dy.to_vec::<f32>().unwrap(), [2.0]);
    assert_eq!(log.take(), ["y [1.0, 4.0, 0.0]"]);
}

#[test]
fn vmap_calls_back_once_per_example_in_order() {
    let log = Log::default();
    let l = log.clone();
    let shared = Tensor::scalar(5i32);
    let f = jit(vmap(move |x: Tensor| {
        l.record("row", &[&x, &shared]);
        x.sum(..)
    }));
    let xs = Tensor::from_vec([2, 3], vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let sums = f.call(xs).unwrap();
    assert_eq!(sums.to_vec::<f32>().unwrap(), [6.0, 15.0]);
    assert_eq!(
        log.take(),
        ["row [1.0, 2.0, 3.0] 5", "row [4.0, 5.0, 6.0] 5"]
    );
}

#[test]
fn every_backend_calls_back() {
    let log = Log::default();
    let l = log.clone();
    let func = trace(
        move |x: Tensor| {
            let y = x.exp();
            l.record("y", &[&y]);
            lax::fori_loop(
                0,
                2,
                |i, acc: Tensor| {
                    l.record("i", &[&i]);
                    acc + 1.0
                },
                x,
            )
        },
        &Tensor::spec(DType::F32, [2]),
    )
    .unwrap();
    let input = [Array::from_vec([2], vec![0.0f32, 1.0]).unwrap()];
    let want = ["y [1.0, 2.7182817]", "i 0", "i 1"];
    let out = run_on_every_backend(&func, &input, |backend| {
        assert_eq!(log.take(), want, "{backend}");
    });
    assert_eq!(out[0].as_slice::<f32>().unwrap(), [2.0, 3.0]);
}

#[test]
fn print_formats_and_checks_its_placeholders() {
    let m = Array::from_vec([2, 2], vec![1i32, 2, 3, 4]).unwrap();
    let s = Array::scalar(0.5f64);
    assert_eq!(
        debug::format("m={} s={} again={0} {{}}", &[m.clone(), s]).unwrap(),
        "m=[[1, 2], [3, 4]] s=0.5 again=[[1, 2], [3, 4]] {}"
    );
    assert!(debug::format("{} {}", &[m]).is_err());
    // Checked where it is written, before tracing goes on.
    let f = jit(|x: Tensor| {
        let printed = debug::print("x = {} and {1}", &[&x]);
        let message = printed.unwrap_err().to_string();
        assert!(
            message.contains("names operand 1, and there are 1"),
            "{message}"
        );
        assert!(message.contains("debug_callback.rs"), "{message}");
        debug::print("x = {}", &[&x]).unwrap();
        x
    });
    assert_eq!(
        f.call(Tensor::scalar(3i32))
            .unwrap()
            .to_vec::<i32>()
            .unwrap(),
        [3]
    );
}

#[test]
fn a_failing_callback_is_an_error_of_the_call() {
    let f = jit(|x: Tensor| {
        debug::callback(|_| panic!("the user's callback failed"), &[&x]).unwrap();
        x
    });
    let message = f.call(Tensor::scalar(1.0f32)).unwrap_err().to_string();
    assert!(message.contains("the user's callback failed"), "{message}");
    // A failed operand is the error, eagerly and traced.
    let failed = Tensor::from_vec([2], vec![1.0f32]);
    assert!(debug::print("{}", &[&failed]).is_err());
    let g = jit(|x: Tensor| {
        let bad = &x + &Tensor::from_vec([2], vec![1.0f32, 2.0]);
        assert!(debug::print("{}", &[&bad]).is_err());
        x
    });
    let e = g.call(vec3([1.0, 2.0, 3.0]));
    assert!(matches!(e, Err(Error::Trace { .. })), "{e:?}");
}

#[test]
fn programs_with_callbacks_make_no_artifacts_and_skip_the_persistent_cache() {
    let dir = std::env::temp_dir().join(format!("ferrax-debug-cache-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let log = Log::default();
    let l = log.clone();
    let f = jit(move |x: Tensor| {
        l.record("x", &[&x]);
        x * 2.0
    })
    .cache_dir(&dir);
    let lowered = f.lower(&Tensor::spec(DType::F32, [3])).unwrap();
    assert!(!lowered.from_persistent_cache());
    let message = lowered.export().unwrap_err().to_string();
    assert!(message.contains("host functions"), "{message}");
    f.call(vec3([1.0, 2.0, 3.0])).unwrap();
    assert_eq!(log.take(), ["x [1.0, 2.0, 3.0]"]);
    let entries = std::fs::read_dir(&dir).map(|d| d.count()).unwrap_or(0);
    assert_eq!(entries, 0, "a program with a callback was cached");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_printed_program_shows_the_token_chain_and_parses_back() {
    let func = trace(
        |x: Tensor| {
            debug::print("first {}", &[&x]).unwrap();
            let y = x.sin();
            debug::print("second {}", &[&y]).unwrap();
            y
        },
        &Tensor::spec(DType::F32, [2]),
    )
    .unwrap();
    insta::assert_snapshot!(masked_text(&func));
}

#[test]
fn a_loop_whose_result_nothing_reads_still_runs_its_callbacks() {
    let log = Log::default();
    let l = log.clone();
    let f = jit(move |x: Tensor| {
        let inner = l.clone();
        lax::fori_loop(
            0,
            2,
            move |i, acc: Tensor| {
                let innermost = inner.clone();
                // A loop in the loop: its callbacks run per inner step of each outer step.
                lax::fori_loop(
                    0,
                    2,
                    move |j, a: Tensor| {
                        innermost.record("step", &[&i, &j]);
                        a
                    },
                    acc,
                )
            },
            x.clone(),
        );
        x
    });
    f.call(Tensor::scalar(1.0f32)).unwrap();
    assert_eq!(log.take(), ["step 0 0", "step 0 1", "step 1 0", "step 1 1"]);
}

#[test]
fn reverse_mode_through_a_scan_calls_back_once_per_forward_step() {
    let log = Log::default();
    let l = log.clone();
    let loss = move |w: Tensor| {
        let (c, _) = lax::scan(
            |c: Tensor, x: Tensor| {
                l.record("carry", &[&c]);
                (&c * &w + x, Tensor::scalar(0.0f32))
            },
            Tensor::scalar(1.0f32),
            Tensor::from_vec([3], vec![0.0f32, 1.0, 2.0]),
        );
        c
    };
    // c = ((w + 0) w + 1) w + 2 = w³ + w + 2: at w = 2, dc/dw = 3w² + 1 = 13.
    let g = jit(grad(loss)).call(Tensor::scalar(2.0f32)).unwrap();
    assert_eq!(g.to_vec::<f32>().unwrap(), [13.0]);
    assert_eq!(log.take(), ["carry 1.0", "carry 2.0", "carry 5.0"]);
}

#[test]
fn shape_rules_check_the_token_and_runs_refuse_unknown_callbacks() {
    use ferrax::ir::{infer_type, Op, TensorType};
    let token = TensorType::scalar(DType::Bool);
    let x = TensorType::new(DType::F32, [2]);
    let callback = Op::DebugCallback { callback: 0 };
    assert_eq!(infer_type(&callback, &[&token, &x]).unwrap(), token);
    let message = infer_type(&callback, &[&x]).unwrap_err().to_string();
    assert!(
        message.contains("token operand must be bool[]"),
        "{message}"
    );
    assert!(infer_type(&callback, &[]).is_err());
    assert_eq!(infer_type(&Op::AddDependency, &[&x, &x]).unwrap(), x);
    assert!(infer_type(&Op::AddDependency, &[&x]).is_err());
    // A program read from text may name an id this process never registered.
    let func = ferrax::ir::parse_func(
        "func @f(%0: f32[2]) -> (f32[2]) {\n  %1 = constant false : bool[]\n  %2 = debug_callback %1, %0, callback=4000000000 : bool[]\n  %3 = add_dependency %0, %2 : f32[2]\n  return %3\n}",
    )
    .unwrap();
    let input = [Array::from_vec([2], vec![1.0f32, 2.0]).unwrap()];
    let message = ferrax::runtime::interpret(&func, &input)
        .unwrap_err()
        .to_string();
    assert!(
        message.contains("no host function is registered"),
        "{message}"
    );
    let message = CpuExecutable::compile(&func)
        .unwrap()
        .run(&input)
        .unwrap_err()
        .to_string();
    assert!(
        message.contains("no host function is registered"),
        "{message}"
    );
}

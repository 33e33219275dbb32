//! Programs far larger than the benchmarks: every pass runs without recursion that grows with
//! the program (the tests run on a 256 KiB stack), simplification works region by region with
//! the same effect as on a short program, kernels stay bounded in size, and the compiled
//! results are the interpreter's bits.
#![allow(clippy::unwrap_used)]

use ferrax::compiler::backend::cpu::support::TARGET;
use ferrax::compiler::backend::CpuExecutable;
use ferrax::compiler::fuse::{partition, Step};
use ferrax::compiler::simplify::simplify;
use ferrax::runtime::interpret;
use ferrax::{grad, trace, Array, Tensor};

/// Runs `f` on a thread with a 256 KiB stack, an eighth of a test thread's.
fn on_small_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .stack_size(256 * 1024)
        .spawn(f)
        .unwrap()
        .join()
        .unwrap()
}

/// `steps` times `y = |y * 1.0 + 0.5| - 0.75`: exact arithmetic, so compiled results are the
/// interpreter's bits, and a `* 1.0` per step that simplification removes.
fn chain(x: Tensor, steps: usize) -> Tensor {
    let mut y = x;
    for _ in 0..steps {
        y = (y * 1.0 + 0.5).abs() - 0.75;
    }
    y
}

fn input() -> Tensor {
    let data = (0..64).map(|i| i as f32 * 0.37 - 11.0).collect();
    Tensor::from_vec([64], data)
}

/// Simplifies and compiles `func`, checks that no kernel exceeds fusion's bound, and compares
/// one run with the interpreter's.
fn compile_and_compare(func: &ferrax::Func, args: &[Array]) -> usize {
    let (simple, report) = simplify(func).unwrap();
    for step in partition(&simple, &TARGET) {
        if let Step::Kernel { start, end } | Step::Rows { start, end, .. } = step {
            assert!(
                end - start <= 256,
                "a kernel of {} instructions",
                end - start
            );
        }
    }
    let exe = CpuExecutable::compile(&simple).unwrap();
    assert_eq!(exe.run(args).unwrap(), interpret(func, args).unwrap());
    report.instructions_after
}

#[test]
fn a_long_chain_simplifies_in_regions_and_compiles_on_a_small_stack() {
    let steps = 4000;
    let after = on_small_stack(move || {
        let func = trace(|x: Tensor| chain(x, steps), &input()).unwrap();
        assert!(func.body.len() > 4 * steps);
        compile_and_compare(&func, &[input().to_array().unwrap()])
    });
    // Per step an add, an abs and a subtract remain, with the constants each region copies.
    assert!(
        after <= 3 * steps + 40,
        "{after} instructions after simplification"
    );
}

#[test]
fn a_long_gradient_compiles_on_a_small_stack() {
    on_small_stack(|| {
        let f = grad(|x: Tensor| chain(x, 1500).sum(..));
        let func = trace(f, &input()).unwrap();
        compile_and_compare(&func, &[input().to_array().unwrap()]);
    });
}

#[test]
fn kernels_that_differ_in_a_constant_keep_their_own_code() {
    // Two kernels, split by a transpose, alike but for the sign of a zero: sharing code
    // between them would give +0 where -0 is due.
    let f = |x: Tensor| {
        let a = (&x * 0.0).reshape([8, 8]).t();
        let b = &a * -0.0;
        (a, b)
    };
    let x = Tensor::from_vec([64], (0..64).map(|i| i as f32 - 32.0).collect());
    let func = trace(f, &x).unwrap();
    let (simple, _) = simplify(&func).unwrap();
    let exe = CpuExecutable::compile(&simple).unwrap();
    let args = [x.to_array().unwrap()];
    assert_eq!(exe.run(&args).unwrap(), interpret(&func, &args).unwrap());
    assert_eq!(exe.kernels().count(), 2);
}

#[test]
fn the_gradients_of_many_slices_of_one_value_are_laid_side_by_side() {
    // Every other row of x, squared and summed: the gradient is 2x on those rows, zero on the
    // others, built as one concatenation rather than a sum of 100 full-size pads.
    let rows = 200;
    let x = Tensor::from_vec([rows, 3], (0..rows * 3).map(|i| i as f32 * 0.5).collect());
    let f = grad(move |x: Tensor| {
        let mut total = Tensor::zeros(ferrax::DType::F32, []);
        for t in (0..rows).step_by(2) {
            total = total + x.slice(&[t, 0], &[t + 1, 3]).square().sum(..);
        }
        total
    });
    let func = trace(&f, &x).unwrap();
    let count = |name: &str| func.body.iter().filter(|i| i.op.name() == name).count();
    assert_eq!(count("pad"), 0, "{func}");
    assert_eq!(count("concatenate"), 1, "{func}");
    let g = f(x.clone()).to_array().unwrap();
    let want: Vec<f32> = (0..rows * 3)
        .map(|i| if (i / 3) % 2 == 0 { i as f32 } else { 0.0 })
        .collect();
    assert_eq!(g, Array::from_vec([rows, 3], want).unwrap());
}

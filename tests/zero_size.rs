//! Arrays with a zero-size dimension through every backend: a kernel over no elements runs an
//! empty loop, a reduction over none gives its identity, and a program of such arrays returns
//! the interpreter's results on the CPU and on the emulated GPU (the executor the CUDA device
//! uses), never a signal or a panic.
#![allow(clippy::unwrap_used)]

mod common;

use common::fusion::{assert_same_bits_any_nan, float_inputs, random_fusion_program, Mix};
use ferrax::compiler::backend::gpu::{GpuOptions, GpuProgram};
use ferrax::compiler::backend::CpuExecutable;
use ferrax::compiler::simplify::simplify;
use ferrax::runtime::interpret;
use ferrax::{grad, jit, nn, trace, Array, DType, Func, Tensor};
use ferrax_ptx_emu::Emulator;

/// Shapes of the random fusion programs with no rows, no columns, or neither.
const EMPTY_SHAPES: [(usize, usize); 3] = [(0, 24), (8, 0), (0, 0)];

fn x(shape: &[usize]) -> Tensor {
    Tensor::zeros(DType::F32, shape.to_vec())
}

/// Named programs of zero-size arrays, each with its inputs.
fn programs() -> Vec<(&'static str, Func)> {
    let one = |f: fn(Tensor) -> Tensor, shape: &[usize]| trace(f, &x(shape)).unwrap();
    let two = |f: fn((Tensor, Tensor)) -> Tensor, a: &[usize], b: &[usize]| {
        trace(f, &(x(a), x(b))).unwrap()
    };
    vec![
        (
            "softmax rows of none",
            one(|x| nn::softmax(&x, -1), &[3, 0]),
        ),
        ("softmax of no rows", one(|x| nn::softmax(&x, -1), &[0, 5])),
        ("log_softmax", one(|x| nn::log_softmax(&x, -1), &[4, 0])),
        (
            "layer norm",
            one(
                |x| {
                    let m = x.mean_keepdims(-1);
                    let c = &x - &m;
                    &c * (c.square().mean_keepdims(-1) + 1e-5).rsqrt()
                },
                &[2, 0],
            ),
        ),
        (
            "softmax gradient",
            one(
                |x| grad(|x: Tensor| (nn::softmax(&x, -1) * 2.0).sum(..))(x),
                &[3, 0],
            ),
        ),
        ("row max minus x", one(|x| &x - x.max_keepdims(1), &[3, 0])),
        ("sum of none per row", one(|x| x.sum(-1), &[3, 0])),
        ("sum of none per column", one(|x| x.sum(0), &[0, 6])),
        ("sum of all", one(|x| x.sum(..) + 1.0, &[0, 6])),
        ("max of none", one(|x| x.max(-1), &[5, 0])),
        ("mean of none", one(|x| x.mean(-1), &[5, 0])),
        (
            "elementwise",
            one(|x| (x.exp() * 2.0 + 1.0).tanh(), &[0, 3]),
        ),
        ("transpose", one(|x| x.t() * 3.0, &[0, 7])),
        (
            "broadcast of a column",
            one(|x| x.sum_keepdims(1) + 0.0 * &x, &[4, 0]),
        ),
        (
            "product with no contraction",
            two(|(a, b)| a.matmul(&b), &[3, 0], &[0, 4]),
        ),
        (
            "product of no rows",
            two(|(a, b)| a.matmul(&b), &[0, 5], &[5, 4]),
        ),
        (
            "concatenate",
            two(
                |(a, b)| Tensor::concatenate(&[a, b], 0) + 1.0,
                &[0, 3],
                &[2, 3],
            ),
        ),
    ]
}

fn inputs(func: &Func) -> Vec<Array> {
    common::inputs(func, 7)
}

#[test]
fn zero_size_programs_compute_the_interpreters_results_on_the_cpu() {
    for (name, func) in programs() {
        let (simple, _) = simplify(&func).unwrap_or_else(|e| panic!("{name}: {e}"));
        let exe = CpuExecutable::compile(&simple).unwrap_or_else(|e| panic!("{name}: {e}"));
        let args = inputs(&func);
        let want = interpret(&func, &args).unwrap_or_else(|e| panic!("{name}: {e}"));
        let got = exe.run(&args).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(got, want, "{name}");
    }
}

#[test]
fn zero_size_programs_compute_the_interpreters_results_on_the_emulated_gpu() {
    for (name, func) in programs() {
        let (simple, _) = simplify(&func).unwrap_or_else(|e| panic!("{name}: {e}"));
        let emulator = Emulator::default();
        let program = GpuProgram::compile(&simple, &emulator, GpuOptions::HIGHEST)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let args = inputs(&func);
        let want = interpret(&func, &args).unwrap_or_else(|e| panic!("{name}: {e}"));
        let got = program.run(&args).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(got, want, "{name}");
    }
}

#[test]
fn jit_runs_zero_size_softmax_and_its_gradient() {
    let x = Tensor::zeros(DType::F32, [3, 0]);
    let y = jit(|x: Tensor| nn::softmax(&x, -1))
        .call(x.clone())
        .unwrap();
    assert_eq!(y.shape(), &[3, 0]);
    let g = jit(grad(|x: Tensor| nn::softmax(&x, -1).sum(..)))
        .call(x)
        .unwrap();
    assert_eq!(g.shape(), &[3, 0]);
}

/// The fusion property test's random programs (flat and row kernels, every float type) at
/// zero-size shapes, on the CPU and the emulated GPU.
#[test]
fn random_zero_size_programs_match_the_interpreter_on_both_backends() {
    let dtypes = ["f32", "f64", "f16", "bf16"];
    for seed in 0..48u64 {
        let dtype = dtypes[seed as usize % dtypes.len()];
        let shape = EMPTY_SHAPES[(seed as usize / dtypes.len()) % EMPTY_SHAPES.len()];
        let mix = Mix {
            f64_transcendentals: true,
            row_passes: seed % 2 == 1,
        };
        let text = random_fusion_program(seed, dtype, shape, mix);
        let func = ferrax::ir::parse_func(&text).unwrap();
        let (simple, _) = simplify(&func).unwrap();
        let args = float_inputs(&func, seed);
        let want = interpret(&func, &args).unwrap();
        let what = format!("seed {seed}\n{text}");
        let cpu = CpuExecutable::compile(&simple).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_same_bits_any_nan(&cpu.run(&args).unwrap(), &want, &what);
        let emulator = Emulator::default();
        let gpu = GpuProgram::compile(&simple, &emulator, GpuOptions::HIGHEST)
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_same_bits_any_nan(&gpu.run(&args).unwrap(), &want, &what);
    }
}

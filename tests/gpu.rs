//! The CPU backend's numerics suite instantiated for CUDA: every corpus program, gradient and
//! benchmark workload on the GPU against the reference interpreter, f64 sines of huge
//! arguments, fast math, the transcendental expansions within 3 ULP on the
//! device, cuBLAS matrix products in every layout, and the runtime's caches. Where there is no
//! NVIDIA driver or GPU, each test prints why and passes (`FERRAX_REQUIRE_GPU=1` makes that a
//! failure, for runs on a GPU machine). The tests of small programs run on the emulated GPU
//! too (`ferrax_ptx_emu::Emulator`, through the same executor), everywhere: that checks them,
//! and what they check, without a GPU.
#![allow(clippy::unwrap_used)]

#[path = "gpu/callbacks.rs"]
mod callbacks;
mod common;
#[path = "gpu/control_flow.rs"]
mod control_flow;

#[allow(dead_code)]
#[path = "../examples/train_mlp.rs"]
mod train_mlp;

use common::fusion::{
    assert_same_bits_any_nan, assert_tail_close, carries_between_passes, float_inputs,
    random_fusion_program, tail_case, Mix, SHAPES,
};
use common::{assert_close, inputs};
use ferrax::compiler::backend::gpu::{GpuExecutable, GpuMachine, GpuOptions, GpuPlan, GpuProgram};
use ferrax::compiler::backend::ptx::reduce::ReduceLayout;
use ferrax::compiler::backend::ptx::rows::row_layout;
use ferrax::compiler::backend::ptx::{MathMode, PtxTarget};
use ferrax::MatmulPrecision;

/// Fast math, true f32 products.
const FAST: GpuOptions = GpuOptions {
    math: MathMode::Fast,
    ..GpuOptions::HIGHEST
};
use ferrax::compiler::simplify::simplify;
use ferrax::ir::DotDims;
use ferrax::ir::Op;
use ferrax::runtime::{eval_op, interpret, CudaDevice, CudaError};
use ferrax::{jit, nn, trace, Array, DType, Device, Tensor, TensorType};
use ferrax_ptx_emu::Emulator;
use std::f32::consts::PI;
use std::sync::Arc;

/// A traced program body.
type Program = fn(Tensor) -> Tensor;
/// An f64 reference function.
type Reference = fn(f64) -> f64;

/// Runs `$check` (generic over the [`GpuMachine`]) on the CUDA device where there is one, and
/// on the emulated GPU always.
macro_rules! on_each_gpu {
    ($check:ident) => {{
        if let Some(dev) = device() {
            $check(&dev);
        }
        $check(&Emulator::default());
    }};
}

fn device() -> Option<Arc<CudaDevice>> {
    match CudaDevice::new(0) {
        Ok(d) => Some(d),
        Err(e) => {
            assert!(
                std::env::var_os("FERRAX_REQUIRE_GPU").is_none(),
                "FERRAX_REQUIRE_GPU is set: {e}"
            );
            eprintln!("skipped: {e}");
            None
        }
    }
}

/// f64: rounding differences; f32: 2e-5 (3-ULP transcendentals, reassociated sums); f16 and
/// bf16: about one unit of their last place, which f32 arithmetic rounded twice may differ by.
fn rtol(d: DType) -> f64 {
    match d {
        DType::F64 => 1e-11,
        DType::F16 => 2e-3,
        DType::BF16 => 1.6e-2,
        _ => 2e-5,
    }
}

#[test]
fn corpus_gradients_and_benchmarks_match_the_interpreter() {
    let Some(dev) = device() else { return };
    let mut programs = common::corpus();
    programs.extend(common::gradient_programs());
    // Full size: the MLP step's independent kernels launch together, w8's first sine takes
    // the f32 reduction and the rest their series alone.
    programs.extend(common::benchmark_programs());
    let mut kernels = 0;
    for (name, func) in programs {
        let (simple, _) = simplify(&func).unwrap();
        let exe = GpuExecutable::compile(&simple, &dev, GpuOptions::HIGHEST)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        kernels += exe.kernels().len();
        for seed in 0..2 {
            let args = inputs(&func, seed);
            let got = exe.run(&args).unwrap_or_else(|e| panic!("{name}: {e}"));
            let want = interpret(&func, &args).unwrap();
            for (k, (g, w)) in got.iter().zip(&want).enumerate() {
                assert_close(
                    g,
                    w,
                    rtol(w.dtype()),
                    &format!("{name} output {k} seed {seed}"),
                );
            }
        }
    }
    assert!(kernels >= 20, "only {kernels} GPU kernels");
}

fn ulps(a: f32, b: f32) -> u64 {
    ferrax::ir::ulp_distance(ferrax::ir::Scalar::F32(a), ferrax::ir::Scalar::F32(b))
}

#[test]
fn transcendentals_within_3_ulp_on_the_device() {
    let Some(dev) = device() else { return };
    // Every 2048th f32 bit pattern (2^21 values), both signs, all exponents: sines and cosines
    // beyond 2^19 take the branch to the exact reduction.
    let xs: Vec<f32> = (0..(1u32 << 21)).map(|i| f32::from_bits(i << 11)).collect();
    let n = xs.len();
    let x = Array::from_vec([n], xs.clone()).unwrap();
    let cases: [(&str, Program, Reference); 9] = [
        ("exp", |t| t.exp(), f64::exp),
        ("expm1", |t| t.expm1(), f64::exp_m1),
        ("log", |t| t.log(), f64::ln),
        ("log1p", |t| t.log1p(), f64::ln_1p),
        ("tanh", |t| t.tanh(), f64::tanh),
        ("logistic", |t| t.sigmoid(), |v| 1.0 / (1.0 + (-v).exp())),
        ("sin", |t| t.sin(), f64::sin),
        ("cos", |t| t.cos(), f64::cos),
        // A bounded argument: the series alone, no reduction.
        (
            "sin of clip",
            |t| t.clip(-1.5, 1.5).sin(),
            |v| v.clamp(-1.5, 1.5).sin(),
        ),
    ];
    for (name, f, reference) in cases {
        let func = trace(f, &Tensor::spec(DType::F32, [n])).unwrap();
        let exe = GpuExecutable::compile(&func, &dev, GpuOptions::HIGHEST).unwrap();
        assert_eq!(exe.host_steps(), 0, "{name} should run as a GPU kernel");
        let got = exe.run(std::slice::from_ref(&x)).unwrap();
        let got = got[0].as_slice::<f32>().unwrap();
        let (worst, at) = xs
            .iter()
            .zip(got)
            .map(|(&x, &y)| (ulps(y, reference(f64::from(x)) as f32), x))
            .max_by_key(|p| p.0)
            .unwrap();
        eprintln!("gpu f32 {name}: worst {worst} ULP at {at:e}");
        assert!(worst <= 3, "{name}: {worst} ULP at {at:e}");
    }
}

/// f64 sin and cos beyond 2^51 take the branch to the exact reduction on the device: within 2
/// ULP of the library over 2^20 f64s spread over every exponent (those at or beyond 2^51),
/// and NaN for infinities and NaN.
#[test]
fn f64_sin_and_cos_of_huge_arguments_on_the_device() {
    let Some(dev) = device() else { return };
    let xs: Vec<f64> = (0..(1u64 << 20))
        .map(|i| f64::from_bits(i << 44 | i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 20))
        .filter(|x| x.abs() >= 2f64.powi(51) || !x.is_finite())
        .collect();
    let n = xs.len();
    let x = Array::from_vec([n], xs.clone()).unwrap();
    let cases: [(&str, Program, Reference); 2] = [
        ("sin", |t| t.sin(), f64::sin),
        ("cos", |t| t.cos(), f64::cos),
    ];
    for (name, f, reference) in cases {
        let func = trace(f, &Tensor::spec(DType::F64, [n])).unwrap();
        let exe = GpuExecutable::compile(&func, &dev, GpuOptions::HIGHEST).unwrap();
        let got = exe.run(std::slice::from_ref(&x)).unwrap();
        let got = got[0].as_slice::<f64>().unwrap();
        for (&x, &y) in xs.iter().zip(got) {
            let want = reference(x);
            let ulps =
                ferrax::ir::ulp_distance(ferrax::ir::Scalar::F64(y), ferrax::ir::Scalar::F64(want));
            assert!(
                (want.is_nan() && y.is_nan()) || ulps <= 2,
                "f64 {name}({x:e}) = {y:e}, want {want:e}"
            );
        }
    }
}

/// A bound on fast math's error at `x`, in ULPs of the result or absolute.
#[derive(Clone, Copy)]
enum Allowed {
    Ulps(f64),
    Absolute(f64),
}

/// Fast math on the device: each approximate instruction within the error CUDA's math
/// documentation gives for the function built on it (`__expf` 2 + ⌊1.2·|x|⌋ ULP, `__logf` and
/// `__sinf` 2^-21.41 absolute on [0.5, 2] and [-π, π], `__cosf` 2^-21.19 on [-π, π] (an H200
/// reached 2^-21.27 at -1.7588), `__logf` 3 ULP elsewhere,
/// `rsqrtf` 2 ULP, `sqrtf` without `-prec-sqrt` 1 ULP, division without `-prec-div` 2 ULP),
/// plus one ULP for comparing with the f64 reference rounded to f32 (itself up to half an ULP
/// off).
#[test]
fn fast_math_within_cudas_errors_on_the_device() {
    let Some(dev) = device() else { return };
    let n = 1 << 16;
    let spread = |lo: f32, hi: f32| -> Vec<f32> {
        (0..n)
            .map(|i| lo + (hi - lo) * (i as f32 / n as f32))
            .collect()
    };
    type Bound = fn(f64) -> Allowed;
    let cases: [(&str, Program, Reference, Vec<f32>, Bound); 8] = [
        (
            "exp",
            |t| t.exp(),
            f64::exp,
            spread(-80.0, 80.0),
            |x| Allowed::Ulps(3.0 + (1.2 * x.abs()).floor()),
        ),
        (
            "log near 1",
            |t| t.log(),
            f64::ln,
            spread(0.5, 2.0),
            |_| Allowed::Absolute(2f64.powf(-21.41)),
        ),
        (
            "log",
            |t| t.log(),
            f64::ln,
            spread(2.0, 1e30),
            |_| Allowed::Ulps(4.0),
        ),
        (
            "sin",
            |t| t.sin(),
            f64::sin,
            spread(-PI, PI),
            |_| Allowed::Absolute(2f64.powf(-21.41)),
        ),
        (
            "cos",
            |t| t.cos(),
            f64::cos,
            spread(-PI, PI),
            |_| Allowed::Absolute(2f64.powf(-21.19)),
        ),
        (
            "rsqrt",
            |t| t.rsqrt(),
            |v| 1.0 / v.sqrt(),
            spread(1e-30, 1e30),
            |_| Allowed::Ulps(3.0),
        ),
        (
            "sqrt",
            |t| t.sqrt(),
            f64::sqrt,
            spread(0.0, 1e30),
            |_| Allowed::Ulps(2.0),
        ),
        (
            "quotient",
            |t| &t / (t.abs() + 1.0),
            |v| v / f64::from((v.abs() + 1.0) as f32),
            spread(-1e6, 1e6),
            |_| Allowed::Ulps(3.0),
        ),
    ];
    for (name, f, reference, xs, bound) in cases {
        let func = trace(f, &Tensor::spec(DType::F32, [n])).unwrap();
        let exe = GpuExecutable::compile(&func, &dev, FAST).unwrap();
        assert!(exe.ptx().contains(".approx.f32") || exe.ptx().contains("div.full.f32"));
        let x = Array::from_vec([n], xs.clone()).unwrap();
        let got = exe.run(std::slice::from_ref(&x)).unwrap();
        let got = got[0].as_slice::<f32>().unwrap();
        let mut worst = 0f64;
        for (&x, &y) in xs.iter().zip(got) {
            let want = reference(f64::from(x)) as f32;
            let (err, allowed) = match bound(f64::from(x)) {
                Allowed::Ulps(u) => (ulps(y, want) as f64, u),
                Allowed::Absolute(a) => {
                    let ulp = f64::from(f32::EPSILON) * f64::from(want.abs());
                    ((f64::from(y) - f64::from(want)).abs(), a + ulp)
                }
            };
            assert!(err <= allowed, "{name} at {x:e}: {y:e}, want {want:e}");
            worst = worst.max(err / allowed);
        }
        eprintln!("gpu fast math {name}: worst {worst:.2} of the allowed error");
    }
}

#[test]
fn matrix_products_in_every_layout_run_on_cublas() {
    on_each_gpu!(matrix_products_in_every_layout_run_on_cublas_on);
}

fn matrix_products_in_every_layout_run_on_cublas_on<M: GpuMachine + Clone>(gpu: &M) {
    let spec = |s: &[usize]| Tensor::spec(DType::F32, s.to_vec());
    let cases: Vec<(&str, ferrax::Func)> = vec![
        (
            "a @ b",
            trace(
                |(a, b): (Tensor, Tensor)| a.matmul(&b),
                &(spec(&[33, 17]), spec(&[17, 9])),
            )
            .unwrap(),
        ),
        (
            "a.T @ b",
            trace(
                |(a, b): (Tensor, Tensor)| a.transpose([1, 0]).matmul(&b),
                &(spec(&[17, 33]), spec(&[17, 9])),
            )
            .unwrap(),
        ),
        (
            "a @ b.T",
            trace(
                |(a, b): (Tensor, Tensor)| a.matmul(&b.transpose([1, 0])),
                &(spec(&[33, 17]), spec(&[9, 17])),
            )
            .unwrap(),
        ),
        (
            "batched",
            trace(
                |(a, b): (Tensor, Tensor)| a.matmul(&b),
                &(spec(&[4, 8, 5]), spec(&[4, 5, 3])),
            )
            .unwrap(),
        ),
        (
            // Attention scores, "bqhd,bkhd->bhqk": batch dimensions not leading.
            "bqhd,bkhd->bhqk",
            trace(
                |(q, k): (Tensor, Tensor)| {
                    q.dot_general(
                        &k,
                        DotDims {
                            lhs_batch: vec![0, 2],
                            rhs_batch: vec![0, 2],
                            lhs_contract: vec![3],
                            rhs_contract: vec![3],
                        },
                    )
                },
                &(spec(&[2, 5, 3, 4]), spec(&[2, 6, 3, 4])),
            )
            .unwrap(),
        ),
    ];
    for (name, func) in cases {
        let (simple, _) = simplify(&func).unwrap();
        let exe = GpuProgram::compile(&simple, gpu, GpuOptions::HIGHEST).unwrap();
        assert_eq!(
            exe.host_steps(),
            0,
            "{name}: {}",
            ferrax::ir::print_func(&simple)
        );
        let args = inputs(&func, 1);
        let got = exe.run(&args).unwrap();
        let want = interpret(&func, &args).unwrap();
        assert_close(&got[0], &want[0], 1e-5, name);
    }
}

/// Integer products run on the device as kernels of their own (cuBLAS has none), their sums
/// wrapping as the interpreter's, bit for bit.
#[test]
fn integer_products_run_on_the_device() {
    on_each_gpu!(integer_products_run_on_the_device_on);
}

fn integer_products_run_on_the_device_on<M: GpuMachine + Clone>(gpu: &M) {
    for dtype in [DType::I32, DType::I64, DType::U8] {
        let func = trace(
            |(a, b): (Tensor, Tensor)| (a.matmul(&b), a.transpose([1, 0]).matmul(&a)),
            &(Tensor::spec(dtype, [40, 24]), Tensor::spec(dtype, [24, 16])),
        )
        .unwrap();
        let exe = GpuProgram::compile(&func, gpu, GpuOptions::HIGHEST).unwrap();
        assert_eq!(exe.host_steps(), 0, "{dtype}");
        let args: Vec<Array> = func
            .params
            .iter()
            .map(|ty| {
                // Bits of every width, narrowed by wrapping.
                let bits =
                    (0..ty.numel() as u64).map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15) as i64);
                let x = Array::from_vec(ty.shape.clone(), bits.collect::<Vec<i64>>()).unwrap();
                let narrow = ferrax::ir::Op::Convert { to: dtype };
                ferrax::runtime::eval_op(&narrow, &[&x]).unwrap()
            })
            .collect();
        assert_eq!(
            exe.run(&args).unwrap(),
            interpret(&func, &args).unwrap(),
            "{dtype}"
        );
    }
}

/// f16 and bf16 products run on cuBLAS (f32 sums, as the interpreter's f64 ones rounded once):
/// within an ULP of the half type of the interpreter's, transposed operands included.
#[test]
fn half_products_run_on_cublas() {
    on_each_gpu!(half_products_run_on_cublas_on);
}

fn half_products_run_on_cublas_on<M: GpuMachine + Clone>(gpu: &M) {
    for dtype in [DType::F16, DType::BF16] {
        let func = trace(
            |(a, b): (Tensor, Tensor)| (a.matmul(&b), a.transpose([1, 0]).matmul(&a)),
            &(Tensor::spec(dtype, [40, 24]), Tensor::spec(dtype, [24, 16])),
        )
        .unwrap();
        let (simple, _) = simplify(&func).unwrap();
        let exe = GpuProgram::compile(&simple, gpu, GpuOptions::default()).unwrap();
        assert_eq!(exe.host_steps(), 0, "{dtype}");
        let args = inputs(&func, 2);
        let got = exe.run(&args).unwrap();
        let want = interpret(&func, &args).unwrap();
        for (g, w) in got.iter().zip(&want) {
            assert_close(g, w, rtol(dtype), &format!("{dtype} product"));
        }
    }
}

/// By default (JAX's on these GPUs) f32 products take TF32 tensor cores: each element within
/// 2^-9 of the sum of its products' magnitudes (operands cut to 10-bit mantissas, each off by
/// less than 2^-10 rounded either way) plus the f32 sum's bound, of the exact product; with
/// `MatmulPrecision::Highest`, within the f32 bound alone.
#[test]
fn f32_products_take_tf32_by_default_and_f32_on_request() {
    let Some(dev) = device() else { return };
    let (m, k, n) = (64, 300, 48);
    let func = trace(
        |(a, b): (Tensor, Tensor)| a.matmul(&b),
        &(
            Tensor::spec(DType::F32, [m, k]),
            Tensor::spec(DType::F32, [k, n]),
        ),
    )
    .unwrap();
    let args = inputs(&func, 3);
    let (a, b) = (
        args[0].as_slice::<f32>().unwrap(),
        args[1].as_slice::<f32>().unwrap(),
    );
    for (options, relative) in [
        (
            GpuOptions::default(),
            2f64.powi(-9) + k as f64 * 2f64.powi(-24),
        ),
        (GpuOptions::HIGHEST, k as f64 * 2f64.powi(-24)),
    ] {
        let exe = GpuExecutable::compile(&func, &dev, options).unwrap();
        let got = exe.run(&args).unwrap();
        let got = got[0].as_slice::<f32>().unwrap();
        for i in 0..m {
            for j in 0..n {
                let terms = (0..k).map(|l| f64::from(a[i * k + l]) * f64::from(b[l * n + j]));
                let exact: f64 = terms.clone().sum();
                let magnitude: f64 = terms.map(f64::abs).sum();
                let error = (f64::from(got[i * n + j]) - exact).abs();
                assert!(
                    error <= relative * magnitude,
                    "{options:?} [{i}, {j}]: {} vs {exact}",
                    got[i * n + j]
                );
            }
        }
    }
}

#[test]
fn reductions_over_rows_and_columns_run_on_the_device() {
    on_each_gpu!(reductions_over_rows_and_columns_run_on_the_device_on);
}

fn reductions_over_rows_and_columns_run_on_the_device_on<M: GpuMachine + Clone>(gpu: &M) {
    // Rows of 257 take one element a thread at a time; rows of 3001, four in flight, then
    // a tail (3001 is not within two strides of a multiple of four 256-thread strides).
    for (rows, cols) in [(300, 257), (24, 3001)] {
        reductions_of_shape_on(gpu, rows, cols);
    }
}

fn reductions_of_shape_on<M: GpuMachine + Clone>(gpu: &M, rows: usize, cols: usize) {
    let mut data: Vec<f32> = (0..rows * cols)
        .map(|i| ((i * 7919) % 1000) as f32 / 100.0 - 5.0)
        .collect();
    data[5] = f32::NAN;
    data[rows * cols - 2] = -0.0;
    let x = Array::from_vec([rows, cols], data.clone()).unwrap();
    let spec = Tensor::spec(DType::F32, [rows, cols]);
    // Max and min round nothing: bit-identical to the interpreter (any NaN for NaN).
    let exact: [(&str, Program); 4] = [
        ("row max", |t| t.max(-1)),
        ("row min", |t| t.min(-1)),
        ("column max", |t| t.max(0)),
        ("column min", |t| t.min(0)),
    ];
    for (name, f) in exact {
        let func = trace(f, &spec).unwrap();
        let exe = GpuProgram::compile(&func, gpu, GpuOptions::HIGHEST).unwrap();
        assert_eq!(exe.host_steps(), 0, "{name} should run on the device");
        let got = exe.run(std::slice::from_ref(&x)).unwrap();
        let want = interpret(&func, std::slice::from_ref(&x)).unwrap();
        let bits = |a: &Array| -> Vec<u32> {
            let canonical = |v: &f32| if v.is_nan() { f32::NAN } else { *v };
            a.as_slice::<f32>()
                .unwrap()
                .iter()
                .map(|v| canonical(v).to_bits())
                .collect()
        };
        assert_eq!(bits(&got[0]), bits(&want[0]), "{name}");
    }
    // Sums: within the f32 accumulation bound n·2⁻²⁴·Σ|x| of the exact (f64) sum.
    let sums: [(&str, Program, bool); 2] = [
        ("row sum", |t| t.sum(-1), true),
        ("column sum", |t| t.sum(0), false),
    ];
    for (name, f, by_row) in sums {
        let func = trace(f, &spec).unwrap();
        let exe = GpuProgram::compile(&func, gpu, GpuOptions::HIGHEST).unwrap();
        assert_eq!(exe.host_steps(), 0, "{name} should run on the device");
        let got = exe.run(std::slice::from_ref(&x)).unwrap();
        let got = got[0].as_slice::<f32>().unwrap();
        let (outer, n) = if by_row { (rows, cols) } else { (cols, rows) };
        for (o, &g) in got.iter().enumerate().take(outer) {
            let terms: Vec<f64> = (0..n)
                .map(|j| {
                    let i = if by_row { o * cols + j } else { j * cols + o };
                    f64::from(data[i])
                })
                .collect();
            let exact: f64 = terms.iter().sum();
            if exact.is_nan() {
                assert!(g.is_nan(), "{name} {o}: {g}");
                continue;
            }
            let bound = n as f64 * 2f64.powi(-24) * terms.iter().map(|t| t.abs()).sum::<f64>();
            assert!(
                (f64::from(g) - exact).abs() <= bound,
                "{name} {o}: {g} vs {exact} (bound {bound:e})"
            );
        }
    }
    // Over axes that are not consecutive: a reduction per run, on the device.
    let x3 = Array::from_vec([3, rows / 3, cols], data).unwrap();
    let spec3 = Tensor::spec(DType::F32, [3, rows / 3, cols]);
    let separated: [(&str, Program); 2] = [
        ("max over [0, 2]", |t| t.max([0, 2])),
        ("sum over [0, 2]", |t| t.sum([0, 2])),
    ];
    for (name, f) in separated {
        let func = trace(f, &spec3).unwrap();
        let exe = GpuProgram::compile(&func, gpu, GpuOptions::HIGHEST).unwrap();
        assert_eq!(exe.host_steps(), 0, "{name} should run on the device");
        let got = exe.run(std::slice::from_ref(&x3)).unwrap();
        let want = interpret(&func, std::slice::from_ref(&x3)).unwrap();
        assert_close(&got[0], &want[0], rtol(DType::F32), name);
    }
    // i64 sums and products wrap, as the interpreter's: bit for bit.
    let wide: Vec<i64> = (0..rows * cols)
        .map(|i| (i as i64).wrapping_mul(0x9E37_79B9_7F4A_7C15u64 as i64))
        .collect();
    let x64 = Array::from_vec([rows, cols], wide).unwrap();
    let spec64 = Tensor::spec(DType::I64, [rows, cols]);
    let integer: [(&str, Program); 4] = [
        ("i64 row sum", |t| t.sum(-1)),
        ("i64 column product", |t| t.prod(0)),
        ("i64 row max", |t| t.max(-1)),
        ("i64 column min", |t| t.min(0)),
    ];
    for (name, f) in integer {
        let func = trace(f, &spec64).unwrap();
        let exe = GpuProgram::compile(&func, gpu, GpuOptions::HIGHEST).unwrap();
        assert_eq!(exe.host_steps(), 0, "{name} should run on the device");
        let args = std::slice::from_ref(&x64);
        assert_eq!(
            exe.run(args).unwrap(),
            interpret(&func, args).unwrap(),
            "{name}"
        );
    }
    // Halves reduce in f32 and round once; bools reduce as any and all.
    let others: [(&str, Program, DType); 4] = [
        ("bf16 row sum", |t| t.sum(-1), DType::BF16),
        ("f16 column max", |t| t.max(0), DType::F16),
        ("any of a row", |t| t.greater(4.9).max(-1), DType::F32),
        ("all of a column", |t| t.greater(-4.9).min(0), DType::F32),
    ];
    for (name, f, dtype) in others {
        let func = trace(f, &Tensor::spec(dtype, [rows, cols])).unwrap();
        let exe = GpuProgram::compile(&func, gpu, GpuOptions::HIGHEST).unwrap();
        assert_eq!(exe.host_steps(), 0, "{name} should run on the device");
        let args = [eval_op(&Op::Convert { to: dtype }, &[&x]).unwrap()];
        let (got, want) = (exe.run(&args).unwrap(), interpret(&func, &args).unwrap());
        assert_close(&got[0], &want[0], rtol(dtype), name);
    }
}

/// Rows of up to 16,384 columns run as row kernels of up to 1,024 threads, and longer rows
/// (up to 262,144 columns, more than 65,536 only when 32 rows or more) as streamed row
/// kernels, a chunk of 8,192 columns at a time: softmax and layernorm gradients against the
/// interpreter, f64 and rows of whole chunks among them.
#[test]
fn long_rows_run_as_row_kernels() {
    on_each_gpu!(long_rows_run_as_row_kernels_on);
}

fn long_rows_run_as_row_kernels_on<M: GpuMachine + Clone>(gpu: &M) {
    let spec = |s: &[usize]| Tensor::spec(DType::F32, s.to_vec());
    let softmax = |d: DType, cols: usize| {
        trace(|x: Tensor| nn::softmax(&x, -1), &Tensor::spec(d, [3, cols])).unwrap()
    };
    let layernorm_grad = |cols: usize| {
        trace(
            |(x, g, w): (Tensor, Tensor, Tensor)| {
                let loss = |x: Tensor| (common::layernorm(&x, &g, &g) * &w).sum([0, 1]);
                ferrax::grad(loss)(x)
            },
            &(spec(&[3, cols]), spec(&[cols]), spec(&[3, cols])),
        )
        .unwrap()
    };
    for (name, func) in [
        ("softmax", softmax(DType::F32, 16384)),
        ("layernorm gradient", layernorm_grad(12288)),
        ("streamed softmax", softmax(DType::F32, 65536)),
        ("streamed f64 softmax", softmax(DType::F64, 20000)),
        ("streamed layernorm gradient", layernorm_grad(24576)),
    ] {
        let (simple, _) = simplify(&func).unwrap();
        let exe = GpuProgram::compile(&simple, gpu, GpuOptions::HIGHEST).unwrap();
        assert_eq!(exe.host_steps(), 0, "{name}");
        assert!(exe.kernels().iter().any(|k| k.rows.is_some()), "{name}");
        let args = inputs(&func, 5);
        let (got, want) = (exe.run(&args).unwrap(), interpret(&func, &args).unwrap());
        assert_close(&got[0], &want[0], rtol(want[0].dtype()), name);
    }
    // Fewer than 32 rows of more than 65,536 columns would stream through a block each: they
    // run as kernels and reductions split across blocks instead; 32 such rows stream.
    let few = softmax(DType::F32, 131_072);
    let plan = GpuPlan::new(&few, PtxTarget::Sm80, MathMode::Accurate).unwrap();
    assert!(plan.kernels.iter().all(|k| k.rows.is_none()));
    assert_eq!(
        plan.split_reductions().len(),
        2,
        "the row max and the row sum"
    );
    let exe = GpuProgram::compile(&few, gpu, GpuOptions::HIGHEST).unwrap();
    assert_eq!(exe.host_steps(), 0);
    let args = inputs(&few, 6);
    let (got, want) = (exe.run(&args).unwrap(), interpret(&few, &args).unwrap());
    assert_close(&got[0], &want[0], rtol(DType::F32), "few long rows");
    let many = trace(
        |x: Tensor| nn::softmax(&x, -1),
        &Tensor::spec(DType::F32, [32, 131_072]),
    )
    .unwrap();
    let plan = GpuPlan::new(&many, PtxTarget::Sm80, MathMode::Accurate).unwrap();
    assert!(plan.kernels.iter().any(|k| k.rows.is_some()));
}

/// Reductions of too few results for the GPU's blocks, each of many elements, split in two
/// launches (partial results of segments, then their totals): whole-array sums and maxima,
/// column sums and minima over a large batch into a few columns, in every type. Maxima,
/// minima, integer sums and bools are exact; float sums within the accumulation bound of their
/// type (halves summed in f32, rounded once).
#[test]
fn few_long_reductions_split_across_blocks() {
    on_each_gpu!(few_long_reductions_split_across_blocks_on);
}

fn few_long_reductions_split_across_blocks_on<M: GpuMachine + Clone>(gpu: &M) {
    type Case = (&'static str, Program, DType, &'static [usize]);
    let cases: [Case; 9] = [
        ("sum of all", |x| x.sum(0), DType::F32, &[300_000]),
        ("max of rows", |x| x.max(-1), DType::F32, &[3, 100_000]),
        ("sum of columns", |x| x.sum(0), DType::F32, &[60_000, 10]),
        ("min of columns", |x| x.min(0), DType::F64, &[40_000, 3]),
        ("bf16 sum of all", |x| x.sum(0), DType::BF16, &[200_000]),
        ("f16 sum of columns", |x| x.sum(0), DType::F16, &[50_000, 4]),
        ("i32 sum of all", |x| x.sum(0), DType::I32, &[250_000]),
        ("i64 max of columns", |x| x.max(0), DType::I64, &[50_000, 5]),
        ("any of all", |x| x.max(0), DType::Bool, &[200_000]),
    ];
    for (name, body, dtype, shape) in cases {
        let func = trace(body, &Tensor::spec(dtype, shape.to_vec())).unwrap();
        let plan = GpuPlan::new(&func, PtxTarget::Sm80, MathMode::Accurate).unwrap();
        let [(_, partial, total)] = plan.split_reductions()[..] else {
            panic!("{name}: not split");
        };
        // The most additions on any path to a result: a thread's share of its segment (a
        // row's threads, or a column's lanes), then the combining of partials (5 shuffle
        // levels and 5 across warps, or the lanes in turn), in both kernels.
        let additions: usize = [partial, total]
            .map(|l| &plan.reductions[plan.reduce_launches[l].parts[0]])
            .iter()
            .map(|k| match k.layout {
                ReduceLayout::Rows => k.segment().div_ceil(k.block() as usize) + 10,
                ReduceLayout::Columns => k.segment().div_ceil(k.lanes()) + k.lanes(),
            })
            .sum();
        let n = shape.iter().product::<usize>();
        let input = match dtype {
            // Large magnitudes, so that a wrong fold would wrap differently.
            DType::I64 => Array::from_vec(
                shape.to_vec(),
                (0..n as i64)
                    .map(|i| (i * 7919) % 100_003 - (1 << 40))
                    .collect(),
            )
            .unwrap(),
            // One true element, late in the array.
            DType::Bool => {
                Array::from_vec(shape.to_vec(), (0..n).map(|i| i == n - 77).collect()).unwrap()
            }
            _ => inputs(&func, 7).remove(0),
        };
        let exe = GpuProgram::compile(&func, gpu, GpuOptions::HIGHEST).unwrap();
        assert_eq!(exe.host_steps(), 0, "{name}");
        let got = exe.run(std::slice::from_ref(&input)).unwrap().remove(0);
        let want = interpret(&func, std::slice::from_ref(&input))
            .unwrap()
            .remove(0);
        if matches!(dtype, DType::F32 | DType::F16 | DType::BF16) && name.contains("sum") {
            // Each result's error, summed in f32: at most `additions`·2^-24 of its terms'
            // magnitudes (2^-23 for margin), plus its own rounding to its type.
            let results = want.shape().numel();
            let reduced = n / results;
            let terms = input.to_f64_vec();
            let unit = match dtype {
                DType::F16 => 2f64.powi(-11),
                DType::BF16 => 2f64.powi(-8),
                _ => 0.0,
            };
            for (r, (g, w)) in got.to_f64_vec().iter().zip(want.to_f64_vec()).enumerate() {
                let magnitude: f64 = (0..reduced)
                    .map(|j| match results {
                        1 => terms[j].abs(),
                        _ => terms[j * results + r].abs(),
                    })
                    .sum();
                let bound = additions as f64 * 2f64.powi(-23) * magnitude;
                assert!(
                    (g - w).abs() <= bound + w.abs() * unit,
                    "{name}: result {r}: {g} want {w} (bound {bound})"
                );
            }
        } else {
            assert_eq!(got, want, "{name}");
        }
    }
    // No results, nothing to split.
    let empty = trace(
        |x: Tensor| x.sum(-1),
        &Tensor::spec(DType::F32, [0, 100_000]),
    )
    .unwrap();
    let exe = GpuProgram::compile(&empty, gpu, GpuOptions::HIGHEST).unwrap();
    let args = inputs(&empty, 1);
    assert_eq!(exe.run(&args).unwrap(), interpret(&empty, &args).unwrap());
}

/// The CPU backend's fusion property test on the GPU: random programs of every float type
/// (flat and row kernels, reductions over rows and columns, broadcasts, compares, selects,
/// clamps, rounding through other float types) give the interpreter's bits exactly, any NaN
/// equal to any other. f64 transcendentals stay out: the GPU computes them by its own
/// expansions, within their ULP bounds but not the host's bits.
#[test]
fn random_fusion_programs_match_the_interpreter() {
    on_each_gpu!(random_fusion_programs_match_the_interpreter_on);
}

fn random_fusion_programs_match_the_interpreter_on<M: GpuMachine + Clone>(gpu: &M) {
    let dtypes = ["f32", "f64", "f16", "bf16"];
    // Then row kernels of several passes, and rows longer than registers hold: streamed row
    // kernels, whose later passes compute again what earlier ones computed.
    let long = [(1, 16411), (2, 16900)];
    // Then tall arrays of a few columns, whose column maxima and minima split across blocks.
    let tall = [(12000, 3), (9000, 5)];
    let (mut launches, mut streamed, mut recomputing, mut splits) = (0, 0, 0, 0);
    for seed in 0..500u64 {
        let dtype = dtypes[seed as usize % dtypes.len()];
        let shape = match (seed.checked_sub(480), seed.checked_sub(440)) {
            (Some(s), _) => tall[s as usize % tall.len()],
            (None, Some(s)) => long[s as usize % long.len()],
            (None, None) => SHAPES[(seed as usize / dtypes.len()) % SHAPES.len()],
        };
        let mix = Mix {
            row_passes: (400..480).contains(&seed),
            ..Mix::default()
        };
        let text = random_fusion_program(seed, dtype, shape, mix);
        let func = ferrax::ir::parse_func(&text).unwrap();
        let (simple, _) = simplify(&func).unwrap();
        let exe = GpuProgram::compile(&simple, gpu, GpuOptions::HIGHEST)
            .unwrap_or_else(|e| panic!("seed {seed}: {e}\n{text}"));
        assert_eq!(exe.host_steps(), 0, "seed {seed}\n{text}");
        launches += exe.kernels().len();
        let plan = GpuPlan::new(&simple, PtxTarget::Sm80, MathMode::Accurate).unwrap();
        splits += plan.split_reductions().len();
        for kernel in exe.kernels() {
            if row_layout(kernel).is_some_and(|l| l.streamed) {
                streamed += 1;
                recomputing += usize::from(carries_between_passes(kernel));
            }
        }
        let args = float_inputs(&func, seed);
        let (got, want) = (exe.run(&args).unwrap(), interpret(&func, &args).unwrap());
        assert_same_bits_any_nan(&got, &want, &format!("seed {seed}\n{text}\n{simple}"));
    }
    assert!(launches >= 300, "only {launches} kernels");
    assert!(streamed >= 40, "only {streamed} streamed row kernels");
    assert!(
        recomputing >= 25,
        "only {recomputing} streamed row kernels compute values again"
    );
    assert!(splits >= 5, "only {splits} split reductions");
}

/// The same programs ending in a transcendental and a sum over rows (the CPU's property test
/// of what rounds differently): f32 transcendentals within 3 ULP of the interpreter's, sums
/// within the f32 accumulation bound, in every order the GPU reduces.
#[test]
fn random_fusion_programs_with_transcendentals_and_sums_agree_with_the_interpreter() {
    on_each_gpu!(random_fusion_programs_with_transcendentals_and_sums_on);
}

fn random_fusion_programs_with_transcendentals_and_sums_on<M: GpuMachine + Clone>(gpu: &M) {
    for seed in 0..240u64 {
        let (func, text, tail) = tail_case(seed, false);
        let (simple, _) = simplify(&func).unwrap();
        let exe = GpuProgram::compile(&simple, gpu, GpuOptions::HIGHEST).unwrap();
        assert_eq!(exe.host_steps(), 0, "seed {seed}\n{text}");
        let args = float_inputs(&func, seed);
        let (got, want) = (exe.run(&args).unwrap(), interpret(&func, &args).unwrap());
        assert_tail_close(&got, &want, tail, &format!("seed {seed}\n{text}"));
    }
}

/// i32 and i64 division, remainders, powers, abs and sign in a kernel on the device, the
/// interpreter's edge cases included (`x / 0 = -1`, `x % 0 = x`, `MIN / -1 = MIN`, negative
/// exponents, `abs(MIN) = MIN`), bit for bit.
#[test]
fn integer_division_runs_on_the_device() {
    on_each_gpu!(integer_division_runs_on_the_device_on);
}

fn integer_division_runs_on_the_device_on<M: GpuMachine + Clone>(gpu: &M) {
    let (min, max) = (i64::MIN, i64::MAX);
    let a = [7, -7, 7, -7, min, min, 5, 0, min, max, -1, 9];
    let b = [2, 2, -2, -2, -1, 0, 0, 0, 1, -1, 3, 1 << 40];
    for dtype in [DType::I32, DType::I64] {
        let spec = Tensor::spec(dtype, [12]);
        let func = trace(
            |(a, b): (Tensor, Tensor)| (&a / &b, &a % &b, a.pow(&b), a.abs(), b.sign()),
            &(spec.clone(), spec),
        )
        .unwrap();
        let exe = GpuProgram::compile(&func, gpu, GpuOptions::HIGHEST).unwrap();
        assert_eq!(exe.host_steps(), 0, "{dtype}");
        // The i32 arguments are the i64 ones clamped: extremes where theirs are.
        let args: Vec<Array> = [&a, &b]
            .iter()
            .map(|v| match dtype {
                DType::I32 => {
                    let clamp = |&x: &i64| x.clamp(i32::MIN.into(), i32::MAX.into()) as i32;
                    Array::from_vec([12], v.iter().map(clamp).collect::<Vec<i32>>())
                }
                _ => Array::from_vec([12], v.to_vec()),
            })
            .collect::<Result<_, _>>()
            .unwrap();
        let want = interpret(&func, &args).unwrap();
        assert_eq!(exe.run(&args).unwrap(), want, "{dtype}");
    }
}

/// Conversions through u8, i64 and bool in a kernel on the device, bit for bit as the
/// interpreter's: saturation, NaN to 0, wrapping narrowings, `x != 0` (NaN true).
#[test]
fn conversions_through_u8_i64_and_bool_on_the_device() {
    on_each_gpu!(conversions_through_u8_i64_and_bool_on_the_device_on);
}

fn conversions_through_u8_i64_and_bool_on_the_device_on<M: GpuMachine + Clone>(gpu: &M) {
    let func = trace(
        |x: Tensor| {
            let u = x.astype(DType::U8);
            let i = x.astype(DType::I64);
            (
                u.astype(DType::F32),
                i.astype(DType::I32).astype(DType::U8),
                x.astype(DType::Bool).astype(DType::F32),
            )
        },
        &Tensor::spec(DType::F32, [12]),
    )
    .unwrap();
    let exe = GpuProgram::compile(&func, gpu, GpuOptions::HIGHEST).unwrap();
    assert_eq!(exe.host_steps(), 0);
    let x = common::conversion_edges();
    let args = [Array::from_vec([12], x).unwrap()];
    assert_eq!(exe.run(&args).unwrap(), interpret(&func, &args).unwrap());
}

/// f32 and f64 remainders in a kernel on the device: `fmod` exactly, bit for bit, over pairs of
/// every exponent (f64 subnormals included), zeros, infinities and NaN included.
#[test]
fn float_remainders_are_exact_on_the_device() {
    on_each_gpu!(float_remainders_are_exact_on_the_device_on);
}

fn float_remainders_are_exact_on_the_device_on<M: GpuMachine + Clone>(gpu: &M) {
    let f32s: Vec<f32> = (0..256u32)
        .map(|i| f32::from_bits(i << 24 | i.wrapping_mul(0x9E37_79B9) >> 8))
        .chain([0.0, -0.0, f32::INFINITY, f32::NEG_INFINITY, f32::NAN, 1e-45])
        .collect();
    let f64s: Vec<f64> = (0..4096u64)
        .step_by(29)
        .map(|i| f64::from_bits(i << 52 | i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 12))
        .chain([
            0.0,
            -0.0,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            5e-324,
        ])
        .chain([
            f64::MAX,
            f64::MIN_POSITIVE,
            -3.7e-310,
            2.2e-308,
            1.5,
            -1e300,
        ])
        .collect();
    remainders_are_exact(gpu, &f32s, |x, y| x % y);
    remainders_are_exact(gpu, &f64s, |x, y| x % y);
}

/// A float compared bit for bit.
trait FloatBits: ferrax::ir::Element + std::fmt::LowerExp {
    fn bits(self) -> u64;
    fn nan(self) -> bool;
}

impl FloatBits for f32 {
    fn bits(self) -> u64 {
        u64::from(self.to_bits())
    }
    fn nan(self) -> bool {
        self.is_nan()
    }
}

impl FloatBits for f64 {
    fn bits(self) -> u64 {
        self.to_bits()
    }
    fn nan(self) -> bool {
        self.is_nan()
    }
}

/// `x % y` on the GPU for every pair of `values` is `rem`'s, bit for bit (any NaN for NaN).
fn remainders_are_exact<M: GpuMachine + Clone, T: FloatBits>(
    gpu: &M,
    values: &[T],
    rem: fn(T, T) -> T,
) {
    let (xs, ys): (Vec<T>, Vec<T>) = values
        .iter()
        .flat_map(|&x| values.iter().map(move |&y| (x, y)))
        .unzip();
    let n = xs.len();
    let spec = Tensor::spec(T::DTYPE, [n]);
    let func = trace(|(a, b): (Tensor, Tensor)| &a % &b, &(spec.clone(), spec)).unwrap();
    let exe = GpuProgram::compile(&func, gpu, GpuOptions::HIGHEST).unwrap();
    assert_eq!(exe.host_steps(), 0);
    let args = [
        Array::from_vec([n], xs.clone()).unwrap(),
        Array::from_vec([n], ys.clone()).unwrap(),
    ];
    let got = exe.run(&args).unwrap();
    let got = got[0].as_slice::<T>().unwrap();
    for ((&x, &y), &r) in xs.iter().zip(&ys).zip(got) {
        let want = rem(x, y);
        assert!(
            r.bits() == want.bits() || (r.nan() && want.nan()),
            "{} {x:e} % {y:e} = {r:e}, want {want:e}",
            T::DTYPE
        );
    }
}

#[test]
fn transposes_broadcasts_and_slices_are_copied_on_the_device() {
    on_each_gpu!(transposes_broadcasts_and_slices_are_copied_on_the_device_on);
}

fn transposes_broadcasts_and_slices_are_copied_on_the_device_on<M: GpuMachine + Clone>(gpu: &M) {
    let func = trace(
        |(a, b): (Tensor, Tensor)| {
            (
                a.transpose([2, 0, 1]),
                b.broadcast_to([7, 3, 5]),
                a.slice_strided(&[1, 0, 2], &[4, 6, 7], &[1, 2, 3]),
            )
        },
        &(
            Tensor::spec(DType::F32, [5, 6, 7]),
            Tensor::spec(DType::F64, [3, 1]),
        ),
    )
    .unwrap();
    let exe = GpuProgram::compile(&func, gpu, GpuOptions::HIGHEST).unwrap();
    assert_eq!(exe.host_steps(), 0);
    let args = inputs(&func, 4);
    assert_eq!(
        exe.run(&args).unwrap(),
        interpret(&func, &args).unwrap(),
        "bit for bit"
    );
}

#[test]
fn runtime_caches_modules_and_memory_and_reports_bad_devices() {
    let Some(dev) = device() else { return };
    let func = trace(
        |x: Tensor| (x.exp() + 1.0).log(),
        &Tensor::spec(DType::F32, [1000]),
    )
    .unwrap();
    let a = GpuExecutable::compile(&func, &dev, GpuOptions::HIGHEST).unwrap();
    let b = GpuExecutable::compile(&func, &dev, GpuOptions::HIGHEST).unwrap();
    assert_eq!(a.ptx(), b.ptx());
    let m1 = dev.load_module(a.ptx()).unwrap();
    let m2 = dev.load_module(b.ptx()).unwrap();
    assert!(Arc::ptr_eq(&m1, &m2), "the module is loaded once");
    let x = Array::from_vec([1000], vec![0.5f32; 1000]).unwrap();
    drop(a.run(std::slice::from_ref(&x)).unwrap());
    assert!(dev.cached_bytes() > 0, "freed buffers are kept for reuse");
    let (major, _) = dev.compute_capability();
    assert!(major >= 8, "sm_80 or later");
    match CudaDevice::new(1000) {
        Err(CudaError::NoDevice { ordinal, .. }) => assert_eq!(ordinal, 1000),
        other => panic!("expected NoDevice, got {other:?}"),
    }
}

#[test]
fn a_missing_gpu_is_an_error_not_a_panic() {
    match Device::cuda(1000) {
        Err(ferrax::Error::Device(message)) => assert!(!message.is_empty()),
        other => panic!("expected a device error, got {other:?}"),
    }
}

#[test]
fn jit_follows_its_inputs_to_the_gpu() {
    let Some(dev) = device() else { return };
    let gpu = Device::Cuda(dev);
    // True f32 products, so the GPU agrees with the CPU to rounding.
    let f = jit(|(x, w): (Tensor, Tensor)| nn::softmax(&x.matmul(&w), -1))
        .matmul_precision(MatmulPrecision::Highest);
    let x = Tensor::from_vec([4, 3], (0..12).map(|i| i as f32 / 7.0).collect::<Vec<_>>());
    let w = Tensor::from_vec(
        [3, 5],
        (0..15).map(|i| (i as f32 - 7.0) / 9.0).collect::<Vec<_>>(),
    );
    let on_cpu = f.call((x.clone(), w.clone())).unwrap();
    let on_gpu = f.call((x.to_device(&gpu).unwrap(), w.clone())).unwrap();
    assert_eq!(on_gpu.device(), gpu, "results stay on the GPU");
    assert_eq!(f.trace_count(), 2, "a new device is a new signature");
    assert_close(
        &on_gpu.to_array().unwrap(),
        &on_cpu.to_array().unwrap(),
        1e-6,
        "softmax",
    );
    f.call((x.to_device(&gpu).unwrap(), w.to_device(&gpu).unwrap()))
        .unwrap();
    assert_eq!(f.trace_count(), 2, "the GPU program is cached");
}

#[test]
fn the_training_example_learns_on_the_gpu() {
    let Some(dev) = device() else { return };
    let report = train_mlp::train(8, false, &Device::Cuda(dev)).unwrap();
    assert!(
        report.final_loss < 0.15,
        "training loss {}",
        report.final_loss
    );
    assert!(
        report.test_accuracy >= 0.95,
        "test accuracy {}",
        report.test_accuracy
    );
}

/// Indexing on the device at a size past one block: an embedding lookup with its positional
/// add (a fused row gather), its table gradient (a row scatter), the gradient of
/// `take_along_axis` (an element scatter), a column gather (a gather kernel) and a dynamic
/// update (copies reading their starts), each the interpreter's result bit for bit, with
/// repeated, negative and out-of-range indices.
#[test]
fn indexing_runs_on_the_device_as_the_interpreter() {
    let Some(dev) = device() else { return };
    let (vocab, width, tokens) = (1000, 64, 4096);
    let ids: Vec<i32> = (0..tokens)
        .map(|k| (k as i32 * 7919) % (vocab as i32 + 40) - 20)
        .collect();
    let ids = Tensor::from_vec([tokens], ids);
    let table = Tensor::from_vec(
        [vocab, width],
        (0..vocab * width)
            .map(|k| ((k * 37) % 101) as f32 / 50.0 - 1.0)
            .collect::<Vec<f32>>(),
    );
    let pos = Tensor::from_vec(
        [tokens, width],
        (0..tokens * width)
            .map(|k| ((k * 13) % 29) as f32 / 14.0 - 1.0)
            .collect::<Vec<f32>>(),
    );
    let labels = Tensor::from_vec(
        [tokens, 1],
        (0..tokens)
            .map(|k| (k % (width + 3)) as i32 - 1)
            .collect::<Vec<i32>>(),
    );
    let start = Tensor::from_vec([], vec![vocab as i32 - 10]);
    let program = |(t, p, i, l, s): (Tensor, Tensor, Tensor, Tensor, Tensor)| {
        let rows = nn::embedding(&t, &i) + &p;
        let picked = ferrax::grad(|x: Tensor| x.take_along_axis(&l, 1).sum(..))(rows.clone());
        let table_grad = ferrax::grad(|t: Tensor| (nn::embedding(&t, &i) * 2.0).sum(..))(t.clone());
        let columns = t.take_with(&l.reshape([-1]), 1, ferrax::IndexMode::Clip);
        let updated = t.dynamic_update_slice(&p.slice(&[0, 0], &[20, width]), &[&s, &s]);
        (rows, picked, table_grad, columns, updated)
    };
    let args = (table, pos, ids, labels, start);
    let specs = (
        Tensor::spec(DType::F32, [vocab, width]),
        Tensor::spec(DType::F32, [tokens, width]),
        Tensor::spec(DType::I32, [tokens]),
        Tensor::spec(DType::I32, [tokens, 1]),
        Tensor::spec(DType::I32, []),
    );
    let (simple, _) = simplify(&trace(program, &specs).unwrap()).unwrap();
    let exe = GpuExecutable::compile(&simple, &dev, GpuOptions::HIGHEST).unwrap();
    assert_eq!(exe.host_steps(), 0, "{simple}");
    let mut leaves = Vec::new();
    ferrax::Tree::flatten(&args, &mut leaves);
    let arrays: Vec<Array> = leaves.iter().map(|t| t.to_array().unwrap()).collect();
    let got = exe.run(&arrays).unwrap();
    let want = interpret(&simple, &arrays).unwrap();
    for (k, (g, w)) in got.iter().zip(&want).enumerate() {
        let bits = |a: &Array| {
            a.to_vec::<f32>()
                .unwrap()
                .iter()
                .map(|x| x.to_bits())
                .collect::<Vec<_>>()
        };
        assert!(
            bits(g) == bits(w),
            "output {k} differs from the interpreter"
        );
    }
}

/// Row scatters by atomics on the device, at an embedding gradient's shape: i32 sums (always
/// atomic) equal the interpreter's bit for bit; f32 sums, atomic when asked for, are within
/// the rounding of a sum of that many terms in another order; the sorted default equals the
/// interpreter's. Rows repeat and fall outside the table.
#[test]
fn atomic_row_scatters_run_on_the_device() {
    let Some(dev) = device() else { return };
    let (vocab, width, tokens) = (3000, 96, 8192);
    let ids: Vec<i32> = (0..tokens)
        .map(|k| (k as i32 * 7919) % (vocab as i32 + 30) - 10)
        .collect();
    let ids = Tensor::from_vec([tokens], ids);
    let grads = |k: usize| ((k * 37) % 101) as f32 / 50.0 - 1.0;
    let g = Tensor::from_vec(
        [tokens, width],
        (0..tokens * width).map(grads).collect::<Vec<f32>>(),
    );
    let counts = Tensor::from_vec(
        [tokens, width],
        (0..tokens * width)
            .map(|k| (k % 13) as i32 - 6)
            .collect::<Vec<i32>>(),
    );
    let program = move |(g, c, i): (Tensor, Tensor, Tensor)| {
        let f = Tensor::zeros(DType::F32, [vocab, width]).at(&i).add(&g);
        let n = Tensor::zeros(DType::I32, [vocab, width]).at(&i).add(&c);
        (f, n)
    };
    let specs = (
        Tensor::spec(DType::F32, [tokens, width]),
        Tensor::spec(DType::I32, [tokens, width]),
        Tensor::spec(DType::I32, [tokens]),
    );
    let (simple, _) = simplify(&trace(program, &specs).unwrap()).unwrap();
    let arrays: Vec<Array> = [g, counts, ids]
        .iter()
        .map(|t| t.to_array().unwrap())
        .collect();
    let want = interpret(&simple, &arrays).unwrap();
    for atomic in [false, true] {
        let options = GpuOptions {
            atomic_float_scatter: atomic,
            ..GpuOptions::HIGHEST
        };
        let exe = GpuExecutable::compile(&simple, &dev, options).unwrap();
        assert_eq!(exe.host_steps(), 0, "{simple}");
        let got = exe.run(&arrays).unwrap();
        assert_eq!(got[1], want[1], "i32 sums");
        if atomic {
            // Each row sums at most a few dozen terms below 1 in magnitude.
            let (g, w) = (got[0].to_f64_vec(), want[0].to_f64_vec());
            let worst = g
                .iter()
                .zip(&w)
                .map(|(a, b)| (a - b).abs())
                .fold(0.0, f64::max);
            assert!(worst <= 1e-5, "f32 sums by atomics off by {worst}");
        } else {
            assert_eq!(got[0], want[0], "f32 sums, sorted");
        }
    }
}

/// A GPU artifact made where `ptxas` is at hand holds cubins for the device's architecture;
/// the device loads them with no driver compilation, and runs them as the PTX-loaded program
/// runs, bit for bit. (Without a device, or without `ptxas`, there is nothing to check here:
/// `tests/cubin.rs` checks the packaging with a stand-in assembler.)
#[test]
fn gpu_artifacts_load_their_cubins_on_the_device() {
    use ferrax::aot_runtime::gpu::GpuProgram as Loaded;
    use ferrax::compiler::backend::gpu::{compile_artifact, gpu_target};
    use ferrax::compiler::backend::ptx::assemble::ptxas;
    let Some(dev) = device() else { return };
    if ptxas().is_none() {
        eprintln!("skipped: no ptxas");
        return;
    }
    let (major, minor) = dev.compute_capability();
    let target = PtxTarget::for_compute_capability(major, minor);
    let f = |x: Tensor| nn::softmax(&(x.matmul(&x.transpose([1, 0])) * 0.1).tanh(), -1);
    let func = trace(f, &Tensor::spec(DType::F32, [64, 32])).unwrap();
    let (simple, _) = simplify(&func).unwrap();
    let bytes = compile_artifact(&simple, target, GpuOptions::HIGHEST, (&[], &[])).unwrap();
    let info = ferrax::compiler::backend::inspect_artifact(&bytes).unwrap();
    assert_eq!(info.cubins, Some(gpu_target(target)));
    let start = std::time::Instant::now();
    let (loaded, _) = Loaded::from_artifact(&bytes, &dev).unwrap();
    eprintln!("loaded from cubins in {:?}", start.elapsed());
    assert!(loaded.loaded_machine_code());
    let x = Array::from_vec(
        [64, 32],
        (0..2048)
            .map(|k| ((k * 13) % 29) as f32 / 29.0 - 0.5)
            .collect::<Vec<f32>>(),
    )
    .unwrap();
    let compiled = GpuProgram::compile(&simple, &dev, GpuOptions::HIGHEST).unwrap();
    let want = compiled.run(std::slice::from_ref(&x)).unwrap();
    assert_eq!(loaded.run(&[x]).unwrap(), want);
}

/// The attention kernels on the device, against the same kernels on the emulated GPU (which
/// `tests/attention.rs` checks against the interpreter): GPT-2's heads (64 features, causal)
/// and smaller ones, f32 products on the scalar kernels and bf16 products on the tensor cores
/// (whose fragment layouts only hardware can confirm). The forward parts and the three
/// gradients agree to f32 sums in another order: the tensor cores' own, and bf16 roundings
/// they may flip.
#[test]
fn attention_kernels_run_on_the_device_as_on_the_emulator() {
    let Some(dev) = device() else { return };
    for (shape, keys, causal, precision) in [
        ([2, 256, 2, 64], 256, true, ", precision=bf16"),
        ([1, 100, 3, 32], 130, false, ", precision=bf16"),
        ([2, 256, 2, 64], 256, true, ""),
        ([1, 70, 2, 16], 40, false, ""),
    ] {
        let [b, t, h, d] = shape;
        let flag = format!("{}{precision}", if causal { ", causal=1" } else { "" });
        let (q, kv, rows) = (
            format!("f32[{b},{t},{h},{d}]"),
            format!("f32[{b},{keys},{h},{d}]"),
            format!("f32[{b},{h},{t}]"),
        );
        let text = format!(
            "func @main(%q: {q}, %k: {kv}, %v: {kv}, %g: {q}, %gl: {rows}) -> ({q}, {rows}, {q}, {kv}, {kv}) {{
  %o = attention %q, %k, %v{flag} : {q}
  %l = attention_lse %q, %k, %v{flag} : {rows}
  %dq = attention_dq %q, %k, %v, %o, %l, %g, %gl{flag} : {q}
  %dk = attention_dk %q, %k, %v, %o, %l, %g, %gl{flag} : {kv}
  %dv = attention_dv %q, %k, %v, %o, %l, %g, %gl{flag} : {kv}
  return %o, %l, %dq, %dk, %dv
}}"
        );
        let func = ferrax::ir::parse_func(&text).unwrap();
        let args = inputs(&func, 3);
        let on_device = GpuProgram::compile(&func, &dev, GpuOptions::HIGHEST).unwrap();
        let emulator = Emulator::default();
        let emulated = GpuProgram::compile(&func, &emulator, GpuOptions::HIGHEST).unwrap();
        // The keys' and values' gradients are one launch on the tensor cores.
        let launches = if !precision.is_empty() && d % 16 == 0 {
            3
        } else {
            4
        };
        assert_eq!(on_device.plan().attentions.len(), launches, "{text}");
        let (got, want) = (on_device.run(&args).unwrap(), emulated.run(&args).unwrap());
        let tol = if precision.is_empty() {
            2e-5
        } else {
            2f64.powi(-4)
        };
        for (k, (g, w)) in got.iter().zip(&want).enumerate() {
            let (g, w) = (g.to_f64_vec(), w.to_f64_vec());
            let scale = w.iter().fold(1f64, |m, x| m.max(x.abs()));
            for (i, (a, e)) in g.iter().zip(&w).enumerate() {
                assert!(
                    (a - e).abs() <= tol * scale,
                    "{shape:?}{flag}: result {k} [{i}] = {a}, emulated {e}"
                );
            }
        }
    }
}

/// A training step recorded as a graph and replayed: three steps chained through their
/// parameters, each the bits of a plain run's (the same work in the same order), whether the
/// arguments are the recording's own buffers or other arrays, on the device and on the
/// emulated GPU.
#[test]
fn recorded_runs_replay_training_steps() {
    on_each_gpu!(recorded_runs_replay_training_steps_on);
}

fn recorded_runs_replay_training_steps_on<M: GpuMachine + Clone>(gpu: &M) {
    let step = |(w1, b1, w2, b2, x, y): (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)| {
        let loss = |(w1, b1, w2, b2): (Tensor, Tensor, Tensor, Tensor)| {
            let h = (x.matmul(&w1) + &b1).tanh();
            let out = h.matmul(&w2) + &b2;
            (out - &y).square().mean(..)
        };
        let params = (w1, b1, w2, b2);
        let (g1, gb1, g2, gb2) = ferrax::grad(loss)(params.clone());
        let (w1, b1, w2, b2) = params;
        (w1 - g1 * 0.1, b1 - gb1 * 0.1, w2 - g2 * 0.1, b2 - gb2 * 0.1)
    };
    let spec = |d: &[usize]| Tensor::spec(DType::F32, d.to_vec());
    let specs = (
        spec(&[16, 32]),
        spec(&[32]),
        spec(&[32, 8]),
        spec(&[8]),
        spec(&[64, 16]),
        spec(&[64, 8]),
    );
    let func = jit(step).lower(&specs).unwrap().simplified().clone();
    let exe = GpuProgram::compile(&func, gpu, GpuOptions::HIGHEST).unwrap();
    assert_eq!(exe.host_steps(), 0);
    let host = inputs(&func, 7);
    let args: Vec<M::Array> = host.iter().map(|a| gpu.upload(a).unwrap()).collect();
    let recording = exe.record().unwrap();
    let (mut plain, mut replayed) = (args.clone(), args.clone());
    for _ in 0..3 {
        let want = exe.run_device(&plain).unwrap();
        let got = exe.replay(&recording, &replayed).unwrap();
        for (k, (g, w)) in got.iter().zip(&want).enumerate() {
            let (g, w) = (gpu.download(g).unwrap(), gpu.download(w).unwrap());
            assert_eq!(g.to_f64_vec(), w.to_f64_vec(), "result {k}");
        }
        plain.splice(..4, want);
        replayed.splice(..4, got);
    }
}

/// `jit(f).cuda_graphs()` on the device: a training step recorded on its first call and
/// replayed after, three steps chained through their parameters, each the bits of the same
/// `jit` without graphs.
#[test]
fn jit_replays_recorded_steps_on_the_device() {
    let Some(dev) = device() else { return };
    let gpu = Device::Cuda(dev);
    let step = |(w, b, x): (Tensor, Tensor, Tensor)| {
        let (gw, gb) =
            ferrax::grad(|(w, b): (Tensor, Tensor)| (x.matmul(&w) + &b).tanh().square().mean(..))(
                (w.clone(), b.clone()),
            );
        (w - gw * 0.1, b - gb * 0.1)
    };
    let (plain, recorded) = (jit(step), jit(step).cuda_graphs());
    let data = |n: usize, s: f32| (0..n).map(|i| (i as f32 * s).sin()).collect::<Vec<_>>();
    let on = |t: Tensor| t.to_device(&gpu).unwrap();
    let x = on(Tensor::from_vec([32, 16], data(512, 0.37)));
    let mut a = (
        on(Tensor::from_vec([16, 8], data(128, 0.11))),
        on(Tensor::from_vec([8], vec![0.0f32; 8])),
    );
    let mut b = a.clone();
    for k in 0..3 {
        a = plain.call((a.0, a.1, x.clone())).unwrap();
        b = recorded.call((b.0, b.1, x.clone())).unwrap();
        assert_eq!(b.0.device(), gpu, "results stay on the GPU");
        for (p, q) in [(&a.0, &b.0), (&a.1, &b.1)] {
            let (p, q) = (p.to_array().unwrap(), q.to_array().unwrap());
            assert_eq!(p.to_f64_vec(), q.to_f64_vec(), "step {k}");
        }
    }
}

/// A recorded run with an empty input and result replays like a plain run, and a recording
/// is refused by another program.
#[test]
fn recordings_take_empty_arrays_and_belong_to_their_program() {
    let gpu = Emulator::default();
    let f = |(x, y): (Tensor, Tensor)| (x * 2.0, y + 1.0);
    let specs = (
        Tensor::spec(DType::F32, [0, 3]),
        Tensor::spec(DType::F32, [4]),
    );
    let func = jit(f).lower(&specs).unwrap().simplified().clone();
    let exe = GpuProgram::compile(&func, &gpu, GpuOptions::HIGHEST).unwrap();
    let other = GpuProgram::compile(&func, &gpu, GpuOptions::HIGHEST).unwrap();
    let args: Vec<_> = inputs(&func, 1)
        .iter()
        .map(|a| gpu.upload(a).unwrap())
        .collect();
    let recording = exe.record().unwrap();
    let want = exe.run_device(&args).unwrap();
    let got = exe.replay(&recording, &args).unwrap();
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(gpu.download(g).unwrap(), gpu.download(w).unwrap());
    }
    let Err(refused) = other.replay(&recording, &args) else {
        panic!("another program's recording was replayed")
    };
    assert!(refused.to_string().contains("another program"), "{refused}");
}

/// A program with work on the host is not recorded, and says why.
#[test]
fn runs_with_host_steps_are_not_recorded() {
    let func = jit(|x: Tensor| {
        ferrax::lax::while_loop(|w: Tensor| w.sum(..).greater(1.0), |w: Tensor| w * 0.5, x)
    })
    .lower(&Tensor::spec(DType::F32, [8]))
    .unwrap()
    .simplified()
    .clone();
    let exe = GpuProgram::compile(&func, &Emulator::default(), GpuOptions::HIGHEST).unwrap();
    let Err(refused) = exe.record() else {
        panic!("a run with a while loop was recorded")
    };
    assert!(
        refused.to_string().contains("cannot be recorded"),
        "{refused}"
    );
}

/// A step of four identical layers, `h = tanh(h·wᵢ)`, and each weight's update by its
/// gradient. The layers' kernels are one entry each way (the forward tanh, the backward
/// derivative), which every layer's launch shares; the four updates, which fusion joins in one
/// kernel, are cut into its independent parts and launched as one loop over their buffers. On
/// the GPU, all as the interpreter computes them.
#[test]
fn repeated_layers_share_entries_and_their_updates_one_loop() {
    on_each_gpu!(repeated_layers_share_entries_and_their_updates_one_loop_on);
}

fn repeated_layers_share_entries_and_their_updates_one_loop_on<M: GpuMachine + Clone>(gpu: &M) {
    let (layers, width, batch) = (4, 24, 6);
    let (simple, _) = simplify(&common::repeated_layers_step(layers, width, batch)).unwrap();
    let plan = GpuPlan::new(&simple, PtxTarget::Sm80, MathMode::Accurate).unwrap();
    let updates = plan.launches.last().unwrap();
    assert_eq!(updates.kernels.len(), layers, "the updates launch together");
    let entry = plan
        .ptx
        .split(".visible .entry ")
        .find(|e| e.starts_with(&format!("{}(", updates.name)))
        .unwrap();
    assert_eq!(
        entry.matches("$L_repeat_0:").count(),
        1,
        "one loop over the updates"
    );
    // One element loop (its label and its branch back).
    assert_eq!(entry.matches("$L_loop").count(), 2, "element loops");
    assert_eq!(entry.matches(".param .u64").count(), layers * 3);
    // Each layer's launches name the entry the first layer's do.
    let names: std::collections::BTreeSet<&str> =
        plan.run.launches.iter().map(|l| l.name.as_str()).collect();
    let entries = plan.ptx.matches(".visible .entry ").count();
    assert!(plan.run.launches.len() > entries, "{entries} entries");
    assert_eq!(names.len() + plan.run.copies.len(), entries);
    let program = GpuProgram::load(plan, PtxTarget::Sm80, gpu, MatmulPrecision::Highest).unwrap();
    let args = inputs(&simple, 7);
    let want = interpret(&simple, &args).unwrap();
    let got = program.run(&args).unwrap();
    for (g, w) in got.iter().zip(&want) {
        assert_close(g, w, 2e-5, "updated weight");
    }
}

/// Softmax cross-entropy against integer labels and its gradient: the label's logit is picked
/// by comparing class indices (an iota along the row) inside the row kernel, with no gather or
/// scatter; labels out of range clamp and negative ones count from the end, as
/// `take_along_axis` reads them. Rows a block holds and streamed rows, against the interpreter.
#[test]
fn cross_entropy_runs_as_row_kernels_with_class_indices() {
    on_each_gpu!(cross_entropy_runs_as_row_kernels_with_class_indices_on);
}

fn cross_entropy_runs_as_row_kernels_with_class_indices_on<M: GpuMachine + Clone>(gpu: &M) {
    use ferrax::compiler::kernel::KOp;
    for cols in [50, 20_000] {
        let func = common::cross_entropy_with_gradient(6, cols);
        let (simple, _) = simplify(&func).unwrap();
        let plan = GpuPlan::new(&simple, PtxTarget::Sm80, MathMode::Accurate).unwrap();
        assert!(plan.run.gathers.is_empty() && plan.run.scatters.is_empty());
        let indexed_rows = plan.kernels.iter().filter(|k| {
            k.rows.is_some() && k.body.iter().any(|i| matches!(i.op, KOp::Index { .. }))
        });
        assert_eq!(indexed_rows.count(), 1, "{cols} columns");
        let exe = GpuProgram::compile(&simple, gpu, GpuOptions::HIGHEST).unwrap();
        assert_eq!(exe.host_steps(), 0);
        let n = cols as i32;
        let labels = vec![0, n - 1, -1, n + 7, -n - 3, 17];
        let mut args = inputs(&func, 11);
        args[1] = Array::new([6], ferrax::ir::Elements::I32(labels)).unwrap();
        let (got, want) = (exe.run(&args).unwrap(), interpret(&func, &args).unwrap());
        assert_close(&got[0], &want[0], rtol(DType::F32), "loss");
        assert_close(&got[1], &want[1], rtol(DType::F32), "gradient");
    }
}

/// Iotas in a row kernel over rows of two axes: one along the inner axis (stride 25 within
/// a row of 100), one along the rows, and one of a row value, against the interpreter.
#[test]
fn row_kernels_compute_iotas_within_and_across_rows() {
    on_each_gpu!(row_kernels_compute_iotas_within_and_across_rows_on);
}

fn row_kernels_compute_iotas_within_and_across_rows_on<M: GpuMachine + Clone>(gpu: &M) {
    use ferrax::compiler::kernel::KOp;
    let func = common::row_iota_program();
    let plan = GpuPlan::new(&func, PtxTarget::Sm80, MathMode::Accurate).unwrap();
    let indices = plan
        .kernels
        .iter()
        .filter(|k| k.rows.is_some())
        .flat_map(|k| &k.body)
        .filter(|i| matches!(i.op, KOp::Index { .. }))
        .count();
    assert!(indices >= 3, "{indices} indices in row kernels");
    let exe = GpuProgram::compile(&func, gpu, GpuOptions::HIGHEST).unwrap();
    assert_eq!(exe.host_steps(), 0);
    let args = inputs(&func, 4);
    let (got, want) = (exe.run(&args).unwrap(), interpret(&func, &args).unwrap());
    for (g, w) in got.iter().zip(&want) {
        assert_close(g, w, rtol(DType::F32), "row iotas");
    }
}

/// On the GPU, elementwise values a backward pass reads are computed again in its kernels
/// from values of fewer bytes, kept alive instead: a GELU layer with bf16 products keeps the
/// bf16 product for its backward pass, not GELU's f32 intermediates, and the cross-entropy's
/// gradient kernel reads the logits again rather than their softmax. Against the interpreter.
#[test]
fn backward_kernels_recompute_forward_values_from_fewer_bytes() {
    on_each_gpu!(backward_kernels_recompute_forward_values_from_fewer_bytes_on);
}

/// The types of the values a plan's kernel launches write.
fn launch_outputs(plan: &GpuPlan) -> impl Iterator<Item = TensorType> + '_ {
    use ferrax::aot_runtime::gpu::Param;
    plan.run
        .launches
        .iter()
        .flat_map(|l| &l.params)
        .filter_map(|p| match p {
            Param::Output(_, t) => Some(t.clone()),
            Param::Input(..) | Param::Partial { .. } => None,
        })
}

fn backward_kernels_recompute_forward_values_from_fewer_bytes_on<M: GpuMachine + Clone>(gpu: &M) {
    use ferrax::DotPrecision;
    let bf16 = DotPrecision::new(DType::BF16, DType::BF16);
    let func = trace(
        |(w1, w2, x): (Tensor, Tensor, Tensor)| {
            let loss = |(w1, w2): (Tensor, Tensor)| {
                let h = x.matmul_with(&w1, bf16).astype(DType::F32);
                let y = nn::gelu(&h, true).matmul_with(&w2, bf16).astype(DType::F32);
                y.square().sum(..)
            };
            ferrax::grad(loss)((w1, w2))
        },
        &(
            Tensor::spec(DType::F32, [32, 128]),
            Tensor::spec(DType::F32, [128, 32]),
            Tensor::spec(DType::F32, [256, 32]),
        ),
    )
    .unwrap();
    let (simple, _) = simplify(&func).unwrap();
    let plan = GpuPlan::new(&simple, PtxTarget::Sm80, MathMode::Accurate).unwrap();
    // Hidden values in f32 ([256, 128], above the bytes worth recomputing) would be GELU's
    // intermediates kept.
    let hidden = TensorType::new(DType::F32, [256, 128]);
    let kept = launch_outputs(&plan).filter(|t| *t == hidden).count();
    assert_eq!(kept, 0, "{}", plan.run.describe_steps());
    let exe = GpuProgram::compile(&simple, gpu, GpuOptions::HIGHEST).unwrap();
    let args = inputs(&func, 8);
    let (got, want) = (exe.run(&args).unwrap(), interpret(&func, &args).unwrap());
    for (g, w) in got.iter().zip(&want) {
        assert_close(g, w, rtol(DType::BF16), "GELU layer gradients");
    }
    // Logits of 75 KB, above the bytes worth recomputing.
    let (func, _) = simplify(&common::cross_entropy_with_gradient(64, 300)).unwrap();
    let plan = GpuPlan::new(&func, PtxTarget::Sm80, MathMode::Accurate).unwrap();
    let logits = TensorType::new(DType::F32, [64, 300]);
    let full = launch_outputs(&plan).filter(|t| *t == logits);
    assert_eq!(
        full.count(),
        1,
        "the gradient alone: {}",
        plan.run.describe_steps()
    );
}

/// Sums, maxima and minima over leading axes (bias and layer-norm gain gradients) fold in the
/// kernel that computes their operand, which is then not written: each thread owns columns
/// and writes their partial results, which reduction launches fold. f32 in vectors of four,
/// f64 in pairs, columns that are not whole vectors, two reductions of different columns in
/// one kernel, operands of the 2,097,152 elements (`COLUMN_OPERAND`) or more that make a column
/// kernel worth its partials (threads take several steps, and several slots on the emulator's
/// two blocks), against the interpreter: maxima and minima bit for bit, sums within rounding.
/// Smaller operands are reductions of their own.
#[test]
fn column_reductions_fold_in_the_kernel_of_their_operand() {
    on_each_gpu!(column_reductions_fold_in_the_kernel_of_their_operand_on);
}

fn column_reductions_fold_in_the_kernel_of_their_operand_on<M: GpuMachine + Clone>(gpu: &M) {
    use ferrax::aot_runtime::gpu::Param;
    let cases: [(DType, [usize; 3], usize); 4] = [
        (DType::F32, [32, 256, 256], 3),
        (DType::F32, [3, 100_003, 7], 3),
        (DType::F64, [8, 43_691, 6], 3),
        (DType::F32, [31, 256, 256], 0),
    ];
    for (dtype, shape, folded) in cases {
        let name = format!("{dtype} {shape:?}");
        let func = trace(
            |(x, w): (Tensor, Tensor)| {
                let y = (&x * &w).tanh();
                // The sum read by a later kernel; maxima and minima of correctly rounded
                // values: bit for bit.
                let sum = y.sum([0, 1]) * &w + 1.0;
                (sum, (&x * &w).max(0), (&x - &w).min([0, 1]))
            },
            &(
                Tensor::spec(dtype, shape.to_vec()),
                Tensor::spec(dtype, [shape[2]]),
            ),
        )
        .unwrap();
        let plan = GpuPlan::new(&func, PtxTarget::Sm80, MathMode::Accurate).unwrap();
        let operand = TensorType::new(dtype, shape.to_vec());
        let steps = plan.run.describe_steps();
        let written = launch_outputs(&plan).filter(|t| *t == operand).count();
        let partials = plan.run.launches.iter().flat_map(|l| &l.params);
        let partials = partials.filter(|p| matches!(p, Param::Partial { .. }));
        assert_eq!(partials.count(), folded, "{name}: {steps}");
        if folded > 0 {
            assert_eq!(written, 0, "{name}: {steps}");
            assert!(plan.reduce_steps().is_empty(), "{name}: {steps}");
        }
        let exe = GpuProgram::compile(&func, gpu, GpuOptions::HIGHEST).unwrap();
        assert_eq!(exe.host_steps(), 0, "{name}");
        let args = inputs(&func, 11);
        let (got, want) = (exe.run(&args).unwrap(), interpret(&func, &args).unwrap());
        assert_close(&got[0], &want[0], rtol(dtype), &format!("{name}: sum"));
        assert!(got[1] == want[1], "{name}: max");
        assert!(got[2] == want[2], "{name}: min");
    }
}

/// Slices of the last axis of a value a kernel computes (a fused projection's q, k and v) are
/// stored by that kernel, each its window of every row, rather than the whole value written and
/// copied three times: f32 windows of whole vectors, bf16, windows that are not whole vectors,
/// a window a later kernel reads, and windows of an input, bit for bit the interpreter's.
#[test]
fn slices_of_the_last_axis_are_stored_by_the_kernel_of_their_operand() {
    on_each_gpu!(slices_of_the_last_axis_are_stored_by_the_kernel_of_their_operand_on);
}

fn slices_of_the_last_axis_are_stored_by_the_kernel_of_their_operand_on<M: GpuMachine + Clone>(
    gpu: &M,
) {
    for (dtype, width) in [(DType::F32, 64), (DType::BF16, 64), (DType::F32, 5)] {
        let name = format!("{dtype} windows of {width}");
        let func = trace(
            |(x, b): (Tensor, Tensor)| {
                let y = &x * 2.0 + &b;
                let q = y.slice(&[0, 0, 0], &[2, 33, width]);
                let k = y.slice(&[0, 0, width], &[2, 33, 2 * width]);
                let v = y.slice(&[0, 0, 2 * width], &[2, 33, 3 * width]);
                // Windows of an input alone: a kernel of loads and window stores.
                let first = x.slice(&[0, 0, 0], &[2, 33, width]);
                let last = x.slice(&[0, 0, 2 * width], &[2, 33, 3 * width]);
                (q * 0.125, k, v, first, last)
            },
            &(
                Tensor::spec(dtype, [2, 33, 3 * width]),
                Tensor::spec(dtype, [3 * width]),
            ),
        )
        .unwrap();
        let plan = GpuPlan::new(&func, PtxTarget::Sm80, MathMode::Accurate).unwrap();
        let steps = plan.run.describe_steps();
        assert!(plan.copy_steps().is_empty(), "{name}: {steps}");
        let whole = TensorType::new(dtype, [2, 33, 3 * width]);
        assert_eq!(
            launch_outputs(&plan).filter(|t| *t == whole).count(),
            0,
            "{name}: {steps}"
        );
        let exe = GpuProgram::compile(&func, gpu, GpuOptions::HIGHEST).unwrap();
        assert_eq!(exe.host_steps(), 0, "{name}");
        let args = inputs(&func, 12);
        let (got, want) = (exe.run(&args).unwrap(), interpret(&func, &args).unwrap());
        assert!(got == want, "{name}");
    }
}

/// Elementwise ops move across windows (the attention's q, k and v, and their gradients):
/// scaled and converted windows of a value a kernel computes are stored by that kernel,
/// converted and scaled, at their own dtype (through the reshapes to heads); a concatenation
/// of converted and scaled operands is loaded by its reader from the unconverted operands, which
/// converts and scales them in registers. No launch writes the f32 windows or the converted
/// operands; bit for bit the interpreter's.
#[test]
fn elementwise_ops_move_across_windows() {
    on_each_gpu!(elementwise_ops_move_across_windows_on);
}

fn elementwise_ops_move_across_windows_on<M: GpuMachine + Clone>(gpu: &M) {
    let width = 32;
    let heads = [2, 33, 4, width / 4];
    let stored = trace(
        |(x, b): (Tensor, Tensor)| {
            let y = &x * 2.0 + &b;
            let window = |i: usize| {
                y.slice(&[0, 0, i * width], &[2, 33, (i + 1) * width])
                    .reshape(heads)
            };
            let q = (window(0) * 0.125).astype(DType::BF16);
            (
                q,
                window(1).astype(DType::BF16),
                window(2).astype(DType::BF16),
            )
        },
        &(
            Tensor::spec(DType::F32, [2, 33, 3 * width]),
            Tensor::spec(DType::F32, [3 * width]),
        ),
    )
    .unwrap();
    let loaded = trace(
        |(a, b, c): (Tensor, Tensor, Tensor)| {
            let flat = |t: Tensor| t.reshape([2, 33, width]);
            let parts = [
                flat(a.astype(DType::F32) * 0.125),
                flat(b.astype(DType::F32)),
                flat(c.astype(DType::F32) * -3.0),
            ];
            let joined = Tensor::concatenate(&parts, -1);
            (joined.sum(&[0, 1][..]), joined.astype(DType::BF16))
        },
        &(
            Tensor::spec(DType::BF16, heads),
            Tensor::spec(DType::BF16, heads),
            Tensor::spec(DType::BF16, heads),
        ),
    )
    .unwrap();
    for (name, func) in [("stored", stored), ("loaded", loaded)] {
        let plan = GpuPlan::new(&func, PtxTarget::Sm80, MathMode::Accurate).unwrap();
        let steps = plan.run.describe_steps();
        assert!(plan.copy_steps().is_empty(), "{name}: {steps}");
        let f32_windows = TensorType::new(DType::F32, [2, 33, width]);
        let f32_heads = TensorType::new(DType::F32, heads);
        let written: Vec<TensorType> = launch_outputs(&plan).collect();
        assert!(
            !written.contains(&f32_windows) && !written.contains(&f32_heads),
            "{name}: {written:?}\n{steps}"
        );
        let kernels = plan.run.launches.len();
        assert_eq!(kernels, 1, "{name}: one kernel\n{steps}");
        let exe = GpuProgram::compile(&func, gpu, GpuOptions::HIGHEST).unwrap();
        assert_eq!(exe.host_steps(), 0, "{name}");
        let args = inputs(&func, 14);
        let (got, want) = (exe.run(&args).unwrap(), interpret(&func, &args).unwrap());
        assert!(got == want, "{name}");
    }
}

/// A row or column reduction of a splat constant alone in its step (which kernels inline, so
/// no step makes the constant as an array) stays a kernel: before, a lone row reduction of one
/// became a reduction launch reading a value never on the device.
#[test]
fn lone_reductions_of_splat_constants_run() {
    on_each_gpu!(lone_reductions_of_splat_constants_run_on);
}

fn lone_reductions_of_splat_constants_run_on<M: GpuMachine + Clone>(gpu: &M) {
    let text = "func @f(%x: f32[5,64]) -> (f32[5,64], f32[64], f32[5]) {
  %c = constant -1.5 : f32[5,64]
  %y = add %x, %c : f32[5,64]
  %m = reduce_max %y, axes=[0] : f32[64]
  %r = reduce_max %c, axes=[1] : f32[5]
  return %y, %m, %r
}";
    let func = ferrax::ir::parse_func(text).unwrap();
    let exe = GpuProgram::compile(&func, gpu, GpuOptions::HIGHEST).unwrap();
    let args = inputs(&func, 3);
    let (got, want) = (exe.run(&args).unwrap(), interpret(&func, &args).unwrap());
    assert!(got == want);
}

/// Moving elementwise ops across windows keeps every program's values, bit for bit in the
/// interpreter: the corpus, the benchmark and gradient programs (simplified, as a GPU plan
/// takes them), and programs the pass changes only partly (operands converted from two
/// dtypes, integer scalings, a window read twice, operands scaled alike). (The reduced w10
/// step's GPU run is checked against the interpreter in `tests/gpt.rs`.)
#[test]
fn moving_across_windows_keeps_every_programs_values() {
    use ferrax::compiler::backend::gpu::move_across_windows;
    use ferrax::compiler::backend::ptx::support::target;
    let mut programs: Vec<(String, ferrax::Func, bool)> = common::corpus()
        .into_iter()
        .chain(common::benchmark_programs())
        .chain(common::gradient_programs())
        .map(|(name, f)| (name.to_string(), simplify(&f).unwrap().0, false))
        .collect();
    let edges = [
        (
            "two source dtypes",
            trace(
                |(a, b): (Tensor, Tensor)| {
                    let parts = [a.astype(DType::F32), b.astype(DType::F32) * 0.5];
                    Tensor::concatenate(&parts, -1)
                },
                &(
                    Tensor::spec(DType::BF16, [3, 4]),
                    Tensor::spec(DType::F16, [3, 2]),
                ),
            ),
        ),
        (
            "integer scalings, a window read twice",
            trace(
                |(x, i): (Tensor, Tensor)| {
                    let y = &x * 3.0;
                    let w = y.slice(&[0, 2], &[3, 5]);
                    let j = (&i * 2).slice(&[0, 1], &[3, 4]);
                    let joined = Tensor::concatenate(&[&i * 3, i.clone()], -1);
                    ((&w * 0.25).astype(DType::BF16), w.exp(), j, joined)
                },
                &(
                    Tensor::spec(DType::F32, [3, 8]),
                    Tensor::spec(DType::I32, [3, 8]),
                ),
            ),
        ),
        (
            "operands scaled alike",
            trace(
                |(a, b): (Tensor, Tensor)| {
                    Tensor::concatenate(&[&a * -2.0, &b * -2.0, a.clone()], -1)
                },
                &(
                    Tensor::spec(DType::F32, [2, 3, 4]),
                    Tensor::spec(DType::F32, [2, 3, 5]),
                ),
            ),
        ),
    ];
    for (name, func) in edges {
        programs.push((name.to_string(), func.unwrap(), true));
    }
    let kernels = target(MathMode::Accurate);
    for (name, func, moves) in programs {
        let after = move_across_windows(&func, &kernels).unwrap_or_else(|e| panic!("{name}: {e}"));
        ferrax::ir::verify(&after).unwrap_or_else(|e| panic!("{name}: {e}"));
        if moves {
            assert_ne!(after, func, "{name}: nothing moved");
        }
        let args = inputs(&func, 21);
        let (want, got) = (
            interpret(&func, &args).unwrap(),
            interpret(&after, &args).unwrap(),
        );
        for (k, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g.dtype(), w.dtype(), "{name} output {k}");
            let bits =
                |a: &Array| -> Vec<u64> { a.to_f64_vec().iter().map(|x| x.to_bits()).collect() };
            assert_eq!(bits(g), bits(w), "{name} output {k}");
        }
    }
}

/// A concatenation along the last axis joins the kernel that reads it, each operand loaded in
/// its window of the row and picked by the column (a backward pass's q, k and v gradients
/// joined for their projection's gradient), rather than copied into a value of its own: f32
/// windows of whole vectors, bf16, windows of single elements, an empty operand, and operands
/// computed by another kernel, bit for bit the interpreter's.
#[test]
fn concatenations_of_the_last_axis_are_loaded_in_windows() {
    on_each_gpu!(concatenations_of_the_last_axis_are_loaded_in_windows_on);
}

fn concatenations_of_the_last_axis_are_loaded_in_windows_on<M: GpuMachine + Clone>(gpu: &M) {
    for (dtype, width, empty) in [
        (DType::F32, 64, 0),
        (DType::BF16, 32, 0),
        (DType::F32, 5, 0),
        (DType::F32, 8, 1),
    ] {
        let name = format!("{dtype} windows of {width}, {empty} empty");
        let func = trace(
            |(a, b, c, e): (Tensor, Tensor, Tensor, Tensor)| {
                let parts = [&a * 2.0, e, b, &c - 1.0];
                Tensor::concatenate(&parts, -1) * 4.0 + 1.0
            },
            &(
                Tensor::spec(dtype, [2, 33, width]),
                Tensor::spec(dtype, [2, 33, 2 * width]),
                Tensor::spec(dtype, [2, 33, width]),
                Tensor::spec(dtype, [2, 33, empty]),
            ),
        )
        .unwrap();
        let plan = GpuPlan::new(&func, PtxTarget::Sm80, MathMode::Accurate).unwrap();
        let steps = plan.run.describe_steps();
        assert!(plan.copy_steps().is_empty(), "{name}: {steps}");
        let exe = GpuProgram::compile(&func, gpu, GpuOptions::HIGHEST).unwrap();
        assert_eq!(exe.host_steps(), 0, "{name}");
        let args = inputs(&func, 13);
        let (got, want) = (exe.run(&args).unwrap(), interpret(&func, &args).unwrap());
        assert!(got == want, "{name}");
    }
}

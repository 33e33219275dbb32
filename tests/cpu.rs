//! The CPU backend (fusion, kernel IR, Cranelift, `gemm`) against the reference interpreter:
//! every corpus program and gradient, simplified as `jit` does, gives bit-identical results,
//! except where a matrix product runs on `gemm` or a float sum in a row kernel (both accumulate
//! in the element type and in their own order; the interpreter accumulates in f64) or an f32
//! transcendental runs as a SIMD polynomial (3 ULP): there results agree to 2e-5 (f32) or 1e-12
//! (f64) of the output's scale.
#![allow(clippy::unwrap_used)]

mod common;

use common::fusion::{
    assert_same_bits_any_nan, assert_tail_close, carries_between_passes, float_bits, float_inputs,
    random_fusion_program, tail_case, Mix, SHAPES,
};
use common::inputs;
use ferrax::compiler::backend::CpuExecutable;
use ferrax::compiler::kernel::KOp;
use ferrax::compiler::simplify::simplify;
use ferrax::ir::Elements;
use ferrax::runtime::interpret;
use ferrax::{nn, trace, Array, DType, Tensor};

#[test]
fn compiled_programs_match_the_interpreter_bit_for_bit() {
    let mut programs = common::corpus();
    programs.extend(common::gradient_programs());
    let mut kernels = 0;
    for (name, func) in programs {
        let (simple, _) = simplify(&func).unwrap();
        let exe = CpuExecutable::compile(&simple).unwrap_or_else(|e| panic!("{name}: {e}"));
        kernels += exe.kernels().count();
        let approximate = common::cpu_approximates(&simple);
        for seed in 0..3 {
            let args = inputs(&func, seed);
            let (got, want) = (exe.run(&args).unwrap(), interpret(&func, &args).unwrap());
            if approximate {
                for (k, (g, w)) in got.iter().zip(&want).enumerate() {
                    let rtol = if w.dtype() == DType::F64 { 1e-12 } else { 2e-5 };
                    common::assert_close(g, w, rtol, &format!("{name} output {k} seed {seed}"));
                }
            } else {
                assert_eq!(got, want, "{name} (seed {seed})");
            }
        }
    }
    assert!(kernels >= 20, "only {kernels} kernels were compiled");
}

fn gelu(x: Tensor) -> Tensor {
    (&x * 0.5) * ((((&x * &x * &x) * 0.044715 + &x) * 0.7978845608).tanh() + 1.0) * 1.5 + 0.25
}

#[test]
fn gelu_is_one_kernel_and_runs_across_threads() {
    let func = trace(gelu, &Tensor::spec(DType::F32, [1 << 17])).unwrap();
    let (simple, _) = simplify(&func).unwrap();
    let exe = CpuExecutable::compile(&simple).unwrap();
    let kernels: Vec<_> = exe.kernels().collect();
    assert_eq!(kernels.len(), 1);
    insta::assert_snapshot!("gelu_kernel", kernels[0].0.to_string());
    // Large enough to split across threads; special values included.
    let n = 1 << 17;
    let mut data: Vec<f32> = (0..n).map(|i| (i as f32 - 65536.0) / 4096.0).collect();
    data[..4].copy_from_slice(&[f32::NAN, f32::INFINITY, f32::NEG_INFINITY, -0.0]);
    let x = ferrax::Array::from_vec([n], data).unwrap();
    // tanh runs as a SIMD polynomial (3 ULP), the rest exactly.
    let got = exe.run(std::slice::from_ref(&x)).unwrap();
    let want = interpret(&func, &[x]).unwrap();
    common::assert_close(&got[0], &want[0], 1e-6, "gelu");
    assert!(
        exe.kernels().next().unwrap().1.contains("f32x4"),
        "gelu runs as SIMD"
    );
}

/// A product whose only use is a sum runs as one fma, rounded once (XLA contracts the same way
/// on the CPU); a product with another use stays a product, so nothing is computed twice.
#[test]
fn single_use_products_contract_into_fma() {
    let func = trace(
        |(x, y, z): (Tensor, Tensor, Tensor)| {
            let shared = &y * &z;
            (&x * &y + &z, &shared + &x, &shared * 2.0)
        },
        &(
            Tensor::spec(DType::F32, [1000]),
            Tensor::spec(DType::F32, [1000]),
            Tensor::spec(DType::F32, [1000]),
        ),
    )
    .unwrap();
    let (func, _) = simplify(&func).unwrap();
    let exe = CpuExecutable::compile(&func).unwrap();
    let kernel = exe.kernels().next().unwrap().0.to_string();
    assert_eq!(kernel.matches(" fma ").count(), 1, "{kernel}");
    assert_eq!(kernel.matches(" mul ").count(), 2, "{kernel}");
    let args = inputs(&func, 1);
    let got = exe.run(&args).unwrap();
    let v = |a: &ferrax::Array| a.to_vec::<f32>().unwrap();
    let (x, y, z) = (v(&args[0]), v(&args[1]), v(&args[2]));
    let mut rounded_once = 0;
    for i in 0..x.len() {
        let fused = x[i].mul_add(y[i], z[i]);
        assert_eq!(v(&got[0])[i].to_bits(), fused.to_bits(), "x*y+z at {i}");
        rounded_once += usize::from(fused != x[i] * y[i] + z[i]);
        assert_eq!(v(&got[1])[i], y[i] * z[i] + x[i]);
        assert_eq!(v(&got[2])[i], y[i] * z[i] * 2.0);
    }
    assert!(
        rounded_once > 0,
        "the inputs never tell an fma from a product and a sum"
    );
}

#[test]
fn kernel_clif_snapshot() {
    let func = trace(
        |(x, y): (Tensor, Tensor)| x.greater(&y).select(x.maximum(&y) * 2.0, (&x - &y).exp()),
        &(Tensor::spec(DType::F32, [8]), Tensor::spec(DType::F32, [8])),
    )
    .unwrap();
    let exe = CpuExecutable::compile(&func).unwrap();
    let (kernel, clif) = exe.kernels().next().unwrap();
    insta::assert_snapshot!("select_kernel", format!("{kernel}\n{clif}"));
}

/// Every benchmark workload's CPU program as compiled (but the matrix product): the fused
/// program, then each kernel's IR and Cranelift IR.
#[test]
fn benchmark_programs_cpu_snapshots() {
    for (name, func) in common::benchmark_programs() {
        let (simple, _) = simplify(&func).unwrap();
        let exe = CpuExecutable::compile(&simple).unwrap();
        let mut listing = exe.fused().to_string();
        for (kernel, clif) in exe.kernels() {
            listing.push_str(&format!("\n{kernel}\n{clif}"));
        }
        insta::assert_snapshot!(format!("cpu_{name}"), listing);
    }
}

/// A dense layer is a matrix product on gemm and one kernel for its epilogue: the bias
/// broadcast is read in place and the ReLU fused with the addition.
#[test]
fn dense_layer_is_gemm_then_one_epilogue_kernel() {
    let func = trace(
        |(x, w, b): (Tensor, Tensor, Tensor)| nn::relu(&(x.matmul(&w) + &b)),
        &(
            common::spec(&[64, 48]),
            common::spec(&[48, 32]),
            common::spec(&[32]),
        ),
    )
    .unwrap();
    let (simple, _) = simplify(&func).unwrap();
    let exe = CpuExecutable::compile(&simple).unwrap();
    let fused = exe.fused();
    let steps: Vec<&str> = fused
        .lines()
        .filter(|l| l.trim_start().starts_with("//"))
        .collect();
    assert_eq!(steps, ["  // gemm", "  // kernel @main_k0"], "{fused}");
    let (kernel, _) = exe.kernels().next().unwrap();
    assert!(kernel.to_string().contains("[i % 32] = %2"), "{kernel}");
    let args = inputs(&func, 1);
    let (got, want) = (exe.run(&args).unwrap(), interpret(&func, &args).unwrap());
    common::assert_close(&got[0], &want[0], 2e-5, "dense layer");
}

/// Masks and i32 arithmetic fuse (bool logic on both backends, i32 on the CPU) and give the
/// interpreter's bits: wrapping add, sub, mul and neg, max, min, clamps, bitwise ops, compares,
/// selects, and conversions between i32 and floats (truncating and saturating, NaN to 0; i32
/// beyond 2^24 rounding to f32) over extreme values, in the vector loop and the scalar tail.
#[test]
fn masks_and_i32_arithmetic_fuse_bit_for_bit() {
    let text = "func @main(%0: i32[67], %1: i32[67], %2: f32[67]) -> (i32[67], f32[67], bool[67]) {
  %3 = add %0, %1 : i32[67]
  %4 = mul %3, %0 : i32[67]
  %5 = sub %4, %1 : i32[67]
  %6 = neg %5 : i32[67]
  %7 = max %6, %1 : i32[67]
  %8 = min %7, %0 : i32[67]
  %9 = xor %8, %3 : i32[67]
  %10 = not %9 : i32[67]
  %11 = and %10, %1 : i32[67]
  %12 = or %11, %4 : i32[67]
  %13 = convert %2 : i32[67]
  %14 = add %12, %13 : i32[67]
  %15 = gt %14, %0 : bool[67]
  %16 = lt %2, %2 : bool[67]
  %17 = not %16 : bool[67]
  %18 = and %15, %17 : bool[67]
  %19 = eq %13, %1 : bool[67]
  %20 = or %18, %19 : bool[67]
  %21 = xor %20, %15 : bool[67]
  %22 = convert %14 : f32[67]
  %23 = select %21, %22, %2 : f32[67]
  %24 = clamp %1, %14, %0 : i32[67]
  return %24, %23, %21
}";
    // And through f64, which makes the kernel scalar.
    let with_f64 = text.replace("bool[67]) {", "bool[67], f64[67]) {").replace(
        "  return %24, %23, %21",
        "  %25 = convert %14 : f64[67]\n  return %24, %23, %21, %25",
    );
    for (text, simd) in [(text.to_string(), true), (with_f64, false)] {
        let func = ferrax::ir::parse_func(&text).unwrap();
        let exe = CpuExecutable::compile(&func).unwrap();
        assert_eq!(exe.kernels().count(), 1, "{}", exe.fused());
        assert!(!exe.fused().contains("interpreter"), "{}", exe.fused());
        let (_, clif) = exe.kernels().next().unwrap();
        assert_eq!(clif.contains("i32x4"), simd, "{clif}");
        check_masks_and_i32(&func, &exe);
    }
}

fn check_masks_and_i32(func: &ferrax::ir::Func, exe: &CpuExecutable) {
    let ints = |seed: i32| -> Vec<i32> {
        let extremes = [
            i32::MIN,
            i32::MAX,
            -1,
            0,
            1,
            1 << 24,
            (1 << 24) + 1,
            -(1 << 30),
        ];
        (0..67)
            .map(|i: i32| match i % 5 {
                0 => extremes[(i as usize / 5 + seed.unsigned_abs() as usize) % extremes.len()],
                _ => i.wrapping_mul(0x2F6B_3A17).wrapping_add(seed) >> (i % 13),
            })
            .collect()
    };
    let floats: Vec<f32> = (0..67)
        .map(|i| match i % 6 {
            0 => [f32::NAN, f32::INFINITY, -3e9, 2.5e9, -0.0, 16777217.0][i / 6 % 6],
            _ => (i as f32 - 33.0) * 1234.567,
        })
        .collect();
    let args = [
        ferrax::Array::from_vec([67], ints(3)).unwrap(),
        ferrax::Array::from_vec([67], ints(-7)).unwrap(),
        ferrax::Array::from_vec([67], floats).unwrap(),
    ];
    let (got, want) = (exe.run(&args).unwrap(), interpret(func, &args).unwrap());
    assert!(got == want, "results differ from the interpreter's");
}

/// Reductions over leading axes run in the kernel of their elementwise producers (whose
/// values then never touch memory), each launch part accumulating partial columns of its own,
/// combined in part order: max and min give the interpreter's values (NaN for NaN, +0 over -0),
/// sums agree to the f32 accumulation bound of their terms' magnitudes. Vector kernels
/// (columns a multiple of 4, fewer than a step's 16 elements among them), scalar ones, threaded
/// launches, f32 and f64, one and two leading axes.
#[test]
fn column_reductions_fuse_with_their_producers() {
    let cases: [(DType, &[usize], usize); 7] = [
        (DType::F32, &[37, 24], 1),
        (DType::F32, &[3, 5, 10], 2),
        (DType::F32, &[7, 5, 16], 1),
        (DType::F64, &[300, 260], 1),
        (DType::F32, &[600, 512], 1),
        (DType::F32, &[1000, 12], 1),
        (DType::F32, &[40, 8], 1),
    ];
    for (dtype, dims, leading) in cases {
        let axes: Vec<usize> = (0..leading).collect();
        let spec = Tensor::spec(dtype, dims.to_vec());
        let func = trace(
            |(x, y): (Tensor, Tensor)| {
                let p = &x * &y - 1.5;
                let d = &x - &y;
                (
                    p.sum(axes.clone()),
                    p.max(axes.clone()),
                    d.min(axes.clone()),
                    d,
                )
            },
            &(spec.clone(), spec),
        )
        .unwrap();
        let exe = CpuExecutable::compile(&func).unwrap();
        let fused = exe.fused();
        assert_eq!(exe.kernels().count(), 1, "{fused}");
        assert!(!fused.contains("interpreter"), "{fused}");
        let (kernel, clif) = exe.kernels().next().unwrap();
        let listing = kernel.to_string();
        assert_eq!(listing.matches("accumulate").count(), 3, "{listing}");
        let cols: usize = dims[leading..].iter().product();
        let simd = dtype == DType::F32 && cols.is_multiple_of(4);
        assert_eq!(clif.contains("f32x4"), simd, "{clif}");
        // The product is not stored: only the difference is an output besides the partials.
        assert_eq!(listing.matches("store").count(), 1, "{listing}");
        let what = format!("{dtype} {dims:?} over {leading}");
        for seed in 0..3 {
            let args = float_inputs(&func, seed);
            let (got, want) = (exe.run(&args).unwrap(), interpret(&func, &args).unwrap());
            let same = |a: &ferrax::Array, b: &ferrax::Array| {
                let (a, b) = (a.to_f64_vec(), b.to_f64_vec());
                a.iter()
                    .zip(&b)
                    .all(|(x, y)| x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()))
            };
            assert!(same(&got[1], &want[1]), "{what}: max");
            assert!(same(&got[2], &want[2]), "{what}: min");
            assert!(got[3] == want[3], "{what}: difference");
            let cols = got[0].shape().numel();
            let terms = interpret(
                &ferrax::ir::parse_func(&format!(
                    "func @p(%0: {t}, %1: {t}) -> ({t}) {{\n  %2 = mul %0, %1 : {t}\n  %3 = constant -1.5 : {t}\n  %4 = add %2, %3 : {t}\n  return %4\n}}",
                    t = func.params[0]
                ))
                .unwrap(),
                &args,
            )
            .unwrap()[0]
                .to_f64_vec();
            let rows = terms.len() / cols;
            let (sums, want_sums) = (got[0].to_f64_vec(), want[0].to_f64_vec());
            for c in 0..cols {
                let magnitude: f64 = (0..rows).map(|r| terms[r * cols + c].abs()).sum();
                let (g, w) = (sums[c], want_sums[c]);
                let bound = (rows as f64 + 4.0) * 2f64.powi(-23) * magnitude;
                let close = g == w || (g.is_nan() && w.is_nan()) || (g - w).abs() <= bound;
                assert!(close, "{what} seed {seed} column {c}: sum {g} want {w}");
            }
        }
    }
    // A kernel of column reductions alone, over a parameter: a threaded column sum.
    let func = trace(
        |x: Tensor| (x.sum(0), x.max(vec![0, 1])),
        &Tensor::spec(DType::F32, [300, 4, 128]),
    )
    .unwrap();
    let exe = CpuExecutable::compile(&func).unwrap();
    assert_eq!(exe.kernels().count(), 1, "{}", exe.fused());
    let args = float_inputs(&func, 5);
    let (got, want) = (exe.run(&args).unwrap(), interpret(&func, &args).unwrap());
    let (g, w) = (got[0].to_f64_vec(), want[0].to_f64_vec());
    let x = args[0].to_f64_vec();
    let magnitude: Vec<f64> = (0..512)
        .map(|c| (0..300).map(|r| x[r * 512 + c].abs()).sum())
        .collect();
    for c in 0..512 {
        let bound = 304.0 * 2f64.powi(-23) * magnitude[c];
        let close =
            g[c] == w[c] || (g[c].is_nan() && w[c].is_nan()) || (g[c] - w[c]).abs() <= bound;
        assert!(close, "column {c}: sum {} want {}", g[c], w[c]);
    }
    let (g, w) = (got[1].to_f64_vec(), want[1].to_f64_vec());
    assert!(g
        .iter()
        .zip(&w)
        .all(|(x, y)| x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan())));
}

/// The schedule puts fusible work that the trace interleaved with other work back together:
/// here the sum after `x·3` joins its kernel across the unrelated `y - 1` (of another size),
/// which stays a kernel of its own, and the bits are the interpreter's.
#[test]
fn interleaved_elementwise_work_fuses_across_other_work() {
    let func = trace(
        |(x, y): (Tensor, Tensor)| {
            let a = &x * 3.0;
            let b = &y - 1.0;
            let c = a.maximum(&x) + 2.0;
            (c, b)
        },
        &(common::spec(&[64, 32]), common::spec(&[16])),
    )
    .unwrap();
    let exe = CpuExecutable::compile(&func).unwrap();
    assert_eq!(exe.kernels().count(), 2, "{}", exe.fused());
    insta::assert_snapshot!("interleaved_fused", exe.fused());
    for seed in 0..3 {
        let args = inputs(&func, seed);
        assert_eq!(exe.run(&args).unwrap(), interpret(&func, &args).unwrap());
    }
}

#[test]
fn softmax_is_one_row_kernel() {
    for dtype in [DType::F32, DType::F64] {
        // 13 columns: three vectors and a scalar tail per row in f32.
        let func = trace(
            |x: Tensor| nn::softmax(&x, -1),
            &Tensor::spec(dtype, [70, 13]),
        )
        .unwrap();
        let (simple, _) = simplify(&func).unwrap();
        let exe = CpuExecutable::compile(&simple).unwrap();
        let kernels: Vec<_> = exe.kernels().collect();
        assert_eq!(kernels.len(), 1, "{}", kernels[0].0);
        if dtype == DType::F32 {
            insta::assert_snapshot!("softmax_row_kernel", kernels[0].0.to_string());
            assert!(kernels[0].1.contains("f32x4"), "softmax runs as SIMD");
        }
        let args = inputs(&func, 7);
        let (got, want) = (exe.run(&args).unwrap(), interpret(&func, &args).unwrap());
        // exp is a 3-ULP polynomial in f32; the sums accumulate in the element type.
        let rtol = if dtype == DType::F32 { 2e-6 } else { 1e-14 };
        common::assert_close(&got[0], &want[0], rtol, "softmax");
    }
}

#[test]
fn layernorm_is_one_row_kernel_reading_columns_in_place() {
    let func = trace(
        |(x, g, b): (Tensor, Tensor, Tensor)| common::layernorm(&x, &g, &b),
        &(
            common::spec(&[4, 6]),
            common::spec(&[6]),
            common::spec(&[6]),
        ),
    )
    .unwrap();
    let (simple, _) = simplify(&func).unwrap();
    let exe = CpuExecutable::compile(&simple).unwrap();
    let listing: Vec<String> = exe.kernels().map(|(k, _)| k.to_string()).collect();
    assert_eq!(listing.len(), 1, "{listing:?}");
    assert!(listing[0].contains("[i % 6] = %1"), "{}", listing[0]);
    insta::assert_snapshot!("layernorm_kernels", listing[0]);
    let args = inputs(&func, 3);
    let (got, want) = (exe.run(&args).unwrap(), interpret(&func, &args).unwrap());
    // rsqrt is two rounded f32 steps here, one f64 step in the interpreter; sums accumulate
    // in f32.
    common::assert_close(&got[0], &want[0], 1e-6, "layernorm");
}

/// Row reductions with their special values: max and min propagate NaN and order -0 below +0,
/// sums of infinities, per-row outputs next to per-element ones, and rows split across threads.
#[test]
fn row_reductions_match_the_interpreter() {
    let func = trace(
        |x: Tensor| {
            let m = x.max(-1);
            let centered = &x - &m.reshape([300, 1]);
            (x.sum(-1), x.min(-1), m, centered)
        },
        &Tensor::spec(DType::F32, [300, 257]),
    )
    .unwrap();
    let (simple, _) = simplify(&func).unwrap();
    let exe = CpuExecutable::compile(&simple).unwrap();
    assert_eq!(exe.kernels().count(), 1);
    let mut data: Vec<f32> = (0..300 * 257)
        .map(|i| ((i * 7919) % 1000) as f32 / 100.0 - 5.0)
        .collect();
    data[3] = f32::NAN;
    data[257 + 100] = f32::INFINITY;
    data[2 * 257 + 5] = f32::NEG_INFINITY;
    data[2 * 257 + 9] = f32::INFINITY;
    for v in &mut data[3 * 257..4 * 257] {
        *v = -0.0;
    }
    data[3 * 257 + 256] = 0.0;
    for v in &mut data[4 * 257..5 * 257] {
        *v = 0.0;
    }
    data[4 * 257 + 256] = -0.0;
    // Zeros of both signs in vector lanes, with negatives: max must find the +0 among -0s
    // wherever it sits, min the -0 among +0s.
    for r in 5..8 {
        for (c, v) in data[r * 257..(r + 1) * 257].iter_mut().enumerate() {
            *v = if c % 3 == 0 { -1.5 } else { -0.0 };
        }
    }
    data[5 * 257 + 100] = 0.0;
    data[6 * 257] = 0.0;
    for v in &mut data[8 * 257..9 * 257] {
        *v = 0.0;
    }
    data[8 * 257 + 131] = -0.0;
    // NaNs of either sign and with a payload, mid-row, after and before larger values.
    data[9 * 257 + 130] = f32::from_bits(0xffc0_0000);
    data[10 * 257 + 7] = f32::from_bits(0x7f80_0001);
    data[10 * 257 + 8] = f32::INFINITY;
    data[11 * 257 + 255] = f32::NAN;
    let x = ferrax::Array::from_vec([300, 257], data).unwrap();
    let got = exe.run(std::slice::from_ref(&x)).unwrap();
    let want = interpret(&func, &[x]).unwrap();
    for (k, (g, w)) in got.iter().zip(&want).enumerate() {
        if k == 0 {
            common::assert_close(g, w, 1e-6, "sum");
        } else {
            // Max and min are exact, -0 and +0 told apart.
            let bits = |a: &ferrax::Array| -> Vec<u32> {
                a.to_vec::<f32>()
                    .unwrap()
                    .iter()
                    .map(|x| x.to_bits())
                    .collect()
            };
            let nan = |a: &ferrax::Array| -> Vec<bool> {
                a.to_vec::<f32>()
                    .unwrap()
                    .iter()
                    .map(|x| x.is_nan())
                    .collect()
            };
            assert_eq!(nan(g), nan(w), "output {k}: NaNs");
            let (gb, wb) = (bits(g), bits(w));
            for (i, (a, b)) in gb.iter().zip(&wb).enumerate() {
                let either_nan = f32::from_bits(*a).is_nan();
                assert!(
                    either_nan || a == b,
                    "output {k} element {i}: {a:#x} want {b:#x}"
                );
            }
        }
    }
}

#[test]
fn memory_plan_frees_dead_values_and_reuses_donated_buffers() {
    // The transpose (a library op) reads the softmax kernel's result, so the input is dead
    // before the last value is made.
    let func = trace(
        |x: Tensor| nn::softmax(&x, -1).t(),
        &Tensor::spec(DType::F32, [64, 128]),
    )
    .unwrap();
    let (simple, _) = simplify(&func).unwrap();
    let exe = CpuExecutable::compile(&simple).unwrap();
    let report = exe.memory();
    let array = 64 * 128 * 4;
    assert_eq!((report.inputs, report.outputs), (array, array));
    assert!(
        report.peak < report.unplanned && report.peak >= report.inputs + report.outputs,
        "{report:?}"
    );
    // Given away, the input and the intermediates end in the pool; later runs reuse them and
    // stale contents never show.
    for seed in 0..3 {
        let args = inputs(&func, seed);
        let want = interpret(&func, &args).unwrap();
        let got = exe.run_donated(args).unwrap();
        common::assert_close(&got[0], &want[0], 2e-6, "softmax");
        assert!(exe.pooled_bytes() >= array, "nothing was pooled");
    }
    // Inputs still held by the caller are never reused.
    let args = inputs(&func, 9);
    let before = args[0].clone();
    exe.run(&args).unwrap();
    assert_eq!(args[0], before);
}

/// A donated input's buffer becomes a value of the same run once the input is dead: here
/// `x·3`, which the kernel that reads `x` for the last time writes over it in place. Without
/// donation the result has a buffer of its own.
#[test]
fn a_donated_input_becomes_an_output() {
    let func = trace(
        |x: Tensor| {
            let a = &x * 3.0;
            (a.t() * 2.0, a)
        },
        &Tensor::spec(DType::F32, [64, 128]),
    )
    .unwrap();
    let exe = CpuExecutable::compile(&func).unwrap();
    let address = |a: &ferrax::Array| match a.elements() {
        ferrax::ir::Elements::F32(v) => v.as_ptr() as usize,
        _ => 0,
    };
    let args = inputs(&func, 4);
    let want = interpret(&func, &args).unwrap();
    let donated = address(&args[0]);
    let got = exe.run_donated(args).unwrap();
    assert!(got == want, "results differ from the interpreter's");
    assert_eq!(address(&got[1]), donated, "{}", exe.fused());
    let args = inputs(&func, 4);
    let got = exe.run(&args).unwrap();
    assert_ne!(address(&got[1]), address(&args[0]));
    assert!(got == want, "results differ from the interpreter's");
}

#[test]
fn large_results_reuse_the_buffers_of_dropped_ones() {
    // Over a MiB, and a length no other test uses: recycled buffers are shared by the process.
    let n = (1 << 18) + 3;
    let func = trace(|x: Tensor| x.exp() * 2.0, &Tensor::spec(DType::F32, [n])).unwrap();
    let exe = CpuExecutable::compile(&func).unwrap();
    let args = inputs(&func, 0);
    let first = exe.run(&args).unwrap();
    let buffer = first[0].as_slice::<f32>().unwrap().as_ptr();
    drop(first);
    // The second result lands in the first one's buffer, and none of its stale contents show.
    let second = exe.run(&inputs(&func, 1)).unwrap();
    assert_eq!(second[0].as_slice::<f32>().unwrap().as_ptr(), buffer);
    let want = interpret(&func, &inputs(&func, 1)).unwrap();
    common::assert_close(&second[0], &want[0], 2e-7, "exp");
}

/// One zero constant feeds relu's forward kernel and its backward kernel (as in every relu
/// gradient). Kernels inline it: none stores it for another to read, and an array of it is made
/// only where a library op reads it or the program returns it.
#[test]
fn kernels_inline_shared_constants() {
    use ferrax::compiler::backend::cpu::support::TARGET;
    use ferrax::compiler::fuse::{partition, Step};
    use ferrax::ir::parse_func;
    let body = "
  %2 = constant 0.0 : f32[8,16]
  %3 = gt %0, %2 : bool[8,16]
  %4 = max %0, %2 : f32[8,16]
  %5 = dot_general %4, %1, contract=[1]x[0] : f32[8,16]
  %6 = select %3, %5, %2 : f32[8,16]";
    let header = "func @main(%0: f32[8,16], %1: f32[16,16])";
    let only_kernels = parse_func(&format!(
        "{header} -> (f32[8,16]) {{{body}\n  return %6\n}}"
    ));
    let library_too = parse_func(&format!(
        "{header} -> (f32[8,16], f32[8,16], f32[8,16]) {{{body}
  %7 = dot_general %2, %1, contract=[1]x[0] : f32[8,16]
  return %6, %7, %2\n}}"
    ));
    for (func, materialized) in [(only_kernels.unwrap(), 0), (library_too.unwrap(), 1)] {
        let constant_steps = partition(&func, &TARGET)
            .iter()
            .filter(|s| **s == Step::Op { index: 0 })
            .count();
        assert_eq!(constant_steps, materialized, "{func}");
        let exe = CpuExecutable::compile(&func).unwrap();
        for (kernel, _) in exe.kernels() {
            assert!(
                kernel.sig.buffers.iter().all(|b| b.value.index() != 2),
                "{kernel}"
            );
        }
        let args = inputs(&func, 3);
        let (got, want) = (exe.run(&args).unwrap(), interpret(&func, &args).unwrap());
        for (g, w) in got.iter().zip(&want) {
            common::assert_close(g, w, 1e-6, "relu and its mask");
        }
    }
}

/// Bool buffers (relu masks between forward and backward kernels) run as SIMD too: each group
/// of bytes widens into a lane mask and narrows back, in the vector loop and the scalar tail.
#[test]
fn bool_buffers_vectorize() {
    let func = ferrax::ir::parse_func(
        "func @main(%0: bool[67], %1: f32[67], %2: f32[67]) -> (f32[67], bool[67]) {
  %3 = select %0, %1, %2 : f32[67]
  %4 = gt %3, %2 : bool[67]
  return %3, %4
}",
    )
    .unwrap();
    let exe = CpuExecutable::compile(&func).unwrap();
    let (_, clif) = exe.kernels().next().unwrap();
    assert!(
        clif.contains("uwiden_low") && clif.contains("unarrow"),
        "{clif}"
    );
    for seed in 0..4 {
        let args = inputs(&func, seed);
        assert_eq!(exe.run(&args).unwrap(), interpret(&func, &args).unwrap());
    }
}

/// Compares of two bools (false below true) run in CPU kernels as logic, vector and scalar
/// alike, where they took the interpreter: every compare of every pair, against the interpreter.
#[test]
fn bool_compares_run_in_kernels() {
    let n = 67;
    let ops = ["eq", "ne", "lt", "le", "gt", "ge"];
    let lines: Vec<String> = (0..ops.len())
        .map(|k| format!("  %{} = {} %0, %1 : bool[{n}]", k + 2, ops[k]))
        .collect();
    let results: Vec<String> = (0..ops.len()).map(|k| format!("%{}", k + 2)).collect();
    let text = format!(
        "func @main(%0: bool[{n}], %1: bool[{n}]) -> ({}) {{\n{}\n  return {}\n}}",
        vec![format!("bool[{n}]"); ops.len()].join(", "),
        lines.join("\n"),
        results.join(", ")
    );
    let func = ferrax::ir::parse_func(&text).unwrap();
    let exe = CpuExecutable::compile(&func).unwrap();
    assert_eq!(exe.kernels().count(), 1, "{}", exe.fused());
    assert!(!exe.fused().contains("interpreter"), "{}", exe.fused());
    let a: Vec<bool> = (0..n).map(|i| i % 4 >= 2).collect();
    let b: Vec<bool> = (0..n).map(|i| i % 2 == 1).collect();
    let args = [
        ferrax::Array::from_vec([n], a).unwrap(),
        ferrax::Array::from_vec([n], b).unwrap(),
    ];
    assert_eq!(exe.run(&args).unwrap(), interpret(&func, &args).unwrap());
}

/// Reductions over leading axes (bias gradients, batch means; the CPU backend runs them on the
/// interpreter's op evaluator) read the columns in place: every op and dtype gives the same
/// bits as reducing a transposed copy over trailing axes (the pairwise sums associate the same
/// way), NaN, infinities and signed zeros included, with 300 and 3,000 rows crossing the
/// pairwise split and large inputs split across threads.
#[test]
fn reductions_over_leading_axes_match_the_transposed_reduction() {
    use ferrax::ir::Elements;
    use half::{bf16, f16};
    let dtypes = ["f32", "f64", "f16", "bf16", "i32", "bool"];
    for (shape, lead) in [
        (vec![300, 257], 1),
        (vec![7, 5, 130], 2),
        (vec![3000, 66], 1),
        (vec![5, 600], 1),
    ] {
        let n: usize = shape.iter().product();
        let cols: usize = shape[lead..].iter().product();
        let mut g = common::Gen(n as u64);
        let mut values: Vec<f64> = (0..n)
            .map(|_| (g.next() % 2000) as f64 / 100.0 - 10.0)
            .collect();
        values[3] = f64::NAN;
        values[cols + 1] = f64::INFINITY;
        values[2 * cols + 2] = f64::INFINITY;
        values[3 * cols + 2] = f64::NEG_INFINITY;
        for r in 0..n / cols {
            values[r * cols + 4] = -0.0;
        }
        let shape_text = |s: &[usize]| {
            let d: Vec<String> = s.iter().map(usize::to_string).collect();
            format!("[{}]", d.join(","))
        };
        let axes: Vec<String> = (0..lead).map(|a| a.to_string()).collect();
        let perm: Vec<String> = (lead..shape.len())
            .chain(0..lead)
            .map(|a| a.to_string())
            .collect();
        let moved: Vec<usize> = shape[lead..]
            .iter()
            .chain(&shape[..lead])
            .copied()
            .collect();
        let last: Vec<String> = (shape.len() - lead..shape.len())
            .map(|a| a.to_string())
            .collect();
        for dtype in dtypes {
            let x = match dtype {
                "f32" => Elements::F32(values.iter().map(|&v| v as f32).collect()),
                "f64" => Elements::F64(values.clone()),
                "f16" => Elements::F16(values.iter().map(|&v| f16::from_f64(v)).collect()),
                "bf16" => Elements::BF16(values.iter().map(|&v| bf16::from_f64(v)).collect()),
                "i32" => Elements::I32(values.iter().map(|&v| v as i32).collect()),
                _ => Elements::Bool(values.iter().map(|&v| v > 0.0).collect()),
            };
            let x = ferrax::Array::new(shape.clone(), x).unwrap();
            let ops: &[&str] = match dtype {
                "bool" => &["reduce_max", "reduce_min"],
                _ => &["reduce_sum", "reduce_max", "reduce_min", "reduce_prod"],
            };
            for op in ops {
                let out = format!("{dtype}{}", shape_text(&shape[lead..]));
                let input = format!("{dtype}{}", shape_text(&shape));
                let direct = format!(
                    "func @main(%0: {input}) -> ({out}) {{\n  %1 = {op} %0, axes=[{}] : {out}\n  return %1\n}}\n",
                    axes.join(",")
                );
                let transposed = format!(
                    "func @main(%0: {input}) -> ({out}) {{\n  %1 = transpose %0, perm=[{}] : {dtype}{}\n  %2 = {op} %1, axes=[{}] : {out}\n  return %2\n}}\n",
                    perm.join(","),
                    shape_text(&moved),
                    last.join(",")
                );
                let run = |text: &str| {
                    let func = ferrax::ir::parse_func(text).unwrap();
                    interpret(&func, std::slice::from_ref(&x))
                        .unwrap()
                        .remove(0)
                };
                let (got, want) = (run(&direct), run(&transposed));
                let what = format!("{op} {dtype} {shape:?}");
                if matches!(dtype, "i32" | "bool") {
                    assert_eq!(got, want, "{what}");
                } else {
                    let key = |a: &ferrax::Array| -> Vec<Option<u64>> {
                        a.to_f64_vec()
                            .iter()
                            .zip(float_bits(a))
                            .map(|(v, b)| (!v.is_nan()).then_some(b))
                            .collect()
                    };
                    assert_eq!(key(&got), key(&want), "{what}");
                }
            }
        }
    }
}

/// Flat kernels index broadcast operands by row and column counters that the loops step (no
/// division per element): vector and scalar loops, rows that are not a multiple of a vector
/// step, and launches split across threads mid-row all agree with the interpreter bit for bit.
#[test]
fn broadcast_positions_are_stepped_exactly() {
    for (rows, cols) in [(37, 12), (5, 7), (600, 1020), (3, 4)] {
        let func = trace(
            // A product and a sum apart, so that no fma contracts them and the results stay
            // bit-identical to the interpreter's.
            |(x, b, s): (Tensor, Tensor, Tensor)| (&x + &b) * s.reshape([rows, 1]),
            &(
                Tensor::spec(DType::F32, [rows, cols]),
                Tensor::spec(DType::F32, [cols]),
                Tensor::spec(DType::F32, [rows]),
            ),
        )
        .unwrap();
        let (func, _) = simplify(&func).unwrap();
        let exe = CpuExecutable::compile(&func).unwrap();
        assert_eq!(exe.kernels().count(), 1, "{rows}x{cols}");
        for seed in 0..2 {
            let args = inputs(&func, seed);
            let (got, want) = (exe.run(&args).unwrap(), interpret(&func, &args).unwrap());
            assert_eq!(got, want, "{rows}x{cols}");
        }
    }
}

/// Runs `func` compiled and interpreted on `args` and checks that every result has the same
/// bits (NaN payloads included), and that the kernels, not the interpreter, computed them.
fn assert_kernels_match_bits(func: &ferrax::ir::Func, args: &[ferrax::Array], what: &str) {
    let exe = CpuExecutable::compile(func).unwrap();
    let half_buffers = exe.kernels().any(|(k, _)| {
        k.sig
            .buffers
            .iter()
            .any(|b| matches!(b.dtype, DType::F16 | DType::BF16))
    });
    assert!(half_buffers, "{what}: no kernel reads or writes f16/bf16");
    let (got, want) = (exe.run(args).unwrap(), interpret(func, args).unwrap());
    for (k, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_same_bits(g, w, &format!("{what} output {k}"));
    }
}

fn assert_same_bits(got: &ferrax::Array, want: &ferrax::Array, what: &str) {
    let (g, w) = (float_bits(got), float_bits(want));
    assert_eq!(g.len(), w.len(), "{what}: length");
    if let Some(i) = g.iter().zip(&w).position(|(a, b)| a != b) {
        panic!("{what}: element {i} is {:#x}, want {:#x}", g[i], w[i]);
    }
}

/// Conversions to and from f16 and bf16 run in the CPU kernels as integer and f32 arithmetic
/// (Cranelift has no such vector conversions): all 65,536 bit patterns of each half type widen,
/// and f32 and f64 values (a dense sweep of bit patterns, ties in both directions, subnormals,
/// overflow, NaN payloads) narrow, and round through bf16 to f32, bit for bit as the
/// interpreter (the `half` crate) does.
#[test]
fn half_conversions_match_the_interpreter_bit_for_bit() {
    use half::{bf16, f16};
    let n = 1 << 16;
    let widen = |from: DType| {
        trace(
            |x: Tensor| {
                (
                    x.astype(DType::F32),
                    x.astype(DType::F64),
                    x.astype(DType::BF16),
                )
            },
            &Tensor::spec(from, [n]),
        )
        .unwrap()
    };
    let patterns: Vec<u16> = (0..=u16::MAX).collect();
    let f16s = ferrax::Array::from_vec([n], patterns.iter().map(|&b| f16::from_bits(b)).collect())
        .unwrap();
    assert_kernels_match_bits(&widen(DType::F16), &[f16s], "f16 widened");
    let bf16s =
        ferrax::Array::from_vec([n], patterns.iter().map(|&b| bf16::from_bits(b)).collect())
            .unwrap();
    assert_kernels_match_bits(&widen(DType::BF16), &[bf16s], "bf16 widened");

    // f32: a sweep over all exponents and signs, then ties and their neighbours for both
    // half types (the 13 or 16 bits rounded away at, just below and just above one half),
    // subnormal f16 ties, the overflow threshold and special values.
    let mut f32s: Vec<u32> = (0..1 << 20).map(|i: u32| i.wrapping_mul(4099)).collect();
    let mut g = common::Gen(0x5eed);
    for _ in 0..20_000 {
        let high = (g.next() as u32) & 0xffff_0000;
        for low in [
            0x0fff, 0x1000, 0x1001, 0x3000, 0x7fff, 0x8000, 0x8001, 0x18000,
        ] {
            f32s.push(high.wrapping_add(low));
        }
    }
    f32s.extend((0..1024).map(|k| ((2 * k + 1) as f32 * 2f32.powi(-25)).to_bits()));
    for special in [
        0.0f32,
        -0.0,
        65504.0,
        65519.99,
        65520.0,
        -65520.0,
        6.1035156e-5,
        5.9604645e-8,
        2.9802322e-8,
        f32::MAX,
        f32::MIN_POSITIVE,
        f32::INFINITY,
        f32::NEG_INFINITY,
    ] {
        f32s.push(special.to_bits());
    }
    f32s.extend([
        0x7fc0_0000,
        0x7f80_0001,
        0xffa0_1234,
        0x7fff_ffff,
        0x0000_0001,
    ]);
    let m = f32s.len();
    // Also rounded to bf16 and widened back, which kernels compute in one step from f32.
    let narrow = |from: DType| {
        trace(
            |x: Tensor| {
                (
                    x.astype(DType::F16),
                    x.astype(DType::BF16),
                    x.astype(DType::BF16).astype(DType::F32),
                )
            },
            &Tensor::spec(from, [m]),
        )
        .unwrap()
    };
    let values: Vec<f32> = f32s.iter().map(|&b| f32::from_bits(b)).collect();
    let x = ferrax::Array::from_vec([m], values.clone()).unwrap();
    assert_kernels_match_bits(&narrow(DType::F32), &[x], "f32 narrowed");

    // f64: the same values, and values a hair off them (where rounding through f32 to
    // nearest would land on a tie and round the wrong way).
    let mut f64s: Vec<f64> = Vec::with_capacity(m);
    for (i, &v) in values.iter().enumerate() {
        let v = f64::from(v);
        let hair = v * 2f64.powi(-40);
        f64s.push(match i % 3 {
            0 => v,
            1 => v + hair,
            _ => v - hair,
        });
    }
    f64s[..4].copy_from_slice(&[1e300, -1e300, 1e-300, f64::from_bits(0x7ff8_0000_dead_beef)]);
    let x = ferrax::Array::from_vec([m], f64s).unwrap();
    assert_kernels_match_bits(&narrow(DType::F64), &[x], "f64 narrowed");
}

/// f16 and bf16 programs run in CPU kernels (flat and row kernels, vector and scalar code):
/// arithmetic, compares, selects and broadcasts give the interpreter's bits exactly (each op
/// runs in f32 and rounds once to the half type); transcendentals and row sums agree to about
/// one unit in the last place of the half type.
#[test]
fn half_precision_programs_match_the_interpreter() {
    use half::{bf16, f16};
    // 40 columns: vector code throughout; 37: the bias broadcast keeps flat kernels scalar,
    // and each row's vectors end in a scalar tail.
    for (dtype, rows, cols) in [
        (DType::F16, 60, 40),
        (DType::BF16, 60, 40),
        (DType::F16, 13, 37),
        (DType::BF16, 13, 37),
    ] {
        let specs = (
            Tensor::spec(dtype, [rows, cols]),
            Tensor::spec(dtype, [rows, cols]),
            Tensor::spec(dtype, [cols]),
        );
        let exact = trace(
            |(x, y, b): (Tensor, Tensor, Tensor)| {
                let z = (&x * &y - &b) / (y.abs() + 0.75);
                let picked = x.greater(&y).select(&z, (&x * &x + 1.0).sqrt());
                (z.maximum(&x), -picked, x.clip(-1.0, 1.0))
            },
            &specs,
        )
        .unwrap();
        let approximate = trace(
            |(x, y, b): (Tensor, Tensor, Tensor)| {
                (
                    nn::softmax(&(&x + &b), -1),
                    x.exp() * y.tanh() + (&x * &x).log1p(),
                    y.sum(1),
                )
            },
            &specs,
        )
        .unwrap();
        let mut g = common::Gen(7);
        let mut data = |n: usize| -> ferrax::Array {
            let v: Vec<f32> = (0..n)
                .map(|_| (g.next() >> 40) as f32 / (1u64 << 22) as f32 - 2.0)
                .collect();
            let shape = if n == cols {
                vec![cols]
            } else {
                vec![rows, cols]
            };
            match dtype {
                DType::F16 => {
                    ferrax::Array::from_vec(shape, v.into_iter().map(f16::from_f32).collect())
                }
                _ => ferrax::Array::from_vec(shape, v.into_iter().map(bf16::from_f32).collect()),
            }
            .unwrap()
        };
        let args = [data(rows * cols), data(rows * cols), data(cols)];
        for (func, name) in [(&exact, "exact"), (&approximate, "approximate")] {
            let (func, _) = simplify(func).unwrap();
            let exe = CpuExecutable::compile(&func).unwrap();
            let got = exe.run(&args).unwrap();
            let want = interpret(&func, &args).unwrap();
            for (k, (g, w)) in got.iter().zip(&want).enumerate() {
                let what = format!("{dtype} {name} output {k}");
                if name == "exact" {
                    assert_same_bits(g, w, &what);
                } else {
                    // One unit in the last place, relative to the output's scale.
                    let ulp = if dtype == DType::F16 { 2e-3 } else { 1.6e-2 };
                    common::assert_close(g, w, ulp, &what);
                }
            }
            let vectors = exe.kernels().all(|(_, clif)| clif.contains("uload16x4"));
            assert!(
                vectors || cols % 4 != 0,
                "{dtype} {name}: kernels read their half inputs as vectors"
            );
        }
    }
}

/// Property test of fusion: random programs of every float type (fused into flat and row
/// kernels, vector and scalar code, launches split across threads for the large shape) give the
/// interpreter's bits exactly (any NaN equal to any other), before and after simplification.
#[test]
fn random_fusion_programs_match_the_interpreter() {
    let dtypes = ["f32", "f64", "f16", "bf16"];
    let (mut kernels, mut carrying) = (0, 0);
    for seed in 0..480u64 {
        let dtype = dtypes[seed as usize % dtypes.len()];
        let shape = SHAPES[(seed as usize / dtypes.len()) % SHAPES.len()];
        // Then row kernels of several passes.
        let mix = Mix {
            f64_transcendentals: true,
            row_passes: seed >= 400,
        };
        let text = random_fusion_program(seed, dtype, shape, mix);
        let func =
            ferrax::ir::parse_func(&text).unwrap_or_else(|e| panic!("seed {seed}: {e}\n{text}"));
        let (simple, _) = simplify(&func).unwrap();
        let exe =
            CpuExecutable::compile(&simple).unwrap_or_else(|e| panic!("seed {seed}: {e}\n{text}"));
        kernels += exe.kernels().count();
        carrying += exe
            .kernels()
            .filter(|(k, _)| carries_between_passes(k))
            .count();
        let args = float_inputs(&func, seed);
        let got = exe.run(&args).unwrap();
        let want = interpret(&func, &args).unwrap();
        assert_same_bits_any_nan(&got, &want, &format!("seed {seed}\n{text}\n{simple}"));
    }
    assert!(
        kernels >= 200,
        "only {kernels} kernels over the random programs"
    );
    assert!(carrying >= 50, "only {carrying} row kernels carry values");
}

/// Property test of fusion with what rounds differently: a random program (as above) whose
/// first result goes through a transcendental, fused into the same kernels, and then a sum over
/// its last axis. The bit-exact chain gives both sides the same operands, so the results agree
/// as [`assert_tail_close`] says.
#[test]
fn random_fusion_programs_with_transcendentals_and_sums_agree_with_the_interpreter() {
    for seed in 0..240u64 {
        let (func, text, tail) = tail_case(seed, true);
        let (simple, _) = simplify(&func).unwrap();
        let exe = CpuExecutable::compile(&simple).unwrap();
        let args = float_inputs(&func, seed);
        let (got, want) = (exe.run(&args).unwrap(), interpret(&func, &args).unwrap());
        assert_tail_close(&got, &want, tail, &format!("seed {seed}\n{text}"));
    }
}

/// Products of two operands stored contracting dimension last (`a · bᵀ`) are computed from a
/// transposed copy of the rhs, or of the lhs with the result transposed back (whichever copies
/// less; `gemm` is slow on that form). Both ways, batched, f32 and f64, with sizes that leave
/// partial copy tiles, agree with the interpreter.
#[test]
fn products_of_transposed_operands_match_the_interpreter() {
    // (batch, m, n, k): the rhs copied; then the lhs and the result copied.
    for (batch, m, n, k) in [(1, 128, 256, 256), (1, 515, 61, 250), (2, 70, 500, 150)] {
        for dtype in ["f32", "f64"] {
            let b = if batch > 1 { "batch=[0]x[0], " } else { "" };
            let (lead, c) = if batch > 1 {
                (format!("{batch},"), 2)
            } else {
                (String::new(), 1)
            };
            let text = format!(
                "func @main(%0: {dtype}[{lead}{m},{k}], %1: {dtype}[{lead}{n},{k}]) -> ({dtype}[{lead}{m},{n}]) {{\n  \
                 %2 = dot_general %0, %1, {b}contract=[{c}]x[{c}] : {dtype}[{lead}{m},{n}]\n  \
                 return %2\n}}\n"
            );
            let func = ferrax::ir::parse_func(&text).unwrap();
            let exe = CpuExecutable::compile(&func).unwrap();
            for seed in 1..3 {
                let args = inputs(&func, seed);
                let got = exe.run(&args).unwrap();
                let want = interpret(&func, &args).unwrap();
                let rtol = if dtype == "f64" { 1e-12 } else { 2e-5 };
                let what = format!("{dtype} batch {batch} {m}x{n}x{k} seed {seed}");
                common::assert_close(&got[0], &want[0], rtol, &what);
            }
        }
    }
}

/// `1 + tanh(u)` (GELU's tanh form) runs as `2 / (1 + exp(-2u))`: within 3 ULP of the exact
/// value over a dense sweep, including where tanh(u) nears -1 (from u = -9 on, `1 + tanh(u)`
/// in f32 is 0, which no ULP bound would pass), 2 ULP at worst over 2^24 points, where that
/// value is a normal f32; below (u < -44) the result is 0 or subnormal.
#[test]
fn one_plus_tanh_runs_as_a_quotient() {
    assert_quotient_accuracy(
        |x| x.tanh() + 1.0,
        |x| 2.0 / (1.0 + (-2.0 * f64::from(x)).exp()),
    );
}

/// GELU's `x·0.5·(1 + tanh(x·c))` folds its constants into the quotient,
/// `x / (1 + exp(x·(-2c)))`; another factor than 0.5 keeps its product. Both stay within 3 ULP
/// of the exact value of the traced function (`x·c` rounded, as traced), overflow nowhere and
/// keep the sign of zero.
#[test]
fn gelu_products_fold_into_the_quotient() {
    const C: f32 = 0.797_884_6;
    let exact = |m: f32, x: f32| f64::from(m) * 2.0 / (1.0 + (-2.0 * f64::from(x * C)).exp());
    assert_quotient_accuracy(
        |x| (&x * 0.5) * ((&x * C as f64).tanh() + 1.0),
        |x| exact(x * 0.5, x),
    );
    assert_quotient_accuracy(
        |x| ((&x * C as f64).tanh() + 1.0) * (&x * 0.3),
        |x| exact(x * 0.3, x),
    );
}

/// Runs `f` over a dense sweep of [-64, 32) and special values, each result within 3 ULP of
/// `exact`, or 0 or subnormal of its sign where that is below 2^-100 (NaN for NaN).
fn assert_quotient_accuracy(f: impl Fn(Tensor) -> Tensor, exact: impl Fn(f32) -> f64) {
    let n = 1 << 20;
    let func = trace(f, &Tensor::spec(DType::F32, [n])).unwrap();
    let exe = CpuExecutable::compile(&func).unwrap();
    let mut data: Vec<f32> = (0..n)
        .map(|i| i as f32 / (n as f32 / 96.0) - 64.0)
        .collect();
    data[..9].copy_from_slice(&[
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        -0.0,
        1e-30,
        -100.0,
        f32::MAX,
        f32::MIN,
        -1e-40,
    ]);
    let x = ferrax::Array::from_vec([n], data.clone()).unwrap();
    let got = exe.run(&[x]).unwrap()[0].to_vec::<f32>().unwrap();
    let mut worst = 0;
    for (&x, &y) in data.iter().zip(&got) {
        let exact = exact(x) as f32;
        if exact.is_nan() {
            assert!(y.is_nan(), "f({x}) = {y}");
            continue;
        }
        let ulps =
            ferrax::ir::ulp_distance(ferrax::ir::Scalar::F32(y), ferrax::ir::Scalar::F32(exact));
        // Where the denominator overflows the quotient is 0 (exactly below 2^-100).
        let flushed = exact.abs() < 2f32.powi(-100)
            && y.abs() < f32::MIN_POSITIVE
            && y.is_sign_negative() == exact.is_sign_negative();
        if exact.abs() < f32::MIN_POSITIVE || flushed {
            assert!(flushed || ulps <= 3, "f({x}) = {y}, want {exact}");
            continue;
        }
        assert!(ulps <= 3, "f({x}) = {y}, want {exact} ({ulps} ULP)");
        worst = worst.max(ulps);
    }
    assert!(
        worst >= 1,
        "no input tells the quotient from an exact result"
    );
}

/// Products whose batch dimensions do not lead (attention's scores and mixing, as w9 traces
/// them) run on `gemm` with their operands permuted into batched-matrix layout, not in the
/// interpreter, and agree with it.
#[test]
fn products_with_inner_batch_dimensions_run_on_gemm() {
    let text =
        "func @attention(%q: f32[2,5,3,4], %k: f32[2,5,3,4], %v: f32[2,5,3,4]) -> (f32[2,3,5,4]) {
  %s = dot_general %q, %k, batch=[0,2]x[0,2], contract=[3]x[3] : f32[2,3,5,5]
  %o = dot_general %s, %v, batch=[0,1]x[0,2], contract=[3]x[1] : f32[2,3,5,4]
  return %o
}";
    for dtype in ["f32", "f64"] {
        let func = ferrax::ir::parse_func(&text.replace("f32", dtype)).unwrap();
        let exe = CpuExecutable::compile(&func).unwrap();
        assert_eq!(exe.fused().matches("// gemm").count(), 1, "{}", exe.fused());
        assert!(!exe.fused().contains("interpreter"), "{}", exe.fused());
        let args = inputs(&func, 3);
        let (got, want) = (exe.run(&args).unwrap(), interpret(&func, &args).unwrap());
        let rtol = if dtype == "f64" { 1e-12 } else { 2e-5 };
        common::assert_close(&got[0], &want[0], rtol, dtype);
    }
}

/// A splat that a kernel computes and a host step also reads (here a broadcast of a scalar
/// constant, read by an `atan2`) is made as an array for the host step, and so is the scalar
/// it broadcasts: the executor refused such plans ("a step reads a value no earlier step
/// makes") when the scalar had no step of its own.
#[test]
fn host_steps_reading_a_broadcast_constant_get_its_scalar() {
    let text = "func @main(%0: f32[4], %1: f32[4]) -> (f32[4], f32[4]) {
  %2 = mul %0, %1 : f32[4]
  %3 = exp %2 : f32[4]
  %4 = constant 0.5 : f32[]
  %5 = broadcast_in_dim %4, dims=[] : f32[4]
  %6 = sub %5, %3 : f32[4]
  %7 = atan2 %5, %6 : f32[4]
  %8 = add %7, %0 : f32[4]
  return %6, %8
}";
    let func = ferrax::ir::parse_func(text).unwrap();
    let exe = CpuExecutable::compile(&func).unwrap_or_else(|e| panic!("{e}"));
    let args = inputs(&func, 3);
    assert_eq!(exe.run(&args).unwrap(), interpret(&func, &args).unwrap());
}

/// Iotas in a row kernel (along the row, across rows, and of a row value), as the interpreter
/// computes them; and softmax cross-entropy with its gradient picking labels by class index
/// in SIMD row kernels (rows of 50 and 13 columns, whole vectors and a tail), no gather.
#[test]
fn row_kernels_compute_iotas() {
    let func = common::row_iota_program();
    let exe = CpuExecutable::compile(&func).unwrap();
    assert_eq!(exe.kernels().count(), 1, "{}", exe.fused());
    let (kernel, _) = exe.kernels().next().unwrap();
    let indices = kernel
        .body
        .iter()
        .filter(|i| matches!(i.op, KOp::Index { .. }));
    assert!(kernel.rows.is_some() && indices.count() >= 3, "{kernel}");
    let args = inputs(&func, 2);
    let (got, want) = (exe.run(&args).unwrap(), interpret(&func, &args).unwrap());
    for (g, w) in got.iter().zip(&want) {
        common::assert_close(g, w, 1e-6, "row iotas");
    }
    for cols in [50usize, 13] {
        let func = common::cross_entropy_with_gradient(6, cols);
        let (simple, _) = simplify(&func).unwrap();
        let exe = CpuExecutable::compile(&simple).unwrap();
        assert!(!exe.fused().contains("gather"), "{}", exe.fused());
        assert!(!exe.fused().contains("scatter"), "{}", exe.fused());
        let simd = exe
            .kernels()
            .filter(|(k, clif)| k.rows.is_some() && clif.contains("i32x4"));
        assert_eq!(simd.count(), 1, "{}", exe.fused());
        let n = cols as i32;
        let mut args = inputs(&func, 5);
        args[1] = Array::new([6], Elements::I32(vec![0, n - 1, -1, n + 7, -n - 3, 5])).unwrap();
        let (got, want) = (exe.run(&args).unwrap(), interpret(&func, &args).unwrap());
        common::assert_close(&got[0], &want[0], 2e-6, "loss");
        common::assert_close(&got[1], &want[1], 2e-6, "gradient");
    }
}

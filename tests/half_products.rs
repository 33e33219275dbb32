//! Mixed precision: f16 and bf16 `dot_general`s on the CPU backend run on `gemm` (widened to
//! f32, `compiler/src/backend/cpu/widen.rs`) and agree with the interpreter, which sums in f64
//! and rounds once: within one unit in the half type's last place plus f32's accumulation
//! error (on a CPU with AVX-512 BF16, bf16 products run on ferrax's bf16 kernel, within the
//! same bounds). The `preferred_element_type` API (`DotPrecision`, `matmul_in`, `linear_with`)
//! against products computed here from the rounded operands, values and gradients.
#![allow(clippy::unwrap_used)]

mod common;

use common::inputs;
use ferrax::compiler::backend::CpuExecutable;
use ferrax::ir::{parse_func, DotDims};
use ferrax::nn::{self, Linear};
use ferrax::runtime::interpret;
use ferrax::{grad, jit, trace, Array, DType, DotPrecision, Tensor};

/// `got` within one ulp of `dtype` (relative: 2^-7 for bf16, 2^-10 for f16) plus `k` terms'
/// f32 accumulation error of `want`, element by element.
fn assert_half_close(got: &Array, want: &Array, dtype: &str, k: usize, what: &str) {
    assert_eq!(got.shape(), want.shape(), "{what}: shape");
    assert_eq!(got.dtype(), want.dtype(), "{what}: dtype");
    let ulp = if dtype == "bf16" {
        2f64.powi(-7)
    } else {
        2f64.powi(-10)
    };
    // Inputs are in [-2, 2]: each product at most 4 in magnitude.
    let accumulation = k as f64 * 4.0 * 2f64.powi(-23);
    for (i, (a, b)) in got.to_f64_vec().iter().zip(want.to_f64_vec()).enumerate() {
        let tol = ulp * a.abs().max(b.abs()) + accumulation;
        assert!((a - b).abs() <= tol, "{what}: element {i} is {a}, want {b}");
    }
}

/// The product steps of a fused listing, and how many of them are marked for the bf16 kernel.
fn gemm_steps(fused: &str) -> (usize, usize) {
    let steps: Vec<&str> = fused.lines().map(str::trim).collect();
    let marked = steps
        .iter()
        .filter(|l| **l == "// gemm, bf16 operands")
        .count();
    (
        steps.iter().filter(|l| **l == "// gemm").count() + marked,
        marked,
    )
}

/// Compiles `text` in each half type, checks that its products all run on gemm (bf16 ones
/// marked for the bf16 kernel, which computes them where the CPU has AVX-512 BF16), and
/// compares it with the interpreter on two seeds.
fn check_on_gemm(text: &str, k: usize, what: &str) {
    for dtype in ["bf16", "f16"] {
        let func = parse_func(&text.replace("f32", dtype)).unwrap();
        let exe = CpuExecutable::compile(&func).unwrap();
        let fused = exe.fused();
        let (products, marked) = gemm_steps(fused);
        assert!(products > 0, "{what} {dtype}: {fused}");
        let want_marked = if dtype == "bf16" { products } else { 0 };
        assert_eq!(marked, want_marked, "{what} {dtype}: {fused}");
        assert!(!fused.contains("interpreter"), "{what} {dtype}: {fused}");
        for seed in 1..3 {
            let args = inputs(&func, seed);
            let (got, want) = (exe.run(&args).unwrap(), interpret(&func, &args).unwrap());
            for (g, w) in got.iter().zip(&want) {
                assert_half_close(g, w, dtype, k, &format!("{what} {dtype} seed {seed}"));
            }
        }
    }
}

#[test]
fn plain_and_batched_half_products_run_on_gemm() {
    check_on_gemm(
        "func @main(%0: f32[37,70], %1: f32[70,45]) -> (f32[37,45]) {
  %2 = dot_general %0, %1, contract=[1]x[0] : f32[37,45]
  return %2
}",
        70,
        "plain",
    );
    check_on_gemm(
        "func @main(%0: f32[3,17,64], %1: f32[3,64,9]) -> (f32[3,17,9]) {
  %2 = dot_general %0, %1, batch=[0]x[0], contract=[2]x[1] : f32[3,17,9]
  return %2
}",
        64,
        "batched",
    );
    // Large enough for the bf16 kernel, with more products than threads (one a thread).
    check_on_gemm(
        "func @main(%0: f32[4,64,95], %1: f32[4,95,80]) -> (f32[4,64,80]) {
  %2 = dot_general %0, %1, batch=[0]x[0], contract=[2]x[1] : f32[4,64,80]
  return %2
}",
        95,
        "batched, larger",
    );
}

/// Operands stored contracting dimension first (lhs) or last (rhs), the layouts of the
/// backward pass's products, at sizes that take `gemm`'s transposed copies.
#[test]
fn transposed_half_products_run_on_gemm() {
    check_on_gemm(
        "func @main(%0: f32[70,40], %1: f32[70,30]) -> (f32[40,30]) {
  %2 = dot_general %0, %1, contract=[0]x[0] : f32[40,30]
  return %2
}",
        70,
        "lhs transposed",
    );
    for (m, n, k) in [(128, 256, 256), (70, 500, 150)] {
        check_on_gemm(
            &format!(
                "func @main(%0: f32[{m},{k}], %1: f32[{n},{k}]) -> (f32[{m},{n}]) {{
  %2 = dot_general %0, %1, contract=[1]x[1] : f32[{m},{n}]
  return %2
}}"
            ),
            k,
            &format!("rhs transposed {m}x{n}x{k}"),
        );
    }
}

/// Attention's scores and mixing, whose batch dimensions do not lead (operands permuted into
/// batched-matrix layout).
#[test]
fn attention_half_products_run_on_gemm() {
    check_on_gemm(
        "func @attention(%q: f32[2,5,3,8], %k: f32[2,5,3,8], %v: f32[2,5,3,8]) -> (f32[2,3,5,8]) {
  %s = dot_general %q, %k, batch=[0,2]x[0,2], contract=[3]x[3] : f32[2,3,5,5]
  %o = dot_general %s, %v, batch=[0,1]x[0,2], contract=[3]x[1] : f32[2,3,5,8]
  return %o
}",
        8,
        "attention",
    );
    // Large enough for the bf16 kernel; the two products apart, since a result rounded one
    // way here and the other in the interpreter would move the next product past the bound.
    check_on_gemm(
        "func @attention(%q: f32[2,40,3,32], %k: f32[2,40,3,32], %s: f32[2,3,40,40], %v: f32[2,40,3,32]) -> (f32[2,3,40,40], f32[2,3,40,32]) {
  %scores = dot_general %q, %k, batch=[0,2]x[0,2], contract=[3]x[3] : f32[2,3,40,40]
  %o = dot_general %s, %v, batch=[0,1]x[0,2], contract=[3]x[1] : f32[2,3,40,32]
  return %scores, %o
}",
        40,
        "attention, larger",
    );
}

/// A half product feeding another, and one that is the program's result: each product's
/// step rounds its own result (to bf16 and back to f32 for the next product, to bf16 for the
/// output), so no kernel is left to do it, with the same values as the interpreter.
#[test]
fn products_round_their_own_results() {
    let text = "func @attention(%q: bf16[2,5,3,8], %k: bf16[2,5,3,8], %v: bf16[2,5,3,8]) -> (bf16[2,3,5,8]) {
  %s = dot_general %q, %k, batch=[0,2]x[0,2], contract=[3]x[3] : bf16[2,3,5,5]
  %o = dot_general %s, %v, batch=[0,1]x[0,2], contract=[3]x[1] : bf16[2,3,5,8]
  return %o
}";
    let func = parse_func(text).unwrap();
    let exe = CpuExecutable::compile(&func).unwrap();
    let fused = exe.fused();
    assert_eq!(
        fused.matches("// gemm's rounding to bf16").count(),
        2,
        "{fused}"
    );
    let args = inputs(&func, 5);
    let (got, want) = (exe.run(&args).unwrap(), interpret(&func, &args).unwrap());
    assert_half_close(&got[0], &want[0], "bf16", 8, "rounded by gemm");
}

/// Products with no contracting elements are zeros, those with no rows empty: neither reaches
/// `gemm`, and both are what the interpreter gives.
#[test]
fn zero_size_half_products() {
    for (lhs, rhs, out) in [("4,0", "0,3", "4,3"), ("0,5", "5,3", "0,3")] {
        for dtype in ["bf16", "f16"] {
            let text = format!(
                "func @main(%0: {dtype}[{lhs}], %1: {dtype}[{rhs}]) -> ({dtype}[{out}]) {{
  %2 = dot_general %0, %1, contract=[1]x[0] : {dtype}[{out}]
  return %2
}}"
            );
            let func = parse_func(&text).unwrap();
            let args = inputs(&func, 1);
            let got = CpuExecutable::compile(&func).unwrap().run(&args).unwrap();
            let want = interpret(&func, &args).unwrap();
            assert_eq!(
                got[0].to_f64_vec(),
                want[0].to_f64_vec(),
                "{dtype} {lhs}x{rhs}"
            );
        }
    }
}

fn round_bf16(x: f32) -> f64 {
    half::bf16::from_f32(x).to_f64()
}

/// Row-major `[m, k]` times `[k, n]` in f64.
fn product(a: &[f64], b: &[f64], m: usize, k: usize, n: usize) -> Vec<f64> {
    let mut c = vec![0.0; m * n];
    for i in 0..m {
        for p in 0..k {
            for j in 0..n {
                c[i * n + j] += a[i * k + p] * b[p * n + j];
            }
        }
    }
    c
}

fn assert_all_close(got: &[f32], want: &[f64], rtol: f64, what: &str) {
    let scale = want.iter().fold(0f64, |m, x| m.max(x.abs()));
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let ok = (f64::from(g) - w).abs() <= rtol * (w.abs() + scale);
        assert!(ok, "{what}: element {i} is {g}, want {w}");
    }
}

fn data(n: usize, seed: u32) -> Vec<f32> {
    (0..n)
        .map(|i| {
            ((i as u32).wrapping_mul(2654435761).wrapping_add(seed) % 1000) as f32 / 250.0 - 2.0
        })
        .collect()
}

/// `x.matmul_in(&w, BF16)` is the f32 product of the operands rounded to bf16 (exact products,
/// f32 sums), and its gradient with respect to `x` is the cotangent's product with the rounded
/// `w`, rounded to bf16 (a convert's cotangent is converted back, as in JAX).
#[test]
fn matmul_in_bf16_is_the_f32_product_of_rounded_operands() {
    let (m, k, n) = (6, 40, 5);
    let (xs, ws) = (data(m * k, 1), data(k * n, 2));
    let (x, w) = (
        Tensor::from_vec([m, k], xs.clone()),
        Tensor::from_vec([k, n], ws.clone()),
    );
    let rounded = |v: &[f32]| v.iter().map(|&x| round_bf16(x)).collect::<Vec<f64>>();
    let want = product(&rounded(&xs), &rounded(&ws), m, k, n);
    let y = jit(|(x, w): (Tensor, Tensor)| x.matmul_in(&w, DType::BF16))
        .call((x.clone(), w.clone()))
        .unwrap();
    assert_eq!(y.dtype(), DType::F32);
    assert_all_close(&y.to_vec::<f32>().unwrap(), &want, 1e-6, "value");

    // d/dx sum(y * c) = c · round(w)ᵀ (the f32 cotangent as it is), rounded to bf16.
    let cs = data(m * n, 3);
    let c = Tensor::from_vec([m, n], cs.clone());
    let g = jit(|(x, w, c): (Tensor, Tensor, Tensor)| {
        grad(|x: Tensor| (x.matmul_in(&w, DType::BF16) * &c).sum(..))(x)
    })
    .call((x, w, c))
    .unwrap();
    let mut wt = vec![0.0; n * k];
    for (p, row) in rounded(&ws).chunks(n).enumerate() {
        for (j, &v) in row.iter().enumerate() {
            wt[j * k + p] = v;
        }
    }
    let cs: Vec<f64> = cs.iter().map(|&v| f64::from(v)).collect();
    let want: Vec<f64> = product(&cs, &wt, m, n, k)
        .iter()
        .map(|&v| round_bf16(v as f32))
        .collect();
    assert_all_close(
        &g.to_vec::<f32>().unwrap(),
        &want,
        2f64.powi(-8),
        "gradient",
    );
}

/// A bf16-compute, f32-result product traces to an f32 `dot_general` of widened operands, and
/// a result type that cannot hold the products is an error naming both types.
#[test]
fn dot_precision_traces_and_checks_its_types() {
    let specs = (
        Tensor::spec(DType::F32, [2, 3]),
        Tensor::spec(DType::F32, [3, 4]),
    );
    let dims = DotDims {
        lhs_contract: vec![1],
        rhs_contract: vec![0],
        ..DotDims::default()
    };
    let mixed =
        |(a, b): (Tensor, Tensor)| a.dot_general_with(&b, dims.clone(), DotPrecision::BF16_F32);
    let text = trace(mixed, &specs).unwrap().to_string();
    assert!(
        text.contains("convert") && text.contains(": f32[2,4]"),
        "{text}"
    );
    assert!(!text.contains(": bf16[2,4]"), "{text}");

    let narrowing = DotPrecision::new(DType::F32, DType::BF16);
    let err = trace(
        |(a, b): (Tensor, Tensor)| a.matmul_with(&b, narrowing),
        &specs,
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("f32") && err.contains("bf16"), "{err}");
}

/// `linear_with` at bf16 compute and f32 result: the f32 product of the rounded operands plus
/// the f32 bias; its weight gradient flows back to the f32 master weights.
#[test]
fn linear_with_bf16_compute() {
    let (m, k, n) = (4, 24, 3);
    let (xs, ws) = (data(m * k, 4), data(k * n, 5));
    let bias = vec![0.5f32, -0.25, 1.0];
    let layer = Linear {
        w: Tensor::from_vec([k, n], ws.clone()),
        b: Some(Tensor::from_vec([n], bias.clone())),
    };
    let x = Tensor::from_vec([m, k], xs.clone());
    let y = jit(|(x, p): (Tensor, Linear)| nn::linear_with(&x, &p, DotPrecision::BF16_F32))
        .call((x.clone(), layer.clone()))
        .unwrap();
    let rounded = |v: &[f32]| v.iter().map(|&x| round_bf16(x)).collect::<Vec<f64>>();
    let want: Vec<f64> = product(&rounded(&xs), &rounded(&ws), m, k, n)
        .iter()
        .enumerate()
        .map(|(i, v)| v + f64::from(bias[i % n]))
        .collect();
    assert_all_close(&y.to_vec::<f32>().unwrap(), &want, 1e-6, "value");
    let g = jit(|(x, p): (Tensor, Linear)| {
        grad(|p: Linear| nn::linear_with(&x, &p, DotPrecision::BF16_F32).sum(..))(p)
    })
    .call((x, layer))
    .unwrap();
    assert_eq!(g.w.dtype(), DType::F32);
    // d/dw sum(x·w) = column sums of round(x), rounded to bf16, for every output column.
    let column: Vec<f64> = (0..k)
        .map(|p| round_bf16((0..m).map(|i| round_bf16(xs[i * k + p])).sum::<f64>() as f32))
        .collect();
    let want: Vec<f64> = (0..k * n).map(|i| column[i / n]).collect();
    assert_all_close(
        &g.w.to_vec::<f32>().unwrap(),
        &want,
        2f64.powi(-8),
        "weight gradient",
    );
}

/// Attention at bf16 compute (JAX's `mm` with `cdt=bfloat16`): every product, its gradients'
/// included, runs on gemm, and the result tracks the f32 layer to bf16's precision.
#[test]
fn bf16_attention_runs_on_gemm_and_tracks_f32() {
    let (b, t, d) = (2, 8, 16);
    let dense = |rows: usize, cols: usize, seed: u32| Linear {
        w: Tensor::from_vec(
            [rows, cols],
            data(rows * cols, seed).iter().map(|v| v * 0.1).collect(),
        ),
        b: Some(Tensor::from_vec([cols], data(cols, seed + 1))),
    };
    let params = nn::Attention {
        qkv: dense(d, 3 * d, 6),
        proj: dense(d, d, 8),
    };
    let x = Tensor::from_vec([b, t, d], data(b * t * d, 10));
    let bf16 = DotPrecision::new(DType::BF16, DType::BF16);
    let loss = move |(x, p): (Tensor, nn::Attention)| {
        grad(|x: Tensor| {
            nn::causal_self_attention_with(&x, &p, 2, bf16)
                .square()
                .sum(..)
        })(x)
    };
    let lowered = jit(loss).lower(&(x.clone(), params.clone())).unwrap();
    let fused = lowered.fused().unwrap_or_default();
    let mut step = "";
    for line in fused.lines() {
        if line.trim_start().starts_with("//") {
            step = line;
        }
        let on_host = step.contains("interpreter") && line.contains("dot_general");
        assert!(!on_host, "a product on the interpreter: {fused}");
    }
    let (products, marked) = gemm_steps(fused);
    assert!(products > 0, "{fused}");
    // Each product's operands, the backward pass's cotangents included, are bf16 values.
    assert_eq!(marked, products, "{fused}");

    let attend = |precision: Option<DotPrecision>| {
        let f = move |(x, p): (Tensor, nn::Attention)| match precision {
            Some(q) => nn::causal_self_attention_with(&x, &p, 2, q),
            None => nn::causal_self_attention(&x, &p, 2),
        };
        let y = jit(f).call((x.clone(), params.clone())).unwrap();
        y.to_vec::<f32>().unwrap()
    };
    let exact: Vec<f64> = attend(None).iter().map(|&v| f64::from(v)).collect();
    assert_all_close(&attend(Some(bf16)), &exact, 2e-2, "bf16 against f32");
}

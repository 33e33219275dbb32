//! The special-function ops (`lgamma`, `digamma`, `erf`, `erfc`, `erf_inv`, `bessel_i0e`,
//! `bessel_i1e`: f64 functions rounded once) against JAX in f64 (`tests/jax/generate_special.py`, values in
//! `tests/jax/special_reference.json`), with the derivatives JAX defines; the CPU backend and
//! the emulated GPU (host steps) against the interpreter bit for bit in every float width; and
//! `Tensor::lgamma` / `Tensor::digamma` eagerly, under `jit` and differentiated, and the Bessel
//! methods' derivatives (JAX's formulas) by central differences.
//!
//! Values are checked against the exact ones rounded to f64 (mpmath, in the same file), within
//! 4e-15 relative to `max(|want|, 1)` (about 18 ulp of the values near 1 that lgamma and
//! digamma reach by cancellation; 1e-15 for the others), and against JAX's within 1e-13 (JAX's
//! erf_inv misses the exact values by up to 1.3e-11 near ±1, so 2e-11 there). Derivatives
//! against JAX's within 1e-13; erf_inv's, `√π/2·exp(y²)` of its value `y`, within 1e-9 (a
//! relative error `e` of `y` becomes `2y²e` in it, and JAX's `y` carries 1.3e-11 at y = 4.3).
#![allow(clippy::unwrap_used)]

mod common;

use ferrax::compiler::autodiff::vjp;
use ferrax::compiler::backend::gpu::{GpuOptions, GpuProgram};
use ferrax::compiler::backend::CpuExecutable;
use ferrax::ir::{FuncBuilder, Op, UnaryOp};
use ferrax::runtime::interpret;
use ferrax::{grad, jit, Array, DType, Tensor, TensorType};
use ferrax_ptx_emu::Emulator;
use serde_json::Value;

fn reference() -> Value {
    serde_json::from_str(include_str!("jax/special_reference.json")).unwrap()
}

fn floats(v: &Value) -> Vec<f64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| match x.as_str() {
            Some(s) => s.parse().unwrap(),
            None => x.as_f64().unwrap_or(f64::NAN),
        })
        .collect()
}

fn op(name: &str) -> UnaryOp {
    *UnaryOp::ALL.iter().find(|u| u.name() == name).unwrap()
}

fn unary_func(u: UnaryOp, ty: TensorType) -> ferrax::Func {
    let mut b = FuncBuilder::new("special");
    let x = b.param(ty);
    let y = b.push(Op::Unary(u), &[x]).unwrap();
    b.finish(vec![y])
}

fn assert_close(got: &[f64], want: &[f64], x: &[f64], tol: f64, what: &str) {
    for ((g, w), x) in got.iter().zip(want).zip(x) {
        let same = g == w || (g.is_nan() && w.is_nan());
        assert!(
            same || (g - w).abs() <= tol * w.abs().max(1.0),
            "{what}({x}) = {g}, JAX {w}"
        );
    }
}

#[test]
fn values_and_derivatives_match_jax_in_f64() {
    for case in reference()["cases"].as_array().unwrap() {
        let name = case["op"].as_str().unwrap();
        let (x, want) = (floats(&case["x"]), floats(&case["y"]));
        let u = op(name);
        let ty = TensorType::new(DType::F64, [x.len()]);
        let func = unary_func(u, ty.clone());
        let input = Array::from_vec([x.len()], x.clone()).unwrap();
        let got = interpret(&func, std::slice::from_ref(&input)).unwrap()[0]
            .to_vec::<f64>()
            .unwrap();
        let exact = if matches!(name, "lgamma" | "digamma") {
            4e-15
        } else {
            1e-15
        };
        assert_close(
            &got,
            &floats(&case["exact"]),
            &x,
            exact,
            &format!("{name} (exact)"),
        );
        let jax = if name == "erf_inv" { 2e-11 } else { 1e-13 };
        assert_close(&got, &want, &x, jax, name);
        let Some(dy) = case.get("dy") else {
            let e = vjp(&func).unwrap_err().to_string();
            assert!(e.contains("digamma"), "{e}");
            continue;
        };
        let derivative = vjp(&func).unwrap();
        let ones = Array::from_vec([x.len()], vec![1.0f64; x.len()]).unwrap();
        let got = interpret(&derivative, &[input, ones]).unwrap()[1]
            .to_vec::<f64>()
            .unwrap();
        let jax = if name == "erf_inv" { 1e-9 } else { 1e-13 };
        assert_close(&got, &floats(dy), &x, jax, &format!("d {name}"));
    }
}

/// Every float width on both backends equals the interpreter bit for bit (each runs the
/// interpreter's f64 function as a host step, then rounds).
#[test]
fn backends_compute_the_interpreters_bits_in_every_float_width() {
    let x: Vec<f64> = (0..64).map(|k| f64::from(k) * 0.13 - 4.1).collect();
    let emulator = Emulator::default();
    for name in [
        "lgamma",
        "digamma",
        "erf",
        "erfc",
        "erf_inv",
        "bessel_i0e",
        "bessel_i1e",
    ] {
        for dtype in [DType::F64, DType::F32, DType::F16, DType::BF16] {
            let func = unary_func(op(name), TensorType::new(dtype, [x.len()]));
            let input = Tensor::from_vec([x.len()], x.clone()).astype(dtype);
            let args = vec![input.to_array().unwrap()];
            let want = interpret(&func, &args).unwrap();
            let cpu = CpuExecutable::compile(&func).unwrap().run(&args).unwrap();
            assert_eq!(cpu[0].elements(), want[0].elements(), "{name} {dtype} CPU");
            let gpu = GpuProgram::compile(&func, &emulator, GpuOptions::HIGHEST)
                .unwrap()
                .run(&args)
                .unwrap();
            assert_eq!(gpu[0].elements(), want[0].elements(), "{name} {dtype} GPU");
        }
    }
}

#[test]
fn tensor_lgamma_and_digamma() {
    let x = Tensor::from_vec([5], vec![-2.5f32, 0.5, 1.0, 4.0, 30.0]);
    let lg = x.lgamma().to_vec::<f32>().unwrap();
    // log|Γ(-2.5)| = log(8√π/15), log Γ(1/2) = log √π, log Γ(1) = 0, log Γ(4) = log 6.
    let pi = std::f32::consts::PI;
    let want = [
        (8.0 * pi.sqrt() / 15.0).ln(),
        pi.sqrt().ln(),
        0.0,
        6f32.ln(),
    ];
    for (g, w) in lg.iter().zip(want) {
        assert!(
            (g - w).abs() <= 2.0 * f32::EPSILON * w.abs().max(1.0),
            "{g} {w}"
        );
    }
    let jitted = jit(|x: Tensor| x.lgamma()).call(x.clone()).unwrap();
    assert_eq!(jitted.to_vec::<f32>().unwrap(), lg);
    // d lgamma / dx = digamma, eagerly and compiled.
    let dg = x.digamma().to_vec::<f32>().unwrap();
    let eager = grad(|x: Tensor| x.lgamma().sum(..))(x.clone());
    assert_eq!(eager.to_vec::<f32>().unwrap(), dg);
    let compiled = jit(|x: Tensor| grad(|x: Tensor| x.lgamma().sum(..))(x))
        .call(x.clone())
        .unwrap();
    assert_eq!(compiled.to_vec::<f32>().unwrap(), dg);
    // Poles: lgamma +inf, digamma NaN; integers refused by the dtype rule.
    let poles = Tensor::from_vec([2], vec![0.0f64, -3.0]);
    assert!(poles
        .lgamma()
        .to_vec::<f64>()
        .unwrap()
        .iter()
        .all(|v| *v == f64::INFINITY));
    assert!(poles
        .digamma()
        .to_vec::<f64>()
        .unwrap()
        .iter()
        .all(|v| v.is_nan()));
    let e = Tensor::from_vec([1], vec![3i32])
        .lgamma()
        .to_array()
        .unwrap_err();
    assert!(e.to_string().contains("lgamma"), "{e}");
    common::assert_close(
        &Tensor::from_vec([1], vec![1.0f64])
            .digamma()
            .to_array()
            .unwrap(),
        &Array::from_vec([1], vec![-0.577_215_664_901_532_9f64]).unwrap(),
        4e-15,
        "digamma(1)",
    );
}

/// The Bessel functions' derivatives, `i0e' = i1e - sign(x)·i0e` and `i1e' = i0e - (sign(x) +
/// 1/x)·i1e` (1/2 at 0), by central differences in f64 across 0 and the expansion's switch.
#[test]
fn bessel_derivatives_match_central_differences() {
    let xs = [
        -60.0, -7.5, -1.0, -1e-3, 0.0, 2e-3, 0.7, 3.0, 49.99, 50.01, 120.0,
    ];
    let x = Tensor::from_vec([xs.len()], xs.to_vec());
    for (name, f) in [
        ("bessel_i0e", Tensor::bessel_i0e as fn(&Tensor) -> Tensor),
        ("bessel_i1e", Tensor::bessel_i1e),
    ] {
        let g = grad(|x: Tensor| f(&x).sum(..))(x.clone())
            .to_vec::<f64>()
            .unwrap();
        let h = 1e-6;
        for (k, &at) in xs.iter().enumerate() {
            let value = |d: f64| {
                f(&Tensor::from_vec([1], vec![at + d]))
                    .to_vec::<f64>()
                    .unwrap()[0]
            };
            let fd = (value(h) - value(-h)) / (2.0 * h);
            // i0e has a corner at 0 (its one-sided slopes are ∓1): JAX's rule gives -sign(0)·1 = 0
            // there, the mean of the two. At 0, i1e's central difference is off by h/2 (its
            // x·|x| term), so 1e-6 there.
            let tol = if at == 0.0 { 1e-6 } else { 1e-8 };
            assert!(
                (fd - g[k]).abs() <= tol,
                "d {name}({at}) = {}, central differences {fd}",
                g[k]
            );
        }
    }
}

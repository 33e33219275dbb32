//! Dot-product attention (`nn::dot_product_attention`, the IR's attention ops) against JAX's
//! `jax.nn.dot_product_attention` (`tests/jax/generate_attention.py`, values in
//! `tests/jax/attention_reference.json`): outputs and the gradients of a weighted sum, eagerly
//! and under `jit`, causal or not, over as many keys as queries, fewer and more; the
//! gradients (the recomputing attention parts) by central differences in f64, and second
//! derivatives and forward mode (through the parts' plain-op spelling) likewise; `vmap`;
//! empty operands; and bad operands as errors naming the call.
//!
//! Tolerance 2e-5 relative to `max(|want|, 1)`: a row sums at most 8 products for a score and
//! 7 weighted values, and the gradients recompute the softmax from the log-sum-exps where XLA
//! keeps it, so they round differently.
#![allow(clippy::unwrap_used)]

use ferrax::nn::dot_product_attention;
use ferrax::{jit, jvp, value_and_grad, vmap, DType, Tensor};
use serde_json::Value;

#[path = "common/jax_values.rs"]
mod jax_values;
use jax_values::{assert_close, tensor};

const TOLERANCE: f32 = 2e-5;

fn reference() -> Value {
    serde_json::from_str(include_str!("jax/attention_reference.json")).unwrap()
}

#[test]
fn attention_and_its_gradients_match_jax_eagerly_and_under_jit() {
    let cases = reference()["cases"].as_array().unwrap().clone();
    assert_eq!(cases.len(), 5);
    for case in &cases {
        let name = case["name"].as_str().unwrap();
        let causal = case["causal"].as_bool().unwrap();
        let scale = case["scale"].as_f64();
        let (q, k, v, w) = (
            tensor(&case["q"]),
            tensor(&case["k"]),
            tensor(&case["v"]),
            tensor(&case["weights"]),
        );
        let attend =
            |(q, k, v): (Tensor, Tensor, Tensor)| dot_product_attention(&q, &k, &v, scale, causal);
        let want = tensor(&case["out"]);
        let args = (q.clone(), k.clone(), v.clone());
        assert_close(
            &attend(args.clone()),
            &want,
            TOLERANCE,
            &format!("{name} eager"),
        );
        let jitted = jit(attend).call(args.clone()).unwrap();
        assert_close(&jitted, &want, TOLERANCE, &format!("{name} jit"));

        let weighted = |args: (Tensor, Tensor, Tensor)| (attend(args) * &w).sum(..);
        let (_, (dq, dk, dv)) = value_and_grad(weighted)(args.clone());
        let grads = jit(move |args: (Tensor, Tensor, Tensor)| value_and_grad(weighted)(args).1)
            .call(args)
            .unwrap();
        for (what, eager, compiled) in [
            ("dq", dq, grads.0),
            ("dk", dk, grads.1),
            ("dv", dv, grads.2),
        ] {
            let want = tensor(&case[what]);
            assert_close(&eager, &want, TOLERANCE, &format!("{name} {what} eager"));
            assert_close(&compiled, &want, TOLERANCE, &format!("{name} {what} jit"));
        }
    }
}

/// Deterministic f64 operands of `shape`, in [-1, 1).
fn operand(shape: [usize; 4], seed: usize) -> Tensor {
    let n: usize = shape.iter().product();
    let data: Vec<f64> = (0..n)
        .map(|i| (((i * 37 + seed * 101) % 97) as f64 / 48.5) - 1.0)
        .collect();
    Tensor::from_vec(shape, data)
}

/// Central differences of the scalar `f` at `x` along each coordinate, against `grad`.
fn check_gradient(f: &dyn Fn(&Tensor) -> Tensor, x: &Tensor, grad: &Tensor, what: &str) {
    let values = x.to_vec::<f64>().unwrap();
    let grad = grad.to_vec::<f64>().unwrap();
    let h = 1e-6;
    for (i, &g) in grad.iter().enumerate() {
        let at = |d: f64| {
            let mut v = values.clone();
            v[i] += d;
            f(&Tensor::from_vec(x.shape().to_vec(), v))
                .to_vec::<f64>()
                .unwrap()[0]
        };
        let fd = (at(h) - at(-h)) / (2.0 * h);
        assert!(
            (fd - g).abs() <= 1e-7 * fd.abs().max(1.0),
            "{what}[{i}] = {g}, central differences {fd}"
        );
    }
}

/// The gradients of a causal attention with fewer keys than queries, by central differences
/// in f64; and the second derivative (the gradient of the squared gradient norm, through the
/// gradient parts' plain-op spelling) likewise.
#[test]
fn gradients_and_second_derivatives_match_central_differences() {
    let (q, k, v) = (
        operand([1, 4, 2, 3], 1),
        operand([1, 3, 2, 3], 2),
        operand([1, 3, 2, 3], 3),
    );
    let loss = |q: &Tensor, k: &Tensor, v: &Tensor| {
        dot_product_attention(q, k, v, Some(0.8), true)
            .sin()
            .sum(..)
    };
    let (_, (dq, dk, dv)) = value_and_grad(|(q, k, v): (Tensor, Tensor, Tensor)| loss(&q, &k, &v))(
        (q.clone(), k.clone(), v.clone()),
    );
    check_gradient(&|x| loss(x, &k, &v), &q, &dq, "dq");
    check_gradient(&|x| loss(&q, x, &v), &k, &dk, "dk");
    check_gradient(&|x| loss(&q, &k, x), &v, &dv, "dv");

    // d/dk of |d loss / dq|^2: differentiates the query gradient part.
    let norm = |q: &Tensor, k: &Tensor| {
        let (_, dq) = value_and_grad(|q: Tensor| loss(&q, k, &v))(q.clone());
        dq.square().sum(..)
    };
    let (_, second) = value_and_grad(|k: Tensor| norm(&q, &k))(k.clone());
    check_gradient(&|x| norm(&q, x), &k, &second, "d/dk |dq|^2");
}

/// Forward mode (through the plain-op spelling) agrees with reverse mode: the directional
/// derivative along `t` is the gradient's inner product with `t`.
#[test]
fn forward_mode_agrees_with_reverse_mode() {
    let shape = [2, 3, 2, 4];
    let (q, k, v) = (operand(shape, 4), operand(shape, 5), operand(shape, 6));
    let (tq, tk, tv) = (operand(shape, 7), operand(shape, 8), operand(shape, 9));
    let loss = |(q, k, v): (Tensor, Tensor, Tensor)| {
        dot_product_attention(&q, &k, &v, None, true).tanh().sum(..)
    };
    let primals = (q.clone(), k.clone(), v.clone());
    let (_, along) = jvp(loss, &primals, &(tq.clone(), tk.clone(), tv.clone())).unwrap();
    let (_, (dq, dk, dv)) = value_and_grad(loss)(primals);
    let inner = (dq * tq).sum(..) + (dk * tk).sum(..) + (dv * tv).sum(..);
    let (a, b) = (
        along.to_vec::<f64>().unwrap()[0],
        inner.to_vec::<f64>().unwrap()[0],
    );
    assert!(
        (a - b).abs() <= 1e-12 * b.abs().max(1.0),
        "jvp {a}, vjp {b}"
    );
}

/// `vmap` over a leading axis joins the examples to the batch dimension and gives each
/// example's attention, gradients included.
#[test]
fn vmap_computes_each_examples_attention() {
    let shape = [3, 2, 4, 2, 3];
    let n: usize = shape.iter().product();
    let make = |seed: usize| {
        let data: Vec<f32> = (0..n)
            .map(|i| (((i * 13 + seed * 7) % 23) as f32 / 11.5) - 1.0)
            .collect();
        Tensor::from_vec(shape, data)
    };
    let (q, k, v) = (make(1), make(2), make(3));
    let attend = |(q, k, v): (Tensor, Tensor, Tensor)| {
        let y = dot_product_attention(&q, &k, &v, None, true);
        let (_, (dq, _, _)) = value_and_grad(|(q, k, v): (Tensor, Tensor, Tensor)| {
            dot_product_attention(&q, &k, &v, None, true).sum(..)
        })((q, k, v));
        (y, dq)
    };
    let (ys, dqs) = vmap(attend)((q.clone(), k.clone(), v.clone()));
    for e in 0..3 {
        let one = |t: &Tensor| t.slice(&[e, 0, 0, 0, 0], &[e + 1, 2, 4, 2, 3]).squeeze(0);
        let (y, dq) = attend((one(&q), one(&k), one(&v)));
        assert_close(&one(&ys), &y, 1e-6, &format!("example {e}"));
        assert_close(&one(&dqs), &dq, 1e-6, &format!("example {e} dq"));
    }
}

/// Empty operands give empty results, or zeros where no key is summed over; their gradients
/// are zeros.
#[test]
fn empty_attention() {
    let f32s = |shape: [usize; 4]| Tensor::zeros(DType::F32, shape.to_vec());
    let no_keys = dot_product_attention(
        &f32s([1, 2, 1, 4]),
        &f32s([1, 0, 1, 4]),
        &f32s([1, 0, 1, 4]),
        None,
        false,
    );
    assert_eq!(no_keys.to_vec::<f32>().unwrap(), vec![0.0; 8]);
    let no_queries =
        jit(|(q, k, v): (Tensor, Tensor, Tensor)| dot_product_attention(&q, &k, &v, None, true))
            .call((f32s([2, 0, 1, 4]), f32s([2, 3, 1, 4]), f32s([2, 3, 1, 4])))
            .unwrap();
    assert_eq!(no_queries.shape(), &[2, 0, 1, 4]);
    let (_, (dq, dk, dv)) = value_and_grad(|(q, k, v): (Tensor, Tensor, Tensor)| {
        dot_product_attention(&q, &k, &v, None, true).sum(..)
    })((f32s([0, 3, 1, 4]), f32s([0, 3, 1, 4]), f32s([0, 3, 1, 4])));
    for g in [dq, dk, dv] {
        assert_eq!(g.shape(), &[0, 3, 1, 4]);
    }
}

/// Operands that do not fit together are errors that say why and name the call's line.
#[test]
fn bad_operands_are_errors_naming_the_call() {
    let f32s = |shape: &[usize]| Tensor::zeros(DType::F32, shape.to_vec());
    let cases: [(Tensor, &str); 4] = [
        (
            dot_product_attention(
                &f32s(&[2, 3, 4]),
                &f32s(&[2, 3, 4]),
                &f32s(&[2, 3, 4]),
                None,
                false,
            ),
            "must be [batch, positions, heads, features]",
        ),
        (
            dot_product_attention(
                &f32s(&[1, 3, 2, 4]),
                &f32s(&[1, 3, 3, 4]),
                &f32s(&[1, 3, 3, 4]),
                None,
                true,
            ),
            "do not fit queries",
        ),
        (
            dot_product_attention(
                &f32s(&[1, 3, 2, 4]),
                &f32s(&[1, 5, 2, 4]),
                &f32s(&[1, 4, 2, 4]),
                None,
                true,
            ),
            "do not match",
        ),
        (
            dot_product_attention(
                &Tensor::zeros(DType::I32, vec![1, 3, 2, 4]),
                &Tensor::zeros(DType::I32, vec![1, 3, 2, 4]),
                &Tensor::zeros(DType::I32, vec![1, 3, 2, 4]),
                None,
                true,
            ),
            "not defined for i32",
        ),
    ];
    for (result, expected) in cases {
        let message = result.to_vec::<f32>().unwrap_err().to_string();
        assert!(message.contains(expected), "{message}");
        assert!(message.contains("tests/attention.rs"), "{message}");
    }
}

/// Deterministic f32 operands of `shape`, in [-2, 2).
fn operand_f32(shape: [usize; 4], seed: usize) -> ferrax::Array {
    let n: usize = shape.iter().product();
    let data: Vec<f32> = (0..n)
        .map(|i| (((i * 7919 + seed * 104_729) % 4001) as f32 / 1000.25) - 2.0)
        .collect();
    ferrax::Array::from_vec(shape, data).unwrap()
}

/// The attention kernels (flash attention's forward and backward passes) on the emulated GPU,
/// for queries of 64 to 256 positions: causal and not, fewer and more keys than queries,
/// partial blocks of rows, 8 to 64 head features. The output and the three gradients equal
/// the interpreter's to f32 rounding, the plan running the forward parts as one launch and
/// each gradient as one.
#[test]
fn the_attention_kernels_compute_the_interpreters_values_on_the_emulated_gpu() {
    use ferrax::compiler::backend::gpu::{GpuOptions, GpuProgram};
    use ferrax::compiler::simplify::simplify;
    use ferrax_ptx_emu::Emulator;
    let cases = [
        ([1, 64, 2, 16], 64, true),
        ([2, 100, 1, 64], 100, true),
        ([1, 70, 2, 8], 130, false),
        ([1, 96, 1, 32], 40, true),
        ([1, 256, 1, 8], 256, true),
    ];
    for (q_shape, keys, causal) in cases {
        let [b, _, h, d] = q_shape;
        let kv_shape = [b, keys, h, d];
        let what = format!("q {q_shape:?}, {keys} keys, causal {causal}");
        let func = ferrax::trace(
            move |(q, k, v): (Tensor, Tensor, Tensor)| {
                let loss = move |(q, k, v): (Tensor, Tensor, Tensor)| {
                    dot_product_attention(&q, &k, &v, None, causal)
                        .square()
                        .sum(..)
                };
                let out = dot_product_attention(&q, &k, &v, None, causal);
                let (_, (dq, dk, dv)) = value_and_grad(loss)((q, k, v));
                (out, dq, dk, dv)
            },
            &(
                Tensor::spec(DType::F32, q_shape),
                Tensor::spec(DType::F32, kv_shape),
                Tensor::spec(DType::F32, kv_shape),
            ),
        )
        .unwrap();
        let (simple, _) = simplify(&func).unwrap();
        let args = vec![
            operand_f32(q_shape, 1),
            operand_f32(kv_shape, 2),
            operand_f32(kv_shape, 3),
        ];
        let emulator = Emulator::default();
        let program = GpuProgram::compile(&simple, &emulator, GpuOptions::HIGHEST).unwrap();
        assert_eq!(program.plan().attentions.len(), 4, "{what}");
        assert_eq!(program.host_steps(), 0, "{what}");
        let got = program.run(&args).unwrap();
        let want = ferrax::runtime::interpret(&simple, &args).unwrap();
        let launched = emulator.launched();
        for a in 0..4 {
            let entry = format!("main_a{a}");
            assert!(launched.contains(&entry), "{what}: {launched:?}");
        }
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            let (g, w) = (g.to_f64_vec(), w.to_f64_vec());
            let scale = w.iter().fold(1f64, |m, x| m.max(x.abs()));
            for (k, (a, e)) in g.iter().zip(&w).enumerate() {
                // Sums of up to 256 terms of either order, and exponentials within 2 ulp.
                assert!(
                    (a - e).abs() <= 2e-5 * scale,
                    "{what}: result {i} [{k}] = {a}, interpreter {e}"
                );
            }
        }
    }
}

/// The forward kernel's log-sum-exps (which the gradient parts' plain-op spelling does not
/// read, so the test above cannot see them) and output, as a program's results, written by
/// one launch: on the emulated GPU equal to the interpreter's.
#[test]
fn the_forward_kernel_writes_output_and_log_sum_exps_in_one_launch() {
    use ferrax::compiler::backend::gpu::{GpuOptions, GpuProgram};
    use ferrax_ptx_emu::Emulator;
    // Products at bf16 round the weights relative to the running maximum, the plain-op
    // spelling the normalized ones: a bf16 rounding apart (2^-8 of the largest value).
    for (causal, keys, precision, tol) in [
        (true, 70, "", 2e-5),
        (false, 33, "", 2e-5),
        (true, 70, ", precision=bf16", 1.0 / 64.0),
    ] {
        let flag = format!("{}{precision}", if causal { ", causal=1" } else { "" });
        let text = format!(
            "func @main(%q: f32[2,70,3,12], %k: f32[2,{keys},3,12], %v: f32[2,{keys},3,12]) -> (f32[2,3,70], f32[2,70,3,12]) {{
  %l = attention_lse %q, %k, %v{flag} : f32[2,3,70]
  %o = attention %q, %k, %v{flag} : f32[2,70,3,12]
  return %l, %o
}}"
        );
        let func = ferrax::ir::parse_func(&text).unwrap();
        let args = vec![
            operand_f32([2, 70, 3, 12], 4),
            operand_f32([2, keys, 3, 12], 5),
            operand_f32([2, keys, 3, 12], 6),
        ];
        let emulator = Emulator::default();
        let program = GpuProgram::compile(&func, &emulator, GpuOptions::HIGHEST).unwrap();
        let got = program.run(&args).unwrap();
        assert_eq!(
            emulator.launched(),
            ["main_a0"],
            "one launch for both results"
        );
        let want = ferrax::runtime::interpret(&func, &args).unwrap();
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            let (g, w) = (g.to_f64_vec(), w.to_f64_vec());
            for (k, (a, e)) in g.iter().zip(&w).enumerate() {
                assert!(
                    (a - e).abs() <= tol * e.abs().max(1.0),
                    "causal {causal}{precision}: result {i} [{k}] = {a}, interpreter {e}"
                );
            }
        }
    }
}

/// The forward kernel on the tensor cores (products at bf16 over multiples of 16 head
/// features: GPT-2's 64, and 16 and 32) on the emulated GPU: queries of 64 to 256 positions,
/// causal and not, fewer and more keys than queries, partial blocks of rows and of key
/// tiles. The output and log-sum-exps equal the interpreter's to bf16 rounding (the weights
/// are rounded relative to the running maximum, the plain-op spelling's normalized: a bf16
/// rounding apart), and the plan launches a warp per 16 query rows.
#[test]
fn the_tensor_core_forward_kernel_computes_the_interpreters_values_on_the_emulated_gpu() {
    use ferrax::compiler::backend::gpu::{GpuOptions, GpuProgram};
    use ferrax_ptx_emu::Emulator;
    let cases = [
        ([1, 64, 2, 64], 64, true),
        ([2, 100, 1, 16], 100, true),
        ([1, 70, 2, 32], 130, false),
        ([1, 96, 1, 64], 40, true),
        ([1, 256, 1, 16], 256, true),
        ([1, 33, 3, 48], 200, false),
    ];
    for (q_shape, keys, causal) in cases {
        let [b, t, h, d] = q_shape;
        let what = format!("q {q_shape:?}, {keys} keys, causal {causal}");
        let flag = if causal { ", causal=1" } else { "" };
        let text = format!(
            "func @main(%q: f32[{b},{t},{h},{d}], %k: f32[{b},{keys},{h},{d}], %v: f32[{b},{keys},{h},{d}]) -> (f32[{b},{t},{h},{d}], f32[{b},{h},{t}]) {{
  %o = attention %q, %k, %v{flag}, precision=bf16 : f32[{b},{t},{h},{d}]
  %l = attention_lse %q, %k, %v{flag}, precision=bf16 : f32[{b},{h},{t}]
  return %o, %l
}}"
        );
        let func = ferrax::ir::parse_func(&text).unwrap();
        let kv_shape = [b, keys, h, d];
        let args = vec![
            operand_f32(q_shape, 7),
            operand_f32(kv_shape, 8),
            operand_f32(kv_shape, 9),
        ];
        let emulator = Emulator::default();
        let program = GpuProgram::compile(&func, &emulator, GpuOptions::HIGHEST).unwrap();
        let threads: Vec<usize> = program
            .plan()
            .attentions
            .iter()
            .map(|a| a.threads())
            .collect();
        assert_eq!(threads, [128], "{what}");
        let got = program.run(&args).unwrap();
        assert_eq!(emulator.launched(), ["main_a0"], "{what}");
        let want = ferrax::runtime::interpret(&func, &args).unwrap();
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            let (g, w) = (g.to_f64_vec(), w.to_f64_vec());
            let scale = w.iter().fold(1f64, |m, x| m.max(x.abs()));
            for (k, (a, e)) in g.iter().zip(&w).enumerate() {
                // The output: two bf16 roundings apart at most (the weights' and the
                // result's, 2^-8 of the largest value each); the log-sum-exps: f32 sums of
                // the same rounded scores, within 4 ulp.
                let tol = scale
                    * if i == 0 {
                        2f64.powi(-7)
                    } else {
                        2f64.powi(-21)
                    };
                assert!(
                    (a - e).abs() <= tol,
                    "{what}: result {i} [{k}] = {a}, interpreter {e}"
                );
            }
        }
    }
}

/// The gradient kernels on the tensor cores (products at bf16 over multiples of 16 head
/// features) on the emulated GPU, each part given the forward results and cotangents:
/// queries of 64 to 256 positions, causal and not, fewer and more keys than queries, partial
/// blocks and tiles. The gradients equal the interpreter's to bf16 rounding; the queries'
/// gradient is one launch and the keys' and values' gradients another, a warp per 16 rows.
#[test]
fn the_tensor_core_gradient_kernels_compute_the_interpreters_values_on_the_emulated_gpu() {
    use ferrax::compiler::backend::gpu::{GpuOptions, GpuProgram};
    use ferrax_ptx_emu::Emulator;
    let cases = [
        ([1, 64, 2, 64], 64, true),
        ([2, 100, 1, 16], 100, true),
        ([1, 70, 2, 32], 130, false),
        ([1, 96, 1, 64], 40, true),
        ([1, 40, 1, 16], 96, true),
        ([1, 256, 1, 16], 256, true),
        ([1, 33, 3, 48], 200, false),
    ];
    for (q_shape, keys, causal) in cases {
        let [b, t, h, d] = q_shape;
        let what = format!("q {q_shape:?}, {keys} keys, causal {causal}");
        let flag = if causal { ", causal=1" } else { "" };
        let (q, kv, rows) = (
            format!("f32[{b},{t},{h},{d}]"),
            format!("f32[{b},{keys},{h},{d}]"),
            format!("f32[{b},{h},{t}]"),
        );
        let text = format!(
            "func @main(%q: {q}, %k: {kv}, %v: {kv}, %g: {q}, %gl: {rows}) -> ({q}, {kv}, {kv}) {{
  %o = attention %q, %k, %v{flag}, precision=bf16 : {q}
  %l = attention_lse %q, %k, %v{flag}, precision=bf16 : {rows}
  %dq = attention_dq %q, %k, %v, %o, %l, %g, %gl{flag}, precision=bf16 : {q}
  %dk = attention_dk %q, %k, %v, %o, %l, %g, %gl{flag}, precision=bf16 : {kv}
  %dv = attention_dv %q, %k, %v, %o, %l, %g, %gl{flag}, precision=bf16 : {kv}
  return %dq, %dk, %dv
}}"
        );
        let func = ferrax::ir::parse_func(&text).unwrap();
        let kv_shape = [b, keys, h, d];
        let args = vec![
            operand_f32(q_shape, 11),
            operand_f32(kv_shape, 12),
            operand_f32(kv_shape, 13),
            operand_f32(q_shape, 14),
            operand_f32([b, h, t, 1], 15)
                .reshaped([b, h, t].into())
                .unwrap(),
        ];
        let emulator = Emulator::default();
        let program = GpuProgram::compile(&func, &emulator, GpuOptions::HIGHEST).unwrap();
        let threads: Vec<usize> = program
            .plan()
            .attentions
            .iter()
            .map(|a| a.threads())
            .collect();
        // The forward parts, the queries' gradient, and the keys' and values' gradients.
        assert_eq!(threads, [128; 3], "{what}");
        assert_eq!(program.host_steps(), 0, "{what}");
        let got = program.run(&args).unwrap();
        let want = ferrax::runtime::interpret(&func, &args).unwrap();
        // The values' gradient rounds the same weights as the plain-op spelling, up to f32
        // sums: a bf16 rounding apart at most. The queries' and keys' gradients round the
        // weights' cotangents and `ds`, computed from weights a few f32 ulp apart (from the
        // log-sum-exps, not the normalized exponentials), so a rounding there flips now and
        // then, and sums over up to 256 visited rows carry it: the scalar kernels are as far
        // from the interpreter on these inputs (up to 5% of the largest value, 1% on average).
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            let (g, w) = (g.to_f64_vec(), w.to_f64_vec());
            let scale = w.iter().fold(1f64, |m, x| m.max(x.abs()));
            let (worst, mean) = match i {
                2 => (2f64.powi(-7), 2f64.powi(-7)),
                _ => (2f64.powi(-4), 2f64.powi(-6)),
            };
            let mut total = 0.0;
            for (k, (a, e)) in g.iter().zip(&w).enumerate() {
                total += (a - e).abs();
                assert!(
                    (a - e).abs() <= worst * scale,
                    "{what}: result {i} [{k}] = {a}, interpreter {e}"
                );
            }
            let average = total / g.len() as f64;
            assert!(
                average <= mean * scale,
                "{what}: result {i} off by {average} on average"
            );
        }
    }
}

/// A program `jit` compiled for the CPU (which spells attention in plain ops before
/// simplifying) still plans for a GPU with its attention kernels: its PTX and its GPU artifact
/// launch the kernels, as a program compiled for a GPU does.
#[test]
fn gpu_plans_of_a_cpu_program_keep_their_attention_kernels() {
    use ferrax::compiler::pipeline::simplify_for_gpu;
    let f = jit(|(q, k, v): (Tensor, Tensor, Tensor)| {
        dot_product_attention(&q, &k, &v, None, true).sum(..)
    });
    let x = Tensor::spec(DType::F32, [1, 40, 2, 16]);
    let lowered = f.lower(&(x.clone(), x.clone(), x)).unwrap();
    let (on_gpu, _) = simplify_for_gpu(lowered.traced()).unwrap();
    let plan = ferrax::compiler::backend::gpu::GpuPlan::new(
        &on_gpu,
        ferrax::PtxTarget::Sm80,
        ferrax::compiler::backend::ptx::MathMode::Accurate,
    )
    .unwrap();
    let [kernel] = &plan.run.attentions[..] else {
        panic!("{} attention launches", plan.run.attentions.len());
    };
    let ptx = lowered.ptx().unwrap();
    assert!(
        ptx.contains(&format!(".entry {}(", kernel.name)),
        "no attention kernel"
    );
    let bytes = lowered.export_gpu(ferrax::PtxTarget::Sm80).unwrap();
    let info = ferrax::aot_runtime::inspect_artifact(&bytes).unwrap();
    assert!(info.kernels.contains(&kernel.name), "{:?}", info.kernels);
}

/// Half operands (queries, keys and values already of the precision's type, as
/// `dot_product_attention` makes them under a half precision) compute exactly what f32
/// operands do, the products rounding those: the output and log-sum-exps bit for bit, and the
/// gradients (of the operands' half type) at the same values. On the emulated GPU (the
/// tensor-core kernels for bf16 over multiples of 16 features, the scalar ones for f16 or 12
/// features) and in the interpreter, both against the f32 program.
#[test]
fn half_operands_compute_the_values_of_rounded_f32_operands() {
    use ferrax::compiler::backend::gpu::{GpuOptions, GpuProgram};
    use ferrax_ptx_emu::Emulator;
    let cases = [
        ([1, 70, 2, 64], 130, true, "bf16"),
        ([2, 40, 1, 16], 96, false, "bf16"),
        ([1, 33, 2, 12], 50, true, "bf16"),
        ([1, 40, 1, 8], 40, true, "f16"),
    ];
    for (q_shape, keys, causal, half) in cases {
        let [b, t, h, d] = q_shape;
        let what = format!("q {q_shape:?}, {keys} keys, causal {causal}, {half}");
        let flag = format!(
            "{}, precision={half}",
            if causal { ", causal=1" } else { "" }
        );
        let program = |operands: &str| {
            let (q, kv, rows) = (
                format!("f32[{b},{t},{h},{d}]"),
                format!("f32[{b},{keys},{h},{d}]"),
                format!("f32[{b},{h},{t}]"),
            );
            let (qh, kvh) = (q.replace("f32", operands), kv.replace("f32", operands));
            format!(
                "func @main(%q0: {q}, %k0: {kv}, %v0: {kv}, %g: {q}, %gl: {rows}) -> ({q}, {rows}, {qh}, {kvh}, {kvh}) {{
  %q = convert %q0 : {qh}
  %k = convert %k0 : {kvh}
  %v = convert %v0 : {kvh}
  %o = attention %q, %k, %v{flag} : {q}
  %l = attention_lse %q, %k, %v{flag} : {rows}
  %dq = attention_dq %q, %k, %v, %o, %l, %g, %gl{flag} : {qh}
  %dk = attention_dk %q, %k, %v, %o, %l, %g, %gl{flag} : {kvh}
  %dv = attention_dv %q, %k, %v, %o, %l, %g, %gl{flag} : {kvh}
  return %o, %l, %dq, %dk, %dv
}}"
            )
        };
        let kv_shape = [b, keys, h, d];
        let args = vec![
            operand_f32(q_shape, 21),
            operand_f32(kv_shape, 22),
            operand_f32(kv_shape, 23),
            operand_f32(q_shape, 24),
            operand_f32([b, h, t, 1], 25)
                .reshaped([b, h, t].into())
                .unwrap(),
        ];
        let mut results = Vec::new();
        for operands in [half, "f32"] {
            let func = ferrax::ir::parse_func(&program(operands)).unwrap();
            let emulator = Emulator::default();
            let gpu = GpuProgram::compile(&func, &emulator, GpuOptions::HIGHEST).unwrap();
            // The keys' and values' gradients are one launch on the tensor cores.
            let launches = if half == "bf16" && d % 16 == 0 { 3 } else { 4 };
            assert_eq!(gpu.plan().attentions.len(), launches, "{what}: {operands}");
            assert_eq!(gpu.host_steps(), 0, "{what}: {operands}");
            let got = gpu.run(&args).unwrap();
            let interpreted = ferrax::runtime::interpret(&func, &args).unwrap();
            let dtypes: Vec<DType> = got.iter().map(|a| a.dtype()).collect();
            let gradients = DType::from_name(operands).unwrap();
            assert_eq!(
                dtypes,
                [DType::F32, DType::F32, gradients, gradients, gradients],
                "{what}"
            );
            results.push((got, interpreted));
        }
        let bits = |a: &ferrax::Array| -> Vec<u64> {
            a.to_f64_vec().iter().map(|x| x.to_bits()).collect()
        };
        let (half_results, f32_results) = (&results[0], &results[1]);
        for (i, (h, f)) in half_results.0.iter().zip(&f32_results.0).enumerate() {
            assert_eq!(bits(h), bits(f), "{what}: kernel result {i}");
        }
        for (i, (h, f)) in half_results.1.iter().zip(&f32_results.1).enumerate() {
            assert_eq!(bits(h), bits(f), "{what}: interpreted result {i}");
        }
    }
}

/// On the tensor cores, one kernel computes the keys' and the values' gradients of the same
/// operands: bit for bit what each part's own kernel computes (a program with only one of
/// them), causal and not, with f32 and bf16 operands, in one launch instead of two.
#[test]
fn keys_and_values_gradients_in_one_kernel_equal_their_own_kernels() {
    use ferrax::compiler::backend::gpu::{GpuOptions, GpuProgram};
    use ferrax_ptx_emu::Emulator;
    for (q_shape, keys, causal, operands) in [
        ([1, 70, 2, 64], 130, true, "bf16"),
        ([2, 40, 1, 16], 96, false, "f32"),
    ] {
        let [b, t, h, d] = q_shape;
        let what = format!("q {q_shape:?}, {keys} keys, causal {causal}, {operands}");
        let flag = format!("{}, precision=bf16", if causal { ", causal=1" } else { "" });
        let (q, kv, rows) = (
            format!("{operands}[{b},{t},{h},{d}]"),
            format!("{operands}[{b},{keys},{h},{d}]"),
            format!("f32[{b},{h},{t}]"),
        );
        let out = format!("f32[{b},{t},{h},{d}]");
        let program = |parts: &[(&str, &str)]| {
            let lines: Vec<String> = parts
                .iter()
                .map(|(name, op)| {
                    format!("  %{name} = {op} %q, %k, %v, %o, %l, %g, %gl{flag} : {kv}")
                })
                .collect();
            let results: Vec<String> = parts.iter().map(|(name, _)| format!("%{name}")).collect();
            let types = vec![kv.as_str(); parts.len()].join(", ");
            format!(
                "func @main(%q: {q}, %k: {kv}, %v: {kv}, %g: {out}, %gl: {rows}) -> ({types}) {{
  %o = attention %q, %k, %v{flag} : {out}
  %l = attention_lse %q, %k, %v{flag} : {rows}
{}
  return {}
}}",
                lines.join("\n"),
                results.join(", ")
            )
        };
        let dtype = DType::from_name(operands).unwrap();
        let cast = |a: ferrax::Array| {
            let dims: Vec<String> = a.dims().iter().map(|n| n.to_string()).collect();
            let ty = format!("[{}]", dims.join(","));
            let f = ferrax::ir::parse_func(&format!(
                "func @c(%x: f32{ty}) -> ({operands}{ty}) {{\n  %y = convert %x : {operands}{ty}\n  return %y\n}}"
            ))
            .unwrap();
            ferrax::runtime::interpret(&f, &[a]).unwrap().remove(0)
        };
        let args = vec![
            cast(operand_f32(q_shape, 31)),
            cast(operand_f32([b, keys, h, d], 32)),
            cast(operand_f32([b, keys, h, d], 33)),
            operand_f32(q_shape, 34),
            operand_f32([b, h, t, 1], 35)
                .reshaped([b, h, t].into())
                .unwrap(),
        ];
        assert!(args[..3].iter().all(|a| a.dtype() == dtype), "{what}");
        let run = |parts: &[(&str, &str)]| {
            let func = ferrax::ir::parse_func(&program(parts)).unwrap();
            let emulator = Emulator::default();
            let gpu = GpuProgram::compile(&func, &emulator, GpuOptions::HIGHEST).unwrap();
            let results = gpu.run(&args).unwrap();
            (results, gpu.plan().attentions.len())
        };
        let (both, launches) = run(&[("dk", "attention_dk"), ("dv", "attention_dv")]);
        assert_eq!(
            launches, 2,
            "{what}: the forward parts, then both gradients"
        );
        let (keys_alone, _) = run(&[("dk", "attention_dk")]);
        let (values_alone, _) = run(&[("dv", "attention_dv")]);
        let bits = |a: &ferrax::Array| -> Vec<u64> {
            a.to_f64_vec().iter().map(|x| x.to_bits()).collect()
        };
        assert_eq!(bits(&both[0]), bits(&keys_alone[0]), "{what}: keys");
        assert_eq!(bits(&both[1]), bits(&values_alone[0]), "{what}: values");
    }
}

//! The StableHLO frontend: syntax forms, constants, errors, snapshots of imported programs,
//! and a training step exported from JAX that must reproduce JAX's numbers.
#![allow(clippy::unwrap_used)]

use ferrax_ir::{parse_func, print_func};
use ferrax_runtime::{interpret, Array};
use ferrax_stablehlo::{load, test_cases, CheckKind, Error, Expected};

/// Imports, checks the IR text round trip, and returns the printed IR.
fn imported(text: &str) -> String {
    let func = load(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let printed = print_func(&func);
    assert_eq!(parse_func(&printed).unwrap(), func);
    printed
}

fn run(text: &str, args: &[Array]) -> Vec<Array> {
    interpret(&load(text).unwrap(), args).unwrap()
}

#[test]
fn pretty_and_generic_forms() {
    let text = r#"
module @m attributes {mhlo.num_partitions = 1 : i32} {
  func.func public @main(%arg0: tensor<2x3xf32> {mhlo.sharding = "x"}, %arg1: tensor<3xf32>) -> (tensor<3x2xf32> {jax.result_info = ""}) {
    %0 = stablehlo.broadcast_in_dim %arg1, dims = [1] : (tensor<3xf32>) -> tensor<2x3xf32>
    %1 = "stablehlo.add"(%arg0, %0) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
    %2 = "stablehlo.transpose"(%1) {permutation = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
    %3 = stablehlo.exponential %2 : tensor<3x2xf32>
    %4 = "stablehlo.compare"(%3, %2) {comparison_direction = #stablehlo<comparison_direction GT>} : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xi1>
    %5 = stablehlo.select %4, %3, %2 : tensor<3x2xi1>, tensor<3x2xf32>
    return %5 : tensor<3x2xf32>
  }
}
"#;
    insta::assert_snapshot!(imported(text));
    let a = Array::from_vec([2, 3], vec![0.0f32, 1.0, 2.0, 3.0, 4.0, 5.0]).unwrap();
    let b = Array::from_vec([3], vec![-1.0f32, 0.0, 1.0]).unwrap();
    let out = run(text, &[a, b]).remove(0).to_vec::<f32>().unwrap();
    let want: Vec<f32> = [-1.0f32, 2.0, 1.0, 4.0, 3.0, 6.0]
        .iter()
        .map(|v| v.exp())
        .collect();
    assert_eq!(out, want);
}

#[test]
fn reduce_forms_and_non_identity_init() {
    let text = r#"
func.func @main(%x: tensor<2x3xi64>) -> (tensor<3xi64>, tensor<2xi64>) {
  %c = stablehlo.constant dense<0> : tensor<i64>
  %ten = stablehlo.constant dense<10> : tensor<i64>
  %0 = stablehlo.reduce(%x init: %c) applies stablehlo.add across dimensions = [0] : (tensor<2x3xi64>, tensor<i64>) -> tensor<3xi64>
  %1 = "stablehlo.reduce"(%x, %ten) ({
    ^bb0(%a: tensor<i64>, %b: tensor<i64>):
      %m = stablehlo.maximum %a, %b : tensor<i64>
      stablehlo.return %m : tensor<i64>
  }) {dimensions = array<i64: 1>} : (tensor<2x3xi64>, tensor<i64>) -> tensor<2xi64>
  func.return %0, %1 : tensor<3xi64>, tensor<2xi64>
}
"#;
    insta::assert_snapshot!(imported(text));
    let x = Array::from_vec([2, 3], vec![1i64, 20, 3, 4, 5, 6]).unwrap();
    let out = run(text, &[x]);
    assert_eq!(out[0].to_vec::<i64>().unwrap(), vec![5, 25, 9]);
    assert_eq!(out[1].to_vec::<i64>().unwrap(), vec![20, 10]);
}

#[test]
fn dense_constant_forms() {
    let text = r#"
func.func @main() -> (tensor<2x2xf32>, tensor<3xf32>, tensor<2xf32>, tensor<2xi1>, tensor<2xbf16>) {
  %0 = stablehlo.constant dense<[[1.0, -2.5], [3.0e+00, 4.0e-01]]> : tensor<2x2xf32>
  %1 = stablehlo.constant dense<7.0> : tensor<3xf32>
  %2 = stablehlo.constant dense<[0x7FC00000, 0xFF800000]> : tensor<2xf32>
  %3 = stablehlo.constant dense<[true, false]> : tensor<2xi1>
  %4 = stablehlo.constant dense<"0x803F0040"> : tensor<2xbf16>
  return %0, %1, %2, %3, %4 : tensor<2x2xf32>, tensor<3xf32>, tensor<2xf32>, tensor<2xi1>, tensor<2xbf16>
}
"#;
    let out = run(text, &[]);
    assert_eq!(out[0].to_vec::<f32>().unwrap(), vec![1.0, -2.5, 3.0, 0.4]);
    assert_eq!(out[1].to_vec::<f32>().unwrap(), vec![7.0; 3]);
    let special = out[2].to_vec::<f32>().unwrap();
    assert!(special[0].is_nan() && special[1] == f32::NEG_INFINITY);
    assert_eq!(out[3].to_vec::<bool>().unwrap(), vec![true, false]);
    let b = out[4].to_vec::<half::bf16>().unwrap();
    assert_eq!((b[0].to_f32(), b[1].to_f32()), (1.0, 2.0));
}

#[test]
fn calls_are_inlined_with_multiple_results() {
    let text = r#"
func.func private @split(%a: tensor<f32>) -> (tensor<f32>, tensor<f32>) {
  %0 = stablehlo.negate %a : tensor<f32>
  return %a, %0 : tensor<f32>, tensor<f32>
}
func.func public @main(%x: tensor<f32>) -> tensor<f32> {
  %0:2 = call @split(%x) : (tensor<f32>) -> (tensor<f32>, tensor<f32>)
  %1 = func.call @split(%0#1) : (tensor<f32>) -> (tensor<f32>, tensor<f32>)
  %2 = stablehlo.multiply %0#0, %1 : tensor<f32>
  return %2 : tensor<f32>
}
"#;
    insta::assert_snapshot!(imported(text));
    assert_eq!(
        run(text, &[Array::scalar(3.0f32)])[0]
            .to_vec::<f32>()
            .unwrap(),
        vec![-9.0]
    );
}

#[test]
fn movement_op_forms() {
    let text = r#"
func.func @main(%x: tensor<3x4xf32>, %v: tensor<f32>) -> (tensor<2x2xf32>, tensor<6x4xf32>, tensor<2x6xf32>, tensor<3x4xi32>, tensor<12xf32>, tensor<3x4xf32>) {
  %0 = stablehlo.slice %x [1:3, 0:4:2] : (tensor<3x4xf32>) -> tensor<2x2xf32>
  %1 = stablehlo.pad %x, %v, low = [1, 0], high = [2, 0], interior = [0, 0] : (tensor<3x4xf32>, tensor<f32>) -> tensor<6x4xf32>
  %2 = stablehlo.concatenate %0, %0, %0, dim = 1 : (tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x6xf32>
  %3 = stablehlo.iota dim = 1 : tensor<3x4xi32>
  %4 = stablehlo.reshape %x : (tensor<3x4xf32>) -> tensor<12xf32>
  %5 = "stablehlo.slice"(%x) {start_indices = array<i64: 0, 0>, limit_indices = array<i64: 3, 4>, strides = array<i64: 1, 1>} : (tensor<3x4xf32>) -> tensor<3x4xf32>
  return %0, %1, %2, %3, %4, %5 : tensor<2x2xf32>, tensor<6x4xf32>, tensor<2x6xf32>, tensor<3x4xi32>, tensor<12xf32>, tensor<3x4xf32>
}
"#;
    insta::assert_snapshot!(imported(text));
    let x = Array::from_vec([3, 4], (0..12).map(|i| i as f32).collect::<Vec<_>>()).unwrap();
    let out = run(text, &[x, Array::scalar(-1.0f32)]);
    assert_eq!(out[0].to_vec::<f32>().unwrap(), vec![4.0, 6.0, 8.0, 10.0]);
    assert_eq!(
        out[1].to_vec::<f32>().unwrap()[..5],
        [-1.0, -1.0, -1.0, -1.0, 0.0]
    );
    assert_eq!(out[3].to_vec::<i32>().unwrap()[..4], [0, 1, 2, 3]);
}

#[test]
fn dot_general_with_batch_and_mixed_precision() {
    let text = r#"
func.func @main(%a: tensor<2x3x4xf16>, %b: tensor<2x4x5xf32>) -> tensor<2x3x5xf32> {
  %0 = stablehlo.dot_general %a, %b, batching_dims = [0] x [0], contracting_dims = [2] x [1], precision = [DEFAULT, DEFAULT] : (tensor<2x3x4xf16>, tensor<2x4x5xf32>) -> tensor<2x3x5xf32>
  return %0 : tensor<2x3x5xf32>
}
"#;
    insta::assert_snapshot!(imported(text));
}

#[test]
fn errors_name_the_op_and_line() {
    let unsupported = "func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {\n  %0 = chlo.polygamma %x, %x : tensor<4xf32> -> tensor<4xf32>\n  return %0 : tensor<4xf32>\n}";
    assert_eq!(
        load(unsupported).unwrap_err(),
        Error::Unsupported {
            line: 2,
            what: "op chlo.polygamma".into()
        }
    );
    let dtype = "func.func @main(%x: tensor<4xf8E4M3FN>) -> tensor<4xf32> {\n  return %x : tensor<4xf32>\n}";
    assert!(matches!(
        load(dtype).unwrap_err(),
        Error::Syntax { line: 1, .. } | Error::Unsupported { line: 1, .. }
    ));
    let undefined = "func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {\n  %0 = stablehlo.add %x, %y : tensor<4xf32>\n  return %0 : tensor<4xf32>\n}";
    assert_eq!(
        load(undefined).unwrap_err().to_string(),
        "line 2: %y is not defined"
    );
    let ill_typed = "func.func @main(%x: tensor<4xf32>, %y: tensor<3xf32>) -> tensor<4xf32> {\n  %0 = stablehlo.add %x, %y : tensor<4xf32>\n  return %0 : tensor<4xf32>\n}";
    assert_eq!(
        load(ill_typed).unwrap_err().to_string(),
        "line 2: add: operand types f32[4] and f32[3] do not match"
    );
}

#[test]
fn conformance_files_become_test_cases() {
    let text = r#"
module {
  func.func public @main() -> (tensor<2xf32> {jax.result_info = ""}) {
    %0 = call @inputs() : () -> tensor<2xf32>
    %1 = call @expected() : () -> tensor<2xf32>
    %2 = stablehlo.negate %0 : tensor<2xf32>
    stablehlo.custom_call @check.expect_close(%2, %1) {has_side_effect = true} : (tensor<2xf32>, tensor<2xf32>) -> ()
    return %2 : tensor<2xf32>
  }
  func.func private @inputs() -> (tensor<2xf32> {mhlo.layout_mode = "default"}) {
    %cst = stablehlo.constant dense<[1.0, 2.0]> : tensor<2xf32>
    return %cst : tensor<2xf32>
  }
  func.func private @expected() -> (tensor<2xf32> {mhlo.layout_mode = "default"}) {
    %cst = stablehlo.constant dense<[-1.0, -2.0]> : tensor<2xf32>
    return %cst : tensor<2xf32>
  }
}
// -----
func.func @second() {
  %0 = stablehlo.constant dense<[1, 2]> : tensor<2xi64>
  check.expect_eq_const %0, dense<[1, 2]> : tensor<2xi64>
  func.return
}
"#;
    let cases = test_cases(text).unwrap();
    assert_eq!(cases.len(), 2);
    let main = &cases[0];
    // The inputs arrive as a parameter, not as a constant folded into the program.
    assert_eq!(main.inputs.len(), 1);
    assert_eq!(main.program.func.params.len(), 1);
    assert_eq!(
        main.program.checks[0].kind,
        CheckKind::Ulp { min: 0, max: 3 }
    );
    let args = interpret(&main.inputs[0], &[]).unwrap();
    let outs = interpret(&main.program.func, &args).unwrap();
    let check = &main.program.checks[0];
    let Expected::Output(e) = check.expected else {
        panic!()
    };
    assert_eq!(outs[check.actual], outs[e]);
    assert!(matches!(
        cases[1].program.checks[0].expected,
        Expected::Constant(_)
    ));
}

/// One SGD step of an MLP exported from JAX (`tests/data/export_mlp_step.py`).
#[test]
fn jax_exported_training_step_matches_jax() {
    let text = include_str!("data/mlp_step.mlir");
    let record: serde_json::Value =
        serde_json::from_str(include_str!("data/mlp_step.json")).unwrap();
    let array = |v: &serde_json::Value| {
        let shape: Vec<usize> = v["shape"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d.as_u64().unwrap() as usize)
            .collect();
        let data: Vec<f32> = v["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d.as_f64().unwrap() as f32)
            .collect();
        Array::from_vec(shape, data).unwrap()
    };
    let inputs: Vec<Array> = record["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(array)
        .collect();
    let want: Vec<Array> = record["outputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(array)
        .collect();
    let got = run(text, &inputs);
    assert_eq!(got.len(), want.len());
    for (k, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(g.ty(), w.ty(), "output {k}");
        let (g, w) = (g.to_vec::<f32>().unwrap(), w.to_vec::<f32>().unwrap());
        let scale = w.iter().fold(1e-6f32, |m, v| m.max(v.abs()));
        for (i, (a, b)) in g.iter().zip(&w).enumerate() {
            assert!(
                (a - b).abs() <= 1e-5 * scale,
                "output {k}[{i}]: ferrax {a}, jax {b}"
            );
        }
    }
}

/// More programs through import → ferrax IR text → snapshot (with the text round trip checked).
#[test]
fn import_snapshots() {
    let programs = [
        (
            "unary_chain",
            "func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.exponential_minus_one %x : tensor<4xf32>
  %1 = stablehlo.log_plus_one %0 : tensor<4xf32>
  %2 = stablehlo.logistic %1 : tensor<4xf32>
  %3 = stablehlo.round_nearest_even %2 : tensor<4xf32>
  %4 = stablehlo.round_nearest_afz %3 : tensor<4xf32>
  %5 = stablehlo.sign %4 : tensor<4xf32>
  %6 = stablehlo.cosine %5 : tensor<4xf32>
  return %6 : tensor<4xf32>
}",
        ),
        (
            "compare_select_clamp",
            "func.func @main(%a: tensor<3xi64>, %b: tensor<3xi64>) -> tensor<3xi64> {
  %c = stablehlo.constant dense<[0, 5, 10]> : tensor<3xi64>
  %0 = stablehlo.compare  LT, %a, %b,  SIGNED : (tensor<3xi64>, tensor<3xi64>) -> tensor<3xi1>
  %1 = stablehlo.select %0, %a, %b : tensor<3xi1>, tensor<3xi64>
  %2 = stablehlo.clamp %c, %1, %b : tensor<3xi64>
  return %2 : tensor<3xi64>
}",
        ),
        (
            "bool_arithmetic",
            "func.func @main(%p: tensor<2xi1>, %q: tensor<2xi1>) -> (tensor<2xi1>, tensor<2xi1>, tensor<i1>) {
  %0 = stablehlo.add %p, %q : tensor<2xi1>
  %1 = stablehlo.multiply %p, %q : tensor<2xi1>
  %f = stablehlo.constant dense<false> : tensor<i1>
  %2 = stablehlo.reduce(%0 init: %f) applies stablehlo.or across dimensions = [0] : (tensor<2xi1>, tensor<i1>) -> tensor<i1>
  return %0, %1, %2 : tensor<2xi1>, tensor<2xi1>, tensor<i1>
}",
        ),
        (
            "convert_chain",
            "func.func @main(%x: tensor<2x2xi32>) -> tensor<2x2xf16> {
  %0 = stablehlo.convert %x : (tensor<2x2xi32>) -> tensor<2x2xf32>
  %1 = stablehlo.convert %0 : (tensor<2x2xf32>) -> tensor<2x2xbf16>
  %2 = stablehlo.convert %1 : (tensor<2x2xbf16>) -> tensor<2x2xf16>
  return %2 : tensor<2x2xf16>
}",
        ),
        (
            "iota_concatenate",
            "func.func @main(%x: tensor<2x3xf32>) -> tensor<4x3xf32> {
  %0 = stablehlo.iota dim = 0 : tensor<2x3xf32>
  %1 = \"stablehlo.concatenate\"(%x, %0) {dimension = 0 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<4x3xf32>
  return %1 : tensor<4x3xf32>
}",
        ),
        (
            "generic_pad_and_reduce",
            "func.func @main(%x: tensor<2x3xf64>) -> tensor<5xf64> {
  %v = stablehlo.constant dense<1.5> : tensor<f64>
  %one = stablehlo.constant dense<1.0> : tensor<f64>
  %0 = \"stablehlo.pad\"(%x, %v) {edge_padding_low = array<i64: 1, 0>, edge_padding_high = array<i64: 0, 1>, interior_padding = array<i64: 1, 0>} : (tensor<2x3xf64>, tensor<f64>) -> tensor<4x4xf64>
  %1 = \"stablehlo.reduce\"(%0, %one) ({
    ^bb0(%a: tensor<f64>, %b: tensor<f64>):
      %m = stablehlo.multiply %a, %b : tensor<f64>
      stablehlo.return %m : tensor<f64>
  }) {dimensions = array<i64: 1>} : (tensor<4x4xf64>, tensor<f64>) -> tensor<4xf64>
  %2 = stablehlo.broadcast_in_dim %v, dims = [] : (tensor<f64>) -> tensor<1xf64>
  %3 = stablehlo.concatenate %1, %2, dim = 0 : (tensor<4xf64>, tensor<1xf64>) -> tensor<5xf64>
  return %3 : tensor<5xf64>
}",
        ),
        (
            "generic_dot",
            "func.func @main(%a: tensor<2x3xf32>, %b: tensor<3x4xf32>) -> tensor<2x4xf32> {
  %0 = \"stablehlo.dot_general\"(%a, %b) {dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]>} : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}",
        ),
    ];
    for (name, text) in programs {
        insta::assert_snapshot!(name, imported(text));
    }
}

/// A `sort` of two operands by an integer key, descending (`GT`), then by a float key in
/// lax's canonical form; and comparators ferrax refuses, with the reason.
#[test]
fn sorts_import_lax_comparators_and_refuse_others() {
    let sort = |comparator: &str| {
        format!(
            r#"
func.func public @main(%arg0: tensor<5xi32>, %arg1: tensor<5xf32>) -> (tensor<5xi32>, tensor<5xf32>) {{
  %0:2 = "stablehlo.sort"(%arg0, %arg1) <{{dimension = 0 : i64, is_stable = true}}> ({{
  ^bb0(%a: tensor<i32>, %b: tensor<i32>, %c: tensor<f32>, %d: tensor<f32>):
{comparator}
  }}) : (tensor<5xi32>, tensor<5xf32>) -> (tensor<5xi32>, tensor<5xf32>)
  return %0#0, %0#1 : tensor<5xi32>, tensor<5xf32>
}}
"#
        )
    };
    let canonical = |x: &str, n: &str| {
        format!(
            r#"
    %z{n} = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %e{n} = stablehlo.compare  EQ, %{x}, %z{n},  FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %s{n} = stablehlo.select %e{n}, %z{n}, %{x} : tensor<i1>, tensor<f32>
    %u{n} = stablehlo.compare  NE, %{x}, %{x},  FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %q{n} = stablehlo.constant dense<0x7FC00000> : tensor<f32>
    %k{n} = stablehlo.select %u{n}, %q{n}, %s{n} : tensor<i1>, tensor<f32>"#
        )
    };
    let lexicographic = format!(
        "{}{}
    %lt = stablehlo.compare  LT, %k1, %k2,  TOTALORDER : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %gt = stablehlo.compare  GT, %a, %b,  SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %eq = stablehlo.compare  EQ, %a, %b,  SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %and = stablehlo.and %eq, %lt : tensor<i1>
    %or = stablehlo.or %gt, %and : tensor<i1>
    stablehlo.return %or : tensor<i1>",
        canonical("c", "1"),
        canonical("d", "2")
    );
    let keys = Array::from_vec([5], vec![1i32, 2, 1, 2, 1]).unwrap();
    let values = Array::from_vec([5], vec![0.5f32, -0.0, f32::NAN, 3.0, -2.0]).unwrap();
    let out = run(&sort(&lexicographic), &[keys, values]);
    assert_eq!(out[0].to_vec::<i32>().unwrap(), vec![2, 2, 1, 1, 1]);
    let v = out[1].to_vec::<f32>().unwrap();
    assert_eq!(&v[..4], &[-0.0, 3.0, -2.0, 0.5]);
    assert!(v[4].is_nan());
    let refused = |comparator: &str| load(&sort(comparator)).unwrap_err().to_string();
    let e = refused(
        "    %le = stablehlo.compare  LE, %a, %b,  SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %le : tensor<i1>",
    );
    assert!(e.contains("comparing by le"), "{e}");
    let e = refused(
        "    %lt = stablehlo.compare  LT, %c, %d,  TOTALORDER : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %lt : tensor<i1>",
    );
    assert!(e.contains("separates -0 from +0"), "{e}");
    let e = refused(
        "    %lt = stablehlo.compare  LT, %a, %d,  SIGNED : (tensor<i32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %lt : tensor<i1>",
    );
    assert!(e.contains("different operands"), "{e}");
}

//! Shape-polymorphic programs: `load_specialized` fixes the dynamic sizes (`?`) of a call, the
//! importer folds the sizes the program computes from them, and each `dynamic_*` op becomes
//! its static form. The programs are written in the two forms JAX exports: `jax.export`'s,
//! whose `@main` reads the sizes with `get_dimension_size` and checks them with
//! `shape_assertion`, and the older one passing dimension variables as leading `tensor<i64>`
//! parameters.

use ferrax_ir::{DType, Literal, Scalar};
use ferrax_runtime::{interpret, Array};
use ferrax_stablehlo::{load, load_specialized, parameters, Error, Parameter, Specialize};

/// `jax.export` of `f(x) = (x * 2 + iota(4), sum(x, axis=0))` with `x: f32[b, 4]`, `b >= 1`.
const EXPORTED: &str = r#"
module @jit_f attributes {jax.uses_shape_polymorphism = true, mhlo.num_partitions = 1 : i32} {
  func.func public @main(%arg0: tensor<?x4xf32>) -> (tensor<?x4xf32>, tensor<4xf32>) {
    %0 = stablehlo.get_dimension_size %arg0, dim = 0 : (tensor<?x4xf32>) -> tensor<i32>
    %1 = stablehlo.convert %0 : (tensor<i32>) -> tensor<i64>
    %c = stablehlo.constant dense<1> : tensor<i64>
    %2 = stablehlo.compare  GE, %1, %c,  SIGNED : (tensor<i64>, tensor<i64>) -> tensor<i1>
    stablehlo.custom_call @shape_assertion(%2, %1) {api_version = 2 : i32, error_message = "Expected value >= 1 for dimension variable 'b'. Obtained 'b' = {0}.", has_side_effect = true} : (tensor<i1>, tensor<i64>) -> ()
    %3:2 = call @_wrapped(%1, %arg0) : (tensor<i64>, tensor<?x4xf32>) -> (tensor<?x4xf32>, tensor<4xf32>)
    return %3#0, %3#1 : tensor<?x4xf32>, tensor<4xf32>
  }
  func.func private @_wrapped(%arg0: tensor<i64> {jax.global_constant = "b"}, %arg1: tensor<?x4xf32>) -> (tensor<?x4xf32>, tensor<4xf32>) {
    %c = stablehlo.constant dense<2.0> : tensor<f32>
    %0 = stablehlo.convert %arg0 : (tensor<i64>) -> tensor<i32>
    %1 = stablehlo.reshape %0 : (tensor<i32>) -> tensor<1xi32>
    %c4 = stablehlo.constant dense<4> : tensor<1xi32>
    %2 = stablehlo.concatenate %1, %c4, dim = 0 : (tensor<1xi32>, tensor<1xi32>) -> tensor<2xi32>
    %3 = stablehlo.dynamic_broadcast_in_dim %c, %2, dims = [] : (tensor<f32>, tensor<2xi32>) -> tensor<?x4xf32>
    %4 = stablehlo.multiply %arg1, %3 : tensor<?x4xf32>
    %5 = stablehlo.dynamic_iota %2, dim = 1 : (tensor<2xi32>) -> tensor<?x4xf32>
    %6 = stablehlo.add %4, %5 : tensor<?x4xf32>
    %z = stablehlo.constant dense<0.0> : tensor<f32>
    %7 = stablehlo.reduce(%arg1 init: %z) applies stablehlo.add across dimensions = [0] : (tensor<?x4xf32>, tensor<f32>) -> tensor<4xf32>
    return %6, %7 : tensor<?x4xf32>, tensor<4xf32>
  }
}
"#;

/// The older form of the same kind of program: `%arg0` is the dimension variable `b` of
/// `x: f32[b, 3]`; the result is `x` reshaped to `[3 * b]`, padded by `b` zeros at the end,
/// and its slice `[1 : 3b : 2]`.
const DIMENSION_ARGUMENT: &str = r#"
func.func public @main(%arg0: tensor<i64>, %arg1: tensor<?x3xf32>) -> (tensor<?xf32>, tensor<?xf32>) {
  %0 = stablehlo.convert %arg0 : (tensor<i64>) -> tensor<i32>
  %1 = stablehlo.reshape %0 : (tensor<i32>) -> tensor<1xi32>
  %c3 = stablehlo.constant dense<3> : tensor<1xi32>
  %2 = stablehlo.multiply %1, %c3 : tensor<1xi32>
  %3 = stablehlo.dynamic_reshape %arg1, %2 : (tensor<?x3xf32>, tensor<1xi32>) -> tensor<?xf32>
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %c0 = stablehlo.constant dense<0> : tensor<1xi32>
  %4 = stablehlo.dynamic_pad %3, %z, %c0, %1, %c0 : (tensor<?xf32>, tensor<f32>, tensor<1xi32>, tensor<1xi32>, tensor<1xi32>) -> tensor<?xf32>
  %c1 = stablehlo.constant dense<1> : tensor<1xi32>
  %c2 = stablehlo.constant dense<2> : tensor<1xi32>
  %5 = stablehlo.real_dynamic_slice %3, %c1, %2, %c2 : (tensor<?xf32>, tensor<1xi32>, tensor<1xi32>, tensor<1xi32>) -> tensor<?xf32>
  return %4, %5 : tensor<?xf32>, tensor<?xf32>
}
"#;

fn matrix(rows: usize, cols: usize) -> Vec<f32> {
    (0..rows * cols).map(|i| i as f32 * 0.5 - 1.0).collect()
}

fn run(func: &ferrax_ir::Func, args: &[Array]) -> Vec<Vec<f32>> {
    interpret(func, args)
        .expect("runs")
        .iter()
        .map(|a| a.to_vec::<f32>().expect("f32"))
        .collect()
}

#[test]
fn parameters_say_which_sizes_vary() {
    let expected = |name: &str, dtype, dims: Vec<Option<usize>>| Parameter {
        name: name.into(),
        dtype,
        dims,
    };
    assert_eq!(
        parameters(EXPORTED).unwrap(),
        [expected("arg0", DType::F32, vec![None, Some(4)])]
    );
    assert_eq!(
        parameters(DIMENSION_ARGUMENT).unwrap(),
        [
            expected("arg0", DType::I64, vec![]),
            expected("arg1", DType::F32, vec![None, Some(3)])
        ]
    );
}

#[test]
fn an_export_runs_at_every_batch_size() {
    for b in [1, 3, 7] {
        let func = load_specialized(EXPORTED, &[Specialize::Shape(vec![b, 4])]).unwrap();
        assert_eq!(func.params.len(), 1);
        let x = matrix(b, 4);
        let out = run(&func, &[Array::from_vec(vec![b, 4], x.clone()).unwrap()]);
        let scaled: Vec<f32> = x
            .iter()
            .enumerate()
            .map(|(i, v)| v * 2.0 + (i % 4) as f32)
            .collect();
        let sums: Vec<f32> = (0..4).map(|c| (0..b).map(|r| x[r * 4 + c]).sum()).collect();
        assert_eq!(out, [scaled, sums], "b = {b}");
    }
}

#[test]
fn zero_rows_fail_the_exports_shape_assertion() {
    let err = load_specialized(EXPORTED, &[Specialize::Shape(vec![0, 4])]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "line 8: Expected value >= 1 for dimension variable 'b'. Obtained 'b' = 0."
    );
}

#[test]
fn dimension_arguments_become_constants() {
    for b in [1usize, 2, 5] {
        let specs = [
            Specialize::Value(Literal::scalar(Scalar::I64(b as i64))),
            Specialize::Shape(vec![b, 3]),
        ];
        let func = load_specialized(DIMENSION_ARGUMENT, &specs).unwrap();
        assert_eq!(
            func.params.len(),
            1,
            "the dimension argument is no parameter"
        );
        let x = matrix(b, 3);
        let out = run(&func, &[Array::from_vec(vec![b, 3], x.clone()).unwrap()]);
        let mut padded = x.clone();
        padded.extend(std::iter::repeat_n(0.0, b));
        let strided: Vec<f32> = x.iter().skip(1).step_by(2).copied().collect();
        assert_eq!(out, [padded, strided], "b = {b}");
    }
}

#[test]
fn the_cpu_backend_runs_specialized_programs() {
    use ferrax_compiler::pipeline::{compile_simplified, Backend};
    let func = load_specialized(EXPORTED, &[Specialize::Shape(vec![5, 4])]).unwrap();
    let args = [Array::from_vec(vec![5, 4], matrix(5, 4)).unwrap()];
    let exe = compile_simplified(&func, &Backend::Cpu).unwrap();
    let cpu = exe.run(args.to_vec()).unwrap();
    let reference = interpret(&func, &args).unwrap();
    assert_eq!(cpu, reference);
}

#[test]
fn unspecialized_and_misspecialized_programs_are_errors() {
    let unsupported = load(EXPORTED).unwrap_err();
    assert!(
        matches!(&unsupported, Error::Unsupported { what, .. }
            if what.contains("tensor<?x4xf32>") && what.contains("%arg0") && what.contains("load_specialized")),
        "{unsupported}"
    );
    let cases: [(&str, Vec<Specialize>, &str); 5] = [
        (
            EXPORTED,
            vec![],
            "dynamic shape tensor<?x4xf32> of parameter %arg0",
        ),
        (
            EXPORTED,
            vec![Specialize::Shape(vec![2, 5])],
            "parameter %arg0 is tensor<?x4xf32>, specialized as",
        ),
        (
            EXPORTED,
            vec![Specialize::Shape(vec![2, 4]), Specialize::Shape(vec![2, 4])],
            "@main has 1 parameters, specialized with 2",
        ),
        (
            DIMENSION_ARGUMENT,
            vec![
                Specialize::Value(Literal::scalar(Scalar::I32(2))),
                Specialize::Shape(vec![2, 3]),
            ],
            "parameter %arg0 is tensor<i64>, specialized as",
        ),
        // The dimension variable disagrees with the array's size: the reshape cannot hold it.
        (
            DIMENSION_ARGUMENT,
            vec![
                Specialize::Value(Literal::scalar(Scalar::I64(4))),
                Specialize::Shape(vec![2, 3]),
            ],
            "reshape",
        ),
    ];
    for (text, specs, message) in cases {
        let err = load_specialized(text, &specs).unwrap_err().to_string();
        assert!(err.contains(message), "{err} should say {message}");
    }
}

#[test]
fn shapes_computed_from_tensor_values_are_unsupported() {
    let text = r#"
func.func public @main(%arg0: tensor<?xf32>, %n: tensor<1xi32>) -> tensor<?xf32> {
  %0 = stablehlo.dynamic_reshape %arg0, %n : (tensor<?xf32>, tensor<1xi32>) -> tensor<?xf32>
  return %0 : tensor<?xf32>
}
"#;
    let err = load_specialized(
        text,
        &[Specialize::Shape(vec![3]), Specialize::Shape(vec![1])],
    )
    .unwrap_err();
    assert!(
        matches!(&err, Error::Unsupported { what, .. } if what.contains("data-dependent shape")),
        "{err}"
    );
}

#[test]
fn ops_with_dynamic_results_take_their_sizes_from_their_operands() {
    // Elementwise ops, a transpose, a concatenation, a dot product and a gather, each with
    // `?` in its result type.
    let text = r#"
func.func public @main(%x: tensor<?x2xf32>, %i: tensor<?x1xi32>) -> (tensor<2x?xf32>, tensor<?x2xf32>, tensor<?x?xf32>, tensor<?x2xf32>) {
  %0 = stablehlo.negate %x : tensor<?x2xf32>
  %1 = stablehlo.transpose %0, dims = [1, 0] : (tensor<?x2xf32>) -> tensor<2x?xf32>
  %2 = stablehlo.concatenate %x, %0, dim = 0 : (tensor<?x2xf32>, tensor<?x2xf32>) -> tensor<?x2xf32>
  %3 = stablehlo.dot_general %x, %1, contracting_dims = [1] x [0] : (tensor<?x2xf32>, tensor<2x?xf32>) -> tensor<?x?xf32>
  %4 = "stablehlo.gather"(%x, %i) <{dimension_numbers = #stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>, slice_sizes = array<i64: 1, 2>}> : (tensor<?x2xf32>, tensor<?x1xi32>) -> tensor<?x2xf32>
  return %1, %2, %3, %4 : tensor<2x?xf32>, tensor<?x2xf32>, tensor<?x?xf32>, tensor<?x2xf32>
}
"#;
    let func = load_specialized(
        text,
        &[Specialize::Shape(vec![3, 2]), Specialize::Shape(vec![2, 1])],
    )
    .unwrap();
    let x = matrix(3, 2);
    let out = interpret(
        &func,
        &[
            Array::from_vec(vec![3, 2], x.clone()).unwrap(),
            Array::from_vec(vec![2, 1], vec![2i32, 0]).unwrap(),
        ],
    )
    .unwrap();
    let dims: Vec<Vec<usize>> = out.iter().map(|a| a.dims().to_vec()).collect();
    assert_eq!(dims, [vec![2, 3], vec![6, 2], vec![3, 3], vec![2, 2]]);
    let gathered = out[3].to_vec::<f32>().unwrap();
    assert_eq!(gathered, [x[4], x[5], x[0], x[1]]);
    // A declared static size the operands contradict is an error, not a wrong shape.
    let wrong = text.replace("-> tensor<2x?xf32>\n  %2", "-> tensor<3x?xf32>\n  %2");
    let err = load_specialized(
        &wrong,
        &[Specialize::Shape(vec![3, 2]), Specialize::Shape(vec![2, 1])],
    )
    .unwrap_err();
    assert!(err.to_string().contains("declares tensor<3x?x"), "{err}");
}

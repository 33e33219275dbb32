//! `Exported`: a program as `jax.export` writes it, called with arrays, compiled once per
//! argument signature; a shape-polymorphic one serves every batch size, in both of JAX's
//! calling conventions; bad calls are errors naming the argument.
#![allow(clippy::unwrap_used)]

use ferrax::{Array, DType, Exported};

/// `f(x) = tanh(x) + 1` over `x: f32[b, 3]`, as `jax.export` writes it with `b` symbolic:
/// `@main` reads `b` and checks it before calling the function it wraps.
const POLYMORPHIC: &str = r#"
module @jit_f attributes {jax.uses_shape_polymorphism = true} {
  func.func public @main(%arg0: tensor<?x3xf32>) -> (tensor<?x3xf32>) {
    %0 = stablehlo.get_dimension_size %arg0, dim = 0 : (tensor<?x3xf32>) -> tensor<i32>
    %1 = stablehlo.convert %0 : (tensor<i32>) -> tensor<i64>
    %c = stablehlo.constant dense<1> : tensor<i64>
    %2 = stablehlo.compare  GE, %1, %c,  SIGNED : (tensor<i64>, tensor<i64>) -> tensor<i1>
    stablehlo.custom_call @shape_assertion(%2, %1) {api_version = 2 : i32, error_message = "Expected value >= 1 for dimension variable 'b'. Obtained {0}.", has_side_effect = true} : (tensor<i1>, tensor<i64>) -> ()
    %3 = call @_wrapped(%1, %arg0) : (tensor<i64>, tensor<?x3xf32>) -> tensor<?x3xf32>
    return %3 : tensor<?x3xf32>
  }
  func.func private @_wrapped(%b: tensor<i64>, %x: tensor<?x3xf32>) -> tensor<?x3xf32> {
    %0 = stablehlo.tanh %x : tensor<?x3xf32>
    %one = stablehlo.constant dense<1.0> : tensor<f32>
    %1 = stablehlo.convert %b : (tensor<i64>) -> tensor<i32>
    %2 = stablehlo.reshape %1 : (tensor<i32>) -> tensor<1xi32>
    %c3 = stablehlo.constant dense<3> : tensor<1xi32>
    %3 = stablehlo.concatenate %2, %c3, dim = 0 : (tensor<1xi32>, tensor<1xi32>) -> tensor<2xi32>
    %4 = stablehlo.dynamic_broadcast_in_dim %one, %3, dims = [] : (tensor<f32>, tensor<2xi32>) -> tensor<?x3xf32>
    %5 = stablehlo.add %0, %4 : tensor<?x3xf32>
    return %5 : tensor<?x3xf32>
  }
}
"#;

fn rows(b: usize) -> Array {
    Array::from_vec(
        [b, 3],
        (0..b * 3)
            .map(|i| i as f32 * 0.25 - 1.0)
            .collect::<Vec<_>>(),
    )
    .unwrap()
}

fn expected(b: usize) -> Vec<f32> {
    (0..b * 3)
        .map(|i| (i as f32 * 0.25 - 1.0).tanh() + 1.0)
        .collect()
}

/// Each batch size compiles once; calling a size again reuses its executable.
#[test]
fn one_executable_per_shape() {
    let f = Exported::new(POLYMORPHIC).unwrap();
    assert_eq!(f.parameters()[0].dims, [None, Some(3)]);
    for b in [2, 5, 2, 1, 5] {
        let out = f.call(&[rows(b)]).unwrap();
        let got = out[0].to_vec::<f32>().unwrap();
        for (g, w) in got.iter().zip(expected(b)) {
            assert!(
                (g - w).abs() <= 4.0 * f32::EPSILON * w.abs().max(1.0),
                "{g} vs {w}"
            );
        }
    }
    assert_eq!(f.compiled_signatures(), 3);
}

/// The older convention: the batch size `%b` passed ahead of the array, as an `i64` scalar.
#[test]
fn dimension_arguments_are_part_of_the_signature() {
    let text = r#"func.func public @main(%b: tensor<i64>, %x: tensor<?x3xf32>) -> tensor<?x3xf32> {
  %0 = stablehlo.convert %b : (tensor<i64>) -> tensor<i32>
  %1 = stablehlo.reshape %0 : (tensor<i32>) -> tensor<1xi32>
  %c3 = stablehlo.constant dense<3> : tensor<1xi32>
  %2 = stablehlo.concatenate %1, %c3, dim = 0 : (tensor<1xi32>, tensor<1xi32>) -> tensor<2xi32>
  %two = stablehlo.constant dense<2.0> : tensor<f32>
  %3 = stablehlo.dynamic_broadcast_in_dim %two, %2, dims = [] : (tensor<f32>, tensor<2xi32>) -> tensor<?x3xf32>
  %4 = stablehlo.multiply %x, %3 : tensor<?x3xf32>
  return %4 : tensor<?x3xf32>
}"#;
    let f = Exported::new(text).unwrap();
    for b in [4usize, 1] {
        let out = f.call(&[Array::scalar(b as i64), rows(b)]).unwrap();
        let want: Vec<f32> = (0..b * 3).map(|i| (i as f32 * 0.25 - 1.0) * 2.0).collect();
        assert_eq!(out[0].to_vec::<f32>().unwrap(), want);
    }
    assert_eq!(f.compiled_signatures(), 2);
    // A dimension argument the array contradicts fails to specialize: an error, not a crash.
    assert!(f.call(&[Array::scalar(3i64), rows(4)]).is_err());
}

#[test]
fn bad_calls_name_what_is_wrong() {
    let f = Exported::new(POLYMORPHIC).unwrap();
    let cases = [
        (vec![], "takes 1 arguments, called with 0"),
        (
            vec![Array::zeros(DType::F32, vec![2, 4])],
            "argument %arg0 is f32[2,4], where the program takes f32[?,3]",
        ),
        (
            vec![Array::zeros(DType::F64, vec![2, 3])],
            "argument %arg0 is f64[2,3]",
        ),
        (
            vec![Array::zeros(DType::F32, vec![0, 3])],
            "Expected value >= 1 for dimension variable 'b'. Obtained 0.",
        ),
    ];
    for (args, message) in cases {
        let e = f.call(&args).unwrap_err().to_string();
        assert!(e.contains(message), "{e} should say {message}");
    }
    assert_eq!(f.compiled_signatures(), 0);
}

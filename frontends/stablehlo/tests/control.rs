//! `stablehlo.while` (pretty and generic), `stablehlo.case` and `stablehlo.if` as JAX exports
//! them: regions that read values of the enclosing function become functions taking them as
//! parameters; results are checked on the interpreter.
#![allow(clippy::unwrap_used)]

use ferrax_ir::{parse_func, print_func};
use ferrax_runtime::{interpret, Array};
use ferrax_stablehlo::load;

fn imported(text: &str) -> String {
    let func = load(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let printed = print_func(&func);
    assert_eq!(parse_func(&printed).unwrap(), func);
    printed
}

fn run(text: &str, args: &[Array]) -> Vec<Array> {
    interpret(&load(text).unwrap(), args).unwrap()
}

/// `fori_loop(0, 4, lambda i, x: x * s, x)` as JAX exports it: the body reads `%arg1`.
const FORI: &str = r#"
module @jit_f {
  func.func public @main(%arg0: tensor<3xf32>, %arg1: tensor<f32>) -> (tensor<3xf32>) {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %0:2 = stablehlo.while(%iterArg = %c, %iterArg_0 = %arg0) : tensor<i32>, tensor<3xf32>
     cond {
      %c_1 = stablehlo.constant dense<4> : tensor<i32>
      %1 = stablehlo.compare  LT, %iterArg, %c_1,  SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %1 : tensor<i1>
    } do {
      %1 = stablehlo.broadcast_in_dim %arg1, dims = [] : (tensor<f32>) -> tensor<3xf32>
      %2 = stablehlo.multiply %iterArg_0, %1 : tensor<3xf32>
      %c_1 = stablehlo.constant dense<1> : tensor<i32>
      %3 = stablehlo.add %iterArg, %c_1 : tensor<i32>
      stablehlo.return %3, %2 : tensor<i32>, tensor<3xf32>
    }
    return %0#1 : tensor<3xf32>
  }
}
"#;

#[test]
fn pretty_while_with_a_value_from_outside() {
    insta::assert_snapshot!(imported(FORI));
    let x = Array::from_vec([3], vec![1.0f32, -2.0, 0.5]).unwrap();
    let out = run(FORI, &[x, Array::scalar(2.0f32)]);
    assert_eq!(out[0].to_vec::<f32>().unwrap(), vec![16.0, -32.0, 8.0]);
}

#[test]
fn generic_while_case_and_if() {
    let text = r#"
func.func @main(%k: tensor<i32>, %p: tensor<i1>, %x: tensor<3xf32>, %s: tensor<f32>) -> (tensor<3xf32>, tensor<f32>, tensor<3xf32>, tensor<i64>) {
  %z = stablehlo.constant dense<0> : tensor<i64>
  %w:2 = "stablehlo.while"(%z, %s) ({
  ^bb0(%i: tensor<i64>, %a: tensor<f32>):
    %lim = stablehlo.constant dense<3> : tensor<i64>
    %c = stablehlo.compare LT, %i, %lim : (tensor<i64>, tensor<i64>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }, {
  ^bb0(%i: tensor<i64>, %a: tensor<f32>):
    %one = stablehlo.constant dense<1> : tensor<i64>
    %i2 = stablehlo.add %i, %one : tensor<i64>
    %a2 = stablehlo.add %a, %a : tensor<f32>
    stablehlo.return %i2, %a2 : tensor<i64>, tensor<f32>
  }) : (tensor<i64>, tensor<f32>) -> (tensor<i64>, tensor<f32>)
  %r:2 = "stablehlo.case"(%k) ({
    %n = stablehlo.negate %x : tensor<3xf32>
    stablehlo.return %n, %s : tensor<3xf32>, tensor<f32>
  }, {
    stablehlo.return %x, %w#1 : tensor<3xf32>, tensor<f32>
  }) : (tensor<i32>) -> (tensor<3xf32>, tensor<f32>)
  %f = "stablehlo.if"(%p) ({
    stablehlo.return %x : tensor<3xf32>
  }, {
    %e = stablehlo.exponential %x : tensor<3xf32>
    stablehlo.return %e : tensor<3xf32>
  }) : (tensor<i1>) -> tensor<3xf32>
  func.return %r#0, %r#1, %f, %w#0 : tensor<3xf32>, tensor<f32>, tensor<3xf32>, tensor<i64>
}
"#;
    insta::assert_snapshot!(imported(text));
    let x = Array::from_vec([3], vec![0.0f32, 1.0, -1.0]).unwrap();
    let args = |k: i32, p: bool| {
        [
            Array::scalar(k),
            Array::scalar(p),
            x.clone(),
            Array::scalar(1.5f32),
        ]
    };
    let out = run(text, &args(0, true));
    assert_eq!(out[0].to_vec::<f32>().unwrap(), vec![-0.0, -1.0, 1.0]);
    assert_eq!(out[1].to_vec::<f32>().unwrap(), vec![1.5]);
    assert_eq!(out[2].to_vec::<f32>().unwrap(), vec![0.0, 1.0, -1.0]);
    assert_eq!(out[3].to_vec::<i64>().unwrap(), vec![3]);
    // Out of range picks the last branch; a false predicate the `if`'s second region.
    let out = run(text, &args(-4, false));
    assert_eq!(out[0].to_vec::<f32>().unwrap(), vec![0.0, 1.0, -1.0]);
    assert_eq!(out[1].to_vec::<f32>().unwrap(), vec![12.0]);
    let e: Vec<f32> = [0.0f32, 1.0, -1.0].iter().map(|v| v.exp()).collect();
    assert_eq!(out[2].to_vec::<f32>().unwrap(), e);
}

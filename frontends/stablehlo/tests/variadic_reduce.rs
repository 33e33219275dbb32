//! `stablehlo.reduce` over several operands with a body of any ops, in the pretty form JAX
//! writes for `argmax` and in the generic form, against direct loops: the first index of the
//! largest value (NaN counting as largest), over each axis, for lengths from 0 to 9; and the
//! initial values combined exactly once.
#![allow(clippy::unwrap_used)]

use ferrax_ir::{parse_func, print_func, Elements};
use ferrax_runtime::{interpret, Array};
use ferrax_stablehlo::load;

/// `jnp.argmax(x, axis)` of an f32[rows, cols] as JAX exports it (pretty `reducer` form).
fn argmax_text(rows: usize, cols: usize, axis: usize) -> String {
    let out = if axis == 0 { cols } else { rows };
    format!(
        r#"
func.func @main(%x: tensor<{rows}x{cols}xf32>) -> tensor<{out}xi32> {{
  %i = stablehlo.iota dim = {axis} : tensor<{rows}x{cols}xi32>
  %c = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %c_0 = stablehlo.constant dense<0> : tensor<i32>
  %0:2 = stablehlo.reduce(%x init: %c), (%i init: %c_0) across dimensions = [{axis}] : (tensor<{rows}x{cols}xf32>, tensor<{rows}x{cols}xi32>, tensor<f32>, tensor<i32>) -> (tensor<{out}xf32>, tensor<{out}xi32>)
   reducer(%a: tensor<f32>, %b: tensor<f32>) (%ai: tensor<i32>, %bi: tensor<i32>)  {{
    %2 = stablehlo.compare  GT, %a, %b,  FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %3 = stablehlo.compare  NE, %a, %a,  FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %4 = stablehlo.or %2, %3 : tensor<i1>
    %5 = stablehlo.compare  EQ, %a, %b,  FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %6 = stablehlo.compare  LT, %ai, %bi,  SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %7 = stablehlo.and %5, %6 : tensor<i1>
    %8 = stablehlo.or %4, %7 : tensor<i1>
    %9 = stablehlo.select %4, %a, %b : tensor<i1>, tensor<f32>
    %10 = stablehlo.select %8, %ai, %bi : tensor<i1>, tensor<i32>
    stablehlo.return %9, %10 : tensor<f32>, tensor<i32>
  }}
  return %0#1 : tensor<{out}xi32>
}}
"#
    )
}

/// The first index of the largest element of each line (a NaN is larger than any number).
fn argmax_by_loops(x: &[f32], rows: usize, cols: usize, axis: usize) -> Vec<i32> {
    let (lines, len) = if axis == 0 {
        (cols, rows)
    } else {
        (rows, cols)
    };
    (0..lines)
        .map(|l| {
            let at = |k: usize| {
                if axis == 0 {
                    x[k * cols + l]
                } else {
                    x[l * cols + k]
                }
            };
            let mut best = 0;
            for k in 1..len {
                let (b, v) = (at(best), at(k));
                if !b.is_nan() && (v.is_nan() || v > b) {
                    best = k;
                }
            }
            best as i32
        })
        .collect()
}

#[test]
fn argmax_takes_the_first_largest_over_either_axis() {
    for rows in [1, 2, 3, 7] {
        for cols in [1, 4, 5, 9] {
            // Few distinct values (ties), a NaN now and then.
            let x: Vec<f32> = (0..rows * cols)
                .map(|k| match (k * 7 + 3) % 13 {
                    12 => f32::NAN,
                    v => (v % 4) as f32,
                })
                .collect();
            for axis in [0, 1] {
                let text = argmax_text(rows, cols, axis);
                let func = load(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
                assert_eq!(parse_func(&print_func(&func)).unwrap(), func);
                let input = Array::new([rows, cols], Elements::F32(x.clone())).unwrap();
                let got = interpret(&func, &[input]).unwrap();
                assert_eq!(
                    got[0].as_slice::<i32>().unwrap(),
                    argmax_by_loops(&x, rows, cols, axis),
                    "{rows}x{cols} over {axis}: {x:?}"
                );
            }
        }
    }
}

/// The generic form lists the body's accumulators first; initial values that are not the
/// identity are combined once, and a reduction of nothing gives them.
#[test]
fn generic_sums_of_two_operands_combine_the_initial_values_once() {
    for n in [0, 1, 2, 5, 8] {
        let text = format!(
            r#"
func.func @main(%x: tensor<{n}xf32>, %y: tensor<{n}xi32>) -> (tensor<f32>, tensor<i32>) {{
  %c = stablehlo.constant dense<1.5> : tensor<f32>
  %d = stablehlo.constant dense<10> : tensor<i32>
  %0:2 = "stablehlo.reduce"(%x, %y, %c, %d) <{{dimensions = array<i64: 0>}}> ({{
  ^bb0(%a: tensor<f32>, %b: tensor<i32>, %e: tensor<f32>, %f: tensor<i32>):
    %1 = stablehlo.add %a, %e : tensor<f32>
    %2 = stablehlo.multiply %b, %f : tensor<i32>
    stablehlo.return %1, %2 : tensor<f32>, tensor<i32>
  }}) : (tensor<{n}xf32>, tensor<{n}xi32>, tensor<f32>, tensor<i32>) -> (tensor<f32>, tensor<i32>)
  return %0#0, %0#1 : tensor<f32>, tensor<i32>
}}
"#
        );
        let func = load(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let x: Vec<f32> = (0..n).map(|k| k as f32).collect();
        let y: Vec<i32> = (0..n).map(|k| k as i32 + 2).collect();
        let got = interpret(
            &func,
            &[
                Array::new([n], Elements::F32(x.clone())).unwrap(),
                Array::new([n], Elements::I32(y.clone())).unwrap(),
            ],
        )
        .unwrap();
        assert_eq!(
            got[0].as_slice::<f32>().unwrap(),
            &[1.5 + x.iter().sum::<f32>()],
            "{n}"
        );
        assert_eq!(
            got[1].as_slice::<i32>().unwrap(),
            &[10 * y.iter().product::<i32>()],
            "{n}"
        );
    }
}

#[test]
fn a_body_reading_outside_values_is_unsupported() {
    let text = r#"
func.func @main(%x: tensor<4xf32>, %y: tensor<4xf32>, %s: tensor<f32>) -> tensor<f32> {
  %c = stablehlo.constant dense<0.0> : tensor<f32>
  %0:2 = "stablehlo.reduce"(%x, %y, %c, %c) <{dimensions = array<i64: 0>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>, %e: tensor<f32>, %f: tensor<f32>):
    %1 = stablehlo.add %a, %s : tensor<f32>
    stablehlo.return %1, %b : tensor<f32>, tensor<f32>
  }) : (tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>) -> (tensor<f32>, tensor<f32>)
  return %0#0 : tensor<f32>
}
"#;
    let e = load(text).unwrap_err();
    assert!(
        matches!(e, ferrax_stablehlo::Error::Unsupported { .. }),
        "{e}"
    );
}

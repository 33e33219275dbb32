//! `stablehlo.convolution` in both syntaxes (pretty `dim_numbers`/`window = {...}`, generic
//! `#stablehlo.conv<...>` with its window attributes, and the raw dimension numbers), with
//! window reversal and mixed precision, against a direct loop over XLA's definition. Values are
//! small integers, so every order of summation is exact.
#![allow(clippy::unwrap_used)]

use ferrax_ir::Element;
use ferrax_runtime::{interpret, Array};
use ferrax_stablehlo::load;

fn array<T: Element>(dims: &[usize], v: Vec<T>) -> Array {
    Array::new(dims.to_vec(), T::into_elements(v)).unwrap()
}

/// A 1-d convolution of `x` `[n, c, w]` by `k` `[o, c, kw]` in `NCW`/`OIW` layouts: stride,
/// padding (low, high), input and kernel dilation, the kernel reversed or not.
fn conv1d(
    x: &[f32],
    (n, c, w): (usize, usize, usize),
    k: &[f32],
    (o, kw): (usize, usize),
    (stride, pad, lhs_d, rhs_d, reverse): (usize, (i64, i64), usize, usize, bool),
) -> (Vec<f32>, usize) {
    let dilated = if w == 0 { 0 } else { (w - 1) * lhs_d + 1 } as i64;
    let padded = dilated + pad.0 + pad.1;
    let extent = ((kw - 1) * rhs_d + 1) as i64;
    let out_w = if padded < extent {
        0
    } else {
        ((padded - extent) as usize) / stride + 1
    };
    let mut out = vec![0f32; n * o * out_w];
    for b in 0..n {
        for f in 0..o {
            for t in 0..out_w {
                let mut acc = 0f32;
                for ch in 0..c {
                    for j in 0..kw {
                        let p = (t * stride + j * rhs_d) as i64 - pad.0;
                        if p < 0 || p % lhs_d as i64 != 0 || p / lhs_d as i64 >= w as i64 {
                            continue;
                        }
                        let kj = if reverse { kw - 1 - j } else { j };
                        acc +=
                            x[(b * c + ch) * w + (p as usize) / lhs_d] * k[(f * c + ch) * kw + kj];
                    }
                }
                out[(b * o + f) * out_w + t] = acc;
            }
        }
    }
    (out, out_w)
}

fn values(len: usize, seed: usize) -> Vec<f32> {
    (0..len)
        .map(|i| ((i * 7 + seed) % 9) as f32 - 4.0)
        .collect()
}

#[test]
fn both_syntaxes_match_the_definition() {
    let (n, c, w, o, kw) = (2, 3, 9, 4, 3);
    let (x, k) = (values(n * c * w, 1), values(o * c * kw, 5));
    for (stride, pad, lhs_d, rhs_d, reverse) in [
        (1, (0, 0), 1, 1, false),
        (2, (1, 2), 1, 1, false),
        (1, (2, -1), 2, 1, true),
        (3, (0, 1), 1, 2, false),
        (1, (-2, 0), 1, 1, true),
    ] {
        let (want, out_w) = conv1d(
            &x,
            (n, c, w),
            &k,
            (o, kw),
            (stride, pad, lhs_d, rhs_d, reverse),
        );
        let types = format!(
            "(tensor<{n}x{c}x{w}xf32>, tensor<{o}x{c}x{kw}xf32>) -> tensor<{n}x{o}x{out_w}xf32>"
        );
        let pretty = format!(
            "dim_numbers = [b, f, 0]x[o, i, 0]->[b, f, 0], window = {{stride = [{stride}], pad = [[{}, {}]], lhs_dilate = [{lhs_d}], rhs_dilate = [{rhs_d}], reverse = [{reverse}]}} {{batch_group_count = 1 : i64, feature_group_count = 1 : i64}}",
            pad.0, pad.1
        );
        let generic = format!(
            "<{{batch_group_count = 1 : i64, dimension_numbers = #stablehlo.conv<[b, f, 0]x[o, i, 0]->[b, f, 0]>, feature_group_count = 1 : i64, lhs_dilation = array<i64: {lhs_d}>, padding = dense<[[{}, {}]]> : tensor<1x2xi64>, rhs_dilation = array<i64: {rhs_d}>, window_reversal = array<i1: {reverse}>, window_strides = array<i64: {stride}>}}>",
            pad.0, pad.1
        );
        // Older StableHLO prints the reversal as a splat when every flag is the same.
        let splat_reversal = generic.replace(
            &format!("window_reversal = array<i1: {reverse}>"),
            &format!("window_reversal = dense<{reverse}> : tensor<1xi1>"),
        );
        let raw = generic.replace(
            "#stablehlo.conv<[b, f, 0]x[o, i, 0]->[b, f, 0]>",
            "#stablehlo.conv<raw input_batch_dimension = 0, input_feature_dimension = 1, input_spatial_dimensions = [2], kernel_input_feature_dimension = 1, kernel_output_feature_dimension = 0, kernel_spatial_dimensions = [2], output_batch_dimension = 0, output_feature_dimension = 1, output_spatial_dimensions = [2]>",
        );
        let programs = [
            format!("stablehlo.convolution(%x, %k) {pretty} : {types}"),
            format!("\"stablehlo.convolution\"(%x, %k) {generic} : {types}"),
            format!("\"stablehlo.convolution\"(%x, %k) {raw} : {types}"),
            format!("\"stablehlo.convolution\"(%x, %k) {splat_reversal} : {types}"),
        ];
        for body in programs {
            let text = format!(
                "func.func @main(%x: tensor<{n}x{c}x{w}xf32>, %k: tensor<{o}x{c}x{kw}xf32>) -> tensor<{n}x{o}x{out_w}xf32> {{\n  %0 = {body}\n  return %0 : tensor<{n}x{o}x{out_w}xf32>\n}}"
            );
            let func = load(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
            let got = interpret(
                &func,
                &[array(&[n, c, w], x.clone()), array(&[o, c, kw], k.clone())],
            )
            .unwrap();
            assert_eq!(got[0].to_vec::<f32>().unwrap(), want, "{text}");
        }
    }
}

/// `i8` operands with an `i32` result (`preferred_element_type`) are widened first, so the
/// sums do not wrap at 8 bits.
#[test]
fn mixed_precision_widens_the_operands() {
    let text = "func.func @main(%x: tensor<1x1x4xi8>, %k: tensor<1x1x2xi8>) -> tensor<1x1x3xi32> {
  %0 = stablehlo.convolution(%x, %k) dim_numbers = [b, f, 0]x[o, i, 0]->[b, f, 0], window = {} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<1x1x4xi8>, tensor<1x1x2xi8>) -> tensor<1x1x3xi32>
  return %0 : tensor<1x1x3xi32>
}";
    let func = load(text).unwrap();
    let got = interpret(
        &func,
        &[
            array(&[1, 1, 4], vec![100i8, 100, -128, 127]),
            array(&[1, 1, 2], vec![2i8, 3]),
        ],
    )
    .unwrap();
    assert_eq!(got[0].to_vec::<i32>().unwrap(), vec![500, -184, 125]);
}

#[test]
fn bad_convolutions_are_errors_naming_the_line() {
    let program = |dims: &str, types: &str| {
        format!(
            "func.func @main(%x: tensor<1x3x8xf32>, %k: tensor<2x3x3xf32>) -> tensor<1x2x6xf32> {{\n  %0 = stablehlo.convolution(%x, %k) dim_numbers = {dims}, window = {{}} {{batch_group_count = 1 : i64, feature_group_count = 1 : i64}} : {types}\n  return %0 : tensor<1x2x6xf32>\n}}"
        )
    };
    let ok_types = "(tensor<1x3x8xf32>, tensor<2x3x3xf32>) -> tensor<1x2x6xf32>";
    let e = load(&program("[b, f, 0]x[o, o, 0]->[b, f, 0]", ok_types))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("line 2") && e.contains("convolution layout"),
        "{e}"
    );
    let e = load(&program(
        "[b, f, 0]x[o, i, 0]->[b, f, 0]",
        "(tensor<1x3x8xf32>, tensor<2x3x3xf32>) -> tensor<1x2x5xf32>",
    ))
    .unwrap_err()
    .to_string();
    assert!(e.contains("declares"), "{e}");
    let e = load(
        &program("[b, f, 0]x[o, i, 0]->[b, f, 0]", ok_types)
            .replace("feature_group_count = 1", "feature_group_count = 2"),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("groups"), "{e}");
}

/// A splat reversal (`dense<true> : tensor<2xi1>`) flips every spatial dimension: the same as
/// the kernel reversed by hand.
#[test]
fn splat_reversal_flips_every_spatial_dimension() {
    let program = |reversal: &str| {
        format!(
            "func.func @main(%x: tensor<1x1x3x3xf32>, %k: tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xf32> {{\n  %0 = \"stablehlo.convolution\"(%x, %k) <{{batch_group_count = 1 : i64, dimension_numbers = #stablehlo.conv<[b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1]>, feature_group_count = 1 : i64{reversal}}}> : (tensor<1x1x3x3xf32>, tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xf32>\n  return %0 : tensor<1x1x2x2xf32>\n}}"
        )
    };
    let x = array(&[1, 1, 3, 3], (1..=9).map(|v| v as f32).collect());
    let k = vec![1f32, 10.0, 100.0, 1000.0];
    let run = |text: String, k: Vec<f32>| {
        let func = load(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        interpret(&func, &[x.clone(), array(&[1, 1, 2, 2], k)]).unwrap()[0]
            .to_vec::<f32>()
            .unwrap()
    };
    let flipped = run(
        program(", window_reversal = dense<true> : tensor<2xi1>"),
        k.clone(),
    );
    let by_hand = run(program(""), k.into_iter().rev().collect());
    assert_eq!(flipped, by_hand);
}

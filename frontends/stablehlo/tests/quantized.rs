//! Uniform quantized types (`!quant.uniform`), imported as their storage integers with
//! quantization and dequantization spelled out: against StableHLO's definitions written here
//! in Rust, over sweeps, ties, the storage range's ends, infinities and NaN; per-tensor and
//! per-axis; ops that move storage and ops that compute on expressed values; and the refusals.
#![allow(clippy::unwrap_used)]

use ferrax_ir::{Element, Op};
use ferrax_runtime::{interpret, Array};
use ferrax_stablehlo::{load, test_cases, Error};

fn run(text: &str, inputs: &[Array]) -> Vec<Array> {
    let func = load(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    interpret(&func, inputs).unwrap()
}

fn array<T: Element>(dims: &[usize], v: Vec<T>) -> Array {
    Array::new(dims, T::into_elements(v)).unwrap()
}

/// StableHLO's `quantize` in f32: `x / scale` rounded to nearest even, plus the zero point,
/// clamped to the storage range (NaN stays NaN), converted to the storage type (NaN is 0,
/// others saturate).
fn quantize(x: f32, scale: f64, zero_point: i64, range: (i64, i64)) -> i64 {
    let q = (x / scale as f32).round_ties_even() + zero_point as f32;
    if q.is_nan() {
        return 0;
    }
    // The clamp is in f32, where i32's bounds round to ±2^31; the conversion saturates.
    let clamped = q.max(range.0 as f32).min(range.1 as f32) as i64;
    clamped.clamp(range.0, range.1)
}

/// StableHLO's `dequantize` in f32.
fn dequantize(q: i64, scale: f64, zero_point: i64) -> f32 {
    (q - zero_point) as f32 * scale as f32
}

/// Sweeps of ordinary values plus ties, the ends of the range, infinities, NaN, subnormals.
fn f32_values() -> Vec<f32> {
    let mut v: Vec<f32> = (-300..300).map(|k| k as f32 * 0.173).collect();
    v.extend((-20..20).map(|k| k as f32 * 0.25));
    v.extend([
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        f32::from_bits(1),
        f32::MAX,
        -f32::MAX,
        1e30,
        -1e30,
    ]);
    v
}

#[test]
fn quantize_rounds_to_even_clamps_and_maps_nan_to_zero() {
    let x = f32_values();
    let n = x.len();
    for (storage, range, scale, zp) in [
        ("i8", (-128, 127), 0.5, -3),
        ("i8<-127:127>", (-127, 127), 0.003917241096496582, 0),
        ("u8", (0, 255), 0.25, 128),
        ("i16", (-32768, 32767), 0.001, 7),
        ("i32", (i32::MIN as i64, i32::MAX as i64), 1.5377e-5, 0),
    ] {
        let q = format!("!quant.uniform<{storage}:f32, {scale}:{zp}>");
        let text = format!(
            "func.func @main(%x: tensor<{n}xf32>) -> tensor<{n}x{q}> {{
               %0 = stablehlo.uniform_quantize %x : (tensor<{n}xf32>) -> tensor<{n}x{q}>
               return %0 : tensor<{n}x{q}>
             }}"
        );
        let out = run(&text, &[array(&[n], x.clone())]);
        let got: Vec<i64> = (0..n)
            .map(|i| out[0].elements().get(i).to_f64() as i64)
            .collect();
        for (i, &v) in x.iter().enumerate() {
            assert_eq!(got[i], quantize(v, scale, zp, range), "{q}: {v}");
        }
    }
}

#[test]
fn dequantize_subtracts_the_zero_point_then_scales() {
    let q: Vec<i8> = (i8::MIN..=i8::MAX).collect();
    let n = q.len();
    let ty = "!quant.uniform<i8:f32, 0.003921548291748646:-128>";
    let text = format!(
        "func.func @main(%q: tensor<{n}x{ty}>) -> tensor<{n}xf32> {{
           %0 = stablehlo.uniform_dequantize %q : (tensor<{n}x{ty}>) -> tensor<{n}xf32>
           return %0 : tensor<{n}xf32>
         }}"
    );
    let out = run(&text, &[array(&[n], q.clone())]);
    let got = out[0].as_slice::<f32>().unwrap();
    for (i, &s) in q.iter().enumerate() {
        let want = dequantize(s.into(), 0.003921548291748646, -128);
        assert_eq!(got[i].to_bits(), want.to_bits(), "{s}");
    }
}

#[test]
fn per_axis_quantization_uses_each_indexs_scale_and_zero_point() {
    let params = [(0.5, 1), (0.25, 0), (2.0, -1)];
    let q = "!quant.uniform<i8:f32:1, {0.5:1, 0.25, 2.0:-1}>";
    let text = format!(
        "func.func @main(%x: tensor<2x3xf32>) -> (tensor<2x3x{q}>, tensor<2x3xf32>) {{
           %0 = stablehlo.uniform_quantize %x : (tensor<2x3xf32>) -> tensor<2x3x{q}>
           %1 = stablehlo.uniform_dequantize %0 : (tensor<2x3x{q}>) -> tensor<2x3xf32>
           return %0, %1 : tensor<2x3x{q}>, tensor<2x3xf32>
         }}"
    );
    let x = vec![1.3f32, 1.3, 1.3, -7.0, 0.375, 300.0];
    let out = run(&text, &[array(&[2, 3], x.clone())]);
    let stored = out[0].as_slice::<i8>().unwrap();
    let back = out[1].as_slice::<f32>().unwrap();
    for (i, &v) in x.iter().enumerate() {
        let (scale, zp) = params[i % 3];
        let s = quantize(v, scale, zp, (-128, 127));
        assert_eq!(i64::from(stored[i]), s, "{v} at column {}", i % 3);
        assert_eq!(back[i], dequantize(s, scale, zp));
    }
}

/// A transpose between types quantized alike moves storage: no arithmetic in the program.
/// Between two quantizations it dequantizes, moves and quantizes again.
#[test]
fn moving_ops_move_storage_when_their_types_are_quantized_alike() {
    let a = "!quant.uniform<i8:f32, 0.5:2>";
    let b = "!quant.uniform<i8:f32, 0.25:-1>";
    let program = |to: &str| {
        format!(
            "func.func @main(%q: tensor<2x3x{a}>) -> tensor<3x2x{to}> {{
               %0 = stablehlo.transpose %q, dims = [1, 0] : (tensor<2x3x{a}>) -> tensor<3x2x{to}>
               return %0 : tensor<3x2x{to}>
             }}"
        )
    };
    let stored: Vec<i8> = vec![-128, -5, 0, 3, 100, 127];
    let input = array(&[2, 3], stored.clone());
    let same = program(a);
    let func = load(&same).unwrap();
    let arithmetic = func
        .body
        .iter()
        .filter(|i| !matches!(i.op, Op::Transpose { .. }))
        .count();
    assert_eq!(arithmetic, 0, "{func}");
    let out = run(&same, std::slice::from_ref(&input));
    assert_eq!(
        out[0].as_slice::<i8>().unwrap(),
        &[-128, 3, -5, 100, 0, 127]
    );

    let out = run(&program(b), &[input]);
    let transposed = [-128i64, 3, -5, 100, 0, 127];
    let want: Vec<i8> = transposed
        .iter()
        .map(|&s| quantize(dequantize(s, 0.5, 2), 0.25, -1, (-128, 127)) as i8)
        .collect();
    assert_eq!(out[0].as_slice::<i8>().unwrap(), want.as_slice());
}

/// Arithmetic on quantized operands computes on their expressed values and quantizes the
/// result to its own type; a comparison's boolean result is not quantized.
#[test]
fn arithmetic_dequantizes_computes_and_quantizes() {
    let (a, b, c) = (
        "!quant.uniform<i8:f32, 0.5:2>",
        "!quant.uniform<i8:f32, 0.125:-4>",
        "!quant.uniform<i16:f32, 0.1:3>",
    );
    let text = format!(
        "func.func @main(%x: tensor<256x{a}>, %y: tensor<256x{b}>) -> (tensor<256x{c}>, tensor<256xi1>) {{
           %0 = stablehlo.add %x, %y : (tensor<256x{a}>, tensor<256x{b}>) -> tensor<256x{c}>
           %1 = stablehlo.compare GT, %x, %y : (tensor<256x{a}>, tensor<256x{b}>) -> tensor<256xi1>
           return %0, %1 : tensor<256x{c}>, tensor<256xi1>
         }}"
    );
    let x: Vec<i8> = (i8::MIN..=i8::MAX).collect();
    let y: Vec<i8> = x.iter().rev().copied().collect();
    let out = run(&text, &[array(&[256], x.clone()), array(&[256], y.clone())]);
    let sum = out[0].as_slice::<i16>().unwrap();
    let greater = out[1].as_slice::<bool>().unwrap();
    for i in 0..256 {
        let (ex, ey) = (
            dequantize(x[i].into(), 0.5, 2),
            dequantize(y[i].into(), 0.125, -4),
        );
        let want = quantize(ex + ey, 0.1, 3, (-32768, 32767));
        assert_eq!(i64::from(sum[i]), want, "{} + {}", x[i], y[i]);
        assert_eq!(greater[i], ex > ey);
    }
}

/// `custom_call @check.eq` returns whether its operands are equal, and is also a check.
#[test]
fn check_eq_is_a_check_and_a_value() {
    let text = "func.func @main() -> tensor<i1> {
        %a = stablehlo.constant dense<[1.0, 2.0]> : tensor<2xf32>
        %b = stablehlo.constant dense<[1.0, 2.5]> : tensor<2xf32>
        %0 = stablehlo.custom_call @check.eq(%a, %a) : (tensor<2xf32>, tensor<2xf32>) -> tensor<i1>
        %1 = stablehlo.custom_call @check.eq(%a, %b) : (tensor<2xf32>, tensor<2xf32>) -> tensor<i1>
        %2 = stablehlo.and %0, %1 : tensor<i1>
        return %0, %1 : tensor<i1>, tensor<i1>
      }";
    let cases = test_cases(text).unwrap();
    assert_eq!(cases[0].program.checks.len(), 2);
    let out = interpret(&cases[0].program.func, &[]).unwrap();
    assert_eq!(out[0].as_slice::<bool>().unwrap(), &[true]);
    assert_eq!(out[1].as_slice::<bool>().unwrap(), &[false]);
}

#[test]
fn malformed_quantized_types_are_errors_naming_why() {
    let with = |q: &str| {
        format!(
            "func.func @main(%x: tensor<3xf32>) -> tensor<3xf32> {{
               %0 = stablehlo.uniform_quantize %x : (tensor<3xf32>) -> tensor<3x{q}>
               %1 = stablehlo.uniform_dequantize %0 : (tensor<3x{q}>) -> tensor<3xf32>
               return %1 : tensor<3xf32>
             }}"
        )
    };
    for (q, why) in [
        ("!quant.uniform<i8:f32, 0.5:200>", "zero point 200 outside"),
        (
            "!quant.uniform<i8:f32, -0.5>",
            "scale '-0.5' is not a positive",
        ),
        (
            "!quant.uniform<i8:f32, 0.0>",
            "scale '0.0' is not a positive",
        ),
        (
            "!quant.uniform<i8<-200:0>:f32, 0.5>",
            "storage range -200..0 outside i8",
        ),
        (
            "!quant.uniform<i8:i32, 0.5>",
            "expressed type i32 is not a float",
        ),
        (
            "!quant.uniform<i8:f32:0, {0.5, 0.25}>",
            "has 2 scales for its axis 0",
        ),
        (
            "!quant.uniform<i8:f32:5, {0.5, 0.25, 1.0}>",
            "for its axis 5",
        ),
        ("!quant.uniform<i8:f32, 0.5 0.25>", "expected '>'"),
        ("!quant.uniform<i8:f32>", "expected ','"),
    ] {
        match load(&with(q)) {
            Err(e @ Error::Syntax { .. }) => {
                assert!(e.to_string().contains(why), "{q}: {e}")
            }
            other => panic!("{q}: {other:?}"),
        }
    }
    // Types ferrax lacks are unsupported, not wrong.
    for (q, what) in [
        ("!quant.uniform<i4:f32, 0.5>", "quantized storage type i4"),
        ("!quant.uniform<i8:f32, 0.5>", "as a region's argument"),
    ] {
        let text = if what.contains("region") {
            format!(
                "func.func @main(%x: tensor<3x{q}>) -> tensor<{q}> {{
                   %z = stablehlo.constant dense<0> : tensor<{q}>
                   %0 = stablehlo.reduce(%x init: %z) across dimensions = [0] : (tensor<3x{q}>, tensor<{q}>) -> tensor<{q}>
                     reducer(%a: tensor<{q}>, %b: tensor<{q}>) {{
                       %s = stablehlo.add %a, %b : tensor<{q}>
                       stablehlo.return %s : tensor<{q}>
                     }}
                   return %0 : tensor<{q}>
                 }}"
            )
        } else {
            with(q)
        };
        match load(&text) {
            Err(e @ Error::Unsupported { .. }) => {
                assert!(e.to_string().contains(what), "{q}: {e}")
            }
            other => panic!("{q}: {other:?}"),
        }
    }
}

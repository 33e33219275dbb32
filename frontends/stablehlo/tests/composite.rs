//! StableHLO and CHLO ops imported as compositions of IR ops (`is_finite`, `popcnt`,
//! `reduce_precision`, `chlo.next_after`, `chlo.top_k`), and `cbrt` (the IR's own), on the
//! interpreter, against Rust's own definitions over edge values and sweeps of bit patterns.
#![allow(clippy::unwrap_used)]

use ferrax_ir::{Element, Elements};
use ferrax_runtime::{interpret, Array};
use ferrax_stablehlo::load;

fn run(text: &str, inputs: &[Array]) -> Vec<Array> {
    let func = load(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    interpret(&func, inputs).unwrap()
}

fn array<T: Element>(v: Vec<T>) -> Array {
    Array::new([v.len()], T::into_elements(v)).unwrap()
}

/// Bit patterns of every kind: a sweep of pseudo-random words plus zeros, infinities, NaNs,
/// subnormals and the largest finite values.
fn f32_patterns() -> Vec<f32> {
    let mut state = 0x9E37_79B9u32;
    let mut v: Vec<f32> = (0..4000)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            f32::from_bits(state)
        })
        .collect();
    v.extend([
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        f32::MIN_POSITIVE,
        f32::from_bits(1),
        f32::MAX,
        -f32::MAX,
        1.0,
        65504.0,
        65520.0,
        6.1e-5,
    ]);
    v
}

#[test]
fn popcnt_counts_the_bits_of_every_integer_width() {
    macro_rules! check {
        ($t:ty, $mlir:expr, $values:expr) => {{
            let v: Vec<$t> = $values;
            let n = v.len();
            let text = format!(
                "func.func @main(%x: tensor<{n}x{t}>) -> tensor<{n}x{t}> {{\n  %0 = stablehlo.popcnt %x : tensor<{n}x{t}>\n  return %0 : tensor<{n}x{t}>\n}}\n",
                t = $mlir
            );
            let out = run(&text, &[array(v.clone())]);
            let want: Vec<$t> = v.iter().map(|x| x.count_ones() as $t).collect();
            assert_eq!(out[0].as_slice::<$t>().unwrap(), want, $mlir);
        }};
    }
    check!(i8, "i8", vec![0, -1, i8::MIN, i8::MAX, 85, 3]);
    check!(u8, "ui8", vec![0, 255, 128, 127, 170, 3]);
    check!(i16, "i16", vec![0, -1, i16::MIN, i16::MAX, 0x5555, 3]);
    check!(u16, "ui16", vec![0, u16::MAX, 0x8000, 0x7fff, 0xaaaa, 3]);
    check!(i32, "i32", vec![0, -1, i32::MIN, i32::MAX, 0x5555_5555, 3]);
    check!(
        u32,
        "ui32",
        vec![0, u32::MAX, 1 << 31, 0x7fff_ffff, 0xaaaa_aaaa, 3]
    );
    check!(
        i64,
        "i64",
        vec![0, -1, i64::MIN, i64::MAX, 0x5555_5555_5555_5555, 3]
    );
    check!(
        u64,
        "ui64",
        vec![
            0,
            u64::MAX,
            1 << 63,
            u64::MAX >> 1,
            0xaaaa_aaaa_aaaa_aaaa,
            3
        ]
    );
}

#[test]
fn is_finite_and_cbrt_follow_rust() {
    let x = f32_patterns();
    let n = x.len();
    let text = format!(
        "func.func @main(%x: tensor<{n}xf32>) -> (tensor<{n}xi1>, tensor<{n}xf32>) {{\n  %0 = stablehlo.is_finite %x : (tensor<{n}xf32>) -> tensor<{n}xi1>\n  %1 = stablehlo.cbrt %x : tensor<{n}xf32>\n  return %0, %1 : tensor<{n}xi1>, tensor<{n}xf32>\n}}\n"
    );
    let out = run(&text, &[array(x.clone())]);
    let finite: Vec<bool> = x.iter().map(|v| v.is_finite()).collect();
    assert_eq!(out[0].as_slice::<bool>().unwrap(), finite);
    for (&v, &got) in x.iter().zip(out[1].as_slice::<f32>().unwrap()) {
        let want = (v as f64).cbrt() as f32;
        let ok = (got.is_nan() && want.is_nan())
            || got.to_bits() == want.to_bits()
            || (got - want).abs() <= want.abs() * f32::EPSILON;
        assert!(ok, "cbrt({v:e}) = {got:e}, want {want:e}");
    }
    // f64 roots, from the f32 patterns widened and scaled across the exponent range: within
    // an ulp of Rust's.
    let x: Vec<f64> = f32_patterns()
        .iter()
        .enumerate()
        .map(|(k, &v)| v as f64 * 2f64.powi((k % 1800) as i32 - 900))
        .collect();
    let text = format!(
        "func.func @main(%x: tensor<{n}xf64>) -> tensor<{n}xf64> {{\n  %0 = stablehlo.cbrt %x : tensor<{n}xf64>\n  return %0 : tensor<{n}xf64>\n}}\n"
    );
    let out = run(&text, &[array(x.clone())]);
    for (&v, &got) in x.iter().zip(out[0].as_slice::<f64>().unwrap()) {
        let want = v.cbrt();
        let ok = (got.is_nan() && want.is_nan())
            || got == want
            || (got - want).abs() <= want.abs() * f64::EPSILON;
        assert!(ok, "cbrt({v:e}) = {got:e}, want {want:e}");
    }
}

/// Reducing f32 to 8 exponent and 7 significand bits is rounding to bf16 (subnormals,
/// overflow and all); to 5 and 10 it is rounding to f16 for values in f16's normal range, and
/// flushes what lies below it to zero.
#[test]
fn reduce_precision_rounds_as_the_narrow_formats_do() {
    let x: Vec<f32> = f32_patterns().into_iter().filter(|v| !v.is_nan()).collect();
    let n = x.len();
    let text = format!(
        "func.func @main(%x: tensor<{n}xf32>) -> (tensor<{n}xf32>, tensor<{n}xf32>) {{\n  %0 = stablehlo.reduce_precision %x, format = e8m7 : tensor<{n}xf32>\n  %1 = stablehlo.reduce_precision %x, format = e5m10 : tensor<{n}xf32>\n  return %0, %1 : tensor<{n}xf32>, tensor<{n}xf32>\n}}\n"
    );
    let out = run(&text, &[array(x.clone())]);
    for (k, &v) in x.iter().enumerate() {
        let bf16 = out[0].as_slice::<f32>().unwrap()[k];
        assert_eq!(
            bf16.to_bits(),
            half::bf16::from_f32(v).to_f32().to_bits(),
            "{v:e}"
        );
        let f16 = out[1].as_slice::<f32>().unwrap()[k];
        let want = if v.abs() < 6.103_515_6e-5 {
            0.0f32.copysign(v)
        } else {
            half::f16::from_f32(v).to_f32()
        };
        assert_eq!(f16.to_bits(), want.to_bits(), "{v:e}");
    }
    let nan = run(
        &text.replace(&format!("{n}x"), "1x"),
        &[array(vec![f32::NAN])],
    );
    assert!(nan[0].as_slice::<f32>().unwrap()[0].is_nan());
}

#[test]
fn next_after_steps_one_representable_value() {
    let base = f32_patterns();
    let x: Vec<f32> = base.iter().copied().chain(base.iter().copied()).collect();
    let y: Vec<f32> = base
        .iter()
        .rev()
        .copied()
        .chain(base.iter().map(|v| -v))
        .collect();
    let n = x.len();
    let text = format!(
        "func.func @main(%x: tensor<{n}xf32>, %y: tensor<{n}xf32>) -> tensor<{n}xf32> {{\n  %0 = chlo.next_after %x, %y : tensor<{n}xf32>, tensor<{n}xf32> -> tensor<{n}xf32>\n  return %0 : tensor<{n}xf32>\n}}\n"
    );
    let out = run(&text, &[array(x.clone()), array(y.clone())]);
    for ((&a, &b), &got) in x.iter().zip(&y).zip(out[0].as_slice::<f32>().unwrap()) {
        let want = if a.is_nan() || b.is_nan() {
            f32::NAN
        } else if a == b {
            b
        } else if a < b {
            a.next_up()
        } else {
            a.next_down()
        };
        assert!(
            (got.is_nan() && want.is_nan()) || got.to_bits() == want.to_bits(),
            "next_after({a:e}, {b:e}) = {got:e}, want {want:e}"
        );
    }
}

#[test]
fn top_k_takes_the_largest_in_order() {
    let text = r#"
func.func @main(%x: tensor<2x5xi32>) -> (tensor<2x3xi32>, tensor<2x3xi32>) {
  %values, %indices = chlo.top_k(%x, k = 3) : tensor<2x5xi32> -> (tensor<2x3xi32>, tensor<2x3xi32>)
  return %values, %indices : tensor<2x3xi32>, tensor<2x3xi32>
}
"#;
    let x = Array::new([2, 5], Elements::I32(vec![3, 9, 3, -1, 9, 0, 1, 2, 3, 4])).unwrap();
    let out = run(text, &[x]);
    assert_eq!(out[0].as_slice::<i32>().unwrap(), &[9, 9, 3, 4, 3, 2]);
    assert_eq!(out[1].as_slice::<i32>().unwrap(), &[1, 4, 0, 4, 3, 2]);
    let e = load(&text.replace("k = 3", "k = 6"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("exceeds"), "{e}");
}

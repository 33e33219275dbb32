//! Complex numbers (c64, c128: JAX's complex64, complex128): the interpreter's arithmetic and
//! functions against their definitions written here in f64 (c64 values are computed in c128
//! and each part rounded once, so a c64 result is its f64 formula rounded), the small-argument
//! precision of `expm1` and `log1p`, reductions, products, conversions, bit casts and the
//! lexicographic sort; the CPU backend and the emulated GPU (whose host steps compute them)
//! against the interpreter bit for bit; the text format; the tracing API; checkpoints.
//! Derivatives through complex values are in `complex_autodiff.rs`.
#![allow(clippy::unwrap_used, clippy::panic)]

mod common;

use common::{elements_of as values, run_on_every_backend as run, vector as array};

use ferrax::ir::{parse_func, Complex, Element};
use ferrax::runtime::interpret;
use ferrax::{Array, Tensor};

type C32 = Complex<f32>;
type C64 = Complex<f64>;

fn c(re: f32, im: f32) -> C32 {
    Complex::new(re, im)
}

/// A c64 value's f64 formula rounded to c64.
fn rounded(re: f64, im: f64) -> C32 {
    Complex::new(re as f32, im as f32)
}

/// Operands of every kind: both signs, zeros, small and large parts, a pure real and a pure
/// imaginary number.
fn operands() -> Vec<C32> {
    vec![
        c(1.5, 2.5),
        c(-3.25, 0.75),
        c(0.0, -1.0),
        c(2.0, 0.0),
        c(1e-3, -7.0),
        c(-0.5, -0.125),
        c(1e4, 3.0),
        c(0.3, 0.1),
    ]
}

/// `op` applied elementwise to `x` (and `y`) of c64.
fn elementwise(op: &str, x: &[C32], y: Option<&[C32]>) -> Vec<C32> {
    let n = x.len();
    let text = match y {
        Some(_) => format!(
            "func @f(%0: c64[{n}], %1: c64[{n}]) -> (c64[{n}]) {{\n  %2 = {op} %0, %1 : c64[{n}]\n  return %2\n}}\n"
        ),
        None => format!(
            "func @f(%0: c64[{n}]) -> (c64[{n}]) {{\n  %1 = {op} %0 : c64[{n}]\n  return %1\n}}\n"
        ),
    };
    let mut inputs = vec![array(x)];
    inputs.extend(y.map(array));
    values(&run(&text, &inputs)[0])
}

#[test]
fn arithmetic_is_each_parts_f64_formula_rounded_once() {
    let x = operands();
    let y: Vec<C32> = x.iter().rev().copied().collect();
    let wide = |z: C32| (f64::from(z.re), f64::from(z.im));
    let check = |op: &str, f: &dyn Fn((f64, f64), (f64, f64)) -> (f64, f64)| {
        let got = elementwise(op, &x, Some(&y));
        for i in 0..x.len() {
            let (re, im) = f(wide(x[i]), wide(y[i]));
            assert_eq!(got[i], rounded(re, im), "{op} {:?} {:?}", x[i], y[i]);
        }
    };
    check("add", &|(a, b), (c, d)| (a + c, b + d));
    check("sub", &|(a, b), (c, d)| (a - c, b - d));
    check("mul", &|(a, b), (c, d)| (a * c - b * d, a * d + b * c));
    check("div", &|(a, b), (c, d)| {
        let n = c * c + d * d;
        ((a * c + b * d) / n, (b * c - a * d) / n)
    });
}

#[test]
fn powers_have_lax_special_cases() {
    let x = vec![c(0.0, 0.0), c(0.0, 0.0), c(1.5, -2.0), c(2.0, 1.0)];
    let y = vec![c(0.0, 0.0), c(2.5, 0.0), c(0.0, 0.0), c(2.0, 0.0)];
    let got = elementwise("pow", &x, Some(&y));
    assert_eq!(got[0], c(1.0, 0.0), "0^0");
    assert_eq!(got[1], c(0.0, 0.0), "0^2.5");
    assert_eq!(got[2], c(1.0, 0.0), "z^0");
    // (2 + i)² = 3 + 4i, through exp(2 log z): within an ulp or two of f32.
    assert!(
        (got[3].re - 3.0).abs() < 1e-6 && (got[3].im - 4.0).abs() < 1e-6,
        "{:?}",
        got[3]
    );
}

#[test]
fn functions_follow_their_definitions() {
    let x = operands();
    let wide = |z: C32| C64::new(f64::from(z.re), f64::from(z.im));
    let near = |got: C32, want: C64, ulps: f32, what: &str| {
        let close = |g: f32, w: f64| {
            let w = w as f32;
            g == w || (g - w).abs() <= ulps * f32::EPSILON * w.abs().max(f32::MIN_POSITIVE)
        };
        assert!(
            close(got.re, want.re) && close(got.im, want.im),
            "{what}: {got:?}, want {want:?}"
        );
    };
    let exp = elementwise("exp", &x, None);
    let log = elementwise("log", &x, None);
    let sqrt = elementwise("sqrt", &x, None);
    let abs_text = "func @f(%0: c64[8]) -> (f32[8], f32[8], f32[8]) {\n  %1 = abs %0 : f32[8]\n  %2 = real %0 : f32[8]\n  %3 = imag %0 : f32[8]\n  return %1, %2, %3\n}\n";
    let parts = run(abs_text, &[array(&x)]);
    let (abs, re, im) = (
        values::<f32>(&parts[0]),
        values::<f32>(&parts[1]),
        values::<f32>(&parts[2]),
    );
    for (i, &z) in x.iter().enumerate() {
        let (a, b) = (f64::from(z.re), f64::from(z.im));
        // e^a (cos b + i sin b), ln|z| + i arg z: exactly their f64 formulas, rounded.
        assert_eq!(
            exp[i],
            rounded(a.exp() * b.cos(), a.exp() * b.sin()),
            "exp {z:?}"
        );
        assert_eq!(log[i], rounded(a.hypot(b).ln(), b.atan2(a)), "log {z:?}");
        // The principal root: its real part is not negative, and it squares back to z (to the
        // f32 rounding of the root, relative to |z|).
        let r = wide(sqrt[i]);
        assert!(sqrt[i].re >= 0.0, "sqrt {z:?}: {:?}", sqrt[i]);
        let off = (r * r - wide(z)).norm();
        assert!(
            off <= 4.0 * f64::from(f32::EPSILON) * wide(z).norm(),
            "sqrt {z:?}: {r:?}"
        );
        assert_eq!(abs[i], a.hypot(b) as f32, "abs {z:?}");
        assert_eq!((re[i], im[i]), (z.re, z.im));
    }
    // sin z = (e^{iz} - e^{-iz}) / 2i, tanh through exp, to a few ulps.
    let sin = elementwise("sin", &x[..6], None);
    let tanh = elementwise("tanh", &x[..6], None);
    for (i, &z) in x[..6].iter().enumerate() {
        let w = wide(z);
        let iz = C64::new(-w.im, w.re);
        let s = (iz.exp() - (-iz).exp()) / C64::new(0.0, 2.0);
        near(sin[i], s, 4.0, "sin");
        let e2 = (w * 2.0).exp();
        near(tanh[i], (e2 - 1.0) / (e2 + 1.0), 8.0, "tanh");
    }
}

/// `expm1` and `log1p` keep the precision of small arguments, which `exp(z) - 1` and
/// `log(1 + z)` lose entirely.
#[test]
fn expm1_and_log1p_keep_small_arguments() {
    let x = vec![c(1e-10, 2e-10), c(-3e-9, 1e-12), c(1e-20, -1e-20)];
    let expm1 = elementwise("expm1", &x, None);
    let log1p = elementwise("log1p", &x, None);
    for (i, &z) in x.iter().enumerate() {
        let w = C64::new(f64::from(z.re), f64::from(z.im));
        // Two terms of each series are exact far beyond f32 here.
        let e = w + w * w / 2.0;
        let l = w - w * w / 2.0;
        assert_eq!(expm1[i], rounded(e.re, e.im), "expm1 {z:?}");
        assert_eq!(log1p[i], rounded(l.re, l.im), "log1p {z:?}");
    }
}

#[test]
fn sign_is_the_unit_number_and_zero_at_zero() {
    let x = vec![c(3.0, 4.0), c(0.0, 0.0), c(0.0, -2.0), c(f32::NAN, 1.0)];
    let got = elementwise("sign", &x, None);
    assert_eq!(got[0], c(0.6, 0.8));
    assert_eq!(got[1], c(0.0, 0.0));
    assert_eq!(got[2], c(0.0, -1.0));
    assert!(got[3].re.is_nan());
}

/// Sums and products of complex numbers accumulate in c128 and round once; a dot product
/// is the sum of complex products.
#[test]
fn reductions_and_products_accumulate_in_c128() {
    let x = operands();
    let text = "func @f(%0: c64[2,4], %1: c64[4,2]) -> (c64[2], c64[2], c64[2,2]) {\n  %2 = reduce_sum %0, axes=[1] : c64[2]\n  %3 = reduce_prod %0, axes=[1] : c64[2]\n  %4 = dot_general %0, %1, contract=[1]x[0] : c64[2,2]\n  return %2, %3, %4\n}\n";
    let a = Array::new([2, 4], Complex::into_elements(x.clone())).unwrap();
    let y: Vec<C32> = x.iter().rev().copied().collect();
    let b = Array::new([4, 2], Complex::into_elements(y.clone())).unwrap();
    let out = run(text, &[a, b]);
    let wide = |z: C32| C64::new(f64::from(z.re), f64::from(z.im));
    let narrow = |z: C64| rounded(z.re, z.im);
    let (sums, prods, dots) = (
        values::<C32>(&out[0]),
        values::<C32>(&out[1]),
        values::<C32>(&out[2]),
    );
    for r in 0..2 {
        let row = &x[r * 4..r * 4 + 4];
        let sum = row.iter().fold(C64::new(-0.0, -0.0), |s, &z| s + wide(z));
        let prod = row.iter().fold(C64::new(1.0, 0.0), |p, &z| p * wide(z));
        assert_eq!(sums[r], narrow(sum));
        assert_eq!(prods[r], narrow(prod));
        for col in 0..2 {
            let dot = (0..4).fold(C64::new(0.0, 0.0), |s, k| {
                s + wide(x[r * 4 + k]) * wide(y[k * 2 + col])
            });
            assert_eq!(dots[r * 2 + col], narrow(dot));
        }
    }
}

/// Scatters of complex values replace, add and multiply (each product in c128, rounded once);
/// complex numbers have no maximum, so `scatter_max` is a type error.
#[test]
fn scatters_combine_complex_values() {
    let x = operands();
    let updates: Vec<C32> = x.iter().map(|z| z * 0.5).take(3).collect();
    let scatter = |op: &str| {
        format!("func @f(%0: c64[8], %1: i32[3,1], %2: c64[3]) -> (c64[8]) {{\n  %3 = {op} %0, %1, %2, inserted_window_dims=[0], scatter_dims_to_operand_dims=[0], index_vector_dim=1 : c64[8]\n  return %3\n}}\n")
    };
    let at = [5usize, 1, 5];
    let indices = Array::new(
        [3, 1],
        i32::into_elements(at.iter().map(|&i| i as i32).collect()),
    )
    .unwrap();
    let wide = |z: C32| C64::new(f64::from(z.re), f64::from(z.im));
    for op in ["scatter", "scatter_add", "scatter_mul"] {
        let out = run(&scatter(op), &[array(&x), indices.clone(), array(&updates)]);
        let mut want = x.clone();
        for (&i, &u) in at.iter().zip(&updates) {
            want[i] = match op {
                "scatter" => u,
                "scatter_add" => want[i] + u,
                _ => {
                    let p = wide(want[i]) * wide(u);
                    rounded(p.re, p.im)
                }
            };
        }
        assert_eq!(values::<C32>(&out[0]), want, "{op}");
    }
    let e = parse_func(&scatter("scatter_max")).unwrap_err().to_string();
    assert!(e.contains("ordered"), "{e}");
}

/// To real types a complex number converts by its real part (XLA's rule), to bools by being
/// nonzero; reals become complex numbers with imaginary part 0; bit casts keep every bit.
#[test]
fn conversions_and_bit_casts() {
    let x = vec![c(1.5, -2.0), c(0.0, 3.0), c(0.0, 0.0), c(-7.75, 1e-3)];
    let text = "func @f(%0: c64[4], %1: f32[4]) -> (f32[4], i32[4], bool[4], c128[4], c64[4], u64[4], c64[4]) {\n  %2 = convert %0 : f32[4]\n  %3 = convert %0 : i32[4]\n  %4 = convert %0 : bool[4]\n  %5 = convert %0 : c128[4]\n  %6 = convert %1 : c64[4]\n  %7 = bitcast_convert %0 : u64[4]\n  %8 = bitcast_convert %7 : c64[4]\n  return %2, %3, %4, %5, %6, %7, %8\n}\n";
    let reals = [0.25f32, -1.0, 3.5, f32::INFINITY];
    let out = run(text, &[array(&x), array(&reals)]);
    assert_eq!(values::<f32>(&out[0]), vec![1.5, 0.0, 0.0, -7.75]);
    assert_eq!(values::<i32>(&out[1]), vec![1, 0, 0, -7]);
    assert_eq!(values::<bool>(&out[2]), vec![true, true, false, true]);
    let wide: Vec<C64> = x
        .iter()
        .map(|z| C64::new(f64::from(z.re), f64::from(z.im)))
        .collect();
    assert_eq!(values::<C64>(&out[3]), wide);
    let from_reals: Vec<C32> = reals.iter().map(|&r| c(r, 0.0)).collect();
    assert_eq!(values::<C32>(&out[4]), from_reals);
    // As in memory: the real part's bits low, the imaginary part's high.
    let bits: Vec<u64> = x
        .iter()
        .map(|z| u64::from(z.re.to_bits()) | u64::from(z.im.to_bits()) << 32)
        .collect();
    assert_eq!(values::<u64>(&out[5]), bits);
    assert_eq!(values::<C32>(&out[6]), x);
}

/// Complex numbers sort by real part, then imaginary part (lax's order); equality is of both
/// parts, and they have no order to compare by.
#[test]
fn sorting_and_comparing() {
    let x = vec![c(1.0, 2.0), c(-1.0, 5.0), c(1.0, -3.0), c(0.0, 0.0)];
    let text = "func @f(%0: c64[4], %1: c64[4]) -> (c64[4], bool[4], bool[4]) {\n  %2 = sort %0, dimension=0 : c64[4]\n  %3 = eq %0, %1 : bool[4]\n  %4 = ne %0, %1 : bool[4]\n  return %2, %3, %4\n}\n";
    let y = vec![c(1.0, 2.0), c(-1.0, 4.0), c(2.0, -3.0), c(-0.0, 0.0)];
    let out = run(text, &[array(&x), array(&y)]);
    assert_eq!(
        values::<C32>(&out[0]),
        vec![c(-1.0, 5.0), c(0.0, 0.0), c(1.0, -3.0), c(1.0, 2.0)]
    );
    assert_eq!(values::<bool>(&out[1]), vec![true, false, false, true]);
    assert_eq!(values::<bool>(&out[2]), vec![false, true, true, false]);
    let e = parse_func(
        "func @f(%0: c64[2]) -> (bool[2]) {\n  %1 = lt %0, %0 : bool[2]\n  return %1\n}\n",
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("c64"), "{e}");
    for op in ["max", "rem", "atan2"] {
        let e = parse_func(&format!(
            "func @f(%0: c64[2]) -> (c64[2]) {{\n  %1 = {op} %0, %0 : c64[2]\n  return %1\n}}\n"
        ))
        .unwrap_err()
        .to_string();
        assert!(e.contains("c64"), "{op}: {e}");
    }
}

/// Constants print as `re+imi` and parse back bit for bit: signs, exponents, NaN payloads.
#[test]
fn constants_round_trip_through_the_text() {
    let text = "func @f() -> (c64[4], c128[2]) {\n  %0 = constant [1.5+2.5i, -1.0-0.5i, 1e-5-2e-7i, 0x7fc00001+0x80000000i] : c64[4]\n  %1 = constant [-0.0+1e300i, inf-infi] : c128[2]\n  return %0, %1\n}\n";
    let out = run(text, &[]);
    let a = values::<C32>(&out[0]);
    assert_eq!(
        (a[0], a[1], a[2]),
        (c(1.5, 2.5), c(-1.0, -0.5), c(1e-5, -2e-7))
    );
    assert_eq!(a[3].re.to_bits(), 0x7fc0_0001);
    assert_eq!(a[3].im.to_bits(), 0x8000_0000);
    let b = values::<C64>(&out[1]);
    assert_eq!(b[0].re.to_bits(), (-0.0f64).to_bits());
    assert_eq!(b[0].im, 1e300);
    assert_eq!(b[1], C64::new(f64::INFINITY, f64::NEG_INFINITY));
    let e = parse_func("func @f() -> (c64[]) {\n  %0 = constant 1.5+i : c64[]\n  return %0\n}\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("1.5+i"), "{e}");
}

/// The tracing API: `complex`, `real`, `imag`, `conj`, `abs`, and the tests for NaN and
/// infinity, which look at both parts.
#[test]
fn traced_complex_numbers() {
    let re = Tensor::from_vec([3], vec![3.0f32, f32::NAN, 0.0]);
    let im = Tensor::from_vec([3], vec![4.0f32, 1.0, f32::INFINITY]);
    let z = re.complex(&im);
    assert_eq!(z.dtype(), ferrax::DType::C64);
    let w = &z * &z.conj();
    assert_eq!(w.real().to_vec::<f32>().unwrap()[0], 25.0);
    assert_eq!(w.imag().to_vec::<f32>().unwrap()[0], 0.0);
    assert_eq!(z.abs().to_vec::<f32>().unwrap()[0], 5.0);
    assert_eq!(
        z.is_nan().to_vec::<bool>().unwrap(),
        vec![false, true, false]
    );
    assert_eq!(
        z.is_inf().to_vec::<bool>().unwrap(),
        vec![false, false, true]
    );
    assert_eq!(
        z.is_finite().to_vec::<bool>().unwrap(),
        vec![true, false, false]
    );
    let e = re.real().to_array().unwrap_err().to_string();
    assert!(e.contains("complex"), "{e}");
}

/// `.npy` (`<c8`, `<c16`, and big-endian files) and safetensors (C64) hold complex numbers bit
/// for bit; safetensors has no type for c128.
#[test]
fn checkpoints_hold_complex_numbers() {
    use ferrax::checkpoint::{
        npy_from_bytes, npy_to_bytes, safetensors_from_bytes, safetensors_to_bytes,
    };
    let a = Tensor::from_vec([2], vec![c(1.5, -2.0), c(f32::NAN, 1e-30)]);
    let b = Tensor::from_vec([2], vec![C64::new(0.1, -0.2), C64::new(-0.0, 1e300)]);
    for (t, descr) in [(&a, "'<c8'"), (&b, "'<c16'")] {
        let want = t.to_array().unwrap();
        let bytes = npy_to_bytes(t).unwrap();
        assert!(String::from_utf8_lossy(&bytes).contains(descr), "{descr}");
        let back = npy_from_bytes(&bytes).unwrap().to_array().unwrap();
        assert_eq!(back.elements(), want.elements(), "{descr}");
        // The same file written big-endian: each part's bytes reversed.
        let header = bytes.len() - want.numel() * want.dtype().size_bytes();
        let mut big = bytes.clone();
        let at = big.windows(3).position(|w| w == b"'<c").unwrap();
        big[at + 1] = b'>';
        let part = want.dtype().size_bytes() / 2;
        big[header..]
            .chunks_exact_mut(part)
            .for_each(<[u8]>::reverse);
        let back = npy_from_bytes(&big).unwrap().to_array().unwrap();
        assert_eq!(back.elements(), want.elements(), "{descr} big-endian");
    }
    let bytes = safetensors_to_bytes(&a).unwrap();
    let back: Tensor = safetensors_from_bytes(&bytes, &a).unwrap();
    assert_eq!(
        back.to_array().unwrap().elements(),
        a.to_array().unwrap().elements()
    );
    let e = safetensors_to_bytes(&b).unwrap_err().to_string();
    assert!(e.contains("c128"), "{e}");
}

/// StableHLO's complex types and constants: `(re,im)` pairs (hex parts included), splats and
/// hex blobs of both part widths; `real` and `imag` of real numbers.
#[test]
fn stablehlo_imports_complex_numbers() {
    let text = r#"
func.func @main(%x: tensor<2xcomplex<f32>>) -> (tensor<2xcomplex<f32>>, tensor<2xcomplex<f64>>, tensor<complex<f32>>, tensor<2xf32>, tensor<2xf32>) {
  %c = stablehlo.constant dense<[(1.5,-2.0), (0x7FC00000,0.25)]> : tensor<2xcomplex<f32>>
  %h = stablehlo.constant dense<"0x000000000000F03F00000000000000C000000000000000000000000000000000"> : tensor<2xcomplex<f64>>
  %s = stablehlo.constant dense<(3.0,4.0)> : tensor<complex<f32>>
  %r = stablehlo.constant dense<[1.0, -2.0]> : tensor<2xf32>
  %0 = stablehlo.add %x, %c : tensor<2xcomplex<f32>>
  %1 = stablehlo.real %r : (tensor<2xf32>) -> tensor<2xf32>
  %2 = stablehlo.imag %r : (tensor<2xf32>) -> tensor<2xf32>
  return %0, %h, %s, %1, %2 : tensor<2xcomplex<f32>>, tensor<2xcomplex<f64>>, tensor<complex<f32>>, tensor<2xf32>, tensor<2xf32>
}
"#;
    let func = ferrax::stablehlo::load(text).unwrap();
    let out = interpret(&func, &[array(&[c(1.0, 1.0), c(2.0, 2.0)])]).unwrap();
    let sum = values::<C32>(&out[0]);
    assert_eq!(sum[0], c(2.5, -1.0));
    assert!(sum[1].re.is_nan() && sum[1].im == 2.25);
    assert_eq!(
        values::<C64>(&out[1]),
        vec![C64::new(1.0, -2.0), C64::new(0.0, 0.0)]
    );
    assert_eq!(values::<C32>(&out[2]), vec![c(3.0, 4.0)]);
    assert_eq!(values::<f32>(&out[3]), vec![1.0, -2.0]);
    assert_eq!(values::<f32>(&out[4]), vec![0.0, 0.0]);
    for bad in [
        "dense<[(1.0,2.0), (3.0)]> : tensor<2xcomplex<f32>>",
        "dense<[1.0, 2.0]> : tensor<2xcomplex<f32>>",
    ] {
        let text = format!(
            "func.func @main() -> tensor<2xcomplex<f32>> {{\n  %c = stablehlo.constant {bad}\n  return %c : tensor<2xcomplex<f32>>\n}}\n"
        );
        assert!(ferrax::stablehlo::load(&text).is_err(), "{bad}");
    }
}

/// The direct sum of one dimension's transform, for the reference: `Σ_j x_j e^{∓2πi jk/n}`,
/// each angle computed from `jk mod n` (below 2π, so exact to an ulp of it).
fn naive_dft(line: &[C64], inverse: bool) -> Vec<C64> {
    let n = line.len();
    let sign = if inverse { 1.0 } else { -1.0 };
    (0..n)
        .map(|k| {
            let sum = line
                .iter()
                .enumerate()
                .fold(C64::new(0.0, 0.0), |s, (j, &x)| {
                    let angle = sign * 2.0 * std::f64::consts::PI * ((j * k % n) as f64) / n as f64;
                    s + x * C64::new(angle.cos(), angle.sin())
                });
            if inverse {
                sum / n as f64
            } else {
                sum
            }
        })
        .collect()
}

/// `data` of `dims` with `naive_dft` applied along `axis`.
fn naive_along(data: &mut [C64], dims: &[usize], axis: usize, inverse: bool) {
    let n = dims[axis];
    let inner: usize = dims[axis + 1..].iter().product();
    let outer: usize = dims[..axis].iter().product();
    for o in 0..outer {
        for i in 0..inner {
            let at = |k: usize| (o * n + k) * inner + i;
            let line: Vec<C64> = (0..n).map(|k| data[at(k)]).collect();
            for (k, v) in naive_dft(&line, inverse).into_iter().enumerate() {
                data[at(k)] = v;
            }
        }
    }
}

/// Deterministic values in [-2, 2).
fn wavy(n: usize, seed: u64) -> Vec<f64> {
    (0..n)
        .map(|i| ((i as u64 * 2654435761 + seed * 40503) % 4000) as f64 / 1000.0 - 2.0)
        .collect()
}

fn assert_near(got: &[C64], want: &[C64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    let scale = want.iter().map(|z| z.norm()).fold(1.0, f64::max);
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).norm() <= 1e-13 * scale,
            "{what}: element {i} is {g}, want {w}"
        );
    }
}

/// Complex transforms over two trailing dimensions (a power of two and not) against the
/// direct sums; the inverse scales by 1/n and undoes the transform.
#[test]
fn fourier_transforms_are_the_direct_sums() {
    let dims = [2usize, 3, 8];
    let n = dims.iter().product();
    let (re, im) = (wavy(n, 1), wavy(n, 2));
    let x: Vec<C64> = re.iter().zip(&im).map(|(&a, &b)| C64::new(a, b)).collect();
    let text = "func @f(%0: c128[2,3,8]) -> (c128[2,3,8], c128[2,3,8], c128[2,3,8]) {\n  %1 = fft %0, lengths=[3,8] : c128[2,3,8]\n  %2 = ifft %0, lengths=[3,8] : c128[2,3,8]\n  %3 = ifft %1, lengths=[3,8] : c128[2,3,8]\n  return %1, %2, %3\n}\n";
    let input = Array::new(dims, Complex::into_elements(x.clone())).unwrap();
    let out = run(text, &[input]);
    let mut forward = x.clone();
    let mut inverse = x.clone();
    for axis in [1, 2] {
        naive_along(&mut forward, &dims, axis, false);
        naive_along(&mut inverse, &dims, axis, true);
    }
    assert_near(&values::<C64>(&out[0]), &forward, "fft");
    assert_near(&values::<C64>(&out[1]), &inverse, "ifft");
    assert_near(&values::<C64>(&out[2]), &x, "ifft(fft)");
}

/// Long lines of lengths that are not powers of two (primes among them) take the chirp
/// z-transform: the direct sums to 1e-13 of the largest value, and back again; as do real
/// transforms of such lengths.
#[test]
fn long_transforms_of_any_length() {
    for n in [65usize, 97, 100, 1000] {
        let (re, im) = (wavy(2 * n, n as u64), wavy(2 * n, n as u64 + 1));
        let x: Vec<C64> = re.iter().zip(&im).map(|(&a, &b)| C64::new(a, b)).collect();
        let text = format!("func @f(%0: c128[2,{n}]) -> (c128[2,{n}], c128[2,{n}], c128[2,{n}]) {{\n  %1 = fft %0, lengths=[{n}] : c128[2,{n}]\n  %2 = ifft %0, lengths=[{n}] : c128[2,{n}]\n  %3 = ifft %1, lengths=[{n}] : c128[2,{n}]\n  return %1, %2, %3\n}}\n");
        let out = run(
            &text,
            &[Array::new([2, n], Complex::into_elements(x.clone())).unwrap()],
        );
        let (mut forward, mut inverse) = (x.clone(), x.clone());
        naive_along(&mut forward, &[2, n], 1, false);
        naive_along(&mut inverse, &[2, n], 1, true);
        assert_near(&values::<C64>(&out[0]), &forward, &format!("fft n={n}"));
        assert_near(&values::<C64>(&out[1]), &inverse, &format!("ifft n={n}"));
        assert_near(&values::<C64>(&out[2]), &x, &format!("ifft(fft) n={n}"));
        let half = n / 2 + 1;
        let text = format!("func @f(%0: f64[2,{n}]) -> (c128[2,{half}], f64[2,{n}]) {{\n  %1 = rfft %0, lengths=[{n}] : c128[2,{half}]\n  %2 = irfft %1, lengths=[{n}] : f64[2,{n}]\n  return %1, %2\n}}\n");
        let out = run(
            &text,
            &[Array::new([2, n], f64::into_elements(re.clone())).unwrap()],
        );
        let spectrum: Vec<C64> = forward_real(&re, n);
        assert_near(&values::<C64>(&out[0]), &spectrum, &format!("rfft n={n}"));
        let back: Vec<C64> = values::<f64>(&out[1])
            .iter()
            .map(|&r| C64::new(r, 0.0))
            .collect();
        let want: Vec<C64> = re.iter().map(|&r| C64::new(r, 0.0)).collect();
        assert_near(&back, &want, &format!("irfft(rfft) n={n}"));
    }
}

/// The first `n/2 + 1` frequencies of each length-`n` row of real `x`, by direct sums.
fn forward_real(x: &[f64], n: usize) -> Vec<C64> {
    let mut full: Vec<C64> = x.iter().map(|&r| C64::new(r, 0.0)).collect();
    naive_along(&mut full, &[x.len() / n, n], 1, false);
    full.chunks(n)
        .flat_map(|row| row[..n / 2 + 1].to_vec())
        .collect()
}

/// Real transforms keep the n/2 + 1 non-negative frequencies; their inverse reads those as a
/// Hermitian spectrum (the zero frequency's imaginary part ignored) and recovers the values;
/// c64 results are the c128 ones rounded.
#[test]
fn real_fourier_transforms_keep_half_the_spectrum() {
    for n in [1usize, 2, 16, 17] {
        let x = wavy(3 * n, n as u64);
        let half = n / 2 + 1;
        let text = format!(
            "func @f(%0: f64[3,{n}], %1: f32[3,{n}]) -> (c128[3,{half}], f64[3,{n}], c64[3,{half}]) {{\n  %2 = rfft %0, lengths=[{n}] : c128[3,{half}]\n  %3 = irfft %2, lengths=[{n}] : f64[3,{n}]\n  %4 = rfft %1, lengths=[{n}] : c64[3,{half}]\n  return %2, %3, %4\n}}\n"
        );
        let narrow: Vec<f32> = x.iter().map(|&v| v as f32).collect();
        let inputs = [
            Array::new([3, n], f64::into_elements(x.clone())).unwrap(),
            Array::new([3, n], f32::into_elements(narrow.clone())).unwrap(),
        ];
        let out = run(&text, &inputs);
        let mut want = Vec::new();
        let mut want32 = Vec::new();
        for r in 0..3 {
            let line: Vec<C64> = x[r * n..(r + 1) * n]
                .iter()
                .map(|&v| C64::new(v, 0.0))
                .collect();
            want.extend(naive_dft(&line, false).into_iter().take(half));
            let line32: Vec<C64> = narrow[r * n..(r + 1) * n]
                .iter()
                .map(|&v| C64::new(f64::from(v), 0.0))
                .collect();
            want32.extend(naive_dft(&line32, false).into_iter().take(half));
        }
        assert_near(&values::<C64>(&out[0]), &want, &format!("rfft {n}"));
        let back: Vec<C64> = values::<f64>(&out[1])
            .iter()
            .map(|&v| C64::new(v, 0.0))
            .collect();
        let x_c: Vec<C64> = x.iter().map(|&v| C64::new(v, 0.0)).collect();
        assert_near(&back, &x_c, &format!("irfft(rfft) {n}"));
        let got32 = values::<C32>(&out[2]);
        let scale = want32.iter().map(|z| z.norm()).fold(1.0, f64::max);
        for (i, (g, w)) in got32.iter().zip(&want32).enumerate() {
            // The exact sum rounded once: within half an f32 ulp of the reference, which is
            // exact to ~1e-16 of the largest value.
            let close = |a: f32, b: f64| (f64::from(a) - b).abs() <= 6e-8 * b.abs() + 1e-14 * scale;
            assert!(
                close(g.re, w.re) && close(g.im, w.im),
                "rfft f32 {n}[{i}]: {g}, {w}"
            );
        }
    }
    // The imaginary parts of the zero and Nyquist frequencies do not reach the values.
    let text = "func @f(%0: c128[3]) -> (f64[4]) {\n  %1 = irfft %0, lengths=[4] : f64[4]\n  return %1\n}\n";
    let spectrum = [C64::new(4.0, 9.0), C64::new(0.0, 0.0), C64::new(0.0, -5.0)];
    let out = run(text, &[array(&spectrum)]);
    assert_eq!(values::<f64>(&out[0]), vec![1.0, 1.0, 1.0, 1.0]);
}

/// Zero-size operands transform to zero-size results; lengths that do not fit, or operands of
/// the wrong kind, are errors naming why.
#[test]
fn fourier_transform_edges() {
    let text = "func @f(%0: f32[0,17], %1: c64[2,0,9]) -> (c64[0,9], f32[2,0,16]) {\n  %2 = rfft %0, lengths=[17] : c64[0,9]\n  %3 = irfft %1, lengths=[16] : f32[2,0,16]\n  return %2, %3\n}\n";
    let empty32 = Array::new([0, 17], f32::into_elements(Vec::new())).unwrap();
    let empty64 = Array::new([2, 0, 9], Complex::into_elements(Vec::<C32>::new())).unwrap();
    let out = run(text, &[empty32, empty64]);
    assert_eq!(out[0].dims(), &[0, 9]);
    assert_eq!(out[1].dims(), &[2, 0, 16]);
    for (body, why) in [
        ("%1 = rfft %0, lengths=[8] : c64[5]", "f32 or f64"),
        ("%1 = fft %0, lengths=[4] : c64[8]", "do not fit"),
        ("%1 = fft %0, lengths=[] : c64[8]", "1 to 3"),
        ("%1 = fft %0, lengths=[0] : c64[8]", "include 0"),
    ] {
        let e = parse_func(&format!(
            "func @f(%0: c64[8]) -> (c64[8]) {{\n  {body}\n  return %0\n}}\n"
        ))
        .unwrap_err()
        .to_string();
        assert!(e.contains(why), "{body}: {e}");
    }
}

/// `vmap` of a transform whose batch dimension lands among the transformed ones moves it out
/// first: the same values as transforming each example.
#[test]
fn batched_fourier_transforms_transform_each_example() {
    let x = Tensor::from_vec(
        [4, 3],
        wavy(12, 5).iter().map(|&v| v as f32).collect::<Vec<_>>(),
    );
    let rfft = |x: Tensor| x.fft(ferrax::ir::FftKind::Rfft, &[4]);
    let batched = ferrax::vmap_axes(rfft, 1, 0)(x.clone());
    let want: Vec<C32> = (0..3)
        .flat_map(|k| {
            let column = x.slice(&[0, k], &[4, k + 1]).reshape([4]);
            rfft(column).to_vec::<C32>().unwrap()
        })
        .collect();
    assert_eq!(batched.to_vec::<C32>().unwrap(), want);
}

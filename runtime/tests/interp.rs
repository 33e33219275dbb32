//! The reference interpreter against hand-computed values, with the IEEE and integer corner
//! cases that backends must match.
#![allow(clippy::unwrap_used)]

use ferrax_ir::parse_func;
use ferrax_runtime::{interpret, Array, RuntimeError};
use half::{bf16, f16};

/// Runs a one-output program given in the text format.
fn run(src: &str, args: &[Array]) -> Array {
    let f = parse_func(src).unwrap_or_else(|e| panic!("{e}\n{src}"));
    interpret(&f, args).unwrap().remove(0)
}

fn f32s(shape: &[usize], v: &[f32]) -> Array {
    Array::from_slice(shape.to_vec(), v).unwrap()
}

fn unary(op: &str, ty: &str, x: Array) -> Array {
    run(
        &format!("func @f(%x: {ty}) -> ({ty}) {{\n  %y = {op} %x : {ty}\n  return %y\n}}"),
        &[x],
    )
}

fn binary(op: &str, ty: &str, out: &str, a: Array, b: Array) -> Array {
    run(
        &format!("func @f(%a: {ty}, %b: {ty}) -> ({out}) {{\n  %y = {op} %a, %b : {out}\n  return %y\n}}"),
        &[a, b],
    )
}

#[test]
fn unary_float_ops() {
    let x = f32s(&[4], &[-1.5, -0.0, 0.5, 2.5]);
    let cases: [(&str, [f32; 4]); 7] = [
        ("neg", [1.5, 0.0, -0.5, -2.5]),
        ("abs", [1.5, 0.0, 0.5, 2.5]),
        ("sign", [-1.0, -0.0, 1.0, 1.0]),
        ("floor", [-2.0, -0.0, 0.0, 2.0]),
        ("ceil", [-1.0, -0.0, 1.0, 3.0]),
        ("round", [-2.0, -0.0, 1.0, 3.0]),
        ("round_even", [-2.0, -0.0, 0.0, 2.0]),
    ];
    for (op, want) in cases {
        let got = unary(op, "f32[4]", x.clone()).to_vec::<f32>().unwrap();
        let bits: Vec<u32> = got.iter().map(|v| v.to_bits()).collect();
        let want_bits: Vec<u32> = want.iter().map(|v| v.to_bits()).collect();
        assert_eq!(bits, want_bits, "{op}: {got:?}");
    }
    let nan = unary("sign", "f32[1]", f32s(&[1], &[f32::NAN]))
        .to_vec::<f32>()
        .unwrap();
    assert!(nan[0].is_nan());
}

#[test]
fn transcendentals_are_correctly_rounded_from_f64() {
    let xs = [0.1f32, 0.5, 1.0, 3.0];
    let x = f32s(&[4], &xs);
    type Reference = fn(f64) -> f64;
    let cases: [(&str, Reference); 10] = [
        ("exp", f64::exp),
        ("expm1", f64::exp_m1),
        ("log", f64::ln),
        ("log1p", f64::ln_1p),
        ("sqrt", f64::sqrt),
        ("rsqrt", |v| 1.0 / v.sqrt()),
        ("tanh", f64::tanh),
        ("logistic", |v| 1.0 / (1.0 + (-v).exp())),
        ("sin", f64::sin),
        ("cos", f64::cos),
    ];
    for (op, f) in cases {
        let got = unary(op, "f32[4]", x.clone()).to_vec::<f32>().unwrap();
        let want: Vec<f32> = xs.iter().map(|&v| f(v as f64) as f32).collect();
        assert_eq!(got, want, "{op}");
    }
    // Stable at the extremes.
    let big = unary("logistic", "f32[2]", f32s(&[2], &[-1000.0, 1000.0]))
        .to_vec::<f32>()
        .unwrap();
    assert_eq!(big, vec![0.0, 1.0]);
    let log0 = unary("log", "f32[2]", f32s(&[2], &[0.0, -1.0]))
        .to_vec::<f32>()
        .unwrap();
    assert!(log0[0] == f32::NEG_INFINITY && log0[1].is_nan());
}

#[test]
fn f16_and_bf16_round_once_to_nearest_even() {
    // 1 + 2^-11 is halfway between two f16 values: ties go to even (1.0).
    let a = Array::from_vec([2], vec![f16::from_f32(1.0), f16::from_f32(2048.0)]).unwrap();
    let b = Array::from_vec([2], vec![f16::from_f32(0.00048828125), f16::from_f32(1.0)]).unwrap();
    let sum = binary("add", "f16[2]", "f16[2]", a, b)
        .to_vec::<f16>()
        .unwrap();
    assert_eq!(sum, vec![f16::from_f32(1.0), f16::from_f32(2048.0)]);
    let x = Array::from_vec([1], vec![bf16::from_f32(1.0)]).unwrap();
    let e = unary("exp", "bf16[1]", x).to_vec::<bf16>().unwrap();
    assert_eq!(e, vec![bf16::from_f32(2.71875)]);
}

#[test]
fn max_min_propagate_nan_and_order_zeros() {
    let a = f32s(&[3], &[f32::NAN, -0.0, 1.0]);
    let b = f32s(&[3], &[1.0, 0.0, f32::NAN]);
    let mx = binary("max", "f32[3]", "f32[3]", a.clone(), b.clone())
        .to_vec::<f32>()
        .unwrap();
    let mn = binary("min", "f32[3]", "f32[3]", a, b)
        .to_vec::<f32>()
        .unwrap();
    assert!(mx[0].is_nan() && mx[2].is_nan() && mn[0].is_nan() && mn[2].is_nan());
    assert!(mx[1] == 0.0 && mx[1].is_sign_positive());
    assert!(mn[1] == 0.0 && mn[1].is_sign_negative());
}

#[test]
fn float_rem_pow_div() {
    let a = f32s(&[3], &[5.5, -5.5, 1.0]);
    let b = f32s(&[3], &[2.0, 2.0, 0.0]);
    assert_eq!(
        binary("rem", "f32[3]", "f32[3]", a.clone(), b.clone())
            .to_vec::<f32>()
            .unwrap()[..2],
        [1.5, -1.5]
    );
    assert_eq!(
        binary("div", "f32[3]", "f32[3]", a.clone(), b.clone())
            .to_vec::<f32>()
            .unwrap()[2],
        f32::INFINITY
    );
    let p = binary(
        "pow",
        "f32[3]",
        "f32[3]",
        f32s(&[3], &[2.0, 0.0, -8.0]),
        f32s(&[3], &[0.5, 0.0, 1.0 / 3.0]),
    );
    let p = p.to_vec::<f32>().unwrap();
    assert_eq!(p[0], 2f32.sqrt());
    assert_eq!(p[1], 1.0);
    assert!(p[2].is_nan());
}

#[test]
fn integer_arithmetic_wraps_and_division_follows_xla() {
    let i32s = |v: &[i32]| Array::from_slice([v.len()], v).unwrap();
    let a = i32s(&[7, -7, i32::MIN, 5, i32::MAX]);
    let b = i32s(&[2, 2, -1, 0, 1]);
    let div = binary("div", "i32[5]", "i32[5]", a.clone(), b.clone())
        .to_vec::<i32>()
        .unwrap();
    assert_eq!(div, vec![3, -3, i32::MIN, -1, i32::MAX]);
    let rem = binary("rem", "i32[5]", "i32[5]", a.clone(), b.clone())
        .to_vec::<i32>()
        .unwrap();
    assert_eq!(rem, vec![1, -1, 0, 5, 0]);
    let add = binary("add", "i32[5]", "i32[5]", a.clone(), b.clone())
        .to_vec::<i32>()
        .unwrap();
    assert_eq!(add[4], i32::MIN);
    let pow = binary(
        "pow",
        "i32[5]",
        "i32[5]",
        i32s(&[3, -1, 2, 1, -2]),
        i32s(&[4, -3, -1, -5, 3]),
    );
    assert_eq!(pow.to_vec::<i32>().unwrap(), vec![81, -1, 0, 1, -8]);
    let neg = unary("neg", "i32[5]", a.clone()).to_vec::<i32>().unwrap();
    assert_eq!(neg[2], i32::MIN);
    let abs = unary("abs", "i32[5]", a).to_vec::<i32>().unwrap();
    assert_eq!(abs, vec![7, 7, i32::MIN, 5, i32::MAX]);
    let u = Array::from_slice([2], &[200u8, 7]).unwrap();
    let v = Array::from_slice([2], &[100u8, 0]).unwrap();
    assert_eq!(
        binary("add", "u8[2]", "u8[2]", u.clone(), v.clone())
            .to_vec::<u8>()
            .unwrap(),
        vec![44, 7]
    );
    assert_eq!(
        binary("div", "u8[2]", "u8[2]", u.clone(), v)
            .to_vec::<u8>()
            .unwrap(),
        vec![2, 255]
    );
    assert_eq!(
        unary("not", "u8[2]", u).to_vec::<u8>().unwrap(),
        vec![55, 248]
    );
    let x = Array::from_slice([3], &[12i64, -1, 0]).unwrap();
    let y = Array::from_slice([3], &[10i64, 3, 0]).unwrap();
    assert_eq!(
        binary("and", "i64[3]", "i64[3]", x.clone(), y.clone())
            .to_vec::<i64>()
            .unwrap(),
        vec![8, 3, 0]
    );
    assert_eq!(
        binary("or", "i64[3]", "i64[3]", x.clone(), y.clone())
            .to_vec::<i64>()
            .unwrap(),
        vec![14, -1, 0]
    );
    assert_eq!(
        binary("xor", "i64[3]", "i64[3]", x.clone(), y)
            .to_vec::<i64>()
            .unwrap(),
        vec![6, -4, 0]
    );
    assert_eq!(
        unary("sign", "i64[3]", x).to_vec::<i64>().unwrap(),
        vec![1, -1, 0]
    );
}

#[test]
fn comparisons_follow_ieee() {
    let a = f32s(&[3], &[1.0, f32::NAN, -0.0]);
    let b = f32s(&[3], &[2.0, f32::NAN, 0.0]);
    let expect = [
        ("eq", [false, false, true]),
        ("ne", [true, true, false]),
        ("lt", [true, false, false]),
        ("le", [true, false, true]),
        ("gt", [false, false, false]),
        ("ge", [false, false, true]),
    ];
    for (op, want) in expect {
        let got = binary(op, "f32[3]", "bool[3]", a.clone(), b.clone())
            .to_vec::<bool>()
            .unwrap();
        assert_eq!(got, want, "{op}");
    }
    let p = Array::from_slice([2], &[true, false]).unwrap();
    let q = Array::from_slice([2], &[true, true]).unwrap();
    assert_eq!(
        binary("lt", "bool[2]", "bool[2]", p.clone(), q.clone())
            .to_vec::<bool>()
            .unwrap(),
        vec![false, true]
    );
    assert_eq!(
        binary("xor", "bool[2]", "bool[2]", p.clone(), q)
            .to_vec::<bool>()
            .unwrap(),
        vec![false, true]
    );
    assert_eq!(
        unary("not", "bool[2]", p).to_vec::<bool>().unwrap(),
        vec![false, true]
    );
}

#[test]
fn select_and_clamp_with_scalars() {
    let src = "func @f(%p: bool[], %a: f32[3], %b: f32[3], %lo: f32[], %hi: f32[3]) -> (f32[3]) {
  %s = select %p, %a, %b : f32[3]
  %c = clamp %lo, %s, %hi : f32[3]
  return %c
}";
    let args = [
        Array::scalar(false),
        f32s(&[3], &[9.0, 9.0, 9.0]),
        f32s(&[3], &[-5.0, 0.5, 7.0]),
        Array::scalar(-1.0f32),
        f32s(&[3], &[0.0, 1.0, 2.0]),
    ];
    assert_eq!(
        run(src, &args).to_vec::<f32>().unwrap(),
        vec![-1.0, 0.5, 2.0]
    );
}

#[test]
fn conversions_truncate_saturate_and_round() {
    let x = f32s(&[6], &[2.7, -2.7, 3e9, -3e9, f32::NAN, 300.0]);
    let to_i32 = unary_convert("f32[6]", "i32[6]", x.clone())
        .to_vec::<i32>()
        .unwrap();
    assert_eq!(to_i32, vec![2, -2, i32::MAX, i32::MIN, 0, 300]);
    let to_u8 = unary_convert("f32[6]", "u8[6]", x.clone())
        .to_vec::<u8>()
        .unwrap();
    assert_eq!(to_u8, vec![2, 0, 255, 0, 0, 255]);
    let to_bool = unary_convert("f32[6]", "bool[6]", x)
        .to_vec::<bool>()
        .unwrap();
    assert_eq!(to_bool, vec![true; 6]);
    let big = Array::from_slice([2], &[16_777_217i64, (1i64 << 40) + 1]).unwrap();
    let f = unary_convert("i64[2]", "f32[2]", big.clone())
        .to_vec::<f32>()
        .unwrap();
    assert_eq!(f, vec![16_777_216.0, (1u64 << 40) as f32]);
    let wrapped = unary_convert("i64[2]", "i32[2]", big)
        .to_vec::<i32>()
        .unwrap();
    assert_eq!(wrapped, vec![16_777_217, 1]);
    // f64 -> f16 rounds once: this value is just above a tie and must round up.
    let tie = 1.0 + 2f64.powi(-11) + 2f64.powi(-30);
    let h = unary_convert("f64[1]", "f16[1]", Array::from_slice([1], &[tie]).unwrap())
        .to_vec::<f16>()
        .unwrap();
    assert_eq!(h[0], f16::from_f64(1.0 + 2f64.powi(-10)));
    let b = unary_convert(
        "bool[2]",
        "f32[2]",
        Array::from_slice([2], &[true, false]).unwrap(),
    );
    assert_eq!(b.to_vec::<f32>().unwrap(), vec![1.0, 0.0]);
}

fn unary_convert(from: &str, to: &str, x: Array) -> Array {
    run(
        &format!("func @f(%x: {from}) -> ({to}) {{\n  %y = convert %x : {to}\n  return %y\n}}"),
        &[x],
    )
}

fn iota_f32(shape: &[usize]) -> Array {
    let n: usize = shape.iter().product();
    Array::from_vec(shape.to_vec(), (0..n).map(|i| i as f32).collect::<Vec<_>>()).unwrap()
}

#[test]
fn movement_ops() {
    let x = iota_f32(&[2, 3, 4]);
    let t = run(
        "func @f(%x: f32[2,3,4]) -> (f32[4,2,3]) {\n  %y = transpose %x, perm=[2,0,1] : f32[4,2,3]\n  return %y\n}",
        std::slice::from_ref(&x),
    );
    let tv = t.to_vec::<f32>().unwrap();
    // t[k, i, j] = x[i, j, k] = 12 i + 4 j + k
    assert_eq!(&tv[..6], &[0.0, 4.0, 8.0, 12.0, 16.0, 20.0]);
    assert_eq!(tv[23], 23.0);
    let s = run(
        "func @f(%x: f32[2,3,4]) -> (f32[1,2,2]) {\n  %y = slice %x, start=[1,0,1], limit=[2,3,4], strides=[1,2,2] : f32[1,2,2]\n  return %y\n}",
        std::slice::from_ref(&x),
    );
    assert_eq!(s.to_vec::<f32>().unwrap(), vec![13.0, 15.0, 21.0, 23.0]);
    let b = run(
        "func @f(%x: f32[3,1]) -> (f32[2,3,4]) {\n  %y = broadcast_in_dim %x, dims=[1,0] : f32[2,3,4]\n  return %y\n}",
        &[Array::from_slice([3, 1], &[1.0f32, 2.0, 3.0]).unwrap()],
    );
    let bv = b.to_vec::<f32>().unwrap();
    assert_eq!(&bv[..8], &[1.0, 1.0, 1.0, 1.0, 2.0, 2.0, 2.0, 2.0]);
    assert_eq!(bv[12], 1.0);
    let p = run(
        "func @f(%x: f32[4], %v: f32[]) -> (f32[8]) {\n  %y = pad %x, %v, low=[-1], high=[2], interior=[1] : f32[8]\n  return %y\n}",
        &[f32s(&[4], &[1.0, 2.0, 3.0, 4.0]), Array::scalar(9.0f32)],
    );
    assert_eq!(
        p.to_vec::<f32>().unwrap(),
        vec![9.0, 2.0, 9.0, 3.0, 9.0, 4.0, 9.0, 9.0]
    );
    let c = run(
        "func @f(%a: f32[2,1], %b: f32[2,2]) -> (f32[2,3]) {\n  %y = concatenate %a, %b, axis=1 : f32[2,3]\n  return %y\n}",
        &[f32s(&[2, 1], &[1.0, 2.0]), f32s(&[2, 2], &[3.0, 4.0, 5.0, 6.0])],
    );
    assert_eq!(
        c.to_vec::<f32>().unwrap(),
        vec![1.0, 3.0, 4.0, 2.0, 5.0, 6.0]
    );
    let i = run(
        "func @f() -> (i64[2,3]) {\n  %y = iota dim=1 : i64[2,3]\n  return %y\n}",
        &[],
    );
    assert_eq!(i.to_vec::<i64>().unwrap(), vec![0, 1, 2, 0, 1, 2]);
    let r = run(
        "func @f(%x: f32[2,3,4]) -> (f32[6,4]) {\n  %y = reshape %x : f32[6,4]\n  return %y\n}",
        &[x],
    );
    assert_eq!(r.to_vec::<f32>().unwrap()[5], 5.0);
}

#[test]
fn reductions() {
    let x = iota_f32(&[2, 3, 4]);
    let red = |op: &str, axes: &str, out: &str, x: Array| {
        run(&format!("func @f(%x: f32[2,3,4]) -> ({out}) {{\n  %y = {op} %x, axes={axes} : {out}\n  return %y\n}}"), &[x])
    };
    // sum over axes 0 and 2: for j, Σ_i Σ_k 12i + 4j + k = 8*4j + 2*6 + 4*12 = 32j + 60.
    assert_eq!(
        red("reduce_sum", "[0,2]", "f32[3]", x.clone())
            .to_vec::<f32>()
            .unwrap(),
        vec![60.0, 92.0, 124.0]
    );
    assert_eq!(
        red("reduce_max", "[1]", "f32[2,4]", x.clone())
            .to_vec::<f32>()
            .unwrap()[..4],
        [8.0, 9.0, 10.0, 11.0]
    );
    assert_eq!(
        red("reduce_min", "[0,1,2]", "f32[]", x.clone())
            .to_vec::<f32>()
            .unwrap(),
        vec![0.0]
    );
    assert_eq!(
        red("reduce_sum", "[]", "f32[2,3,4]", x.clone())
            .to_vec::<f32>()
            .unwrap()[23],
        23.0
    );
    let prod = run(
        "func @f(%x: f32[2,2]) -> (f32[2]) {\n  %y = reduce_prod %x, axes=[1] : f32[2]\n  return %y\n}",
        &[f32s(&[2, 2], &[2.0, 3.0, -1.0, 0.5])],
    );
    assert_eq!(prod.to_vec::<f32>().unwrap(), vec![6.0, -0.5]);
    let empty = run(
        "func @f(%x: f32[2,0]) -> (f32[2], f32[2], f32[2]) {\n  %s = reduce_sum %x, axes=[1] : f32[2]\n  %m = reduce_max %x, axes=[1] : f32[2]\n  %n = reduce_min %x, axes=[1] : f32[2]\n  return %s, %m, %n\n}",
        &[Array::from_vec([2, 0], Vec::<f32>::new()).unwrap()],
    );
    assert_eq!(empty.to_vec::<f32>().unwrap(), vec![0.0, 0.0]);
    let f = parse_func("func @f(%x: f32[2,0]) -> (f32[2], f32[2]) {\n  %m = reduce_max %x, axes=[1] : f32[2]\n  %n = reduce_min %x, axes=[1] : f32[2]\n  return %m, %n\n}").unwrap();
    let out = interpret(&f, &[Array::from_vec([2, 0], Vec::<f32>::new()).unwrap()]).unwrap();
    assert_eq!(out[0].to_vec::<f32>().unwrap(), vec![f32::NEG_INFINITY; 2]);
    assert_eq!(out[1].to_vec::<f32>().unwrap(), vec![f32::INFINITY; 2]);
    let nan = run(
        "func @f(%x: f32[3]) -> (f32[]) {\n  %y = reduce_max %x, axes=[0] : f32[]\n  return %y\n}",
        &[f32s(&[3], &[1.0, f32::NAN, 2.0])],
    );
    assert!(nan.to_vec::<f32>().unwrap()[0].is_nan());
    // f32 sums accumulate in f64: 1e8 + 1 + ... + 1 (16 ones) - 1e8 is exactly 16.
    let mut v = vec![1e8f32];
    v.extend([1.0; 16]);
    v.push(-1e8);
    let s = run(
        "func @f(%x: f32[18]) -> (f32[]) {\n  %y = reduce_sum %x, axes=[0] : f32[]\n  return %y\n}",
        &[f32s(&[18], &v)],
    );
    assert_eq!(s.to_vec::<f32>().unwrap(), vec![16.0]);
    let b = run(
        "func @f(%x: bool[2,2]) -> (bool[2]) {\n  %y = reduce_max %x, axes=[1] : bool[2]\n  return %y\n}",
        &[Array::from_slice([2, 2], &[false, true, false, false]).unwrap()],
    );
    assert_eq!(b.to_vec::<bool>().unwrap(), vec![true, false]);
    let i = run(
        "func @f(%x: i32[3]) -> (i32[]) {\n  %y = reduce_sum %x, axes=[0] : i32[]\n  return %y\n}",
        &[Array::from_slice([3], &[i32::MAX, 1, 1]).unwrap()],
    );
    assert_eq!(i.to_vec::<i32>().unwrap(), vec![i32::MIN + 1]);
}

#[test]
fn dot_general_with_batch_and_odd_contractions() {
    // c[b, i, j] = Σ_k a[k, b, i] * w[b, j, k]
    let a = iota_f32(&[2, 2, 3]);
    let w = iota_f32(&[2, 4, 2]);
    let c = run(
        "func @f(%a: f32[2,2,3], %w: f32[2,4,2]) -> (f32[2,3,4]) {\n  %y = dot_general %a, %w, batch=[1]x[0], contract=[0]x[2] : f32[2,3,4]\n  return %y\n}",
        &[a.clone(), w.clone()],
    );
    let (av, wv) = (a.to_vec::<f32>().unwrap(), w.to_vec::<f32>().unwrap());
    let mut want = Vec::new();
    for b in 0..2 {
        for i in 0..3 {
            for j in 0..4 {
                want.push(
                    (0..2)
                        .map(|k| av[k * 6 + b * 3 + i] * wv[b * 8 + j * 2 + k])
                        .sum::<f32>(),
                );
            }
        }
    }
    assert_eq!(c.to_vec::<f32>().unwrap(), want);
    let ints = run(
        "func @f(%a: i64[2,2], %b: i64[2]) -> (i64[2]) {\n  %y = dot_general %a, %b, contract=[1]x[0] : i64[2]\n  return %y\n}",
        &[Array::from_slice([2, 2], &[1i64, 2, 3, 4]).unwrap(), Array::from_slice([2], &[10i64, 100]).unwrap()],
    );
    assert_eq!(ints.to_vec::<i64>().unwrap(), vec![210, 430]);
}

#[test]
fn argument_checks() {
    let f = parse_func("func @f(%x: f32[2]) -> (f32[2]) {\n  %y = exp %x : f32[2]\n  return %y\n}")
        .unwrap();
    assert_eq!(
        interpret(&f, &[]).unwrap_err(),
        RuntimeError::ArgCount {
            expected: 1,
            got: 0
        }
    );
    let err = interpret(&f, &[f32s(&[3], &[1.0, 2.0, 3.0])]).unwrap_err();
    assert_eq!(err.to_string(), "argument 0 should be f32[2], got f32[3]");
    let outs = interpret(
        &parse_func("func @g(%x: f32[2]) -> (f32[2], f32[2]) {\n  return %x, %x\n}").unwrap(),
        &[f32s(&[2], &[1.0, 2.0])],
    )
    .unwrap();
    assert_eq!(outs.len(), 2);
}

#[test]
fn benchmark_sized_matmul_is_reasonable() {
    // 256^3: a smoke test that the dot_general loop is not quadratic in memory traffic.
    let n = 256;
    let a = Array::from_vec([n, n], vec![1.0f32; n * n]).unwrap();
    let f = parse_func(&format!(
        "func @f(%a: f32[{n},{n}]) -> (f32[{n},{n}]) {{\n  %y = dot_general %a, %a, contract=[1]x[0] : f32[{n},{n}]\n  return %y\n}}"
    ))
    .unwrap();
    let out = interpret(&f, &[a]).unwrap().remove(0);
    assert!(out.to_vec::<f32>().unwrap().iter().all(|&v| v == n as f32));
}

//! The reference interpreter against hand-computed values and independent reference
//! computations: every op, every dtype, and the IEEE and integer corner cases that backends
//! must match. Every single-op program also runs through `eval_op`, which must agree.
#![allow(clippy::unwrap_used)]

use ferrax_ir::{
    bf16_from_f64, f16_from_f64, parse_func, BinaryOp, DType, Element, Func, FuncBuilder, Instr,
    Op, ReduceOp, TensorType, TypeError, UnaryOp, ValueId,
};
use ferrax_runtime::{eval_op, interpret, Array, RuntimeError};
use half::{bf16, f16};

const FLOATS: [DType; 4] = [DType::F32, DType::F64, DType::F16, DType::BF16];

/// Parses and runs a program.
fn run(src: &str, args: &[Array]) -> Vec<Array> {
    let f = parse_func(src).unwrap_or_else(|e| panic!("{e}\n{src}"));
    interpret(&f, args).unwrap_or_else(|e| panic!("{e}\n{src}"))
}

/// `%y = op %a0, %a1, ..., attrs : out` as a one-instruction program, evaluated both by
/// `interpret` and by `eval_op`, which must agree.
fn apply(op: &str, args: &[&Array], attrs: &str, out: &str) -> Array {
    let params: Vec<String> = args
        .iter()
        .enumerate()
        .map(|(i, a)| format!("%a{i}: {}", a.ty()))
        .collect();
    let mut parts: Vec<String> = (0..args.len()).map(|i| format!("%a{i}")).collect();
    if !attrs.is_empty() {
        parts.push(attrs.to_string());
    }
    let src = format!(
        "func @f({}) -> ({out}) {{\n  %y = {op} {} : {out}\n  return %y\n}}",
        params.join(", "),
        parts.join(", ")
    );
    let owned: Vec<Array> = args.iter().map(|&a| a.clone()).collect();
    let got = run(&src, &owned).remove(0);
    let f = parse_func(&src).unwrap();
    let eager = eval_op(&f.body[0].op, args).unwrap();
    assert_eq!(eager, got, "eval_op disagrees with interpret on\n{src}");
    assert_eq!(got.ty().to_string(), out);
    got
}

/// An elementwise op whose result has the first operand's type.
fn same(op: &str, args: &[&Array]) -> Array {
    apply(op, args, "", &args[0].ty().to_string())
}

fn arr<T: Element>(shape: &[usize], v: Vec<T>) -> Array {
    Array::from_vec(shape.to_vec(), v).unwrap()
}

fn vec1<T: Element>(v: &[T]) -> Array {
    Array::from_slice([v.len()], v).unwrap()
}

/// `v` as a rank-1 float array of `dtype`, each value rounded once.
fn floats(dtype: DType, v: &[f64]) -> Array {
    match dtype {
        DType::F32 => vec1(&v.iter().map(|&x| x as f32).collect::<Vec<_>>()),
        DType::F64 => vec1(v),
        DType::F16 => vec1(&v.iter().map(|&x| f16_from_f64(x)).collect::<Vec<_>>()),
        DType::BF16 => vec1(&v.iter().map(|&x| bf16_from_f64(x)).collect::<Vec<_>>()),
        _ => panic!("{dtype} is not a float type"),
    }
}

/// `x` rounded once to the float `dtype`, as f64.
fn round_to(dtype: DType, x: f64) -> f64 {
    match dtype {
        DType::F32 => x as f32 as f64,
        DType::F64 => x,
        DType::F16 => f16_from_f64(x).to_f64(),
        DType::BF16 => bf16_from_f64(x).to_f64(),
        _ => panic!("{dtype} is not a float type"),
    }
}

fn same_value(a: f64, b: f64) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

/// Exact comparison: equal bits (so -0 differs from +0), any NaN matching any NaN.
fn check(got: &Array, want: &[f64]) {
    let g = got.to_f64_vec();
    assert_eq!(g.len(), want.len(), "{got}");
    for (i, (&a, &b)) in g.iter().zip(want).enumerate() {
        assert!(
            same_value(a, b),
            "element {i}: got {a:?}, want {b:?} in {got}"
        );
    }
}

fn iota_f64(n: usize) -> Vec<f64> {
    (0..n).map(|i| i as f64).collect()
}

/// A small deterministic generator for test inputs.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

const NAN: f64 = f64::NAN;
const INF: f64 = f64::INFINITY;

#[test]
fn exact_unary_float_ops_in_every_float_dtype() {
    let x = [-2.5, -1.5, -0.5, -0.0, 0.0, 0.5, 1.5, 2.5, 2.75, -INF, NAN];
    let cases: [(&str, [f64; 11]); 7] = [
        (
            "neg",
            [2.5, 1.5, 0.5, 0.0, -0.0, -0.5, -1.5, -2.5, -2.75, INF, NAN],
        ),
        (
            "abs",
            [2.5, 1.5, 0.5, 0.0, 0.0, 0.5, 1.5, 2.5, 2.75, INF, NAN],
        ),
        (
            "sign",
            [-1.0, -1.0, -1.0, -0.0, 0.0, 1.0, 1.0, 1.0, 1.0, -1.0, NAN],
        ),
        (
            "floor",
            [-3.0, -2.0, -1.0, -0.0, 0.0, 0.0, 1.0, 2.0, 2.0, -INF, NAN],
        ),
        (
            "ceil",
            [-2.0, -1.0, -0.0, -0.0, 0.0, 1.0, 2.0, 3.0, 3.0, -INF, NAN],
        ),
        (
            "round",
            [-3.0, -2.0, -1.0, -0.0, 0.0, 1.0, 2.0, 3.0, 3.0, -INF, NAN],
        ),
        (
            "round_even",
            [-2.0, -2.0, -0.0, -0.0, 0.0, 0.0, 2.0, 2.0, 3.0, -INF, NAN],
        ),
    ];
    for dtype in FLOATS {
        let a = floats(dtype, &x);
        for (op, want) in cases {
            check(&same(op, &[&a]), &want);
        }
    }
}

type Reference = fn(f64) -> f64;

/// 1 / (1 + e^-x), written so that neither branch overflows.
fn logistic(x: f64) -> f64 {
    if x >= 0.0 {
        1.0 / (1.0 + (-x).exp())
    } else {
        x.exp() / (1.0 + x.exp())
    }
}

const TRANSCENDENTALS: [(&str, Reference); 10] = [
    ("exp", f64::exp),
    ("expm1", f64::exp_m1),
    ("log", f64::ln),
    ("log1p", f64::ln_1p),
    ("sqrt", f64::sqrt),
    ("rsqrt", |v| 1.0 / v.sqrt()),
    ("tanh", f64::tanh),
    ("logistic", logistic),
    ("sin", f64::sin),
    ("cos", f64::cos),
];

#[test]
fn transcendentals_are_the_f64_result_rounded_once() {
    let xs = [
        -20.0, -3.5, -1.0, -0.25, 0.0, 1e-7, 0.1, 0.5, 1.0, 2.0, 3.0, 10.0, 40.0, 88.0, 1e4,
    ];
    for dtype in FLOATS {
        let a = floats(dtype, &xs);
        let inputs = a.to_f64_vec();
        for (op, f) in TRANSCENDENTALS {
            let want: Vec<f64> = inputs.iter().map(|&v| round_to(dtype, f(v))).collect();
            check(&same(op, &[&a]), &want);
        }
    }
}

#[test]
fn transcendental_special_values() {
    let x = vec1(&[
        0.0f32,
        1.0,
        -1.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        2.25,
        0.25,
    ]);
    let nan = f32::NAN as f64;
    let want: [(&str, [f64; 7]); 10] = [
        (
            "exp",
            [
                1.0,
                std::f32::consts::E as f64,
                (-1f64).exp() as f32 as f64,
                INF,
                0.0,
                2.25f64.exp() as f32 as f64,
                0.25f64.exp() as f32 as f64,
            ],
        ),
        (
            "log",
            [
                -INF,
                0.0,
                nan,
                INF,
                nan,
                2.25f64.ln() as f32 as f64,
                0.25f64.ln() as f32 as f64,
            ],
        ),
        ("sqrt", [0.0, 1.0, nan, INF, nan, 1.5, 0.5]),
        (
            "rsqrt",
            [INF, 1.0, nan, 0.0, nan, (1.0 / 1.5f64) as f32 as f64, 2.0],
        ),
        (
            "tanh",
            [
                0.0,
                1f64.tanh() as f32 as f64,
                -(1f64.tanh() as f32) as f64,
                1.0,
                -1.0,
                2.25f64.tanh() as f32 as f64,
                0.25f64.tanh() as f32 as f64,
            ],
        ),
        (
            "logistic",
            [
                0.5,
                (1.0 / (1.0 + (-1f64).exp())) as f32 as f64,
                (1.0 / (1.0 + 1f64.exp())) as f32 as f64,
                1.0,
                0.0,
                (1.0 / (1.0 + (-2.25f64).exp())) as f32 as f64,
                (1.0 / (1.0 + (-0.25f64).exp())) as f32 as f64,
            ],
        ),
        (
            "sin",
            [
                0.0,
                1f64.sin() as f32 as f64,
                -(1f64.sin() as f32) as f64,
                nan,
                nan,
                2.25f64.sin() as f32 as f64,
                0.25f64.sin() as f32 as f64,
            ],
        ),
        (
            "cos",
            [
                1.0,
                1f64.cos() as f32 as f64,
                1f64.cos() as f32 as f64,
                nan,
                nan,
                2.25f64.cos() as f32 as f64,
                0.25f64.cos() as f32 as f64,
            ],
        ),
        (
            "expm1",
            [
                0.0,
                1f64.exp_m1() as f32 as f64,
                (-1f64).exp_m1() as f32 as f64,
                INF,
                -1.0,
                2.25f64.exp_m1() as f32 as f64,
                0.25f64.exp_m1() as f32 as f64,
            ],
        ),
        (
            "log1p",
            [
                0.0,
                2f64.ln() as f32 as f64,
                -INF,
                INF,
                nan,
                3.25f64.ln() as f32 as f64,
                1.25f64.ln() as f32 as f64,
            ],
        ),
    ];
    for (op, w) in want {
        check(&same(op, &[&x]), &w);
    }
    // exp(1) in f32 is e rounded once, and in bf16 the nearest of its 8-bit neighbours.
    check(&same("exp", &[&floats(DType::BF16, &[1.0])]), &[2.71875]);
    // Accuracy near zero: a naive exp(x) - 1 in f32 would give 2^-23.
    let tiny = same("expm1", &[&vec1(&[1e-7f32])]).to_vec::<f32>().unwrap();
    assert!((tiny[0] - 1e-7).abs() < 1e-13, "{tiny:?}");
    let tiny = same("log1p", &[&vec1(&[1e-7f32])]).to_vec::<f32>().unwrap();
    assert!((tiny[0] - 1e-7).abs() < 1e-13, "{tiny:?}");
    // logistic does not overflow for large |x|, and keeps tiny results for negative x.
    let l = same("logistic", &[&vec1(&[-1000.0f32, 1000.0, -100.0, -88.0])]);
    check(
        &l,
        &[
            0.0,
            1.0,
            (-100f64).exp() as f32 as f64,
            ((-88f64).exp() / (1.0 + (-88f64).exp())) as f32 as f64,
        ],
    );
    assert!(l.to_vec::<f32>().unwrap()[2] > 0.0);
}

#[test]
fn f32_and_f64_arithmetic_is_native_ieee() {
    let vals = [
        0.0, -0.0, 1.0, -1.5, 3.0, 1e-40, 3.4e38, -3.4e38, INF, -INF, NAN, 0.1, 7.0, 1e20, 1e-20,
    ];
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for &x in &vals {
        for &y in &vals {
            a.push(x);
            b.push(y);
        }
    }
    type Native32 = fn(f32, f32) -> f32;
    type Native64 = fn(f64, f64) -> f64;
    let ops: [(&str, Native32, Native64); 5] = [
        ("add", |x, y| x + y, |x, y| x + y),
        ("sub", |x, y| x - y, |x, y| x - y),
        ("mul", |x, y| x * y, |x, y| x * y),
        ("div", |x, y| x / y, |x, y| x / y),
        ("rem", |x, y| x % y, |x, y| x % y),
    ];
    let (a32, b32) = (floats(DType::F32, &a), floats(DType::F32, &b));
    let (a64, b64) = (floats(DType::F64, &a), floats(DType::F64, &b));
    let (x32, y32) = (a32.to_vec::<f32>().unwrap(), b32.to_vec::<f32>().unwrap());
    for (op, f32op, f64op) in ops {
        let want: Vec<f64> = x32
            .iter()
            .zip(&y32)
            .map(|(&x, &y)| f32op(x, y) as f64)
            .collect();
        check(&same(op, &[&a32, &b32]), &want);
        let want: Vec<f64> = a.iter().zip(&b).map(|(&x, &y)| f64op(x, y)).collect();
        check(&same(op, &[&a64, &b64]), &want);
    }
    // fmod takes the dividend's sign; x / 0 is a signed infinity.
    let r = same(
        "rem",
        &[
            &vec1(&[5.5f32, -5.5, 5.5, 1.0]),
            &vec1(&[2.0f32, 2.0, -2.0, 0.0]),
        ],
    );
    check(&r, &[1.5, -1.5, 1.5, NAN]);
    let d = same(
        "div",
        &[&vec1(&[1.0f32, -1.0, 0.0]), &vec1(&[0.0f32, 0.0, 0.0])],
    );
    check(&d, &[INF, -INF, NAN]);
}

#[test]
fn pow_on_floats() {
    let a = [2.0, 0.0, -8.0, -2.0, 4.0, 10.0, 0.0, -0.0, 1.0];
    let b = [10.0, 0.0, 1.0 / 3.0, 3.0, 0.5, -1.0, -1.0, -1.0, NAN];
    let want = [1024.0, 1.0, NAN, -8.0, 2.0, 0.1, INF, -INF, 1.0];
    for dtype in FLOATS {
        let (x, y) = (floats(dtype, &a), floats(dtype, &b));
        let w: Vec<f64> = want.iter().map(|&v| round_to(dtype, v)).collect();
        check(&same("pow", &[&x, &y]), &w);
    }
    // Non-trivial results are the f64 power rounded once.
    let x = vec1(&[1.1f32, 3.0, 0.7]);
    let y = vec1(&[2.5f32, 0.3, 12.0]);
    let want: Vec<f64> = [(1.1f32, 2.5f32), (3.0, 0.3), (0.7, 12.0)]
        .iter()
        .map(|&(p, q)| (p as f64).powf(q as f64) as f32 as f64)
        .collect();
    check(&same("pow", &[&x, &y]), &want);
}

/// Random finite values of a 16-bit float type, as f64.
fn random_half(dtype: DType, rng: &mut Rng, n: usize) -> Vec<f64> {
    let mut out = Vec::new();
    while out.len() < n {
        let bits = (rng.next() >> 48) as u16;
        let v = match dtype {
            DType::F16 => f16::from_bits(bits).to_f64(),
            _ => bf16::from_bits(bits).to_f64(),
        };
        // Keep magnitudes where sums and products are interesting, plus some extremes.
        if v.is_finite() && (out.len() % 8 == 0 || (1e-3..1e3).contains(&v.abs())) {
            out.push(v);
        }
    }
    out
}

#[test]
fn f16_and_bf16_arithmetic_rounds_once() {
    // Reference: the exact (or f64-rounded, which is innocuous here) result rounded once.
    type Exact = fn(f64, f64) -> f64;
    let ops: [(&str, Exact); 5] = [
        ("add", |x, y| x + y),
        ("sub", |x, y| x - y),
        ("mul", |x, y| x * y),
        ("div", |x, y| x / y),
        ("rem", |x, y| x % y),
    ];
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for dtype in [DType::F16, DType::BF16] {
        let a = random_half(dtype, &mut rng, 2000);
        let b = random_half(dtype, &mut rng, 2000);
        let (x, y) = (floats(dtype, &a), floats(dtype, &b));
        for (op, f) in ops {
            let want: Vec<f64> = a
                .iter()
                .zip(&b)
                .map(|(&p, &q)| round_to(dtype, f(p, q)))
                .collect();
            check(&same(op, &[&x, &y]), &want);
        }
    }
    // Ties go to even: 1 + 2^-11 is halfway between 1 and 1 + 2^-10.
    let h = |v: &[f64]| floats(DType::F16, v);
    let one = 1.0;
    let s = same(
        "add",
        &[
            &h(&[one, one, 65504.0, 65504.0, 60000.0]),
            &h(&[2f64.powi(-11), 3.0 * 2f64.powi(-11), 8.0, 16.0, 10000.0]),
        ],
    );
    check(&s, &[1.0, 1.0 + 2f64.powi(-9), 65504.0, INF, INF]);
    let b = |v: &[f64]| floats(DType::BF16, v);
    let s = same(
        "add",
        &[
            &b(&[one, one, 256.0]),
            &b(&[2f64.powi(-8), 3.0 * 2f64.powi(-8), 1.0]),
        ],
    );
    check(&s, &[1.0, 1.0 + 2f64.powi(-6), 256.0]);
    let q = same("div", &[&h(&[1.0]), &h(&[3.0])]);
    check(&q, &[f16_from_f64(1.0 / 3.0).to_f64()]);
}

#[test]
fn max_and_min_propagate_nan_and_order_signed_zeros() {
    let a = [NAN, 1.0, -0.0, 0.0, -0.0, 2.0, -INF];
    let b = [1.0, NAN, 0.0, -0.0, -0.0, -3.0, NAN];
    for dtype in FLOATS {
        let (x, y) = (floats(dtype, &a), floats(dtype, &b));
        check(
            &same("max", &[&x, &y]),
            &[NAN, NAN, 0.0, 0.0, -0.0, 2.0, NAN],
        );
        check(
            &same("min", &[&x, &y]),
            &[NAN, NAN, -0.0, -0.0, -0.0, -3.0, NAN],
        );
    }
    let x = vec1(&[i32::MIN, 5, -7]);
    let y = vec1(&[0, 5, -8]);
    assert_eq!(
        same("max", &[&x, &y]).to_vec::<i32>().unwrap(),
        vec![0, 5, -7]
    );
    assert_eq!(
        same("min", &[&x, &y]).to_vec::<i32>().unwrap(),
        vec![i32::MIN, 5, -8]
    );
    let x = vec1(&[200u8, 3]);
    let y = vec1(&[100u8, 4]);
    assert_eq!(same("max", &[&x, &y]).to_vec::<u8>().unwrap(), vec![200, 4]);
    assert_eq!(same("min", &[&x, &y]).to_vec::<u8>().unwrap(), vec![100, 3]);
}

#[test]
fn i32_arithmetic_wraps_and_divides_like_xla() {
    let (mn, mx) = (i32::MIN, i32::MAX);
    let a = vec1(&[7, -7, 7, -7, mn, mn, 5, -5, 0, mx]);
    let b = vec1(&[2, 2, -2, -2, -1, 1, 0, 0, 0, 1]);
    let cases: [(&str, [i32; 10]); 5] = [
        ("div", [3, -3, -3, 3, mn, mn, -1, -1, -1, mx]),
        ("rem", [1, -1, 1, -1, 0, 0, 5, -5, 0, 0]),
        ("add", [9, -5, 5, -9, mx, mn + 1, 5, -5, 0, mn]),
        ("sub", [5, -9, 9, -5, mn + 1, mx, 5, -5, 0, mx - 1]),
        ("mul", [14, -14, -14, 14, mn, mn, 0, 0, 0, mx]),
    ];
    for (op, want) in cases {
        assert_eq!(same(op, &[&a, &b]).to_vec::<i32>().unwrap(), want, "{op}");
    }
    let x = vec1(&[12, -1, -1, mn, 0]);
    let y = vec1(&[10, 5, 5, 1, -1]);
    assert_eq!(
        same("and", &[&x, &y]).to_vec::<i32>().unwrap(),
        vec![8, 5, 5, 0, 0]
    );
    assert_eq!(
        same("or", &[&x, &y]).to_vec::<i32>().unwrap(),
        vec![14, -1, -1, mn + 1, -1]
    );
    assert_eq!(
        same("xor", &[&x, &y]).to_vec::<i32>().unwrap(),
        vec![6, -6, -6, mn + 1, -1]
    );
    let u = vec1(&[7, -7, mn, mx, 0]);
    assert_eq!(
        same("neg", &[&u]).to_vec::<i32>().unwrap(),
        vec![-7, 7, mn, -mx, 0]
    );
    assert_eq!(
        same("abs", &[&u]).to_vec::<i32>().unwrap(),
        vec![7, 7, mn, mx, 0]
    );
    assert_eq!(
        same("sign", &[&u]).to_vec::<i32>().unwrap(),
        vec![1, -1, -1, 1, 0]
    );
    assert_eq!(
        same("not", &[&u]).to_vec::<i32>().unwrap(),
        vec![-8, 6, mx, mn, -1]
    );
}

#[test]
fn i64_and_u8_arithmetic() {
    let (mn, mx) = (i64::MIN, i64::MAX);
    let a = vec1(&[mn, mn, 9, mx, 12]);
    let b = vec1(&[-1i64, 0, 0, 1, -5]);
    assert_eq!(
        same("div", &[&a, &b]).to_vec::<i64>().unwrap(),
        vec![mn, -1, -1, mx, -2]
    );
    assert_eq!(
        same("rem", &[&a, &b]).to_vec::<i64>().unwrap(),
        vec![0, mn, 9, 0, 2]
    );
    assert_eq!(
        same("add", &[&a, &b]).to_vec::<i64>().unwrap(),
        vec![mx, mn, 9, mn, 7]
    );
    assert_eq!(
        same("neg", &[&a]).to_vec::<i64>().unwrap(),
        vec![mn, mn, -9, -mx, -12]
    );
    assert_eq!(
        same("abs", &[&b]).to_vec::<i64>().unwrap(),
        vec![1, 0, 0, 1, 5]
    );
    assert_eq!(
        same("sign", &[&a]).to_vec::<i64>().unwrap(),
        vec![-1, -1, 1, 1, 1]
    );
    assert_eq!(
        same("xor", &[&a, &b]).to_vec::<i64>().unwrap(),
        vec![mx, mn, 9, mx - 1, -9]
    );

    let x = vec1(&[200u8, 7, 0, 255, 3, 3]);
    let y = vec1(&[100u8, 0, 0, 2, 5, 6]);
    let cases: [(&str, [u8; 6]); 8] = [
        ("add", [44, 7, 0, 1, 8, 9]),
        ("sub", [100, 7, 0, 253, 254, 253]),
        ("mul", [32, 0, 0, 254, 15, 18]),
        ("div", [2, 255, 255, 127, 0, 0]),
        ("rem", [0, 7, 0, 1, 3, 3]),
        ("pow", [0, 1, 1, 1, 243, 217]),
        ("and", [64, 0, 0, 2, 1, 2]),
        ("or", [236, 7, 0, 255, 7, 7]),
    ];
    for (op, want) in cases {
        assert_eq!(same(op, &[&x, &y]).to_vec::<u8>().unwrap(), want, "{op}");
    }
    assert_eq!(
        same("not", &[&x]).to_vec::<u8>().unwrap(),
        vec![55, 248, 255, 0, 252, 252]
    );
    assert_eq!(
        same("neg", &[&x]).to_vec::<u8>().unwrap(),
        vec![56, 249, 0, 1, 253, 253]
    );
    assert_eq!(
        same("sign", &[&x]).to_vec::<u8>().unwrap(),
        vec![1, 1, 0, 1, 1, 1]
    );
}

#[test]
fn integer_pow_squares_and_wraps() {
    // Against std's wrapping_pow for non-negative exponents.
    let (mut base, mut exp) = (Vec::new(), Vec::new());
    for b in -5i32..=5 {
        for e in [0i32, 1, 2, 3, 7, 31, 32, 40, 1_000_001] {
            base.push(b);
            exp.push(e);
        }
    }
    let want: Vec<i32> = base
        .iter()
        .zip(&exp)
        .map(|(&b, &e)| b.wrapping_pow(e as u32))
        .collect();
    assert_eq!(
        same("pow", &[&vec1(&base), &vec1(&exp)])
            .to_vec::<i32>()
            .unwrap(),
        want
    );
    let wide: Vec<i64> = base.iter().map(|&b| b as i64 * 1001).collect();
    let wide_exp: Vec<i64> = exp.iter().map(|&e| e as i64).collect();
    let want: Vec<i64> = wide
        .iter()
        .zip(&wide_exp)
        .map(|(&b, &e)| b.wrapping_pow(e as u32))
        .collect();
    assert_eq!(
        same("pow", &[&vec1(&wide), &vec1(&wide_exp)])
            .to_vec::<i64>()
            .unwrap(),
        want
    );
    // Negative exponents: 0 except for bases 1 and -1.
    let b = vec1(&[1, -1, -1, 2, -2, 0, 7]);
    let e = vec1(&[-5, -3, -4, -1, -2, -1, i32::MIN]);
    assert_eq!(
        same("pow", &[&b, &e]).to_vec::<i32>().unwrap(),
        vec![1, -1, 1, 0, 0, 0, 0]
    );
}

#[test]
fn bool_logic() {
    let p = vec1(&[true, true, false, false]);
    let q = vec1(&[true, false, true, false]);
    assert_eq!(
        same("and", &[&p, &q]).to_vec::<bool>().unwrap(),
        vec![true, false, false, false]
    );
    assert_eq!(
        same("or", &[&p, &q]).to_vec::<bool>().unwrap(),
        vec![true, true, true, false]
    );
    assert_eq!(
        same("xor", &[&p, &q]).to_vec::<bool>().unwrap(),
        vec![false, true, true, false]
    );
    assert_eq!(
        same("not", &[&p]).to_vec::<bool>().unwrap(),
        vec![false, false, true, true]
    );
}

fn compare_all(a: &Array, b: &Array) -> Vec<Vec<bool>> {
    let out = format!("bool{}", a.shape());
    ["eq", "ne", "lt", "le", "gt", "ge"]
        .iter()
        .map(|op| apply(op, &[a, b], "", &out).to_vec::<bool>().unwrap())
        .collect()
}

#[test]
fn comparisons_follow_ieee_and_each_dtype_order() {
    let (t, f) = (true, false);
    let a = [1.0, NAN, -0.0, 2.0, INF, NAN];
    let b = [2.0, NAN, 0.0, 1.0, INF, 1.0];
    let want = vec![
        vec![f, f, t, f, t, f],
        vec![t, t, f, t, f, t],
        vec![t, f, f, f, f, f],
        vec![t, f, t, f, t, f],
        vec![f, f, f, t, f, f],
        vec![f, f, t, t, t, f],
    ];
    for dtype in FLOATS {
        assert_eq!(
            compare_all(&floats(dtype, &a), &floats(dtype, &b)),
            want,
            "{dtype}"
        );
    }
    // Integers: signed and unsigned orders; bools: false < true.
    let want = vec![
        vec![f, t, f],
        vec![t, f, t],
        vec![t, f, f],
        vec![t, t, f],
        vec![f, f, t],
        vec![f, t, t],
    ];
    assert_eq!(
        compare_all(&vec1(&[-5i32, 3, 9]), &vec1(&[4i32, 3, -9])),
        want
    );
    assert_eq!(
        compare_all(
            &vec1(&[i64::MIN, 0, i64::MAX]),
            &vec1(&[i64::MAX, 0, i64::MIN])
        ),
        want
    );
    assert_eq!(
        compare_all(&vec1(&[100u8, 7, 200]), &vec1(&[200u8, 7, 100])),
        want
    );
    assert_eq!(
        compare_all(&vec1(&[false, true, true]), &vec1(&[true, true, false])),
        want
    );
}

#[test]
fn select_with_array_and_scalar_predicates() {
    let p = vec1(&[true, false, true]);
    let a = vec1(&[1i32, 2, 3]);
    let b = vec1(&[-1i32, -2, -3]);
    assert_eq!(
        same_select(&p, &a, &b).to_vec::<i32>().unwrap(),
        vec![1, -2, 3]
    );
    for (pred, want) in [(true, [1.5, 2.5]), (false, [-0.0, NAN])] {
        let x = floats(DType::F16, &[1.5, 2.5]);
        let y = floats(DType::F16, &[-0.0, NAN]);
        check(&same_select(&Array::scalar(pred), &x, &y), &want);
    }
    let x = vec1(&[true, true]);
    let y = vec1(&[false, false]);
    assert_eq!(
        same_select(&vec1(&[false, true]), &x, &y)
            .to_vec::<bool>()
            .unwrap(),
        vec![false, true]
    );
}

fn same_select(p: &Array, a: &Array, b: &Array) -> Array {
    apply("select", &[p, a, b], "", &a.ty().to_string())
}

#[test]
fn clamp_with_scalar_and_array_bounds() {
    let clamp =
        |lo: &Array, x: &Array, hi: &Array| apply("clamp", &[lo, x, hi], "", &x.ty().to_string());
    let x = vec1(&[-5.0f32, 0.5, 7.0, f32::NAN, -0.0]);
    let (lo, hi) = (Array::scalar(0.0f32), Array::scalar(1.0f32));
    check(&clamp(&lo, &x, &hi), &[0.0, 0.5, 1.0, NAN, 0.0]);
    // Array bounds, including lo > hi (gives hi) and a NaN bound.
    let lo = vec1(&[-10.0f32, 1.0, 3.0, 0.0, f32::NAN]);
    let hi = vec1(&[-6.0f32, 2.0, 2.0, 1.0, 1.0]);
    check(&clamp(&lo, &x, &hi), &[-6.0, 1.0, 2.0, NAN, NAN]);
    let x = vec1(&[i32::MIN, 3, i32::MAX]);
    let c = clamp(&Array::scalar(-2i32), &x, &Array::scalar(2i32));
    assert_eq!(c.to_vec::<i32>().unwrap(), vec![-2, 2, 2]);
    let c = clamp(
        &Array::scalar(5i64),
        &vec1(&[0i64, 3, 9]),
        &Array::scalar(2i64),
    );
    assert_eq!(c.to_vec::<i64>().unwrap(), vec![2, 2, 2]);
    let c = clamp(
        &vec1(&[10u8, 10, 10]),
        &vec1(&[0u8, 50, 255]),
        &Array::scalar(100u8),
    );
    assert_eq!(c.to_vec::<u8>().unwrap(), vec![10, 50, 100]);
    let c = clamp(
        &Array::scalar(bf16::from_f32(-1.0)),
        &floats(DType::BF16, &[-3.0, 0.25, 9.0]),
        &Array::scalar(bf16::from_f32(1.0)),
    );
    check(&c, &[-1.0, 0.25, 1.0]);
}

fn convert(x: &Array, to: &str) -> Array {
    apply("convert", &[x], "", &format!("{to}{}", x.shape()))
}

#[test]
fn float_to_integer_truncates_and_saturates() {
    let x = vec1(&[
        2.7f32,
        -2.7,
        3e9,
        -3e9,
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        -0.5,
        2147483520.0,
    ]);
    let (mn, mx) = (i32::MIN, i32::MAX);
    assert_eq!(
        convert(&x, "i32").to_vec::<i32>().unwrap(),
        vec![2, -2, mx, mn, 0, mx, mn, 0, 2147483520]
    );
    assert_eq!(
        convert(&x, "u8").to_vec::<u8>().unwrap(),
        vec![2, 0, 255, 0, 0, 255, 0, 0, 255]
    );
    assert_eq!(
        convert(&x, "i64").to_vec::<i64>().unwrap(),
        vec![
            2,
            -2,
            3_000_000_000,
            -3_000_000_000,
            0,
            i64::MAX,
            i64::MIN,
            0,
            2147483520
        ]
    );
    let x = vec1(&[1e19f64, -1e19, 4611686018427387904.0, -9.99]);
    assert_eq!(
        convert(&x, "i64").to_vec::<i64>().unwrap(),
        vec![i64::MAX, i64::MIN, 1 << 62, -9]
    );
    let h = floats(DType::F16, &[65504.0, -2.5, NAN, INF]);
    assert_eq!(
        convert(&h, "i32").to_vec::<i32>().unwrap(),
        vec![65504, -2, 0, i32::MAX]
    );
    let b = floats(DType::BF16, &[-300.0, 255.5, 1e30]);
    assert_eq!(convert(&b, "u8").to_vec::<u8>().unwrap(), vec![0, 255, 255]);
}

#[test]
fn conversions_to_and_from_bool() {
    let x = vec1(&[0.0f32, -0.0, f32::NAN, 1e-45, -1.0]);
    assert_eq!(
        convert(&x, "bool").to_vec::<bool>().unwrap(),
        vec![false, false, true, true, true]
    );
    let i = vec1(&[0i32, 5, -1]);
    assert_eq!(
        convert(&i, "bool").to_vec::<bool>().unwrap(),
        vec![false, true, true]
    );
    let u = vec1(&[0u8, 128]);
    assert_eq!(
        convert(&u, "bool").to_vec::<bool>().unwrap(),
        vec![false, true]
    );
    let p = vec1(&[true, false]);
    check(&convert(&p, "f32"), &[1.0, 0.0]);
    check(&convert(&p, "f16"), &[1.0, 0.0]);
    check(&convert(&p, "bf16"), &[1.0, 0.0]);
    check(&convert(&p, "f64"), &[1.0, 0.0]);
    assert_eq!(convert(&p, "i32").to_vec::<i32>().unwrap(), vec![1, 0]);
    assert_eq!(convert(&p, "i64").to_vec::<i64>().unwrap(), vec![1, 0]);
    assert_eq!(convert(&p, "u8").to_vec::<u8>().unwrap(), vec![1, 0]);
    assert_eq!(convert(&p, "bool"), p);
}

#[test]
fn integer_conversions_wrap_and_round_once() {
    let big = vec1(&[16_777_217i64, 16_777_219, (1 << 40) + 1, -16_777_217]);
    check(
        &convert(&big, "f32"),
        &[
            16_777_216.0,
            16_777_220.0,
            (1u64 << 40) as f64,
            -16_777_216.0,
        ],
    );
    check(
        &convert(&vec1(&[(1i64 << 53) + 1, i64::MIN]), "f64"),
        &[2f64.powi(53), -(2f64.powi(63))],
    );
    // 2^62 + 2^54 + 1 lies just above a bf16 tie; rounding through f64 first would make it
    // an exact tie and round down to 2^62.
    let tie = vec1(&[
        (1i64 << 62) + (1 << 54) + 1,
        (1 << 62) + (1 << 54),
        257,
        259,
        -259,
    ]);
    check(
        &convert(&tie, "bf16"),
        &[
            2f64.powi(62) + 2f64.powi(55),
            2f64.powi(62),
            256.0,
            260.0,
            -260.0,
        ],
    );
    let h = vec1(&[65519i64, 65520, -70000, 2049, 2051, i64::MAX]);
    check(
        &convert(&h, "f16"),
        &[65504.0, INF, -INF, 2048.0, 2052.0, INF],
    );
    let i = vec1(&[2049i32, -2051, i32::MAX]);
    check(&convert(&i, "f16"), &[2048.0, -2052.0, INF]);
    check(&convert(&vec1(&[200u8, 255]), "bf16"), &[200.0, 255.0]);
    check(
        &convert(&vec1(&[257i32, 0x7FFF_FFFF]), "bf16"),
        &[256.0, 2f64.powi(31)],
    );
    assert_eq!(
        convert(&vec1(&[(1i64 << 32) + 5, -1, 1 << 31]), "i32")
            .to_vec::<i32>()
            .unwrap(),
        vec![5, -1, i32::MIN]
    );
    assert_eq!(
        convert(&vec1(&[300i32, -1, 256]), "u8")
            .to_vec::<u8>()
            .unwrap(),
        vec![44, 255, 0]
    );
    assert_eq!(
        convert(&vec1(&[200u8, 255]), "i32")
            .to_vec::<i32>()
            .unwrap(),
        vec![200, 255]
    );
    assert_eq!(
        convert(&vec1(&[200u8]), "i64").to_vec::<i64>().unwrap(),
        vec![200]
    );
    assert_eq!(
        convert(&vec1(&[-1i32, i32::MIN]), "i64")
            .to_vec::<i64>()
            .unwrap(),
        vec![-1, i32::MIN as i64]
    );
    assert_eq!(
        convert(&vec1(&[-1i64, 511]), "u8").to_vec::<u8>().unwrap(),
        vec![255, 255]
    );
}

#[test]
fn float_conversions_round_once_to_nearest_even() {
    // f64 -> f16/bf16 directly: these lie just above a tie, which rounding to f32 first would
    // turn into an exact tie (rounded down to even).
    let above = |ulp: i32| 1.0 + 2f64.powi(-ulp - 1) + 2f64.powi(-40);
    check(
        &convert(&vec1(&[above(10), 1.0 + 2f64.powi(-11)]), "f16"),
        &[1.0 + 2f64.powi(-10), 1.0],
    );
    check(
        &convert(&vec1(&[above(7), 1.0 + 2f64.powi(-8)]), "bf16"),
        &[1.0 + 2f64.powi(-7), 1.0],
    );
    // f32 -> f16: ties to even, overflow at the tie above the maximum, underflow to zero.
    let x = vec1(&[
        1.0f32 + 2f32.powi(-11),
        1.0 + 3.0 * 2f32.powi(-11),
        65519.0,
        65520.0,
        1e-8,
        3e-8,
        f32::NAN,
        -0.0,
    ]);
    check(
        &convert(&x, "f16"),
        &[
            1.0,
            1.0 + 2f64.powi(-9),
            65504.0,
            INF,
            0.0,
            2f64.powi(-24),
            NAN,
            -0.0,
        ],
    );
    let x = vec1(&[
        1.0f32 + 2f32.powi(-8),
        1.0 + 3.0 * 2f32.powi(-8),
        f32::MAX,
        1e-40,
    ]);
    check(
        &convert(&x, "bf16"),
        &[
            1.0,
            1.0 + 2f64.powi(-6),
            INF,
            bf16::from_f32(1e-40).to_f64(),
        ],
    );
    // Widening is exact.
    check(
        &convert(&floats(DType::F16, &[65504.0, 2f64.powi(-24)]), "f32"),
        &[65504.0, 2f64.powi(-24)],
    );
    check(&convert(&vec1(&[0.1f32]), "f64"), &[0.1f32 as f64]);
    check(
        &convert(&floats(DType::BF16, &[1e5, 0.5]), "f16"),
        &[INF, 0.5],
    );
    check(
        &convert(&floats(DType::F16, &[0.1]), "bf16"),
        &[bf16_from_f64(f16_from_f64(0.1).to_f64()).to_f64()],
    );
    check(
        &convert(&vec1(&[0.1f64, 1e300, 1e-50]), "f32"),
        &[0.1f32 as f64, INF, 0.0],
    );
    // Same dtype: unchanged.
    let x = vec1(&[1.5f32, f32::NAN]);
    assert_eq!(convert(&x, "f32"), x);
}

#[test]
fn constants_iota_and_stop_gradient() {
    check(&apply("constant", &[], "1.5", "f32[2,3]"), &[1.5; 6]);
    let c = apply("constant", &[], "[1, -2, 3, 4]", "i32[2,2]");
    assert_eq!(c.to_vec::<i32>().unwrap(), vec![1, -2, 3, 4]);
    assert_eq!(c.dims(), &[2, 2]);
    let c = apply("constant", &[], "[true, false]", "bool[2]");
    assert_eq!(c.to_vec::<bool>().unwrap(), vec![true, false]);
    check(
        &apply("constant", &[], "[0.5, -0.0]", "f16[2]"),
        &[0.5, -0.0],
    );

    check(
        &apply("iota", &[], "dim=0", "f32[2,3]"),
        &[0.0, 0.0, 0.0, 1.0, 1.0, 1.0],
    );
    let i = apply("iota", &[], "dim=1", "i64[2,3,2]");
    assert_eq!(
        i.to_vec::<i64>().unwrap(),
        vec![0, 0, 1, 1, 2, 2, 0, 0, 1, 1, 2, 2]
    );
    let i = apply("iota", &[], "dim=2", "i32[2,1,3]");
    assert_eq!(i.to_vec::<i32>().unwrap(), vec![0, 1, 2, 0, 1, 2]);
    check(&apply("iota", &[], "dim=0", "f64[3]"), &[0.0, 1.0, 2.0]);
    let u = apply("iota", &[], "dim=0", "u8[258]")
        .to_vec::<u8>()
        .unwrap();
    assert_eq!((u[255], u[256], u[257]), (255, 0, 1));
    // Large indices round once, ties to even.
    let h = apply("iota", &[], "dim=0", "f16[2052]").to_f64_vec();
    assert_eq!((h[2047], h[2049], h[2051]), (2047.0, 2048.0, 2052.0));
    let b = apply("iota", &[], "dim=0", "bf16[260]").to_f64_vec();
    assert_eq!((b[255], b[257], b[259]), (255.0, 256.0, 260.0));

    let x = vec1(&[1.0f32, f32::NAN]);
    assert_eq!(same("stop_gradient", &[&x]), x);
    let x = vec1(&[7u8]);
    assert_eq!(same("stop_gradient", &[&x]), x);
}

/// `x[i, j, k] = 12 i + 4 j + k` over `[2, 3, 4]`.
fn cube() -> Array {
    arr(&[2, 3, 4], (0..24).map(|i| i as f32).collect())
}

#[test]
fn broadcast_in_dim_maps_operand_dims_to_result_dims() {
    check(
        &apply(
            "broadcast_in_dim",
            &[&Array::scalar(2.5f32)],
            "dims=[]",
            "f32[2,3]",
        ),
        &[2.5; 6],
    );
    let row = vec1(&[1i64, 2, 3]);
    let r = apply("broadcast_in_dim", &[&row], "dims=[1]", "i64[2,3]");
    assert_eq!(r.to_vec::<i64>().unwrap(), vec![1, 2, 3, 1, 2, 3]);
    let col = vec1(&[true, false]);
    let c = apply("broadcast_in_dim", &[&col], "dims=[0]", "bool[2,3]");
    assert_eq!(
        c.to_vec::<bool>().unwrap(),
        vec![true, true, true, false, false, false]
    );
    // Operand [3, 1]: dim 0 goes to result dim 1, the size-1 dim 1 broadcasts along dim 0.
    let x = arr(&[3, 1], vec![1.0f32, 2.0, 3.0]);
    let b = apply("broadcast_in_dim", &[&x], "dims=[1,0]", "f32[2,3,4]");
    let want: Vec<f64> = (0..24).map(|i| ((i / 4) % 3 + 1) as f64).collect();
    check(&b, &want);
    // Size-1 to size-1 and an unchanged shape.
    let y = apply("broadcast_in_dim", &[&cube()], "dims=[0,1,2]", "f32[2,3,4]");
    assert_eq!(y, cube());
}

#[test]
fn reshape_keeps_row_major_order() {
    let r = apply("reshape", &[&cube()], "", "f32[6,4]");
    check(&r, &iota_f64(24));
    assert_eq!(r.dims(), &[6, 4]);
    let s = apply("reshape", &[&vec1(&[9u8])], "", "u8[]");
    assert_eq!(s.item::<u8>().unwrap(), 9);
}

#[test]
fn atan2_quadrants_signed_zeros_and_infinities() {
    use std::f64::consts::{FRAC_PI_2, FRAC_PI_4, PI};
    let inf = f64::INFINITY;
    let cases = [
        (1.0, 1.0, FRAC_PI_4),
        (1.0, -1.0, 3.0 * FRAC_PI_4),
        (-1.0, -1.0, -3.0 * FRAC_PI_4),
        (0.0, 0.0, 0.0),
        (-0.0, 0.0, -0.0),
        (0.0, -0.0, PI),
        (-0.0, -0.0, -PI),
        (1.0, 0.0, FRAC_PI_2),
        (1.0, -inf, PI),
        (-1.0, inf, -0.0),
        (inf, inf, FRAC_PI_4),
        (f64::NAN, 1.0, f64::NAN),
    ];
    for dtype in FLOATS {
        let y = floats(dtype, &cases.map(|c| c.0));
        let x = floats(dtype, &cases.map(|c| c.1));
        let got = apply("atan2", &[&y, &x], "", &y.ty().to_string());
        let want: Vec<f64> = cases.iter().map(|c| round_to(dtype, c.2)).collect();
        check(&got, &want);
    }
    let i = arr(&[2], vec![1i32, 2]);
    let src = format!(
        "func @f(%0: {t}, %1: {t}) -> ({t}) {{\n  %2 = atan2 %0, %1 : {t}\n  return %2\n}}\n",
        t = i.ty()
    );
    assert!(parse_func(&src).is_err(), "atan2 of integers");
}

/// The elementary functions are the f64 ones rounded once, at and beyond the edges of their
/// domains (NaN outside, infinities at atanh(±1), signed zeros kept).
#[test]
fn elementary_functions_at_their_edges() {
    let inf = f64::INFINITY;
    let x = [
        0.0,
        -0.0,
        0.5,
        -0.75,
        1.0,
        -1.0,
        2.0,
        -8.0,
        30.0,
        inf,
        -inf,
        f64::NAN,
    ];
    type Function = fn(f64) -> f64;
    let functions: [(&str, Function); 10] = [
        ("tan", f64::tan),
        ("asin", f64::asin),
        ("acos", f64::acos),
        ("atan", f64::atan),
        ("sinh", f64::sinh),
        ("cosh", f64::cosh),
        ("asinh", f64::asinh),
        ("acosh", f64::acosh),
        ("atanh", f64::atanh),
        ("cbrt", f64::cbrt),
    ];
    for dtype in FLOATS {
        let input = floats(dtype, &x);
        for (name, f) in functions {
            let got = apply(name, &[&input], "", &input.ty().to_string());
            let want: Vec<f64> = x.iter().map(|&v| round_to(dtype, f(v))).collect();
            check(&got, &want);
        }
    }
}

#[test]
fn reverse_along_any_axes() {
    // cube[b, c, a] = 12 b + 4 c + a; reversed along axes 0 and 2: x[1 - b, c, 3 - a].
    let r = apply("reverse", &[&cube()], "axes=[0,2]", "f32[2,3,4]");
    let mut want = Vec::new();
    for b in 0..2 {
        for c in 0..3 {
            for a in 0..4 {
                want.push((12 * (1 - b) + 4 * c + (3 - a)) as f64);
            }
        }
    }
    check(&r, &want);
    // Leading axis only, on integers; no axes; a scalar; an empty array.
    let x = arr(&[3, 2], vec![1i32, 2, 3, 4, 5, 6]);
    assert_eq!(
        apply("reverse", &[&x], "axes=[0]", "i32[3,2]"),
        arr(&[3, 2], vec![5i32, 6, 3, 4, 1, 2])
    );
    assert_eq!(apply("reverse", &[&x], "axes=[]", "i32[3,2]"), x);
    let s = arr(&[], vec![7i64]);
    assert_eq!(apply("reverse", &[&s], "axes=[]", "i64[]"), s);
    let e = arr(&[0, 3], Vec::<f32>::new());
    assert_eq!(apply("reverse", &[&e], "axes=[0,1]", "f32[0,3]"), e);
}

#[test]
fn reverse_refuses_bad_axes() {
    for axes in ["[2]", "[0,0]"] {
        let src = format!("func @f(%0: f32[2,3]) -> (f32[2,3]) {{\n  %1 = reverse %0, axes={axes} : f32[2,3]\n  return %1\n}}\n");
        assert!(parse_func(&src).is_err(), "{axes}");
    }
}

#[test]
fn transpose_of_rank_3() {
    // Result dim i is operand dim perm[i]: t[a, b, c] = x[b, c, a] = 12 b + 4 c + a.
    let t = apply("transpose", &[&cube()], "perm=[2,0,1]", "f32[4,2,3]");
    let mut want = Vec::new();
    for a in 0..4 {
        for b in 0..2 {
            for c in 0..3 {
                want.push((12 * b + 4 * c + a) as f64);
            }
        }
    }
    check(&t, &want);
    // t[a, b, c] = x[b, a, c].
    let x = arr(&[2, 3, 4], (0..24).map(|i| i as u8).collect());
    let t = apply("transpose", &[&x], "perm=[1,0,2]", "u8[3,2,4]");
    let mut want = Vec::new();
    for a in 0..3u8 {
        for b in 0..2u8 {
            for c in 0..4u8 {
                want.push(12 * b + 4 * a + c);
            }
        }
    }
    assert_eq!(t.to_vec::<u8>().unwrap(), want);
}

#[test]
fn strided_and_empty_slices() {
    let s = apply(
        "slice",
        &[&cube()],
        "start=[1,0,1], limit=[2,3,4], strides=[1,2,2]",
        "f32[1,2,2]",
    );
    check(&s, &[13.0, 15.0, 21.0, 23.0]);
    let s = apply(
        "slice",
        &[&cube()],
        "start=[0,1,0], limit=[2,3,3], strides=[1,1,2]",
        "f32[2,2,2]",
    );
    check(&s, &[4.0, 6.0, 8.0, 10.0, 16.0, 18.0, 20.0, 22.0]);
    let s = apply(
        "slice",
        &[&cube()],
        "start=[0,2,0], limit=[2,2,4]",
        "f32[2,0,4]",
    );
    assert_eq!(s.numel(), 0);
    let v = vec1(&[1i64, 2, 3, 4, 5, 6, 7]);
    let s = apply(
        "slice",
        &[&v],
        "start=[1], limit=[7], strides=[3]",
        "i64[2]",
    );
    assert_eq!(s.to_vec::<i64>().unwrap(), vec![2, 5]);
}

/// Pads by the definition: result position `p` holds operand element `(p - low) / (interior
/// + 1)` when that division is exact and in range, and the padding value otherwise.
fn pad_reference(
    dims: &[usize],
    low: &[i64],
    high: &[i64],
    interior: &[usize],
) -> (Vec<usize>, Vec<i32>) {
    let out: Vec<usize> = (0..dims.len())
        .map(|k| {
            let d = dims[k] as i64;
            (low[k] + high[k] + d + (d - 1).max(0) * interior[k] as i64) as usize
        })
        .collect();
    let n: usize = out.iter().product();
    let mut data = Vec::with_capacity(n);
    for flat in 0..n {
        let (mut rest, mut src, mut inside) = (flat, 0i64, true);
        let mut idx = vec![0usize; dims.len()];
        for k in (0..dims.len()).rev() {
            idx[k] = rest % out[k];
            rest /= out[k];
        }
        for k in 0..dims.len() {
            let q = idx[k] as i64 - low[k];
            let step = interior[k] as i64 + 1;
            if q < 0 || q % step != 0 || q / step >= dims[k] as i64 {
                inside = false;
            }
            src = src * dims[k] as i64 + q / step;
        }
        data.push(if inside { src as i32 } else { -1 });
    }
    (out, data)
}

fn list<T: std::fmt::Display>(v: &[T]) -> String {
    let parts: Vec<String> = v.iter().map(|x| x.to_string()).collect();
    format!("[{}]", parts.join(","))
}

#[test]
fn pad_with_negative_edges_and_interior() {
    let configs: [([i64; 2], [i64; 2], [usize; 2]); 7] = [
        ([1, 0], [0, 2], [0, 0]),
        ([-1, 2], [1, -3], [1, 2]),
        ([-4, -2], [0, 0], [1, 0]),
        ([0, -9], [0, 1], [0, 2]),
        ([2, 1], [-2, -1], [0, 0]),
        ([-5, 0], [2, 0], [0, 0]),
        ([0, 0], [0, 0], [3, 1]),
    ];
    let x = arr(&[3, 4], (0..12).collect::<Vec<i32>>());
    for (low, high, interior) in configs {
        let (dims, want) = pad_reference(&[3, 4], &low, &high, &interior);
        let attrs = format!(
            "low={}, high={}, interior={}",
            list(&low),
            list(&high),
            list(&interior)
        );
        let got = apply(
            "pad",
            &[&x, &Array::scalar(-1i32)],
            &attrs,
            &format!("i32{}", list(&dims)),
        );
        assert_eq!(got.to_vec::<i32>().unwrap(), want, "{attrs}");
    }
    let p = apply(
        "pad",
        &[&vec1(&[1.0f32, 2.0, 3.0, 4.0]), &Array::scalar(9.0f32)],
        "low=[-1], high=[2], interior=[1]",
        "f32[8]",
    );
    check(&p, &[9.0, 2.0, 9.0, 3.0, 9.0, 4.0, 9.0, 9.0]);
    let b = apply(
        "pad",
        &[&vec1(&[true, true]), &Array::scalar(false)],
        "low=[1], high=[0], interior=[2]",
        "bool[5]",
    );
    assert_eq!(
        b.to_vec::<bool>().unwrap(),
        vec![false, true, false, false, true]
    );
    let s = apply(
        "pad",
        &[
            &Array::scalar(bf16::from_f32(3.0)),
            &Array::scalar(bf16::from_f32(0.0)),
        ],
        "low=[], high=[], interior=[]",
        "bf16[]",
    );
    check(&s, &[3.0]);
}

#[test]
fn concatenate_along_each_axis() {
    let a = arr(&[2, 1], vec![1.0f32, 2.0]);
    let empty = arr(&[2, 0], Vec::<f32>::new());
    let c = arr(&[2, 2], vec![3.0f32, 4.0, 5.0, 6.0]);
    let r = apply("concatenate", &[&a, &empty, &c], "axis=1", "f32[2,3]");
    check(&r, &[1.0, 3.0, 4.0, 2.0, 5.0, 6.0]);
    let x = arr(&[1, 2], vec![1i32, 2]);
    let y = arr(&[2, 2], vec![3i32, 4, 5, 6]);
    let r = apply("concatenate", &[&x, &y, &x], "axis=0", "i32[4,2]");
    assert_eq!(r.to_vec::<i32>().unwrap(), vec![1, 2, 3, 4, 5, 6, 1, 2]);
    let h = floats(DType::F16, &[0.5]);
    check(&apply("concatenate", &[&h], "axis=0", "f16[1]"), &[0.5]);
}

fn reduce(op: &str, x: &Array, axes: &[usize]) -> Array {
    let out: Vec<usize> = (0..x.dims().len())
        .filter(|a| !axes.contains(a))
        .map(|a| x.dims()[a])
        .collect();
    apply(
        op,
        &[x],
        &format!("axes={}", list(axes)),
        &format!("{}{}", x.dtype(), list(&out)),
    )
}

#[test]
fn reductions_over_every_axis_subset() {
    let dims = [2usize, 3, 4];
    let data: Vec<i64> = (0..24).map(|i| (i * 7 % 11) - 5).collect();
    let x = arr(&dims, data.clone());
    type Fold = fn(i64, i64) -> i64;
    let ops: [(&str, i64, Fold); 4] = [
        ("reduce_sum", 0, i64::wrapping_add),
        ("reduce_prod", 1, i64::wrapping_mul),
        ("reduce_max", i64::MIN, i64::max),
        ("reduce_min", i64::MAX, i64::min),
    ];
    for mask in 0..8usize {
        let axes: Vec<usize> = (0..3).filter(|a| mask & (1 << a) != 0).collect();
        let kept: Vec<usize> = (0..3).filter(|a| mask & (1 << a) == 0).collect();
        let out_n: usize = kept.iter().map(|&a| dims[a]).product();
        for (op, init, f) in ops {
            let mut want = vec![init; out_n];
            for (flat, &v) in data.iter().enumerate() {
                let idx = [flat / 12, (flat / 4) % 3, flat % 4];
                let o = kept.iter().fold(0, |acc, &a| acc * dims[a] + idx[a]);
                want[o] = f(want[o], v);
            }
            assert_eq!(
                reduce(op, &x, &axes).to_vec::<i64>().unwrap(),
                want,
                "{op} {axes:?}"
            );
        }
    }
    // The same on f32 (exact for these integers) over non-adjacent axes.
    let f = arr(&dims, data.iter().map(|&v| v as f32).collect());
    let s = reduce("reduce_sum", &f, &[0, 2]);
    let want: Vec<f64> = (0..3)
        .map(|j| {
            (0..2)
                .flat_map(|i| (0..4).map(move |k| (i, k)))
                .map(|(i, k)| data[i * 12 + j * 4 + k] as f64)
                .sum()
        })
        .collect();
    check(&s, &want);
}

#[test]
fn empty_reductions_give_identities() {
    let x = arr(&[2, 0], Vec::<f32>::new());
    // The float sum's identity is -0 (`ReduceOp::identity`), so a sum of -0s stays -0.
    check(&reduce("reduce_sum", &x, &[1]), &[-0.0, -0.0]);
    let negative_zeros = arr(&[3], vec![-0.0f32; 3]);
    check(&reduce("reduce_sum", &negative_zeros, &[0]), &[-0.0]);
    check(&reduce("reduce_prod", &x, &[1]), &[1.0, 1.0]);
    check(&reduce("reduce_max", &x, &[1]), &[-INF, -INF]);
    check(&reduce("reduce_min", &x, &[1]), &[INF, INF]);
    // Reducing the non-empty axis of an empty array gives an empty result.
    assert_eq!(reduce("reduce_sum", &x, &[0]).dims(), &[0]);
    let h = arr(&[0], Vec::<f16>::new());
    check(&reduce("reduce_max", &h, &[0]), &[-INF]);
    let i = arr(&[0], Vec::<i32>::new());
    assert_eq!(
        reduce("reduce_max", &i, &[0]).item::<i32>().unwrap(),
        i32::MIN
    );
    assert_eq!(
        reduce("reduce_min", &i, &[0]).item::<i32>().unwrap(),
        i32::MAX
    );
    assert_eq!(reduce("reduce_sum", &i, &[0]).item::<i32>().unwrap(), 0);
    assert_eq!(reduce("reduce_prod", &i, &[0]).item::<i32>().unwrap(), 1);
    let u = arr(&[0], Vec::<u8>::new());
    assert_eq!(reduce("reduce_max", &u, &[0]).item::<u8>().unwrap(), 0);
    assert_eq!(reduce("reduce_min", &u, &[0]).item::<u8>().unwrap(), 255);
    let l = arr(&[0], Vec::<i64>::new());
    assert_eq!(
        reduce("reduce_max", &l, &[0]).item::<i64>().unwrap(),
        i64::MIN
    );
    let b = arr(&[0], Vec::<bool>::new());
    assert!(!reduce("reduce_max", &b, &[0]).item::<bool>().unwrap());
    assert!(reduce("reduce_min", &b, &[0]).item::<bool>().unwrap());
}

#[test]
fn float_reductions_accumulate_in_f64_and_propagate_nan() {
    for dtype in FLOATS {
        let x = floats(dtype, &[1.0, NAN, 2.0]);
        for op in ["reduce_max", "reduce_min", "reduce_sum", "reduce_prod"] {
            check(&reduce(op, &x, &[0]), &[NAN]);
        }
        let z = floats(dtype, &[-0.0, 0.0, -0.0]);
        check(&reduce("reduce_max", &z, &[0]), &[0.0]);
        check(&reduce("reduce_min", &z, &[0]), &[-0.0]);
        check(
            &reduce("reduce_max", &floats(dtype, &[-0.0]), &[0]),
            &[-0.0],
        );
        check(
            &reduce("reduce_prod", &floats(dtype, &[2.0, 3.0, -1.0, 0.5]), &[0]),
            &[-3.0],
        );
    }
    // 1e8 + 16 ones - 1e8: sequential f32 accumulation would give 0.
    let mut v = vec![1e8f32];
    v.extend([1.0; 16]);
    v.push(-1e8);
    check(&reduce("reduce_sum", &vec1(&v), &[0]), &[16.0]);
    // f16 accumulation would stall at 2048; bf16 at 256.
    check(
        &reduce("reduce_sum", &arr(&[4096], vec![f16::ONE; 4096]), &[0]),
        &[4096.0],
    );
    let tenth = bf16::from_f32(0.1);
    let s = reduce("reduce_sum", &arr(&[2, 1000], vec![tenth; 2000]), &[1]);
    let exact = bf16_from_f64(1000.0 * tenth.to_f64()).to_f64();
    check(&s, &[exact, exact]);
    // Products too: step by step, 2^-28 underflows in f16 and 1e60 overflows in f32.
    let p = floats(
        DType::F16,
        &[2f64.powi(-14), 2f64.powi(-14), 2f64.powi(14), 2f64.powi(14)],
    );
    check(&reduce("reduce_prod", &p, &[0]), &[1.0]);
    let (big, small) = (1e30f32 as f64, 1e-30f32 as f64);
    let p = vec1(&[1e30f32, 1e30, 1e-30, 1e-30]);
    check(
        &reduce("reduce_prod", &p, &[0]),
        &[(big * big * small * small) as f32 as f64],
    );
    // A long f64 sum stays close to exact.
    let n = 100_000;
    let xs: Vec<f64> = (0..n).map(|i| 0.1 + i as f64 * 1e-3).collect();
    let exact = 0.1 * n as f64 + 1e-3 * (n as f64 * (n as f64 - 1.0) / 2.0);
    let s = reduce("reduce_sum", &vec1(&xs), &[0])
        .item::<f64>()
        .unwrap();
    assert!((s - exact).abs() <= 1e-12 * exact, "{s} vs {exact}");
}

#[test]
fn integer_and_bool_reductions() {
    let i = vec1(&[i32::MAX, 1, 1]);
    assert_eq!(
        reduce("reduce_sum", &i, &[0]).item::<i32>().unwrap(),
        i32::MIN + 1
    );
    assert_eq!(
        reduce("reduce_prod", &vec1(&[65536i32, 65536, 3]), &[0])
            .item::<i32>()
            .unwrap(),
        0
    );
    assert_eq!(
        reduce("reduce_sum", &vec1(&[200u8, 100]), &[0])
            .item::<u8>()
            .unwrap(),
        44
    );
    assert_eq!(
        reduce("reduce_max", &vec1(&[200u8, 100]), &[0])
            .item::<u8>()
            .unwrap(),
        200
    );
    let b = arr(&[2, 3], vec![false, true, false, true, true, true]);
    assert_eq!(
        reduce("reduce_max", &b, &[1]).to_vec::<bool>().unwrap(),
        vec![true, true]
    );
    assert_eq!(
        reduce("reduce_min", &b, &[1]).to_vec::<bool>().unwrap(),
        vec![false, true]
    );
    assert_eq!(
        reduce("reduce_max", &b, &[0]).to_vec::<bool>().unwrap(),
        vec![true, true, true]
    );
    assert_eq!(
        reduce("reduce_min", &b, &[0, 1]).to_vec::<bool>().unwrap(),
        vec![false]
    );
}

/// The dot_general definition, summed in f64: out[batch, lhs free, rhs free].
fn dot_reference(
    a: &Array,
    b: &Array,
    lb: &[usize],
    rb: &[usize],
    lc: &[usize],
    rc: &[usize],
) -> (Vec<usize>, Vec<f64>) {
    let (ad, bd) = (a.dims(), b.dims());
    let lf: Vec<usize> = (0..ad.len())
        .filter(|i| !lb.contains(i) && !lc.contains(i))
        .collect();
    let rf: Vec<usize> = (0..bd.len())
        .filter(|i| !rb.contains(i) && !rc.contains(i))
        .collect();
    let mut out_dims: Vec<usize> = lb.iter().map(|&i| ad[i]).collect();
    out_dims.extend(lf.iter().map(|&i| ad[i]));
    out_dims.extend(rf.iter().map(|&i| bd[i]));
    let contract_dims: Vec<usize> = lc.iter().map(|&i| ad[i]).collect();
    let unflatten = |mut f: usize, dims: &[usize]| -> Vec<usize> {
        let mut idx = vec![0; dims.len()];
        for k in (0..dims.len()).rev() {
            idx[k] = f % dims[k];
            f /= dims[k];
        }
        idx
    };
    let flat =
        |idx: &[usize], dims: &[usize]| idx.iter().zip(dims).fold(0, |acc, (&i, &d)| acc * d + i);
    let (av, bv) = (a.to_f64_vec(), b.to_f64_vec());
    let n: usize = out_dims.iter().product();
    let mut out = Vec::with_capacity(n);
    for o in 0..n {
        let idx = unflatten(o, &out_dims);
        let (bi, rest) = idx.split_at(lb.len());
        let (li, ri) = rest.split_at(lf.len());
        let mut sum = 0.0;
        for c in 0..contract_dims.iter().product::<usize>() {
            let ci = unflatten(c, &contract_dims);
            let mut ai = vec![0; ad.len()];
            let mut bi2 = vec![0; bd.len()];
            for (k, &x) in bi.iter().enumerate() {
                ai[lb[k]] = x;
                bi2[rb[k]] = x;
            }
            for (k, &x) in ci.iter().enumerate() {
                ai[lc[k]] = x;
                bi2[rc[k]] = x;
            }
            for (k, &x) in li.iter().enumerate() {
                ai[lf[k]] = x;
            }
            for (k, &x) in ri.iter().enumerate() {
                bi2[rf[k]] = x;
            }
            sum += av[flat(&ai, ad)] * bv[flat(&bi2, bd)];
        }
        out.push(sum);
    }
    (out_dims, out)
}

fn small_ints(shape: &[usize], seed: u64) -> Array {
    let mut rng = Rng(seed);
    let n: usize = shape.iter().product();
    arr(
        shape,
        (0..n).map(|_| (rng.next() % 9) as f64 - 4.0).collect(),
    )
}

#[test]
fn dot_general_matches_its_definition() {
    type Case = (&'static [usize], &'static [usize], [&'static [usize]; 4]);
    let cases: [Case; 9] = [
        (&[2, 3], &[3, 4], [&[], &[], &[1], &[0]]),
        (&[2, 2, 3], &[2, 4, 2], [&[1], &[0], &[0], &[2]]),
        (&[3, 2, 4, 5], &[2, 5, 3, 6], [&[1, 0], &[0, 2], &[3], &[1]]),
        (&[2, 3, 4], &[4, 3, 5], [&[], &[], &[1, 2], &[1, 0]]),
        (&[2, 3, 4], &[4, 3, 5], [&[], &[], &[2, 1], &[0, 1]]),
        (&[3], &[2], [&[], &[], &[], &[]]),
        (&[3, 4], &[4], [&[], &[], &[1], &[0]]),
        (&[2, 0], &[0, 3], [&[], &[], &[1], &[0]]),
        (&[4, 3, 2], &[2, 4], [&[0], &[1], &[2], &[0]]),
    ];
    for (i, (ls, rs, [lb, rb, lc, rc])) in cases.into_iter().enumerate() {
        let (a, b) = (small_ints(ls, 11 + i as u64), small_ints(rs, 97 + i as u64));
        let (dims, want) = dot_reference(&a, &b, lb, rb, lc, rc);
        let mut attrs = String::new();
        if !lb.is_empty() {
            attrs.push_str(&format!("batch={}x{}, ", list(lb), list(rb)));
        }
        attrs.push_str(&format!("contract={}x{}", list(lc), list(rc)));
        let got = apply(
            "dot_general",
            &[&a, &b],
            &attrs,
            &format!("f64{}", list(&dims)),
        );
        check(&got, &want);
        // The same in f32 and i32 (exact for these small integers).
        let to = |x: &Array, t: &str| convert(x, t);
        let got = apply(
            "dot_general",
            &[&to(&a, "f32"), &to(&b, "f32")],
            &attrs,
            &format!("f32{}", list(&dims)),
        );
        check(&got, &want);
        let got = apply(
            "dot_general",
            &[&to(&a, "i32"), &to(&b, "i32")],
            &attrs,
            &format!("i32{}", list(&dims)),
        );
        check(&got, &want);
    }
}

#[test]
fn dot_general_accumulates_in_f64_and_wraps_integers() {
    let dot =
        |a: &Array, b: &Array, out: &str| apply("dot_general", &[a, b], "contract=[0]x[0]", out);
    check(
        &dot(
            &vec1(&[1e8f32, 1.0, -1e8]),
            &vec1(&[1.0f32, 1.0, 1.0]),
            "f32[]",
        ),
        &[1.0],
    );
    let h = floats(DType::F16, &[2048.0, 1.0, 1.0]);
    check(
        &dot(&h, &floats(DType::F16, &[1.0, 1.0, 1.0]), "f16[]"),
        &[2050.0],
    );
    let b = floats(DType::BF16, &[256.0, 1.0, 1.0]);
    check(
        &dot(&b, &floats(DType::BF16, &[1.0, 1.0, 1.0]), "bf16[]"),
        &[258.0],
    );
    let i = dot(&vec1(&[65536i32, 1]), &vec1(&[65536i32, 2]), "i32[]");
    assert_eq!(i.item::<i32>().unwrap(), 2);
    let u = dot(&vec1(&[16u8, 3]), &vec1(&[16u8, 5]), "u8[]");
    assert_eq!(u.item::<u8>().unwrap(), 15);
    let l = dot(&vec1(&[1i64 << 62, 3]), &vec1(&[4i64, 5]), "i64[]");
    assert_eq!(l.item::<i64>().unwrap(), 15);
}

#[test]
fn argument_count_and_types_are_checked() {
    let f = parse_func("func @f(%x: f32[2]) -> (f32[2]) {\n  %y = exp %x : f32[2]\n  return %y\n}")
        .unwrap();
    assert_eq!(
        interpret(&f, &[]).unwrap_err(),
        RuntimeError::ArgCount {
            expected: 1,
            got: 0
        }
    );
    let two = [vec1(&[1.0f32, 2.0]), vec1(&[1.0f32, 2.0])];
    assert_eq!(
        interpret(&f, &two).unwrap_err(),
        RuntimeError::ArgCount {
            expected: 1,
            got: 2
        }
    );
    let err = interpret(&f, &[vec1(&[1.0f32, 2.0, 3.0])]).unwrap_err();
    assert_eq!(err.to_string(), "argument 0 should be f32[2], got f32[3]");
    let err = interpret(&f, &[vec1(&[1.0f64, 2.0])]).unwrap_err();
    assert_eq!(
        err,
        RuntimeError::ArgType {
            index: 0,
            expected: TensorType::new(DType::F32, [2]),
            got: TensorType::new(DType::F64, [2]),
        }
    );
}

#[test]
fn ill_typed_programs_are_rejected() {
    // A stored type that the shape rules contradict fails verification.
    let bad = Func {
        name: "bad".into(),
        params: vec![TensorType::new(DType::F32, [2])],
        body: vec![Instr {
            op: Op::Unary(UnaryOp::Exp),
            args: vec![ValueId(0)],
            ty: TensorType::new(DType::F32, [3]),
        }],
        outputs: vec![ValueId(1)],
    };
    let err = interpret(&bad, &[vec1(&[1.0f32, 2.0])]).unwrap_err();
    assert!(matches!(err, RuntimeError::Verify(_)), "{err}");
    // eval_op checks operand types with the shape rules.
    let (x, y) = (vec1(&[1.0f32]), vec1(&[1.0f64]));
    let err = eval_op(&Op::Binary(BinaryOp::Add), &[&x, &y]).unwrap_err();
    assert!(
        matches!(err, RuntimeError::Type(TypeError::Mismatch { .. })),
        "{err}"
    );
    let err = eval_op(&Op::Unary(UnaryOp::Exp), &[&vec1(&[1i32])]).unwrap_err();
    assert!(
        matches!(err, RuntimeError::Type(TypeError::DType { .. })),
        "{err}"
    );
    let err = eval_op(&Op::Unary(UnaryOp::Exp), &[]).unwrap_err();
    assert!(
        matches!(err, RuntimeError::Type(TypeError::Arity { .. })),
        "{err}"
    );
}

#[test]
fn values_live_until_their_last_use() {
    // %x is used first and last; %u is never used; %p is an output and also used.
    let src = "func @f(%x: f32[3], %p: i32[2]) -> (f32[3], i32[2], f32[3], f32[3], i32[2]) {
  %a = exp %x : f32[3]
  %u = neg %a : f32[3]
  %b = add %a, %a : f32[3]
  %c = mul %b, %x : f32[3]
  %q = neg %p : i32[2]
  return %c, %p, %c, %b, %q
}";
    let x = vec1(&[0.0f32, 1.0, 2.0]);
    let p = vec1(&[4i32, -5]);
    let out = run(src, &[x.clone(), p.clone()]);
    let xs = x.to_vec::<f32>().unwrap();
    let b: Vec<f64> = xs
        .iter()
        .map(|&v| (2.0 * ((v as f64).exp() as f32)) as f64)
        .collect();
    let c: Vec<f64> = xs
        .iter()
        .zip(&b)
        .map(|(&v, &w)| (w as f32 * v) as f64)
        .collect();
    check(&out[0], &c);
    assert_eq!(out[1], p);
    assert_eq!(out[2], out[0]);
    check(&out[3], &b);
    assert_eq!(out[4].to_vec::<i32>().unwrap(), vec![-4, 5]);
    // A program with no instructions returns its parameters.
    let id = run(
        "func @g(%x: f32[3]) -> (f32[3], f32[3]) {\n  return %x, %x\n}",
        std::slice::from_ref(&x),
    );
    assert_eq!(id, vec![x.clone(), x]);
}

#[test]
fn built_programs_run_and_match_eager_evaluation() {
    // softmax over the last axis of a [4, 8] f32 array, via FuncBuilder.
    let ty = TensorType::new(DType::F32, [4, 8]);
    let mut fb = FuncBuilder::new("softmax");
    let x = fb.param(ty.clone());
    let m = fb
        .push(
            Op::Reduce {
                op: ReduceOp::Max,
                axes: vec![1],
            },
            &[x],
        )
        .unwrap();
    let mb = fb
        .push(
            Op::BroadcastInDim {
                shape: ty.shape.clone(),
                dims: vec![0],
            },
            &[m],
        )
        .unwrap();
    let d = fb.push(Op::Binary(BinaryOp::Sub), &[x, mb]).unwrap();
    let e = fb.push(Op::Unary(UnaryOp::Exp), &[d]).unwrap();
    let s = fb
        .push(
            Op::Reduce {
                op: ReduceOp::Sum,
                axes: vec![1],
            },
            &[e],
        )
        .unwrap();
    let sb = fb
        .push(
            Op::BroadcastInDim {
                shape: ty.shape.clone(),
                dims: vec![0],
            },
            &[s],
        )
        .unwrap();
    let y = fb.push(Op::Binary(BinaryOp::Div), &[e, sb]).unwrap();
    let f = fb.finish(vec![y]);
    let input = arr(
        &[4, 8],
        (0..32).map(|i| ((i * 5) % 13) as f32 - 6.0).collect(),
    );
    let got = interpret(&f, std::slice::from_ref(&input))
        .unwrap()
        .remove(0);
    // Eagerly, op by op, gives the same bits.
    let mut vals = vec![input.clone()];
    for ins in &f.body {
        let args: Vec<&Array> = ins.args.iter().map(|a| &vals[a.index()]).collect();
        let v = eval_op(&ins.op, &args).unwrap();
        vals.push(v);
    }
    assert_eq!(vals.last().unwrap(), &got);
    let rows: Vec<f32> = got.to_vec().unwrap();
    for r in rows.chunks(8) {
        let total: f32 = r.iter().sum();
        assert!((total - 1.0).abs() < 1e-6, "{r:?}");
    }
}

#[test]
fn benchmark_sized_inputs_are_handled() {
    // A 256^3 matmul and a [512, 1024] softmax: smoke tests for the typed loops.
    let n = 256;
    let a = arr(&[n, n], vec![1.0f32; n * n]);
    let out = apply("dot_general", &[&a, &a], "contract=[1]x[0]", "f32[256,256]");
    assert!(out.to_vec::<f32>().unwrap().iter().all(|&v| v == n as f32));
    let src = "func @softmax(%x: f32[512,1024]) -> (f32[512,1024]) {
  %m = reduce_max %x, axes=[1] : f32[512]
  %mb = broadcast_in_dim %m, dims=[0] : f32[512,1024]
  %d = sub %x, %mb : f32[512,1024]
  %e = exp %d : f32[512,1024]
  %s = reduce_sum %e, axes=[1] : f32[512]
  %sb = broadcast_in_dim %s, dims=[0] : f32[512,1024]
  %y = div %e, %sb : f32[512,1024]
  return %y
}";
    let x = arr(
        &[512, 1024],
        (0..512 * 1024).map(|i| (i % 1024) as f32 * 1e-3).collect(),
    );
    let y = run(src, &[x]).remove(0).to_vec::<f32>().unwrap();
    let m = 1023f32 * 1e-3;
    let denom: f64 = (0..1024)
        .map(|j| (j as f32 * 1e-3 - m) as f64)
        .map(f64::exp)
        .sum();
    let want = ((0.0 - m) as f64).exp() / denom;
    assert!((y[0] as f64 - want).abs() < 1e-9, "{} vs {want}", y[0]);
}

//! ULP accuracy of the transcendental expansions (`kernel::math`), compiled to machine code with
//! the Cranelift backend and run over dense samples of each function's domain. The reference is
//! the f64 function rounded to f32 (its own error, under 1 f64 ULP, is far below an f32 ULP).
//! f32 bound: 3 ULP, as the GPU backend promises. f64 is checked against the f64 library at
//! 4 ULP (the library itself is within 1).
#![allow(clippy::unwrap_used)]

use ferrax_compiler::backend::cpu::clif;
use ferrax_compiler::kernel::{math, Access, Buffer, KInstr, KOp, Kernel, KernelSig, Role};
use ferrax_ir::{ulp_distance, BinaryOp, DType, Scalar, UnaryOp, ValueId};

fn buffer(role: Role, dtype: DType) -> Buffer {
    Buffer {
        role,
        dtype,
        access: Access::Each,
        value: ValueId(0),
    }
}

/// A kernel `out = op(in0[, in1])`.
fn kernel(op: KOp, dtype: DType, arity: usize, len: usize) -> Kernel {
    let mut buffers: Vec<Buffer> = (0..arity).map(|_| buffer(Role::Input, dtype)).collect();
    buffers.push(buffer(Role::Output, dtype));
    let mut body: Vec<KInstr> = (0..arity)
        .map(|i| KInstr {
            op: KOp::Load(i),
            args: vec![],
            dtype,
        })
        .collect();
    body.push(KInstr {
        op,
        args: (0..arity).collect(),
        dtype,
    });
    body.push(KInstr {
        op: KOp::Store(arity),
        args: vec![arity],
        dtype,
    });
    Kernel {
        name: "ulp".into(),
        len,
        sig: KernelSig { buffers },
        body,
        rows: None,
    }
}

/// Runs the expansion of `op` (as every backend computes it) on f32 inputs.
fn run_f32(op: KOp, inputs: &[&[f32]]) -> Vec<f32> {
    let k = math::expand(&kernel(op, DType::F32, inputs.len(), inputs[0].len()));
    run_f32_kernel(&k, inputs)
}

/// Runs `op` on f32 inputs as the CPU backend compiles it (which may add host calls).
fn run_f32_cpu(op: KOp, inputs: &[&[f32]]) -> Vec<f32> {
    run_f32_kernel(
        &kernel(op, DType::F32, inputs.len(), inputs[0].len()),
        inputs,
    )
}

fn run_f32_kernel(k: &Kernel, inputs: &[&[f32]]) -> Vec<f32> {
    let len = inputs[0].len();
    let code = clif::compile(std::slice::from_ref(k)).unwrap();
    let mut out = vec![0f32; len];
    let mut ptrs: Vec<*mut u8> = inputs
        .iter()
        .map(|v| v.as_ptr().cast::<u8>().cast_mut())
        .collect();
    ptrs.push(out.as_mut_ptr().cast());
    let entry = code.code.entry(0).expect("one kernel");
    // SAFETY: every buffer holds `len` f32 elements.
    unsafe { entry(ptrs.as_ptr(), 0, len as i64) };
    out
}

fn run_f64(op: KOp, inputs: &[&[f64]]) -> Vec<f64> {
    let len = inputs[0].len();
    let k = math::expand(&kernel(op, DType::F64, inputs.len(), len));
    let code = clif::compile(std::slice::from_ref(&k)).unwrap();
    let mut out = vec![0f64; len];
    let mut ptrs: Vec<*mut u8> = inputs
        .iter()
        .map(|v| v.as_ptr().cast::<u8>().cast_mut())
        .collect();
    ptrs.push(out.as_mut_ptr().cast());
    let entry = code.code.entry(0).expect("one kernel");
    // SAFETY: every buffer holds `len` f64 elements.
    unsafe { entry(ptrs.as_ptr(), 0, len as i64) };
    out
}

fn ulps32(a: f32, b: f32) -> u64 {
    ulp_distance(Scalar::F32(a), Scalar::F32(b))
}

fn ulps64(a: f64, b: f64) -> u64 {
    ulp_distance(Scalar::F64(a), Scalar::F64(b))
}

/// Every `step`-th f32 bit pattern in `[lo, hi]` (both signs when `lo < 0`), plus specials.
fn samples32(lo: f32, hi: f32, count: u32) -> Vec<f32> {
    let specials = [
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        f32::MIN_POSITIVE,
        1e-45,
        1.0,
        -1.0,
        f32::MAX,
        f32::MIN,
    ];
    let mut v: Vec<f32> = specials.to_vec();
    let step = (u32::MAX / count).max(1);
    let mut bits = 0u32;
    while let Some(next) = bits.checked_add(step) {
        let x = f32::from_bits(bits);
        if x >= lo && x <= hi {
            v.push(x);
        }
        bits = next;
    }
    v
}

fn samples64(lo: f64, hi: f64, count: u64) -> Vec<f64> {
    let mut v = vec![
        0.0,
        -0.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        1.0,
        -1.0,
    ];
    let step = u64::MAX / count;
    let mut bits = 0u64;
    while let Some(next) = bits.checked_add(step) {
        let x = f64::from_bits(bits);
        if x >= lo && x <= hi {
            v.push(x);
        }
        bits = next;
    }
    v
}

fn logistic(x: f64) -> f64 {
    if x >= 0.0 {
        1.0 / (1.0 + (-x).exp())
    } else {
        x.exp() / (1.0 + x.exp())
    }
}

/// The largest f32 ULP error of `op` against `reference` on `xs`, with the worst input, of the
/// plain expansion and of the CPU backend's (which reduces sin and cos in f32).
fn worst32(op: UnaryOp, xs: &[f32], reference: fn(f64) -> f64) -> (u64, f32) {
    let plain = run_f32(KOp::Unary(op), &[xs]);
    let cpu = run_f32_cpu(KOp::Unary(op), &[xs]);
    xs.iter()
        .zip(plain.iter().zip(&cpu))
        .flat_map(|(&x, (&y, &z))| {
            let want = reference(f64::from(x)) as f32;
            [(ulps32(y, want), x), (ulps32(z, want), x)]
        })
        .max_by_key(|&(u, _)| u)
        .unwrap()
}

fn worst64(op: UnaryOp, xs: &[f64], reference: fn(f64) -> f64) -> (u64, f64) {
    let got = run_f64(KOp::Unary(op), &[xs]);
    xs.iter()
        .zip(&got)
        .map(|(&x, &y)| (ulps64(y, reference(x)), x))
        .max_by_key(|&(u, _)| u)
        .unwrap()
}

/// Exact to f64 rounding: the f32 result is 1 ULP from it at worst (two correctly rounded
/// steps, sqrt's error halved by the reciprocal).
fn rsqrt(x: f64) -> f64 {
    1.0 / x.sqrt()
}

/// An f64 reference function.
type Reference = fn(f64) -> f64;

const UNARY: [(UnaryOp, Reference); 9] = [
    (UnaryOp::Exp, f64::exp),
    (UnaryOp::Expm1, f64::exp_m1),
    (UnaryOp::Log, f64::ln),
    (UnaryOp::Log1p, f64::ln_1p),
    (UnaryOp::Tanh, f64::tanh),
    (UnaryOp::Logistic, logistic),
    (UnaryOp::Sin, f64::sin),
    (UnaryOp::Cos, f64::cos),
    (UnaryOp::Rsqrt, rsqrt),
];

#[test]
fn f32_transcendentals_within_3_ulp_over_the_whole_domain() {
    // About 2^21 bit patterns spread over every exponent, both signs.
    let xs = samples32(f32::MIN, f32::MAX, 1 << 21);
    for (op, reference) in UNARY {
        let (ulps, x) = worst32(op, &xs, reference);
        eprintln!("f32 {}: worst {ulps} ULP at {x:e}", op.name());
        assert!(ulps <= 3, "{}: {ulps} ULP at x = {x:e}", op.name());
    }
}

/// Exact answers at the special points, in the vector loop and in the scalar tail alike, of the
/// plain expansion and the CPU backend's: zeros keep their sign through the odd functions (sin,
/// tanh, expm1), tiny arguments round to themselves (or one, for cos), and infinities and NaN
/// give the limits (sin, cos: NaN).
#[test]
fn f32_special_values() {
    let xs = [
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        1e-45,
        -1e-45,
        f32::MIN_POSITIVE,
        -0.0,
        f32::NAN,
    ];
    for (op, reference) in [
        (UnaryOp::Sin, f64::sin as Reference),
        (UnaryOp::Cos, f64::cos),
        (UnaryOp::Tanh, f64::tanh),
        (UnaryOp::Expm1, f64::exp_m1),
    ] {
        let plain = run_f32(KOp::Unary(op), &[&xs]);
        let cpu = run_f32_cpu(KOp::Unary(op), &[&xs]);
        for (&x, &y) in xs.iter().cycle().zip(plain.iter().chain(&cpu)) {
            let want = reference(f64::from(x)) as f32;
            assert!(
                y.to_bits() == want.to_bits() || (y.is_nan() && want.is_nan()),
                "{}({x:e}) = {y:e}, want {want:e}",
                op.name()
            );
        }
    }
}

/// Beyond the expansion's exact range the CPU backend computes f32 sin and cos on the host,
/// correctly rounded, up to f32::MAX; an element's result depends on its own argument only,
/// not on whether another lane of its vector took the host path.
#[test]
fn f32_sin_cos_of_huge_arguments_on_the_cpu() {
    let xs = samples32(f32::MIN, f32::MAX, 1 << 18);
    assert!(xs.iter().any(|x| x.abs() > 1e30));
    for (op, reference) in [
        (UnaryOp::Sin, f64::sin as Reference),
        (UnaryOp::Cos, f64::cos),
    ] {
        let got = run_f32_cpu(KOp::Unary(op), &[&xs]);
        let (ulps, x) = xs
            .iter()
            .zip(&got)
            .map(|(&x, &y)| (ulps32(y, reference(f64::from(x)) as f32), x))
            .max_by_key(|&(u, _)| u)
            .unwrap();
        assert!(ulps <= 3, "{}: {ulps} ULP at x = {x:e}", op.name());
        let small: Vec<f32> = (0..66).map(|i| i as f32 * 0.37 - 11.0).collect();
        let mut mixed = small.clone();
        for x in mixed.iter_mut().step_by(4) {
            *x = 3e37;
        }
        let alone = run_f32_cpu(KOp::Unary(op), &[&small]);
        let beside_huge = run_f32_cpu(KOp::Unary(op), &[&mixed]);
        for i in (0..small.len()).filter(|i| i % 4 != 0) {
            assert_eq!(
                alone[i].to_bits(),
                beside_huge[i].to_bits(),
                "{}({}) depends on its neighbours",
                op.name(),
                small[i]
            );
        }
    }
}

/// Only sin and cos whose argument may be large get the test: in `sin(sin(x)·1.01 + 0.1)` the
/// outer argument is bounded by its operands, and below 1.5 its reduction takes two parts of
/// π/2 instead of three.
#[test]
fn bounded_arguments_skip_the_huge_argument_test() {
    let mut k = kernel(KOp::Unary(UnaryOp::Sin), DType::F32, 1, 8);
    let store = k.body.pop().unwrap();
    let f32_op = |op: KOp, args: Vec<usize>| KInstr {
        op,
        args,
        dtype: DType::F32,
    };
    k.body.push(f32_op(KOp::Const(Scalar::F32(1.01)), vec![]));
    k.body.push(f32_op(KOp::Binary(BinaryOp::Mul), vec![1, 2]));
    k.body.push(f32_op(KOp::Const(Scalar::F32(0.1)), vec![]));
    k.body.push(f32_op(KOp::Binary(BinaryOp::Add), vec![3, 4]));
    k.body.push(f32_op(KOp::Unary(UnaryOp::Sin), vec![5]));
    k.body.push(KInstr {
        args: vec![6],
        ..store
    });
    let host = math::expand_guarded(&k);
    let tests = host
        .body
        .iter()
        .filter(|ins| matches!(ins.op, KOp::Beyond(_)))
        .count();
    assert_eq!(tests, 1);
    // The outer sine (its argument below 1.5: a two-part reduction) is checked on its own,
    // against the inner sine as computed, densely over its argument's range.
    let mut xs: Vec<f32> = vec![0.5, -2.0, 3e37, f32::NAN, 1e20, -0.0, 7.0, 1e-3];
    xs.extend((0..1 << 17).map(|i| -4.0 + i as f32 / 16384.0));
    let got = run_f32_kernel(&k, &[&xs]);
    let inner = run_f32_cpu(KOp::Unary(UnaryOp::Sin), &[&xs]);
    for ((&x, &s), &y) in xs.iter().zip(&inner).zip(&got) {
        let arg = s * 1.01 + 0.1;
        let want = f64::from(arg).sin() as f32;
        assert!(
            ulps32(y, want) <= 3 || (y.is_nan() && want.is_nan()),
            "sin({arg}) = {y}, want {want} (x = {x})"
        );
    }
}

/// f32 sin of an argument known to be within [`math::SIN_DIRECT_F32_LIMIT`] (here by a clamp) is
/// its series without reduction: no quadrant to flip the sign by. Checked over every 64th f32 of that range
/// (both signs), all of [1.4, 1.5] where its error peaks, and the special values (an exhaustive
/// run over every f32 in [2^-10, 1.5] found at most 2 ULP).
#[test]
fn f32_sin_of_bounded_arguments_is_the_series_alone() {
    let limit = math::SIN_DIRECT_F32_LIMIT as f32;
    let mut k = kernel(KOp::Clamp, DType::F32, 1, 1);
    let store = k.body.pop().unwrap();
    k.body.pop();
    let f32_op = |op: KOp, args: Vec<usize>| KInstr {
        op,
        args,
        dtype: DType::F32,
    };
    k.body.push(f32_op(KOp::Const(Scalar::F32(-limit)), vec![]));
    k.body.push(f32_op(KOp::Const(Scalar::F32(limit)), vec![]));
    k.body.push(f32_op(KOp::Clamp, vec![1, 0, 2]));
    k.body.push(f32_op(KOp::Unary(UnaryOp::Sin), vec![3]));
    k.body.push(KInstr {
        args: vec![4],
        ..store
    });
    let expanded = math::expand(&k);
    assert!(
        !expanded
            .body
            .iter()
            .any(|ins| matches!(ins.op, KOp::ShiftLeft(_))),
        "{:?}",
        expanded.body
    );
    let mut xs: Vec<f32> = (0..limit.to_bits())
        .step_by(64)
        .map(f32::from_bits)
        .flat_map(|x| [x, -x])
        .collect();
    xs.extend((1.4f32.to_bits()..=limit.to_bits()).map(f32::from_bits));
    xs.extend([f32::NAN, -0.0, 1e-45, -1e-45, 2.0, -7.0, f32::INFINITY]);
    k.len = xs.len();
    let got = run_f32_kernel(&k, &[&xs]);
    for (&x, &y) in xs.iter().zip(&got) {
        let want = f64::from(x.clamp(-limit, limit)).sin() as f32;
        assert!(
            ulps32(y, want) <= 2 || (y.is_nan() && want.is_nan()),
            "sin({x}) = {y}, want {want}"
        );
        assert_eq!(y.is_sign_negative(), want.is_sign_negative(), "sin({x})");
    }
}

/// Dense samples up to the limit of the f32 reduction (an exhaustive run over every f32 below
/// it found at most 2 ULP, at 166.25372 and 1.3185298), and either side of the limit, where the
/// CPU backend hands the argument to the host.
#[test]
fn f32_sin_cos_dense_up_to_the_f32_reduction_limit() {
    let limit = math::SIN_COS_F32_LIMIT;
    let mut xs: Vec<f32> = (0..1_000_000)
        .map(|i| -limit + 2.0 * limit * (i as f32) / 1e6)
        .collect();
    let below = f32::from_bits(limit.to_bits() - 1);
    xs.extend([
        166.253_72,
        1.318_529_8,
        below,
        limit,
        -below,
        -limit,
        1e5,
        -1e5,
    ]);
    for (op, reference) in [
        (UnaryOp::Sin, f64::sin as Reference),
        (UnaryOp::Cos, f64::cos),
    ] {
        let (ulps, x) = worst32(op, &xs, reference);
        assert!(ulps <= 3, "{}: {ulps} ULP at x = {x:e}", op.name());
    }
}

#[test]
fn f32_dense_near_zero_and_one() {
    // Where cancellation would show: tiny arguments and arguments near 1.
    let mut xs: Vec<f32> = (-200_000..200_000).map(|i| i as f32 * 1e-5).collect();
    xs.extend((0..200_000).map(|i| 0.5 + i as f32 * 5e-6));
    for (op, reference) in UNARY {
        let (ulps, x) = worst32(op, &xs, reference);
        assert!(ulps <= 3, "{}: {ulps} ULP at x = {x:e}", op.name());
    }
}

#[test]
fn f64_transcendentals_match_the_library() {
    let xs = samples64(-1e300, 1e300, 1 << 20);
    for (op, reference) in UNARY {
        let xs: Vec<f64> = match op {
            UnaryOp::Sin | UnaryOp::Cos => xs.iter().copied().filter(|x| x.abs() < 1e5).collect(),
            _ => xs.clone(),
        };
        let (ulps, x) = worst64(op, &xs, reference);
        eprintln!("f64 {}: worst {ulps} ULP at {x:e}", op.name());
        assert!(ulps <= 4, "{}: {ulps} ULP at x = {x:e}", op.name());
    }
}

/// f64 sin and cos from 2^51 to f64's largest reduce exactly (`math::SIN_COS_F64_LIMIT`):
/// within 2 ULP of the library over a million samples of every exponent; infinities and NaN
/// give NaN. And at the f64 nearest a multiple of π/2, 6381956970095103·2^797 (within 2^-61
/// of one, where a reduction short of 2/π's bits to the last loses every digit) and three
/// more such, within an ULP of the value from a 4,000-bit π (this machine's library is 8 ULP
/// off at the first and 10^5 at the second).
#[test]
fn f64_sin_and_cos_of_huge_arguments_reduce_exactly() {
    let nearest = 6_381_956_970_095_103.0 * 2f64.powi(797);
    // (x, sin x, cos x), from x·2/π mod 4 with a 4,000-bit π. The last three are within
    // 2^-56 of a multiple of π/2 from below (found by continued fractions), where the
    // fraction is taken as `fraction - 1`.
    let exact = [
        (nearest, 1.0, -4.687_165_924_254_628e-19),
        (
            6_448_461_629_705_574.0 * 2f64.powi(742),
            -1.0,
            -8.572_027_245_893_888e-18,
        ),
        (
            4_645_009_646_166_263.0 * 2f64.powi(224),
            -1.0,
            -1.250_558_560_219_130_1e-17,
        ),
        (
            8_360_820_580_228_475.0 * 2f64.powi(630),
            -1.302_656_966_622_526_8e-17,
            1.0,
        ),
    ];
    let mut xs = samples64(-f64::MAX, f64::MAX, 1 << 20);
    xs.retain(|x| x.abs() >= math::SIN_COS_F64_LIMIT || !x.is_finite());
    xs.extend([math::SIN_COS_F64_LIMIT, f64::MAX, 1e22, 1.0e300]);
    assert!(xs.len() > 400_000, "{} samples", xs.len());
    for (op, reference) in [
        (UnaryOp::Sin, f64::sin as Reference),
        (UnaryOp::Cos, f64::cos),
    ] {
        let got = run_f64(KOp::Unary(op), &[&xs]);
        let mut worst = 0;
        for (&x, &y) in xs.iter().zip(&got) {
            let want = reference(x);
            if want.is_nan() {
                assert!(y.is_nan(), "{}({x:e}) = {y:e}, want NaN", op.name());
                continue;
            }
            let ulps = ulps64(y, want);
            assert!(ulps <= 2, "{}({x:e}) = {y:e}, want {want:e}", op.name());
            worst = worst.max(ulps);
        }
        eprintln!("f64 {} of huge arguments: worst {worst} ULP", op.name());
    }
    for (x, sin, cos) in exact {
        let at = [x, -x];
        let (s, c) = (
            run_f64(KOp::Unary(UnaryOp::Sin), &[&at]),
            run_f64(KOp::Unary(UnaryOp::Cos), &[&at]),
        );
        assert!(
            ulps64(s[0], sin) <= 1 && ulps64(s[1], -sin) <= 1,
            "sin({x:e}): {s:?}"
        );
        assert!(
            ulps64(c[0], cos) <= 1 && ulps64(c[1], cos) <= 1,
            "cos({x:e}): {c:?}"
        );
    }
}

/// The f32 remainder the GPU computes (`math::expand_arithmetic`) is `fmod` exactly, bit for
/// bit: pairs of every exponent (quotients up to 2^277), both signs, subnormals, zeros,
/// infinities and NaN.
#[test]
fn f32_remainder_expansion_is_exact() {
    let values = samples32(f32::MIN, f32::MAX, 1 << 11);
    let (mut xs, mut ys) = (Vec::new(), Vec::new());
    for &x in &values {
        for &y in &values {
            xs.push(x);
            ys.push(y);
        }
    }
    // Near multiples: the quotient digit's estimate one off either way.
    for n in 1..2000 {
        let y = 0.1f32 + n as f32 * 1e-3;
        for x in [
            y * n as f32,
            (y * n as f32).next_up(),
            (y * n as f32).next_down(),
        ] {
            xs.push(x);
            ys.push(y);
        }
    }
    let kernel = kernel(KOp::Binary(BinaryOp::Rem), DType::F32, 2, xs.len());
    let got = run_f32_kernel(&math::expand_arithmetic(&kernel), &[&xs, &ys]);
    for ((&x, &y), &r) in xs.iter().zip(&ys).zip(&got) {
        let want = x % y;
        assert!(
            r.to_bits() == want.to_bits() || (r.is_nan() && want.is_nan()),
            "{x:e} % {y:e} = {r:e}, want {want:e}"
        );
    }
}

#[test]
fn f32_pow_within_3_ulp_including_special_cases() {
    let bases = samples32(f32::MIN, f32::MAX, 1 << 12);
    let mut exps = samples32(-300.0, 300.0, 1 << 9);
    exps.extend([0.5, 2.0, 3.0, -3.0, 1.0, 0.0, -0.0, 1e-3, 127.0]);
    let (mut xs, mut ys) = (Vec::new(), Vec::new());
    for &x in &bases {
        for &y in &exps {
            xs.push(x);
            ys.push(y);
        }
    }
    let got = run_f32(KOp::Binary(BinaryOp::Pow), &[&xs, &ys]);
    for ((&x, &y), &z) in xs.iter().zip(&ys).zip(&got) {
        let want = f64::from(x).powf(f64::from(y)) as f32;
        assert!(
            ulps32(z, want) <= 3,
            "pow({x:e}, {y:e}) = {z:e}, want {want:e}"
        );
    }
}

#[test]
fn f64_pow_special_cases_follow_ieee() {
    let vals = [
        0.0,
        -0.0,
        1.0,
        -1.0,
        2.0,
        -2.0,
        0.5,
        3.0,
        -3.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
    ];
    let (mut xs, mut ys) = (Vec::new(), Vec::new());
    for &x in &vals {
        for &y in &vals {
            xs.push(x);
            ys.push(y);
        }
    }
    let got = run_f64(KOp::Binary(BinaryOp::Pow), &[&xs, &ys]);
    for ((&x, &y), &z) in xs.iter().zip(&ys).zip(&got) {
        let want = x.powf(y);
        // f64 pow is exp(y·log x) in f64: a few ULP off where the result is finite.
        assert!(ulps64(z, want) <= 4, "pow({x}, {y}) = {z}, want {want}");
        if want == 0.0 || want.is_infinite() {
            assert_eq!(z.to_bits(), want.to_bits(), "sign of pow({x}, {y})");
        }
    }
}

/// The kernels above ran as SIMD (with a scalar tail): a silent fallback to scalar code would
/// leave the vector path untested.
#[test]
fn f32_kernels_compile_to_simd() {
    for op in [UnaryOp::Tanh, UnaryOp::Exp, UnaryOp::Sin, UnaryOp::Cos] {
        let k = kernel(KOp::Unary(op), DType::F32, 1, 1024);
        assert!(clif::vectorizable(&k), "{op:?}");
        let code = clif::compile(std::slice::from_ref(&k)).unwrap();
        assert!(code.clif[0].contains("f32x4"), "{}", code.clif[0]);
        // sin and cos reduce their argument in f32, four lanes at a time, not as f64x2 halves.
        assert!(!code.clif[0].contains("fvpromote_low"), "{}", code.clif[0]);
    }
    // pow computes in f64, as two halves of two lanes.
    let k = kernel(KOp::Binary(BinaryOp::Pow), DType::F32, 2, 1024);
    assert!(clif::vectorizable(&math::expand_guarded(&k)));
    let code = clif::compile(std::slice::from_ref(&k)).unwrap();
    assert!(code.clif[0].contains("fvpromote_low"), "{}", code.clif[0]);
}

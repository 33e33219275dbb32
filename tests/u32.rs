//! The u32 dtype, the shifts and `bitcast_convert` (what JAX's threefry PRNG is built from):
//! the interpreter's values at the edges (wraparound, unsigned order and division, shift
//! amounts either side of the width, bit patterns kept by bit casts), the text format, the
//! errors for ill-typed uses, StableHLO import, the `Tensor` operators, and compiled CPU
//! kernels (SIMD and scalar) and PTX kernels (in the emulator) against the interpreter bit for
//! bit.
#![allow(clippy::unwrap_used, clippy::panic)]

use ferrax::compiler::backend::gpu::{GpuOptions, GpuProgram};
use ferrax::compiler::backend::CpuExecutable;
use ferrax::ir::{parse_func, Elements};
use ferrax::runtime::interpret;
use ferrax::{Array, DType, Func, Tensor};
use ferrax_ptx_emu::Emulator;

/// `func` on the emulated GPU, all of it in kernels, equals the interpreter bit for bit.
fn emulated(func: &Func, inputs: &[Array]) {
    let exe = GpuProgram::compile(func, &Emulator::default(), GpuOptions::HIGHEST).unwrap();
    assert_eq!(exe.host_steps(), 0, "{func}");
    let got = exe.run(inputs).unwrap();
    let want = interpret(func, inputs).unwrap();
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g.elements(), w.elements(), "{func}");
    }
}

fn u32s(v: &[u32]) -> Array {
    Array::new([v.len()], Elements::U32(v.to_vec())).unwrap()
}

/// `text`'s one result on `inputs`, by the interpreter and by the CPU backend, which agree.
fn run(text: &str, inputs: &[Array]) -> Array {
    let func = parse_func(text).unwrap();
    let want = interpret(&func, inputs).unwrap();
    let exe = CpuExecutable::compile(&func).unwrap();
    let got = exe.run(inputs).unwrap();
    assert_eq!(
        got[0].elements(),
        want[0].elements(),
        "CPU vs interpreter:\n{text}"
    );
    assert_eq!(
        print_round_trip(text),
        parse_func(text).unwrap().to_string()
    );
    want[0].clone()
}

fn print_round_trip(text: &str) -> String {
    let printed = parse_func(text).unwrap().to_string();
    parse_func(&printed).unwrap().to_string()
}

fn words(a: &Array) -> Vec<u32> {
    a.as_slice::<u32>().unwrap().to_vec()
}

fn binary(op: &str, x: &[u32], y: &[u32]) -> Vec<u32> {
    let n = x.len();
    let text = format!(
        "func @f(%0: u32[{n}], %1: u32[{n}]) -> (u32[{n}]) {{\n  %2 = {op} %0, %1 : u32[{n}]\n  return %2\n}}\n"
    );
    words(&run(&text, &[u32s(x), u32s(y)]))
}

const AMOUNTS: [u32; 9] = [0, 1, 31, 32, 33, 100, u32::MAX, 0x8000_0000, 7];

#[test]
fn arithmetic_wraps_and_division_is_unsigned() {
    let x = [u32::MAX, 0, 7, 0x8000_0000, 10, 3, 5, 1, 9];
    let y = [1, 1, 0, 2, 3, u32::MAX, 0, 2, 4];
    let zip = |f: fn(u32, u32) -> u32| x.iter().zip(&y).map(|(&a, &b)| f(a, b)).collect::<Vec<_>>();
    assert_eq!(binary("add", &x, &y), zip(u32::wrapping_add));
    assert_eq!(binary("sub", &x, &y), zip(u32::wrapping_sub));
    assert_eq!(binary("mul", &x, &y), zip(u32::wrapping_mul));
    // x / 0 is all ones and x % 0 is x, as XLA computes them.
    assert_eq!(
        binary("div", &x, &y),
        zip(|a, b| a.checked_div(b).unwrap_or(u32::MAX))
    );
    assert_eq!(
        binary("rem", &x, &y),
        zip(|a, b| a.checked_rem(b).unwrap_or(a))
    );
    assert_eq!(binary("max", &x, &y), zip(u32::max));
    assert_eq!(binary("min", &x, &y), zip(u32::min));
    assert_eq!(binary("xor", &x, &y), zip(|a, b| a ^ b));
}

#[test]
fn shifts_follow_lax_for_every_amount() {
    let x = [0x8000_0001u32; 9];
    let y = AMOUNTS;
    let want_left: Vec<u32> = y
        .iter()
        .map(|&n| if n < 32 { x[0] << n } else { 0 })
        .collect();
    let want_logical: Vec<u32> = y
        .iter()
        .map(|&n| if n < 32 { x[0] >> n } else { 0 })
        .collect();
    let want_arith: Vec<u32> = y
        .iter()
        .map(|&n| ((x[0] as i32) >> n.min(31)) as u32)
        .collect();
    assert_eq!(binary("shift_left", &x, &y), want_left);
    assert_eq!(binary("shift_right_logical", &x, &y), want_logical);
    assert_eq!(binary("shift_right_arithmetic", &x, &y), want_arith);
    for op in [
        "shift_left",
        "shift_right_logical",
        "shift_right_arithmetic",
        "max",
        "xor",
    ] {
        let text = format!(
            "func @f(%0: u32[9], %1: u32[9]) -> (u32[9]) {{\n  %2 = {op} %0, %1 : u32[9]\n  return %2\n}}\n"
        );
        emulated(&parse_func(&text).unwrap(), &[u32s(&x), u32s(&y)]);
    }
    // i32 amounts are read as unsigned: -1 is huge.
    let text = "func @f(%0: i32[4], %1: i32[4]) -> (i32[4]) {\n  %2 = shift_right_arithmetic %0, %1 : i32[4]\n  return %2\n}\n";
    let i32s = |v: Vec<i32>| Array::new([4], Elements::I32(v)).unwrap();
    let r = run(
        text,
        &[i32s(vec![-8, -8, 8, -8]), i32s(vec![1, -1, 40, 31])],
    );
    assert_eq!(r.as_slice::<i32>().unwrap(), &[-4, -1, 0, -1]);
}

#[test]
fn constant_shifts_compile_to_lax_results() {
    for n in [0u32, 1, 9, 31, 32, 33, 1000] {
        for op in [
            "shift_left",
            "shift_right_logical",
            "shift_right_arithmetic",
        ] {
            let text = format!(
                "func @f(%0: u32[9]) -> (u32[9]) {{\n  %1 = constant {n} : u32[9]\n  %2 = {op} %0, %1 : u32[9]\n  return %2\n}}\n"
            );
            run(&text, &[u32s(&AMOUNTS)]);
            emulated(&parse_func(&text).unwrap(), &[u32s(&AMOUNTS)]);
        }
    }
}

#[test]
fn compares_and_reductions_are_unsigned() {
    let text = "func @f(%0: u32[4], %1: u32[4]) -> (bool[4]) {\n  %2 = lt %0, %1 : bool[4]\n  return %2\n}\n";
    let r = run(
        text,
        &[
            u32s(&[1, 0x8000_0000, u32::MAX, 5]),
            u32s(&[0x8000_0000, 1, 0, 5]),
        ],
    );
    assert_eq!(r.as_slice::<bool>().unwrap(), &[true, false, false, false]);
    for (op, want) in [
        ("reduce_sum", 3u32),
        (
            "reduce_prod",
            0x8000_0000u32.wrapping_mul(u32::MAX).wrapping_mul(4),
        ),
        ("reduce_max", u32::MAX),
        ("reduce_min", 4),
    ] {
        let text = format!("func @f(%0: u32[3]) -> (u32[]) {{\n  %1 = {op} %0, axes=[0] : u32[]\n  return %1\n}}\n");
        let r = run(&text, &[u32s(&[0x8000_0000, u32::MAX, 4])]);
        let want = if op == "reduce_sum" {
            0x8000_0000u32.wrapping_add(u32::MAX).wrapping_add(4)
        } else {
            want
        };
        assert_eq!(words(&r), vec![want], "{op}");
    }
    let empty = "func @f(%0: u32[0]) -> (u32[], u32[]) {\n  %1 = reduce_max %0, axes=[0] : u32[]\n  %2 = reduce_min %0, axes=[0] : u32[]\n  return %1, %2\n}\n";
    let out = interpret(&parse_func(empty).unwrap(), &[u32s(&[])]).unwrap();
    assert_eq!((words(&out[0]), words(&out[1])), (vec![0], vec![u32::MAX]));
}

#[test]
fn conversions_round_truncate_and_saturate() {
    let text = "func @f(%0: u32[3]) -> (f32[3]) {\n  %1 = convert %0 : f32[3]\n  return %1\n}\n";
    let r = interpret(
        &parse_func(text).unwrap(),
        &[u32s(&[u32::MAX, 16_777_217, 3])],
    )
    .unwrap();
    assert_eq!(
        r[0].as_slice::<f32>().unwrap(),
        &[4_294_967_296.0, 16_777_216.0, 3.0]
    );
    let text = "func @f(%0: f32[5]) -> (u32[5]) {\n  %1 = convert %0 : u32[5]\n  return %1\n}\n";
    let x = Array::new([5], Elements::F32(vec![-3.5, 2.9, 1e10, f32::NAN, 7.0])).unwrap();
    let r = interpret(&parse_func(text).unwrap(), &[x]).unwrap();
    assert_eq!(words(&r[0]), vec![0, 2, u32::MAX, 0, 7]);
}

#[test]
fn bit_casts_keep_every_bit() {
    let bits = [
        0x7fc0_0001,
        0x8000_0000,
        0x0000_0001,
        0xff80_0000,
        0x3f80_0000,
        0xffff_ffff,
    ];
    let text = "func @f(%0: u32[6]) -> (u32[6]) {\n  %1 = bitcast_convert %0 : f32[6]\n  %2 = bitcast_convert %1 : i32[6]\n  %3 = bitcast_convert %2 : u32[6]\n  return %3\n}\n";
    assert_eq!(words(&run(text, &[u32s(&bits)])), bits);
    let text =
        "func @f(%0: u32[6]) -> (f32[6]) {\n  %1 = bitcast_convert %0 : f32[6]\n  return %1\n}\n";
    let r = run(text, &[u32s(&bits)]);
    let back: Vec<u32> = r
        .as_slice::<f32>()
        .unwrap()
        .iter()
        .map(|x| x.to_bits())
        .collect();
    assert_eq!(back, bits);
    let text =
        "func @f(%0: i64[2]) -> (f64[2]) {\n  %1 = bitcast_convert %0 : f64[2]\n  return %1\n}\n";
    let x = Array::new([2], Elements::I64(vec![-1, 1])).unwrap();
    let r = interpret(&parse_func(text).unwrap(), &[x]).unwrap();
    let back: Vec<u64> = r[0]
        .as_slice::<f64>()
        .unwrap()
        .iter()
        .map(|x| x.to_bits())
        .collect();
    assert_eq!(back, vec![u64::MAX, 1]);
}

#[test]
fn ill_typed_uses_are_errors_naming_the_types() {
    let shift =
        "func @f(%0: f32[2]) -> (f32[2]) {\n  %1 = shift_left %0, %0 : f32[2]\n  return %1\n}\n";
    let e = parse_func(shift).unwrap_err().to_string();
    assert!(e.contains("shift_left is not defined for f32"), "{e}");
    let width =
        "func @f(%0: u32[2]) -> (f64[2]) {\n  %1 = bitcast_convert %0 : f64[2]\n  return %1\n}\n";
    let e = parse_func(width).unwrap_err().to_string();
    assert!(
        e.contains("u32 (32 bits) to f64 (64 bits): the widths differ"),
        "{e}"
    );
    let x = Tensor::from_vec([2], vec![1.0f32, 2.0]);
    let e = x.shift_left(&x).to_array().unwrap_err().to_string();
    assert!(e.contains("shift_left is not defined for f32"), "{e}");
    let e = Tensor::from_vec([3], vec![1.0f32, 2.0, 3.0])
        .bitcast(DType::F64)
        .to_array()
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("the last dimension must hold the 2 parts"),
        "{e}"
    );
}

#[test]
fn tensor_operators_on_u32() {
    let x = Tensor::from_vec([3], vec![0x8000_0000u32, 5, u32::MAX]);
    let y = Tensor::from_vec([3], vec![4u32, 1, 31]);
    assert_eq!((&x >> &y).to_vec::<u32>().unwrap(), vec![0x0800_0000, 2, 1]);
    assert_eq!(
        (&x << 1).to_vec::<u32>().unwrap(),
        vec![0, 10, u32::MAX - 1]
    );
    assert_eq!(
        (&x ^ &y).to_vec::<u32>().unwrap(),
        vec![0x8000_0004, 4, u32::MAX - 31]
    );
    assert_eq!((&x & 6).to_vec::<u32>().unwrap(), vec![0, 4, 6]);
    assert_eq!(
        (&x | &y).to_vec::<u32>().unwrap(),
        vec![0x8000_0004, 5, u32::MAX]
    );
    let s = Tensor::from_vec([2], vec![-8i32, 8]);
    assert_eq!((&s >> 1).to_vec::<i32>().unwrap(), vec![-4, 4]);
    // u32 Rust numbers as operands, every bit kept.
    assert_eq!(
        x.shift_right_logical(28u32).to_vec::<u32>().unwrap(),
        vec![8, 0, 15]
    );
    assert_eq!(
        x.minimum(0xffff_fff0u32).to_vec::<u32>().unwrap(),
        vec![0x8000_0000, 5, 0xffff_fff0]
    );
    let f = Tensor::from_vec([1], vec![0x3f80_0000u32]).bitcast(DType::F32);
    assert_eq!(f.to_vec::<f32>().unwrap(), vec![1.0]);
}

/// One threefry-2x32 round family (add, rotate as two shifts and an or, xor) on u32 words:
/// the compiled CPU program equals the interpreter bit for bit, on a length with a SIMD tail.
#[test]
fn threefry_rounds_compile_bit_exactly() {
    let f = |(x0, x1): (Tensor, Tensor)| {
        let (mut a, mut b) = (x0, x1);
        for r in [13u32, 15, 26, 6, 17, 29, 16, 24] {
            a = &a + &b;
            b = (&b << r as i32) | (&b >> (32 - r) as i32);
            b = &b ^ &a;
        }
        (a, b)
    };
    let n = 1027;
    let x0: Vec<u32> = (0..n)
        .map(|i| (i as u32).wrapping_mul(0x9e37_79b9))
        .collect();
    let x1: Vec<u32> = (0..n).map(|i| !(i as u32) ^ 0x1bd1_1bda).collect();
    let args = (Tensor::from_vec([n], x0), Tensor::from_vec([n], x1));
    let specs = (Tensor::spec(DType::U32, [n]), Tensor::spec(DType::U32, [n]));
    let func = ferrax::trace(f, &specs).unwrap();
    let inputs = [args.0.to_array().unwrap(), args.1.to_array().unwrap()];
    let want = interpret(&func, &inputs).unwrap();
    let exe = CpuExecutable::compile(&func).unwrap();
    assert!(exe.kernels().count() >= 1, "{}", exe.fused());
    let got = exe.run(&inputs).unwrap();
    assert_eq!(got[0].elements(), want[0].elements());
    assert_eq!(got[1].elements(), want[1].elements());
    emulated(&func, &inputs);
    let (a, b) = ferrax::jit(f).call(args).unwrap();
    assert_eq!(a.to_array().unwrap().elements(), want[0].elements());
    assert_eq!(b.to_array().unwrap().elements(), want[1].elements());
}

#[test]
fn stablehlo_imports_ui32_shifts_and_bitcasts() {
    let text = r#"
func.func @main(%x: tensor<4xui32>, %y: tensor<4xui32>) -> tensor<4xf32> {
  %0 = stablehlo.shift_left %x, %y : tensor<4xui32>
  %1 = stablehlo.shift_right_logical %0, %y : tensor<4xui32>
  %2 = stablehlo.shift_right_arithmetic %1, %y : tensor<4xui32>
  %3 = stablehlo.bitcast_convert %2 : (tensor<4xui32>) -> tensor<4xf32>
  return %3 : tensor<4xf32>
}
"#;
    let func = ferrax::stablehlo::load(text).unwrap();
    let printed = func.to_string();
    for op in [
        "shift_left",
        "shift_right_logical",
        "shift_right_arithmetic",
        "bitcast_convert",
    ] {
        assert!(printed.contains(op), "{printed}");
    }
    let wide = r#"
func.func @main(%x: tensor<4xui32>) -> tensor<4x4xui16> {
  %0 = stablehlo.bitcast_convert %x : (tensor<4xui32>) -> tensor<4x4xui16>
  return %0 : tensor<4x4xui16>
}
"#;
    let e = ferrax::stablehlo::load(wide).unwrap_err().to_string();
    assert!(e.contains("bitcast_convert"), "{e}");
}

/// u32 tensors are `<u4` in `.npy` files and `U32` in safetensors, every bit kept.
#[test]
fn checkpoints_hold_u32() {
    use ferrax::checkpoint::{
        npy_from_bytes, npy_to_bytes, safetensors_from_bytes, safetensors_to_bytes,
    };
    let words = vec![0u32, 1, 0x8000_0000, u32::MAX];
    let t = Tensor::from_vec([2, 2], words.clone());
    let bytes = npy_to_bytes(&t).unwrap();
    assert!(String::from_utf8_lossy(&bytes).contains("'<u4'"));
    assert_eq!(
        npy_from_bytes(&bytes).unwrap().to_vec::<u32>().unwrap(),
        words
    );
    let bytes = safetensors_to_bytes(&t).unwrap();
    let back: Tensor = safetensors_from_bytes(&bytes, &t).unwrap();
    assert_eq!(back.dtype(), DType::U32);
    assert_eq!(back.to_vec::<u32>().unwrap(), words);
}

/// Bit casts and integer work carry no derivative (as in JAX): a path through them adds
/// nothing to a gradient, forward or reverse, and neither is an error.
#[test]
fn bit_paths_have_no_derivative() {
    let f = |x: Tensor| {
        let bits = x.bitcast(DType::U32);
        let mixed = (&bits >> 1i32 | &bits) ^ (&bits << 3i32);
        (mixed.bitcast(DType::F32) * 0.0 + &x * 2.0).sum(..)
    };
    let x = Tensor::from_vec([3], vec![1.5f32, -2.0, 0.25]);
    let g = ferrax::grad(f)(x.clone()).to_vec::<f32>().unwrap();
    assert_eq!(g, vec![2.0; 3]);
    let jitted = ferrax::jit(ferrax::grad(f)).call(x).unwrap();
    assert_eq!(jitted.to_vec::<f32>().unwrap(), vec![2.0; 3]);
}

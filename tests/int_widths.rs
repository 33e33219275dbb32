//! The 8-, 16- and 64-bit integers beside i32, i64, u32 and u8 (i8, i16, u16, u64: JAX's
//! int8, int16, uint16, uint64): the interpreter's values at the edges of each width
//! (wraparound, division by zero and MIN / -1, shift amounts either side of the width,
//! unsigned order, conversions rounded once, bit casts keeping every bit, reduction
//! identities), against Rust's own arithmetic on the same type; the text format; the CPU
//! backend and the emulated GPU (whose host steps compute them) against the interpreter bit
//! for bit; StableHLO import; checkpoints.
#![allow(clippy::unwrap_used, clippy::panic)]

mod common;

use common::{elements_of as values, run_on_every_backend as run, vector as array};

use ferrax::ir::{parse_func, Element, Elements};
use ferrax::runtime::interpret;
use ferrax::{Array, DType, Tensor};

/// `op` applied elementwise to `x` and `y` of dtype `d`.
fn binary<T: Element>(op: &str, d: DType, x: &[T], y: &[T]) -> Vec<T> {
    let n = x.len();
    let text = format!(
        "func @f(%0: {d}[{n}], %1: {d}[{n}]) -> ({d}[{n}]) {{\n  %2 = {op} %0, %1 : {d}[{n}]\n  return %2\n}}\n"
    );
    values(&run(&text, &[array(x), array(y)])[0])
}

/// Every binary op against Rust's wrapping arithmetic of the same type, on pairs that cross
/// the type's edges: MIN and MAX, zero divisors, MIN / -1, and shift amounts below, at and
/// above the width (lax: 0 for left and logical shifts, all sign bits for arithmetic ones).
macro_rules! arithmetic_at_the_width {
    ($name:ident, $t:ty, $u:ty, $s:ty, $d:expr) => {
        #[test]
        fn $name() {
            let edges: Vec<$t> = vec![
                <$t>::MIN,
                <$t>::MAX,
                0,
                1,
                7,
                (<$t>::BITS - 1) as $t,
                <$t>::BITS as $t,
                (<$t>::BITS + 1) as $t,
                <$t>::MIN.wrapping_add(1),
                <$t>::MAX / 3,
                <$t>::MAX.wrapping_add(<$t>::MAX),
            ];
            let mut x = Vec::new();
            let mut y = Vec::new();
            for &a in &edges {
                for &b in &edges {
                    x.push(a);
                    y.push(b);
                }
            }
            let zip = |f: &dyn Fn($t, $t) -> $t| -> Vec<$t> {
                x.iter().zip(&y).map(|(&a, &b)| f(a, b)).collect()
            };
            let d = $d;
            assert_eq!(binary("add", d, &x, &y), zip(&|a, b| a.wrapping_add(b)));
            assert_eq!(binary("sub", d, &x, &y), zip(&|a, b| a.wrapping_sub(b)));
            assert_eq!(binary("mul", d, &x, &y), zip(&|a, b| a.wrapping_mul(b)));
            assert_eq!(binary("max", d, &x, &y), zip(&|a, b| a.max(b)));
            assert_eq!(binary("min", d, &x, &y), zip(&|a, b| a.min(b)));
            // XLA's: x / 0 has every bit set, x % 0 is x, MIN / -1 wraps to MIN.
            assert_eq!(
                binary("div", d, &x, &y),
                zip(&|a, b| if b == 0 { !0 } else { a.wrapping_div(b) })
            );
            assert_eq!(
                binary("rem", d, &x, &y),
                zip(&|a, b| if b == 0 { a } else { a.wrapping_rem(b) })
            );
            assert_eq!(binary("and", d, &x, &y), zip(&|a, b| a & b));
            assert_eq!(binary("xor", d, &x, &y), zip(&|a, b| a ^ b));
            let amount = |b: $t| u32::try_from(b as $u).ok().filter(|&n| n < <$t>::BITS);
            assert_eq!(
                binary("shift_left", d, &x, &y),
                zip(&|a, b| amount(b).map_or(0, |n| a << n))
            );
            assert_eq!(
                binary("shift_right_logical", d, &x, &y),
                zip(&|a, b| amount(b).map_or(0, |n| ((a as $u) >> n) as $t))
            );
            assert_eq!(
                binary("shift_right_arithmetic", d, &x, &y),
                zip(&|a, b| {
                    let n = amount(b).unwrap_or(<$t>::BITS - 1);
                    ((a as $s) >> n) as $t
                })
            );
            let n = x.len();
            let text = format!(
                "func @f(%0: {d}[{n}], %1: {d}[{n}]) -> (bool[{n}], bool[{n}]) {{\n  %2 = lt %0, %1 : bool[{n}]\n  %3 = ge %0, %1 : bool[{n}]\n  return %2, %3\n}}\n"
            );
            let out = run(&text, &[array(&x), array(&y)]);
            let lt: Vec<bool> = x.iter().zip(&y).map(|(a, b)| a < b).collect();
            let ge: Vec<bool> = x.iter().zip(&y).map(|(a, b)| a >= b).collect();
            assert_eq!(values::<bool>(&out[0]), lt);
            assert_eq!(values::<bool>(&out[1]), ge);
            let text = format!(
                "func @f(%0: {d}[{n}]) -> ({d}[{n}]) {{\n  %1 = neg %0 : {d}[{n}]\n  return %1\n}}\n"
            );
            let neg: Vec<$t> = x.iter().map(|a| a.wrapping_neg()).collect();
            assert_eq!(values::<$t>(&run(&text, &[array(&x)])[0]), neg);
        }
    };
}

arithmetic_at_the_width!(i8_arithmetic_wraps_at_its_width, i8, u8, i8, DType::I8);
arithmetic_at_the_width!(i16_arithmetic_wraps_at_its_width, i16, u16, i16, DType::I16);
arithmetic_at_the_width!(u16_arithmetic_wraps_at_its_width, u16, u16, i16, DType::U16);
arithmetic_at_the_width!(u64_arithmetic_wraps_at_its_width, u64, u64, i64, DType::U64);

#[test]
fn abs_and_sign_of_signed_narrow_integers() {
    let text = "func @f(%0: i8[4]) -> (i8[4], i8[4]) {\n  %1 = abs %0 : i8[4]\n  %2 = sign %0 : i8[4]\n  return %1, %2\n}\n";
    let out = run(text, &[array(&[i8::MIN, -5, 0, 7])]);
    assert_eq!(values::<i8>(&out[0]), vec![i8::MIN, 5, 0, 7]);
    assert_eq!(values::<i8>(&out[1]), vec![-1, -1, 0, 1]);
    let e =
        parse_func("func @f(%0: u16[2]) -> (u16[2]) {\n  %1 = abs %0 : u16[2]\n  return %1\n}\n")
            .unwrap_err()
            .to_string();
    assert!(e.contains("abs") && e.contains("u16"), "{e}");
}

/// Sums, products, maxima and minima wrap and order at the width; reductions of nothing give
/// the identities (the lowest and highest values).
#[test]
fn reductions_wrap_and_order_at_the_width() {
    let big = [u64::MAX, 1 << 63, 5];
    let text = "func @f(%0: u64[3]) -> (u64[], u64[], u64[], u64[]) {\n  %1 = reduce_sum %0, axes=[0] : u64[]\n  %2 = reduce_prod %0, axes=[0] : u64[]\n  %3 = reduce_max %0, axes=[0] : u64[]\n  %4 = reduce_min %0, axes=[0] : u64[]\n  return %1, %2, %3, %4\n}\n";
    let out = run(text, &[array(&big)]);
    let sum = big.iter().fold(0u64, |a, &b| a.wrapping_add(b));
    let prod = big.iter().fold(1u64, |a, &b| a.wrapping_mul(b));
    let got: Vec<u64> = out.iter().map(|a| values::<u64>(a)[0]).collect();
    assert_eq!(got, vec![sum, prod, u64::MAX, 5]);
    let text = "func @f(%0: i8[3]) -> (i8[], i8[]) {\n  %1 = reduce_sum %0, axes=[0] : i8[]\n  %2 = reduce_min %0, axes=[0] : i8[]\n  return %1, %2\n}\n";
    let out = run(text, &[array(&[100i8, 100, -128])]);
    assert_eq!(values::<i8>(&out[0]), vec![72]);
    assert_eq!(values::<i8>(&out[1]), vec![-128]);
    for (d, lowest, highest) in [
        (
            "i8",
            Elements::I8(vec![i8::MIN]),
            Elements::I8(vec![i8::MAX]),
        ),
        (
            "i16",
            Elements::I16(vec![i16::MIN]),
            Elements::I16(vec![i16::MAX]),
        ),
        ("u16", Elements::U16(vec![0]), Elements::U16(vec![u16::MAX])),
        ("u64", Elements::U64(vec![0]), Elements::U64(vec![u64::MAX])),
    ] {
        let text = format!("func @f(%0: {d}[0]) -> ({d}[], {d}[]) {{\n  %1 = reduce_max %0, axes=[0] : {d}[]\n  %2 = reduce_min %0, axes=[0] : {d}[]\n  return %1, %2\n}}\n");
        let dtype = DType::from_name(d).unwrap();
        let empty = Array::new([0], Elements::zeros(dtype, 0)).unwrap();
        let out = run(&text, &[empty]);
        assert_eq!(out[0].elements(), &lowest, "{d}");
        assert_eq!(out[1].elements(), &highest, "{d}");
    }
}

/// Integers convert by value, rounded once to floats (u64 above 2^63 included); floats
/// truncate toward zero and saturate (NaN to 0); integers wrap to narrower ones and
/// sign-extend to wider ones.
#[test]
fn conversions_round_once_truncate_and_wrap() {
    let big = [u64::MAX, (1 << 63) + 1, (1 << 53) + 1, 3];
    let text = "func @f(%0: u64[4]) -> (f32[4], f64[4], bf16[4], i8[4]) {\n  %1 = convert %0 : f32[4]\n  %2 = convert %0 : f64[4]\n  %3 = convert %0 : bf16[4]\n  %4 = convert %0 : i8[4]\n  return %1, %2, %3, %4\n}\n";
    let out = run(text, &[array(&big)]);
    let f32s: Vec<f32> = big.iter().map(|&x| x as f32).collect();
    let f64s: Vec<f64> = big.iter().map(|&x| x as f64).collect();
    assert_eq!(values::<f32>(&out[0]), f32s);
    assert_eq!(values::<f64>(&out[1]), f64s);
    assert_eq!(
        values::<half::bf16>(&out[2]),
        vec![
            half::bf16::from_f64(1.8446744073709552e19),
            half::bf16::from_f64(9.223372036854776e18),
            half::bf16::from_f64(9.007199254740992e15),
            half::bf16::from_f64(3.0),
        ]
    );
    assert_eq!(values::<i8>(&out[3]), vec![-1, 1, 1, 3]);
    let text = "func @f(%0: f32[6]) -> (i8[6], u16[6], u64[6]) {\n  %1 = convert %0 : i8[6]\n  %2 = convert %0 : u16[6]\n  %3 = convert %0 : u64[6]\n  return %1, %2, %3\n}\n";
    let x = [-300.5f32, -2.9, 2.9, 1e20, f32::NAN, 65535.0];
    let out = run(text, &[array(&x)]);
    assert_eq!(values::<i8>(&out[0]), vec![-128, -2, 2, 127, 0, 127]);
    assert_eq!(values::<u16>(&out[1]), vec![0, 0, 2, u16::MAX, 0, u16::MAX]);
    assert_eq!(values::<u64>(&out[2]), vec![0, 0, 2, u64::MAX, 0, 65535]);
    let text = "func @f(%0: i8[3]) -> (u64[3], i16[3], u16[3]) {\n  %1 = convert %0 : u64[3]\n  %2 = convert %0 : i16[3]\n  %3 = convert %0 : u16[3]\n  return %1, %2, %3\n}\n";
    let out = run(text, &[array(&[-1i8, i8::MIN, 5])]);
    assert_eq!(values::<u64>(&out[0]), vec![u64::MAX, (-128i64) as u64, 5]);
    assert_eq!(values::<i16>(&out[1]), vec![-1, -128, 5]);
    assert_eq!(values::<u16>(&out[2]), vec![u16::MAX, 0xff80, 5]);
}

/// Bit casts between types of one width keep every bit: i16, u16, f16 and bf16; u64, i64 and
/// f64; i8 and u8.
#[test]
fn bit_casts_keep_every_bit_at_each_width() {
    let halves = [0x7e01u16, 0x8000, 0x0001, 0xffff, 0x3c00];
    let text = "func @f(%0: u16[5]) -> (u16[5], u16[5]) {\n  %1 = bitcast_convert %0 : f16[5]\n  %2 = bitcast_convert %1 : i16[5]\n  %3 = bitcast_convert %2 : bf16[5]\n  %4 = bitcast_convert %3 : u16[5]\n  %5 = bitcast_convert %2 : u16[5]\n  return %4, %5\n}\n";
    let out = run(text, &[array(&halves)]);
    assert_eq!(values::<u16>(&out[0]), halves);
    assert_eq!(values::<u16>(&out[1]), halves);
    let words = [0x7ff0_0000_0000_0001u64, 1 << 63, u64::MAX, 1];
    let text = "func @f(%0: u64[4]) -> (f64[4], u64[4]) {\n  %1 = bitcast_convert %0 : f64[4]\n  %2 = bitcast_convert %1 : i64[4]\n  %3 = bitcast_convert %2 : u64[4]\n  return %1, %3\n}\n";
    let out = run(text, &[array(&words)]);
    let bits: Vec<u64> = values::<f64>(&out[0]).iter().map(|x| x.to_bits()).collect();
    assert_eq!(bits, words);
    assert_eq!(values::<u64>(&out[1]), words);
    let text =
        "func @f(%0: i8[3]) -> (u8[3]) {\n  %1 = bitcast_convert %0 : u8[3]\n  return %1\n}\n";
    let out = run(text, &[array(&[-1i8, i8::MIN, 3])]);
    assert_eq!(values::<u8>(&out[0]), vec![255, 128, 3]);
}

/// Constants of each type print and parse back (the extremes included); out of range is an
/// error naming the value and type.
/// Bit casts between widths (`lax.bitcast_convert_type`): each element becomes its parts,
/// least significant first (its little-endian bytes), and back; traced, printed and run on
/// every backend bit for bit, and imported from StableHLO. Misfit trailing dimensions, bools
/// and c128 are errors naming why.
#[test]
fn bit_casts_between_widths_split_and_join_elements() {
    fn program(f: impl Fn(Tensor) -> Tensor, x: &Tensor) -> String {
        ferrax::trace(f, &Tensor::spec(x.dtype(), x.shape().to_vec()))
            .unwrap()
            .to_string()
    }
    let floats = [1.5f32, -0.0, f32::NAN, 3.0e-41];
    let x = Tensor::from_vec([2, 2], floats.to_vec());
    let out = run(
        &program(|x| x.bitcast(DType::U8), &x),
        &[x.to_array().unwrap()],
    );
    assert_eq!(out[0].dims(), &[2, 2, 4]);
    let bytes: Vec<u8> = floats.iter().flat_map(|f| f.to_le_bytes()).collect();
    assert_eq!(values::<u8>(&out[0]), bytes);
    let back = Tensor::from_vec([2, 2, 4], bytes.clone());
    let out = run(
        &program(|b| b.bitcast(DType::F32), &back),
        &[back.to_array().unwrap()],
    );
    let bits: Vec<u32> = values::<f32>(&out[0]).iter().map(|f| f.to_bits()).collect();
    assert_eq!(bits, floats.iter().map(|f| f.to_bits()).collect::<Vec<_>>());
    let words = [0x0123_4567_89ab_cdefu64, u64::MAX, 1 << 63];
    let x = Tensor::from_vec([3], words.to_vec());
    let out = run(
        &program(|x| x.bitcast(DType::U16), &x),
        &[x.to_array().unwrap()],
    );
    let quarters: Vec<u16> = words
        .iter()
        .flat_map(|w| (0..4).map(move |k| (w >> (16 * k)) as u16))
        .collect();
    assert_eq!(values::<u16>(&out[0]), quarters);
    let halves = Tensor::from_vec(
        [3, 2],
        words
            .iter()
            .flat_map(|w| [*w as u32, (w >> 32) as u32])
            .collect::<Vec<_>>(),
    );
    let out = run(
        &program(|h| h.bitcast(DType::F64), &halves),
        &[halves.to_array().unwrap()],
    );
    let joined: Vec<u64> = values::<f64>(&out[0]).iter().map(|f| f.to_bits()).collect();
    assert_eq!(joined, words);
    let z = Tensor::from_vec([1], vec![ferrax::ir::Complex::new(1.0f32, -2.0)]);
    let parts = z.bitcast(DType::U32).to_vec::<u32>().unwrap();
    assert_eq!(parts, vec![1.0f32.to_bits(), (-2.0f32).to_bits()]);
    for (t, to, why) in [
        (
            Tensor::from_vec([3], vec![1u32, 2, 3]),
            DType::U64,
            "the last dimension must hold the 2 parts",
        ),
        (Tensor::from_vec([2], vec![true, false]), DType::U8, "bools"),
        (
            Tensor::from_vec([1], vec![ferrax::ir::Complex::new(1.0f64, 0.0)]),
            DType::U32,
            "more than 64 bits",
        ),
    ] {
        let e = t.bitcast(to).to_array().unwrap_err().to_string();
        assert!(e.contains(why) && e.contains("int_widths.rs"), "{e}");
    }
    let text = "func.func @main(%x: tensor<2x2xui32>) -> tensor<2x2xui32> {\n  %0 = stablehlo.bitcast_convert %x : (tensor<2x2xui32>) -> tensor<2xui64>\n  %1 = stablehlo.bitcast_convert %0 : (tensor<2xui64>) -> tensor<2x2xui32>\n  return %1 : tensor<2x2xui32>\n}";
    let func = ferrax::stablehlo::load(text).unwrap();
    let x = Array::new([2, 2], u32::into_elements(vec![1, 4, 0, 1])).unwrap();
    let out = interpret(&func, std::slice::from_ref(&x)).unwrap();
    assert_eq!(out[0], x);
}

#[test]
fn constants_round_trip_through_the_text() {
    let text = "func @f() -> (i8[2], i16[2], u16[2], u64[2]) {\n  %0 = constant [-128, 127] : i8[2]\n  %1 = constant [-32768, 32767] : i16[2]\n  %2 = constant [0, 65535] : u16[2]\n  %3 = constant [0, 18446744073709551615] : u64[2]\n  return %0, %1, %2, %3\n}\n";
    let out = run(text, &[]);
    assert_eq!(values::<i8>(&out[0]), vec![i8::MIN, i8::MAX]);
    assert_eq!(values::<i16>(&out[1]), vec![i16::MIN, i16::MAX]);
    assert_eq!(values::<u16>(&out[2]), vec![0, u16::MAX]);
    assert_eq!(values::<u64>(&out[3]), vec![0, u64::MAX]);
    let e = parse_func("func @f() -> (i8[]) {\n  %0 = constant 128 : i8[]\n  return %0\n}\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("128"), "{e}");
}

/// Sorting orders each type by value (u64 above i64's range last), gathers index with them.
#[test]
fn sorts_and_gathers_at_each_width() {
    let text =
        "func @f(%0: u64[4]) -> (u64[4]) {\n  %1 = sort %0, dimension=0 : u64[4]\n  return %1\n}\n";
    let out = run(text, &[array(&[u64::MAX, 1, 1 << 63, 0])]);
    assert_eq!(values::<u64>(&out[0]), vec![0, 1, 1 << 63, u64::MAX]);
    let text = "func @f(%0: i16[3], %1: i8[4]) -> (i16[4]) {\n  %2 = reshape %1 : i8[4,1]\n  %3 = gather %0, %2, offset_dims=[], collapsed_slice_dims=[0], start_index_map=[0], index_vector_dim=1, slice_sizes=[1] : i16[4]\n  return %3\n}\n";
    let out = run(text, &[array(&[10i16, -20, 30]), array(&[2i8, 0, -1, 100])]);
    // Start indices are clamped into range, as lax.gather does.
    assert_eq!(values::<i16>(&out[0]), vec![30, 10, 10, 30]);
}

/// Start indices of different integer types are taken at their values (not cast to the
/// first one's type): 300 as an i32 beside an i8 start is clamped, not wrapped to 44.
#[test]
fn dynamic_slices_take_starts_of_mixed_types_by_value() {
    let x = Tensor::from_vec([2, 100], (0..200).map(|v| v as f32).collect::<Vec<_>>());
    let i = Tensor::from_vec([], vec![1i8]);
    let j = Tensor::from_vec([], vec![300i32]);
    let s = x.dynamic_slice(&[&i, &j], &[1, 10]);
    let want: Vec<f32> = (190..200).map(|v| v as f32).collect();
    assert_eq!(s.to_vec::<f32>().unwrap(), want);
}

/// StableHLO's `i8`, `i16`, `ui16` and `ui64` import, with their constants in decimal and as
/// hex blobs.
#[test]
fn stablehlo_imports_each_width() {
    let text = r#"
func.func @main(%x: tensor<2xi8>, %y: tensor<2xui64>) -> (tensor<2xi16>, tensor<2xui16>, tensor<2xui64>) {
  %c = stablehlo.constant dense<[-1, 300]> : tensor<2xi16>
  %h = stablehlo.constant dense<"0xFFFF0100"> : tensor<2xui16>
  %m = stablehlo.constant dense<18446744073709551615> : tensor<2xui64>
  %0 = stablehlo.convert %x : (tensor<2xi8>) -> tensor<2xi16>
  %1 = stablehlo.add %0, %c : tensor<2xi16>
  %2 = stablehlo.multiply %y, %m : tensor<2xui64>
  return %1, %h, %2 : tensor<2xi16>, tensor<2xui16>, tensor<2xui64>
}
"#;
    let func = ferrax::stablehlo::load(text).unwrap();
    let out = interpret(&func, &[array(&[-128i8, 5]), array(&[3u64, 1 << 63])]).unwrap();
    assert_eq!(values::<i16>(&out[0]), vec![-129, 305]);
    assert_eq!(values::<u16>(&out[1]), vec![u16::MAX, 1]);
    assert_eq!(
        values::<u64>(&out[2]),
        vec![
            3u64.wrapping_mul(u64::MAX),
            (1u64 << 63).wrapping_mul(u64::MAX)
        ]
    );
}

/// `.npy` (`|i1`, `<i2`, `<u2`, `<u8`) and safetensors (I8, I16, U16, U64) hold each type
/// bit for bit.
#[test]
fn checkpoints_hold_each_width() {
    use ferrax::checkpoint::{
        npy_from_bytes, npy_to_bytes, safetensors_from_bytes, safetensors_to_bytes,
    };
    let tensors = [
        (Tensor::from_vec([2], vec![i8::MIN, i8::MAX]), "'|i1'"),
        (Tensor::from_vec([2], vec![i16::MIN, -1i16]), "'<i2'"),
        (Tensor::from_vec([2], vec![0u16, u16::MAX]), "'<u2'"),
        (Tensor::from_vec([2], vec![1u64 << 63, u64::MAX]), "'<u8'"),
    ];
    for (t, descr) in tensors {
        let want = t.to_array().unwrap();
        let bytes = npy_to_bytes(&t).unwrap();
        assert!(String::from_utf8_lossy(&bytes).contains(descr), "{descr}");
        let back = npy_from_bytes(&bytes).unwrap().to_array().unwrap();
        assert_eq!(back.elements(), want.elements(), "{descr}");
        let bytes = safetensors_to_bytes(&t).unwrap();
        let back: Tensor = safetensors_from_bytes(&bytes, &t).unwrap();
        assert_eq!(
            back.to_array().unwrap().elements(),
            want.elements(),
            "{descr}"
        );
    }
}

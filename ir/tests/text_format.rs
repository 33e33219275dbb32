//! The text format: every syntax form parses, prints canonically and round-trips; malformed
//! text gives positioned errors.
#![allow(clippy::unwrap_used)]

use ferrax_ir::{parse_func, print_func, verify, DType, Elements, Func, Literal, Op, Scalar};
use half::{bf16, f16};

fn round_trip(src: &str) -> Func {
    let f = parse_func(src).unwrap_or_else(|e| panic!("{e}\n{src}"));
    verify(&f).unwrap();
    let printed = print_func(&f);
    let again = parse_func(&printed).unwrap();
    assert_eq!(again, f);
    assert_eq!(print_func(&again), printed);
    f
}

#[test]
fn every_syntax_form_round_trips() {
    let src = r#"
// comments are skipped
func @all(%x: f32[2,3], %p: bool[2,3], %i: i32[4], %s: f32[]) -> (f32[3,2], f32[2,3], i32[4]) {
  %c = constant 1.5 : f32[2,3]
  %d = constant [1, -2, 3, 4] : i32[4]
  %io = iota dim=1 : i32[2,3]
  %e = exp %x : f32[2,3]
  %a = add %e, %c : f32[2,3]
  %lt = lt %a, %x : bool[2,3]
  %both = and %lt, %p : bool[2,3]
  %sel = select %both, %a, %x : f32[2,3]
  %cl = clamp %s, %sel, %s : f32[2,3]
  %cv = convert %io : f32[2,3]
  %b = broadcast_in_dim %s, dims=[] : f32[2,3]
  %r = reshape %cl : f32[3,2]
  %t = transpose %cv, perm=[1,0] : f32[3,2]
  %red = reduce_max %b, axes=[0] : f32[3]
  %dot = dot_general %x, %t, contract=[1]x[0] : f32[2,2]
  %bd = dot_general %x, %x, batch=[0]x[0], contract=[1]x[1] : f32[2]
  %sl = slice %x, start=[0,1], limit=[2,3], strides=[1,2] : f32[2,1]
  %pd = pad %sl, %s, low=[1,-1], high=[0,2], interior=[1,0] : f32[4,2]
  %cat = concatenate %x, %b, axis=0 : f32[4,3]
  %sg = stop_gradient %r : f32[3,2]
  %sum = add %sg, %t : f32[3,2]
  %ii = mul %i, %d : i32[4]
  return %sum, %cv, %ii
}
"#;
    let f = round_trip(src);
    assert_eq!(f.params.len(), 4);
    assert_eq!(f.body.len(), 22);
    insta::assert_snapshot!(print_func(&f));
}

#[test]
fn constants_of_every_dtype() {
    let src = "func @k() -> (f64[2], f16[3], bf16[2], i64[2], u8[2], bool[3], f32[]) {
  %0 = constant [0.1, -1e300] : f64[2]
  %1 = constant [0.5, 65504.0, -0.0] : f16[3]
  %2 = constant [3.0, 1.00025555e30] : bf16[2]
  %3 = constant [-9223372036854775808, 9223372036854775807] : i64[2]
  %4 = constant [0, 255] : u8[2]
  %5 = constant [true, false, true] : bool[3]
  %6 = constant -inf : f32[]
  return %0, %1, %2, %3, %4, %5, %6
}
";
    let f = round_trip(src);
    assert_eq!(print_func(&f), src);
    match &f.body[1].op {
        Op::Constant(Literal {
            data: Elements::F16(v),
            ..
        }) => {
            assert_eq!(v[1], f16::MAX);
            assert!(v[2].is_sign_negative());
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn nan_payloads_round_trip_bit_exactly() {
    let payload = f32::from_bits(0x7fc0_0001);
    let lit = Literal {
        ty: ferrax_ir::TensorType::new(DType::F32, [3]),
        data: Elements::F32(vec![f32::NAN, payload, -f32::NAN]),
    };
    let mut b = ferrax_ir::FuncBuilder::new("nans");
    let c = b.push(Op::Constant(lit), &[]).unwrap();
    let h = b
        .push(
            Op::Constant(Literal::scalar(Scalar::BF16(bf16::from_bits(0x7fc1)))),
            &[],
        )
        .unwrap();
    let f = b.finish(vec![c, h]);
    let printed = print_func(&f);
    assert!(
        printed.contains("[NaN, 0x7fc00001, 0xffc00000]"),
        "{printed}"
    );
    assert!(printed.contains("constant 0x7fc1 : bf16[]"), "{printed}");
    assert_eq!(parse_func(&printed).unwrap(), f);
}

#[test]
fn names_are_renumbered_densely() {
    let f = round_trip("func @f(%in: f32[2]) -> (f32[2]) {\n  %tmp = neg %in : f32[2]\n  %out = abs %tmp : f32[2]\n  return %out\n}");
    assert_eq!(
        print_func(&f),
        "func @f(%0: f32[2]) -> (f32[2]) {\n  %1 = neg %0 : f32[2]\n  %2 = abs %1 : f32[2]\n  return %2\n}\n"
    );
}

fn parse_err(src: &str) -> String {
    parse_func(src).unwrap_err().to_string()
}

#[test]
fn malformed_text_gives_positioned_errors() {
    let cases = [
        "func @f(%x: f32[2]) -> (f32[2]) {\n  %y = exp %z : f32[2]\n  return %y\n}",
        "func @f(%x: f32[2]) -> (f32[2]) {\n  %y = exp %x : f33[2]\n  return %y\n}",
        "func @f(%x: f32[2]) -> (f32[3]) {\n  return %x\n}",
        "func @f(%x: f32[2]) -> (f32[2]) {\n  %x = exp %x : f32[2]\n  return %x\n}",
        "func @f(%x: f32[2,3]) -> (f32[3]) {\n  %y = reduce_sum %x : f32[3]\n  return %y\n}",
        "func @f(%x: f32[2,3]) -> (f32[3]) {\n  %y = reduce_sum %x, axes=[0], axes=[0] : f32[3]\n  return %y\n}",
        "func @f(%x: f32[2,3]) -> (f32[3]) {\n  %y = reduce_sum %x, axes=[0], color=[1] : f32[3]\n  return %y\n}",
        "func @f() -> (f32[2]) {\n  %y = constant [1.0, 2.0, 3.0] : f32[2]\n  return %y\n}",
        "func @f() -> (i32[]) {\n  %y = constant 1.5 : i32[]\n  return %y\n}",
        "func @f(%x: f32[1,1,1,1,1,1,1,1,1]) -> () {\n  return\n}",
        "func @f(%x: f32[2]) -> (f32[2]) {\n  %y = exp %x : f32[2]\n",
        "func @f(%x: f32[2]) -> (f32[2]) {\n  %y = exp %x : f32[2]\n  return %y\n} trailing",
        "func @f(%x: f32[2]) -> (f32[2]) {\n  %y = exp %x ; f32[2]\n  return %y\n}",
    ];
    let report: Vec<String> = cases.iter().map(|c| parse_err(c)).collect();
    insta::assert_snapshot!(report.join("\n"));
}

#[test]
fn indexing_ops_round_trip() {
    let src = r#"
func @indexing(%x: f32[4,3], %i: i32[5], %u: f32[5,3], %v: i64[2,2], %s: i32[], %b: f32[2,3,4], %bi: i64[2,5,1]) -> (f32[5,3], f32[4,3], f32[4,3], f32[2,2], f32[4,3], f32[2,5]) {
  %g = gather %x, %i, offset_dims=[1], collapsed_slice_dims=[0], start_index_map=[0], index_vector_dim=1, slice_sizes=[1,3], indices_are_sorted=1 : f32[5,3]
  %sa = scatter_add %x, %i, %u, update_window_dims=[1], inserted_window_dims=[0], scatter_dims_to_operand_dims=[0], index_vector_dim=1, unique_indices=1 : f32[4,3]
  %sr = scatter %x, %i, %u, update_window_dims=[1], inserted_window_dims=[0], scatter_dims_to_operand_dims=[0], index_vector_dim=1 : f32[4,3]
  %gv = gather %x, %v, collapsed_slice_dims=[0,1], start_index_map=[0,1], index_vector_dim=1, slice_sizes=[1,1] : f32[2]
  %ds = dynamic_slice %x, %s, %s : f32[2,2]
  %us = dynamic_update_slice %x, %ds, %s, %s : f32[4,3]
  %bg = gather %b, %bi, offset_dims=[2], collapsed_slice_dims=[2], operand_batching_dims=[0], start_indices_batching_dims=[0], start_index_map=[2], index_vector_dim=2, slice_sizes=[1,3,1] : f32[2,5,3]
  %r = reduce_sum %bg, axes=[2] : f32[2,5]
  return %g, %sa, %sr, %ds, %us, %r
}
"#;
    let f = round_trip(src);
    insta::assert_snapshot!(print_func(&f));
}

/// Attention's parts with their flags and precision round-trip; a precision that is not a
/// half type narrower than the operands, or an attribute of the wrong kind, is refused.
#[test]
fn attention_ops_round_trip() {
    let f = round_trip(
        r#"
func @a(%q: f32[1,4,2,8], %k: f32[1,3,2,8], %v: f32[1,3,2,8]) -> (f32[1,4,2,8], f32[1,2,4], f32[1,3,2,8]) {
  %o = attention %q, %k, %v, causal=1, precision=bf16 : f32[1,4,2,8]
  %l = attention_lse %q, %k, %v : f32[1,2,4]
  %z = constant 0.0 : f32[1,2,4]
  %dk = attention_dk %q, %k, %v, %o, %l, %o, %z, precision=f16 : f32[1,3,2,8]
  return %o, %l, %dk
}
"#,
    );
    let parts: Vec<&str> = f.body.iter().map(|i| i.op.name()).collect();
    assert_eq!(
        parts,
        ["attention", "attention_lse", "constant", "attention_dk"]
    );
    let bad = |attr: &str| {
        parse_err(&format!(
            "func @a(%q: f32[1,4,2,8]) -> (f32[1,4,2,8]) {{\n  %o = attention %q, %q, %q, {attr} : f32[1,4,2,8]\n  return %o\n}}"
        ))
    };
    assert!(
        bad("precision=f32").contains("half type"),
        "{}",
        bad("precision=f32")
    );
    assert!(
        bad("precision=3").contains("expects a dtype"),
        "{}",
        bad("precision=3")
    );
    assert!(
        bad("causal=bf16").contains("expects 0 or 1"),
        "{}",
        bad("causal=bf16")
    );
}

/// Half operands under their precision: the output, log-sum-exps, `out` and `d_out` in f32,
/// the gradients in the half type. Half operands under another precision or none (then the
/// softmax is in the half type, and `out` must be too), and an f32 `out` for f16 operands of a
/// bf16 precision, are refused naming why.
#[test]
fn attention_takes_half_operands_under_their_precision() {
    let f = round_trip(
        r#"
func @a(%q: bf16[1,4,2,8], %k: bf16[1,3,2,8], %v: bf16[1,3,2,8], %g: f32[1,4,2,8]) -> (f32[1,2,4], bf16[1,4,2,8], bf16[1,3,2,8]) {
  %o = attention %q, %k, %v, causal=1, precision=bf16 : f32[1,4,2,8]
  %l = attention_lse %q, %k, %v, causal=1, precision=bf16 : f32[1,2,4]
  %dq = attention_dq %q, %k, %v, %o, %l, %g, %l, causal=1, precision=bf16 : bf16[1,4,2,8]
  %dv = attention_dv %q, %k, %v, %o, %l, %g, %l, causal=1, precision=bf16 : bf16[1,3,2,8]
  return %l, %dq, %dv
}
"#,
    );
    assert_eq!(f.body.len(), 4);
    let half = |dtype: &str, precision: &str, result: &str| {
        parse_err(&format!(
            "func @a(%q: {dtype}[1,4,2,8]) -> ({result}[1,4,2,8]) {{\n  %o = attention %q, %q, %q{precision} : {result}[1,4,2,8]\n  return %o\n}}"
        ))
    };
    let other = half("f16", ", precision=bf16", "f32");
    assert!(other.contains("half type"), "{other}");
    // No precision: the softmax in bf16, so an f32 output is the wrong type.
    let none = half("bf16", "", "f32");
    assert!(none.contains("operands give bf16"), "{none}");
    let wide = parse_err(
        "func @a(%q: bf16[1,4,2,8], %g: bf16[1,4,2,8], %l: f32[1,2,4]) -> (bf16[1,4,2,8]) {\n  %d = attention_dq %q, %q, %q, %g, %l, %g, %l, precision=bf16 : bf16[1,4,2,8]\n  return %d\n}",
    );
    assert!(wide.contains("out is bf16"), "{wide}");
}

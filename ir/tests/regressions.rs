//! Inputs that once crashed the parser or a shape rule (found by `fuzz.rs` or by review),
//! kept as explicit cases: each must give an error, not a panic, an abort or an overflowed
//! stack. The nesting cases run on the fuzzer's 256 KiB stack.
#![allow(clippy::unwrap_used)]

use ferrax_ir::{
    infer_type, parse_func, print_func, verify, DType, Op, Shape, TensorType, TypeError,
};

/// Parses `src`, which must fail with a message containing `needle`.
fn rejects(src: &str, needle: &str) {
    match parse_func(src) {
        Ok(f) => panic!("parsed, expected an error with '{needle}':\n{f}"),
        Err(e) => assert!(
            e.message.contains(needle),
            "error '{e}' does not mention '{needle}' for:\n{src}"
        ),
    }
}

fn on_small_stack(f: impl FnOnce() + Send + 'static) {
    std::thread::Builder::new()
        .stack_size(256 * 1024)
        .spawn(f)
        .unwrap()
        .join()
        .unwrap();
}

/// `depth` functions, each but the innermost calling the next through `custom_vjp`.
fn nest(depth: usize) -> String {
    let open = "func @f(%x: f32[2]) -> (f32[2]) {\n  %y = custom_vjp %x, primal=";
    let close = ", fwd=func @fw(%a: f32[2]) -> (f32[2]) { return %a }, \
                 bwd=func @bw(%c: f32[2]) -> (f32[2]) { return %c } : f32[2]\n  return %y\n}";
    let leaf = "func @leaf(%x: f32[2]) -> (f32[2]) {\n  %y = exp %x : f32[2]\n  return %y\n}";
    let mut s = open.repeat(depth - 1);
    s.push_str(leaf);
    s.push_str(&close.repeat(depth - 1));
    s
}

#[test]
fn input_without_tokens() {
    // The error pointed one token before the first one: an underflow at position 0.
    rejects("", "expected 'func', found end of input");
    rejects(" \n\t", "expected 'func'");
    rejects("// only a comment", "expected 'func'");
}

#[test]
fn fuzz_found_cases() {
    // Element counts multiplied past usize::MAX in reshape (a panic in debug builds).
    rejects(
        "func @f(%x: f32[2,3]) -> () { %r = reshape %x : f32[3,9223372036854775807] return }",
        "type f32[3,9223372036854775807] takes more than",
    );
    // Interior padding multiplied past i64::MAX.
    rejects(
        "func @f(%x: f32[2,1], %s: f32[]) -> () { %p = pad %x, %s, low=[1,-1], high=[0,2], interior=[9223372036854775807,0] : f32[4,2] return }",
        "pad: a result of type f32[9223372036854775810,2] would take more than",
    );
    // Parameters the verifier refused parsed without complaint.
    rejects(
        "func @f(%0: f32[2,9223372036854775807]) -> () { return }",
        "parameter type f32[2,9223372036854775807] takes more than",
    );
}

#[test]
fn oversize_types_are_parse_errors() {
    rejects(
        "func @f(%x: f32[0]) -> (f32[4294967296,4294967296]) { %0 = reshape %x : f32[4294967296,4294967296] return %0 }",
        "result type f32[4294967296,4294967296] takes more than",
    );
    rejects(
        "func @f(%x: f32[0]) -> (f32[0]) { %0 = reshape %x : f32[4294967296,4294967296] return %x }",
        "type f32[4294967296,4294967296] takes more than",
    );
    rejects(
        "func @f(%x: f32[0,4294967296,4294967296]) -> () { return }",
        "parameter type f32[0,4294967296,4294967296] takes more than",
    );
    rejects(
        "func @f() -> (f32[1,1,1,1,1,1,1,1,1]) { return }",
        "result type f32[1,1,1,1,1,1,1,1,1] exceeds rank 8",
    );
    rejects(
        "func @f() -> () { %0 = iota dim=0 : f32[1,1,1,1,1,1,1,1,1] return }",
        "type f32[1,1,1,1,1,1,1,1,1] exceeds rank 8",
    );
    rejects(
        "func @f(%x: f32[-1]) -> () { return }",
        "negative dimension",
    );
    rejects(
        "func @f(%x: f32[99999999999999999999]) -> () { return }",
        "expected an integer",
    );
}

#[test]
fn pad_sizes_do_not_overflow() {
    let pad = |low: &str, high: &str, interior: &str| {
        format!(
            "func @f(%x: f32[3], %v: f32[]) -> (f32[3]) {{ %0 = pad %x, %v, low=[{low}], high=[{high}], interior=[{interior}] : f32[3] return %0 }}"
        )
    };
    rejects(&pad("9223372036854775807", "1", "0"), "pad");
    rejects(
        &pad("9223372036854775807", "9223372036854775807", "0"),
        "pad",
    );
    rejects(
        &pad("-9223372036854775808", "-9223372036854775808", "0"),
        "negative size",
    );
    rejects(&pad("-9223372036854775808", "0", "0"), "negative size");
    rejects(&pad("0", "0", "9223372036854775807"), "pad");
    rejects(
        &pad("9223372036854775807", "0", "9223372036854775807"),
        "pad",
    );
}

#[test]
fn concatenated_sizes_do_not_overflow() {
    rejects(
        "func @f(%x: u8[9223372036854775807]) -> () { %0 = concatenate %x, %x, %x, axis=0 : u8[1] return }",
        "concatenate",
    );
    rejects(
        "func @f(%x: u8[9223372036854775807]) -> () { %0 = concatenate %x, %x, axis=0 : u8[1] return }",
        "concatenate",
    );
}

#[test]
fn attributes_past_every_rank() {
    let big = "9223372036854775807";
    let cases = [
        (format!("%0 = slice %x, start=[0], limit=[{big}] : f32[3]"), "slice"),
        (format!("%0 = slice %x, start=[{big}], limit=[{big}] : f32[0]"), "slice"),
        (format!("%0 = reduce_sum %x, axes=[{big}] : f32[]"), "reduce_sum"),
        (format!("%0 = transpose %x, perm=[{big}] : f32[3]"), "transpose"),
        (format!("%0 = broadcast_in_dim %x, dims=[{big}] : f32[3]"), "broadcast_in_dim"),
        (format!("%0 = iota dim={big} : f32[3]"), "iota"),
        (format!("%0 = concatenate %x, axis={big} : f32[3]"), "concatenate"),
        (format!("%0 = dot_general %x, %x, contract=[{big}]x[0] : f32[]"), "dot_general"),
        (format!("%0 = gather %x, %i, start_index_map=[0], index_vector_dim={big}, slice_sizes=[1] : f32[1]"), "gather"),
        (format!("%0 = gather %x, %i, offset_dims=[{big}], start_index_map=[0], index_vector_dim=1, slice_sizes=[1] : f32[1]"), "gather"),
        (format!("%0 = scatter %x, %i, %x, scatter_dims_to_operand_dims=[{big}], index_vector_dim=1 : f32[3]"), "scatter"),
        ("%0 = dynamic_slice %x, %s : u8[9223372036854775807]".to_string(), "dynamic_slice"),
    ];
    for (instr, op) in cases {
        rejects(
            &format!("func @f(%x: f32[3], %i: i32[1,1], %s: i32[]) -> () {{ {instr} return }}"),
            op,
        );
    }
}

#[test]
fn sixty_four_nested_functions_parse_print_and_verify() {
    on_small_stack(|| {
        let f = parse_func(&nest(64)).unwrap();
        verify(&f).unwrap();
        let printed = print_func(&f);
        assert_eq!(parse_func(&printed).unwrap(), f);
        // The innermost instruction is indented four spaces per level of nesting.
        let inner = format!("{:w$}  %1 = exp %0 : f32[2]", "", w = 4 * 63);
        assert!(printed.lines().any(|l| l == inner));
    });
}

#[test]
fn nesting_past_the_limit_is_an_error() {
    on_small_stack(|| {
        rejects(&nest(65), "functions nest more than 64 levels deep");
        rejects(&nest(5_000), "functions nest more than 64 levels deep");
        let open = "func @g(%x: f32[]) -> (f32[]) { %y = custom_vjp %x, primal=";
        rejects(
            &open.repeat(100_000),
            "functions nest more than 64 levels deep",
        );
    });
}

#[test]
fn a_nested_error_prints_lines_not_functions() {
    on_small_stack(|| {
        let mut f = parse_func(&nest(64)).unwrap();
        // Breaks the innermost function's type: every level reports the error once.
        let mut at = &mut f;
        while matches!(at.body[0].op, Op::CustomVjp(_)) {
            let Op::CustomVjp(c) = &mut at.body[0].op else {
                unreachable!()
            };
            at = &mut c.primal;
        }
        at.body[0].ty = TensorType::new(DType::F32, vec![3]);
        let e = verify(&f).unwrap_err().to_string();
        assert_eq!(e.matches("in its primal function").count(), 63);
        assert!(e.contains(">   %1 = exp %0 : f32[3]"), "{e}");
        // Each level shows a few lines, never its whole nested text.
        assert!(e.len() < 64 * 1_000, "{} bytes", e.len());
    });
}

#[test]
fn shape_rules_refuse_overflow_without_the_parser() {
    // A builder's operands need not come from parsed text: the rules check on their own.
    let f32 = |dims: &[usize]| TensorType::new(DType::F32, dims.to_vec());
    let reshape = Op::Reshape {
        shape: Shape::new(vec![1 << 32, 1 << 32]),
    };
    assert!(matches!(
        infer_type(&reshape, &[&f32(&[0])]),
        Err(TypeError::Size { op: "reshape", .. })
    ));
    let pad = Op::Pad {
        low: vec![i64::MAX],
        high: vec![i64::MAX],
        interior: vec![usize::MAX],
    };
    let e = infer_type(&pad, &[&f32(&[usize::MAX]), &f32(&[])]).unwrap_err();
    assert!(e.to_string().starts_with("pad: "), "{e}");
    let wide = TensorType::new(DType::U8, vec![usize::MAX]);
    let e = infer_type(&Op::Concatenate { axis: 0 }, &[&wide, &wide]).unwrap_err();
    assert!(e.to_string().starts_with("concatenate: "), "{e}");
}

/// Built in memory rather than parsed, `custom_vjp` calls still nest at most 63 deep: the shape
/// rule refuses the next level, so passes that follow calls have a bounded depth.
#[test]
fn calls_built_in_memory_nest_a_bounded_depth() {
    use ferrax_ir::{CustomVjp, DType, Func, FuncBuilder, Op, TensorType};
    let ty = TensorType::new(DType::F32, [2]);
    let identity = |name: &str| {
        let mut b = FuncBuilder::new(name);
        let x = b.param(ty.clone());
        b.finish(vec![x])
    };
    let bwd = {
        let mut b = FuncBuilder::new("bwd");
        let g = b.param(ty.clone());
        b.finish(vec![g])
    };
    let mut inner: Func = identity("leaf");
    let mut refused_at = None;
    for depth in 1..=70 {
        let call = Op::CustomVjp(Box::new(CustomVjp {
            primal: inner.clone(),
            fwd: identity("fwd"),
            bwd: bwd.clone(),
        }));
        let mut b = FuncBuilder::new(format!("level{depth}"));
        let x = b.param(ty.clone());
        match b.push(call, &[x]) {
            Ok(y) => inner = b.finish(vec![y]),
            Err(e) => {
                assert!(e.to_string().contains("nest"), "{e}");
                refused_at = Some(depth);
                break;
            }
        }
    }
    assert_eq!(refused_at, Some(64));
}

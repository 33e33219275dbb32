//! Inputs that once crashed the loader (issue #26, many found by `tests/fuzz.rs`): each must
//! now be an error that says what is wrong, on a small stack, without a panic.

use ferrax_stablehlo::{load, test_cases, Error};

/// A function around `body`.
fn program(body: &str) -> String {
    format!("func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {{\n{body}\n  return %arg0 : tensor<4xf32>\n}}\n")
}

/// Loads `text` (with `load` and `test_cases`) on a 256 KiB stack, which must not panic;
/// returns what `load` returned.
fn survives(text: &str) -> Result<ferrax_ir::Func, Error> {
    let text = text.to_string();
    let worker = std::thread::Builder::new()
        .stack_size(256 * 1024)
        .spawn(move || {
            let _ = test_cases(&text);
            load(&text)
        })
        .expect("spawning a thread");
    worker.join().expect("the loader panicked")
}

/// The error `load` gives for `text`, failing if it loaded.
fn rejected(text: &str) -> String {
    match survives(text) {
        Err(e) => e.to_string(),
        Ok(f) => panic!("expected an error, got {f:?}"),
    }
}

fn assert_rejected(text: &str, says: &str) {
    let e = rejected(text);
    assert!(e.contains(says), "error {e:?} does not say {says:?}");
}

#[test]
fn hex_blobs_with_non_ascii_or_odd_digits() {
    for blob in [
        "0x0\u{e9}",
        "0x\u{e9}0",
        "0xABC",
        "0x00zz0000",
        "0x\u{1F600}",
    ] {
        let body = format!("  %0 = stablehlo.constant dense<\"{blob}\"> : tensor<f32>");
        assert_rejected(&program(&body), "hex");
    }
    // Whole bytes, but not a whole number of f32 elements.
    let body = "  %0 = stablehlo.constant dense<\"0x000000\"> : tensor<f32>";
    assert_rejected(&program(body), "not a whole number");
}

#[test]
fn huge_result_counts() {
    for n in [
        "999999999999999999",
        "3000000000",
        "99999999999999999999999",
        "65537",
    ] {
        let body = format!("  %0:{n} = call @f() : () -> tensor<f32>");
        assert_rejected(&program(&body), "result count");
    }
}

#[test]
fn result_names_across_the_text_are_bounded() {
    let body = "  %0:65536 = call @f() : () -> tensor<f32>\n".repeat(20);
    assert_rejected(&program(&body), "results in the whole text");
}

#[test]
fn tensor_types_too_large_to_address() {
    for ty in [
        "tensor<4294967296x4294967296xf32>",
        "tensor<9223372036854775807xf32>",
        "tensor<0x4294967296x4294967296x4294967296xf32>",
    ] {
        let text = format!("func.func @main(%a: {ty}) -> {ty} {{\n  return %a : {ty}\n}}");
        assert_rejected(&text, "too many elements");
    }
    let text = "func.func @main(%a: tensor<99999999999999999999xf32>) -> tensor<f32> {\n}";
    assert_rejected(text, "too large");
}

#[test]
fn ranks_above_the_irs_limit_are_unsupported() {
    let ty = "tensor<1x1x1x1x1x1x1x1x1xf32>";
    let text = format!("func.func @main(%a: {ty}) -> {ty} {{\n  return %a : {ty}\n}}");
    let worker = std::thread::spawn(move || load(&text));
    match worker.join().expect("no panic") {
        Err(Error::Unsupported { what, .. }) => assert!(what.contains("rank 9"), "{what}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn deeply_nested_regions() {
    for depth in [65, 2_000, 100_000] {
        let open = "  %r = \"x.op\"() ({\n".repeat(depth);
        let close = "  }) : () -> tensor<f32>\n".repeat(depth);
        let body = format!("{open}    stablehlo.return\n{close}");
        assert_rejected(&program(&body), "nest more than");
    }
}

#[test]
fn deep_brackets_do_not_recurse() {
    for (open, close) in [("[", "]"), ("<", ">"), ("(", ")"), ("{", "}")] {
        let deep = format!("{}0{}", open.repeat(100_000), close.repeat(100_000));
        let body = format!("  %0 = stablehlo.constant dense<{deep}> : tensor<f32>");
        let _ = survives(&program(&body));
        let body = format!("  %0 = stablehlo.foo %arg0, dims = {deep} : tensor<4xf32>");
        rejected(&program(&body));
    }
    let ty = format!(
        "tensor<{}f32{}",
        "tensor<".repeat(100_000),
        ">".repeat(100_000)
    );
    rejected(&format!("func.func @main(%a: {ty}) -> tensor<f32> {{\n}}"));
}

#[test]
fn exponential_inlining_is_bounded() {
    // Each function calls the next twice: 2^30 operations once inlined.
    let mut text = String::new();
    for k in 0..30 {
        let name = if k == 0 {
            "main".to_string()
        } else {
            format!("f{k}")
        };
        text.push_str(&format!(
            "func.func @{name}(%a: tensor<f32>) -> tensor<f32> {{\n  %0 = call @f{n}(%a) : (tensor<f32>) -> tensor<f32>\n  %1 = call @f{n}(%0) : (tensor<f32>) -> tensor<f32>\n  return %1 : tensor<f32>\n}}\n",
            n = k + 1
        ));
    }
    text.push_str(
        "func.func @f30(%a: tensor<f32>) -> tensor<f32> {\n  return %a : tensor<f32>\n}\n",
    );
    assert_rejected(&text, "more than 1000000 operations");
}

#[test]
fn slice_bounds_that_overflow() {
    let body =
        "  %0 = stablehlo.slice %arg0 [18446744073709551615] : (tensor<4xf32>) -> tensor<1xf32>";
    assert_rejected(&program(body), "slice bound");
}

#[test]
fn negative_dot_dimensions() {
    let body = "  %0 = \"stablehlo.dot_general\"(%arg0, %arg0) {dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [-1], rhs_contracting_dimensions = [0]>} : (tensor<4xf32>, tensor<4xf32>) -> tensor<f32>";
    assert_rejected(&program(body), "negative dimension");
}

#[test]
fn padding_that_overflows() {
    for (low, high, interior) in [
        ("9223372036854775807", "9223372036854775807", "0"),
        ("0", "0", "9223372036854775807"),
        ("-9223372036854775808", "-9223372036854775808", "0"),
    ] {
        let body = format!("  %c = stablehlo.constant dense<0.0> : tensor<f32>\n  %0 = stablehlo.pad %arg0, %c, low = [{low}], high = [{high}], interior = [{interior}] : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>");
        rejected(&program(&body));
    }
}

#[test]
fn results_too_large_to_address() {
    // Four operands: a size that fits a usize but not an isize; five: one that overflows.
    let ty = "tensor<4611686018427387903xi1>";
    for n in [4, 5] {
        let operands = vec!["%a"; n].join(", ");
        let types = vec![ty; n].join(", ");
        let text = format!("func.func @main(%a: {ty}) -> {ty} {{\n  %0 = stablehlo.concatenate {operands}, dim = 0 : ({types}) -> {ty}\n  return %0 : {ty}\n}}");
        rejected(&text);
    }
}

#[test]
fn dynamic_gather_with_many_slice_sizes() {
    let body = "  %s = stablehlo.constant dense<1> : tensor<1000000000xi64>\n  %i = stablehlo.constant dense<0> : tensor<1x1xi32>\n  %0 = \"stablehlo.dynamic_gather\"(%arg0, %i, %s) <{dimension_numbers = #stablehlo.gather<offset_dims = [1], start_index_map = [0], index_vector_dim = 1>}> : (tensor<4xf32>, tensor<1x1xi32>, tensor<1000000000xi64>) -> tensor<1x4xf32>";
    assert_rejected(&program(body), "slice sizes");
}

#[test]
fn unterminated_forms() {
    for text in [
        "func.func @main(",
        "func.func @main() -> tensor<f32> {",
        "func.func @main() -> tensor<f32",
        "func.func @\"main",
        "func.func @main() { %0 = \"stablehlo.constant",
        "func.func @main() { %0 = stablehlo.constant dense<",
        "module {",
        "%0:",
        "\u{e9}",
        "",
    ] {
        rejected(text);
    }
}

#[test]
fn deep_call_chains() {
    // f0 calls f1 calls ... f199: the inliner stops at its depth limit.
    let mut text = String::new();
    for k in 0..200 {
        let name = if k == 0 {
            "main".to_string()
        } else {
            format!("f{k}")
        };
        text.push_str(&format!(
            "func.func @{name}(%a: tensor<f32>) -> tensor<f32> {{\n  %0 = call @f{n}(%a) : (tensor<f32>) -> tensor<f32>\n  return %0 : tensor<f32>\n}}\n",
            n = k + 1
        ));
    }
    assert_rejected(&text, "nest too deeply");
    // Recursion.
    let text = "func.func @main(%a: tensor<f32>) -> tensor<f32> {\n  %0 = call @main(%a) : (tensor<f32>) -> tensor<f32>\n  return %0 : tensor<f32>\n}";
    assert_rejected(text, "nest too deeply");
}

//! User mistakes come back as `Err`s that name the shapes involved and the user's own source
//! line. Each mistake is marked with a `// @name` comment on the line that makes it; the test
//! checks the reported location against that line.
#![allow(clippy::unwrap_used)]

use ferrax::{jit, trace, DType, Error, Tensor};

fn f32s(shape: &[usize]) -> Tensor {
    Tensor::spec(DType::F32, shape.to_vec())
}

/// The line in this file that carries `// @marker`.
fn marked_line(marker: &str) -> u32 {
    let src = include_str!("errors.rs");
    let tag = format!("// @{marker}");
    let idx = src
        .lines()
        .position(|l| l.trim_end().ends_with(&tag))
        .unwrap_or_else(|| panic!("no line marked {tag}"));
    idx as u32 + 1
}

/// Checks the location of a trace error and returns its message for the snapshot.
fn check(marker: &str, result: Result<ferrax::Func, Error>) -> String {
    match result {
        Err(Error::Trace { location, message }) => {
            assert!(location.file().ends_with("errors.rs"), "{location}");
            assert_eq!(location.line(), marked_line(marker), "{marker}: {message}");
            message
        }
        other => panic!("{marker}: expected a trace error, got {other:?}"),
    }
}

#[test]
fn shape_mismatch_names_both_shapes_and_the_line() {
    let result = trace(
        |(x, w): (Tensor, Tensor)| {
            let h = x.exp();
            &h + &w // @add-mismatch
        },
        &(f32s(&[2, 3]), f32s(&[4])),
    );
    let err = result.unwrap_err();
    let shown = err.to_string();
    let expected_loc = format!("errors.rs:{}", marked_line("add-mismatch"));
    assert!(shown.contains(&expected_loc), "{shown}");
    assert!(
        shown.contains("f32[2,3]") && shown.contains("f32[4]"),
        "{shown}"
    );
    insta::assert_snapshot!("add_mismatch", check("add-mismatch", Err(err)));
}

#[test]
fn matmul_inner_dimensions_differ() {
    let r = trace(
        |(a, b): (Tensor, Tensor)| a.matmul(&b), // @matmul
        &(f32s(&[2, 3]), f32s(&[4, 5])),
    );
    insta::assert_snapshot!("matmul_mismatch", check("matmul", r));
}

#[test]
fn reduction_axis_out_of_range() {
    let r = trace(|x: Tensor| x.sum(2), &f32s(&[2, 3])); // @bad-axis
    insta::assert_snapshot!("bad_axis", check("bad-axis", r));
}

#[test]
fn dtypes_do_not_mix() {
    let r = trace(
        |(a, b): (Tensor, Tensor)| &a * &b, // @dtype-mix
        &(f32s(&[3]), Tensor::spec(DType::F64, [3])),
    );
    insta::assert_snapshot!("dtype_mix", check("dtype-mix", r));
}

#[test]
fn reshape_to_a_different_size() {
    let r = trace(|x: Tensor| x.reshape([4, 2]), &f32s(&[2, 3])); // @reshape
    insta::assert_snapshot!("reshape_size", check("reshape", r));
}

#[test]
fn transpose_with_a_bad_permutation() {
    let r = trace(|x: Tensor| x.transpose([0, 0]), &f32s(&[2, 3])); // @perm
    insta::assert_snapshot!("bad_permutation", check("perm", r));
}

#[test]
fn flip_along_a_missing_axis() {
    let r = trace(|x: Tensor| x.flip([0, 2]), &f32s(&[2, 3])); // @flip
    insta::assert_snapshot!("flip_missing_axis", check("flip", r));
}

#[test]
fn select_needs_a_bool_condition() {
    let r = trace(|x: Tensor| x.select(&x, 0.0), &f32s(&[3])); // @select
    insta::assert_snapshot!("select_condition", check("select", r));
}

#[test]
fn fractional_number_with_an_integer_tensor() {
    let r = trace(|x: Tensor| &x + 2.5, &Tensor::spec(DType::I32, [3])); // @int-number
    insta::assert_snapshot!("int_plus_fraction", check("int-number", r));
}

#[test]
fn slice_out_of_bounds() {
    let r = trace(|x: Tensor| x.slice(&[0, 1], &[2, 5]), &f32s(&[2, 3])); // @slice
    insta::assert_snapshot!("slice_bounds", check("slice", r));
}

#[test]
fn first_error_wins_and_later_ops_do_not_crash() {
    let r = trace(
        |x: Tensor| {
            let bad = x.reshape([7]); // @first
            let worse = bad.matmul(&x).sum(5);
            (worse.shape().len() as f64) * worse
        },
        &f32s(&[2, 3]),
    );
    check("first", r);
}

#[test]
fn eager_errors_surface_when_the_value_is_read() {
    let a = Tensor::from_vec([2], vec![1.0f32, 2.0]);
    let b = Tensor::from_vec([3], vec![1.0f32, 2.0, 3.0]);
    let sum = &a + &b; // @eager
    let err = sum.to_array().unwrap_err();
    assert_eq!(err.location().map(|l| l.line()), Some(marked_line("eager")));
    insta::assert_snapshot!(
        "eager_mismatch",
        err.to_string().split_once(": ").unwrap().1
    );
}

#[test]
fn jit_rejects_wrongly_shaped_data() {
    let f = jit(|(a, b): (Tensor, Tensor)| &a + &b); // @jit
    let a = Tensor::from_vec([2], vec![1.0f32, 2.0]);
    let b = Tensor::from_vec([3], vec![1.0f32, 2.0, 3.0]);
    let err = f.call((a, b)).unwrap_err();
    assert_eq!(err.location().map(|l| l.line()), Some(marked_line("jit")));
}

#[test]
fn ir_parse_errors_point_at_the_text() {
    let src = "func @f(%x: f32[2]) -> (f32[2]) {\n  %y = exp %x : f32[3]\n  return %y\n}\n";
    let err = ferrax::ir::parse_func(src).unwrap_err();
    insta::assert_snapshot!("parse_type_mismatch", err.to_string());
    let err = ferrax::ir::parse_func("func @f() -> () {\n  %y = frobnicate : f32[]\n  return\n}")
        .unwrap_err();
    insta::assert_snapshot!("parse_unknown_op", err.to_string());
}

#[test]
fn verifier_errors_print_the_surrounding_ir() {
    let mut func = ferrax::ir::parse_func(
        "func @f(%x: f32[2,3]) -> (f32[3]) {\n  %a = exp %x : f32[2,3]\n  %b = reduce_sum %a, axes=[0] : f32[3]\n  %c = neg %b : f32[3]\n  return %c\n}\n",
    )
    .unwrap();
    func.body[1].ty = ferrax::TensorType::new(DType::F32, [2]);
    let err = ferrax::ir::verify(&func).unwrap_err();
    insta::assert_snapshot!("verify_wrong_type", err.to_string());
}

//! Rule groups: each simplifies what it should (positive) and leaves alone what would change a
//! result (negative).
#![allow(clippy::unwrap_used)]

use ferrax_compiler::simplify::simplify;
use ferrax_ir::{parse_func, print_func};

fn simplified(src: &str) -> String {
    let (f, report) = simplify(&parse_func(src).unwrap()).unwrap();
    assert!(
        report.instructions_after <= report.instructions_before,
        "{report}"
    );
    print_func(&f)
}

#[test]
fn algebra_identities() {
    let out = simplified(
        "func @f(%x: f32[4], %y: f32[4]) -> (f32[4]) {
  %one = constant 1.0 : f32[4]
  %a = mul %x, %one : f32[4]
  %b = div %a, %one : f32[4]
  %z = constant 0.0 : f32[4]
  %c = sub %b, %z : f32[4]
  %nz = constant -0.0 : f32[4]
  %d = add %c, %nz : f32[4]
  %n = neg %y : f32[4]
  %nn = neg %n : f32[4]
  %e = sub %d, %n : f32[4]
  %g = add %e, %nn : f32[4]
  return %g
}",
    );
    insta::assert_snapshot!(out, @r"
    func @f(%0: f32[4], %1: f32[4]) -> (f32[4]) {
      %2 = add %0, %1 : f32[4]
      %3 = add %2, %1 : f32[4]
      return %3
    }
    ");
}

#[test]
fn unsafe_float_rewrites_do_not_happen() {
    // x*0 is NaN for x = inf or NaN; x+0 is +0 for x = -0; -(x-y) differs from y-x at x = y.
    let src = "func @f(%x: f32[4], %y: f32[4]) -> (f32[4], f32[4], f32[4], f32[4]) {
  %z = constant 0.0 : f32[4]
  %a = mul %x, %z : f32[4]
  %b = add %x, %z : f32[4]
  %nz = constant -0.0 : f32[4]
  %c = sub %x, %nz : f32[4]
  %d = sub %x, %y : f32[4]
  %e = neg %d : f32[4]
  return %a, %b, %c, %e
}";
    let before = print_func(&parse_func(src).unwrap());
    assert_eq!(simplified(src), before);
}

#[test]
fn layout_chains_collapse() {
    let out = simplified(
        "func @f(%x: f32[2,3,4], %s: f32[]) -> (f32[4,2,3], f32[24], f32[2,3,4], f32[5,2,3]) {
  %t1 = transpose %x, perm=[1,2,0] : f32[3,4,2]
  %t2 = transpose %t1, perm=[1,2,0] : f32[4,2,3]
  %r1 = reshape %x : f32[6,4]
  %r2 = reshape %r1 : f32[24]
  %t3 = transpose %x, perm=[2,0,1] : f32[4,2,3]
  %t4 = transpose %t3, perm=[1,2,0] : f32[2,3,4]
  %b1 = broadcast_in_dim %s, dims=[] : f32[2,3]
  %b2 = broadcast_in_dim %b1, dims=[1,2] : f32[5,2,3]
  return %t2, %r2, %t4, %b2
}",
    );
    insta::assert_snapshot!(out, @r"
    func @f(%0: f32[2,3,4], %1: f32[]) -> (f32[4,2,3], f32[24], f32[2,3,4], f32[5,2,3]) {
      %2 = transpose %0, perm=[2,0,1] : f32[4,2,3]
      %3 = reshape %0 : f32[24]
      %4 = broadcast_in_dim %1, dims=[] : f32[5,2,3]
      return %2, %3, %0, %4
    }
    ");
}

#[test]
fn dot_general_absorbs_transposes() {
    let out = simplified(
        "func @f(%a: f32[3,2], %b: f32[3,4], %g: f32[2,4]) -> (f32[2,4], f32[4,3], f32[4,4]) {
  %at = transpose %a, perm=[1,0] : f32[2,3]
  %p = dot_general %at, %b, contract=[1]x[0] : f32[2,4]
  %q = dot_general %g, %at, contract=[0]x[0] : f32[4,3]
  %s = dot_general %p, %g, contract=[0]x[0] : f32[4,4]
  %t = transpose %s, perm=[1,0] : f32[4,4]
  return %p, %q, %t
}",
    );
    assert!(!out.contains("transpose"), "{out}");
    insta::assert_snapshot!(out);
}

#[test]
fn common_subexpressions_are_shared() {
    let out = simplified(
        "func @f(%x: f32[4]) -> (f32[4]) {
  %a = exp %x : f32[4]
  %b = exp %x : f32[4]
  %c = add %a, %b : f32[4]
  return %c
}",
    );
    assert_eq!(out.matches("exp").count(), 1, "{out}");
}

#[test]
fn loop_invariant_work_leaves_a_while_with_the_same_results() {
    use ferrax_runtime::{interpret, Array};
    let src = include_str!("../../tests/filetests/simplify/while_hoist.ir");
    let src: String = src
        .lines()
        .filter(|l| !l.starts_with([';', 't']))
        .collect::<Vec<_>>()
        .join("\n");
    let f = parse_func(&src).unwrap();
    let (g, _) = simplify(&f).unwrap();
    // `exp %w` and `%n * 2` carried instead of `%w` and `%n`, which the loop no longer reads;
    // no `exp` left inside.
    let w = g.body.iter().find(|i| i.op.name() == "while").unwrap();
    assert_eq!(w.args.len(), 4, "{g}");
    let text = print_func(&g);
    let inside = &text[text.find("while").unwrap()..];
    assert!(!inside.contains("exp"), "{g}");
    let x = Array::from_vec(vec![4], vec![0.5f32, -1.0, 2.0, 0.0]).unwrap();
    let w = Array::from_vec(vec![4], vec![0.1f32, -0.2, 0.3, 0.0]).unwrap();
    // Zero trips included: the hoisted work runs, the results do not change.
    for n in [-1, 0, 1, 3] {
        let args = vec![Array::scalar(n), x.clone(), w.clone()];
        let want = interpret(&f, &args).unwrap();
        let got = interpret(&g, &args).unwrap();
        assert_eq!(
            want[0].to_vec::<f32>().unwrap(),
            got[0].to_vec::<f32>().unwrap()
        );
    }
}

#[test]
fn a_while_yielding_a_value_it_leaves_alone_is_that_value() {
    let src = include_str!("../../tests/filetests/simplify/while_hoist.ir");
    let src: String = src
        .lines()
        .filter(|l| !l.starts_with([';', 't']))
        .collect::<Vec<_>>()
        .join("\n")
        .replace("result=2", "result=3");
    let (g, _) = simplify(&parse_func(&src).unwrap()).unwrap();
    assert!(
        g.body.is_empty() && g.outputs == [ferrax_ir::ValueId(2)],
        "{g}"
    );
}

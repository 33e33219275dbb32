//! `while` and `cond` on the interpreter: loops to their end, nested loops, StableHLO's
//! index rule (out of range picks the last branch), and `eval_op`/`eval_call` agreeing.
#![allow(clippy::unwrap_used)]

use ferrax_ir::parse_func;
use ferrax_runtime::{eval_call, eval_op, interpret, Array};

fn run(src: &str, args: &[Array]) -> Vec<Array> {
    let f = parse_func(src).unwrap_or_else(|e| panic!("{e}\n{src}"));
    interpret(&f, args).unwrap_or_else(|e| panic!("{e}\n{src}"))
}

/// `%n` halvings of `%x` (a countdown carried beside it), both results.
const HALVE: &str = "
func @halve(%n: i32[], %x: f32[2]) -> (i32[], f32[2]) {
  %i = while %n, %x, result=0, cond=func @c(%i: i32[], %x: f32[2]) -> (bool[]) {
      %z = constant 0 : i32[]
      %p = gt %i, %z : bool[]
      return %p
    }, body=func @b(%i: i32[], %x: f32[2]) -> (i32[], f32[2]) {
      %one = constant 1 : i32[]
      %j = sub %i, %one : i32[]
      %h = constant 0.5 : f32[2]
      %y = mul %x, %h : f32[2]
      return %j, %y
    } : i32[]
  %y = while %n, %x, result=1, cond=func @c(%i: i32[], %x: f32[2]) -> (bool[]) {
      %z = constant 0 : i32[]
      %p = gt %i, %z : bool[]
      return %p
    }, body=func @b(%i: i32[], %x: f32[2]) -> (i32[], f32[2]) {
      %one = constant 1 : i32[]
      %j = sub %i, %one : i32[]
      %h = constant 0.5 : f32[2]
      %y = mul %x, %h : f32[2]
      return %j, %y
    } : f32[2]
  return %i, %y
}";

#[test]
fn a_while_loop_runs_until_its_condition_fails() {
    let x = Array::from_vec([2], vec![8.0f32, -3.0]).unwrap();
    for (n, want) in [(0, [8.0f32, -3.0]), (3, [1.0, -0.375]), (-2, [8.0, -3.0])] {
        let out = run(HALVE, &[Array::scalar(n), x.clone()]);
        assert_eq!(out[0].to_vec::<i32>().unwrap(), vec![n.min(0)]);
        assert_eq!(out[1].to_vec::<f32>().unwrap(), want.to_vec());
    }
    // A long loop keeps a flat stack: iterations are a Rust loop.
    let out = run(HALVE, &[Array::scalar(100_000i32), x.clone()]);
    assert_eq!(out[1].to_vec::<f32>().unwrap(), vec![0.0, -0.0]);
    // One instruction alone, and the whole call.
    let f = parse_func(HALVE).unwrap();
    let n = Array::scalar(2i32);
    let y = eval_op(&f.body[1].op, &[&n, &x]).unwrap();
    assert_eq!(y.to_vec::<f32>().unwrap(), vec![2.0, -0.75]);
    let all = eval_call(&f.body[0].op, &[&n, &x]).unwrap();
    assert_eq!(all.len(), 2);
    assert_eq!(all[1], y);
}

#[test]
fn nested_loops_multiply() {
    // Counts i * j by an inner loop of j increments inside an outer loop of i.
    let src = "
func @mul(%i: i32[], %j: i32[]) -> (i32[]) {
  %z = constant 0 : i32[]
  %r = while %i, %j, %z, result=2, cond=func @oc(%i: i32[], %j: i32[], %a: i32[]) -> (bool[]) {
      %z = constant 0 : i32[]
      %p = gt %i, %z : bool[]
      return %p
    }, body=func @ob(%i: i32[], %j: i32[], %a: i32[]) -> (i32[], i32[], i32[]) {
      %one = constant 1 : i32[]
      %i2 = sub %i, %one : i32[]
      %a2 = while %j, %a, result=1, cond=func @ic(%k: i32[], %a: i32[]) -> (bool[]) {
          %z = constant 0 : i32[]
          %p = gt %k, %z : bool[]
          return %p
        }, body=func @ib(%k: i32[], %a: i32[]) -> (i32[], i32[]) {
          %one = constant 1 : i32[]
          %k2 = sub %k, %one : i32[]
          %a2 = add %a, %one : i32[]
          return %k2, %a2
        } : i32[]
      return %i2, %j, %a2
    } : i32[]
  return %r
}";
    let out = run(src, &[Array::scalar(7i32), Array::scalar(6i32)]);
    assert_eq!(out[0].to_vec::<i32>().unwrap(), vec![42]);
}

const SWITCH: &str = "
func @pick(%k: i32[], %x: f32[]) -> (f32[]) {
  %a = cond %k, %x, result=0, branches=[func @b0(%x: f32[]) -> (f32[]) {
      return %x
    }, func @b1(%x: f32[]) -> (f32[]) {
      %y = neg %x : f32[]
      return %y
    }, func @b2(%x: f32[]) -> (f32[]) {
      %y = add %x, %x : f32[]
      return %y
    }] : f32[]
  return %a
}";

#[test]
fn cond_picks_a_branch_and_out_of_range_picks_the_last() {
    for (k, want) in [
        (0, 3.0f32),
        (1, -3.0),
        (2, 6.0),
        (3, 6.0),
        (-1, 6.0),
        (i32::MIN, 6.0),
    ] {
        let out = run(SWITCH, &[Array::scalar(k), Array::scalar(3.0f32)]);
        assert_eq!(out[0].to_vec::<f32>().unwrap(), vec![want], "index {k}");
    }
    let src = "
func @if(%p: bool[], %x: f32[]) -> (f32[]) {
  %a = cond %p, %x, result=0, branches=[func @f(%x: f32[]) -> (f32[]) {
      %y = neg %x : f32[]
      return %y
    }, func @t(%x: f32[]) -> (f32[]) {
      return %x
    }] : f32[]
  return %a
}";
    for (p, want) in [(false, -2.0f32), (true, 2.0)] {
        let out = run(src, &[Array::scalar(p), Array::scalar(2.0f32)]);
        assert_eq!(out[0].to_vec::<f32>().unwrap(), vec![want]);
    }
}

/// A running sum and its partial sums, forwards and in reverse, with a carried counter.
const CUMSUM: &str = "
func @cumsum(%x: f32[4,2], %z: f32[2]) -> (f32[2], f32[4,2], f32[4,2], i32[]) {
  %n = constant 0 : i32[]
  %s = scan %z, %x, carry=1, length=4, result=0, body=func @b(%c: f32[2], %r: f32[2]) -> (f32[2], f32[2]) {
      %a = add %c, %r : f32[2]
      return %a, %a
    } : f32[2]
  %p = scan %z, %x, carry=1, length=4, result=1, body=func @b(%c: f32[2], %r: f32[2]) -> (f32[2], f32[2]) {
      %a = add %c, %r : f32[2]
      return %a, %a
    } : f32[4,2]
  %q = scan %z, %x, carry=1, length=4, reverse=1, result=1, body=func @b(%c: f32[2], %r: f32[2]) -> (f32[2], f32[2]) {
      %a = add %c, %r : f32[2]
      return %a, %a
    } : f32[4,2]
  %k = scan %n, carry=1, length=4, result=0, body=func @k(%i: i32[]) -> (i32[]) {
      %one = constant 1 : i32[]
      %j = add %i, %one : i32[]
      return %j
    } : i32[]
  return %s, %p, %q, %k
}";

#[test]
fn scan_runs_forwards_and_in_reverse() {
    let x = Array::from_vec([4, 2], vec![1.0f32, 10.0, 2.0, 20.0, 3.0, 30.0, 4.0, 40.0]).unwrap();
    let z = Array::from_vec([2], vec![0.5f32, 0.0]).unwrap();
    let out = run(CUMSUM, &[x, z]);
    assert_eq!(out[0].to_vec::<f32>().unwrap(), vec![10.5, 100.0]);
    assert_eq!(
        out[1].to_vec::<f32>().unwrap(),
        vec![1.5, 10.0, 3.5, 30.0, 6.5, 60.0, 10.5, 100.0]
    );
    assert_eq!(
        out[2].to_vec::<f32>().unwrap(),
        vec![10.5, 100.0, 9.5, 90.0, 7.5, 70.0, 4.5, 40.0]
    );
    assert_eq!(out[3].to_vec::<i32>().unwrap(), vec![4]);
}

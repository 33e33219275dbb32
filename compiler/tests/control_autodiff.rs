//! Derivatives through `while` and `cond` against central finite differences on the
//! interpreter (f64): forward mode for both, reverse mode for `cond` at every branch and at
//! indices out of range; reverse mode through `while` is an error saying why.
#![allow(clippy::unwrap_used)]

use ferrax_compiler::autodiff::{jvp, vjp};
use ferrax_ir::{parse_func, Func, Op};
use ferrax_runtime::{interpret, Array};

/// A loop of `%n` steps of `x <- sin(x) * w + x`, `w <- w * 1.5`; returns `x` and `w`.
const LOOP: &str = "
func @f(%n: i32[], %x: f64[2], %w: f64[2]) -> (f64[2], f64[2]) {
  %y = while %n, %x, %w, result=1, cond=func @c(%i: i32[], %x: f64[2], %w: f64[2]) -> (bool[]) {
      %z = constant 0 : i32[]
      %p = gt %i, %z : bool[]
      return %p
    }, body=func @b(%i: i32[], %x: f64[2], %w: f64[2]) -> (i32[], f64[2], f64[2]) {
      %one = constant 1 : i32[]
      %j = sub %i, %one : i32[]
      %s = sin %x : f64[2]
      %m = mul %s, %w : f64[2]
      %x2 = add %m, %x : f64[2]
      %k = constant 1.5 : f64[2]
      %w2 = mul %w, %k : f64[2]
      return %j, %x2, %w2
    } : f64[2]
  %v = while %n, %x, %w, result=2, cond=func @c(%i: i32[], %x: f64[2], %w: f64[2]) -> (bool[]) {
      %z = constant 0 : i32[]
      %p = gt %i, %z : bool[]
      return %p
    }, body=func @b(%i: i32[], %x: f64[2], %w: f64[2]) -> (i32[], f64[2], f64[2]) {
      %one = constant 1 : i32[]
      %j = sub %i, %one : i32[]
      %s = sin %x : f64[2]
      %m = mul %s, %w : f64[2]
      %x2 = add %m, %x : f64[2]
      %k = constant 1.5 : f64[2]
      %w2 = mul %w, %k : f64[2]
      return %j, %x2, %w2
    } : f64[2]
  return %y, %v
}";

/// Three branches of two results each, picked by `%k`.
const SWITCH: &str = "
func @g(%k: i32[], %x: f64[2], %w: f64[]) -> (f64[2], f64[]) {
  %a = cond %k, %x, %w, result=0, branches=[func @b0(%x: f64[2], %w: f64[]) -> (f64[2], f64[]) {
      %s = sin %x : f64[2]
      %wb = broadcast_in_dim %w, dims=[] : f64[2]
      %y = mul %s, %wb : f64[2]
      %t = reduce_sum %y, axes=[0] : f64[]
      return %y, %t
    }, func @b1(%x: f64[2], %w: f64[]) -> (f64[2], f64[]) {
      %y = mul %x, %x : f64[2]
      %t = mul %w, %w : f64[]
      return %y, %t
    }, func @b2(%x: f64[2], %w: f64[]) -> (f64[2], f64[]) {
      %y = exp %x : f64[2]
      return %y, %w
    }] : f64[2]
  %b = cond %k, %x, %w, result=1, branches=[func @b0(%x: f64[2], %w: f64[]) -> (f64[2], f64[]) {
      %s = sin %x : f64[2]
      %wb = broadcast_in_dim %w, dims=[] : f64[2]
      %y = mul %s, %wb : f64[2]
      %t = reduce_sum %y, axes=[0] : f64[]
      return %y, %t
    }, func @b1(%x: f64[2], %w: f64[]) -> (f64[2], f64[]) {
      %y = mul %x, %x : f64[2]
      %t = mul %w, %w : f64[]
      return %y, %t
    }, func @b2(%x: f64[2], %w: f64[]) -> (f64[2], f64[]) {
      %y = exp %x : f64[2]
      return %y, %w
    }] : f64[]
  %c = mul %b, %b : f64[]
  return %a, %c
}";

fn arr(shape: &[usize], v: &[f64]) -> Array {
    Array::from_vec(shape.to_vec(), v.to_vec()).unwrap()
}

/// `a`'s values, none for an integer array (which has no derivative).
fn floats(a: &Array) -> Vec<f64> {
    match a.dtype().is_float() {
        true => a.to_vec::<f64>().unwrap(),
        false => Vec::new(),
    }
}

/// `f`'s float outputs, flattened, at `args` with the float ones moved by `h` along `dirs`.
fn moved(f: &Func, args: &[Array], dirs: &[Option<Vec<f64>>], h: f64) -> Vec<f64> {
    let args: Vec<Array> = args
        .iter()
        .zip(dirs)
        .map(|(a, d)| match d {
            Some(d) => {
                let v: Vec<f64> = floats(a).iter().zip(d).map(|(x, d)| x + h * d).collect();
                arr(a.ty().dims(), &v)
            }
            None => a.clone(),
        })
        .collect();
    interpret(f, &args)
        .unwrap()
        .iter()
        .flat_map(floats)
        .collect()
}

fn close(got: &[f64], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (g, w) in got.iter().zip(want) {
        assert!(
            (g - w).abs() <= 1e-7 * w.abs().max(1.0),
            "{what}: {got:?} vs {want:?}"
        );
    }
}

/// Forward mode at `args` along `dirs` (integer operands: `None`) against differences.
fn check_jvp(f: &Func, args: &[Array], dirs: &[Option<Vec<f64>>]) {
    let program = jvp(f).unwrap();
    let mut all = args.to_vec();
    for (a, d) in args.iter().zip(dirs) {
        all.push(match d {
            Some(d) => arr(a.ty().dims(), d),
            None => a.clone(),
        });
    }
    let out = interpret(&program, &all).unwrap();
    let tangent: Vec<f64> = out[f.outputs.len()..].iter().flat_map(floats).collect();
    let h = 1e-6;
    let plus = moved(f, args, dirs, h);
    let minus = moved(f, args, dirs, -h);
    let fd: Vec<f64> = plus
        .iter()
        .zip(&minus)
        .map(|(p, m)| (p - m) / (2.0 * h))
        .collect();
    close(&tangent, &fd, &format!("jvp of @{}", f.name));
}

#[test]
fn forward_mode_through_a_loop() {
    let f = parse_func(LOOP).unwrap();
    for n in [0, 1, 4] {
        let args = [
            Array::scalar(n),
            arr(&[2], &[0.3, -1.2]),
            arr(&[2], &[0.7, 0.2]),
        ];
        check_jvp(
            &f,
            &args,
            &[None, Some(vec![1.0, 0.5]), Some(vec![-0.25, 2.0])],
        );
    }
}

/// The instructions of `program` named `name`, which must all be one call.
fn one_call(program: &Func, name: &str) -> usize {
    let at: Vec<usize> = (0..program.body.len())
        .filter(|&i| program.body[i].op.name() == name)
        .collect();
    let first = at.first().copied().unwrap();
    assert_eq!(program.call_instructions(first), at, "{program}");
    at.len()
}

#[test]
fn forward_mode_runs_a_loop_or_branch_once() {
    // `while`: the two primal results and their tangents come from one JVP loop.
    let f = parse_func(LOOP).unwrap();
    let program = jvp(&f).unwrap();
    assert_eq!(one_call(&program, "while"), 4, "{program}");
    let args = [
        Array::scalar(3),
        arr(&[2], &[0.3, -1.2]),
        arr(&[2], &[0.7, 0.2]),
    ];
    let mut all = args.to_vec();
    all.extend([
        Array::scalar(0),
        arr(&[2], &[1.0, 0.5]),
        arr(&[2], &[0.0, 0.0]),
    ]);
    let primal = interpret(&f, &args).unwrap();
    let out = interpret(&program, &all).unwrap();
    for (a, b) in primal.iter().zip(&out) {
        assert_eq!(floats(a), floats(b));
    }
    // `cond`: likewise, both results of the picked branch and their tangents.
    let g = parse_func(SWITCH).unwrap();
    let program = jvp(&g).unwrap();
    assert_eq!(one_call(&program, "cond"), 4, "{program}");
    // `scan`: the final state, the stacked outputs, their tangents and the integer count.
    let h = parse_func(&RNN.replace("REVERSE", "")).unwrap();
    let program = jvp(&h).unwrap();
    assert_eq!(one_call(&program, "scan"), 5, "{program}");
}

#[test]
fn reverse_mode_through_a_loop_is_refused() {
    let e = vjp(&parse_func(LOOP).unwrap()).unwrap_err().to_string();
    assert!(e.contains("`while` loop") && e.contains("lax::scan"), "{e}");
}

#[test]
fn both_modes_through_every_branch() {
    let f = parse_func(SWITCH).unwrap();
    let program = vjp(&f).unwrap();
    let (x, w) = ([0.4, -0.9], [1.3]);
    let (ct_a, ct_c) = ([0.5, -1.5], [2.0]);
    for k in [-1, 0, 1, 2, 7] {
        let args = [Array::scalar(k), arr(&[2], &x), arr(&[], &w)];
        check_jvp(&f, &args, &[None, Some(vec![1.0, -2.0]), Some(vec![0.5])]);
        // Reverse mode: each operand's cotangent against differences of <ct, f>.
        let mut all = args.to_vec();
        all.extend([arr(&[2], &ct_a), arr(&[], &ct_c)]);
        let out = interpret(&program, &all).unwrap();
        let weights: Vec<f64> = ct_a.iter().chain(&ct_c).copied().collect();
        let h = 1e-6;
        for (j, n) in [(1, 2), (2, 1)] {
            let got = floats(&out[2 + j]);
            let mut want = Vec::new();
            for i in 0..n {
                let mut dirs = vec![None, Some(vec![0.0; 2]), Some(vec![0.0])];
                if let Some(d) = dirs[j].as_mut() {
                    d[i] = 1.0;
                }
                let dot = |v: Vec<f64>| v.iter().zip(&weights).map(|(a, b)| a * b).sum::<f64>();
                want.push(
                    (dot(moved(&f, &args, &dirs, h)) - dot(moved(&f, &args, &dirs, -h)))
                        / (2.0 * h),
                );
            }
            close(&got, &want, &format!("vjp of operand {j} at index {k}"));
        }
    }
}

/// An RNN step scanned over 4 slices, the weights a constant of every step, a counter
/// carried beside the state; `REVERSE` is replaced to scan the other way.
const RNN: &str = "
func @rnn(%w: f64[2,2], %h: f64[2], %xs: f64[4,2]) -> (f64[2], f64[4,2], i32[]) {
  %n = constant 0 : i32[]
  %last = scan %w, %h, %n, %xs, consts=1, carry=2, length=4, REVERSE result=0, body=func @step(%w: f64[2,2], %h: f64[2], %i: i32[], %x: f64[2]) -> (f64[2], i32[], f64[2]) {
      %m = dot_general %w, %h, contract=[1]x[0] : f64[2]
      %a = add %m, %x : f64[2]
      %t = tanh %a : f64[2]
      %s = sin %t : f64[2]
      %one = constant 1 : i32[]
      %j = add %i, %one : i32[]
      return %t, %j, %s
    } : f64[2]
  %ys = scan %w, %h, %n, %xs, consts=1, carry=2, length=4, REVERSE result=2, body=func @step(%w: f64[2,2], %h: f64[2], %i: i32[], %x: f64[2]) -> (f64[2], i32[], f64[2]) {
      %m = dot_general %w, %h, contract=[1]x[0] : f64[2]
      %a = add %m, %x : f64[2]
      %t = tanh %a : f64[2]
      %s = sin %t : f64[2]
      %one = constant 1 : i32[]
      %j = add %i, %one : i32[]
      return %t, %j, %s
    } : f64[4,2]
  %count = scan %w, %h, %n, %xs, consts=1, carry=2, length=4, REVERSE result=1, body=func @step(%w: f64[2,2], %h: f64[2], %i: i32[], %x: f64[2]) -> (f64[2], i32[], f64[2]) {
      %m = dot_general %w, %h, contract=[1]x[0] : f64[2]
      %a = add %m, %x : f64[2]
      %t = tanh %a : f64[2]
      %s = sin %t : f64[2]
      %one = constant 1 : i32[]
      %j = add %i, %one : i32[]
      return %t, %j, %s
    } : i32[]
  return %last, %ys, %count
}";

#[test]
fn both_modes_through_a_scan_each_way() {
    for reverse in ["", "reverse=1,"] {
        let f = parse_func(&RNN.replace("REVERSE", reverse)).unwrap();
        let w = [0.9, -0.4, 0.3, 1.1];
        let h = [0.2, -0.5];
        let xs = [0.1, 0.7, -0.3, 0.2, 0.5, -0.8, 0.0, 0.4];
        let args = [arr(&[2, 2], &w), arr(&[2], &h), arr(&[4, 2], &xs)];
        let dirs = [
            Some(vec![0.3, -1.0, 0.5, 0.25]),
            Some(vec![1.0, 0.5]),
            Some((0..8).map(|i| (i as f64 - 3.5) / 4.0).collect()),
        ];
        check_jvp(&f, &args, &dirs);
        // Reverse mode against differences of <ct, f> along each coordinate.
        let program = vjp(&f).unwrap();
        let ct_last = [0.5, -2.0];
        let ct_ys: Vec<f64> = (0..8).map(|i| 0.25 * i as f64 - 1.0).collect();
        let mut all = args.to_vec();
        all.extend([
            arr(&[2], &ct_last),
            arr(&[4, 2], &ct_ys),
            Array::scalar(0i32),
        ]);
        let out = interpret(&program, &all).unwrap();
        let weights: Vec<f64> = ct_last.iter().chain(&ct_ys).copied().collect();
        let dot = |v: Vec<f64>| {
            v[..10]
                .iter()
                .zip(&weights)
                .map(|(a, b)| a * b)
                .sum::<f64>()
        };
        let h = 1e-6;
        for (j, size) in [(0, 4), (1, 2), (2, 8)] {
            let got = floats(&out[3 + j]);
            let want: Vec<f64> = (0..size)
                .map(|i| {
                    let mut dirs: Vec<Option<Vec<f64>>> =
                        [4, 2, 8].iter().map(|&n| Some(vec![0.0; n])).collect();
                    if let Some(d) = dirs[j].as_mut() {
                        d[i] = 1.0;
                    }
                    let plus = dot(moved(&f, &args, &dirs, h));
                    let minus = dot(moved(&f, &args, &dirs, -h));
                    (plus - minus) / (2.0 * h)
                })
                .collect();
            close(&got, &want, &format!("vjp of operand {j} ({reverse})"));
        }
    }
}

/// The instructions named `name` in the bodies of `program`'s scans whose body is named
/// `body`, nested calls included.
fn count_in_scans(program: &Func, body: &str, name: &str) -> usize {
    program
        .body
        .iter()
        .filter_map(|ins| match &ins.op {
            Op::Scan(s) if s.body.name == body => Some(&s.body),
            _ => None,
        })
        .map(|f| f.body.iter().filter(|i| i.op.name() == name).count())
        .sum()
}

/// The instructions of `program` that are scans whose body is named `body`.
fn scans_of(program: &Func, body: &str) -> Vec<usize> {
    (0..program.body.len())
        .filter(|&i| matches!(&program.body[i].op, Op::Scan(s) if s.body.name == body))
        .collect()
}

#[test]
fn reverse_mode_through_a_scan_stores_each_steps_residuals() {
    // As JAX does: the backward scan reads the forward values it needs (tanh's output, sin's
    // derivative) from stacked residuals instead of running the step's forward pass again.
    let f = parse_func(&RNN.replace("REVERSE", "")).unwrap();
    let program = vjp(&f).unwrap();
    let backward = "step_backward";
    for forward_only in ["tanh", "sin", "cos"] {
        assert_eq!(
            count_in_scans(&program, backward, forward_only),
            0,
            "{forward_only} recomputed in\n{program}"
        );
    }
    // The two products of the step's transpose (the cotangents of `w` and `h`), not the
    // forward one.
    let calls = scans_of(&program, backward).len();
    assert!(calls > 0, "{program}");
    assert_eq!(
        count_in_scans(&program, backward, "dot_general"),
        2 * calls,
        "{program}"
    );
}

#[test]
fn one_backward_scan_serves_the_final_state_and_the_stacked_outputs() {
    // Both results get cotangents: one forward scan and one backward scan (a call of one
    // instruction per operand cotangent), not one of each per result.
    let f = parse_func(&RNN.replace("REVERSE", "")).unwrap();
    let program = vjp(&f).unwrap();
    for body in ["step_backward", "step_vjp_forward"] {
        let at = scans_of(&program, body);
        let first = *at
            .first()
            .unwrap_or_else(|| panic!("no {body} scan in\n{program}"));
        assert_eq!(program.call_instructions(first), at, "{body}: {program}");
    }
}

#[test]
fn one_backward_cond_serves_both_results() {
    // Both of the switch's results get cotangents: the taken branch's reverse mode runs once
    // for both (one call, one instruction per operand), not once per result.
    let program = vjp(&parse_func(SWITCH).unwrap()).unwrap();
    let at: Vec<usize> = (0..program.body.len())
        .filter(
            |&i| matches!(&program.body[i].op, Op::Cond(c) if c.branches[0].name.contains("_ct")),
        )
        .collect();
    let first = *at
        .first()
        .unwrap_or_else(|| panic!("no backward cond in\n{program}"));
    assert_eq!(program.call_instructions(first), at, "{program}");
    let Op::Cond(c) = &program.body[first].op else {
        unreachable!()
    };
    assert_eq!(c.branches[0].name, "b0_vjp_ct0_1", "{program}");
}

/// w13's step: the stacked outputs are `tanh(w h + x)²`, so the backward pass reads tanh's
/// output itself as well as `1 - tanh²`.
const SQUARED_RNN: &str = "
func @rnn(%w: f64[2,2], %h: f64[2], %xs: f64[4,2]) -> (f64[4,2]) {
  %ys = scan %w, %h, %xs, consts=1, carry=1, length=4, result=1, body=func @step(%w: f64[2,2], %h: f64[2], %x: f64[2]) -> (f64[2], f64[2]) {
      %m = dot_general %w, %h, contract=[1]x[0] : f64[2]
      %a = add %m, %x : f64[2]
      %t = tanh %a : f64[2]
      %s = mul %t, %t : f64[2]
      return %t, %s
    } : f64[4,2]
  return %ys
}";

#[test]
fn cheap_values_of_stored_ones_are_computed_again_not_stored() {
    // tanh's output is stored for the squares' derivative anyway, so `1 - tanh²` is computed
    // again from it in the backward scan (as JAX's rule for tanh does) rather than stored
    // beside it: two residuals a step, the carried state and tanh's output.
    let f = parse_func(SQUARED_RNN).unwrap();
    let program = vjp(&f).unwrap();
    let forward = program
        .body
        .iter()
        .find_map(|ins| match &ins.op {
            Op::Scan(s) if s.body.name == "step_vjp_forward" => Some(&s.body),
            _ => None,
        })
        .unwrap();
    assert_eq!(forward.outputs.len(), 2 + 2, "{forward}");
    assert_eq!(
        count_in_scans(&program, "step_vjp_forward", "sub"),
        0,
        "{program}"
    );
    let backward_calls = scans_of(&program, "step_backward").len();
    assert_eq!(
        count_in_scans(&program, "step_backward", "sub"),
        backward_calls,
        "{program}"
    );
    // The cotangents against central differences of <ct, f> along a direction.
    let w = [0.9, -0.4, 0.3, 1.1];
    let h = [0.2, -0.5];
    let xs = [0.1, 0.7, -0.3, 0.2, 0.5, -0.8, 0.0, 0.4];
    let args = [arr(&[2, 2], &w), arr(&[2], &h), arr(&[4, 2], &xs)];
    let ct: Vec<f64> = (0..8).map(|i| 0.25 * i as f64 - 1.0).collect();
    let mut all = args.to_vec();
    all.push(arr(&[4, 2], &ct));
    let out = interpret(&program, &all).unwrap();
    let dirs = [
        vec![0.3, -1.0, 0.5, 0.25],
        vec![1.0, 0.5],
        (0..8).map(|i| (i as f64 - 3.5) / 4.0).collect::<Vec<_>>(),
    ];
    let got: f64 = (0..3)
        .map(|j| {
            let g = floats(&out[1 + j]);
            g.iter().zip(&dirs[j]).map(|(a, b)| a * b).sum::<f64>()
        })
        .sum();
    let dot = |v: Vec<f64>| v.iter().zip(&ct).map(|(a, b)| a * b).sum::<f64>();
    let d: Vec<Option<Vec<f64>>> = dirs.iter().cloned().map(Some).collect();
    let step = 1e-6;
    let want = (dot(moved(&f, &args, &d, step)) - dot(moved(&f, &args, &d, -step))) / (2.0 * step);
    close(&[got], &[want], "vjp along a direction");
}

/// The RNN step of `RNN`, checkpointed under `POLICY`, scanned 4 steps.
const REMAT_RNN: &str = "
func @rnn(%w: f64[2,2], %h: f64[2], %xs: f64[4,2]) -> (f64[4,2]) {
  %ys = scan %w, %h, %xs, consts=1, carry=1, length=4, result=1, body=func @step(%w: f64[2,2], %h: f64[2], %x: f64[2]) -> (f64[2], f64[2]) {
      %t = POLICY %w, %h, %x, result=0, body=func @cell(%w: f64[2,2], %h: f64[2], %x: f64[2]) -> (f64[2], f64[2]) {
          %m = dot_general %w, %h, contract=[1]x[0] : f64[2]
          %a = add %m, %x : f64[2]
          %t = tanh %a : f64[2]
          %s = sin %t : f64[2]
          return %t, %s
        } : f64[2]
      %s = POLICY %w, %h, %x, result=1, body=func @cell(%w: f64[2,2], %h: f64[2], %x: f64[2]) -> (f64[2], f64[2]) {
          %m = dot_general %w, %h, contract=[1]x[0] : f64[2]
          %a = add %m, %x : f64[2]
          %t = tanh %a : f64[2]
          %s = sin %t : f64[2]
          return %t, %s
        } : f64[2]
      return %t, %s
    } : f64[4,2]
  return %ys
}";

#[test]
fn a_checkpointed_scan_body_stores_what_its_policy_saves() {
    use ferrax_ir::print_func;
    let args = [
        arr(&[2, 2], &[0.9, -0.4, 0.3, 1.1]),
        arr(&[2], &[0.2, -0.5]),
        arr(&[4, 2], &[0.1, 0.7, -0.3, 0.2, 0.5, -0.8, 0.0, 0.4]),
    ];
    let ct = arr(&[4, 2], &[0.5, -2.0, 1.0, 0.25, -1.0, 0.75, 2.0, -0.5]);
    let plain =
        vjp(&parse_func(&REMAT_RNN.replace("POLICY", "remat_everything")).unwrap()).unwrap();
    let mut all = args.to_vec();
    all.push(ct);
    let want = interpret(&plain, &all).unwrap();
    // The stacked residuals of the forward scan: each step's carried state, then what the
    // policy saves (the product) or everything the backward pass reads.
    for (policy, stored) in [("remat", 1), ("remat_dots", 2), ("remat_dots_no_batch", 2)] {
        let f = parse_func(&REMAT_RNN.replace("POLICY", policy)).unwrap();
        assert_eq!(
            parse_func(&print_func(&f)).unwrap(),
            f,
            "{policy} round trip"
        );
        let program = vjp(&f).unwrap();
        let forward = program
            .body
            .iter()
            .find_map(|ins| match &ins.op {
                Op::Scan(s) if s.body.name == "step_vjp_forward" => Some(s),
                _ => None,
            })
            .unwrap();
        // The carried state and the stacked output come first.
        assert_eq!(
            forward.body.outputs.len(),
            2 + stored,
            "{policy}:\n{program}"
        );
        let got = interpret(&program, &all).unwrap();
        for (g, w) in got.iter().zip(&want) {
            close(&floats(g), &floats(w), policy);
        }
    }
}

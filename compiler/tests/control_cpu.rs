//! Control flow through the pipeline: each region is simplified on its own, the CPU executor
//! runs a call once for all its result instructions as a host step between kernels, each
//! region an executable of its own, and the results are the interpreter's to kernels'
//! accuracy.
#![allow(clippy::unwrap_used)]

use ferrax_compiler::pipeline::{compile, Backend};
use ferrax_ir::{parse_func, print_func};
use ferrax_runtime::{interpret, Array};

/// Kernels before and after a loop (whose body has work to simplify) and a `cond`.
const PROGRAM: &str = "
func @f(%n: i32[], %x: f32[64], %k: i32[]) -> (f32[64], i32[], f32[64]) {
  %two = constant 2.0 : f32[64]
  %a = mul %x, %two : f32[64]
  %b = tanh %a : f32[64]
  %y = while %n, %b, result=1, cond=func @c(%i: i32[], %x: f32[64]) -> (bool[]) {
      %z = constant 0 : i32[]
      %p = gt %i, %z : bool[]
      return %p
    }, body=func @b(%i: i32[], %x: f32[64]) -> (i32[], f32[64]) {
      %one = constant 1 : i32[]
      %j = sub %i, %one : i32[]
      %fone = constant 1.0 : f32[64]
      %x1 = mul %x, %fone : f32[64]
      %h = constant 0.75 : f32[64]
      %y = mul %x1, %h : f32[64]
      %s = sin %y : f32[64]
      %y2 = add %y, %s : f32[64]
      return %j, %y2
    } : f32[64]
  %m = while %n, %b, result=0, cond=func @c(%i: i32[], %x: f32[64]) -> (bool[]) {
      %z = constant 0 : i32[]
      %p = gt %i, %z : bool[]
      return %p
    }, body=func @b(%i: i32[], %x: f32[64]) -> (i32[], f32[64]) {
      %one = constant 1 : i32[]
      %j = sub %i, %one : i32[]
      %fone = constant 1.0 : f32[64]
      %x1 = mul %x, %fone : f32[64]
      %h = constant 0.75 : f32[64]
      %y = mul %x1, %h : f32[64]
      %s = sin %y : f32[64]
      %y2 = add %y, %s : f32[64]
      return %j, %y2
    } : i32[]
  %e = exp %y : f32[64]
  %r = add %e, %x : f32[64]
  %c = cond %k, %r, %x, result=0, branches=[func @b0(%r: f32[64], %x: f32[64]) -> (f32[64]) {
      %s = sub %r, %x : f32[64]
      return %s
    }, func @b1(%r: f32[64], %x: f32[64]) -> (f32[64]) {
      %n = neg %r : f32[64]
      return %n
    }] : f32[64]
  return %r, %m, %c
}";

#[test]
fn loops_run_on_the_cpu_as_on_the_interpreter() {
    let f = parse_func(PROGRAM).unwrap();
    let compiled = compile(&f, &Backend::Cpu).unwrap();
    // The body's `mul %x, 1.0` is simplified away inside the loop.
    let simplified = print_func(&compiled.simplified);
    assert!(!simplified.contains("constant 1.0"), "{simplified}");
    insta::assert_snapshot!("fused", compiled.executable.fused().unwrap());
    let x: Vec<f32> = (0..64).map(|i| (i as f32 - 30.0) / 17.0).collect();
    for (n, k) in [(0, 0), (3, 1), (7, 5), (-1, -2)] {
        let args = vec![
            Array::scalar(n),
            Array::from_vec([64], x.clone()).unwrap(),
            Array::scalar(k),
        ];
        let want = interpret(&f, &args).unwrap();
        let got = compiled.executable.run(args).unwrap();
        // Kernels compute tanh, sin and exp within 3 ULP of the interpreter.
        for (g, w) in got.iter().zip(&want) {
            assert_eq!(g.ty(), w.ty());
            if let (Ok(g), Ok(w)) = (g.to_vec::<f32>(), w.to_vec::<f32>()) {
                for (a, b) in g.iter().zip(&w) {
                    assert!(
                        (a - b).abs() <= 1e-5 * b.abs().max(1.0),
                        "n={n} k={k}: {a} vs {b}"
                    );
                }
            } else {
                assert_eq!(g, w);
            }
        }
    }
}

/// An artifact carries a loop as it carries everything else: exported, loaded and run, it
/// gives the compiled program's results.
#[test]
fn artifacts_carry_loops() {
    use ferrax_compiler::backend::CpuExecutable;
    let f = parse_func(PROGRAM).unwrap();
    let (simplified, _) = ferrax_compiler::simplify::simplify(&f).unwrap();
    let exe = CpuExecutable::compile(&simplified).unwrap();
    let loaded = CpuExecutable::from_artifact(&exe.to_artifact().unwrap()).unwrap();
    let args = vec![
        Array::scalar(5i32),
        Array::from_vec([64], vec![0.25f32; 64]).unwrap(),
        Array::scalar(1i32),
    ];
    assert_eq!(loaded.fused(), exe.fused());
    assert_eq!(loaded.run(&args).unwrap(), exe.run(&args).unwrap());
}

/// A `cond` on a constant index is the branch it picks (out of range: the last); its two
/// result instructions inline the branch once.
#[test]
fn a_cond_on_a_constant_is_its_branch() {
    let f = parse_func(
        "func @f(%x: f32[3]) -> (f32[3], f32[]) {
  %k = constant 7 : i32[]
  %a = cond %k, %x, result=0, branches=[func @b0(%x: f32[3]) -> (f32[3], f32[]) {
      %s = reduce_sum %x, axes=[0] : f32[]
      return %x, %s
    }, func @b1(%x: f32[3]) -> (f32[3], f32[]) {
      %e = exp %x : f32[3]
      %s = reduce_sum %e, axes=[0] : f32[]
      return %e, %s
    }] : f32[3]
  %b = cond %k, %x, result=1, branches=[func @b0(%x: f32[3]) -> (f32[3], f32[]) {
      %s = reduce_sum %x, axes=[0] : f32[]
      return %x, %s
    }, func @b1(%x: f32[3]) -> (f32[3], f32[]) {
      %e = exp %x : f32[3]
      %s = reduce_sum %e, axes=[0] : f32[]
      return %e, %s
    }] : f32[]
  return %a, %b
}",
    )
    .unwrap();
    let (simplified, _) = ferrax_compiler::simplify::simplify(&f).unwrap();
    insta::assert_snapshot!(print_func(&simplified), @r"
    func @f(%0: f32[3]) -> (f32[3], f32[]) {
      %1 = exp %0 : f32[3]
      %2 = reduce_sum %1, axes=[0] : f32[]
      return %1, %2
    }
    ");
}

/// A scan output nobody reads is dropped from the body (and so not computed), the other
/// instructions' results renumbered; values are unchanged.
#[test]
fn unread_scan_outputs_are_not_computed() {
    let f = parse_func(
        "func @f(%h: f32[3], %xs: f32[4,3]) -> (f32[4,3], f32[3]) {
  %ys = scan %h, %xs, carry=1, length=4, result=2, body=func @b(%h: f32[3], %x: f32[3]) -> (f32[3], f32[3], f32[3]) {
      %a = add %h, %x : f32[3]
      %e = exp %a : f32[3]
      %t = tanh %a : f32[3]
      return %t, %e, %a
    } : f32[4,3]
  %last = scan %h, %xs, carry=1, length=4, result=0, body=func @b(%h: f32[3], %x: f32[3]) -> (f32[3], f32[3], f32[3]) {
      %a = add %h, %x : f32[3]
      %e = exp %a : f32[3]
      %t = tanh %a : f32[3]
      return %t, %e, %a
    } : f32[3]
  return %ys, %last
}",
    )
    .unwrap();
    let (simplified, _) = ferrax_compiler::simplify::simplify(&f).unwrap();
    insta::assert_snapshot!(print_func(&simplified), @r"
    func @f(%0: f32[3], %1: f32[4,3]) -> (f32[4,3], f32[3]) {
      %2 = scan %0, %1, carry=1, length=4, result=1, body=func @b(%0: f32[3], %1: f32[3]) -> (f32[3], f32[3]) {
          %2 = add %0, %1 : f32[3]
          %3 = tanh %2 : f32[3]
          return %3, %2
        } : f32[4,3]
      %3 = scan %0, %1, carry=1, length=4, result=0, body=func @b(%0: f32[3], %1: f32[3]) -> (f32[3], f32[3]) {
          %2 = add %0, %1 : f32[3]
          %3 = tanh %2 : f32[3]
          return %3, %2
        } : f32[3]
      return %2, %3
    }
    ");
    let args = vec![
        Array::from_vec([3], vec![0.5f32, -1.0, 2.0]).unwrap(),
        Array::from_vec([4, 3], (0..12).map(|i| i as f32 / 10.0).collect()).unwrap(),
    ];
    assert_eq!(
        interpret(&simplified, &args).unwrap(),
        interpret(&f, &args).unwrap()
    );
}

/// Work on a scan's constants alone leaves the loop: `exp(w) * 2` is computed once and comes
/// in as a constant; the broadcast of `b` stays (a kernel reads it in place).
#[test]
fn invariant_work_leaves_the_scan() {
    let f = parse_func(
        "func @f(%w: f32[3], %b: f32[], %h: f32[3], %xs: f32[4,3]) -> (f32[3]) {
  %last = scan %w, %b, %h, %xs, consts=2, carry=1, length=4, result=0, body=func @s(%w: f32[3], %b: f32[], %h: f32[3], %x: f32[3]) -> (f32[3]) {
      %e = exp %w : f32[3]
      %two = constant 2.0 : f32[3]
      %d = mul %e, %two : f32[3]
      %bb = broadcast_in_dim %b, dims=[] : f32[3]
      %m = mul %h, %d : f32[3]
      %a = add %m, %x : f32[3]
      %t = add %a, %bb : f32[3]
      %y = tanh %t : f32[3]
      return %y
    } : f32[3]
  return %last
}",
    )
    .unwrap();
    let (simplified, _) = ferrax_compiler::simplify::simplify(&f).unwrap();
    insta::assert_snapshot!(print_func(&simplified), @r"
    func @f(%0: f32[3], %1: f32[], %2: f32[3], %3: f32[4,3]) -> (f32[3]) {
      %4 = exp %0 : f32[3]
      %5 = constant 2.0 : f32[3]
      %6 = mul %4, %5 : f32[3]
      %7 = scan %0, %1, %6, %2, %3, consts=3, carry=1, length=4, result=0, body=func @s(%0: f32[3], %1: f32[], %2: f32[3], %3: f32[3], %4: f32[3]) -> (f32[3]) {
          %5 = mul %3, %2 : f32[3]
          %6 = add %5, %4 : f32[3]
          %7 = broadcast_in_dim %1, dims=[] : f32[3]
          %8 = add %6, %7 : f32[3]
          %9 = tanh %8 : f32[3]
          return %9
        } : f32[3]
      return %7
    }
    ");
    let args = vec![
        Array::from_vec([3], vec![0.5f32, -1.0, 0.25]).unwrap(),
        Array::scalar(0.125f32),
        Array::from_vec([3], vec![0.1f32, 0.2, -0.3]).unwrap(),
        Array::from_vec([4, 3], (0..12).map(|i| i as f32 / 10.0).collect()).unwrap(),
    ];
    assert_eq!(
        interpret(&simplified, &args).unwrap(),
        interpret(&f, &args).unwrap()
    );
}

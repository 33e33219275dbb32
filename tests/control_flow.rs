//! `lax::cond`, `lax::switch`, `lax::while_loop` and `lax::fori_loop`: results eagerly, traced
//! and under `jit` on the CPU; closures over enclosing tracers; loops compiled once whatever
//! the trip count; derivatives against finite differences; mistakes as errors at the line that
//! makes them (marked `// @name`).
#![allow(clippy::unwrap_used)]

use ferrax::{grad, jacfwd, jit, jvp, lax, trace, DType, Error, Tensor};

fn f32s(shape: &[usize]) -> Tensor {
    Tensor::spec(DType::F32, shape.to_vec())
}

fn v32(t: &Tensor) -> Vec<f32> {
    t.to_vec::<f32>().unwrap()
}

/// `x` halved until its sum is below `limit`, with the number of halvings.
fn halve_until(x: &Tensor, limit: &Tensor) -> (Tensor, Tensor) {
    lax::while_loop(
        |(x, _): (Tensor, Tensor)| x.sum(..).greater(limit),
        |(x, n): (Tensor, Tensor)| (x * 0.5, n + 1),
        (x.clone(), Tensor::scalar(0i32)),
    )
}

#[test]
fn a_data_dependent_loop_eagerly_traced_and_jitted() {
    let x = Tensor::from_vec([3], vec![4.0f32, 8.0, 4.0]);
    let limit = Tensor::scalar(1.0f32);
    let (y, n) = halve_until(&x, &limit);
    assert_eq!(v32(&y), vec![0.25, 0.5, 0.25]);
    assert_eq!(n.to_vec::<i32>().unwrap(), vec![4]);
    // Traced: one `while` per carried value, closing over `limit`, which becomes an operand.
    let f = trace(
        |(x, limit): (Tensor, Tensor)| halve_until(&x, &limit),
        &(f32s(&[3]), f32s(&[])),
    )
    .unwrap();
    let whiles: Vec<_> = f.body.iter().filter(|i| i.op.name() == "while").collect();
    assert_eq!(whiles.len(), 2);
    assert_eq!(whiles[0].args.len(), 3, "{f}");
    // The same operands (the eager counter's 0 one constant), so one call runs the loop once.
    assert_eq!(whiles[0].args, whiles[1].args, "{f}");
    let jitted = jit(|(x, limit): (Tensor, Tensor)| halve_until(&x, &limit));
    let (y, n) = jitted.call((x, Tensor::scalar(3.0f32))).unwrap();
    assert_eq!(v32(&y), vec![0.5, 1.0, 0.5]);
    assert_eq!(n.to_vec::<i32>().unwrap(), vec![3]);
}

#[test]
fn fori_loop_compiles_once_whatever_the_trip_count() {
    let f = jit(|(x, n): (Tensor, Tensor)| {
        lax::fori_loop(
            0,
            &n,
            |i, acc: Tensor| &acc + i.astype(DType::F32) * &acc,
            x,
        )
    });
    let x = Tensor::scalar(1.0f32);
    for (n, want) in [(0, 1.0f32), (1, 1.0), (4, 24.0), (6, 720.0)] {
        let y = f.call((x.clone(), Tensor::scalar(n))).unwrap();
        assert_eq!(v32(&y), vec![want], "n = {n}");
    }
    assert_eq!(f.trace_count(), 1);
    // Bounds as Rust numbers, a tuple carry.
    let (a, b) = lax::fori_loop(
        2,
        5,
        |i, (a, b): (Tensor, Tensor)| (&a + &i, &b * 2.0),
        (Tensor::scalar(0i32), Tensor::scalar(1.0f32)),
    );
    assert_eq!(a.to_vec::<i32>().unwrap(), vec![9]);
    assert_eq!(v32(&b), vec![8.0]);
}

/// A value that several branches close over is one operand of the `cond`, read by each.
#[test]
fn a_value_both_branches_read_is_passed_once() {
    let pick = |(p, x, w, v): (Tensor, Tensor, Tensor, Tensor)| {
        lax::cond(&p, |x: Tensor| &x * &w + &v, |x: Tensor| &x - &w, x)
    };
    let specs = (
        Tensor::spec(DType::Bool, []),
        f32s(&[2]),
        f32s(&[2]),
        f32s(&[2]),
    );
    let f = trace(pick, &specs).unwrap();
    let cond = f.body.iter().find(|i| i.op.name() == "cond").unwrap();
    // The predicate, `x`, then `w` once and `v`.
    assert_eq!(cond.args.len(), 4, "{f}");
    let x = Tensor::from_vec([2], vec![1.5f32, -2.0]);
    let w = Tensor::from_vec([2], vec![2.0f32, 0.5]);
    let v = Tensor::from_vec([2], vec![0.25f32, 1.0]);
    let jitted = jit(pick);
    for (p, want) in [(true, vec![3.25f32, 0.0]), (false, vec![-0.5, -2.5])] {
        let args = (Tensor::scalar(p), x.clone(), w.clone(), v.clone());
        assert_eq!(v32(&jitted.call(args.clone()).unwrap()), want, "p = {p}");
        assert_eq!(v32(&pick(args)), want, "p = {p}, eagerly");
    }
}

#[test]
fn cond_and_switch_pick_one_branch() {
    let f = jit(|(p, k, x): (Tensor, Tensor, Tensor)| {
        let c = lax::cond(&p, |x: Tensor| x.exp(), |x: Tensor| -x, x.clone());
        let s = lax::switch(
            &k,
            [
                &|(x, c): (Tensor, Tensor)| &x + &c,
                &|(x, c): (Tensor, Tensor)| &x * &c,
                &|(x, _c): (Tensor, Tensor)| x.square(),
            ],
            (x, c.clone()),
        );
        (c, s)
    });
    let x = Tensor::from_vec([2], vec![0.0f32, 2.0]);
    let run = |p: bool, k: i32| {
        let (c, s) = f
            .call((Tensor::scalar(p), Tensor::scalar(k), x.clone()))
            .unwrap();
        (v32(&c), v32(&s))
    };
    assert_eq!(run(false, 0), (vec![-0.0, -2.0], vec![0.0, 0.0]));
    assert_eq!(run(true, 1).0, vec![1.0, 2.0f32.exp()]);
    assert_eq!(run(false, 1).1, vec![-0.0, -4.0]);
    // Out of range indices clamp, as in JAX: below 0 is branch 0, above is the last.
    assert_eq!(run(false, -5).1, vec![0.0, 0.0]);
    assert_eq!(run(false, 9).1, vec![0.0, 4.0]);
}

#[test]
fn derivatives_through_control_flow() {
    // Reverse mode through cond, against the branch's own derivative.
    let g = grad(|(p, x): (Tensor, Tensor)| {
        lax::cond(
            &p,
            |x: Tensor| x.sin().sum(..),
            |x: Tensor| (&x * &x).sum(..),
            x,
        )
    });
    let x = Tensor::from_vec([2], vec![0.5f32, -1.0]);
    let (_, gx) = g((Tensor::scalar(true), x.clone()));
    let want: Vec<f32> = [0.5f32, -1.0].iter().map(|v| v.cos()).collect();
    assert_eq!(v32(&gx), want);
    let (_, gx) = g((Tensor::scalar(false), x.clone()));
    assert_eq!(v32(&gx), vec![1.0, -2.0]);
    // Forward mode through a loop against central differences (f64).
    let f = |x: Tensor| lax::fori_loop(0, 5, |_, y: Tensor| (&y * 0.9).sin() + &y * 0.1, x);
    let x0 = 0.7f64;
    let (_, t) = jvp(f, &Tensor::scalar(x0), &Tensor::scalar(1.0f64)).unwrap();
    let at = |x: f64| f(Tensor::scalar(x)).to_vec::<f64>().unwrap()[0];
    let h = 1e-6;
    let fd = (at(x0 + h) - at(x0 - h)) / (2.0 * h);
    let t = t.to_vec::<f64>().unwrap()[0];
    assert!((t - fd).abs() < 1e-8, "{t} vs {fd}");
}

/// An RNN over the rows of `xs`: the final state and every state.
fn rnn(w: &Tensor, h: Tensor, xs: Tensor) -> (Tensor, Tensor) {
    lax::scan(
        |h: Tensor, x: Tensor| {
            let next = (w.matmul(&h) + x).tanh();
            (next.clone(), next)
        },
        h,
        xs,
    )
}

#[test]
fn scan_matches_a_rust_loop_and_differentiates() {
    let w = Tensor::from_vec([2, 2], vec![0.9f64, -0.4, 0.3, 1.1]);
    let h = Tensor::from_vec([2], vec![0.2f64, -0.5]);
    let xs = Tensor::from_vec(
        [5, 2],
        (0..10).map(|i| (i as f64 - 4.5) / 5.0).collect::<Vec<_>>(),
    );
    let (last, all) = rnn(&w, h.clone(), xs.clone());
    let mut want = h.clone();
    let mut rows = Vec::new();
    for t in 0..5 {
        let x = xs.slice(&[t, 0], &[t + 1, 2]).reshape([2]);
        want = (w.matmul(&want) + x).tanh();
        rows.extend(want.to_vec::<f64>().unwrap());
    }
    assert_eq!(last.to_vec::<f64>().unwrap(), want.to_vec::<f64>().unwrap());
    assert_eq!(all.to_vec::<f64>().unwrap(), rows);
    // The same under jit, once whatever the length.
    let f = jit(|(w, h, xs): (Tensor, Tensor, Tensor)| rnn(&w, h, xs));
    let (l2, a2) = f.call((w.clone(), h.clone(), xs.clone())).unwrap();
    assert_eq!(l2.to_vec::<f64>().unwrap(), want.to_vec::<f64>().unwrap());
    assert_eq!(a2.to_vec::<f64>().unwrap(), rows);
    // Reverse mode under jit, against central differences.
    let loss = |(w, h, xs): (Tensor, Tensor, Tensor)| {
        let (last, all) = rnn(&w, h, xs);
        last.sum(..) + (&all * &all).sum(..)
    };
    let g = jit(grad(loss))
        .call((w.clone(), h.clone(), xs.clone()))
        .unwrap();
    let at = |w: Tensor| loss((w, h.clone(), xs.clone())).to_vec::<f64>().unwrap()[0];
    let base = w.to_vec::<f64>().unwrap();
    let gw = g.0.to_vec::<f64>().unwrap();
    for i in 0..4 {
        let moved = |d: f64| {
            let mut v = base.clone();
            v[i] += d;
            at(Tensor::from_vec([2, 2], v))
        };
        let fd = (moved(1e-6) - moved(-1e-6)) / 2e-6;
        assert!(
            (gw[i] - fd).abs() < 1e-7 * fd.abs().max(1.0),
            "{i}: {} vs {fd}",
            gw[i]
        );
    }
    // fori_loop with Rust-number bounds is a scan, so it differentiates in reverse mode.
    let cube = grad(|x: Tensor| lax::fori_loop(0, 3, |_, y: Tensor| &y * &x, x.clone()).sum(..));
    let gx = cube(Tensor::from_vec([2], vec![2.0f64, -1.0]));
    assert_eq!(gx.to_vec::<f64>().unwrap(), vec![32.0, -4.0]);
}

/// A scan inside a fori_loop (a scan too: static bounds), both closing over `w` and `xs`,
/// differentiated in reverse mode under `jit` against central differences.
#[test]
fn nested_loops_differentiate_under_jit() {
    let loss = |(w, xs): (Tensor, Tensor)| {
        let outer = |_, h: Tensor| {
            let cell = |c: Tensor, x: Tensor| (((&c * &w) + x).tanh(), ());
            lax::scan(cell, h, xs.clone()).0
        };
        lax::fori_loop(0, 3, outer, Tensor::zeros(DType::F64, [2])).sum(..)
    };
    let w = Tensor::from_vec([2], vec![0.8f64, -1.3]);
    let xs = Tensor::from_vec([4, 2], vec![0.1f64, 0.5, -0.2, 0.3, 0.7, -0.6, 0.0, 0.25]);
    let (gw, gxs) = jit(grad(loss)).call((w.clone(), xs.clone())).unwrap();
    let at = |w: Vec<f64>, xs: Vec<f64>| {
        loss((Tensor::from_vec([2], w), Tensor::from_vec([4, 2], xs)))
            .to_vec::<f64>()
            .unwrap()[0]
    };
    let (w0, x0) = (w.to_vec::<f64>().unwrap(), xs.to_vec::<f64>().unwrap());
    let h = 1e-6;
    let fd = |which: usize, i: usize| {
        let moved = |d: f64| {
            let (mut w, mut x) = (w0.clone(), x0.clone());
            if which == 0 {
                w[i] += d
            } else {
                x[i] += d
            }
            at(w, x)
        };
        (moved(h) - moved(-h)) / (2.0 * h)
    };
    for (which, g) in [gw, gxs].iter().enumerate() {
        for (i, gi) in g.to_vec::<f64>().unwrap().iter().enumerate() {
            let want = fd(which, i);
            assert!(
                (gi - want).abs() < 1e-7 * want.abs().max(1.0),
                "{which}/{i}: {gi} vs {want}"
            );
        }
    }
}

/// The line in this file that carries `// @marker`.
fn marked_line(marker: &str) -> u32 {
    let src = include_str!("control_flow.rs");
    let tag = format!("// @{marker}");
    let idx = src
        .lines()
        .position(|l| l.trim_end().ends_with(&tag))
        .unwrap_or_else(|| panic!("no line marked {tag}"));
    idx as u32 + 1
}

/// The message of a trace error, which must be at the line marked `marker`.
fn at_marker<T: std::fmt::Debug>(marker: &str, result: Result<T, Error>) -> String {
    match result {
        Err(Error::Trace { location, message }) => {
            assert!(location.file().ends_with("control_flow.rs"), "{location}");
            assert_eq!(location.line(), marked_line(marker), "{marker}: {message}");
            format!("{marker}: {message}")
        }
        other => panic!("{marker}: expected a trace error, got {other:?}"),
    }
}

fn branch_types(x: Tensor) -> Tensor {
    let p = x.sum(..).greater(0.0);
    lax::cond(&p, |x: Tensor| x.sum(..), |x: Tensor| x, x) // @branch-types
}

fn branch_structure(x: Tensor) -> Vec<Tensor> {
    let k = Tensor::scalar(1i32);
    let one: &dyn Fn(Tensor) -> Vec<Tensor> = &|x| vec![x];
    let two: &dyn Fn(Tensor) -> Vec<Tensor> = &|x| vec![x.clone(), x];
    lax::switch(&k, [one, two], x) // @branch-structure
}

fn predicate(x: Tensor) -> Tensor {
    lax::cond(&x, |x: Tensor| x, |x: Tensor| -x, x.clone()) // @predicate
}

fn carry_type(x: Tensor) -> Tensor {
    let more = |x: Tensor| x.sum(..).greater(1.0);
    lax::while_loop(more, |x: Tensor| x.sum(..), x) // @carry-type
}

fn cond_type(x: Tensor) -> Tensor {
    lax::while_loop(|x: Tensor| x.sum(..), |x: Tensor| x * 0.5, x) // @cond-type
}

fn inside_body(x: Tensor) -> Tensor {
    let other = Tensor::zeros(DType::F32, [2]);
    lax::fori_loop(0, 3, |_, x: Tensor| &x + &other, x) // @inside-body
}

fn reverse_while(x: Tensor) -> Tensor {
    let more = |y: Tensor| y.sum(..).less(10.0);
    let loss = move |x: Tensor| lax::while_loop(more, |y: Tensor| &y * 2.0, x).sum(..);
    grad(loss)(x) // @reverse-while
}

fn scan_lengths(x: Tensor) -> Tensor {
    let xs = (
        Tensor::zeros(DType::F32, [4]),
        Tensor::zeros(DType::F32, [5]),
    );
    let f = |c: Tensor, (a, b): (Tensor, Tensor)| (&c + &a + &b, ());
    lax::scan(f, x, xs).0 // @scan-lengths
}

fn scan_carry(x: Tensor) -> Tensor {
    let xs = Tensor::zeros(DType::F32, [4, 3]);
    lax::scan(|c: Tensor, x: Tensor| ((&c + &x).sum(..), ()), x, xs).0 // @scan-carry
}

#[test]
fn mistakes_name_both_structures_and_the_line() {
    let x = f32s(&[3]);
    let errors = [
        at_marker("branch-types", trace(branch_types, &x)),
        at_marker("branch-structure", trace(branch_structure, &x)),
        at_marker("predicate", trace(predicate, &x)),
        at_marker("carry-type", trace(carry_type, &x)),
        at_marker("cond-type", trace(cond_type, &x)),
        at_marker("inside-body", trace(inside_body, &x)),
        at_marker("reverse-while", trace(reverse_while, &x)),
        at_marker("scan-lengths", trace(scan_lengths, &x)),
        at_marker("scan-carry", trace(scan_carry, &x)),
    ];
    insta::assert_snapshot!(errors.join("\n"));
}

/// Each of `got` within `rtol` (relative, absolute below 1) of `want`, f32 results of the
/// same shapes.
fn assert_near(got: &[ferrax::Array], want: &[ferrax::Array], rtol: f32, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (g, w) in got.iter().zip(want) {
        assert_eq!(g.dims(), w.dims(), "{what}");
        let (g, w) = (g.to_vec::<f32>().unwrap(), w.to_vec::<f32>().unwrap());
        for (a, b) in g.iter().zip(&w) {
            assert!(
                (a - b).abs() <= rtol * b.abs().max(1.0),
                "{what}: {g:?} vs {w:?}"
            );
        }
    }
}

/// On the (emulated) GPU, control flow runs on the device, each region a program of its own
/// whose steps the host queues, with the interpreter's results.
#[test]
fn control_flow_runs_on_the_emulated_gpu() {
    use ferrax::compiler::backend::gpu::{GpuOptions, GpuProgram};
    let f = |(w, h, xs, k): (Tensor, Tensor, Tensor, Tensor)| {
        let (last, all) = rnn(&w, (h * 2.0).exp(), xs);
        let picked = lax::switch(&k, [&|a: Tensor| a.sin(), &|a: Tensor| -a], last);
        let halved = lax::while_loop(|a: Tensor| a.sum(..).greater(1.0), |a: Tensor| a * 0.5, all);
        (picked, halved.exp())
    };
    let specs = (
        Tensor::spec(DType::F32, [2, 2]),
        Tensor::spec(DType::F32, [2]),
        Tensor::spec(DType::F32, [5, 2]),
        Tensor::spec(DType::I32, []),
    );
    let func = ferrax::compiler::simplify::simplify(&trace(f, &specs).unwrap())
        .unwrap()
        .0;
    let emulator = ferrax_ptx_emu::Emulator::default();
    let gpu = GpuProgram::compile(&func, &emulator, GpuOptions::HIGHEST).unwrap();
    assert_eq!(gpu.host_steps(), 0);
    let w = ferrax::Array::from_vec([2, 2], vec![0.9f32, -0.4, 0.3, 1.1]).unwrap();
    let h = ferrax::Array::from_vec([2], vec![0.2f32, -0.5]).unwrap();
    let xs = ferrax::Array::from_vec([5, 2], (0..10).map(|i| i as f32 / 7.0).collect()).unwrap();
    for k in [0, 1, 3] {
        let args = [w.clone(), h.clone(), xs.clone(), ferrax::Array::scalar(k)];
        let want = ferrax::runtime::interpret(&func, &args).unwrap();
        let launched = emulator.launched().len();
        let got = gpu.run(&args).unwrap();
        // Five steps of the scan, each with its slice and its row copied on the device.
        let copies = emulator.launched()[launched..]
            .iter()
            .filter(|l| *l == "copy")
            .count();
        assert_eq!(copies, 10, "k={k}");
        assert_near(&got, &want, 1e-5, &format!("k={k}"));
    }
}

/// A scan on the (emulated) GPU reads slices of 256 bytes in place, and copies out those that
/// would start off that alignment; each step's output row is copied into the stacked output.
#[test]
fn scans_read_aligned_slices_in_place_on_the_emulated_gpu() {
    use ferrax::compiler::backend::gpu::{GpuOptions, GpuProgram};
    let f = |(h, xs): (Tensor, Tensor)| {
        lax::scan(|h: Tensor, x: Tensor| ((&h * 0.5 + x).sin(), h), h, xs)
    };
    for (width, copies) in [(64, 5), (63, 10)] {
        let specs = (
            Tensor::spec(DType::F32, [width]),
            Tensor::spec(DType::F32, [5, width]),
        );
        let func = trace(f, &specs).unwrap();
        let emulator = ferrax_ptx_emu::Emulator::default();
        let gpu = GpuProgram::compile(&func, &emulator, GpuOptions::HIGHEST).unwrap();
        let args = [
            ferrax::Array::from_vec([width], (0..width).map(|i| i as f32 / 9.0).collect()).unwrap(),
            ferrax::Array::from_vec(
                [5, width],
                (0..5 * width).map(|i| i as f32 / 31.0).collect(),
            )
            .unwrap(),
        ];
        let got = gpu.run(&args).unwrap();
        let copied = emulator.launched().iter().filter(|l| *l == "copy").count();
        assert_eq!(copied, copies, "width {width}");
        let want = ferrax::runtime::interpret(&func, &args).unwrap();
        assert_near(&got, &want, 1e-6, &format!("width {width}"));
    }
}

/// Reverse mode's loops on the (emulated) GPU: the backward scan runs in reverse over the
/// residuals the forward scan stacked, inside a `fori_loop`, and a scan of no steps returns
/// its initial carry and empty outputs.
#[test]
fn gradients_of_nested_and_empty_scans_run_on_the_emulated_gpu() {
    use ferrax::compiler::backend::gpu::{GpuOptions, GpuProgram};
    let loss = |(w, xs): (Tensor, Tensor)| {
        let outer = |_, h: Tensor| {
            let cell = |c: Tensor, x: Tensor| (((&c * &w) + x).tanh(), ());
            lax::scan(cell, h, xs.clone()).0
        };
        lax::fori_loop(0, 3, outer, Tensor::zeros(DType::F32, [2])).sum(..)
    };
    let emulator = ferrax_ptx_emu::Emulator::default();
    for steps in [4, 0] {
        let specs = (
            Tensor::spec(DType::F32, [2]),
            Tensor::spec(DType::F32, [steps, 2]),
        );
        let lowered = jit(grad(loss)).lower(&specs).unwrap();
        let func = lowered.simplified();
        let gpu = GpuProgram::compile(func, &emulator, GpuOptions::HIGHEST).unwrap();
        assert_eq!(gpu.host_steps(), 0);
        let args = [
            ferrax::Array::from_vec([2], vec![0.8f32, -1.3]).unwrap(),
            ferrax::Array::from_vec(
                [steps, 2],
                (0..2 * steps).map(|i| i as f32 / 5.0 - 0.6).collect(),
            )
            .unwrap(),
        ];
        let want = ferrax::runtime::interpret(func, &args).unwrap();
        let got = gpu.run(&args).unwrap();
        assert_near(&got, &want, 1e-5, &format!("{steps} steps"));
    }
}

#[test]
fn unrolled_scans_under_jit_match_and_differentiate() {
    let cell = |w: Tensor| {
        move |h: Tensor, x: Tensor| {
            let next = (w.matmul(&h) + x).tanh();
            (next.clone(), next)
        }
    };
    let run = |unroll: usize, reverse: bool| {
        jit(move |(w, h, xs): (Tensor, Tensor, Tensor)| {
            let options = lax::ScanOptions {
                reverse,
                unroll,
                ..lax::ScanOptions::default()
            };
            let loss = {
                let (w, xs) = (w.clone(), xs.clone());
                move |h: Tensor| {
                    lax::scan_with(cell(w.clone()), h, xs.clone(), options)
                        .0
                        .sum(..)
                }
            };
            let g = grad(loss)(h.clone());
            let (last, all) = lax::scan_with(cell(w), h, xs, options);
            (last, all, g)
        })
    };
    let w = Tensor::from_vec([2, 2], vec![0.9f32, -0.4, 0.3, 1.1]);
    let h = Tensor::from_vec([2], vec![0.2f32, -0.5]);
    let xs = Tensor::from_vec(
        [5, 2],
        (0..10).map(|i| (i as f32 - 4.5) / 5.0).collect::<Vec<_>>(),
    );
    let args = (w.clone(), h.clone(), xs.clone());
    for reverse in [false, true] {
        let (l1, a1, g1) = run(1, reverse).call(args.clone()).unwrap();
        for unroll in [2, 3, 5, usize::MAX] {
            let (l, a, g) = run(unroll, reverse).call(args.clone()).unwrap();
            assert_eq!(v32(&l), v32(&l1), "unroll={unroll} reverse={reverse}");
            assert_eq!(v32(&a), v32(&a1), "unroll={unroll} reverse={reverse}");
            for (x, y) in v32(&g).iter().zip(v32(&g1)) {
                assert!((x - y).abs() <= 1e-6 * y.abs().max(1.0), "{x} vs {y}");
            }
        }
    }
    // The traced scan says how it unrolls; 0 is an error at the call.
    let traced = |unroll: usize| {
        trace(
            move |(w, h, xs): (Tensor, Tensor, Tensor)| {
                let options = lax::ScanOptions {
                    unroll,
                    ..lax::ScanOptions::default()
                };
                lax::scan_with(cell(w), h, xs, options).0
            },
            &(f32s(&[2, 2]), f32s(&[2]), f32s(&[5, 2])),
        )
    };
    assert!(traced(2).unwrap().to_string().contains("unroll=2"));
    assert!(traced(usize::MAX).unwrap().to_string().contains("unroll=5"));
    let e = traced(0).unwrap_err().to_string();
    assert!(e.contains("unroll must be at least 1"), "{e}");
}

fn fori_unrolled_with_a_traced_bound(x: Tensor) -> Tensor {
    let n = x.sum(..).astype(DType::I32);
    lax::fori_loop_unrolled(0, &n, |_, y: Tensor| &y * 2.0, x.clone(), 2) // @fori-unroll-traced
}

/// `fori_loop_unrolled` is the plain loop's scan unrolled: the same results, bit for bit, and
/// gradients; with a traced bound it is an error at the call, as in JAX.
#[test]
fn fori_loop_unrolled_runs_as_the_plain_loop() {
    let step = |w: &Tensor| {
        let w = w.clone();
        move |i: Tensor, y: Tensor| (y.matmul(&w) + i.astype(DType::F32) * 0.1).tanh()
    };
    let run = |unroll: Option<usize>| {
        jit(move |(w, x): (Tensor, Tensor)| {
            let loop_of = |w: &Tensor, x: Tensor| match unroll {
                None => lax::fori_loop(1, 8, step(w), x),
                Some(k) => lax::fori_loop_unrolled(1, 8, step(w), x, k),
            };
            let y = loop_of(&w, x.clone());
            let g = grad(|w: Tensor| loop_of(&w, x.clone()).sum(..))(w.clone());
            (y, g)
        })
    };
    let w = Tensor::from_vec([2, 2], vec![0.9f32, -0.4, 0.3, 1.1]);
    let x = Tensor::from_vec([3, 2], vec![0.2f32, -0.5, 0.1, 0.7, -0.3, 0.4]);
    let (y1, g1) = run(None).call((w.clone(), x.clone())).unwrap();
    for unroll in [2, 3, usize::MAX] {
        let (y, g) = run(Some(unroll)).call((w.clone(), x.clone())).unwrap();
        assert_eq!(v32(&y), v32(&y1), "unroll={unroll}");
        for (a, b) in v32(&g).iter().zip(v32(&g1)) {
            assert!((a - b).abs() <= 1e-6 * b.abs().max(1.0), "{a} vs {b}");
        }
    }
    let traced = trace(
        |x: Tensor| lax::fori_loop_unrolled(0, 3, |_, y: Tensor| &y * 2.0, x, 2),
        &f32s(&[2]),
    )
    .unwrap();
    assert!(traced.to_string().contains("unroll=2"), "{traced}");
    let e = at_marker(
        "fori-unroll-traced",
        trace(fori_unrolled_with_a_traced_bound, &f32s(&[2])),
    );
    assert!(e.contains("unroll needs bounds known when tracing"), "{e}");
}

#[test]
fn forward_mode_and_jacfwd_run_a_while_loop_once() {
    let f = |x: Tensor| {
        lax::while_loop(
            |(_, n): (Tensor, Tensor)| n.less(3),
            |(x, n): (Tensor, Tensor)| ((&x * 0.9).sin() + &x, n + 1),
            (x, Tensor::scalar(0i32)),
        )
        .0
    };
    // Every `while` instruction (primal results and tangents alike) is one call.
    let one_call = |g: &ferrax::Func| {
        let whiles: Vec<_> = g.body.iter().filter(|i| i.op.name() == "while").collect();
        assert!(!whiles.is_empty(), "{g}");
        for w in &whiles {
            assert!(
                w.args == whiles[0].args && w.op.same_call(&whiles[0].op),
                "{g}"
            );
        }
    };
    let spec = (f32s(&[3]), f32s(&[3]));
    one_call(&trace(|(x, t): (Tensor, Tensor)| jvp(f, &x, &t).unwrap(), &spec).unwrap());
    one_call(&trace(|x: Tensor| jacfwd(f)(&x).unwrap(), &f32s(&[3])).unwrap());
    // And the values: the Jacobian is diagonal, against the tangent along each axis.
    let x = Tensor::from_vec([3], vec![0.3f32, -1.0, 2.0]);
    let jac = v32(&jacfwd(f)(&x).unwrap());
    for i in 0..3 {
        let mut e = vec![0.0f32; 3];
        e[i] = 1.0;
        let (_, t) = jvp(f, &x, &Tensor::from_vec([3], e)).unwrap();
        let column: Vec<f32> = (0..3).map(|r| jac[r * 3 + i]).collect();
        assert_eq!(column, v32(&t));
    }
}

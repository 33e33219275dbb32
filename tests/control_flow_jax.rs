//! `lax::{cond, switch, while_loop, fori_loop, scan, scan_with}` against JAX: values, `grad`,
//! `jvp` and `vjp` of branches (switch indices out of range included: both clamp), a while
//! loop with a data-dependent trip count (values and `jvp`; reverse mode is an error pointing to
//! `scan`/`fori_loop`), a static `fori_loop`, scans both ways with stacked outputs and a
//! tuple carry, nested loops (scan in scan, cond in scan, fori_loop in while), a loop under
//! `grad` under `jit`, and second derivatives through a scan. Each case runs eagerly and under
//! `jit` (its derivatives traced inside the jitted function), in f64.
//!
//! `tests/jax/generate_control_flow.py` wrote `tests/jax/control_flow_reference.json`; no
//! Python is needed here. The tolerance, 1e-12 of the larger of an element and its output's
//! largest magnitude, allows the last-place differences of transcendentals and summation
//! order (XLA's and ferrax's differ), grown over at most a few dozen dependent steps (the worst
//! measured is 2.5e-15, an RNN's gradient); a wrong rule gives errors many orders of magnitude
//! above it.
#![allow(clippy::unwrap_used)]

use ferrax::lax::{self, ScanOptions};
use ferrax::{grad, hessian, jit, jvp, trace, vjp, DType, Error, Tensor};
use serde_json::Value;

/// Relative tolerance for f64 (see the module docs).
const RTOL: f64 = 1e-12;

fn reference(case: &str) -> Value {
    let all: Value = serde_json::from_str(include_str!("jax/control_flow_reference.json")).unwrap();
    all[case].clone()
}

fn tensor(v: &Value) -> Tensor {
    let shape: Vec<usize> = v["shape"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_u64().unwrap() as usize)
        .collect();
    let data: Vec<f64> = v["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_f64().unwrap())
        .collect();
    Tensor::from_vec(shape, data)
}

/// The named inputs of a case, in order.
fn inputs(case: &Value, names: &[&str]) -> Vec<Tensor> {
    names.iter().map(|n| tensor(&case["inputs"][n])).collect()
}

fn assert_close(got: &Tensor, want: &Tensor, what: &str) {
    assert_eq!(got.shape(), want.shape(), "{what}: shape");
    let (g, w) = (got.to_vec::<f64>().unwrap(), want.to_vec::<f64>().unwrap());
    let scale = w.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        assert!(
            (a - b).abs() <= RTOL * b.abs().max(scale),
            "{what}: element {i} is {a}, JAX has {b} (all: {g:?} vs {w:?})"
        );
    }
}

/// Runs `f` eagerly and under `jit` on `args`, and compares its outputs with `want`'s entries
/// `names`, in order.
fn check<F>(what: &str, f: F, args: Vec<Tensor>, want: &Value, names: &[&str])
where
    F: Fn(Vec<Tensor>) -> Vec<Tensor> + Send + Sync,
{
    let eager = f(args.clone());
    let jitted = jit(&f).call(args).unwrap();
    for (mode, got) in [("eagerly", eager), ("under jit", jitted)] {
        assert_eq!(got.len(), names.len(), "{what}");
        for (g, name) in got.iter().zip(names) {
            assert_close(g, &tensor(&want[name]), &format!("{what} {mode}: {name}"));
        }
    }
}

fn pair(v: &[Tensor], i: usize) -> (Tensor, Tensor) {
    (v[i].clone(), v[i + 1].clone())
}

fn cond_f(p: &Tensor, x: Tensor, w: &Tensor) -> Tensor {
    lax::cond(
        p,
        |x: Tensor| (&x * w).sin() * &x,
        |x: Tensor| x.exp() - w,
        x,
    )
}

#[test]
fn cond_matches_jax() {
    let case = reference("cond");
    let args = inputs(&case, &["x", "w", "tx", "tw", "ct"]);
    for p in [true, false] {
        let f = |v: Vec<Tensor>| {
            let p = &v[5];
            let y = cond_f(p, v[0].clone(), &v[1]);
            let loss = |(x, w): (Tensor, Tensor)| cond_f(p, x, &w).square().sum(..);
            let (gx, gw) = grad(loss)(pair(&v, 0));
            let plain = |(x, w): (Tensor, Tensor)| cond_f(p, x, &w);
            let (_, ty) = jvp(plain, &pair(&v, 0), &pair(&v, 2)).unwrap();
            let (_, pull) = vjp(plain, &pair(&v, 0)).unwrap();
            let (vx, vw) = pull.call(&v[4]).unwrap();
            vec![y, gx, gw, ty, vx, vw]
        };
        let mut args = args.clone();
        args.push(Tensor::scalar(p));
        let names = ["y", "grad_x", "grad_w", "jvp", "vjp_x", "vjp_w"];
        let want = &case["outputs"][p.to_string()];
        check(&format!("cond({p})"), f, args, want, &names);
    }
}

fn switch_f(k: &Tensor, x: Tensor, w: Tensor) -> Tensor {
    lax::switch(
        k,
        [
            &|(x, w): (Tensor, Tensor)| &x * &w,
            &|(x, w): (Tensor, Tensor)| x.sin() + &w,
            &|(x, w): (Tensor, Tensor)| &x * &x * &x * w.cos(),
        ],
        (x, w),
    )
}

#[test]
fn switch_matches_jax_and_clamps_its_index() {
    let case = reference("switch");
    let args = inputs(&case, &["x", "w", "tx", "tw"]);
    for k in [-3, 0, 1, 2, 7] {
        let f = |v: Vec<Tensor>| {
            let k = &v[4];
            let y = switch_f(k, v[0].clone(), v[1].clone());
            let loss = |(x, w): (Tensor, Tensor)| switch_f(k, x, w).square().sum(..);
            let (gx, gw) = grad(loss)(pair(&v, 0));
            let plain = |(x, w): (Tensor, Tensor)| switch_f(k, x, w);
            let (_, ty) = jvp(plain, &pair(&v, 0), &pair(&v, 2)).unwrap();
            vec![y, gx, gw, ty]
        };
        let mut args = args.clone();
        args.push(Tensor::scalar(k));
        let want = &case["outputs"][k.to_string()];
        let names = ["y", "grad_x", "grad_w", "jvp"];
        check(&format!("switch({k})"), f, args, want, &names);
    }
}

/// `x` contracted until its squared norm is at most 0.05 (at most 100 steps), and the count.
fn while_f(x: Tensor, a: &Tensor) -> (Tensor, Tensor) {
    lax::while_loop(
        |(x, n): (Tensor, Tensor)| (&x * &x).sum(..).greater(0.05) & n.less(100),
        |(x, n): (Tensor, Tensor)| (a * &x + x.sin() * 0.05, n + 1),
        (x, Tensor::scalar(0i32)),
    )
}

#[test]
fn a_data_dependent_while_loop_matches_jax_in_forward_mode() {
    let case = reference("while");
    let want = &case["outputs"];
    let f = |v: Vec<Tensor>| {
        let (y, n) = while_f(v[0].clone(), &v[1]);
        let plain = |(x, a): (Tensor, Tensor)| while_f(x, &a).0;
        let (_, ty) = jvp(plain, &pair(&v, 0), &pair(&v, 2)).unwrap();
        vec![y, ty, n]
    };
    let args = inputs(&case, &["x", "a", "tx", "ta"]);
    let trips = want["trips"].as_i64().unwrap() as i32;
    assert!(trips > 1, "the loop must run several times");
    for (mode, out) in [
        ("eagerly", f(args.clone())),
        ("under jit", jit(f).call(args.clone()).unwrap()),
    ] {
        assert_close(&out[0], &tensor(&want["y"]), &format!("while {mode}: y"));
        assert_close(
            &out[1],
            &tensor(&want["jvp"]),
            &format!("while {mode}: jvp"),
        );
        assert_eq!(out[2].to_vec::<i32>().unwrap(), vec![trips], "{mode}");
    }
    // Reverse mode is refused (as in JAX), pointing to what does differentiate.
    let plain = |(x, a): (Tensor, Tensor)| while_f(x, &a).0;
    let message = match vjp(plain, &pair(&args, 0)) {
        Err(e) => e.to_string(),
        Ok(_) => panic!("vjp of a while loop must be an error"),
    };
    for hint in ["while", "lax::scan", "lax::fori_loop"] {
        assert!(message.contains(hint), "{hint} not in: {message}");
    }
    let loss = |(x, a): (Tensor, Tensor)| while_f(x, &a).0.sum(..);
    let specs = (Tensor::spec(DType::F64, [3]), Tensor::spec(DType::F64, []));
    match trace(grad(loss), &specs) {
        Err(Error::Trace { message, .. }) => {
            assert!(message.contains("lax::scan"), "{message}");
            assert!(message.contains("lax::fori_loop"), "{message}");
        }
        other => panic!("grad of a while loop must be a trace error, got {other:?}"),
    }
}

fn fori_f(x: &Tensor) -> Tensor {
    lax::fori_loop(
        0,
        6,
        |i, y: Tensor| &y * 0.5 * y.cos() + x * i.astype(DType::F64),
        x.clone(),
    )
}

#[test]
fn a_static_fori_loop_matches_jax() {
    let case = reference("fori_loop");
    let f = |v: Vec<Tensor>| {
        let g = grad(|x: Tensor| fori_f(&x).square().sum(..))(v[0].clone());
        let (_, t) = jvp(|x: Tensor| fori_f(&x), &v[0], &v[1]).unwrap();
        vec![fori_f(&v[0]), g, t]
    };
    let args = inputs(&case, &["x", "tx"]);
    check(
        "fori_loop",
        f,
        args,
        &case["outputs"],
        &["y", "grad", "jvp"],
    );
}

/// An RNN over the rows of `xs`: the last state, and each state times its input, stacked.
fn rnn(w: &Tensor, h: Tensor, xs: Tensor, reverse: bool) -> (Tensor, Tensor) {
    let cell = |h: Tensor, x: Tensor| {
        let next = (w.matmul(&h) + &x).tanh();
        (next.clone(), next * x)
    };
    let options = ScanOptions {
        reverse,
        ..Default::default()
    };
    lax::scan_with(cell, h, xs, options)
}

#[test]
fn scans_both_ways_match_jax() {
    let case = reference("scan_rnn");
    let names = ["w", "h", "xs", "tw", "th", "txs", "ch", "cys"];
    let args = inputs(&case, &names);
    for (reverse, which) in [(false, "forward"), (true, "reverse")] {
        let f = |v: Vec<Tensor>| {
            let triple = |i: usize| (v[i].clone(), v[i + 1].clone(), v[i + 2].clone());
            let plain = |(w, h, xs): (Tensor, Tensor, Tensor)| rnn(&w, h, xs, reverse);
            let (last, ys) = plain(triple(0));
            let loss = |args: (Tensor, Tensor, Tensor)| {
                let (last, ys) = plain(args);
                last.sum(..) + ys.square().sum(..)
            };
            let (gw, gh, gxs) = grad(loss)(triple(0));
            let (_, (tl, tys)) = jvp(plain, &triple(0), &triple(3)).unwrap();
            let (_, pull) = vjp(plain, &triple(0)).unwrap();
            let (vw, vh, vxs) = pull.call(&pair(&v, 6)).unwrap();
            vec![last, ys, gw, gh, gxs, tl, tys, vw, vh, vxs]
        };
        let want = &case["outputs"][which];
        let names = [
            "last", "ys", "grad_w", "grad_h", "grad_xs", "jvp_last", "jvp_ys", "vjp_w", "vjp_h",
            "vjp_xs",
        ];
        check(&format!("scan {which}"), f, args.clone(), want, &names);
    }
}

#[test]
fn a_scan_carrying_a_tuple_matches_jax() {
    let case = reference("scan_tuple");
    let pair_scan = |a: Tensor, b: Tensor, xs: Tensor| {
        let step = |(a, b): (Tensor, Tensor), x: Tensor| {
            let a2 = &a + &x * &b;
            let b2 = &b * x.cos() + &a * 0.1;
            ((a2.clone(), b2.clone()), a2 * b2)
        };
        lax::scan(step, (a, b), xs)
    };
    let f = |v: Vec<Tensor>| {
        let ((a, b), ys) = pair_scan(v[0].clone(), v[1].clone(), v[2].clone());
        let loss = |(a, b, xs): (Tensor, Tensor, Tensor)| {
            let ((a, b), ys) = pair_scan(a, b, xs);
            a.sum(..) + b.square().sum(..) + ys.sin().sum(..)
        };
        let (ga, gb, gxs) = grad(loss)((v[0].clone(), v[1].clone(), v[2].clone()));
        vec![a, b, ys, ga, gb, gxs]
    };
    let args = inputs(&case, &["a", "b", "xs"]);
    let names = ["a", "b", "ys", "grad_a", "grad_b", "grad_xs"];
    check("scan of a tuple", f, args, &case["outputs"], &names);
}

/// Runs a loop `body(w, h, xs) -> (last, ys)` and the gradient of `loss(last, ys)` with
/// respect to `(w, h, xs)`.
fn values_and_grad(
    v: &[Tensor],
    body: impl Fn(&Tensor, Tensor, Tensor) -> (Tensor, Tensor),
    loss: impl Fn(Tensor, Tensor) -> Tensor,
) -> Vec<Tensor> {
    let (last, ys) = body(&v[0], v[1].clone(), v[2].clone());
    let l = |(w, h, xs): (Tensor, Tensor, Tensor)| {
        let (last, ys) = body(&w, h, xs);
        loss(last, ys)
    };
    let (gw, gh, gxs) = grad(l)((v[0].clone(), v[1].clone(), v[2].clone()));
    vec![last, ys, gw, gh, gxs]
}

#[test]
fn a_scan_inside_a_scan_matches_jax() {
    let case = reference("scan_in_scan");
    let body = |w: &Tensor, h: Tensor, xs: Tensor| {
        let outer = |h: Tensor, row: Tensor| {
            let inner = |c: Tensor, x: Tensor| ((&c * w + x).tanh(), c.sum(..));
            lax::scan(inner, h, row)
        };
        lax::scan(outer, h, xs)
    };
    let loss = |last: Tensor, ys: Tensor| last.sum(..) + ys.square().sum(..);
    let f = |v: Vec<Tensor>| values_and_grad(&v, body, loss);
    let args = inputs(&case, &["w", "h", "xs"]);
    let names = ["last", "ys", "grad_w", "grad_h", "grad_xs"];
    check("scan in scan", f, args, &case["outputs"], &names);
}

#[test]
fn a_cond_inside_a_scan_matches_jax() {
    let case = reference("cond_in_scan");
    let body = |w: &Tensor, h: Tensor, xs: Tensor| {
        let step = |h: Tensor, x: Tensor| {
            let p = x.sum(..).greater(0.0);
            let h2 = lax::cond(
                &p,
                |(h, x): (Tensor, Tensor)| (&h * w + x).tanh(),
                |(h, x): (Tensor, Tensor)| &h * x.cos() - w,
                (h, x),
            );
            (h2.clone(), h2.sum(..))
        };
        lax::scan(step, h, xs)
    };
    let loss = |last: Tensor, ys: Tensor| last.square().sum(..) + ys.sum(..);
    let f = |v: Vec<Tensor>| values_and_grad(&v, body, loss);
    let args = inputs(&case, &["w", "h", "xs"]);
    let names = ["last", "ys", "grad_w", "grad_h", "grad_xs"];
    check("cond in scan", f, args, &case["outputs"], &names);
}

/// A static `fori_loop` of 4 steps inside a while loop that stops on the data.
fn fori_in_while(x: Tensor, a: &Tensor) -> (Tensor, Tensor) {
    let inner = |i: Tensor, y: Tensor| y.sin() * a + i.astype(DType::F64) * 0.01;
    lax::while_loop(
        |(x, n): (Tensor, Tensor)| (&x * &x).sum(..).greater(0.02) & n.less(20),
        |(x, n): (Tensor, Tensor)| (lax::fori_loop(0, 4, inner, x), n + 1),
        (x, Tensor::scalar(0i32)),
    )
}

#[test]
fn a_fori_loop_inside_a_while_loop_matches_jax() {
    let case = reference("fori_in_while");
    let want = &case["outputs"];
    let f = |v: Vec<Tensor>| {
        let (y, n) = fori_in_while(v[0].clone(), &v[1]);
        let plain = |(x, a): (Tensor, Tensor)| fori_in_while(x, &a).0;
        let (_, ty) = jvp(plain, &pair(&v, 0), &pair(&v, 2)).unwrap();
        vec![y, ty, n]
    };
    let args = inputs(&case, &["x", "a", "tx", "ta"]);
    let trips = want["trips"].as_i64().unwrap() as i32;
    for (mode, out) in [
        ("eagerly", f(args.clone())),
        ("under jit", jit(f).call(args).unwrap()),
    ] {
        assert_close(&out[0], &tensor(&want["y"]), &format!("{mode}: y"));
        assert_close(&out[1], &tensor(&want["jvp"]), &format!("{mode}: jvp"));
        assert_eq!(out[2].to_vec::<i32>().unwrap(), vec![trips], "{mode}");
    }
}

#[test]
fn a_loop_inside_grad_inside_jit_matches_jax() {
    let case = reference("jit_grad_nested");
    let loss = |(w, xs): (Tensor, Tensor)| {
        let outer = |_, h: Tensor| {
            let cell = |c: Tensor, x: Tensor| (((&c * &w) + x).tanh(), ());
            lax::scan(cell, h, xs.clone()).0
        };
        lax::fori_loop(0, 3, outer, Tensor::zeros(DType::F64, [2])).sum(..)
    };
    let f = |v: Vec<Tensor>| {
        let (gw, gxs) = grad(loss)(pair(&v, 0));
        vec![loss(pair(&v, 0)), gw, gxs]
    };
    let args = inputs(&case, &["w", "xs"]);
    let names = ["loss", "grad_w", "grad_xs"];
    check(
        "jit(grad(fori_loop(scan)))",
        f,
        args,
        &case["outputs"],
        &names,
    );
}

/// `last + sum(ys²)` of a scan from the scalar `c` over `xs`.
fn second(c: Tensor, xs: &Tensor) -> Tensor {
    let step = |c: Tensor, x: Tensor| {
        let c2 = (&c * &x).sin() + &c * 0.5;
        (c2.clone(), c2 * x)
    };
    let (last, ys) = lax::scan(step, c, xs.clone());
    last + ys.square().sum(..)
}

#[test]
fn second_derivatives_through_a_scan_match_jax() {
    let case = reference("second_order");
    let f = |v: Vec<Tensor>| {
        let xs = &v[1];
        let d1 = grad(|c: Tensor| second(c, xs));
        let d2 = grad(|c: Tensor| d1(c))(v[0].clone());
        let h = hessian(|xs: Tensor| second(v[0].clone(), &xs))(xs).unwrap();
        vec![second(v[0].clone(), xs), d1(v[0].clone()), d2, h]
    };
    let args = inputs(&case, &["c", "xs"]);
    let names = ["value", "grad", "grad_grad", "hessian_xs"];
    check("second order", f, args, &case["outputs"], &names);
}

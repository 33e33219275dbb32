//! `vmap`, `vmap_axes`, `jacfwd` and `jacrev`: results against the examples computed one by
//! one and stacked, every combination of batch axes for binary ops, nesting, composition with
//! `jit`, `grad`, `jvp`, `vjp`, `hessian` and `custom_vjp`, per-example gradients and
//! Jacobians against JAX (`tests/jax/generate_vmap.py` wrote `tests/jax/vmap_reference.json`),
//! the batched IR of a matrix product, and mistakes as errors at the caller's line.
#![allow(clippy::unwrap_used)]

use ferrax::{
    custom_vjp, grad, hessian, jacfwd, jacrev, jit, jvp, lax, nn, trace, vjp, vmap, vmap_axes,
    DType, Tensor,
};
use serde_json::Value;

fn data(shape: &[usize], seed: f32) -> Tensor {
    let n: usize = shape.iter().product();
    let v: Vec<f32> = (0..n)
        .map(|i| ((i as f32 + 1.0) * 0.37 + seed).sin())
        .collect();
    Tensor::from_vec(shape.to_vec(), v)
}

fn v32(t: &Tensor) -> Vec<f32> {
    t.to_vec::<f32>().unwrap()
}

fn assert_near(got: &Tensor, want: &Tensor, tol: f32, what: &str) {
    assert_eq!(got.shape(), want.shape(), "{what}: shape");
    for (i, (a, b)) in v32(got).iter().zip(v32(want)).enumerate() {
        assert!(
            (a - b).abs() <= tol * (1.0 + b.abs()),
            "{what}: element {i} is {a}, want {b}"
        );
    }
}

/// Example `b` of `x` along `axis`.
fn example(x: &Tensor, axis: usize, b: usize) -> Tensor {
    let mut start = vec![0; x.ndim()];
    let mut limit = x.shape().to_vec();
    start[axis] = b;
    limit[axis] = b + 1;
    x.slice(&start, &limit).squeeze([axis as i32].as_slice())
}

/// `ys` stacked along `axis`.
fn stack(ys: &[Tensor], axis: usize) -> Tensor {
    let parts: Vec<Tensor> = ys.iter().map(|y| y.expand_dims(axis as i64)).collect();
    Tensor::concatenate(&parts, axis as i64)
}

#[test]
fn vmap_is_the_examples_stacked() {
    let w = data(&[4, 3], 0.5);
    let f = |x: Tensor| {
        let h = x.matmul(&w).tanh();
        let s = nn::softmax(&h, -1);
        (s.clone() * 2.0 + h.max(-1), s.sum(..))
    };
    let xs = data(&[5, 4], 0.1);
    let (a, b) = vmap(f)(xs.clone());
    let examples: Vec<(Tensor, Tensor)> = (0..5).map(|i| f(example(&xs, 0, i))).collect();
    let (ea, eb): (Vec<_>, Vec<_>) = examples.into_iter().unzip();
    assert_near(&a, &stack(&ea, 0), 1e-6, "first output");
    assert_near(&b, &stack(&eb, 0), 1e-6, "second output");
}

#[test]
fn every_combination_of_axes_for_binary_ops() {
    type Op = fn(&Tensor, &Tensor) -> Tensor;
    let ops: [(&str, Op); 4] = [
        ("add", |a, b| a + b),
        ("mul", |a, b| a * b),
        ("max", |a, b| a.maximum(b)),
        ("matmul", |a, b| a.matmul(&b.t())),
    ];
    let axes = [None, Some(0), Some(1), Some(-1)];
    let size = 3;
    for (name, op) in ops {
        for &ia in &axes {
            for &ib in &axes {
                if ia.is_none() && ib.is_none() {
                    continue;
                }
                let make = |axis: Option<i32>, seed: f32| match axis {
                    None => data(&[2, 2], seed),
                    Some(a) => {
                        let a = if a < 0 { 2 } else { a as usize };
                        let mut shape = vec![2, 2];
                        shape.insert(a, size);
                        data(&shape, seed)
                    }
                };
                let (a, b) = (make(ia, 0.2), make(ib, 0.9));
                for out in [0, 1, -1] {
                    let got = vmap_axes(|(a, b): (Tensor, Tensor)| op(&a, &b), (ia, ib), out)((
                        a.clone(),
                        b.clone(),
                    ));
                    let pick = |x: &Tensor, axis: Option<i32>, i| match axis {
                        None => x.clone(),
                        Some(ax) => example(x, if ax < 0 { 2 } else { ax as usize }, i),
                    };
                    let ys: Vec<Tensor> = (0..size)
                        .map(|i| op(&pick(&a, ia, i), &pick(&b, ib, i)))
                        .collect();
                    let out_axis = if out < 0 { 2 } else { out as usize };
                    let what = format!("{name} in_axes ({ia:?}, {ib:?}) out_axes {out}");
                    assert_near(&got, &stack(&ys, out_axis), 1e-6, &what);
                }
            }
        }
    }
}

#[test]
fn nested_vmap_maps_two_axes() {
    let f = |(x, y): (Tensor, Tensor)| (x.exp() * &y).sum(..);
    let (xs, ys) = (data(&[3, 4, 2], 0.3), data(&[4, 3, 2], 0.7));
    // Outer over xs' axis 0 and ys' axis 1, inner over what is left of both at axis 0.
    let inner = |(x, y): (Tensor, Tensor)| vmap(f)((x, y));
    let got = vmap_axes(inner, (0, 1), 0)((xs.clone(), ys.clone()));
    assert_eq!(got.shape(), &[3, 4]);
    for i in 0..3 {
        for j in 0..4 {
            let want = f((
                example(&example(&xs, 0, i), 0, j),
                example(&example(&ys, 1, i), 0, j),
            ));
            let g = example(&example(&got, 0, i), 0, j);
            assert_near(&g, &want, 1e-6, &format!("({i}, {j})"));
        }
    }
}

#[test]
fn closures_over_traced_values_are_shared_by_the_examples() {
    let f = jit(|(w, xs): (Tensor, Tensor)| vmap(|x: Tensor| x.matmul(&w).tanh())(xs));
    let (w, xs) = (data(&[3, 2], 0.4), data(&[6, 3], 0.8));
    let got = f.call((w.clone(), xs.clone())).unwrap();
    assert_near(&got, &xs.matmul(&w).tanh(), 1e-6, "jit(vmap)");
}

fn json() -> Value {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/jax/vmap_reference.json"
    ))
    .unwrap();
    serde_json::from_str(&text).unwrap()
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

fn close64(got: &Tensor, want: &Tensor, what: &str) {
    assert_eq!(got.shape(), want.shape(), "{what}: shape");
    let (g, w) = (got.to_vec::<f64>().unwrap(), want.to_vec::<f64>().unwrap());
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        assert!(
            (a - b).abs() <= 1e-10 * (1.0 + b.abs()),
            "{what}: element {i} is {a}, want {b}"
        );
    }
}

type Params = Vec<(Tensor, Tensor)>;

fn mlp_loss(ps: &Params, x: &Tensor, y: &Tensor) -> Tensor {
    let mut h = x.clone();
    for (w, b) in &ps[..ps.len() - 1] {
        h = nn::relu(&(h.matmul(w) + b));
    }
    let (w, b) = &ps[ps.len() - 1];
    -(nn::log_softmax(&(h.matmul(w) + b), -1) * y)
        .sum(-1)
        .mean(..)
}

fn per_example_grads((ps, x, y): (Params, Tensor, Tensor)) -> Params {
    let one =
        |(p, x, y): (Params, Tensor, Tensor)| mlp_loss(&p, &x.expand_dims(0), &y.expand_dims(0));
    vmap_axes(grad(one), (None, 0, 0), 0)((ps, x, y)).0
}

#[test]
fn per_example_gradients_match_jax() {
    let case = &json()["per_example_grads"];
    let i: Vec<Tensor> = case["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(tensor)
        .collect();
    let o: Vec<Tensor> = case["outputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(tensor)
        .collect();
    let ps = vec![(i[0].clone(), i[1].clone()), (i[2].clone(), i[3].clone())];
    let args = (ps, i[4].clone(), i[5].clone());
    let eager = per_example_grads(args.clone());
    let jitted = jit(per_example_grads).call(args).unwrap();
    for (k, got) in [eager, jitted].iter().enumerate() {
        let flat = [&got[0].0, &got[0].1, &got[1].0, &got[1].1];
        for (j, (g, w)) in flat.iter().zip(&o).enumerate() {
            close64(g, w, &format!("run {k}, gradient {j}"));
        }
    }
}

#[test]
fn axes_and_last_axis_gradients_match_jax() {
    let j = json();
    let case = &j["axes"];
    let (a, b) = (tensor(&case["inputs"][0]), tensor(&case["inputs"][1]));
    let f = |(a, b): (Tensor, Tensor)| a.matmul(&b).tanh() * a.sum(..);
    let got = vmap_axes(f, (1, None), 1)((a, b));
    close64(
        &got,
        &tensor(&case["outputs"][0]),
        "in_axes (1, None), out_axes 1",
    );

    let case = &j["grad_last_axis"];
    let q = |m: Tensor| m.exp().matmul(&m).sum(..);
    let got = vmap_axes(grad(q), 2, -1)(tensor(&case["inputs"][0]));
    close64(
        &got,
        &tensor(&case["outputs"][0]),
        "vmap(grad), axis 2 / -1",
    );
}

#[test]
fn jacobians_match_jax() {
    let case = &json()["jacobians"];
    let (w, x) = (tensor(&case["inputs"][0]), tensor(&case["inputs"][1]));
    let h = |x: Tensor| w.matmul(&x).tanh() * (&x * &x).sum(..);
    let s = |x: Tensor| (x.sin() * &x * &x).sum(..);
    close64(
        &jacfwd(h)(&x).unwrap(),
        &tensor(&case["outputs"][0]),
        "jacfwd",
    );
    close64(
        &jacrev(h)(&x).unwrap(),
        &tensor(&case["outputs"][1]),
        "jacrev",
    );
    let hess = jacfwd(|x: Tensor| jacrev(s)(&x).unwrap())(&x).unwrap();
    close64(&hess, &tensor(&case["outputs"][2]), "jacfwd(jacrev)");
    close64(&hessian(s)(&x).unwrap(), &hess, "hessian");
    // Under jit, the Jacobian is one traced program.
    let jitted = jit(move |x: Tensor| jacrev(h)(&x).unwrap()).call(x.clone());
    close64(
        &jitted.unwrap(),
        &tensor(&case["outputs"][1]),
        "jit(jacrev)",
    );
}

#[test]
fn grad_of_a_function_calling_vmap() {
    let (w, xs) = (data(&[3, 2], 0.4), data(&[5, 3], 0.8));
    let batched = |w: Tensor| vmap(|x: Tensor| x.matmul(&w).tanh().sum(..))(xs.clone()).sum(..);
    let direct = |w: Tensor| xs.matmul(&w).tanh().sum(..);
    assert_near(
        &grad(batched)(w.clone()),
        &grad(direct)(w.clone()),
        1e-5,
        "grad(vmap)",
    );
    let jitted = jit(move |w: Tensor| grad(batched)(w))
        .call(w.clone())
        .unwrap();
    assert_near(&jitted, &grad(direct)(w), 1e-5, "jit(grad(vmap))");
}

#[test]
fn vmap_of_jvp_vjp_hessian_and_custom_vjp() {
    let f = |x: Tensor| (x.sin() * &x).sum(..);
    let xs = data(&[4, 3], 0.6);
    let ts = data(&[4, 3], 1.1);
    let jvps = vmap(|(x, t): (Tensor, Tensor)| jvp(f, &x, &t).unwrap().1)((xs.clone(), ts.clone()));
    let vjps = vmap(|x: Tensor| {
        let (_, pull) = vjp(f, &x).unwrap();
        pull.call(&Tensor::scalar(1.0f32)).unwrap()
    })(xs.clone());
    let hessians = vmap(|x: Tensor| hessian(f)(&x).unwrap())(xs.clone());
    let softplus = custom_vjp(
        |x: Tensor| (x.exp() + 1.0).log(),
        |x: Tensor| ((x.exp() + 1.0).log(), x),
        |x: Tensor, g: Tensor| g * x.sigmoid(),
    );
    let custom = vmap(grad(|x: Tensor| softplus(x).sum(..)))(xs.clone());
    for i in 0..4 {
        let (x, t) = (example(&xs, 0, i), example(&ts, 0, i));
        let w = format!("example {i}");
        assert_near(&example(&jvps, 0, i), &jvp(f, &x, &t).unwrap().1, 1e-6, &w);
        assert_near(&example(&vjps, 0, i), &grad(f)(x.clone()), 1e-6, &w);
        assert_near(
            &example(&hessians, 0, i),
            &hessian(f)(&x).unwrap(),
            1e-6,
            &w,
        );
        assert_near(&example(&custom, 0, i), &x.sigmoid(), 1e-6, &w);
    }
}

#[test]
fn a_batched_matrix_product_is_one_dot_general() {
    let f = |(a, b): (Tensor, Tensor)| vmap(|(a, b): (Tensor, Tensor)| a.matmul(&b))((a, b));
    let ir = trace(
        f,
        &(
            Tensor::spec(DType::F32, [8, 4, 3]),
            Tensor::spec(DType::F32, [8, 3, 5]),
        ),
    );
    insta::assert_snapshot!(ir.unwrap().to_string());
}

#[test]
fn mistakes_are_errors_at_the_callers_line() {
    let x = data(&[3, 2], 0.1);
    let y = data(&[4, 2], 0.2);
    let add = |(a, b): (Tensor, Tensor)| a + b;
    let (xy, xx) = (|| (x.clone(), y.clone()), || (x.clone(), x.clone()));
    // Each call and its line on one line.
    let cases: Vec<(Tensor, u32)> = vec![
        (vmap_axes(add, (0, 0, 0), 0)(xy()), line!()),
        (vmap(add)(xy()), line!()),
        (vmap_axes(add, (2, 0), 0)(xx()), line!()),
        (vmap_axes(add, None, 0)(xx()), line!()),
        (vmap_axes(add, 0, None)(xx()), line!()),
        (vmap_axes(add, 0, 3)(xx()), line!()),
    ];
    let messages = [
        "do not match the inputs' structure",
        "different batch sizes",
        "out of range for input leaf 0",
        "no input is batched",
        "out_axes is None",
        "out_axes 3 is out of range",
    ];
    for ((got, line), message) in cases.into_iter().zip(messages) {
        let err = got.to_vec::<f32>().unwrap_err();
        assert!(err.to_string().contains(message), "{err}");
        let at = err.location().unwrap();
        assert!(at.file().ends_with("vmap.rs"), "{err}");
        assert_eq!(at.line(), line, "{err}");
    }
    let pair = |x: Tensor| (x.clone(), x);
    let (a, _) = vmap_axes(pair, 0, (0, 0, 0))(x.clone());
    assert!(a
        .to_vec::<f32>()
        .unwrap_err()
        .to_string()
        .contains("outputs' structure"));
    let err = jit(|x: Tensor| vmap_axes(|x: Tensor| x, 5, 0)(x))
        .call(x)
        .unwrap_err();
    assert!(err.to_string().contains("out of range"), "{err}");
}

#[test]
fn loops_and_branches_per_example_eagerly_and_under_jit() {
    // Halving until below a per-example limit: each example takes its own number of steps.
    let f = |(x, limit): (Tensor, Tensor)| {
        let more = |(x, _): (Tensor, Tensor)| x.sum(..).greater(&limit);
        let halve = |(x, n): (Tensor, Tensor)| (x * 0.5, n + 1);
        let (y, n) = lax::while_loop(more, halve, (x, Tensor::scalar(0i32)));
        let picked = lax::cond(&n.greater(2), |y: Tensor| y.exp(), |y: Tensor| -y, y);
        (picked, n)
    };
    let xs = Tensor::from_vec([3, 2], vec![4.0f32, 4.0, 1.0, 1.0, 8.0, 8.0]);
    let limits = Tensor::from_vec([3], vec![1.0f32, 1.0, 0.5]);
    let (eager_y, eager_n) = vmap(f)((xs.clone(), limits.clone()));
    let (jit_y, jit_n) = jit(move |a| vmap(f)(a))
        .call((xs.clone(), limits.clone()))
        .unwrap();
    for i in 0..3 {
        let (y, n) = f((example(&xs, 0, i), example(&limits, 0, i)));
        for (gy, gn) in [(&eager_y, &eager_n), (&jit_y, &jit_n)] {
            assert_near(&example(gy, 0, i), &y, 1e-6, &format!("example {i}"));
            let got_n = example(gn, 0, i).to_vec::<i32>().unwrap();
            assert_eq!(got_n, n.to_vec::<i32>().unwrap());
        }
    }
    assert_eq!(eager_n.to_vec::<i32>().unwrap(), vec![3, 1, 5]);
}

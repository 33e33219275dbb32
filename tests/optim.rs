//! `ferrax::optim` step by step against optax's formulas run in JAX
//! (`tests/jax/generate_optim.py` wrote `tests/jax/optim_reference.json`; no Python is needed
//! here), eagerly and inside `jit`; schedules' values; the tree utilities; and a short training
//! run with Adam.
//!
//! Tolerance: both sides compute in f32 with the same operations in the same order, but
//! `pow`, `cos`, `sqrt` and the sums of the global norm may round differently by an ulp or
//! two (f32's ulp is 1.2e-7 relative) and six steps compound them, so parameters must agree to
//! 1e-6 relative (with a 1e-6 absolute floor near zero).
#![allow(clippy::unwrap_used)]

mod common;

use ferrax::optim::{self, GradientTransformation, Mask, Schedule};
use ferrax::{jit, tree_map, tree_map2, tree_map_n, value_and_grad, DType, Error, Tensor, Tree};
use serde_json::Value;
use std::collections::BTreeMap;

type Params = BTreeMap<String, Tensor>;

fn reference() -> Value {
    serde_json::from_str(include_str!("jax/optim_reference.json")).unwrap()
}

fn tensor(v: &Value) -> Tensor {
    let shape: Vec<usize> = v["shape"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_u64().unwrap() as usize)
        .collect();
    let data: Vec<f32> = v["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| match d.as_str() {
            Some("nan") => f32::NAN,
            Some("inf") => f32::INFINITY,
            Some("-inf") => f32::NEG_INFINITY,
            _ => d.as_f64().unwrap() as f32,
        })
        .collect();
    Tensor::from_vec(shape, data)
}

fn tree(v: &Value) -> Params {
    v.as_object()
        .unwrap()
        .iter()
        .map(|(k, t)| (k.clone(), tensor(t)))
        .collect()
}

fn assert_close(got: &Params, want: &Params, what: &str) {
    for (key, w) in want {
        let g = got[key]
            .to_vec::<f32>()
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        let w = w.to_vec::<f32>().unwrap();
        for (i, (a, b)) in g.iter().zip(&w).enumerate() {
            let tol = 1e-6 * b.abs().max(1.0);
            assert!(
                (a - b).abs() <= tol,
                "{what}: {key}[{i}] = {a}, optax {b} (diff {})",
                (a - b).abs()
            );
        }
    }
}

/// Runs case `name` of the reference with `opt`, eagerly and as a jitted step, checking the
/// parameters after every step.
fn check<O>(name: &str, opt: O)
where
    O: GradientTransformation<Params> + Send + Sync,
    O::State: Clone,
{
    check_in(&reference(), name, opt);
}

/// [`check`] against the trajectories of `r`.
fn check_in<O>(r: &Value, name: &str, opt: O)
where
    O: GradientTransformation<Params> + Send + Sync,
    O::State: Clone,
{
    let case = r["cases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no reference case {name}"));
    // A case may run on gradients of its own (with NaNs, say).
    let grads = match case.get("grads") {
        Some(grads) => grads,
        None => &r["grads"],
    };
    let grads: Vec<Params> = grads.as_array().unwrap().iter().map(tree).collect();
    let want: Vec<Params> = case["params"]
        .as_array()
        .unwrap()
        .iter()
        .map(tree)
        .collect();
    let params = tree(&r["params"]);

    let (mut p, mut s) = (params.clone(), opt.init(&params));
    for (k, g) in grads.iter().enumerate() {
        let (u, next) = opt.update(g, &s, &p);
        (p, s) = (optim::apply_updates(&p, &u), next);
        assert_close(&p, &want[k], &format!("{name} eager step {}", k + 1));
    }

    let step = jit(|(p, s, g): (Params, O::State, Params)| {
        let (u, s) = opt.update(&g, &s, &p);
        (optim::apply_updates(&p, &u), s)
    });
    let (mut p, mut s) = (params.clone(), opt.init(&params));
    for (k, g) in grads.iter().enumerate() {
        (p, s) = step.call((p, s, g.clone())).unwrap();
        assert_close(&p, &want[k], &format!("{name} jit step {}", k + 1));
    }
}

#[test]
fn sgd_and_momentum_follow_optax() {
    check("sgd", optim::sgd(0.1));
    check("momentum", optim::sgd_momentum(0.1, 0.9, false));
    check("nesterov", optim::sgd_momentum(0.1, 0.9, true));
}

#[test]
fn adam_follows_optax() {
    check("adam", optim::adam(0.01, 0.9, 0.999, 1e-8));
}

#[test]
fn adamw_decays_only_masked_leaves() {
    // Keys flatten in order: "b" (a bias, not decayed), then "w".
    let by_leaf = Mask::by_leaf(|_, leaf| leaf.ndim() >= 2);
    check(
        "adamw_masked",
        optim::adamw(0.01, 0.9, 0.999, 1e-8, 0.1, by_leaf),
    );
    let flags = Mask::Leaves(vec![false, true]);
    check(
        "adamw_masked",
        optim::adamw(0.01, 0.9, 0.999, 1e-8, 0.1, flags),
    );
}

#[test]
fn clipping_chained_before_adam_follows_optax() {
    let opt = optim::chain((
        optim::clip_by_global_norm(1.0),
        optim::adam(0.05, 0.9, 0.999, 1e-8),
    ));
    check("clip_then_adam", opt);
}

fn warmup_cosine() -> Schedule {
    optim::warmup_cosine_decay_schedule(0.0, 0.1, 2, 5, 0.01, 1.0)
}

#[test]
fn scheduled_learning_rates_follow_optax() {
    check(
        "momentum_warmup_cosine",
        optim::sgd_momentum(warmup_cosine(), 0.9, false),
    );
    let linear = optim::linear_schedule(0.1, 0.01, 4, 1);
    check("adam_linear", optim::adam(linear, 0.8, 0.99, 1e-6));
}

/// Each schedule of `schedules` against `r`'s values of it at steps 0, 1, 2, ...
fn check_schedules(r: &Value, schedules: impl IntoIterator<Item = (&'static str, Schedule)>) {
    for (name, s) in schedules {
        for (step, want) in r["schedules"][name].as_array().unwrap().iter().enumerate() {
            let want = want.as_f64().unwrap() as f32;
            let got = s.at(step as i32).unwrap();
            assert!(
                (got - want).abs() <= 1e-6 * want.abs().max(1e-2),
                "{name} at step {step}: {got}, optax {want}"
            );
        }
    }
}

#[test]
fn schedules_match_optax_at_each_step() {
    let r = reference();
    let schedules = [
        ("constant", optim::constant_schedule(0.25)),
        ("linear", optim::linear_schedule(1.0, 0.1, 4, 1)),
        ("cosine", optim::cosine_decay_schedule(0.5, 6, 0.1, 2.0)),
        ("warmup_cosine", warmup_cosine()),
    ];
    check_schedules(&r, schedules);
}

/// Schedule-free SGD (warm-up, weight decay), AdamW and a schedule-free Adam without momentum
/// against optax.contrib, eagerly and under `jit`, then their evaluation parameters after the
/// last step.
#[test]
fn schedule_free_optimizers_follow_optax() {
    let r: Value = serde_json::from_str(include_str!("jax/optim_optax_reference.json")).unwrap();
    let sgd = optim::schedule_free_sgd(0.1, Some(3), 0.9, Some(0.01), 2.0);
    let adamw = optim::schedule_free_adamw(0.05, Some(2), (0.9, 0.99, 1e-8), 0.01, 2.0);
    let adam = optim::schedule_free(optim::adam(0.05, 0.0, 0.999, 1e-8), 0.05, 0.8, 1.0);
    check_in(&r, "schedule_free_sgd", sgd.clone());
    check_in(&r, "schedule_free_adamw", adamw.clone());
    check_in(&r, "schedule_free_adam", adam.clone());
    check_eval_params(&r, "schedule_free_sgd", &sgd);
    check_eval_params(&r, "schedule_free_adamw", &adamw);
    check_eval_params(&r, "schedule_free_adam", &adam);
}

/// Runs case `name` (a schedule-free optimizer) eagerly and checks its evaluation parameters
/// after the last step.
fn check_eval_params<T: GradientTransformation<Params>>(
    r: &Value,
    name: &str,
    opt: &optim::ScheduleFree<T>,
) {
    let case = r["cases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap();
    let grads: Vec<Params> = r["grads"].as_array().unwrap().iter().map(tree).collect();
    let mut p = tree(&r["params"]);
    let mut s = opt.init(&p);
    for g in &grads {
        let (u, next) = opt.update(g, &s, &p);
        (p, s) = (optim::apply_updates(&p, &u), next);
    }
    let eval = optim::schedule_free_eval_params(&s, &p);
    assert_close(
        &eval,
        &tree(&case["eval_params"]),
        &format!("{name} eval params"),
    );
}

/// RMSProp, Adagrad (an exact zero gradient among them), Lion with a weight-decay mask, Adam
/// on an exponential decay, SGD on a piecewise-constant schedule and Adam on gradients
/// accumulated over 3 steps (`MultiSteps`: parameters still for two steps, then moved; and
/// over 2, skipping non-finite or large gradients) against
/// optax 0.2.8 itself
/// (`tests/jax/generate_optim_optax.py`), eagerly and under `jit`, and the schedules at every
/// step.
#[test]
fn more_optimizers_and_schedules_follow_optax() {
    let r: Value = serde_json::from_str(include_str!("jax/optim_optax_reference.json")).unwrap();
    check_in(&r, "rmsprop", optim::rmsprop(0.01, 0.9, 1e-8));
    check_in(&r, "adagrad", optim::adagrad(0.1, 0.1, 1e-7));
    let mask = optim::Mask::Leaves(vec![false, true]);
    check_in(&r, "lion_masked", optim::lion(0.01, 0.9, 0.99, 0.1, mask));
    let exponential = || optim::exponential_decay(0.5, 3, 0.5, 2, false, Some(0.1));
    check_in(
        &r,
        "adam_exponential",
        optim::adam(exponential(), 0.9, 0.999, 1e-8),
    );
    let piecewise = || optim::piecewise_constant_schedule(0.2, vec![(6, 0.1), (3, 0.5)]);
    check_in(&r, "sgd_piecewise", optim::sgd(piecewise()));
    let accumulated = optim::multi_steps(optim::adam(0.05, 0.9, 0.999, 1e-8), 3);
    check_in(&r, "multi_steps_adam", accumulated);
    let skipping = |rule| optim::multi_steps_skipping(optim::adam(0.05, 0.9, 0.999, 1e-8), 2, rule);
    check_in(
        &r,
        "multi_steps_skip_not_finite",
        skipping(optim::SkipUpdate::NotFinite),
    );
    let large = optim::SkipUpdate::LargeUpdates {
        max_squared_norm: 10.0,
    };
    check_in(&r, "multi_steps_skip_large", skipping(large));
    check_in(&r, "adamax", optim::adamax(0.05, 0.9, 0.999, 1e-8));
    check_in(&r, "nadam", optim::nadam(0.05, 0.9, 0.999, 1e-8));
    check_in(&r, "amsgrad", optim::amsgrad(0.05, 0.9, 0.999, 1e-8));
    check_in(
        &r,
        "adabelief",
        optim::adabelief(0.05, 0.9, 0.999, 1e-16, 1e-16),
    );
    check_in(&r, "radam", optim::radam(0.05, 0.9, 0.99, 1e-8));
    let mask = optim::Mask::Leaves(vec![false, true]);
    check_in(
        &r,
        "lamb_masked",
        optim::lamb(0.05, 0.9, 0.999, 1e-6, 0.01, mask),
    );
    let factored = optim::Adafactor {
        min_dim_size_to_factor: 2,
        ..optim::adafactor(0.05)
    };
    check_in(&r, "adafactor", factored);
    check_in(&r, "adafactor_unfactored", optim::adafactor(0.05));
    let with_momentum = optim::Adafactor {
        min_dim_size_to_factor: 2,
        momentum: Some(0.9),
        weight_decay_rate: Some(0.01),
        weight_decay_mask: optim::Mask::Leaves(vec![false, true]),
        clipping_threshold: None,
        multiply_by_parameter_scale: false,
        ..optim::adafactor(exponential())
    };
    check_in(&r, "adafactor_momentum_decay", with_momentum);
    check_in(&r, "yogi", optim::yogi(0.05, 0.9, 0.999, 1e-3));
    check_in(&r, "sm3", optim::sm3(0.1, 0.9));
    let decaying = optim::ScaleBySm3 {
        b1: 0.5,
        b2: 0.9,
        eps: 1e-6,
    };
    check_in(
        &r,
        "sm3_decaying",
        optim::chain((decaying, optim::scale_by_learning_rate(0.05))),
    );
    let mask = optim::Mask::Leaves(vec![false, true]);
    check_in(
        &r,
        "adadelta_decay",
        optim::adadelta(0.5, 0.9, 1e-6, 0.01, mask),
    );
    check_in(
        &r,
        "clip_sgd",
        optim::chain((optim::clip(0.3), optim::sgd(0.1))),
    );
    let adam = || optim::adam(0.05, 0.9, 0.999, 1e-8);
    check_in(
        &r,
        "zero_nans_adam",
        optim::chain((optim::zero_nans(), adam())),
    );
    check_in(
        &r,
        "apply_if_finite_adam",
        optim::apply_if_finite(adam(), 2),
    );
    let schedules = [
        ("exponential", exponential()),
        (
            "staircase",
            optim::exponential_decay(0.5, 3, 0.5, 0, true, None),
        ),
        (
            "growth",
            optim::exponential_decay(0.1, 2, 1.5, 0, false, Some(0.3)),
        ),
        ("piecewise", piecewise()),
        (
            "polynomial",
            optim::polynomial_schedule(0.5, 0.01, 2.0, 7, 2),
        ),
        (
            "warmup_exponential",
            optim::warmup_exponential_decay_schedule(0.0, 0.3, 3, 2, 0.5, 1, false, Some(0.05)),
        ),
        (
            "linear_onecycle",
            optim::linear_onecycle_schedule(10, 0.4, 0.3, 0.85, 25.0, 1e4),
        ),
        (
            "cosine_onecycle",
            optim::cosine_onecycle_schedule(9, 0.2, 0.4, 25.0, 1e4),
        ),
        (
            "interpolate_cosine",
            optim::piecewise_interpolate_schedule(
                optim::Interpolation::Cosine,
                1.0,
                vec![(8, 0.5), (4, 0.1)],
            ),
        ),
        (
            "sgdr",
            optim::sgdr_schedule(&[
                optim::WarmupCosine {
                    init_value: 0.0,
                    peak_value: 0.4,
                    warmup_steps: 2,
                    decay_steps: 5,
                    end_value: 0.05,
                    exponent: 1.0,
                },
                optim::WarmupCosine {
                    init_value: 0.1,
                    peak_value: 0.2,
                    warmup_steps: 1,
                    decay_steps: 4,
                    end_value: 0.0,
                    exponent: 2.0,
                },
            ]),
        ),
        (
            "interpolate_linear",
            optim::piecewise_interpolate_schedule(
                optim::Interpolation::Linear,
                2.0,
                vec![(9, 0.1), (3, 2.0)],
            ),
        ),
    ];
    check_schedules(&r, schedules);
}

#[test]
fn the_step_count_saturates_as_optax_safe_increment_does() {
    let params: Params = [("w".to_string(), Tensor::scalar(1.0f32))].into();
    let opt = optim::adam(0.1, 0.9, 0.999, 1e-8);
    let mut state = opt.init(&params);
    state.0.count = Tensor::scalar(i32::MAX - 1);
    for _ in 0..2 {
        state = opt.update(&params, &state, &params).1;
    }
    assert_eq!(state.0.count.to_vec::<i32>().unwrap(), [i32::MAX]);
}

#[test]
fn tree_maps_combine_leaves_and_name_mismatched_structures() {
    let a = (Tensor::scalar(1.0f32), vec![Tensor::scalar(2.0f32)]);
    let b = (Tensor::scalar(10.0f32), vec![Tensor::scalar(20.0f32)]);
    let sum = tree_map2(&a, &b, |x, y| x + y).unwrap();
    assert_eq!(sum.1[0].to_vec::<f32>().unwrap(), [22.0]);
    let three = tree_map_n(&[&a, &b, &sum], |xs| &xs[0] * &xs[1] + &xs[2]).unwrap();
    assert_eq!(three.0.to_vec::<f32>().unwrap(), [21.0]);
    assert_eq!(
        tree_map(&a, |x| x * 3.0).1[0].to_vec::<f32>().unwrap(),
        [6.0]
    );

    let longer = (
        Tensor::scalar(1.0f32),
        vec![Tensor::scalar(2.0f32), Tensor::scalar(3.0f32)],
    );
    let e = tree_map2(&a, &longer, |x, y| x + y).err().unwrap();
    let Error::Tree { expected, found } = &e else {
        panic!("{e}")
    };
    assert!(expected.contains("(*, (*))"), "{e}");
    assert_eq!(found, "(*, (*, *))", "{e}");
    assert!(tree_map_n::<Tensor>(&[], |x| x[0].clone()).is_err());

    // A map's keys are part of its structure.
    let m1: Params = [("w".to_string(), Tensor::scalar(1.0f32))].into();
    let m2: Params = [("v".to_string(), Tensor::scalar(1.0f32))].into();
    let e = tree_map2(&m1, &m2, |x, _| x.clone()).err().unwrap();
    assert!(e.to_string().contains(r#"{"w": *}"#), "{e}");
    assert!(e.to_string().contains(r#"{"v": *}"#), "{e}");
}

#[test]
fn tree_utilities_flatten_sum_and_norm() {
    let t: Params = [
        ("a".to_string(), Tensor::from_vec([2], vec![3.0f32, 0.0])),
        ("b".to_string(), Tensor::scalar(4.0f32)),
    ]
    .into();
    let (leaves, def) = ferrax::tree_flatten(&t);
    assert_eq!(def.to_string(), r#"{"a": *, "b": *}"#);
    let back: Params = ferrax::tree_unflatten(&def, leaves).unwrap();
    assert_eq!(back["b"].to_vec::<f32>().unwrap(), [4.0]);
    assert!(ferrax::tree_unflatten::<Params>(&def, vec![]).is_err());
    assert_eq!(ferrax::tree_sum(&t).to_vec::<f32>().unwrap(), [7.0]);
    assert_eq!(ferrax::global_norm(&t).to_vec::<f32>().unwrap(), [5.0]);
    // Mixed precisions add in f32 (a bf16 sum would round 1.0001 to 1), complex leaves by
    // their magnitudes.
    let mixed: Vec<Tensor> = vec![
        Tensor::from_vec([1], vec![half::bf16::from_f32(1.0)]),
        Tensor::from_vec([1], vec![0.01f32]),
    ];
    let norm = ferrax::global_norm(&mixed);
    assert_eq!(norm.dtype(), DType::F32);
    assert!((norm.to_vec::<f32>().unwrap()[0] - 1.0001f32.sqrt()).abs() < 1e-7);
    let complex = vec![Tensor::from_vec(
        [1],
        vec![ferrax::ir::Complex::new(3.0f64, 4.0)],
    )];
    assert_eq!(
        ferrax::global_norm(&complex).to_vec::<f64>().unwrap(),
        [5.0]
    );
    let z = ferrax::zeros_like(&t);
    assert_eq!(z["a"].to_vec::<f32>().unwrap(), [0.0, 0.0]);
    assert_eq!(ferrax::tree_leaves(&z).len(), 2);
}

#[test]
fn a_state_of_another_structure_is_an_error_naming_it() {
    let params: Params = [("w".to_string(), Tensor::scalar(1.0f32))].into();
    let other: Params = [("v".to_string(), Tensor::scalar(1.0f32))].into();
    let opt = optim::adam(0.1, 0.9, 0.999, 1e-8);
    let state = opt.init(&other);
    let (u, _) = opt.update(&params, &state, &params);
    let e = u["w"].to_vec::<f32>().unwrap_err();
    assert!(e.to_string().contains("first moment"), "{e}");
    // Inside jit the error comes out of the call.
    let step = jit(|(p, s): (Params, _)| opt.update(&p, &s, &p));
    assert!(step.call((params.clone(), state)).is_err());
    let e = optim::apply_updates(&params, &other)["w"]
        .to_vec::<f32>()
        .unwrap_err();
    assert!(e.to_string().contains(r#"{"v": *}"#), "{e}");
}

#[test]
fn adam_trains_the_mlp() {
    let sizes = [4, 16, 3];
    let mut seed = 7u64;
    let mut uniform = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed >> 40) as f32 / (1u64 << 24) as f32 - 0.5
    };
    let params = common::Mlp {
        layers: sizes
            .windows(2)
            .map(|w| common::Layer {
                w: Tensor::from_vec([w[0], w[1]], (0..w[0] * w[1]).map(|_| uniform()).collect()),
                b: Tensor::zeros(DType::F32, [w[1]]),
            })
            .collect(),
    };
    let x = Tensor::from_vec([12, 4], (0..48).map(|_| uniform()).collect::<Vec<f32>>());
    let labels: Vec<f32> = (0..12)
        .flat_map(|i| (0..3).map(move |c| f32::from(u8::from(i % 3 == c))))
        .collect();
    let y = Tensor::from_vec([12, 3], labels);

    let loss = |(p, x, y): (common::Mlp, Tensor, Tensor)| common::mlp_loss(&p, &x, &y);
    let opt = optim::adam(0.05, 0.9, 0.999, 1e-8);
    let step = jit(|(p, s, x, y): (common::Mlp, _, Tensor, Tensor)| {
        let (value, (g, _, _)) = value_and_grad(loss)((p.clone(), x, y));
        let (u, s) = opt.update(&g, &s, &p);
        (value, optim::apply_updates(&p, &u), s)
    });
    let (mut p, mut s) = (params.clone(), opt.init(&params));
    let first = loss((params, x.clone(), y.clone()))
        .to_vec::<f32>()
        .unwrap()[0];
    let mut last = first;
    for _ in 0..50 {
        let (value, np, ns) = step.call((p, s, x.clone(), y.clone())).unwrap();
        (p, s, last) = (np, ns, value.to_vec::<f32>().unwrap()[0]);
    }
    assert!(last < first * 0.5, "loss {first} -> {last}");
    assert_eq!(s.0.count.to_vec::<i32>().unwrap(), [50]);
    // The state passes through jit as a tree: Adam's count and two moments per parameter (a
    // constant learning rate keeps no state).
    assert_eq!(s.leaves().len(), 1 + 2 * p.leaves().len());
    assert!(s.1.is_none());
}

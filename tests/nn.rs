//! `ferrax::nn` against JAX: every layer's output and the gradients of a weighted sum of it
//! with respect to its inputs and parameters, eagerly and under `jit`, on values
//! `tests/jax/generate_nn.py` computed in f32 (`tests/jax/nn_reference.json`; no Python is
//! needed here); the composite erf behind exact GELU over a dense sweep of [-6, 6]; the
//! initializers' statistics, fans and determinism; and a tiny GPT that trains.
//!
//! Tolerances, relative to `max(|want|, 1)` (values and gradients here are of order 1):
//! elementwise layers built from exactly rounded operations (linear's short dot products,
//! embedding, SiLU) agree to 1e-6 (a few f32 ulps); reductions (the norms, the loss, the
//! attention, whose gradient goes through a softmax and four products) sum in another order
//! than XLA and agree to 4e-6; transcendental compositions (GELU's tanh and erf forms, whose
//! `exp`s and `tanh`s are 3-ULP polynomials in compiled kernels) to 2e-6.
#![allow(clippy::unwrap_used)]

use ferrax::nn::{self, initializers, Attention, Linear};
use ferrax::optim::{self, GradientTransformation, Mask};
use ferrax::random;
use ferrax::{jit, value_and_grad, DType, Tensor, Tree};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::OnceLock;

type Inputs = BTreeMap<String, Tensor>;

fn reference() -> &'static Value {
    static R: OnceLock<Value> = OnceLock::new();
    R.get_or_init(|| serde_json::from_str(include_str!("jax/nn_reference.json")).unwrap())
}

fn tensor(v: &Value) -> Tensor {
    let shape: Vec<usize> = v["shape"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_u64().unwrap() as usize)
        .collect();
    let data = v["data"].as_array().unwrap();
    if v["dtype"] == "i32" {
        let ints = data.iter().map(|d| d.as_i64().unwrap() as i32).collect();
        return Tensor::from_vec(shape, ints);
    }
    let floats: Vec<f32> = data.iter().map(|d| d.as_f64().unwrap() as f32).collect();
    Tensor::from_vec(shape, floats)
}

fn floats(v: &Value) -> Vec<f32> {
    tensor(v).to_vec::<f32>().unwrap()
}

/// The layer of reference case `name`, over the case's named inputs.
fn layer(name: &str) -> fn(&Inputs) -> Tensor {
    match name {
        "linear" => |a| {
            let p = Linear {
                w: a["w"].clone(),
                b: Some(a["b"].clone()),
            };
            nn::linear(&a["x"], &p)
        },
        "linear_no_bias" => |a| {
            let p = Linear {
                w: a["w"].clone(),
                b: None,
            };
            nn::linear(&a["x"], &p)
        },
        "embedding" => |a| nn::embedding(&a["table"], &a["ids"]),
        "layer_norm" => |a| nn::layer_norm(&a["x"], &a["g"], &a["b"], 1e-5),
        "rms_norm" => |a| nn::rms_norm(&a["x"], &a["g"], 1e-6),
        "gelu_tanh" => |a| nn::gelu(&a["x"], true),
        "gelu_exact" => |a| nn::gelu(&a["x"], false),
        "silu" => |a| nn::silu(&a["x"]),
        "causal_self_attention" => |a| {
            let p = Attention {
                qkv: Linear {
                    w: a["w_qkv"].clone(),
                    b: Some(a["b_qkv"].clone()),
                },
                proj: Linear {
                    w: a["w_o"].clone(),
                    b: Some(a["b_o"].clone()),
                },
            };
            nn::causal_self_attention(&a["x"], &p, 2)
        },
        "softmax_cross_entropy_with_integer_labels" => {
            |a| nn::softmax_cross_entropy_with_integer_labels(&a["logits"], &a["labels"])
        }
        "accuracy" => |a| nn::accuracy(&a["logits"], &a["labels"]),
        other => panic!("no layer for reference case {other}"),
    }
}

fn tolerance(name: &str) -> f32 {
    match name {
        "linear" | "linear_no_bias" | "embedding" | "silu" | "accuracy" => 1e-6,
        "gelu_tanh" | "gelu_exact" => 2e-6,
        _ => 4e-6,
    }
}

fn assert_close(got: &Tensor, want: &Value, tol: f32, what: &str) {
    let g = got
        .to_vec::<f32>()
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let w = floats(want);
    assert_eq!(g.len(), w.len(), "{what}: length");
    assert_eq!(got.shape(), tensor(want).shape(), "{what}: shape");
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        assert!(
            (a - b).abs() <= tol * b.abs().max(1.0),
            "{what}[{i}] = {a}, JAX {b} (diff {:e})",
            (a - b).abs()
        );
    }
}

#[test]
fn layers_and_their_gradients_match_jax_eagerly_and_under_jit() {
    for case in reference()["cases"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let (f, tol) = (layer(name), tolerance(name));
        let inputs: Inputs = case["inputs"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), tensor(v)))
            .collect();
        let weights = tensor(&case["weights"]);

        assert_close(&f(&inputs), &case["output"], tol, &format!("{name} eager"));
        let jitted = jit(|a: Inputs| f(&a)).call(inputs.clone()).unwrap();
        assert_close(&jitted, &case["output"], tol, &format!("{name} jit"));

        let weighted = |(a, w): (Inputs, Tensor)| (f(&a) * w).sum(..);
        let (_, (eager, _)) = value_and_grad(weighted)((inputs.clone(), weights.clone()));
        let jit_grads = jit(|args: (Inputs, Tensor)| value_and_grad(weighted)(args).1 .0)
            .call((inputs.clone(), weights.clone()))
            .unwrap();
        for (key, want) in case["grads"].as_object().unwrap() {
            assert_close(&eager[key], want, tol, &format!("{name} d/d{key} eager"));
            assert_close(&jit_grads[key], want, tol, &format!("{name} d/d{key} jit"));
        }
    }
}

/// Largest absolute difference, and largest in units of f32's spacing at the wanted value.
fn errors(got: &[f32], want: &[f32]) -> (f32, f32) {
    got.iter()
        .zip(want)
        .fold((0.0f32, 0.0f32), |(abs, ulps), (a, b)| {
            let d = (a - b).abs();
            (abs.max(d), ulps.max(d / ulp(*b)))
        })
}

/// Exact GELU (through the composite erfc), its derivative and erf over [-6, 6] in steps of
/// 0.02, against JAX's (XLA's `erfc`/`erf`) and against the exact values rounded to f32
/// (`*_true`). The measured errors are quoted in docs/training.md; the bounds are a little
/// above them and hold eagerly (the interpreter rounds each `exp` once) and compiled (the
/// CPU kernels' `exp` is a 3-ULP polynomial). Each is an absolute bound, or, for |x| > 3
/// where GELU's values are large (or, on the negative side, tiny), a bound in ulps of the
/// value: nothing computed in f32 from a rounded `x` gets both below one ulp.
#[test]
fn exact_gelu_and_erf_are_within_bounds_over_a_dense_sweep() {
    let sweep = &reference()["gelu_sweep"];
    let x = tensor(&sweep["x"]);
    let xs = floats(&sweep["x"]);
    type Run = fn(Tensor) -> Tensor;
    // (what, function, reference key, absolute bound, ulp bound for |x| > 3)
    let checks: [(&str, Run, &str, f32, f32); 7] = [
        ("gelu", |x| nn::gelu(&x, false), "gelu_exact", 2.5e-7, 16.0),
        (
            "gelu",
            |x| nn::gelu(&x, false),
            "gelu_exact_true",
            2.5e-7,
            48.0,
        ),
        ("gelu'", gelu_derivative, "gelu_exact_grad", 1.5e-7, 80.0),
        (
            "gelu'",
            gelu_derivative,
            "gelu_exact_grad_true",
            1.5e-7,
            48.0,
        ),
        ("erf", |x| nn::erf(&x), "erf", 2e-7, 4.0),
        ("erf", |x| nn::erf(&x), "erf_true", 1.2e-7, 3.0),
        // JAX's `1 + tanh(u)` cancels to 0 below x = -4.5, where ferrax's kernels compute the
        // sum as a quotient and keep the tail (up to 1e-6 in magnitude).
        ("gelu tanh", |x| nn::gelu(&x, true), "gelu_tanh", 1e-6, 2.0),
    ];
    for (what, f, key, abs_bound, ulp_bound) in checks {
        let want = floats(&sweep[key]);
        for (mode, got) in [
            ("eager", f(x.clone())),
            ("jit", jit(f).call(x.clone()).unwrap()),
        ] {
            let got = got.to_vec::<f32>().unwrap();
            let (abs, ulps) = errors(&got, &want);
            let inner = |v: &[f32]| -> Vec<f32> {
                v.iter()
                    .zip(&xs)
                    .filter(|(_, x)| x.abs() <= 3.0)
                    .map(|(v, _)| *v)
                    .collect()
            };
            let (abs3, _) = errors(&inner(&got), &inner(&want));
            eprintln!(
                "{what} {mode} vs {key}: max abs error {abs:e} ({abs3:e} for |x| <= 3), max {ulps:.1} ulps"
            );
            for (i, (a, b)) in got.iter().zip(&want).enumerate() {
                let d = (a - b).abs();
                assert!(
                    d <= abs_bound || (xs[i].abs() > 3.0 && d <= ulp_bound * ulp(*b)),
                    "{what} {mode} at x = {}: {a}, {key} {b} (diff {d:e})",
                    xs[i]
                );
            }
        }
    }
    // JAX's own errors, for comparison (printed only).
    for (key, truth) in [
        ("gelu_exact", "gelu_exact_true"),
        ("gelu_exact_grad", "gelu_exact_grad_true"),
        ("erf", "erf_true"),
    ] {
        let (abs, ulps) = errors(&floats(&sweep[key]), &floats(&sweep[truth]));
        eprintln!("JAX {key} vs {truth}: max abs error {abs:e}, max {ulps:.1} ulps");
    }
}

fn gelu_derivative(x: Tensor) -> Tensor {
    ferrax::grad(|x: Tensor| nn::gelu(&x, false).sum(..))(x)
}

/// The spacing of f32 at `b`'s magnitude.
fn ulp(b: f32) -> f32 {
    f32::from_bits(b.abs().to_bits() + 1) - b.abs()
}

fn stats(t: &Tensor) -> (f64, f64, f64) {
    let v = t.to_vec::<f32>().unwrap();
    let n = v.len() as f64;
    let mean = v.iter().map(|&x| f64::from(x)).sum::<f64>() / n;
    let var = v
        .iter()
        .map(|&x| (f64::from(x) - mean).powi(2))
        .sum::<f64>()
        / n;
    let max = v.iter().map(|x| f64::from(x.abs())).fold(0.0, f64::max);
    (mean, var.sqrt(), max)
}

/// Means within 5 standard errors of 0, standard deviations within 2% (100,000 draws give a
/// relative standard error of 0.2-0.3% on the standard deviation), and every draw within
/// the distribution's support; fans from the last two axes times the receptive field.
#[test]
fn initializers_have_the_variances_jax_gives_them() {
    let check = |what: &str, t: Tensor, std: f64, max: f64| {
        let (m, s, mx) = stats(&t);
        let n = t.numel() as f64;
        assert!(m.abs() <= 5.0 * std / n.sqrt(), "{what}: mean {m}");
        assert!((s / std - 1.0).abs() <= 0.02, "{what}: std {s}, want {std}");
        assert!(mx <= max, "{what}: |x| up to {mx}, bound {max}");
    };
    let f32_ = DType::F32;
    check(
        "normal",
        initializers::normal(0.5).init(&random::key(1), [100_000], f32_),
        0.5,
        5.0,
    );
    // Truncated to 2 stddevs, not rescaled: the spread is 0.88 of the stddev.
    let t = initializers::truncated_normal(1.0).init(&random::key(2), [100_000], f32_);
    check("truncated_normal", t, 0.879_625_66, 2.0);
    // glorot_uniform [250, 350]: variance 1 / 300, limit sqrt(3 / 300).
    let limit = (3.0f64 / 300.0).sqrt();
    let t = initializers::glorot_uniform().init(&random::key(3), [250, 350], f32_);
    check("glorot_uniform", t, limit / 3f64.sqrt(), limit);
    let t = initializers::xavier_normal().init(&random::key(4), [250, 350], f32_);
    check(
        "glorot_normal",
        t,
        (1.0f64 / 300.0).sqrt(),
        2.0 * (1.0f64 / 300.0).sqrt() / 0.8796,
    );
    // he_normal on a 3x3 convolution [3, 3, 16, 32]: fan_in = 3·3·16.
    let std = (2.0f64 / 144.0).sqrt();
    assert_eq!(initializers::kaiming_normal(), initializers::he_normal());
    let t = initializers::he_normal().init(&random::key(5), [3, 3, 16, 256], f32_);
    check(
        "he_normal",
        t,
        (2.0f64 / 144.0).sqrt(),
        2.0 * std / 0.8796 + 1e-6,
    );
    let t = initializers::lecun_normal().init(&random::key(6), [400, 300], f32_);
    check(
        "lecun_normal",
        t,
        (1.0f64 / 400.0).sqrt(),
        2.0 / 20.0 / 0.8796 + 1e-6,
    );
    let t = initializers::he_uniform().init(&random::key(7), [500, 200], f32_);
    check(
        "he_uniform",
        t,
        (2.0f64 / 500.0).sqrt(),
        (6.0f64 / 500.0).sqrt(),
    );
    let t = initializers::lecun_uniform().init(&random::key(8), [500, 200], f32_);
    check(
        "lecun_uniform",
        t,
        (1.0f64 / 500.0).sqrt(),
        (3.0f64 / 500.0).sqrt(),
    );
    // fan_out and the geometric mean.
    use initializers::{Distribution, FanMode};
    let t = initializers::variance_scaling(1.0, FanMode::FanOut, Distribution::Normal).init(
        &random::key(9),
        [100, 1000],
        f32_,
    );
    check("fan_out", t, (1.0f64 / 1000.0).sqrt(), 1.0);
    let t = initializers::variance_scaling(4.0, FanMode::FanGeoAvg, Distribution::Normal).init(
        &random::key(9),
        [100, 1000],
        f32_,
    );
    check(
        "fan_geo_avg",
        t,
        (4.0 / (100.0f64 * 1000.0).sqrt()).sqrt(),
        1.0,
    );

    let u = initializers::uniform(0.1)
        .init(&random::key(10), [100_000], f32_)
        .to_vec::<f32>()
        .unwrap();
    assert!(u.iter().all(|&v| (0.0..0.1).contains(&v)));
    assert_eq!(
        initializers::zeros()
            .init(&random::key(0), [2], f32_)
            .to_vec::<f32>()
            .unwrap(),
        [0.0; 2]
    );
    assert_eq!(
        initializers::ones()
            .init(&random::key(0), [2], DType::I32)
            .to_vec::<i32>()
            .unwrap(),
        [1; 2]
    );
    assert_eq!(
        initializers::constant(0.5)
            .init(&random::key(0), [1], f32_)
            .to_vec::<f32>()
            .unwrap(),
        [0.5]
    );
    let t = initializers::normal(1.0).init(&random::key(0), [2, 3], DType::F64);
    assert_eq!((t.dtype(), t.shape()), (DType::F64, &[2usize, 3][..]));
}

#[test]
fn initializers_are_deterministic_by_key() {
    let draw = |seed| {
        initializers::glorot_normal()
            .init(&random::key(seed), [8, 4], DType::F32)
            .to_vec::<f32>()
            .unwrap()
    };
    assert_eq!(draw(42), draw(42));
    assert_ne!(draw(42), draw(43));
    // A uniform initializer is JAX's uniform draw scaled: bit for bit its value.
    let key = random::key(7);
    let scaled = initializers::uniform(0.5).init(&key, [16], DType::F32);
    let by_hand = random::uniform(&key, [16], DType::F32) * 0.5;
    assert_eq!(
        scaled.to_vec::<f32>().unwrap(),
        by_hand.to_vec::<f32>().unwrap()
    );
}

#[test]
fn invalid_requests_are_errors_naming_the_problem() {
    let e = initializers::he_normal()
        .init(&random::key(0), [5], DType::F32)
        .to_vec::<f32>()
        .unwrap_err();
    assert!(e.to_string().contains("out of range"), "{e}");
    let e = initializers::normal(1.0)
        .init(&random::key(0), [5], DType::I32)
        .to_vec::<i32>()
        .unwrap_err();
    assert!(e.to_string().contains("float dtype"), "{e}");
    let empty = initializers::Initializer::TruncatedNormal {
        stddev: 1.0,
        lower: 1.0,
        upper: 1.0,
    };
    assert!(empty
        .init(&random::key(0), [3], DType::F32)
        .to_vec::<f32>()
        .is_err());

    let logits = Tensor::zeros(DType::F32, [2, 3]);
    let labels = Tensor::from_vec([3], vec![0i32, 1, 2]);
    let e = nn::softmax_cross_entropy_with_integer_labels(&logits, &labels)
        .to_vec::<f32>()
        .unwrap_err();
    assert!(e.to_string().contains("without its last axis"), "{e}");
    let e = nn::accuracy(&logits, &Tensor::zeros(DType::F32, [2]))
        .to_vec::<f32>()
        .unwrap_err();
    assert!(e.to_string().contains("integers"), "{e}");

    let lin = |i, o| Linear {
        w: Tensor::zeros(DType::F32, [i, o]),
        b: None,
    };
    let attn = Attention {
        qkv: lin(6, 18),
        proj: lin(6, 6),
    };
    let x = Tensor::zeros(DType::F32, [1, 2, 6]);
    let e = nn::causal_self_attention(&x, &attn, 4)
        .to_vec::<f32>()
        .unwrap_err();
    assert!(e.to_string().contains("heads"), "{e}");
    let y = nn::causal_self_attention(&Tensor::zeros(DType::F32, [2, 6]), &attn, 3);
    assert_eq!(y.shape(), [2, 6]);
    let bad = Attention {
        qkv: lin(6, 12),
        proj: lin(6, 6),
    };
    assert!(nn::causal_self_attention(&x, &bad, 3)
        .to_vec::<f32>()
        .is_err());
}

#[derive(Tree, Clone)]
struct Block {
    ln1: (Tensor, Tensor),
    attn: Attention,
    ln2: (Tensor, Tensor),
    fc: Linear,
    proj: Linear,
}

#[derive(Tree, Clone)]
struct Gpt {
    wte: Tensor,
    wpe: Tensor,
    blocks: Vec<Block>,
    lnf: (Tensor, Tensor),
    head: Linear,
}

const HEADS: usize = 2;

/// workloads.md's GPT at toy size: matrices and embeddings N(0, 0.02), biases 0, gains 1.
fn gpt_init(vocab: usize, time: usize, width: usize, layers: usize) -> Gpt {
    let f = DType::F32;
    let mut seed = 0;
    let mut n = |shape: &[usize]| {
        seed += 1;
        initializers::normal(0.02).init(&random::key(seed), shape.to_vec(), f)
    };
    let dense = |w: Tensor| {
        let out = w.shape()[1];
        Linear {
            w,
            b: Some(Tensor::zeros(f, [out])),
        }
    };
    let ln = || (Tensor::ones(f, [width]), Tensor::zeros(f, [width]));
    Gpt {
        wte: n(&[vocab, width]),
        wpe: n(&[time, width]),
        blocks: (0..layers)
            .map(|_| Block {
                ln1: ln(),
                attn: Attention {
                    qkv: dense(n(&[width, 3 * width])),
                    proj: dense(n(&[width, width])),
                },
                ln2: ln(),
                fc: dense(n(&[width, 4 * width])),
                proj: dense(n(&[4 * width, width])),
            })
            .collect(),
        lnf: ln(),
        head: Linear {
            w: n(&[width, vocab]),
            b: None,
        },
    }
}

fn gpt_logits(p: &Gpt, idx: &Tensor) -> Tensor {
    let time = idx.shape()[1];
    let mut x = nn::embedding(&p.wte, idx) + p.wpe.slice(&[0, 0], &[time, p.wpe.shape()[1]]);
    for b in &p.blocks {
        x = &x
            + nn::causal_self_attention(
                &nn::layer_norm(&x, &b.ln1.0, &b.ln1.1, 1e-5),
                &b.attn,
                HEADS,
            );
        let h = nn::linear(&nn::layer_norm(&x, &b.ln2.0, &b.ln2.1, 1e-5), &b.fc);
        x = &x + nn::linear(&nn::gelu(&h, true), &b.proj);
    }
    nn::linear(&nn::layer_norm(&x, &p.lnf.0, &p.lnf.1, 1e-5), &p.head)
}

fn gpt_loss((p, idx, tgt): (Gpt, Tensor, Tensor)) -> Tensor {
    nn::softmax_cross_entropy_with_integer_labels(&gpt_logits(&p, &idx), &tgt).mean(..)
}

/// A 2-layer GPT (embedding, layer norms, causal attention, a GELU MLP, cross-entropy)
/// learns a deterministic sequence (each token `3t + 1 mod 16` of the previous one) in 30
/// jitted AdamW steps: from about ln 16 to well below half of it.
#[test]
fn a_tiny_gpt_trains_with_adamw() {
    let (vocab, time, batch) = (16, 8, 4);
    let params = gpt_init(vocab, time, 16, 2);
    let seq: Vec<i32> = (0..batch * (time + 1))
        .map(|i| {
            let (row, pos) = (i / (time + 1), i % (time + 1));
            (0..pos).fold(row as i32 * 5, |t, _| (3 * t + 1) % vocab as i32)
        })
        .collect();
    let pick = |offset: usize| {
        let v: Vec<i32> = (0..batch)
            .flat_map(|r| seq[r * (time + 1) + offset..r * (time + 1) + offset + time].to_vec())
            .collect();
        Tensor::from_vec([batch, time], v)
    };
    let (idx, tgt) = (pick(0), pick(1));

    let opt = optim::adamw(
        1e-2,
        0.9,
        0.95,
        1e-8,
        0.1,
        Mask::by_leaf(|_, w| w.ndim() >= 2),
    );
    let step = jit(|(p, s, idx, tgt): (Gpt, _, Tensor, Tensor)| {
        let (loss, (g, _, _)) = value_and_grad(gpt_loss)((p.clone(), idx, tgt));
        let (updates, s) = opt.update(&g, &s, &p);
        (loss, optim::apply_updates(&p, &updates), s)
    });
    let (mut p, mut s) = (params.clone(), opt.init(&params));
    let first = gpt_loss((params, idx.clone(), tgt.clone()))
        .to_vec::<f32>()
        .unwrap()[0];
    assert!(
        (first - (vocab as f32).ln()).abs() < 0.1,
        "initial loss {first}"
    );
    let mut last = first;
    for _ in 0..30 {
        let (loss, np, ns) = step.call((p, s, idx.clone(), tgt.clone())).unwrap();
        (p, s, last) = (np, ns, loss.to_vec::<f32>().unwrap()[0]);
    }
    let after = gpt_loss((p.clone(), idx.clone(), tgt.clone()))
        .to_vec::<f32>()
        .unwrap()[0];
    eprintln!("loss {first} -> {last} (after the last update: {after})");
    assert!(after < 0.5 * first, "loss {first} -> {after}");
    let acc = nn::accuracy(&gpt_logits(&p, &idx), &tgt)
        .to_vec::<f32>()
        .unwrap()[0];
    assert!(acc > 0.5, "accuracy {acc}");
}

/// The cross-entropy picks the class `take_along_axis` reads for labels of every integer
/// type: negative labels count from the end, labels past either end clamp, and u8 or i8
/// labels of a class axis wider than their type compare exactly. Against the loss spelled
/// with `take_along_axis` of the labels as i64, eagerly; equal to the bit.
#[test]
fn cross_entropy_labels_of_every_integer_type_pick_what_take_along_axis_picks() {
    let classes = 300;
    let logits = Tensor::from_vec(
        [4, classes],
        (0..4 * classes)
            .map(|i| ((i * 7919) % 1009) as f32 / 97.0 - 5.0)
            .collect::<Vec<f32>>(),
    );
    let by_gather = |labels: &Tensor| {
        let shifted = &logits - logits.max_keepdims(-1);
        let picked = shifted
            .take_along_axis(&labels.expand_dims(-1), -1)
            .squeeze(-1);
        shifted.exp().sum(-1).log() - picked
    };
    // The gather reads the labels widened: i8 labels cannot count 300 classes from the end.
    let cases = [
        Tensor::from_vec([4], vec![0i32, 299, -1, 1000]),
        Tensor::from_vec([4], vec![-301i64, -300, 7, i64::MAX]),
        Tensor::from_vec([4], vec![0u8, 255, 17, 200]),
        Tensor::from_vec([4], vec![-128i8, -1, 127, 3]),
        Tensor::from_vec([4], vec![0u32, 299, 300, u32::MAX]),
    ];
    for labels in &cases {
        let got = nn::softmax_cross_entropy_with_integer_labels(&logits, labels);
        let want = by_gather(&labels.astype(DType::I64));
        assert_eq!(
            got.to_vec::<f32>().unwrap(),
            want.to_vec::<f32>().unwrap(),
            "labels {}",
            labels.ty()
        );
    }
}

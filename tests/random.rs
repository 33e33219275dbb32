//! `ferrax::random` against JAX: keys, splits, folds and raw bits bit for bit, and every
//! sampler's values on the same keys and shapes (`tests/jax/generate_random.py` computed
//! them; `tests/jax/random_reference.json`), each drawn eagerly and under `jit` (bits and f32
//! uniforms also on the emulated GPU). Samplers whose arithmetic is exact (uniform,
//! bernoulli, randint, categorical) match exactly; those through `erf_inv`, `erf` or `log`
//! within a few ULP. Then statistical sanity of the distributions (moments and a
//! Kolmogorov-Smirnov test) and bad input.
#![allow(clippy::unwrap_used)]

use ferrax::random::{self, Key};
use ferrax::{jit, vmap, DType, Tensor};
use serde_json::Value;
use std::sync::OnceLock;

fn reference() -> &'static Value {
    static R: OnceLock<Value> = OnceLock::new();
    R.get_or_init(|| serde_json::from_str(include_str!("jax/random_reference.json")).unwrap())
}

fn cases(name: &str) -> Vec<&'static Value> {
    let all = reference()["cases"].as_array().unwrap();
    let found: Vec<_> = all.iter().filter(|c| c["name"] == name).collect();
    assert!(!found.is_empty(), "no reference cases named {name}");
    found
}

fn numbers(v: &Value) -> Vec<f64> {
    let number = |x: &Value| x.as_f64().or(x.as_bool().map(f64::from)).unwrap();
    v.as_array().unwrap().iter().map(number).collect()
}

fn shape(v: &Value) -> Vec<usize> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as usize)
        .collect()
}

fn dtype(name: &str) -> DType {
    match name {
        "float32" => DType::F32,
        "float64" => DType::F64,
        "float16" => DType::F16,
        "bfloat16" => DType::BF16,
        "int32" => DType::I32,
        "uint32" => DType::U32,
        "uint8" => DType::U8,
        "bool" => DType::Bool,
        other => panic!("unexpected dtype {other}"),
    }
}

fn seed(case: &Value) -> u32 {
    // JAX's `key(seed)` keeps the low 32 bits of a larger seed.
    (case["seed"].as_u64().unwrap() & 0xffff_ffff) as u32
}

/// An element's value, and its bit pattern for floats (JSON readers may round a decimal
/// f64 differently, so exact comparisons use the bits).
struct Element {
    value: f64,
    bits: Option<u64>,
}

/// The elements of an array: its values, and the bit patterns of float elements.
fn elements(a: &ferrax::Array) -> Vec<Element> {
    let values = a.to_f64_vec();
    let bits = |v: f64| match a.dtype() {
        DType::F32 => Some(u64::from((v as f32).to_bits())),
        DType::F64 => Some(v.to_bits()),
        DType::F16 => Some(u64::from(half::f16::from_f64(v).to_bits())),
        DType::BF16 => Some(u64::from(half::bf16::from_f64(v).to_bits())),
        DType::I32
        | DType::I64
        | DType::U32
        | DType::U8
        | DType::I8
        | DType::I16
        | DType::U16
        | DType::U64
        | DType::Bool
        | DType::C64
        | DType::C128 => None,
    };
    values
        .into_iter()
        .map(|value| Element {
            value,
            bits: bits(value),
        })
        .collect()
}

fn reference_elements(v: &Value) -> Vec<Element> {
    let values = numbers(&v["data"]);
    let bits = v["bits"].as_array();
    values
        .into_iter()
        .enumerate()
        .map(|(i, value)| Element {
            value,
            bits: bits.map(|b| b[i].as_u64().unwrap()),
        })
        .collect()
}

/// `f`'s value eagerly and under `jit` (compiled for the CPU), checked against the case's
/// value by `check`.
fn eager_and_jit(
    case: &Value,
    f: impl Fn(Key) -> Tensor + Send + Sync,
    check: impl Fn(&str, &[Element], &[Element]),
) {
    let want = &case["value"];
    let key = random::key(seed(case));
    let eager = f(key.clone());
    let jitted = jit(&f).call(key).unwrap();
    for (how, got) in [("eager", eager), ("jit", jitted)] {
        let what = format!("{} seed {} ({how})", case["name"], case["seed"]);
        let got = got.to_array().unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(
            got.dims(),
            shape(&want["shape"]).as_slice(),
            "{what}: shape"
        );
        assert_eq!(
            got.dtype(),
            dtype(want["dtype"].as_str().unwrap()),
            "{what}: dtype"
        );
        check(&what, &elements(&got), &reference_elements(want));
    }
}

fn exact(what: &str, got: &[Element], want: &[Element]) {
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let same = match (g.bits, w.bits) {
            (Some(a), Some(b)) => a == b,
            _ => g.value == w.value,
        };
        assert!(
            same,
            "{what}: element {i} is {}, JAX's is {}",
            g.value, w.value
        );
    }
}

/// Within `ulps` units in the last place of f32, relative to the larger magnitude or to
/// `floor` if that is larger (where the value is a difference of larger quantities).
fn within_ulps(ulps: f64, floor: f64) -> impl Fn(&str, &[Element], &[Element]) {
    move |what: &str, got: &[Element], want: &[Element]| {
        for (i, (g, w)) in got.iter().zip(want).enumerate() {
            let (g, w) = (g.value, w.value);
            let scale = g.abs().max(w.abs()).max(floor);
            let err = (g - w).abs() / (scale * f64::from(f32::EPSILON));
            assert!(
                err <= ulps,
                "{what}: element {i} is {g}, JAX's is {w} ({err:.1} ULP)"
            );
        }
    }
}

#[test]
fn keys_splits_and_folds_are_jaxs() {
    for case in cases("key") {
        eager_and_jit(case, |k| k.data().clone(), exact);
    }
    for case in cases("split") {
        let num = case["num"].as_u64().unwrap() as usize;
        eager_and_jit(case, move |k| random::split(&k, num).data().clone(), exact);
    }
    for case in cases("split_shape") {
        let s = shape(&case["shape"]);
        eager_and_jit(case, move |k| k.split_shape(&s).data().clone(), exact);
    }
    for case in cases("fold_in") {
        let d = case["data"].as_u64().unwrap();
        eager_and_jit(
            case,
            move |k| random::fold_in(&k, d as f64).data().clone(),
            exact,
        );
    }
}

#[test]
fn bits_and_uniforms_are_jaxs_bit_for_bit() {
    for case in cases("bits") {
        let s = shape(&case["shape"]);
        eager_and_jit(case, move |k| random::bits(&k, s.clone()), exact);
    }
    for case in cases("uniform") {
        let s = shape(&case["shape"]);
        let d = dtype(case["dtype"].as_str().unwrap());
        let (lo, hi) = (
            case["minval"].as_f64().unwrap(),
            case["maxval"].as_f64().unwrap(),
        );
        eager_and_jit(
            case,
            move |k| random::uniform_in(&k, s.clone(), d, lo, hi),
            exact,
        );
    }
    for case in cases("bernoulli") {
        let s = shape(&case["shape"]);
        let p = case["p"].as_f64().unwrap();
        eager_and_jit(case, move |k| random::bernoulli(&k, p, s.clone()), exact);
    }
    for case in cases("randint") {
        let s = shape(&case["shape"]);
        let d = dtype(case["dtype"].as_str().unwrap());
        let (lo, hi) = (
            case["minval"].as_i64().unwrap(),
            case["maxval"].as_i64().unwrap(),
        );
        eager_and_jit(
            case,
            move |k| random::randint(&k, s.clone(), lo, hi, d),
            exact,
        );
    }
}

#[test]
fn normals_and_gumbels_match_jax_within_a_few_ulp() {
    // erf_inv is Giles' polynomial as XLA evaluates it, but log1p (inside it) and log may
    // round differently in the last place; the ULP bound covers the propagated difference.
    for case in cases("normal") {
        let s = shape(&case["shape"]);
        eager_and_jit(
            case,
            move |k| random::normal(&k, s.clone(), DType::F32),
            within_ulps(8.0, f64::from(f32::MIN_POSITIVE)),
        );
    }
    for case in cases("truncated_normal") {
        let s = shape(&case["shape"]);
        let (lo, hi) = (
            case["lower"].as_f64().unwrap(),
            case["upper"].as_f64().unwrap(),
        );
        eager_and_jit(
            case,
            move |k| random::truncated_normal(&k, lo, hi, s.clone(), DType::F32),
            // The uniform's bounds are erf's of the truncation points, whose last bits differ
            // from XLA's erf: absolute errors of the order of the unit draw's rounding.
            within_ulps(4.0, 1.0),
        );
    }
    for case in cases("gumbel") {
        let s = shape(&case["shape"]);
        eager_and_jit(
            case,
            move |k| random::gumbel(&k, s.clone(), DType::F32),
            // The outer log of a value near 1 turns the inner one's last-place differences
            // into absolute errors.
            within_ulps(4.0, 1.0),
        );
    }
    for case in cases("categorical") {
        let logits = &case["logits"];
        let l = Tensor::from_vec(
            shape(&logits["shape"]),
            numbers(&logits["data"]).iter().map(|&x| x as f32).collect(),
        );
        let s = shape(&case["shape"]);
        eager_and_jit(
            case,
            move |k| random::categorical(&k, &l, -1, Some(&s)),
            exact,
        );
    }
}

#[test]
fn vmap_over_split_keys_draws_what_each_key_draws() {
    let keys = random::split(&random::key(21), 4);
    let batched = vmap(|k: Key| random::uniform(&k, [3], DType::F32))(keys.clone())
        .to_array()
        .unwrap()
        .to_f64_vec();
    let one_by_one: Vec<f64> = keys
        .unstack()
        .iter()
        .flat_map(|k| {
            random::uniform(k, [3], DType::F32)
                .to_array()
                .unwrap()
                .to_f64_vec()
        })
        .collect();
    let bits = |v: &[f64]| v.iter().map(|x| (*x as f32).to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&batched), bits(&one_by_one), "vmap(uniform)");
}

/// The Kolmogorov-Smirnov statistic of `samples` against the CDF `cdf`.
fn ks_statistic(mut samples: Vec<f64>, cdf: impl Fn(f64) -> f64) -> f64 {
    samples.sort_by(f64::total_cmp);
    let n = samples.len() as f64;
    samples
        .iter()
        .enumerate()
        .map(|(i, &x)| {
            let c = cdf(x);
            (c - i as f64 / n).abs().max((c - (i + 1) as f64 / n).abs())
        })
        .fold(0.0, f64::max)
}

fn standard_normal_cdf(x: f64) -> f64 {
    // Φ from the crate's own erf would be circular.
    0.5 * (1.0 + erf_series(x / std::f64::consts::SQRT_2))
}

/// erf by its Taylor series (in f64 it loses at most 6 of 16 digits to cancellation below
/// 4), and ±1 beyond, where erfc is below 2e-8.
fn erf_series(x: f64) -> f64 {
    if x.abs() < 4.0 {
        let mut term = x;
        let mut sum = x;
        for n in 1..120 {
            term *= -x * x / n as f64;
            sum += term / (2 * n + 1) as f64;
        }
        sum * 2.0 / std::f64::consts::PI.sqrt()
    } else {
        x.signum()
    }
}

#[test]
fn distributions_have_the_right_moments_and_shapes() {
    let n = 100_000;
    let key = random::key(1234);
    let sample = |t: Tensor| t.to_array().unwrap().to_f64_vec();
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let var = |v: &[f64]| {
        let m = mean(v);
        v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / v.len() as f64
    };
    // Standard errors at n = 1e5 are about 3e-3; the bounds are 4 of them.
    let u = sample(
        jit(|k: Key| random::uniform(&k, [n], DType::F32))
            .call(key.clone())
            .unwrap(),
    );
    assert!(u.iter().all(|&x| (0.0..1.0).contains(&x)));
    assert!((mean(&u) - 0.5).abs() < 4e-3 && (var(&u) - 1.0 / 12.0).abs() < 4e-3);
    let ks = ks_statistic(u, |x| x.clamp(0.0, 1.0));
    assert!(ks < 1.63 / (n as f64).sqrt(), "uniform KS statistic {ks}");

    let z = sample(
        jit(|k: Key| random::normal(&k, [n], DType::F32))
            .call(key.clone())
            .unwrap(),
    );
    assert!(mean(&z).abs() < 1.2e-2 && (var(&z) - 1.0).abs() < 1.5e-2);
    let ks = ks_statistic(z, standard_normal_cdf);
    assert!(ks < 1.63 / (n as f64).sqrt(), "normal KS statistic {ks}");

    let t = sample(random::truncated_normal(&key, -1.0, 1.0, [n], DType::F32));
    assert!(t.iter().all(|&x| x > -1.0 && x < 1.0));
    // The variance of N(0, 1) truncated to [-1, 1]: 1 - 2φ(1)/(2Φ(1) - 1).
    let phi1 = (-0.5f64).exp() / (2.0 * std::f64::consts::PI).sqrt();
    let want = 1.0 - 2.0 * phi1 / (2.0 * standard_normal_cdf(1.0) - 1.0);
    assert!(
        (var(&t) - want).abs() < 4e-3,
        "truncated variance {} vs {want}",
        var(&t)
    );

    let b = sample(random::bernoulli(&key, 0.25, [n]));
    assert!((mean(&b) - 0.25).abs() < 6e-3);

    let g = sample(random::gumbel(&key, [n], DType::F32));
    let euler_gamma = 0.577_215_664_901_532_9;
    assert!((mean(&g) - euler_gamma).abs() < 1.5e-2);

    let r = sample(random::randint(&key, [n], -3, 7, DType::I32));
    assert!(r.iter().all(|&x| (-3.0..7.0).contains(&x)));
    for v in -3..7 {
        let freq = r.iter().filter(|&&x| x == f64::from(v)).count() as f64 / n as f64;
        assert!(
            (freq - 0.1).abs() < 4e-3,
            "randint frequency of {v}: {freq}"
        );
    }

    let logits = Tensor::from_vec([3], vec![0.2f32.ln(), 0.3f32.ln(), 0.5f32.ln()]);
    let c = sample(random::categorical(&key, &logits, 0, Some(&[n])));
    for (class, p) in [0.2, 0.3, 0.5].iter().enumerate() {
        let freq = c.iter().filter(|&&x| x == class as f64).count() as f64 / n as f64;
        assert!(
            (freq - p).abs() < 6e-3,
            "categorical frequency of {class}: {freq}"
        );
    }
}

#[test]
fn keys_are_values_and_draws_are_reproducible() {
    let key = random::key(5);
    let (a, b) = random::split2(&key);
    let draw = |k: &Key| random::bits(k, [8]).to_vec::<u32>().unwrap();
    assert_eq!(draw(&a), draw(&a), "the same key draws the same bits");
    assert_ne!(draw(&a), draw(&b), "split keys draw different bits");
    assert_eq!(draw(&key), draw(&random::key(5)));
    // Zero-size draws work and have the asked-for shape.
    let empty = random::uniform(&key, [0, 3], DType::F32)
        .to_array()
        .unwrap();
    assert_eq!(empty.dims(), &[0, 3]);
}

#[test]
fn bad_requests_are_errors_naming_the_problem() {
    let key = random::key(0);
    let err = |t: Tensor| t.to_array().unwrap_err().to_string();
    let keys = random::split(&key, 3);
    let e = err(random::uniform(&keys, [2], DType::F32));
    assert!(
        e.contains("key array of shape [3]") && e.contains("vmap"),
        "{e}"
    );
    assert!(
        e.contains("random.rs"),
        "the error names the caller's line: {e}"
    );
    let e = err(random::uniform(&key, [2], DType::I32));
    assert!(e.contains("must be a float"), "{e}");
    let e = err(random::randint(&key, [2], 0, 5, DType::F32));
    assert!(e.contains("randint") && e.contains("f32"), "{e}");
    let e = err(Key::from_data(Tensor::from_vec([3], vec![1i32, 2, 3]))
        .data()
        .clone());
    assert!(e.contains("u32[..., 2]"), "{e}");
    let e = err(random::fold_in(&key, Tensor::from_vec([2], vec![1i32, 2]))
        .data()
        .clone());
    assert!(e.contains("integer scalar"), "{e}");
    let e = err(random::categorical(
        &key,
        &Tensor::zeros(DType::F32, [2, 3]),
        2,
        None,
    ));
    assert!(e.contains("axis 2 is out of range"), "{e}");
    let e = err(keys.get(3).data().clone());
    assert!(e.contains("out of range"), "{e}");
}

#[test]
fn permutations_and_shuffles_are_jaxs() {
    for case in cases("permutation") {
        let n = case["n"].as_u64().unwrap() as usize;
        eager_and_jit(case, move |k| random::permutation(&k, n), exact);
    }
    let grid = |case: &Value| {
        let x = &case["x"];
        Tensor::from_vec(
            shape(&x["shape"]),
            numbers(&x["data"])
                .into_iter()
                .map(|v| v as f32)
                .collect::<Vec<_>>(),
        )
    };
    for case in cases("permutation_of") {
        let (x, axis) = (grid(case), case["axis"].as_i64().unwrap());
        eager_and_jit(case, move |k| random::permutation_of(&k, &x, axis), exact);
    }
    for case in cases("shuffle") {
        let (x, axis) = (grid(case), case["axis"].as_i64().unwrap());
        eager_and_jit(case, move |k| random::shuffle(&k, &x, axis), exact);
    }
    let e = random::shuffle(&random::key(0), &Tensor::zeros(DType::F32, [3]), 1)
        .to_array()
        .unwrap_err()
        .to_string();
    assert!(e.contains("axis 1 is out of range"), "{e}");
}

#[test]
fn a_compiled_draw_is_one_kernel_over_its_elements() {
    let f = jit(|k: Key| random::uniform(&k, [4096], DType::F32)).no_persistent_cache();
    let lowered = f.lower(&random::key(0)).unwrap();
    let fused = lowered.fused().unwrap();
    // The key's words sliced on the host, the key schedule as one scalar kernel, then the
    // counters (a fused iota), the hash and the float bits in a single kernel.
    let mut section = "";
    let mut kernels = 0;
    for line in fused.lines() {
        if line.contains("// ") {
            section = line;
            kernels += usize::from(line.contains("// kernel"));
        } else if line.contains("iota") {
            assert!(
                section.contains("kernel"),
                "an iota left to the host:\n{fused}"
            );
        }
    }
    assert_eq!(kernels, 2, "{fused}");
}

/// The traced draws, compiled for the GPU and run on the PTX emulator (every step a kernel
/// or the key's slicing), give JAX's bits and uniforms.
#[test]
fn draws_on_the_emulated_gpu_are_jaxs() {
    use ferrax::compiler::backend::gpu::{GpuOptions, GpuProgram};
    use ferrax_ptx_emu::Emulator;
    let run = |case: &Value, f: &dyn Fn(Key) -> Tensor| {
        let key = random::key(seed(case));
        let func = ferrax::trace(f, &key).unwrap();
        let exe = GpuProgram::compile(&func, &Emulator::default(), GpuOptions::HIGHEST).unwrap();
        let data = key.data().to_array().unwrap();
        let got = exe.run(&[data]).unwrap().remove(0);
        let what = format!("{} seed {} (emulated GPU)", case["name"], case["seed"]);
        exact(&what, &elements(&got), &reference_elements(&case["value"]));
    };
    for case in cases("bits") {
        let s = shape(&case["shape"]);
        run(case, &|k| random::bits(&k, s.clone()));
    }
    for case in cases("uniform") {
        let d = dtype(case["dtype"].as_str().unwrap());
        if d == DType::F32 {
            let s = shape(&case["shape"]);
            let (lo, hi) = (
                case["minval"].as_f64().unwrap(),
                case["maxval"].as_f64().unwrap(),
            );
            run(case, &|k| random::uniform_in(&k, s.clone(), d, lo, hi));
        }
    }
}

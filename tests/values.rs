//! Composite programs run through `jit` (the reference interpreter) and compared with plain
//! f64 loops written independently here. Tolerances: f32 results of a few roundings each, so
//! 1e-6 relative (a handful of f32 ULPs) is tight but safe.
#![allow(clippy::unwrap_used)]

mod common;

use ferrax::{jit, nn, DType, Tensor};

/// Deterministic values in [-2, 2).
fn data(n: usize, seed: u32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(2654435761).wrapping_add(12345);
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            (s >> 8) as f32 / (1u32 << 24) as f32 * 4.0 - 2.0
        })
        .collect()
}

fn assert_close(got: &[f32], want: &[f64], rel: f64) {
    assert_eq!(got.len(), want.len());
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let err = (g as f64 - w).abs();
        assert!(
            err <= rel * w.abs().max(1e-3),
            "element {i}: got {g}, want {w} (error {err:e})"
        );
    }
}

fn softmax_rows(x: &[f32], cols: usize) -> Vec<f64> {
    x.chunks(cols)
        .flat_map(|row| {
            let m = row.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64));
            let e: Vec<f64> = row.iter().map(|&v| (v as f64 - m).exp()).collect();
            let s: f64 = e.iter().sum();
            e.into_iter().map(move |v| v / s)
        })
        .collect()
}

#[test]
fn softmax_matches_f64_reference() {
    let x = data(6 * 7, 1);
    let out = jit(|x: Tensor| nn::softmax(&x, -1))
        .call(Tensor::from_vec([6, 7], x.clone()))
        .unwrap();
    assert_close(&out.to_vec::<f32>().unwrap(), &softmax_rows(&x, 7), 1e-6);
}

#[test]
fn log_softmax_and_logsumexp_match() {
    let x = data(3 * 5, 2);
    let f = jit(|x: Tensor| (nn::log_softmax(&x, 1), nn::logsumexp(&x, 1)));
    let (ls, lse) = f.call(Tensor::from_vec([3, 5], x.clone())).unwrap();
    let sm = softmax_rows(&x, 5);
    let want_ls: Vec<f64> = sm.iter().map(|p| p.ln()).collect();
    let want_lse: Vec<f64> = x
        .chunks(5)
        .map(|r| r.iter().map(|&v| (v as f64).exp()).sum::<f64>().ln())
        .collect();
    assert_close(&ls.to_vec::<f32>().unwrap(), &want_ls, 1e-6);
    assert_close(&lse.to_vec::<f32>().unwrap(), &want_lse, 1e-6);
}

/// A row of `-inf` (fully masked) has `logsumexp` `-inf` and a row holding `+inf` has `+inf`,
/// as in `jax.nn.logsumexp` (the infinite maximum is taken as 0); the gradient of the finite
/// row is its softmax, and the infinite rows' are NaN where JAX 0.10.2's are (`0 / 0` and
/// `inf / inf` in the backward pass).
#[test]
fn logsumexp_of_infinite_rows() {
    let inf = f32::INFINITY;
    let x = Tensor::from_vec(
        [3, 3],
        vec![-inf, -inf, -inf, 1.0, inf, 0.0, 0.5, -1.0, 2.0],
    );
    let f = jit(|x: Tensor| nn::logsumexp(&x, 1));
    let lse = f.call(x.clone()).unwrap().to_vec::<f32>().unwrap();
    assert_eq!(lse[..2], [-inf, inf]);
    let want = [0.5f64, -1.0, 2.0]
        .iter()
        .map(|v| v.exp())
        .sum::<f64>()
        .ln();
    assert!((f64::from(lse[2]) - want).abs() < 1e-6, "{lse:?}");
    let g = jit(ferrax::grad(|x: Tensor| {
        nn::logsumexp(&x, 1).slice(&[2], &[3]).sum(..)
    }))
    .call(x)
    .unwrap()
    .to_vec::<f32>()
    .unwrap();
    let softmax = softmax_rows(&[0.5, -1.0, 2.0], 3);
    let nan_where: Vec<bool> = g[..6].iter().map(|v| v.is_nan()).collect();
    assert_eq!(nan_where, [true, true, true, false, true, false], "{g:?}");
    assert_eq!((g[3], g[5]), (0.0, 0.0));
    assert_close(&g[6..], &softmax, 1e-6);
}

#[test]
fn layernorm_matches_f64_reference() {
    let (rows, cols) = (5, 8);
    let (x, g, b) = (data(rows * cols, 3), data(cols, 4), data(cols, 5));
    let f = jit(|(x, g, b): (Tensor, Tensor, Tensor)| common::layernorm(&x, &g, &b));
    let out = f
        .call((
            Tensor::from_vec([rows, cols], x.clone()),
            Tensor::from_vec([cols], g.clone()),
            Tensor::from_vec([cols], b.clone()),
        ))
        .unwrap();
    let want: Vec<f64> = x
        .chunks(cols)
        .flat_map(|row| {
            let mean = row.iter().map(|&v| v as f64).sum::<f64>() / cols as f64;
            let var = row.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / cols as f64;
            let inv = 1.0 / (var + 1e-5).sqrt();
            row.iter()
                .enumerate()
                .map(|(j, &v)| (v as f64 - mean) * inv * g[j] as f64 + b[j] as f64)
                .collect::<Vec<_>>()
        })
        .collect();
    assert_close(&out.to_vec::<f32>().unwrap(), &want, 1e-5);
}

fn matmul(a: &[f64], b: &[f64], m: usize, k: usize, n: usize) -> Vec<f64> {
    let mut c = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            c[i * n + j] = (0..k).map(|p| a[i * k + p] * b[p * n + j]).sum();
        }
    }
    c
}

#[test]
fn mlp_loss_matches_f64_reference() {
    let sizes = [4, 8, 8, 3];
    let batch = 6;
    let widen = |v: &[f32]| v.iter().map(|&x| x as f64).collect::<Vec<f64>>();
    let weights: Vec<(Vec<f32>, Vec<f32>)> = sizes
        .windows(2)
        .enumerate()
        .map(|(i, w)| (data(w[0] * w[1], 10 + i as u32), data(w[1], 20 + i as u32)))
        .collect();
    let x = data(batch * sizes[0], 30);
    let y: Vec<f32> = (0..batch * 3)
        .map(|i| if i % 3 == (i / 3) % 3 { 1.0 } else { 0.0 })
        .collect();

    let params = common::Mlp {
        layers: sizes
            .windows(2)
            .zip(&weights)
            .map(|(s, (w, b))| common::Layer {
                w: Tensor::from_vec([s[0], s[1]], w.clone()),
                b: Tensor::from_vec([s[1]], b.clone()),
            })
            .collect(),
    };
    let f = jit(|(p, x, y): (common::Mlp, Tensor, Tensor)| common::mlp_loss(&p, &x, &y));
    let loss = f
        .call((
            params,
            Tensor::from_vec([batch, 4], x.clone()),
            Tensor::from_vec([batch, 3], y.clone()),
        ))
        .unwrap();

    let mut h = widen(&x);
    for (l, (w, b)) in weights.iter().enumerate() {
        let (k, n) = (sizes[l], sizes[l + 1]);
        h = matmul(&h, &widen(w), batch, k, n);
        for (i, v) in h.iter_mut().enumerate() {
            *v += b[i % n] as f64;
            if l + 1 < weights.len() {
                *v = v.max(0.0);
            }
        }
    }
    let mut total = 0.0;
    for (row, labels) in h.chunks(3).zip(y.chunks(3)) {
        let m = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let lse = row.iter().map(|v| (v - m).exp()).sum::<f64>().ln() + m;
        total -= row
            .iter()
            .zip(labels)
            .map(|(v, &t)| (v - lse) * t as f64)
            .sum::<f64>();
    }
    assert_close(
        &loss.to_vec::<f32>().unwrap(),
        &[total / batch as f64],
        1e-5,
    );
}

#[test]
fn attention_matches_f64_reference() {
    let (b, s, d) = (2, 3, 4);
    let x = data(b * s * d, 40);
    let ws: Vec<Vec<f32>> = (0..3).map(|i| data(d * d, 41 + i)).collect();
    let f = jit(|(x, q, k, v): (Tensor, Tensor, Tensor, Tensor)| common::attention(&x, &q, &k, &v));
    let w = |i: usize| Tensor::from_vec([d, d], ws[i].clone());
    let out = f
        .call((Tensor::from_vec([b, s, d], x.clone()), w(0), w(1), w(2)))
        .unwrap();
    let mut want = Vec::new();
    let wide: Vec<Vec<f64>> = ws
        .iter()
        .map(|w| w.iter().map(|&v| v as f64).collect())
        .collect();
    for xb in x.chunks(s * d) {
        let xb: Vec<f64> = xb.iter().map(|&v| v as f64).collect();
        let (q, k, v) = (
            matmul(&xb, &wide[0], s, d, d),
            matmul(&xb, &wide[1], s, d, d),
            matmul(&xb, &wide[2], s, d, d),
        );
        for i in 0..s {
            let scores: Vec<f64> = (0..s)
                .map(|j| {
                    (0..d).map(|c| q[i * d + c] * k[j * d + c]).sum::<f64>() / (d as f64).sqrt()
                })
                .collect();
            let m = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let e: Vec<f64> = scores.iter().map(|v| (v - m).exp()).collect();
            let z: f64 = e.iter().sum();
            for c in 0..d {
                want.push((0..s).map(|j| e[j] / z * v[j * d + c]).sum::<f64>() + xb[i * d + c]);
            }
        }
    }
    assert_close(&out.to_vec::<f32>().unwrap(), &want, 1e-5);
}

#[test]
fn eager_and_jit_agree_on_the_movement_corpus_program() {
    let x = Tensor::from_vec([2, 3, 4], data(24, 50));
    let f = |x: Tensor| {
        let y = x.transpose([1, 0, 2]).reshape([3, -1]);
        (
            y.slice_strided(&[0, 1], &[3, 8], &[2, 3])
                .pad(&[(1, -1, 0), (0, 2, 1)], 0.5),
            x.t(),
        )
    };
    let (ja, jb) = jit(f).call(x.clone()).unwrap();
    let (ea, eb) = f(x);
    assert_eq!(ja.to_vec::<f32>().unwrap(), ea.to_vec::<f32>().unwrap());
    assert_eq!(jb.to_vec::<f32>().unwrap(), eb.to_vec::<f32>().unwrap());
    assert_eq!(ja.shape(), &[2, 7]);
}

/// `is_nan`, `is_finite` and `is_inf` as `jnp.isnan`, `isfinite` and `isinf`, for floats of
/// every width and for integers (never NaN or infinite).
#[test]
fn float_classes() {
    let v = [
        0.0,
        -0.0,
        1.5,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        f64::MAX,
    ];
    for dtype in [DType::F32, DType::F64, DType::F16, DType::BF16] {
        let x = Tensor::from_vec([7], v.to_vec()).astype(dtype);
        let nan: Vec<bool> = v.iter().map(|a| a.is_nan()).collect();
        let inf: Vec<bool> = v.iter().map(|a| a.is_infinite()).collect();
        // f64::MAX overflows to infinity in the narrower types.
        let big = dtype == DType::F64;
        let mut finite: Vec<bool> = v.iter().map(|a| a.is_finite()).collect();
        let mut inf = inf;
        finite[6] = big;
        inf[6] = !big;
        assert_eq!(x.is_nan().to_vec::<bool>().unwrap(), nan, "{dtype}");
        assert_eq!(x.is_finite().to_vec::<bool>().unwrap(), finite, "{dtype}");
        assert_eq!(x.is_inf().to_vec::<bool>().unwrap(), inf, "{dtype}");
        let compiled = jit(|x: Tensor| x.is_finite()).call(x.clone()).unwrap();
        assert_eq!(compiled.to_vec::<bool>().unwrap(), finite, "{dtype} jit");
    }
    let ints = Tensor::from_vec([2], vec![i32::MIN, 7]);
    assert_eq!(ints.is_nan().to_vec::<bool>().unwrap(), vec![false, false]);
    assert_eq!(ints.is_finite().to_vec::<bool>().unwrap(), vec![true, true]);
    assert_eq!(ints.is_inf().to_vec::<bool>().unwrap(), vec![false, false]);
}

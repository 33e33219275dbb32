//! The IR test corpus: programs traced from representative user functions. Snapshot, round
//! trip and interpreter tests all run over it.
#![allow(dead_code)]

pub mod callbacks;
pub mod fusion;
pub mod numbers;
pub mod rng;

use ferrax::ir::{Elements, TensorType};
use ferrax::{grad, lax, nn, trace, Array, DType, Func, Tensor, Tree};

#[derive(Tree, Clone)]
pub struct Layer {
    pub w: Tensor,
    pub b: Tensor,
}

#[derive(Tree, Clone)]
pub struct Mlp {
    pub layers: Vec<Layer>,
}

pub fn spec(shape: &[usize]) -> Tensor {
    Tensor::spec(DType::F32, shape.to_vec())
}

pub fn mlp_params(sizes: &[usize]) -> Mlp {
    Mlp {
        layers: sizes
            .windows(2)
            .map(|w| Layer {
                w: spec(&[w[0], w[1]]),
                b: spec(&[w[1]]),
            })
            .collect(),
    }
}

pub fn mlp_forward(p: &Mlp, x: &Tensor) -> Tensor {
    let mut h = x.clone();
    for (i, layer) in p.layers.iter().enumerate() {
        h = h.matmul(&layer.w) + &layer.b;
        if i + 1 < p.layers.len() {
            h = nn::relu(&h);
        }
    }
    h
}

/// Mean softmax cross-entropy against one-hot labels.
pub fn mlp_loss(p: &Mlp, x: &Tensor, y: &Tensor) -> Tensor {
    let logp = nn::log_softmax(&mlp_forward(p, x), -1);
    -(logp * y).sum(-1).mean(..)
}

pub fn layernorm(x: &Tensor, g: &Tensor, b: &Tensor) -> Tensor {
    let mean = x.mean_keepdims(-1);
    let centered = x - &mean;
    let var = centered.square().mean_keepdims(-1);
    centered * (var + 1e-5).rsqrt() * g + b
}

/// One single-head self-attention block with a residual connection.
pub fn attention(x: &Tensor, wq: &Tensor, wk: &Tensor, wv: &Tensor) -> Tensor {
    let (q, k, v) = (x.matmul(wq), x.matmul(wk), x.matmul(wv));
    let d = q.shape()[q.ndim() - 1] as f64;
    let scores = q.matmul(&k.transpose([0, 2, 1])) / d.sqrt();
    nn::softmax(&scores, -1).matmul(&v) + x
}

fn t<I: Tree, O: Tree>(f: impl FnOnce(I) -> O, inputs: I) -> Func {
    trace(f, &inputs).expect("corpus programs trace")
}

/// Every corpus program, by name.
pub fn corpus() -> Vec<(&'static str, Func)> {
    let s = spec;
    vec![
        (
            "mlp_forward",
            t(
                |(p, x): (Mlp, Tensor)| mlp_forward(&p, &x),
                (mlp_params(&[4, 8, 8, 3]), s(&[2, 4])),
            ),
        ),
        (
            "mlp_loss",
            t(
                |(p, x, y): (Mlp, Tensor, Tensor)| mlp_loss(&p, &x, &y),
                (mlp_params(&[4, 8, 8, 3]), s(&[2, 4]), s(&[2, 3])),
            ),
        ),
        ("softmax", t(|x: Tensor| nn::softmax(&x, -1), s(&[2, 5]))),
        (
            "log_softmax",
            t(|x: Tensor| nn::log_softmax(&x, 0), s(&[3, 4])),
        ),
        (
            "logsumexp",
            t(|x: Tensor| nn::logsumexp(&x, [1, 2]), s(&[2, 3, 4])),
        ),
        (
            "layernorm",
            t(
                |(x, g, b): (Tensor, Tensor, Tensor)| layernorm(&x, &g, &b),
                (s(&[4, 6]), s(&[6]), s(&[6])),
            ),
        ),
        (
            "attention",
            t(
                |(x, q, k, v): (Tensor, Tensor, Tensor, Tensor)| attention(&x, &q, &k, &v),
                (s(&[2, 5, 4]), s(&[4, 4]), s(&[4, 4]), s(&[4, 4])),
            ),
        ),
        (
            // Every attention part: the causal output and its gradient (the log-sum-exps and
            // the three cotangents), over fewer keys than queries, and a plain one.
            "dot_product_attention",
            t(
                |(q, k, v): (Tensor, Tensor, Tensor)| {
                    let loss = |(q, k, v): (Tensor, Tensor, Tensor)| {
                        ferrax::nn::dot_product_attention(&q, &k, &v, None, true)
                            .square()
                            .sum(..)
                    };
                    let (l, (dq, dk, dv)) =
                        ferrax::value_and_grad(loss)((q.clone(), k.clone(), v.clone()));
                    let plain = ferrax::nn::dot_product_attention(&q, &k, &v, Some(0.5), false);
                    (l, dq, dk, dv, plain)
                },
                (s(&[2, 5, 2, 4]), s(&[2, 3, 2, 4]), s(&[2, 3, 2, 4])),
            ),
        ),
        (
            "broadcast_scalars",
            t(|x: Tensor| (2.0 * &x + 1.0) / (&x - 0.5), s(&[3, 2])),
        ),
        (
            "broadcast_row_col",
            t(
                |(r, c): (Tensor, Tensor)| &r * &c + r.sum(..),
                (s(&[1, 4]), s(&[3, 1])),
            ),
        ),
        (
            "broadcast_rank_expand",
            t(
                |(a, b): (Tensor, Tensor)| &a + &b,
                (s(&[2, 1, 3]), s(&[4, 1])),
            ),
        ),
        (
            "unary_chain",
            t(
                |x: Tensor| {
                    let pos = x.abs() + 1.0;
                    let parts = [
                        -&x,
                        x.sign(),
                        x.floor(),
                        x.ceil(),
                        x.round(),
                        x.round_even(),
                        x.exp(),
                        x.expm1(),
                        pos.log(),
                        pos.log1p(),
                        pos.sqrt(),
                        pos.rsqrt(),
                        x.tanh(),
                        x.sigmoid(),
                        x.sin(),
                        x.cos(),
                    ];
                    Tensor::concatenate(&parts, 0)
                },
                s(&[3]),
            ),
        ),
        (
            "elementary_functions",
            t(
                |x: Tensor| {
                    // Inside (-0.9, 0.9) for asin, acos and atanh; above 1 for acosh.
                    let inside = x.tanh() * 0.9;
                    let above = x.abs() + 1.5;
                    let parts = [
                        x.tan(),
                        inside.asin(),
                        inside.acos(),
                        x.atan(),
                        x.sinh(),
                        x.cosh(),
                        x.asinh(),
                        above.acosh(),
                        inside.atanh(),
                        x.cbrt(),
                    ];
                    Tensor::concatenate(&parts, 0)
                },
                s(&[3]),
            ),
        ),
        (
            "special_functions",
            t(
                |x: Tensor| {
                    // erf, erfc and erf_inv are the IR's ops for f64 (the composites below).
                    let wide = x.astype(DType::F64);
                    let inside = wide.tanh() * 0.9;
                    let parts = [
                        x.lgamma(),
                        x.digamma(),
                        x.bessel_i0e(),
                        x.bessel_i1e(),
                        ferrax::lax::erf(&wide).astype(DType::F32),
                        ferrax::lax::erfc(&wide).astype(DType::F32),
                        ferrax::lax::erf_inv(&inside).astype(DType::F32),
                    ];
                    Tensor::concatenate(&parts, 0)
                },
                s(&[3]),
            ),
        ),
        (
            "complex_numbers",
            t(
                |(a, b): (Tensor, Tensor)| {
                    let z = a.complex(&b);
                    let w = (&z * &z.conj()).exp() + z.sqrt();
                    let parts = [w.real(), w.imag(), z.abs()];
                    Tensor::concatenate(&parts, 0)
                },
                (s(&[3]), s(&[3])),
            ),
        ),
        (
            "fourier_transforms",
            t(
                |x: Tensor| {
                    use ferrax::ir::FftKind;
                    let spectrum = x.fft(FftKind::Rfft, &[4]);
                    let there = spectrum.fft(FftKind::Fft, &[3]);
                    let back = there.fft(FftKind::Ifft, &[3]);
                    back.fft(FftKind::Irfft, &[4]) + there.real().sum([1]).reshape([2, 1])
                },
                s(&[2, 4]),
            ),
        ),
        (
            "linear_algebra",
            t(
                |(a, b): (Tensor, Tensor)| {
                    use ferrax::ir::TriangularSolve;
                    let diagonal = Tensor::iota(DType::I32, [3, 3], 0)
                        .equal(Tensor::iota(DType::I32, [3, 3], 1))
                        .select(4.0, 0.0);
                    let a = &a + &diagonal;
                    let left = TriangularSolve {
                        left_side: true,
                        lower: true,
                        ..TriangularSolve::default()
                    };
                    let right = TriangularSolve {
                        transpose_a: true,
                        unit_diagonal: true,
                        ..TriangularSolve::default()
                    };
                    let x = a.triangular_solve(&b, left);
                    let l = a.matmul(&a.t()).cholesky();
                    l.triangular_solve(&a.triangular_solve(&x.t(), right).t(), left)
                },
                (s(&[3, 3]), s(&[3, 2])),
            ),
        ),
        (
            "binary_ops",
            t(
                |(a, b): (Tensor, Tensor)| {
                    let parts = [
                        &a + &b,
                        &a - &b,
                        &a * &b,
                        &a / &b,
                        &a % &b,
                        a.abs().pow(&b),
                        a.maximum(&b),
                        a.minimum(&b),
                        a.atan2(&b),
                    ];
                    Tensor::concatenate(&parts, 1)
                },
                (s(&[2, 2]), s(&[2, 2])),
            ),
        ),
        (
            "compare_select_clamp",
            t(
                |(a, b): (Tensor, Tensor)| {
                    let m = a
                        .greater(&b)
                        .logical_and(a.less_equal(2.0))
                        .logical_or(a.equal(&b));
                    let n = a
                        .not_equal(0.0)
                        .logical_xor(b.greater_equal(&a))
                        .logical_not();
                    let c = b.less(1.0);
                    m.select(&a, &b) + n.select(&a, 0.0) + c.select(1.0, &b) + a.clip(-1.0, 1.0)
                },
                (s(&[4]), s(&[4])),
            ),
        ),
        (
            "convert_dtypes",
            t(
                |x: Tensor| {
                    let h = x.astype(DType::F16);
                    let bf = x.astype(DType::BF16).astype(DType::F64);
                    let i = x.astype(DType::I32) * 3;
                    let u = x.astype(DType::U8).astype(DType::I64);
                    let flag = x.greater(0.0).astype(DType::F32);
                    (h, bf, i, u, flag)
                },
                s(&[5]),
            ),
        ),
        (
            "integer_logic",
            t(
                |(a, b): (Tensor, Tensor)| {
                    let bits = a
                        .logical_and(&b)
                        .logical_or(a.logical_xor(&b))
                        .logical_not();
                    (
                        bits,
                        (&a / &b) % 3,
                        a.prod(..),
                        b.max(0),
                        Tensor::arange(DType::I32, 4),
                    )
                },
                (Tensor::spec(DType::I32, [4]), Tensor::spec(DType::I32, [4])),
            ),
        ),
        (
            "reductions",
            t(
                |x: Tensor| {
                    (
                        x.sum([0, 2]),
                        x.max(-1),
                        x.min(1),
                        x.prod(..),
                        x.mean_keepdims(1),
                    )
                },
                s(&[2, 3, 4]),
            ),
        ),
        (
            "movement",
            t(
                |x: Tensor| {
                    let y = x.transpose([1, 0, 2]).reshape([3, -1]);
                    let sl = y.slice_strided(&[0, 1], &[3, 8], &[2, 3]);
                    let pd = sl.pad(&[(1, -1, 0), (0, 2, 1)], 0.5);
                    let bc = x.sum(2).expand_dims(0).broadcast_to([2, 2, 3]).squeeze(..);
                    let it = Tensor::iota(DType::F32, [2, 2, 3], 1);
                    (pd, Tensor::concatenate(&[&bc, &it], 2), x.t())
                },
                s(&[2, 3, 4]),
            ),
        ),
        (
            "reverse",
            t(
                |x: Tensor| {
                    let y = x.flip([0, 2]) * 2.0 + x.flip([-1]);
                    (y, x.flip([1]).sum(0))
                },
                s(&[2, 3, 4]),
            ),
        ),
        (
            "batched_matmul",
            t(
                |(a, b, v): (Tensor, Tensor, Tensor)| (a.matmul(&b), a.matmul(&v), v.matmul(&b)),
                (s(&[2, 3, 4]), s(&[4, 5]), s(&[4])),
            ),
        ),
        (
            "stop_gradient_constants",
            t(
                |x: Tensor| {
                    let c = Tensor::from_vec([3], vec![1.0f32, 2.0, 3.0]);
                    (x.stop_gradient() * &c + Tensor::ones(DType::F32, [3])).sum(..)
                },
                s(&[3]),
            ),
        ),
        (
            "embedding_lookup",
            t(
                |(table, ids, pos): (Tensor, Tensor, Tensor)| nn::embedding(&table, &ids) + pos,
                (s(&[6, 4]), Tensor::spec(DType::I32, [2, 3]), s(&[3, 4])),
            ),
        ),
        (
            "scatter_combiners",
            t(
                |(x, ids, u): (Tensor, Tensor, Tensor)| {
                    let at = x.at(&ids);
                    (at.set(&u), at.add(&u), at.mul(&u), at.min(&u), at.max(&u))
                },
                (s(&[5, 2]), Tensor::spec(DType::I32, [3]), s(&[3, 2])),
            ),
        ),
        (
            "dynamic_slices",
            t(
                |(x, i, u): (Tensor, Tensor, Tensor)| {
                    let window = x.dynamic_slice(&[&i, &i], &[2, 2]);
                    x.dynamic_update_slice(&(window * &u), &[&i, &i])
                },
                (s(&[4, 3]), Tensor::spec(DType::I32, []), s(&[2, 2])),
            ),
        ),
        (
            "custom_vjp_clip",
            t(
                |x: Tensor| {
                    let clipped = ferrax::custom_vjp(
                        |x: Tensor| x.sum(..),
                        |x: Tensor| (x.sum(..), ()),
                        |(), g: Tensor| g.clip(-1.0, 1.0).broadcast_to([4]),
                    );
                    clipped(x) * 3.0
                },
                s(&[4]),
            ),
        ),
        (
            "custom_jvp_softplus",
            t(
                |x: Tensor| {
                    let softplus = ferrax::custom_jvp(
                        |x: Tensor| x.exp().log1p(),
                        |x: Tensor, t: Tensor| (x.exp().log1p(), t * x.sigmoid()),
                    );
                    softplus(x) * 2.0
                },
                s(&[4]),
            ),
        ),
        (
            // A threefry-like round on u32 words: wrapping add, a rotation as two shifts and
            // an or, xor; then JAX's uniform floats from the bits (mantissa and bit cast).
            "u32_round",
            t(
                |(x, y, k): (Tensor, Tensor, Tensor)| {
                    let a = &x + &y;
                    let b = (&y << 13i32) | y.shift_right_logical(&k);
                    let b = &b ^ &a;
                    let c = b.shift_right_arithmetic(&k).maximum(&a);
                    let f = (&c >> 9i32).logical_or(0x3f80_0000u32).bitcast(DType::F32) - 1.0;
                    (c, f)
                },
                (
                    Tensor::spec(DType::U32, [2, 8]),
                    Tensor::spec(DType::U32, [2, 8]),
                    Tensor::spec(DType::U32, [2, 8]),
                ),
            ),
        ),
        (
            // Sorting rows ascending and columns descending, and floats by integer keys
            // with many ties (the inputs' integers are 1..=4), which only a stable sort
            // orders one way.
            "sort_rows",
            t(
                |(x, k): (Tensor, Tensor)| {
                    let (_, by_keys) = ferrax::lax::sort_key_val(&k, &x, 1);
                    (x.sort(1).exp(), x.argsort_descending(0), by_keys)
                },
                (
                    Tensor::spec(DType::F32, [3, 5]),
                    Tensor::spec(DType::I32, [3, 5]),
                ),
            ),
        ),
        (
            // A cond on a predicate and a switch of three branches on an index (the inputs'
            // integers, 1..=4, clamp to the last branch above 2), closing over `y`.
            "cond_switch",
            t(
                |(p, k, x, y): (Tensor, Tensor, Tensor, Tensor)| {
                    let c = lax::cond(&p, |x: Tensor| &x * &y, |x: Tensor| x.exp(), x.clone());
                    let s = lax::switch(
                        &k,
                        [
                            &|(x, c): (Tensor, Tensor)| &x + &c,
                            &|(x, c): (Tensor, Tensor)| &x * &c,
                            &|(x, _c): (Tensor, Tensor)| x.sin(),
                        ],
                        (x, c.clone()),
                    );
                    (c, s)
                },
                (
                    Tensor::spec(DType::Bool, []),
                    Tensor::spec(DType::I32, []),
                    s(&[3]),
                    s(&[3]),
                ),
            ),
        ),
        (
            // A while loop whose trip count depends on the data, bounded at 8 so that any
            // input ends: halve `x` while its absolute sum exceeds `limit`, counting.
            "while_halving",
            t(
                |(x, limit): (Tensor, Tensor)| {
                    lax::while_loop(
                        |(x, n): (Tensor, Tensor)| x.abs().sum(..).greater(&limit) & n.less(8),
                        |(x, n): (Tensor, Tensor)| (x * 0.5, n + 1),
                        (x, Tensor::scalar(0i32)),
                    )
                },
                (s(&[3]), s(&[])),
            ),
        ),
        (
            // An RNN as a scan: the last state and every state, stacked.
            "scan_rnn",
            t(
                |(w, h, xs): (Tensor, Tensor, Tensor)| {
                    let cell = |h: Tensor, x: Tensor| {
                        let next = (w.matmul(&h) + x).tanh();
                        (next.clone(), next)
                    };
                    lax::scan(cell, h, xs)
                },
                (s(&[4, 4]), s(&[4]), s(&[5, 4])),
            ),
        ),
        (
            // Nested regions: a cond on each step's slice inside a reverse scan.
            "cond_in_scan",
            t(
                |(w, h, xs): (Tensor, Tensor, Tensor)| {
                    let step = |h: Tensor, x: Tensor| {
                        let p = x.sum(..).greater(0.0);
                        let h2 = lax::cond(
                            &p,
                            |(h, x): (Tensor, Tensor)| (&h * &w + x).tanh(),
                            |(h, x): (Tensor, Tensor)| &h * x.cos() - &w,
                            (h, x),
                        );
                        (h2.clone(), h2.sum(..))
                    };
                    let options = lax::ScanOptions {
                        reverse: true,
                        ..Default::default()
                    };
                    lax::scan_with(step, h, xs, options)
                },
                (s(&[3]), s(&[3]), s(&[6, 3])),
            ),
        ),
        (
            // A layer checkpointed under each policy.
            "remat_policies",
            t(
                |(w, x): (Tensor, Tensor)| {
                    let layer = |(w, x): (Tensor, Tensor)| x.matmul(&w).tanh();
                    let mut y = x;
                    for policy in ferrax::RematPolicy::ALL {
                        y = ferrax::remat_with(policy, layer)((w.clone(), y));
                    }
                    y
                },
                (s(&[3, 3]), s(&[2, 3])),
            ),
        ),
        (
            // The gradient of a scan whose checkpointed step stores its products.
            "remat_scan_grad",
            t(
                |(w, xs): (Tensor, Tensor)| {
                    let loss = |w: Tensor| {
                        let step = ferrax::remat_with(
                            ferrax::RematPolicy::DotsSaveable,
                            |(h, x): (Tensor, Tensor)| (h.matmul(&w) + x).tanh(),
                        );
                        let h0 = Tensor::zeros(DType::F32, [2, 3]);
                        let (h, _) = lax::scan(|h, x| (step((h, x)), ()), h0, xs.clone());
                        h.sum(..)
                    };
                    grad(loss)(w)
                },
                (s(&[3, 3]), s(&[4, 2, 3])),
            ),
        ),
    ]
}

/// Deterministic inputs for `func`: floats in [-2, 2), integers in 1..=4 (u32: whole words and
/// numbers below 40), alternating bools.
pub fn inputs(func: &Func, seed: u64) -> Vec<Array> {
    let mut s = seed.wrapping_mul(0x9E3779B97F4A7C15) | 1;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    func.params
        .iter()
        .map(|TensorType { dtype, shape }| {
            let n = shape.numel();
            let data = match dtype {
                DType::F32 => Elements::F32(
                    (0..n)
                        .map(|_| (next() >> 40) as f32 / (1u64 << 22) as f32 - 2.0)
                        .collect(),
                ),
                DType::F64 => Elements::F64(
                    (0..n)
                        .map(|_| (next() >> 11) as f64 / (1u64 << 51) as f64 - 2.0)
                        .collect(),
                ),
                DType::F16 => Elements::F16(
                    (0..n)
                        .map(|_| {
                            half::f16::from_f32((next() >> 40) as f32 / (1u64 << 22) as f32 - 2.0)
                        })
                        .collect(),
                ),
                DType::BF16 => Elements::BF16(
                    (0..n)
                        .map(|_| {
                            half::bf16::from_f32((next() >> 40) as f32 / (1u64 << 22) as f32 - 2.0)
                        })
                        .collect(),
                ),
                DType::I32 => Elements::I32((0..n).map(|_| 1 + (next() % 4) as i32).collect()),
                // Whole words, and small ones (shift amounts either side of the width).
                DType::U32 => Elements::U32(
                    (0..n)
                        .map(|i| match i % 3 {
                            0 => (next() % 40) as u32,
                            _ => (next() >> 32) as u32,
                        })
                        .collect(),
                ),
                DType::Bool => Elements::Bool((0..n).map(|_| next() % 2 == 0).collect()),
                other => panic!("no generator for {other}"),
            };
            Array::new(shape.clone(), data).unwrap()
        })
        .collect()
}

/// Gradient programs of the corpus' composite functions.
pub fn gelu(x: Tensor) -> Tensor {
    (&x * 0.5) * ((((&x * &x * &x) * 0.044715 + &x) * 0.7978845608).tanh() + 1.0) * 1.5 + 0.25
}

pub fn sin_chain(x: Tensor) -> Tensor {
    (0..8).fold(x, |y, _| y.sin() * 1.01 + 0.1)
}

/// The benchmark workloads (../shared/bench/workloads.md) but the matrix product, by name;
/// the MLP step as `jit(grad)` traces it.
pub fn benchmark_programs() -> Vec<(&'static str, Func)> {
    let rows = Tensor::spec(DType::F32, [4096, 1024]);
    let sizes = [784, 1024, 1024, 10];
    let mlp_step = |(p, x, y): (Mlp, Tensor, Tensor)| {
        let g = ferrax::grad(|p: Mlp| mlp_loss(&p, &x, &y))(p.clone());
        let layers = p.layers.iter().zip(&g.layers);
        layers
            .map(|(p, g)| (&p.w - &g.w * 0.01, &p.b - &g.b * 0.01))
            .collect::<Vec<_>>()
    };
    vec![
        (
            "w1_gelu",
            trace(gelu, &Tensor::spec(DType::F32, [1 << 24])).unwrap(),
        ),
        (
            "w8_sin_chain",
            trace(sin_chain, &Tensor::spec(DType::F32, [1 << 22])).unwrap(),
        ),
        (
            "w2_softmax",
            trace(|x: Tensor| nn::softmax(&x, -1), &rows).unwrap(),
        ),
        (
            "w3_layernorm",
            trace(
                |(x, g, b): (Tensor, Tensor, Tensor)| layernorm(&x, &g, &b),
                &(
                    rows.clone(),
                    Tensor::spec(DType::F32, [1024]),
                    Tensor::spec(DType::F32, [1024]),
                ),
            )
            .unwrap(),
        ),
        (
            "w5_mlp_step",
            trace(
                mlp_step,
                &(mlp_params(&sizes), spec(&[256, 784]), spec(&[256, 10])),
            )
            .unwrap(),
        ),
        (
            "w7_rowsum",
            trace(|r: Tensor| r.sum(-1), &spec(&[4096, 4096])).unwrap(),
        ),
    ]
}

pub fn gradient_programs() -> Vec<(&'static str, Func)> {
    let p = mlp_params(&[4, 8, 8, 3]);
    vec![
        (
            "mlp_loss_grad",
            trace(
                |(p, x, y): (Mlp, Tensor, Tensor)| grad(|p: Mlp| mlp_loss(&p, &x, &y))(p),
                &(p, spec(&[2, 4]), spec(&[2, 3])),
            )
            .unwrap(),
        ),
        (
            "softmax_grad",
            trace(
                |x: Tensor| grad(|x: Tensor| (nn::softmax(&x, -1) * &x).sum(..))(x),
                &spec(&[3, 5]),
            )
            .unwrap(),
        ),
        (
            "layernorm_grad",
            trace(
                |(x, g, b): (Tensor, Tensor, Tensor)| {
                    grad(|(x, g, b): (Tensor, Tensor, Tensor)| {
                        layernorm(&x, &g, &b).square().sum(..)
                    })((x, g, b))
                },
                &(spec(&[4, 6]), spec(&[6]), spec(&[6])),
            )
            .unwrap(),
        ),
        (
            "spectral_loss_grad",
            trace(
                |x: Tensor| {
                    grad(|x: Tensor| {
                        use ferrax::ir::FftKind;
                        let s = x.fft(FftKind::Rfft, &[6]);
                        let z = &s * &s.conj().sin();
                        z.real().sum(..) + z.abs().sum(..)
                    })(x)
                },
                &spec(&[3, 6]),
            )
            .unwrap(),
        ),
        (
            "log_det_solve_grad",
            trace(
                |x: Tensor| {
                    grad(|x: Tensor| {
                        let diagonal = Tensor::iota(DType::I32, [3, 3], 0)
                            .equal(Tensor::iota(DType::I32, [3, 3], 1))
                            .select(4.0, 0.0);
                        let a = &x + &diagonal;
                        let b = Tensor::from_vec([3], vec![1.0f32, -2.0, 0.5]);
                        a.slogdet().1 + a.solve(&b).sum(..)
                    })(x)
                },
                &spec(&[3, 3]),
            )
            .unwrap(),
        ),
        (
            "qr_grad",
            trace(
                |x: Tensor| {
                    grad(|x: Tensor| {
                        let (q, r) = x.qr(false);
                        (&q * &q.sin()).sum(..) + r.sum(..)
                    })(x)
                },
                &spec(&[4, 3]),
            )
            .unwrap(),
        ),
        (
            "eigh_grad",
            trace(
                |x: Tensor| {
                    grad(|x: Tensor| {
                        let (w, v) = x.eigh();
                        w.exp().sum(..) + (&v * &v).sum_keepdims(0).sqrt().sum(..)
                    })(x)
                },
                &spec(&[3, 3]),
            )
            .unwrap(),
        ),
        (
            "svd_grad",
            trace(
                |x: Tensor| {
                    grad(|x: Tensor| {
                        let (u, s, vh) = x.svd(false);
                        s.sin().sum(..) + u.sum(..) * vh.sum(..)
                    })(x)
                },
                &spec(&[4, 3]),
            )
            .unwrap(),
        ),
        (
            "eig_grad",
            trace(
                |x: Tensor| grad(|x: Tensor| x.eigvals().sin().real().sum(..))(x),
                &spec(&[4, 4]),
            )
            .unwrap(),
        ),
    ]
}

/// Elementwise closeness: NaN where the reference has NaN, equal infinities, and otherwise
/// within `rtol` of the element's magnitude plus the array's largest magnitude (matrix
/// products and sums accumulate in another order than the interpreter, so their error scales
/// with the size of the terms, which the largest result stands for).
pub fn assert_close(got: &Array, want: &Array, rtol: f64, what: &str) {
    assert_eq!(got.shape(), want.shape(), "{what}: shape");
    assert_eq!(got.dtype(), want.dtype(), "{what}: dtype");
    let as_f64 = |a: &Array| -> Vec<f64> {
        match a.elements() {
            Elements::F32(v) => v.iter().map(|&x| f64::from(x)).collect(),
            Elements::F64(v) => v.clone(),
            Elements::I32(v) => v.iter().map(|&x| f64::from(x)).collect(),
            Elements::I64(v) => v.iter().map(|&x| x as f64).collect(),
            Elements::U32(v) => v.iter().map(|&x| f64::from(x)).collect(),
            Elements::U8(v) => v.iter().map(|&x| f64::from(x)).collect(),
            Elements::I8(v) => v.iter().map(|&x| f64::from(x)).collect(),
            Elements::I16(v) => v.iter().map(|&x| f64::from(x)).collect(),
            Elements::U16(v) => v.iter().map(|&x| f64::from(x)).collect(),
            Elements::U64(v) => v.iter().map(|&x| x as f64).collect(),
            Elements::Bool(v) => v.iter().map(|&x| f64::from(u8::from(x))).collect(),
            Elements::F16(v) => v.iter().map(|x| x.to_f64()).collect(),
            Elements::BF16(v) => v.iter().map(|x| x.to_f64()).collect(),
            // Both parts, one after the other.
            Elements::C64(v) => v
                .iter()
                .flat_map(|z| [f64::from(z.re), f64::from(z.im)])
                .collect(),
            Elements::C128(v) => v.iter().flat_map(|z| [z.re, z.im]).collect(),
        }
    };
    let (g, w) = (as_f64(got), as_f64(want));
    let scale = w
        .iter()
        .filter(|x| x.is_finite())
        .fold(0f64, |m, x| m.max(x.abs()));
    for (i, (&a, &b)) in g.iter().zip(&w).enumerate() {
        let ok = if b.is_nan() {
            a.is_nan()
        } else if b.is_infinite() {
            a == b
        } else {
            (a - b).abs() <= rtol * (b.abs() + scale)
        };
        assert!(ok, "{what}: element {i} is {a}, want {b}");
    }
}

/// Whether the CPU backend may compute `func` differently from the interpreter: matrix products
/// (`gemm` accumulates in its own order), float sums (row kernels accumulate in the element type,
/// in SIMD lanes; the interpreter in f64, pairwise), f32 transcendentals (SIMD polynomials,
/// 3 ULP), float products added to something (contracted into one fma) and float quotients by a
/// broadcast value (multiplied by its reciprocal in row kernels); in the regions of control
/// flow too, which the CPU backend compiles as it does the program.
pub fn cpu_approximates(func: &Func) -> bool {
    use ferrax::ir::{BinaryOp, Op, ReduceOp, UnaryOp};
    let made_by = |v: ferrax::ir::ValueId, want: fn(&Op) -> bool| {
        (0..func.body.len()).any(|i| func.instr_value(i) == v && want(&func.body[i].op))
    };
    let in_regions = |op: &Op| op.regions().iter().any(|(_, f)| cpu_approximates(f));
    func.body.iter().any(|ins| match &ins.op {
        op if in_regions(op) => true,
        Op::Binary(BinaryOp::Add) if ins.ty.dtype.is_float() => ins
            .args
            .iter()
            .any(|&a| made_by(a, |op| matches!(op, Op::Binary(BinaryOp::Mul)))),
        Op::Binary(BinaryOp::Div) if ins.ty.dtype.is_float() => {
            made_by(ins.args[1], |op| matches!(op, Op::BroadcastInDim { .. }))
        }
        Op::DotGeneral(_) => true,
        Op::Reduce {
            op: ReduceOp::Sum, ..
        } => ins.ty.dtype.is_float(),
        Op::Unary(u) => {
            matches!(ins.ty.dtype, DType::F32 | DType::F16 | DType::BF16)
                && !matches!(
                    u,
                    UnaryOp::Neg
                        | UnaryOp::Abs
                        | UnaryOp::Sign
                        | UnaryOp::Floor
                        | UnaryOp::Ceil
                        | UnaryOp::Round
                        | UnaryOp::RoundEven
                        | UnaryOp::Sqrt
                        | UnaryOp::Not
                )
        }
        Op::Binary(BinaryOp::Pow) => ins.ty.dtype == DType::F32,
        _ => false,
    })
}

/// A small deterministic generator (xorshift) for the randomized tests: every case is
/// reproducible from its seed (which must not be 0).
pub struct Gen(pub u64);

impl Gen {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// f32 values at the edges of conversions to u8, i32, i64 and bool: negatives, signed zero,
/// fractions, u8's and i32's limits and beyond, NaN, tiny magnitudes (12 of them).
pub fn conversion_edges() -> Vec<f32> {
    vec![
        -1.5,
        -0.0,
        0.7,
        255.9,
        300.0,
        f32::NAN,
        1e10,
        -1e10,
        3e9,
        65_537.0,
        1e30,
        -1e-30,
    ]
}

/// A training step of `layers` identical layers, `h = tanh(h·wᵢ)` over a batch of `[batch,
/// width]`, whose result is each weight less half its gradient of the sum of `h`: repeated
/// kernels (each layer's, both ways) and independent updates of one size.
pub fn repeated_layers_step(layers: usize, width: usize, batch: usize) -> Func {
    let step = |(ws, x): (Vec<Tensor>, Tensor)| -> Vec<Tensor> {
        let loss = |ws: Vec<Tensor>| {
            let mut h = x.clone();
            for w in &ws {
                h = h.matmul(w).tanh();
            }
            h.sum(..)
        };
        let grads = grad(loss)(ws.clone());
        ws.iter().zip(&grads).map(|(w, g)| w - &(g * 0.5)).collect()
    };
    let specs = (
        vec![Tensor::spec(DType::F32, [width, width]); layers],
        Tensor::spec(DType::F32, [batch, width]),
    );
    trace(step, &specs).unwrap()
}

/// A row kernel's program with iotas: over rows of `[4, 25]` (reduced over both axes), one
/// along the inner axis (stride 25), one along the last (stride 1), one along the rows, and
/// one of a row value.
pub fn row_iota_program() -> Func {
    trace(
        |x: Tensor| {
            let shape = [6, 4, 25];
            let iota = |axis| Tensor::iota(DType::I32, shape, axis).astype(DType::F32);
            let y = &x + iota(1) * 0.5 + iota(0) - iota(2) * 0.25;
            let rows = Tensor::iota(DType::I32, [6], 0).astype(DType::F32);
            let s = y.sum([1, 2]) + rows;
            (&y * s.reshape([6, 1, 1]), s)
        },
        &Tensor::spec(DType::F32, [6, 4, 25]),
    )
    .unwrap()
}

/// The mean softmax cross-entropy of `[rows, cols]` logits against i32 labels `[rows]`, and
/// its gradient with respect to the logits.
pub fn cross_entropy_with_gradient(rows: usize, cols: usize) -> Func {
    trace(
        |(x, labels): (Tensor, Tensor)| {
            let loss =
                |x: Tensor| nn::softmax_cross_entropy_with_integer_labels(&x, &labels).mean(..);
            (loss(x.clone()), grad(loss)(x))
        },
        &(
            Tensor::spec(DType::F32, [rows, cols]),
            Tensor::spec(DType::I32, [rows]),
        ),
    )
    .unwrap()
}

/// `text`'s results on `inputs` by the interpreter, which the CPU backend and the emulated GPU
/// must equal bit for bit, and whose text must print back as it parses.
pub fn run_on_every_backend(text: &str, inputs: &[Array]) -> Vec<Array> {
    use ferrax::compiler::backend::gpu::{GpuOptions, GpuProgram};
    use ferrax::compiler::backend::CpuExecutable;
    let func = ferrax::ir::parse_func(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(
        ferrax::ir::parse_func(&func.to_string()).unwrap(),
        func,
        "{text}"
    );
    let want = ferrax::runtime::interpret(&func, inputs).unwrap();
    let cpu = CpuExecutable::compile(&func).unwrap().run(inputs).unwrap();
    let emulator = ferrax_ptx_emu::Emulator::default();
    let gpu = GpuProgram::compile(&func, &emulator, GpuOptions::HIGHEST)
        .unwrap()
        .run(inputs)
        .unwrap();
    for (k, w) in want.iter().enumerate() {
        assert_eq!(cpu[k].elements(), w.elements(), "CPU, result {k}:\n{text}");
        assert_eq!(gpu[k].elements(), w.elements(), "GPU, result {k}:\n{text}");
    }
    want
}

/// A one-dimensional array of `v`.
pub fn vector<T: ferrax::ir::Element>(v: &[T]) -> Array {
    Array::new([v.len()], T::into_elements(v.to_vec())).unwrap()
}

/// `a`'s elements, of type `T`.
pub fn elements_of<T: ferrax::ir::Element>(a: &Array) -> Vec<T> {
    a.as_slice::<T>().unwrap().to_vec()
}

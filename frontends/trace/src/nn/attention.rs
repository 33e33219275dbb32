//! Dot-product attention (`jax.nn.dot_product_attention`) as one op, and causal multi-head
//! self-attention as GPT-2 (and `../shared/bench/workloads.md`'s GPT) defines it: one fused
//! `qkv` projection with a bias, heads of `D / H`, scores scaled by `1 / sqrt(D / H)` and
//! masked with `-inf` above the diagonal, a softmax, and an output projection with a bias.
//! The attention itself is [`dot_product_attention`]'s op, whose reverse mode recomputes the
//! softmax from the row log-sum-exps rather than keep it; backends without a fused kernel
//! compile its plain-op spelling. [`causal_self_attention_with`] computes its four products at
//! a [`DotPrecision`] (mixed precision) and the softmax in `x`'s dtype: by the op where the
//! precision rounds operands and results to one half type (the op's `precision`), otherwise
//! written with tensor methods.

use super::linear::{dense, Linear};
use super::softmax;
use crate::tensor::apply_at;
use crate::tree::child_key_paths;
use crate::{DotPrecision, Result, Tensor, Tree, TreeDef};
use ferrax_ir::{Attention as AttentionOp, AttentionPart, DType, Op, TensorType};
use std::panic::Location;

/// The parameters of [`causal_self_attention`]: `qkv` maps `D` to `3D` (queries, keys and
/// values side by side, in that order), `proj` maps `D` to `D`.
#[derive(Clone, Debug)]
pub struct Attention {
    pub qkv: Linear,
    pub proj: Linear,
}

impl Tree for Attention {
    fn flatten(&self, leaves: &mut Vec<Tensor>) -> TreeDef {
        TreeDef::Node(vec![self.qkv.flatten(leaves), self.proj.flatten(leaves)])
    }

    fn unflatten(def: &TreeDef, leaves: &mut dyn Iterator<Item = Tensor>) -> Result<Self> {
        let c = def.children(2)?;
        Ok(Attention {
            qkv: Linear::unflatten(&c[0], leaves)?,
            proj: Linear::unflatten(&c[1], leaves)?,
        })
    }

    fn key_paths(&self, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
        child_key_paths("qkv", &self.qkv, prefix, out);
        child_key_paths("proj", &self.proj, prefix, out);
    }
}

/// `jax.nn.dot_product_attention(q, k, v, scale=scale, is_causal=causal)`: queries
/// `[B, T, H, D]` attend to keys and values `[B, S, H, D]` (batch, positions, heads, head
/// features), scores scaled by `scale` (`1 / sqrt(D)` when `None`); causal keeps query `i`'s
/// keys `j <= i`. The result is `[B, T, H, D]`. Operands of another layout or of mismatched
/// sizes give an error naming the call's line.
#[track_caller]
pub fn dot_product_attention(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    scale: Option<f64>,
    causal: bool,
) -> Tensor {
    attention_op(q, k, v, (scale, causal, None), Location::caller())
}

/// What [`dot_product_attention_with`] adds to [`dot_product_attention`], as
/// `jax.nn.dot_product_attention`'s keywords: an additive `bias` and a boolean `mask` (each
/// broadcastable to the scores' `[B, N, T, S]`), `scale`, `causal`, the valid lengths of each
/// batch row's queries and keys (`[B]` integers), and a local window of `(left, right)`
/// positions around each query.
#[derive(Clone, Debug, Default)]
pub struct AttentionOptions {
    pub bias: Option<Tensor>,
    pub mask: Option<Tensor>,
    pub scale: Option<f64>,
    pub causal: bool,
    pub query_seq_lengths: Option<Tensor>,
    pub key_value_seq_lengths: Option<Tensor>,
    pub local_window: Option<(usize, usize)>,
}

/// `jax.nn.dot_product_attention(q, k, v, bias, mask, scale=, is_causal=, ...)`: queries
/// `[B, T, N, H]` attend to keys and values `[B, S, K, H]` where `K` divides `N` (grouped-query
/// attention: query head `n` reads key head `n / (N / K)`). Without a bias, mask, lengths or
/// window this is [`dot_product_attention`]'s fused op (keys and values repeated per group);
/// otherwise the scores are computed (in f32 for half types), biased and masked (masked
/// scores are `-0.7` times the largest f32, as JAX's, so a row with every key masked averages
/// the values) and softmaxed. Rows past a query length are zero.
#[track_caller]
pub fn dot_product_attention_with(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    options: &AttentionOptions,
) -> Tensor {
    let location = Location::caller();
    let fail = |message: String| {
        Tensor::failed(
            location,
            format!("dot_product_attention: {message}"),
            q.ty().clone(),
        )
    };
    let (&[b, t, n, h], &[kb, s, kn, kh]) = (q.shape(), k.shape()) else {
        return fail(format!(
            "queries {} and keys {} must be [batch, positions, heads, features]",
            q.ty(),
            k.ty()
        ));
    };
    if v.shape() != k.shape() || kb != b || kh != h || kn == 0 || n % kn != 0 {
        return fail(format!(
            "queries {}, keys {} and values {}: keys and values alike, of the queries' batch and \
             features, their heads dividing the queries'",
            q.ty(),
            k.ty(),
            v.ty()
        ));
    }
    let group = n / kn;
    let (k, v) = match group {
        1 => (k.clone(), v.clone()),
        _ => (k.repeat(group, 2), v.repeat(group, 2)),
    };
    let o = options;
    let plain = o.bias.is_none()
        && o.mask.is_none()
        && o.query_seq_lengths.is_none()
        && o.key_value_seq_lengths.is_none()
        && o.local_window.is_none();
    if plain {
        return attention_op(q, &k, &v, (o.scale, o.causal, None), location);
    }
    let scale = o.scale.unwrap_or(1.0 / (h.max(1) as f64).sqrt());
    // Scores of half types are accumulated and kept in f32, as JAX's.
    let logits = match q.dtype() {
        DType::F16 | DType::BF16 => Tensor::einsum(
            "btnh,bsnh->bnts",
            &[&q.astype(DType::F32), &k.astype(DType::F32)],
        ),
        _ => Tensor::einsum("btnh,bsnh->bnts", &[q, &k]),
    } * scale;
    let logits = match &o.bias {
        Some(bias) => (&logits + bias).astype(logits.dtype()),
        None => logits,
    };
    let query_pos = Tensor::iota(DType::I32, [t, s], 0);
    let key_pos = Tensor::iota(DType::I32, [t, s], 1);
    let mut keep = Tensor::full(DType::Bool, [1, 1, t, s], 1.0);
    if let Some(mask) = &o.mask {
        if mask.dtype() != DType::Bool {
            return fail(format!("the mask {} must be booleans", mask.ty()));
        }
        keep = keep.logical_and(mask);
    }
    if o.causal {
        keep = keep.logical_and(query_pos.greater_equal(&key_pos).reshape([1, 1, t, s]));
    }
    if let Some((left, right)) = o.local_window {
        let near = query_pos
            .less_equal(&key_pos + left as f64)
            .logical_and(query_pos.greater_equal(&key_pos - right as f64));
        keep = keep.logical_and(near.reshape([1, 1, t, s]));
    }
    let lengths = |l: &Tensor, what: &str| match l.shape() == [b] && l.dtype().is_int() {
        true => Ok(l.reshape([b, 1, 1, 1])),
        false => Err(fail(format!("{what} {} must be [{b}] integers", l.ty()))),
    };
    let mut query_valid = None;
    if let Some(l) = &o.query_seq_lengths {
        let l = match lengths(l, "query_seq_lengths") {
            Ok(l) => l,
            Err(e) => return e,
        };
        let valid = Tensor::iota(l.dtype(), [1, 1, t, 1], 2).less(&l);
        keep = keep.logical_and(&valid);
        query_valid = Some(valid);
    }
    if let Some(l) = &o.key_value_seq_lengths {
        let l = match lengths(l, "key_value_seq_lengths") {
            Ok(l) => l,
            Err(e) => return e,
        };
        keep = keep.logical_and(Tensor::iota(l.dtype(), [1, 1, 1, s], 3).less(&l));
    }
    let masked = keep.select(&logits, -0.7 * f64::from(f32::MAX));
    let probs = softmax(&masked, -1).astype(v.dtype());
    let out = Tensor::einsum("bnts,bsnh->btnh", &[&probs, &v]);
    match query_valid {
        // [B, 1, T, 1] -> [B, T, 1, 1].
        Some(valid) => &out * valid.reshape([b, t, 1, 1]).astype(out.dtype()),
        None => out,
    }
}

/// [`dot_product_attention`], its products at `precision` (a half type, operands and results
/// rounded to it) where given.
fn attention_op(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    (scale, causal, precision): (Option<f64>, bool, Option<DType>),
    location: &'static Location<'static>,
) -> Tensor {
    let features = q.shape().get(3).copied().unwrap_or(1).max(1);
    let scale = scale.unwrap_or(1.0 / (features as f64).sqrt());
    // Queries that are no floats are left for the op to refuse, naming the call.
    let q = match q.dtype().is_float() {
        true => q * scale,
        false => q.clone(),
    };
    // f32 operands of products at a half type are rounded to it once, where they are made:
    // the op reads nothing else of them, and its kernels then read half the bytes.
    let rounded = precision.filter(|_| [q.dtype(), k.dtype(), v.dtype()] == [DType::F32; 3]);
    let (q, k, v) = match rounded {
        Some(h) => (q.astype(h), k.astype(h), v.astype(h)),
        None => (q, k.clone(), v.clone()),
    };
    apply_at(
        location,
        Op::Attention(AttentionOp::new(AttentionPart::Output, causal).with_precision(precision)),
        &[&q, &k, &v],
    )
}

/// Causal self-attention over `x` of shape `[B, T, D]` (or `[T, D]`) with `heads` heads:
/// position `i` attends to positions `0..=i`. The result has `x`'s shape.
#[track_caller]
pub fn causal_self_attention(x: &Tensor, params: &Attention, heads: usize) -> Tensor {
    attention(x, params, heads, None, Location::caller())
}

/// [`causal_self_attention`] with its products (the projections, the scores and the mixing)
/// at `precision`, each converted back to `x`'s dtype: the scaling, mask and softmax stay in
/// `x`'s dtype, as in JAX's mixed-precision GPTs.
#[track_caller]
pub fn causal_self_attention_with(
    x: &Tensor,
    params: &Attention,
    heads: usize,
    precision: DotPrecision,
) -> Tensor {
    attention(x, params, heads, Some(precision), Location::caller())
}

fn attention(
    x: &Tensor,
    params: &Attention,
    heads: usize,
    precision: Option<DotPrecision>,
    location: &'static Location<'static>,
) -> Tensor {
    if x.ndim() == 2 {
        return attend(&x.expand_dims(0), params, heads, precision, location).squeeze(0);
    }
    attend(x, params, heads, precision, location)
}

fn attend(
    x: &Tensor,
    params: &Attention,
    heads: usize,
    precision: Option<DotPrecision>,
    location: &'static Location<'static>,
) -> Tensor {
    let fail = |message: String| {
        Tensor::failed(
            location,
            format!("causal_self_attention: {message}"),
            TensorType::new(x.dtype(), x.shape().to_vec()),
        )
    };
    if x.error().is_some() {
        return x.clone();
    }
    let &[b, t, d] = x.shape() else {
        return fail(format!("x {} must be [batch, time, features]", x.ty()));
    };
    if heads == 0 || d % heads != 0 {
        return fail(format!("{d} features do not split into {heads} heads"));
    }
    let head = d / heads;
    let matmul = |a: &Tensor, b: &Tensor| match precision {
        Some(p) => a.matmul_with(b, p).astype(x.dtype()),
        None => a.matmul(b),
    };
    let qkv = dense(x, &params.qkv, precision);
    if qkv.error().is_none() && qkv.shape() != [b, t, 3 * d] {
        return fail(format!(
            "the qkv projection gives {}, not [{b}, {t}, {}]",
            qkv.ty(),
            3 * d
        ));
    }
    // Products rounded to a half type as the attention op rounds them (or none): attended
    // as [B, T, H, D/H] by the op.
    let half = |p: DotPrecision| {
        let fits = p.compute == p.result && matches!(x.dtype(), DType::F32 | DType::F64);
        (fits && matches!(p.compute, DType::F16 | DType::BF16)).then_some(p.compute)
    };
    let op_precision = match precision {
        None => Some(None),
        Some(p) => half(p).map(Some),
    };
    if let Some(op_precision) = op_precision {
        let split = |i: usize| {
            qkv.slice(&[0, 0, i * d], &[b, t, (i + 1) * d])
                .reshape([b, t, heads, head])
        };
        let (q, k, v) = (split(0), split(1), split(2));
        let y = attention_op(&q, &k, &v, (None, true, op_precision), location);
        return dense(&y.reshape([b, t, d]), &params.proj, precision);
    }
    // Under a precision, rounded once before the heads are split: the values of rounding each
    // of q, k and v, with the movements then on the half type and off the products' operands.
    let qkv = match precision {
        Some(p) => qkv.astype(p.compute),
        None => qkv,
    };
    // [B, T, 3D] -> three [B, H, T, D/H].
    let split = |i: usize| {
        qkv.slice(&[0, 0, i * d], &[b, t, (i + 1) * d])
            .reshape([b, t, heads, head])
            .transpose([0, 2, 1, 3])
    };
    let (q, k, v) = (split(0), split(1), split(2));
    let scores = matmul(&q, &k.transpose([0, 1, 3, 2])) / (head as f64).sqrt();
    let (row, col) = (
        Tensor::iota(DType::I32, [t, t], 0),
        Tensor::iota(DType::I32, [t, t], 1),
    );
    let causal = row.greater_equal(col);
    let weights = softmax(&causal.select(&scores, f64::NEG_INFINITY), -1);
    let y = matmul(&weights, &v)
        .transpose([0, 2, 1, 3])
        .reshape([b, t, d]);
    dense(&y, &params.proj, precision)
}

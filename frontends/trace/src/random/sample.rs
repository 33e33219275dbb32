//! Sampling from a key: raw bits and the float distributions, each the same computation as
//! `jax.random`'s, so the same key and shape give JAX's bits (and, where JAX's arithmetic is
//! exact, its values).

use super::key::{Key, Unusable};
use super::threefry::{iota_2x32, schedule, threefry2x32, word};
use crate::lax::{erf, erf_inv};
use crate::{Operand, Tensor};
use ferrax_ir::{DType, Scalar, Shape, TensorType};
use std::panic::Location;

/// The two threefry output words for every element of `shape` under the scalar `key`, or
/// why `op` cannot draw them.
#[track_caller]
pub(super) fn hashed_counters(
    op: &str,
    key: &Key,
    shape: &[usize],
) -> Result<[Tensor; 2], Unusable> {
    let (k1, k2) = key.words(op)?;
    let schedule = schedule(&k1, &k2);
    let counts = iota_2x32(shape).map_err(|m| Unusable::New(format!("{op}: {m}")))?;
    Ok(threefry2x32(&schedule, counts))
}

/// A failed tensor of `dtype[shape]` with `message`.
fn failed(
    location: &'static Location<'static>,
    message: String,
    dtype: DType,
    shape: &[usize],
) -> Tensor {
    Unusable::New(message).tensor(location, TensorType::new(dtype, shape.to_vec()))
}

/// Uniformly random `u32` bits of `shape` (`jax.random.bits`).
#[track_caller]
pub fn bits(key: &Key, shape: impl Into<Shape>) -> Tensor {
    let location = Location::caller();
    let shape = shape.into();
    match hashed_counters("bits", key, shape.dims()) {
        Ok([b1, b2]) => b1.logical_xor(&b2),
        Err(unusable) => unusable.tensor(location, TensorType::new(DType::U32, shape)),
    }
}

/// Uniform floats in [0, 1) of `shape` and float `dtype` (`jax.random.uniform`).
#[track_caller]
pub fn uniform(key: &Key, shape: impl Into<Shape>, dtype: DType) -> Tensor {
    uniform_in(key, shape, dtype, 0.0, 1.0)
}

/// Uniform floats in [`minval`, `maxval`) (`jax.random.uniform(key, shape, dtype, minval,
/// maxval)`); the bounds are numbers or tensors that broadcast to `shape`.
#[track_caller]
pub fn uniform_in<'a, 'b>(
    key: &Key,
    shape: impl Into<Shape>,
    dtype: DType,
    minval: impl Into<Operand<'a>>,
    maxval: impl Into<Operand<'b>>,
) -> Tensor {
    let location = Location::caller();
    let shape = shape.into();
    let dims = shape.dims();
    let Some(mantissa) = mantissa_bits(dtype) else {
        let message = format!("uniform: the dtype must be a float, it is {dtype}");
        return failed(location, message, dtype, dims);
    };
    let words = match hashed_counters("uniform", key, dims) {
        Ok(words) => words,
        Err(unusable) => return unusable.tensor(location, TensorType::new(dtype, dims.to_vec())),
    };
    let (minval, maxval) = (minval.into(), maxval.into());
    let floats = one_to_two(words, dtype, mantissa) - 1.0;
    // [0, 1): JAX's `max(0, floats * 1 + 0)` is `floats` exactly.
    if let (Operand::Number(a), Operand::Number(b)) = (&minval, &maxval) {
        if (*a, *b) == (0.0, 1.0) {
            return floats;
        }
    }
    let like = Tensor::zeros(dtype, Shape::scalar());
    let lo = minval.resolve(&like).astype(dtype);
    let hi = maxval.resolve(&like).astype(dtype);
    let span = &hi - &lo;
    // XLA contracts `floats * span + lo` into a fused multiply-add. In f64 the product of
    // two narrower floats is exact, so one rounding to the dtype gives the fused result
    // (but where the sum itself rounds in f64 onto a halfway point of the dtype, about one
    // draw in 2^29); f64 draws round twice.
    let scaled = match dtype {
        DType::F64 => floats * &span + &lo,
        _ => {
            let wide = |t: &Tensor| t.astype(DType::F64);
            (wide(&floats) * wide(&span) + wide(&lo)).astype(dtype)
        }
    };
    scaled.maximum(&lo)
}

/// The explicit mantissa bits of a float dtype, `None` for the others.
fn mantissa_bits(dtype: DType) -> Option<u32> {
    match dtype {
        DType::F16 => Some(10),
        DType::BF16 => Some(7),
        DType::F32 => Some(23),
        DType::F64 => Some(52),
        DType::I32
        | DType::I64
        | DType::U8
        | DType::U32
        | DType::I8
        | DType::I16
        | DType::U16
        | DType::U64
        | DType::Bool
        | DType::C64
        | DType::C128 => None,
    }
}

/// Floats in [1, 2) whose mantissas are random bits, as JAX makes them: the top `mantissa`
/// bits of a `bits`-wide draw (8 bits for bf16, 16 for f16, the xor of both words for f32, the
/// two words as one 64-bit draw for f64) under the exponent of 1.
fn one_to_two([b1, b2]: [Tensor; 2], dtype: DType, mantissa: u32) -> Tensor {
    if dtype == DType::F64 {
        // `((b1 << 32 | b2) >> 12) | bits(1.0)`, in i64 (every value stays below 2^62).
        let high = b1.astype(DType::I64).shift_left(20);
        let low = b2.astype(DType::I64).shift_right_logical(12);
        let one = Tensor::full(DType::I64, Shape::scalar(), (1023u64 << 52) as f64);
        return high.logical_or(&low).logical_or(&one).bitcast(DType::F64);
    }
    // JAX draws at least 8 bits: bf16 (7 mantissa bits) draws 8, f16 16, f32 32.
    let draw = match mantissa {
        m if m < 8 => 8,
        m if m < 16 => 16,
        _ => 32,
    };
    let mut w = b1.logical_xor(&b2);
    if draw < 32 {
        w = w.logical_and(word((1u32 << draw) - 1));
    }
    let m = w.shift_right_logical(word(draw - mantissa));
    // The same value as an f32 in [1, 2), exact in every narrower float.
    let f32_bits = match 23 - mantissa {
        0 => m,
        shift => m.shift_left(word(shift)),
    };
    let ones = f32_bits.logical_or(word(0x3F80_0000)).bitcast(DType::F32);
    match dtype {
        DType::F32 => ones,
        _ => ones.astype(dtype),
    }
}

/// The largest float of `dtype` above -1 (`nextafter(-1, 0)`).
fn above_minus_one(mantissa: u32) -> f64 {
    -(1.0 - (-(f64::from(mantissa) + 1.0)).exp2())
}

/// Standard normal floats (`jax.random.normal`): `√2·erf_inv(u)` for `u` uniform in
/// (-1, 1), as JAX computes them.
#[track_caller]
pub fn normal(key: &Key, shape: impl Into<Shape>, dtype: DType) -> Tensor {
    let location = Location::caller();
    let shape = shape.into();
    let Some(mantissa) = mantissa_bits(dtype) else {
        let message = format!("normal: the dtype must be a float, it is {dtype}");
        return failed(location, message, dtype, shape.dims());
    };
    let u = uniform_in(key, shape, dtype, above_minus_one(mantissa), 1.0);
    erf_inv(&u) * std::f64::consts::SQRT_2
}

/// Normal floats truncated to (`lower`, `upper`) (`jax.random.truncated_normal`): the
/// inverse CDF of a uniform draw between the bounds' CDFs, clipped into the open interval.
#[track_caller]
pub fn truncated_normal(
    key: &Key,
    lower: f64,
    upper: f64,
    shape: impl Into<Shape>,
    dtype: DType,
) -> Tensor {
    let location = Location::caller();
    let shape = shape.into();
    if mantissa_bits(dtype).is_none() {
        let message = format!("truncated_normal: the dtype must be a float, it is {dtype}");
        return failed(location, message, dtype, shape.dims());
    }
    let sqrt2 = std::f64::consts::SQRT_2;
    let scalar = |v: f64| Tensor::full(dtype, Shape::scalar(), v);
    let a = erf(&(scalar(lower) / sqrt2));
    let b = erf(&(scalar(upper) / sqrt2));
    let u = uniform_in(key, shape, dtype, &a, &b);
    let out = erf_inv(&u) * sqrt2;
    let low = scalar(next_toward(lower, dtype, f64::INFINITY));
    let high = scalar(next_toward(upper, dtype, f64::NEG_INFINITY));
    out.clip(&low, &high)
}

/// The float of `dtype` next to `x` (rounded to `dtype`) in the direction of `toward`
/// (`lax.nextafter`).
fn next_toward(x: f64, dtype: DType, toward: f64) -> f64 {
    let v = Scalar::from_f64(dtype, x).to_f64();
    let step = |bits: u64, width: u32| -> u64 {
        let sign = 1u64 << (width - 1);
        let magnitude = bits & (sign - 1);
        match (magnitude == 0, (toward > v) == (bits & sign == 0)) {
            (true, _) => (if toward > v { 0 } else { sign }) | 1,
            (false, true) => bits + 1,
            (false, false) => bits - 1,
        }
    };
    if v == toward || v.is_nan() {
        return v;
    }
    match dtype {
        DType::F32 => f64::from(f32::from_bits(
            step(u64::from((v as f32).to_bits()), 32) as u32
        )),
        DType::F64 => f64::from_bits(step(v.to_bits(), 64)),
        DType::F16 => {
            half::f16::from_bits(step(u64::from(half::f16::from_f64(v).to_bits()), 16) as u16)
                .to_f64()
        }
        DType::BF16 => {
            half::bf16::from_bits(step(u64::from(half::bf16::from_f64(v).to_bits()), 16) as u16)
                .to_f64()
        }
        DType::I32
        | DType::I64
        | DType::U8
        | DType::U32
        | DType::I8
        | DType::I16
        | DType::U16
        | DType::U64
        | DType::Bool
        | DType::C64
        | DType::C128 => v,
    }
}

/// `true` with probability `p` (`jax.random.bernoulli`): a uniform draw of `p`'s dtype (f32
/// for a number) below `p`.
#[track_caller]
pub fn bernoulli<'a>(key: &Key, p: impl Into<Operand<'a>>, shape: impl Into<Shape>) -> Tensor {
    let p = p
        .into()
        .resolve(&Tensor::zeros(DType::F32, Shape::scalar()));
    uniform(key, shape, p.dtype()).less(&p)
}

/// Standard Gumbel floats (`jax.random.gumbel`, mode "low"): `-log(-log(u))` for `u`
/// uniform in [tiny, 1).
#[track_caller]
pub fn gumbel(key: &Key, shape: impl Into<Shape>, dtype: DType) -> Tensor {
    let tiny = match dtype {
        DType::F16 => (-14f64).exp2(),
        DType::BF16 | DType::F32 => (-126f64).exp2(),
        DType::F64 => f64::MIN_POSITIVE,
        DType::I32
        | DType::I64
        | DType::U8
        | DType::U32
        | DType::I8
        | DType::I16
        | DType::U16
        | DType::U64
        | DType::Bool
        | DType::C64
        | DType::C128 => 0.0,
    };
    let u = uniform_in(key, shape, dtype, tiny, 1.0);
    -(-u.log()).log()
}

/// Samples of the categorical distributions whose unnormalised log-probabilities lie along
/// `axis` of `logits` (`jax.random.categorical`, with replacement), by the Gumbel-max trick:
/// i32 indices of shape `shape`, by default `logits`' shape without `axis`; a given `shape`
/// must end with that batch shape (its leading dimensions draw independent samples).
#[track_caller]
pub fn categorical(key: &Key, logits: &Tensor, axis: i64, shape: Option<&[usize]>) -> Tensor {
    let location = Location::caller();
    let rank = logits.ndim() as i64;
    let a = if axis < 0 { axis + rank } else { axis };
    if !(0..rank).contains(&a) {
        let message = format!(
            "categorical: axis {axis} is out of range for {}",
            logits.ty()
        );
        return failed(location, message, DType::I32, &[]);
    }
    let a = a as usize;
    let mut batch = logits.shape().to_vec();
    let classes = batch.remove(a);
    let shape = shape.map_or_else(|| batch.clone(), <[usize]>::to_vec);
    if !shape.ends_with(&batch) {
        let message = format!(
            "categorical: the shape {shape:?} must end with the batch shape {batch:?} of {} without axis {axis}",
            logits.ty()
        );
        return failed(location, message, DType::I32, &shape);
    }
    let prefix = shape.len() - batch.len();
    let mut noise_shape = shape.clone();
    noise_shape.insert(prefix + a, classes);
    let mut expanded = logits.clone();
    for _ in 0..prefix {
        expanded = expanded.expand_dims(0);
    }
    let noise = gumbel(key, noise_shape, logits.dtype());
    (noise + &expanded).argmax((prefix + a) as i64)
}

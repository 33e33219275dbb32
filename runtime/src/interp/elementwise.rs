//! Elementwise ops. Floats of every width are computed in f64 and rounded once to their dtype:
//! exact for the arithmetic ops (f64 has more than twice the precision of f32, so the result
//! equals the correctly rounded f32 operation) and nearly always correctly rounded for the
//! transcendentals. Integers are computed in i64 and wrapped to their width.

use super::{floats, from_floats, from_ints, ints};
use ferrax_ir::{bf16_from_f64, f16_from_f64};
use ferrax_ir::{BinaryOp, CompareOp, DType, Elements, UnaryOp};

/// `f` on every element of a float array, computed in f64 and rounded once.
fn map_floats(x: &Elements, f: impl Fn(f64) -> f64) -> Elements {
    match x {
        Elements::F32(v) => Elements::F32(v.iter().map(|&a| f(a as f64) as f32).collect()),
        Elements::F64(v) => Elements::F64(v.iter().map(|&a| f(a)).collect()),
        Elements::F16(v) => Elements::F16(v.iter().map(|a| f16_from_f64(f(a.to_f64()))).collect()),
        Elements::BF16(v) => {
            Elements::BF16(v.iter().map(|a| bf16_from_f64(f(a.to_f64()))).collect())
        }
        other => from_floats(floats(other).into_iter().map(f).collect(), other.dtype()),
    }
}

/// `f` on corresponding elements of two float arrays of the same dtype.
fn zip_floats(a: &Elements, b: &Elements, f: impl Fn(f64, f64) -> f64) -> Elements {
    match (a, b) {
        (Elements::F32(x), Elements::F32(y)) => {
            Elements::F32(zip_with(x, y, |p, q| f(p as f64, q as f64) as f32))
        }
        (Elements::F64(x), Elements::F64(y)) => Elements::F64(zip_with(x, y, f)),
        _ => from_floats(zip_with(&floats(a), &floats(b), f), a.dtype()),
    }
}

fn unary_float(u: UnaryOp, x: f64) -> f64 {
    match u {
        UnaryOp::Neg => -x,
        UnaryOp::Abs => x.abs(),
        UnaryOp::Sign => {
            if x.is_nan() || x == 0.0 {
                x
            } else {
                x.signum()
            }
        }
        UnaryOp::Floor => x.floor(),
        UnaryOp::Ceil => x.ceil(),
        UnaryOp::Round => x.round(),
        UnaryOp::RoundEven => x.round_ties_even(),
        UnaryOp::Exp => x.exp(),
        UnaryOp::Expm1 => x.exp_m1(),
        UnaryOp::Log => x.ln(),
        UnaryOp::Log1p => x.ln_1p(),
        UnaryOp::Sqrt => x.sqrt(),
        UnaryOp::Rsqrt => 1.0 / x.sqrt(),
        UnaryOp::Tanh => x.tanh(),
        UnaryOp::Logistic => {
            if x >= 0.0 {
                1.0 / (1.0 + (-x).exp())
            } else {
                let e = x.exp();
                e / (1.0 + e)
            }
        }
        UnaryOp::Sin => x.sin(),
        UnaryOp::Cos => x.cos(),
        UnaryOp::Not => f64::NAN,
    }
}

fn unary_int(u: UnaryOp, x: i64) -> i64 {
    match u {
        UnaryOp::Neg => x.wrapping_neg(),
        UnaryOp::Abs => x.wrapping_abs(),
        UnaryOp::Sign => x.signum(),
        UnaryOp::Not => !x,
        _ => x,
    }
}

pub(super) fn unary(u: UnaryOp, x: &Elements) -> Elements {
    let d = x.dtype();
    match x {
        Elements::Bool(v) => Elements::Bool(v.iter().map(|b| !b).collect()),
        _ if d.is_float() => map_floats(x, |v| unary_float(u, v)),
        _ => from_ints(ints(x).iter().map(|&v| unary_int(u, v)).collect(), d),
    }
}

/// NaN-propagating maximum with max(-0, +0) = +0.
fn fmax(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else if a == b {
        if a.is_sign_negative() {
            b
        } else {
            a
        }
    } else {
        a.max(b)
    }
}

/// NaN-propagating minimum with min(-0, +0) = -0.
fn fmin(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else if a == b {
        if a.is_sign_negative() {
            a
        } else {
            b
        }
    } else {
        a.min(b)
    }
}

fn binary_float(op: BinaryOp, a: f64, b: f64) -> f64 {
    match op {
        BinaryOp::Add => a + b,
        BinaryOp::Sub => a - b,
        BinaryOp::Mul => a * b,
        BinaryOp::Div => a / b,
        BinaryOp::Rem => a % b,
        BinaryOp::Pow => a.powf(b),
        BinaryOp::Max => fmax(a, b),
        BinaryOp::Min => fmin(a, b),
        BinaryOp::And | BinaryOp::Or | BinaryOp::Xor => f64::NAN,
    }
}

/// Integer `a ** b` by repeated squaring, wrapping; negative exponents give 0 unless |a| = 1.
fn int_pow(a: i64, b: i64) -> i64 {
    if b < 0 {
        return match a {
            1 => 1,
            -1 => {
                if b % 2 == 0 {
                    1
                } else {
                    -1
                }
            }
            _ => 0,
        };
    }
    let (mut base, mut exp, mut acc) = (a, b as u64, 1i64);
    while exp > 0 {
        if exp & 1 == 1 {
            acc = acc.wrapping_mul(base);
        }
        base = base.wrapping_mul(base);
        exp >>= 1;
    }
    acc
}

fn binary_int(op: BinaryOp, a: i64, b: i64) -> i64 {
    match op {
        BinaryOp::Add => a.wrapping_add(b),
        BinaryOp::Sub => a.wrapping_sub(b),
        BinaryOp::Mul => a.wrapping_mul(b),
        // XLA: x / 0 has all bits set, x % 0 = x, MIN / -1 = MIN, MIN % -1 = 0.
        BinaryOp::Div if b == 0 => -1,
        BinaryOp::Div => a.wrapping_div(b),
        BinaryOp::Rem if b == 0 => a,
        BinaryOp::Rem => a.wrapping_rem(b),
        BinaryOp::Pow => int_pow(a, b),
        BinaryOp::Max => a.max(b),
        BinaryOp::Min => a.min(b),
        BinaryOp::And => a & b,
        BinaryOp::Or => a | b,
        BinaryOp::Xor => a ^ b,
    }
}

/// `f(a[i], b[i])`; both have the same length (the type rules guarantee it).
fn zip_with<T: Copy, U>(a: &[T], b: &[T], f: impl Fn(T, T) -> U) -> Vec<U> {
    a.iter().zip(b).map(|(&x, &y)| f(x, y)).collect()
}

pub(super) fn binary(op: BinaryOp, a: &Elements, b: &Elements) -> Elements {
    let d = a.dtype();
    match (a, b) {
        (Elements::Bool(x), Elements::Bool(y)) => Elements::Bool(zip_with(x, y, |p, q| match op {
            BinaryOp::And | BinaryOp::Min | BinaryOp::Mul => p & q,
            BinaryOp::Or | BinaryOp::Max | BinaryOp::Add => p | q,
            _ => p ^ q,
        })),
        _ if d.is_float() => zip_floats(a, b, |x, y| binary_float(op, x, y)),
        _ => from_ints(zip_with(&ints(a), &ints(b), |x, y| binary_int(op, x, y)), d),
    }
}

fn ordering<T: PartialOrd>(c: CompareOp, a: T, b: T) -> bool {
    match c {
        CompareOp::Eq => a == b,
        CompareOp::Ne => a != b,
        CompareOp::Lt => a < b,
        CompareOp::Le => a <= b,
        CompareOp::Gt => a > b,
        CompareOp::Ge => a >= b,
    }
}

pub(super) fn compare(c: CompareOp, a: &Elements, b: &Elements) -> Elements {
    let d = a.dtype();
    Elements::Bool(match (a, b) {
        (Elements::Bool(x), Elements::Bool(y)) => zip_with(x, y, |p, q| ordering(c, p, q)),
        _ if d.is_float() => zip_with(&floats(a), &floats(b), |x, y| ordering(c, x, y)),
        _ => zip_with(&ints(a), &ints(b), |x, y| ordering(c, x, y)),
    })
}

/// `pred[i] ? a[i] : b[i]`, with a one-element `pred` applying everywhere.
fn pick<T: Copy>(pred: &[bool], a: &[T], b: &[T]) -> Vec<T> {
    (0..a.len())
        .map(|i| if pred[i % pred.len()] { a[i] } else { b[i] })
        .collect()
}

pub(super) fn select(pred: &Elements, a: &Elements, b: &Elements) -> Elements {
    let Elements::Bool(p) = pred else {
        return a.clone();
    };
    match (a, b) {
        (Elements::F32(x), Elements::F32(y)) => Elements::F32(pick(p, x, y)),
        (Elements::F64(x), Elements::F64(y)) => Elements::F64(pick(p, x, y)),
        (Elements::F16(x), Elements::F16(y)) => Elements::F16(pick(p, x, y)),
        (Elements::BF16(x), Elements::BF16(y)) => Elements::BF16(pick(p, x, y)),
        (Elements::I32(x), Elements::I32(y)) => Elements::I32(pick(p, x, y)),
        (Elements::I64(x), Elements::I64(y)) => Elements::I64(pick(p, x, y)),
        (Elements::U8(x), Elements::U8(y)) => Elements::U8(pick(p, x, y)),
        (Elements::Bool(x), Elements::Bool(y)) => Elements::Bool(pick(p, x, y)),
        _ => a.clone(),
    }
}

/// `min(max(x, lo), hi)`; `lo`/`hi` have one element or as many as `x`.
pub(super) fn clamp(lo: &Elements, x: &Elements, hi: &Elements) -> Elements {
    let d = x.dtype();
    if d.is_float() {
        let (l, v, h) = (floats(lo), floats(x), floats(hi));
        let out = (0..v.len())
            .map(|i| fmin(fmax(v[i], l[i % l.len()]), h[i % h.len()]))
            .collect();
        from_floats(out, d)
    } else {
        let (l, v, h) = (ints(lo), ints(x), ints(hi));
        let out = (0..v.len())
            .map(|i| v[i].max(l[i % l.len()]).min(h[i % h.len()]))
            .collect();
        from_ints(out, d)
    }
}

pub(super) fn convert(x: &Elements, to: DType) -> Elements {
    let from = x.dtype();
    if from == to {
        return x.clone();
    }
    if let Elements::Bool(v) = x {
        return convert(&Elements::U8(v.iter().map(|&b| b as u8).collect()), to);
    }
    match to {
        DType::Bool if from.is_float() => {
            Elements::Bool(floats(x).iter().map(|&v| v != 0.0).collect())
        }
        DType::Bool => Elements::Bool(ints(x).iter().map(|&v| v != 0).collect()),
        // Directly from i64, so that large integers round once.
        DType::F32 if from.is_int() => Elements::F32(ints(x).iter().map(|&v| v as f32).collect()),
        _ if to.is_float() && from.is_float() => from_floats(floats(x), to),
        _ if to.is_float() => from_floats(ints(x).iter().map(|&v| v as f64).collect(), to),
        // Float to integer truncates toward zero, saturates and maps NaN to 0: Rust's `as`.
        DType::I32 if from.is_float() => {
            Elements::I32(floats(x).iter().map(|&v| v as i32).collect())
        }
        DType::U8 if from.is_float() => Elements::U8(floats(x).iter().map(|&v| v as u8).collect()),
        _ if from.is_float() => Elements::I64(floats(x).iter().map(|&v| v as i64).collect()),
        // Integer to integer wraps.
        _ => from_ints(ints(x), to),
    }
}

//! The values instructions compute: bits of each PTX type, integer and float arithmetic,
//! conversions with their rounding modes (float to integer saturating, NaN to 0), and
//! compares, ordered and unordered.
//!
//! A type, rounding mode or compare the renderer never emits panics, naming it.
#![allow(
    clippy::panic,
    reason = "an instruction the emulator does not know is refused by name (see the crate docs)"
)]

use half::{bf16, f16};

/// The bytes of a value of type `ty` (a predicate's: 1).
pub(crate) fn width(ty: &str) -> usize {
    match ty {
        "pred" => 1,
        "u8" | "s8" | "b8" => 1,
        "u16" | "s16" | "b16" | "f16" | "bf16" => 2,
        "u32" | "s32" | "b32" | "f32" => 4,
        "u64" | "s64" | "b64" | "f64" => 8,
        other => panic!("type {other}"),
    }
}

/// The bits of a value of type `ty`, within the 64 of a register.
pub(crate) fn mask(ty: &str) -> u64 {
    match width(ty) {
        8 => u64::MAX,
        w => (1u64 << (8 * w)) - 1,
    }
}

pub(crate) fn f32_of(b: u64) -> f32 {
    f32::from_bits(b as u32)
}

pub(crate) fn f64_of(b: u64) -> f64 {
    f64::from_bits(b)
}

pub(crate) fn of_f32(x: f32) -> u64 {
    u64::from(x.to_bits())
}

/// The value of bits `b` of type `ty` as f64 (exact for every type used here but u64/s64 beyond
/// 2^53).
pub(crate) fn to_f64(b: u64, ty: &str) -> f64 {
    match ty {
        "f32" => f64::from(f32_of(b)),
        "f64" => f64_of(b),
        "f16" => f16::from_bits(b as u16).to_f64(),
        "bf16" => bf16::from_bits(b as u16).to_f64(),
        "s32" => f64::from(b as u32 as i32),
        "u32" => f64::from(b as u32),
        "s64" => b as i64 as f64,
        "u64" => b as f64,
        "s16" => f64::from(b as u16 as i16),
        "u16" => f64::from(b as u16),
        "u8" => f64::from(b as u8),
        other => panic!("value of {other}"),
    }
}

/// Bits `b` of integer type `ty`, sign-extended.
pub(crate) fn signed(b: u64, ty: &str) -> i64 {
    match width(ty) {
        2 => i64::from(b as u16 as i16),
        4 => i64::from(b as u32 as i32),
        _ => b as i64,
    }
}

pub(crate) fn float_binary(
    ty: &str,
    a: u64,
    b: u64,
    f32op: fn(f32, f32) -> f32,
    f64op: fn(f64, f64) -> f64,
) -> u64 {
    match ty {
        "f32" => of_f32(f32op(f32_of(a), f32_of(b))),
        "f64" => f64op(f64_of(a), f64_of(b)).to_bits(),
        other => panic!("float op on {other}"),
    }
}

/// `x` rounded to an integer value by PTX rounding modifier `mode`.
pub(crate) fn round_mode(x: f64, mode: &str) -> f64 {
    match mode {
        "rzi" | "rz" => x.trunc(),
        "rni" | "rn" => x.round_ties_even(),
        "rmi" | "rm" => x.floor(),
        "rpi" | "rp" => x.ceil(),
        other => panic!("rounding {other}"),
    }
}

/// The f16 nearest `x`, ties to even, as `cvt.rn.f16.f64` rounds (the `half` crate drops the
/// low 32 bits of an f64 first, so a value just past a tie rounds as the tie). Its neighbours
/// are compared by their exact distances to `x`, infinity counting as 2^16, where rounding
/// overflows.
fn f16_nearest(x: f64) -> f16 {
    let guess = f16::from_f64(x);
    if !x.is_finite() {
        return guess;
    }
    let value = |h: f16| {
        if h.is_infinite() {
            65536f64.copysign(h.to_f64())
        } else {
            h.to_f64()
        }
    };
    let b = guess.to_bits();
    [b.wrapping_sub(1), b, b.wrapping_add(1)]
        .into_iter()
        .map(f16::from_bits)
        .filter(|h| {
            !h.is_nan() && (h.to_f64() == 0.0 || h.is_sign_negative() == guess.is_sign_negative())
        })
        .min_by(|p, q| {
            let (dp, dq) = ((x - value(*p)).abs(), (x - value(*q)).abs());
            dp.total_cmp(&dq)
                .then((p.to_bits() & 1).cmp(&(q.to_bits() & 1)))
        })
        .unwrap_or(guess)
}

/// The f32 next to nonzero `r` toward zero (`f32::MAX` from infinity).
fn toward_zero(r: f32) -> f32 {
    f32::from_bits(r.to_bits() - 1)
}

/// Bits `b` of type `from` converted to type `to` as `cvt[.mode].to.from` does.
pub(crate) fn convert(b: u64, to: &str, from: &str, mode: Option<&str>) -> u64 {
    let float = |t: &str| matches!(t, "f16" | "bf16" | "f32" | "f64");
    match (to, from) {
        (t, f) if t == f && float(t) => {
            let x = to_f64(b, f);
            let r = mode.map_or(x, |m| round_mode(x, m));
            match t {
                "f32" => of_f32(r as f32),
                "f64" => r.to_bits(),
                other => panic!("round {other}"),
            }
        }
        ("f32", "f64") => {
            let x = f64_of(b);
            let r = x as f32;
            // Toward zero: one step back where rounding to nearest went past `x`.
            match mode {
                Some("rz") if f64::from(r).abs() > x.abs() => of_f32(toward_zero(r)),
                _ => of_f32(r),
            }
        }
        ("f64", "f32") => f64::from(f32_of(b)).to_bits(),
        ("f16", "f32") => u64::from(f16::from_f32(f32_of(b)).to_bits()),
        ("f16", "f64") => u64::from(f16_nearest(f64_of(b)).to_bits()),
        ("bf16", "f32") => u64::from(bf16::from_f32(f32_of(b)).to_bits()),
        ("f32", "f16") => of_f32(f16::from_bits(b as u16).to_f32()),
        ("f32", "bf16") => of_f32(bf16::from_bits(b as u16).to_f32()),
        (t, f) if float(t) => {
            // From an integer, rounded to nearest even (as `as` does from i64 and u64).
            let negative = f.starts_with('s') && signed(b, f) < 0;
            if let ("f32", Some("rz")) = (t, mode) {
                let v = if negative {
                    i128::from(signed(b, f))
                } else {
                    i128::from(b & mask(f))
                };
                let r = v as f32;
                let past = (r as i128).abs() > v.abs();
                return of_f32(if past { toward_zero(r) } else { r });
            }
            match (t, negative) {
                ("f32", true) => of_f32(signed(b, f) as f32),
                ("f32", false) => of_f32((b & mask(f)) as f32),
                ("f64", true) => (signed(b, f) as f64).to_bits(),
                ("f64", false) => ((b & mask(f)) as f64).to_bits(),
                (other, _) => panic!("convert to {other}"),
            }
        }
        (t, f) if float(f) => {
            // To an integer: round by the mode, saturate, NaN to 0.
            let x = round_mode(to_f64(b, f), mode.unwrap_or("rzi"));
            let v: i128 = if x.is_nan() { 0 } else { x as i128 };
            let (lo, hi): (i128, i128) = match t {
                "s32" => (i128::from(i32::MIN), i128::from(i32::MAX)),
                "u32" => (0, i128::from(u32::MAX)),
                "s64" => (i128::from(i64::MIN), i128::from(i64::MAX)),
                "u64" => (0, i128::from(u64::MAX)),
                "u8" => (0, i128::from(u8::MAX)),
                other => panic!("convert to {other}"),
            };
            (v.clamp(lo, hi) as i64 as u64) & mask(t)
        }
        (t, f) => {
            // Integer to integer: sign- or zero-extend, or truncate.
            let v = if f.starts_with('s') {
                signed(b, f) as u64
            } else {
                b & mask(f)
            };
            v & mask(t)
        }
    }
}

/// Whether `setp.cmp.ty` holds of bits `a` and `b`.
pub(crate) fn compare(cmp: &str, ty: &str, a: u64, b: u64) -> bool {
    let float = matches!(ty, "f32" | "f64");
    if float {
        let (x, y) = (to_f64(a, ty), to_f64(b, ty));
        let unordered = x.is_nan() || y.is_nan();
        return match cmp {
            "eq" => !unordered && x == y,
            "ne" => !unordered && x != y,
            "lt" => !unordered && x < y,
            "le" => !unordered && x <= y,
            "gt" => !unordered && x > y,
            "ge" => !unordered && x >= y,
            "equ" => unordered || x == y,
            "neu" => unordered || x != y,
            "ltu" => unordered || x < y,
            "leu" => unordered || x <= y,
            "gtu" => unordered || x > y,
            "geu" => unordered || x >= y,
            "nan" => unordered,
            "num" => !unordered,
            other => panic!("compare {other}"),
        };
    }
    let (x, y): (i128, i128) = if ty.starts_with('s') {
        (i128::from(signed(a, ty)), i128::from(signed(b, ty)))
    } else {
        (i128::from(a & mask(ty)), i128::from(b & mask(ty)))
    };
    match cmp {
        "eq" => x == y,
        "ne" => x != y,
        "lt" | "lo" => x < y,
        "le" | "ls" => x <= y,
        "gt" | "hi" => x > y,
        "ge" | "hs" => x >= y,
        other => panic!("compare {other}"),
    }
}

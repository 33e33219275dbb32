//! f16 and bf16 in kernels: stored as such, computed in f32.
//!
//! [`widen`] rewrites a kernel so that loads widen to f32, every operation runs in f32 and
//! rounds its result to the half type, and stores narrow. Each operation so rounds once to the
//! half type, as in the interpreter (f32 holds the exact sum, product or quotient of two
//! halves closely enough for one rounding; transcendentals may differ in rare near-ties).
//!
//! The PTX renderer converts with `cvt`. Cranelift has no vector conversions for these types, so
//! for the CPU [`expand_conversions`] spells each one out in integer and f32 arithmetic, bit for
//! bit what the `half` crate (and so the interpreter) computes, NaN payloads included; a half
//! buffer's loads and stores there move the raw 16 bits in i32 lanes.

use super::math::Emit;
use super::{rewrite, KOp, Kernel};
use ferrax_ir::{BinaryOp, CompareOp, DType, Scalar, UnaryOp};

pub fn is_half(d: DType) -> bool {
    matches!(d, DType::F16 | DType::BF16)
}

/// `kernel` computing in f32 where it computes f16 or bf16 values: a half load is followed by
/// its conversion to f32, a half store preceded by the rounding to the half type, and every
/// other half-typed instruction runs in f32 followed by that rounding and the conversion back.
pub fn widen(kernel: &Kernel) -> Kernel {
    if !kernel.body.iter().any(|i| is_half(i.dtype)) {
        return kernel.clone();
    }
    rewrite(kernel, |e, _, ins, args| {
        let d = ins.dtype;
        match &ins.op {
            _ if !is_half(d) => e.op(ins.op.clone(), &args, d),
            KOp::Load(_) => {
                let raw = e.op(ins.op.clone(), &args, d);
                e.convert(raw, DType::F32)
            }
            KOp::Store(_) => {
                let narrow = e.convert(args[0], d);
                e.op(ins.op.clone(), &[narrow], d)
            }
            KOp::Const(c) => {
                let x = match c {
                    Scalar::F16(x) => x.to_f32(),
                    Scalar::BF16(x) => x.to_f32(),
                    _ => f32::NAN,
                };
                e.op(KOp::Const(Scalar::F32(x)), &[], DType::F32)
            }
            op => {
                // A conversion to the half type is just its rounding.
                let wide = match op {
                    KOp::Convert(_) => args[0],
                    op => e.op(op.clone(), &args, DType::F32),
                };
                let narrow = e.convert(wide, d);
                e.convert(narrow, DType::F32)
            }
        }
    })
}

/// A [`widen`]ed kernel with its conversions to and from f16 and bf16 done in integer and f32
/// arithmetic, and its half loads and stores typed i32 (the bits, zero-extended).
pub fn expand_conversions(kernel: &Kernel) -> Kernel {
    let halves = kernel.body.iter().any(|i| is_half(i.dtype))
        || kernel.sig.buffers.iter().any(|b| is_half(b.dtype));
    if !halves {
        return kernel.clone();
    }
    // The new instruction of each of `kernel`'s, by index.
    let mut emitted = Vec::with_capacity(kernel.body.len());
    rewrite(kernel, |e, _, ins, args| {
        let from = ins.args.first().map(|&a| kernel.body[a].dtype);
        let new = match (&ins.op, from) {
            (KOp::Load(_) | KOp::Store(_), _) if is_half(ins.dtype) => {
                e.op(ins.op.clone(), &args, DType::I32)
            }
            (KOp::Convert(DType::F32), Some(DType::BF16)) => {
                match bf16_rounding_of_f32(kernel, ins.args[0]) {
                    // f32 rounded to bf16 and back, in one step. The rounding to bf16 alone
                    // is left to Cranelift, which drops it where nothing else reads it.
                    Some(x) => round_through_bf16(e, emitted[x]),
                    None => to_f32(e, args[0], DType::BF16),
                }
            }
            (KOp::Convert(to), Some(from)) if is_half(from) => {
                let wide = to_f32(e, args[0], from);
                match to {
                    DType::F32 => wide,
                    to => e.convert(wide, *to),
                }
            }
            (KOp::Convert(to), Some(from)) if is_half(*to) => {
                let x = match from {
                    DType::F64 => round_to_odd(e, args[0]),
                    _ => args[0],
                };
                from_f32(e, x, *to)
            }
            (op, _) => e.op(op.clone(), &args, ins.dtype),
        };
        emitted.push(new);
        new
    })
}

/// The f32 value that instruction `i` of `kernel` rounds to bf16, if it is such a rounding.
fn bf16_rounding_of_f32(kernel: &Kernel, i: usize) -> Option<usize> {
    let ins = kernel.body.get(i)?;
    let &x = ins.args.first()?;
    let from = kernel.body.get(x)?.dtype;
    (ins.op == KOp::Convert(DType::BF16) && from == DType::F32).then_some(x)
}

/// f32 `x` rounded to the nearest bf16 value (ties to even) and widened back to f32, as
/// [`from_f32`] then [`to_f32`] compute it: the low 16 bits rounded away, a NaN quieted.
fn round_through_bf16(e: &mut Emit, x: usize) -> usize {
    let bits = e.bitcast(x, DType::I32);
    let chosen = bf16_rounding_bits(e, x, bits);
    // 0xffff_0000: the top 16 bits, those bf16 keeps.
    let rounded = int_op(e, BinaryOp::And, chosen, -0x1_0000);
    e.bitcast(rounded, DType::F32)
}

/// The bits of f32 `x` (`bits`, as an i32) with the low 16 bits' rounding carried into the top
/// 16: just under half of the last kept bit added, plus that bit (so that ties go to even); a
/// NaN (the one value unequal to itself) quieted instead. Only the top 16 bits are the result.
fn bf16_rounding_bits(e: &mut Emit, x: usize, bits: usize) -> usize {
    let nan = e.cmp(CompareOp::Ne, x, x);
    let high = shr(e, bits, 16);
    let odd = int_op(e, BinaryOp::And, high, 1);
    let biased = int_op(e, BinaryOp::Add, bits, 0x7fff);
    let biased = e.bin(BinaryOp::Add, biased, odd, DType::I32);
    let quiet = int_op(e, BinaryOp::Or, bits, 0x40_0000);
    int_select(e, nan, quiet, biased)
}

fn int_c(e: &mut Emit, v: i64) -> usize {
    e.ci(v, DType::I32)
}

fn shl(e: &mut Emit, x: usize, n: u32) -> usize {
    e.op(KOp::ShiftLeft(n), &[x], DType::I32)
}

fn shr(e: &mut Emit, x: usize, n: u32) -> usize {
    e.op(KOp::ShiftRight(n), &[x], DType::I32)
}

fn int_op(e: &mut Emit, op: BinaryOp, x: usize, v: i64) -> usize {
    let k = int_c(e, v);
    e.bin(op, x, k, DType::I32)
}

fn int_cmp(e: &mut Emit, c: CompareOp, x: usize, v: i64) -> usize {
    let k = int_c(e, v);
    e.cmp(c, x, k)
}

fn int_select(e: &mut Emit, p: usize, x: usize, y: usize) -> usize {
    e.select(p, x, y, DType::I32)
}

/// The f32 value of half bits `h` (an i32 holding them), exactly.
fn to_f32(e: &mut Emit, h: usize, from: DType) -> usize {
    if from == DType::BF16 {
        // The upper half of an f32; a NaN is quieted.
        let magnitude = int_op(e, BinaryOp::And, h, 0x7fff);
        let nan = int_cmp(e, CompareOp::Gt, magnitude, 0x7f80);
        let quiet = int_op(e, BinaryOp::Or, h, 0x40);
        let h = int_select(e, nan, quiet, h);
        let bits = shl(e, h, 16);
        return e.bitcast(bits, DType::F32);
    }
    let magnitude = int_op(e, BinaryOp::And, h, 0x7fff);
    let sign = int_op(e, BinaryOp::And, h, 0x8000);
    let sign = shl(e, sign, 16);
    let shifted = shl(e, magnitude, 13);
    // Finite values, subnormals included: the shifted bits read as an f32 are 2^112 too small.
    let small = e.bitcast(shifted, DType::F32);
    let scale = e.c(2f64.powi(112), DType::F32);
    let finite = e.mul(small, scale, DType::F32);
    let finite = e.bitcast(finite, DType::I32);
    // Infinities, and NaNs quieted with their payload.
    let nan = int_cmp(e, CompareOp::Gt, magnitude, 0x7c00);
    let quiet = int_c(e, 0x7fc0_0000);
    let infinite = int_c(e, 0x7f80_0000);
    let top = int_select(e, nan, quiet, infinite);
    let special_bits = e.bin(BinaryOp::Or, shifted, top, DType::I32);
    let special = int_cmp(e, CompareOp::Ge, magnitude, 0x7c00);
    let bits = int_select(e, special, special_bits, finite);
    let bits = e.bin(BinaryOp::Or, bits, sign, DType::I32);
    e.bitcast(bits, DType::F32)
}

/// The bits (in an i32) of f32 `x` rounded to the nearest `to` value, ties to even.
fn from_f32(e: &mut Emit, x: usize, to: DType) -> usize {
    let bits = e.bitcast(x, DType::I32);
    if to == DType::BF16 {
        let chosen = bf16_rounding_bits(e, x, bits);
        let rounded = shr(e, chosen, 16);
        return int_op(e, BinaryOp::And, rounded, 0xffff);
    }
    let magnitude = int_op(e, BinaryOp::And, bits, 0x7fff_ffff);
    let nan = int_cmp(e, CompareOp::Gt, magnitude, 0x7f80_0000);
    let high = shr(e, bits, 16);
    let sign = int_op(e, BinaryOp::And, high, 0x8000);
    // Normal results: the exponent rebiased from 127 to 15, then 13 bits rounded away as above.
    let kept = shr(e, magnitude, 13);
    let odd = int_op(e, BinaryOp::And, kept, 1);
    let rebiased = int_op(e, BinaryOp::Add, magnitude, 0xfff - (112 << 23));
    let rebiased = e.bin(BinaryOp::Add, rebiased, odd, DType::I32);
    let normal = shr(e, rebiased, 13);
    // Below 2^-14 the result is subnormal: adding 0.5, whose last bit is worth 2^-24 (f16's
    // least subnormal), has the f32 adder round to it, and leaves the f16 bits at the bottom.
    let absolute = e.bitcast(magnitude, DType::F32);
    let half = e.c(0.5, DType::F32);
    let aligned = e.add(absolute, half, DType::F32);
    let aligned = e.bitcast(aligned, DType::I32);
    let subnormal = int_op(e, BinaryOp::Sub, aligned, 0x3f00_0000);
    let tiny = int_cmp(e, CompareOp::Lt, magnitude, 0x3880_0000);
    let finite = int_select(e, tiny, subnormal, normal);
    // From 65520 up (65504 and the tie above it round up) the result is infinite; a NaN is
    // quieted and keeps the top of its payload.
    let payload = int_op(e, BinaryOp::And, kept, 0x3ff);
    let quiet = int_op(e, BinaryOp::Or, payload, 0x7e00);
    let infinite = int_c(e, 0x7c00);
    let special = int_select(e, nan, quiet, infinite);
    let overflow = int_cmp(e, CompareOp::Ge, magnitude, 0x477f_f000);
    let unsigned = int_select(e, overflow, special, finite);
    e.bin(BinaryOp::Or, unsigned, sign, DType::I32)
}

/// f64 `x` as an f32 rounded to odd (truncated, with the last bit set when inexact): rounding
/// that to a half type is rounding `x` directly, with no double rounding.
fn round_to_odd(e: &mut Emit, x: usize) -> usize {
    let nearest = e.convert(x, DType::F32);
    let back = e.convert(nearest, DType::F64);
    let (back_abs, x_abs) = (
        e.un(UnaryOp::Abs, back, DType::F64),
        e.un(UnaryOp::Abs, x, DType::F64),
    );
    // Ordered compares: a NaN is exact.
    let over = e.cmp(CompareOp::Gt, back_abs, x_abs);
    let under = e.cmp(CompareOp::Lt, back_abs, x_abs);
    let inexact = e.bin(BinaryOp::Or, over, under, DType::Bool);
    let (one, zero) = (int_c(e, 1), int_c(e, 0));
    let down = int_select(e, over, one, zero);
    let odd = int_select(e, inexact, one, zero);
    let bits = e.bitcast(nearest, DType::I32);
    let truncated = e.sub(bits, down, DType::I32);
    let bits = e.bin(BinaryOp::Or, truncated, odd, DType::I32);
    e.bitcast(bits, DType::F32)
}

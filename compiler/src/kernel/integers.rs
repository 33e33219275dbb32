//! Unsigned integers and shifts in terms both backends' instruction selection has: a u32
//! kernel value is an i32 lane, so a compare, maximum, minimum or clamp of u32 values is the
//! signed one of the values with their top bit flipped (`x ^ 2^31`, read as i32), and a shift
//! by a constant amount (the rotations of threefry) is the kernel IR's constant shift, lax's
//! rule for amounts of the width or more applied here (0, or all sign bits). Shifts by amounts
//! known only at run time stay as they are; each backend selects their lax results itself.

use super::math::Emit;
use super::{rewrite, KInstr, KOp, Kernel};
use ferrax_ir::{BinaryOp, CompareOp, DType, Scalar};

/// Whether `ins` of `kernel` is rewritten here.
fn lowered(kernel: &Kernel, ins: &KInstr) -> bool {
    let operand = ins.args.first().map(|&a| kernel.body[a].dtype);
    match &ins.op {
        KOp::Compare(_) => operand == Some(DType::U32),
        KOp::Binary(BinaryOp::Max | BinaryOp::Min) | KOp::Clamp => ins.dtype == DType::U32,
        KOp::Binary(b) if b.is_shift() => constant_amount(kernel, ins).is_some(),
        KOp::Binary(_)
        | KOp::Load(_)
        | KOp::Const(_)
        | KOp::Unary(_)
        | KOp::Select
        | KOp::Convert(_)
        | KOp::Fma
        | KOp::Bitcast
        | KOp::ShiftLeft(_)
        | KOp::ShiftRight(_)
        | KOp::ShiftRightLogical(_)
        | KOp::Index { .. }
        | KOp::Store(_)
        | KOp::Reduce(_)
        | KOp::Accumulate(_)
        | KOp::Beyond(_) => false,
    }
}

/// The amount of a shift whose amount is a constant, read as unsigned (a negative i32 is
/// huge, as in lax).
fn constant_amount(kernel: &Kernel, ins: &KInstr) -> Option<u64> {
    match kernel.body.get(*ins.args.get(1)?)?.op {
        KOp::Const(Scalar::I32(n)) => Some(u64::from(n as u32)),
        KOp::Const(Scalar::U32(n)) => Some(u64::from(n)),
        KOp::Const(Scalar::I64(n)) => Some(n as u64),
        _ => None,
    }
}

/// `kernel` with its u32 orderings and constant shifts rewritten (unchanged if it has none).
pub(super) fn lower(kernel: Kernel) -> Kernel {
    if !kernel.body.iter().any(|ins| lowered(&kernel, ins)) {
        return kernel;
    }
    rewrite(&kernel, |e, _, ins, args| {
        if !lowered(&kernel, ins) {
            return e.op(ins.op.clone(), &args, ins.dtype);
        }
        match &ins.op {
            KOp::Compare(c) => signed_compare(e, *c, args[0], args[1]),
            KOp::Binary(BinaryOp::Max) => larger(e, args[0], args[1], true),
            KOp::Binary(BinaryOp::Min) => larger(e, args[0], args[1], false),
            // (lo, x, hi): min(max(x, lo), hi), as the interpreter's clamp.
            KOp::Clamp => {
                let low = larger(e, args[1], args[0], true);
                larger(e, low, args[2], false)
            }
            KOp::Binary(b) => match constant_amount(&kernel, ins) {
                Some(n) => constant_shift(e, *b, &args, n, ins.dtype),
                None => e.op(ins.op.clone(), &args, ins.dtype),
            },
            _ => e.op(ins.op.clone(), &args, ins.dtype),
        }
    })
}

/// `x` as an i32 ordered as the u32 `x` is: its top bit flipped.
fn biased(e: &mut Emit, x: usize) -> usize {
    let top = e.op(KOp::Const(Scalar::U32(1 << 31)), &[], DType::U32);
    let flipped = e.op(KOp::Binary(BinaryOp::Xor), &[x, top], DType::U32);
    e.op(KOp::Bitcast, &[flipped], DType::I32)
}

/// The unsigned compare `a c b`.
fn signed_compare(e: &mut Emit, c: CompareOp, a: usize, b: usize) -> usize {
    let (a, b) = (biased(e, a), biased(e, b));
    e.op(KOp::Compare(c), &[a, b], DType::Bool)
}

/// The larger (or, `max` false, the smaller) of the u32 values `a` and `b`.
fn larger(e: &mut Emit, a: usize, b: usize, max: bool) -> usize {
    let c = if max { CompareOp::Gt } else { CompareOp::Lt };
    let pick_a = signed_compare(e, c, a, b);
    e.op(KOp::Select, &[pick_a, a, b], DType::U32)
}

/// `x` shifted by the constant `n`, lax's result for amounts of the width or more.
fn constant_shift(e: &mut Emit, op: BinaryOp, args: &[usize], n: u64, dtype: DType) -> usize {
    let x = args[0];
    let width = 8 * dtype.size_bytes() as u64;
    let zero = |e: &mut Emit| e.op(KOp::Const(Scalar::zero(dtype)), &[], dtype);
    let n32 = n.min(width - 1) as u32;
    match op {
        BinaryOp::ShiftLeft if n >= width => zero(e),
        BinaryOp::ShiftRightLogical if n >= width => zero(e),
        BinaryOp::ShiftLeft => e.op(KOp::ShiftLeft(n32), &[x], dtype),
        BinaryOp::ShiftRightArithmetic => e.op(KOp::ShiftRight(n32), &[x], dtype),
        BinaryOp::ShiftRightLogical if n == 0 => x,
        BinaryOp::ShiftRightLogical if width == 32 => {
            e.op(KOp::ShiftRightLogical(n32), &[x], dtype)
        }
        // 64 bits: the sign-filling shift with the filled bits masked off (the halves that
        // vector kernels hold i64 values in have that shift).
        BinaryOp::ShiftRightLogical => {
            let shifted = e.op(KOp::ShiftRight(n32), &[x], dtype);
            let mask = Scalar::I64(((1u64 << (width - n)) - 1) as i64);
            let mask = e.op(KOp::Const(mask), &[], dtype);
            e.op(KOp::Binary(BinaryOp::And), &[shifted, mask], dtype)
        }
        other => e.op(KOp::Binary(other), args, dtype),
    }
}

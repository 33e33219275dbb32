//! Instruction selection: the Cranelift instructions of one kernel instruction (other than a
//! buffer access), on scalars or on vectors of LANES lanes, with f64 and i64 values of vector
//! kernels as two halves. Flat and row kernels share it, so that a kernel's scalar tail
//! computes exactly what its vectors do.

use super::host::HostFuncs;
use super::CodegenError;
use crate::kernel::{KInstr, KOp};
use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{types, Endianness, InstBuilder, MemFlagsData, Opcode, Type, Value};
use cranelift_frontend::FunctionBuilder;
use ferrax_ir::{BinaryOp, CompareOp, DType, Scalar, UnaryOp};

/// The clif type of scalar kernel values of `d` (bools are bytes).
pub(super) fn clif_type(d: DType) -> Option<Type> {
    match d {
        DType::F32 => Some(types::F32),
        DType::F64 => Some(types::F64),
        DType::Bool => Some(types::I8),
        DType::I32 | DType::U32 => Some(types::I32),
        DType::I64 => Some(types::I64),
        _ => None,
    }
}

/// The clif type of kernel values of `d`: scalar, or a 4-lane vector (bools become lane masks).
pub(super) fn value_type(d: DType, vector: bool) -> Option<Type> {
    if !vector {
        return clif_type(d);
    }
    match d {
        DType::F32 => Some(types::F32X4),
        DType::I32 | DType::U32 | DType::Bool => Some(types::I32X4),
        DType::F64 => Some(types::F64X2),
        DType::I64 => Some(types::I64X2),
        _ => None,
    }
}

/// Flags of a bitcast between vector types.
pub(super) fn lanes() -> MemFlagsData {
    MemFlagsData::new().with_endianness(Endianness::Little)
}

/// A kernel value in generated code: one clif value, or in a vector kernel an f64 value, as the
/// two f64x2 halves of its LANES lanes.
#[derive(Clone, Copy)]
pub(super) enum Val {
    One(Value),
    Halves(Value, Value),
}

impl Val {
    /// The value of a 32-bit (or scalar) kernel value; `vector::wide_op` keeps halves out of
    /// ops that take these.
    pub(super) fn one(self) -> Value {
        match self {
            Val::One(v) | Val::Halves(v, _) => v,
        }
    }
}

/// One instruction other than a load or store, on argument values `args` (scalars, or vectors
/// of LANES elements).
pub(super) fn emit_op(
    b: &mut FunctionBuilder,
    ins: &KInstr,
    args: &[Value],
    vector: bool,
    funcs: &HostFuncs,
    unsupported: &dyn Fn(String) -> CodegenError,
) -> Result<Value, CodegenError> {
    let ty =
        value_type(ins.dtype, vector).ok_or_else(|| unsupported(format!("dtype {}", ins.dtype)))?;
    let arg = |k: usize| args[k];
    let int = ty.lane_type().is_int();
    let v = match &ins.op {
        KOp::Const(s) => constant(b, *s, ty, vector, unsupported)?,
        KOp::Unary(UnaryOp::Not) if ins.dtype == DType::Bool => {
            if vector {
                b.ins().bnot(arg(0))
            } else {
                let one = b.ins().iconst(types::I8, 1);
                b.ins().bxor(arg(0), one)
            }
        }
        KOp::Binary(op) if int && op.is_shift() && !vector => shift(b, *op, arg(0), arg(1)),
        KOp::Binary(op) if int => integer_binary(b, *op, arg(0), arg(1), unsupported)?,
        KOp::Compare(c) if b.func.dfg.value_type(arg(0)).lane_type().is_int() => {
            b.ins().icmp(integer_cc(*c), arg(0), arg(1))
        }
        KOp::Fma => b.ins().fma(arg(0), arg(1), arg(2)),
        // Between the 32-bit integer types: the same clif type.
        KOp::Bitcast if b.func.dfg.value_type(arg(0)) == ty => arg(0),
        KOp::Bitcast if vector => b.ins().bitcast(ty, lanes(), arg(0)),
        KOp::Bitcast => b.ins().bitcast(ty, MemFlagsData::new(), arg(0)),
        KOp::ShiftLeft(n) => b.ins().ishl_imm_u(arg(0), i64::from(*n)),
        KOp::ShiftRight(n) => b.ins().sshr_imm_u(arg(0), i64::from(*n)),
        KOp::ShiftRightLogical(n) => b.ins().ushr_imm_u(arg(0), i64::from(*n)),
        KOp::Unary(u) if int => match u {
            UnaryOp::Neg => b.ins().ineg(arg(0)),
            UnaryOp::Not => b.ins().bnot(arg(0)),
            other => return Err(unsupported(format!("integer {}", other.name()))),
        },
        KOp::Unary(u) => float_unary(b, *u, arg(0), vector, funcs, unsupported)?,
        KOp::Binary(op) => {
            let (x, y) = (arg(0), arg(1));
            match op {
                BinaryOp::Add => b.ins().fadd(x, y),
                BinaryOp::Sub => b.ins().fsub(x, y),
                BinaryOp::Mul => b.ins().fmul(x, y),
                BinaryOp::Div => b.ins().fdiv(x, y),
                BinaryOp::Max => b.ins().fmax(x, y),
                BinaryOp::Min => b.ins().fmin(x, y),
                BinaryOp::Rem | BinaryOp::Pow if vector => {
                    return Err(unsupported(format!("vector {}", op.name())))
                }
                BinaryOp::Rem => funcs.rem(b, ty, x, y),
                BinaryOp::Pow => funcs.pow(b, ty, x, y),
                other => return Err(unsupported(other.name().into())),
            }
        }
        KOp::Compare(c) => b.ins().fcmp(float_cc(*c), arg(0), arg(1)),
        KOp::Select if vector => vector_select(b, ty, arg(0), arg(1), arg(2)),
        KOp::Select => b.ins().select(arg(0), arg(1), arg(2)),
        KOp::Clamp if int => {
            let low = b.ins().smax(arg(1), arg(0));
            b.ins().smin(low, arg(2))
        }
        KOp::Clamp => {
            let low = b.ins().fmax(arg(1), arg(0));
            b.ins().fmin(low, arg(2))
        }
        KOp::Convert(to) => convert(b, ty, arg(0), *to, unsupported)?,
        KOp::Beyond(u) if !vector => funcs.beyond(b, *u, arg(0), arg(1), ty),
        KOp::Load(_)
        | KOp::Store(_)
        | KOp::Reduce(_)
        | KOp::Beyond(_)
        | KOp::Accumulate(_)
        | KOp::Index { .. } => return Err(unsupported(format!("{:?} outside its stage", ins.op))),
    };
    Ok(v)
}

/// Constant `s` as a value of type `ty` (a splat in a vector kernel, where a bool is a mask).
fn constant(
    b: &mut FunctionBuilder,
    s: Scalar,
    ty: Type,
    vector: bool,
    unsupported: &dyn Fn(String) -> CodegenError,
) -> Result<Value, CodegenError> {
    let x = match (s, vector) {
        (Scalar::F32(x), _) => b.ins().f32const(x),
        (Scalar::F64(x), _) => b.ins().f64const(x),
        (Scalar::Bool(x), false) => b.ins().iconst(types::I8, i64::from(x)),
        (Scalar::Bool(x), true) => b.ins().iconst(types::I32, -i64::from(x)),
        (Scalar::I32(x), _) => b.ins().iconst(types::I32, i64::from(x)),
        (Scalar::U32(x), _) => b.ins().iconst(types::I32, i64::from(x as i32)),
        (Scalar::I64(x), _) => b.ins().iconst(types::I64, x),
        (other, _) => return Err(unsupported(format!("constant of {}", other.dtype()))),
    };
    Ok(if vector { b.ins().splat(ty, x) } else { x })
}

fn integer_binary(
    b: &mut FunctionBuilder,
    op: BinaryOp,
    x: Value,
    y: Value,
    unsupported: &dyn Fn(String) -> CodegenError,
) -> Result<Value, CodegenError> {
    Ok(match op {
        BinaryOp::Add => b.ins().iadd(x, y),
        BinaryOp::Sub => b.ins().isub(x, y),
        BinaryOp::Mul => b.ins().imul(x, y),
        BinaryOp::Max => b.ins().smax(x, y),
        BinaryOp::Min => b.ins().smin(x, y),
        BinaryOp::And => b.ins().band(x, y),
        BinaryOp::Or => b.ins().bor(x, y),
        BinaryOp::Xor => b.ins().bxor(x, y),
        other => return Err(unsupported(format!("integer {}", other.name()))),
    })
}

/// `x` shifted by `y` with lax's results for amounts of the width or more (read as unsigned):
/// Cranelift's shifts take the amount modulo the width, so a compare selects 0, and the
/// arithmetic shift's amount is clamped to fill every bit with the sign.
fn shift(b: &mut FunctionBuilder, op: BinaryOp, x: Value, y: Value) -> Value {
    let ty = b.func.dfg.value_type(x);
    let width = i64::from(ty.bits());
    if op == BinaryOp::ShiftRightArithmetic {
        let last = b.ins().iconst(ty, width - 1);
        let n = b.ins().umin(y, last);
        return b.ins().sshr(x, n);
    }
    let shifted = if op == BinaryOp::ShiftLeft {
        b.ins().ishl(x, y)
    } else {
        b.ins().ushr(x, y)
    };
    let zero = b.ins().iconst(ty, 0);
    let inside = b.ins().icmp_imm_u(IntCC::UnsignedLessThan, y, width);
    b.ins().select(inside, shifted, zero)
}

fn integer_cc(c: CompareOp) -> IntCC {
    match c {
        CompareOp::Eq => IntCC::Equal,
        CompareOp::Ne => IntCC::NotEqual,
        CompareOp::Lt => IntCC::SignedLessThan,
        CompareOp::Le => IntCC::SignedLessThanOrEqual,
        CompareOp::Gt => IntCC::SignedGreaterThan,
        CompareOp::Ge => IntCC::SignedGreaterThanOrEqual,
    }
}

fn float_cc(c: CompareOp) -> FloatCC {
    match c {
        CompareOp::Eq => FloatCC::Equal,
        CompareOp::Ne => FloatCC::NotEqual,
        CompareOp::Lt => FloatCC::LessThan,
        CompareOp::Le => FloatCC::LessThanOrEqual,
        CompareOp::Gt => FloatCC::GreaterThan,
        CompareOp::Ge => FloatCC::GreaterThanOrEqual,
    }
}

/// A float unary op: an instruction where one exists, else (on scalars) the host's function.
fn float_unary(
    b: &mut FunctionBuilder,
    u: UnaryOp,
    x: Value,
    vector: bool,
    funcs: &HostFuncs,
    unsupported: &dyn Fn(String) -> CodegenError,
) -> Result<Value, CodegenError> {
    Ok(match u {
        UnaryOp::Neg => b.ins().fneg(x),
        UnaryOp::Abs => b.ins().fabs(x),
        UnaryOp::Sqrt => b.ins().sqrt(x),
        UnaryOp::Floor => b.ins().floor(x),
        UnaryOp::Ceil => b.ins().ceil(x),
        UnaryOp::RoundEven => b.ins().nearest(x),
        UnaryOp::Not => return Err(unsupported("not".into())),
        other if vector => return Err(unsupported(format!("vector {}", other.name()))),
        other => funcs.unary(b, other, x),
    })
}

/// `mask ? x : y` lane by lane, for vectors of type `ty`.
fn vector_select(b: &mut FunctionBuilder, ty: Type, mask: Value, x: Value, y: Value) -> Value {
    // x64 selects with one blend where it sees the mask is a compare's: a float compare's as a
    // float mask (also the `maxps`/`minps` pattern of a clamp), anything else (an integer
    // compare, a bool buffer's lanes) with the data as integers.
    let lanes = lanes();
    let def = b.func.dfg.value_def(mask).inst();
    let float_compare = def.is_some_and(|i| b.func.dfg.insts[i].opcode() == Opcode::Fcmp);
    if ty == types::I32X4 {
        b.ins().bitselect(mask, x, y)
    } else if float_compare {
        let mask = b.ins().bitcast(ty, lanes, mask);
        b.ins().bitselect(mask, x, y)
    } else {
        let x = b.ins().bitcast(types::I32X4, lanes, x);
        let y = b.ins().bitcast(types::I32X4, lanes, y);
        let picked = b.ins().bitselect(mask, x, y);
        b.ins().bitcast(ty, lanes, picked)
    }
}

/// `x` converted to type `ty` (kernel dtype `to`).
fn convert(
    b: &mut FunctionBuilder,
    ty: Type,
    x: Value,
    to: DType,
    unsupported: &dyn Fn(String) -> CodegenError,
) -> Result<Value, CodegenError> {
    Ok(match (ty, b.func.dfg.value_type(x)) {
        (types::F64, types::F32) => b.ins().fpromote(types::F64, x),
        (types::F32, types::F64) => b.ins().fdemote(types::F32, x),
        (t, u) if t == u => x,
        (t, u) if t.lane_type().is_int() && u.lane_type().is_float() => {
            b.ins().fcvt_to_sint_sat(t, x)
        }
        (t, u) if t.lane_type().is_float() && u.lane_type().is_int() => {
            b.ins().fcvt_from_sint(t, x)
        }
        (t, u) if t.is_int() && u.is_int() && t.bits() < u.bits() => b.ins().ireduce(t, x),
        _ => return Err(unsupported(format!("convert to {to}"))),
    })
}

/// `emit_op`, and in a vector kernel the f64 ops of `vector::wide_op`: each runs on both
/// halves; conversions from f32 widen the low and high lane pairs, conversions to f32 narrow
/// both halves and join them.
pub(super) fn emit_val(
    b: &mut FunctionBuilder,
    ins: &KInstr,
    args: &[Val],
    vector: bool,
    funcs: &HostFuncs,
    unsupported: &dyn Fn(String) -> CodegenError,
) -> Result<Val, CodegenError> {
    let lanes = lanes();
    let shuffle = |b: &mut FunctionBuilder, x: Value, y: Value, mask: [u8; 16]| {
        let mask = b.func.dfg.immediates.push(mask.to_vec().into());
        let x = b.ins().bitcast(types::I8X16, lanes, x);
        let y = b.ins().bitcast(types::I8X16, lanes, y);
        let joined = b.ins().shuffle(x, y, mask);
        b.ins().bitcast(types::F32X4, lanes, joined)
    };
    let wide = matches!(ins.dtype, DType::F64 | DType::I64)
        || args.iter().any(|a| matches!(a, Val::Halves(..)));
    if !vector || !wide {
        let args: Vec<Value> = args.iter().map(|a| a.one()).collect();
        return emit_op(b, ins, &args, vector, funcs, unsupported).map(Val::One);
    }
    Ok(match (&ins.op, args) {
        (KOp::Convert(DType::F64), &[Val::One(x)]) => {
            let upper: [u8; 16] = std::array::from_fn(|i| 8 + (i % 8) as u8);
            let high = shuffle(b, x, x, upper);
            Val::Halves(b.ins().fvpromote_low(x), b.ins().fvpromote_low(high))
        }
        (KOp::Convert(DType::F32), &[Val::Halves(lo, hi)]) => {
            let (lo, hi) = (b.ins().fvdemote(lo), b.ins().fvdemote(hi));
            let low_pairs: [u8; 16] = std::array::from_fn(|i| (i % 8 + i / 8 * 16) as u8);
            Val::One(shuffle(b, lo, hi, low_pairs))
        }
        (KOp::Bitcast, &[Val::Halves(lo, hi)]) if ins.dtype == DType::I64 => Val::Halves(
            b.ins().bitcast(types::I64X2, lanes, lo),
            b.ins().bitcast(types::I64X2, lanes, hi),
        ),
        (KOp::Convert(DType::I32), &[Val::Halves(lo, hi)]) => {
            let low_words: [u8; 16] = std::array::from_fn(|i| (i % 4 + i / 4 * 8) as u8);
            let words = shuffle(b, lo, hi, low_words);
            Val::One(b.ins().bitcast(types::I32X4, lanes, words))
        }
        (KOp::Select, &[Val::Halves(m0, m1), Val::Halves(x0, x1), Val::Halves(y0, y1)]) => {
            // A mask of 64-bit lanes, as the data's type.
            let ty = b.func.dfg.value_type(x0);
            let mut pick = |m: Value, x: Value, y: Value| {
                let m = if b.func.dfg.value_type(m) == ty {
                    m
                } else {
                    b.ins().bitcast(ty, lanes, m)
                };
                b.ins().bitselect(m, x, y)
            };
            Val::Halves(pick(m0, x0, y0), pick(m1, x1, y1))
        }
        (_, args) => {
            let halves: Option<Vec<(Value, Value)>> = args
                .iter()
                .map(|a| match a {
                    Val::Halves(lo, hi) => Some((*lo, *hi)),
                    Val::One(_) => None,
                })
                .collect();
            let halves = halves.ok_or_else(|| unsupported("f64 op on f32 lanes".into()))?;
            let (lo, hi): (Vec<Value>, Vec<Value>) = halves.into_iter().unzip();
            Val::Halves(
                emit_op(b, ins, &lo, true, funcs, unsupported)?,
                emit_op(b, ins, &hi, true, funcs, unsupported)?,
            )
        }
    })
}

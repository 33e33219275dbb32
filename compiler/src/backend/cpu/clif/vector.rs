//! Which kernels compile for SIMD: the values, buffer layouts and ops that have a form on
//! vectors of LANES lanes (and f64 or i64 values as two halves of two lanes). The code
//! generator tries the vector form only where this says it exists.

use super::LANES;
use crate::kernel::{Access, KInstr, KOp, Kernel, Role, Stage};
use cranelift_codegen::ir::{types, ConstantData, InstBuilder, Type, Value};
use cranelift_frontend::FunctionBuilder;
use ferrax_ir::{BinaryOp, DType, UnaryOp};

/// Whether a kernel (with transcendentals already expanded) can run LANES elements at a time:
/// every value is f32, i32 or a bool mask (or f64 used only by `wide_op`s), buffers are
/// f32/i32 or f16/bf16 (whose conversions `halves::expand_conversions` spelled out), broadcast
/// patterns keep groups of LANES elements together, and every op has a vector form. A row
/// kernel vectorizes its element stages (any number of columns: the last few run as scalars);
/// its row stages are scalar code whatever their types.
pub fn vectorizable(kernel: &Kernel) -> bool {
    let lanes = LANES as usize;
    if let Some(r) = &kernel.rows {
        let elem = |k: usize| matches!(r.stages[k], Stage::Elem(_));
        return kernel
            .body
            .iter()
            .enumerate()
            .all(|(k, ins)| match &ins.op {
                KOp::Load(b) | KOp::Store(b) if elem(k) => matches!(
                    kernel.sig.buffers[*b].dtype,
                    DType::F32 | DType::I32 | DType::F16 | DType::BF16
                ),
                KOp::Reduce(_) => ins.dtype == DType::F32,
                KOp::Beyond(_) => false,
                KOp::Index { stride, size } if elem(k) => vector_index(r.cols, *stride, *size),
                _ if elem(k) => {
                    vector_op(ins)
                        && ins.args.iter().all(|&a| {
                            elem(a)
                                || matches!(
                                    kernel.body[a].dtype,
                                    DType::F32 | DType::I32 | DType::Bool
                                )
                        })
                }
                _ => true,
            });
    }
    // Index buffers of row gathers are read once per row, as scalars.
    let indices: Vec<usize> = kernel
        .sig
        .buffers
        .iter()
        .filter_map(|b| match b.access {
            Access::Gather { index, .. } => Some(index),
            Access::Each
            | Access::Scalar
            | Access::Outer(_)
            | Access::Inner(_)
            | Access::Window { .. } => None,
        })
        .collect();
    let buffers_ok =
        kernel
            .sig
            .buffers
            .iter()
            .enumerate()
            .all(|(k, b)| match (b.dtype, b.access) {
                (DType::I32 | DType::I64, Access::Outer(_)) if indices.contains(&k) => true,
                // Each vector of a step loads, combines and stores its columns before the next
                // loads, so vectors of one step may share columns.
                (DType::F32, Access::Inner(n)) if matches!(b.role, Role::Partial(_)) => {
                    n.is_multiple_of(lanes)
                }
                (_, _) if matches!(b.role, Role::Partial(_)) => false,
                // Bools are bytes: LANES of them widen into a lane mask, and narrow back.
                (DType::Bool, access) => access == Access::Each,
                // f16 and bf16 buffers hold 16-bit lanes of i32 vectors.
                (DType::F32 | DType::I32 | DType::U32 | DType::F16 | DType::BF16, access) => {
                    match access {
                        // A gathered row's vector lies within one row when rows are whole vectors.
                        Access::Outer(n) | Access::Inner(n) | Access::Gather { n, .. } => {
                            n.is_multiple_of(lanes)
                        }
                        Access::Each | Access::Scalar => true,
                        Access::Window { .. } => false,
                    }
                }
                // Kernels with 64-bit or byte buffers run as scalar code.
                (
                    DType::F64
                    | DType::I64
                    | DType::U8
                    | DType::I8
                    | DType::I16
                    | DType::U16
                    | DType::U64
                    | DType::C64
                    | DType::C128,
                    _,
                ) => false,
            });
    let wide = wide_values(kernel);
    buffers_ok
        && kernel.body.iter().enumerate().all(|(k, ins)| {
            if let KOp::Index { stride, size } = ins.op {
                vector_index(kernel.len, stride, size)
            } else if wide[k] || ins.args.iter().any(|&a| wide[a]) {
                wide_op(kernel, ins, &wide)
            } else {
                vector_op(ins)
            }
        })
}

/// Whether the indices `(i / stride) % size` of a vector of LANES elements starting at a
/// multiple of LANES are a splat (a stride of whole vectors) or consecutive (a unit stride
/// whose runs never wrap inside a vector).
pub(super) fn vector_index(len: usize, stride: usize, size: usize) -> bool {
    let lanes = LANES as usize;
    stride.is_multiple_of(lanes) || (stride == 1 && (size.is_multiple_of(lanes) || size >= len))
}

/// The index `(i / stride) % size` of element `i` of `len` (an i64 value) as an i32; with
/// `vector`, of the LANES elements from `i` (a multiple of LANES), of that vector type: one
/// splat or consecutive indices, the forms [`vector_index`] allows.
pub(super) fn element_index(
    b: &mut FunctionBuilder,
    i: Value,
    (stride, size): (usize, usize),
    len: usize,
    vector: Option<Type>,
) -> Value {
    let mut x = i;
    if stride > 1 {
        x = b.ins().udiv_imm_u(x, stride as i64);
    }
    if stride.saturating_mul(size) < len {
        x = b.ins().urem_imm_u(x, size as i64);
    }
    let x = b.ins().ireduce(types::I32, x);
    let Some(ty) = vector else {
        return x;
    };
    let v = b.ins().splat(ty, x);
    if stride.is_multiple_of(LANES as usize) {
        return v;
    }
    let offsets: Vec<u8> = (0..LANES as u32).flat_map(u32::to_le_bytes).collect();
    let handle = b.func.dfg.constants.insert(ConstantData::from(offsets));
    let offsets = b.ins().vconst(ty, handle);
    b.ins().iadd(v, offsets)
}

/// The values a vector kernel holds as two halves of two lanes: f64 and i64 values, and the
/// bools computed from them (their masks have 64-bit lanes).
fn wide_values(kernel: &Kernel) -> Vec<bool> {
    let mut wide = Vec::with_capacity(kernel.body.len());
    for ins in &kernel.body {
        let w = match ins.dtype {
            DType::F64 | DType::I64 => true,
            DType::Bool => ins.args.iter().any(|&a| wide[a]),
            _ => false,
        };
        wide.push(w);
    }
    wide
}

/// Whether an instruction has a vector form.
fn vector_op(ins: &KInstr) -> bool {
    matches!(
        ins.dtype,
        DType::F32 | DType::I32 | DType::U32 | DType::Bool
    ) && match &ins.op {
        KOp::Unary(u) => vector_unary(*u) && (ins.dtype != DType::Bool || *u == UnaryOp::Not),
        KOp::Binary(op) => match op {
            BinaryOp::Rem | BinaryOp::Pow | BinaryOp::Atan2 | BinaryOp::Complex => false,
            BinaryOp::Add
            | BinaryOp::Sub
            | BinaryOp::Mul
            | BinaryOp::Div
            | BinaryOp::Max
            | BinaryOp::Min
            | BinaryOp::And
            | BinaryOp::Or
            | BinaryOp::Xor => true,
            // Cranelift shifts a vector by one scalar amount only.
            BinaryOp::ShiftLeft | BinaryOp::ShiftRightLogical | BinaryOp::ShiftRightArithmetic => {
                false
            }
        },
        // Only a flat kernel's whole vectors of indices have a vector form (`vectorizable`).
        KOp::Reduce(_) | KOp::Index { .. } => false,
        KOp::Load(_)
        | KOp::Const(_)
        | KOp::Compare(_)
        | KOp::Select
        | KOp::Clamp
        | KOp::Convert(_)
        | KOp::Fma
        | KOp::Bitcast
        | KOp::ShiftLeft(_)
        | KOp::ShiftRight(_)
        | KOp::ShiftRightLogical(_)
        | KOp::Store(_)
        | KOp::Accumulate(_)
        | KOp::Beyond(_) => true,
    }
}

/// Unary ops with a vector form: round half away from zero and sign have none.
fn vector_unary(u: UnaryOp) -> bool {
    match u {
        UnaryOp::Round | UnaryOp::Sign => false,
        // Host steps (the support table), never in a kernel.
        UnaryOp::Tan
        | UnaryOp::Asin
        | UnaryOp::Acos
        | UnaryOp::Atan
        | UnaryOp::Sinh
        | UnaryOp::Cosh
        | UnaryOp::Asinh
        | UnaryOp::Acosh
        | UnaryOp::Atanh
        | UnaryOp::Cbrt
        | UnaryOp::Lgamma
        | UnaryOp::Digamma
        | UnaryOp::Erf
        | UnaryOp::Erfc
        | UnaryOp::ErfInv
        | UnaryOp::BesselI0e
        | UnaryOp::BesselI1e
        | UnaryOp::Real
        | UnaryOp::Imag => false,
        // Expanded into vector primitives before the kernel is built.
        UnaryOp::Exp
        | UnaryOp::Expm1
        | UnaryOp::Log
        | UnaryOp::Log1p
        | UnaryOp::Rsqrt
        | UnaryOp::Tanh
        | UnaryOp::Logistic
        | UnaryOp::Sin
        | UnaryOp::Cos
        | UnaryOp::Neg
        | UnaryOp::Abs
        | UnaryOp::Floor
        | UnaryOp::Ceil
        | UnaryOp::RoundEven
        | UnaryOp::Sqrt
        | UnaryOp::Not => true,
    }
}

/// Whether a vector kernel runs `ins`, which makes or uses wide values ([`wide_values`]), as
/// two halves: f64 arithmetic, i64 integer arithmetic and shifts, bit casts between them,
/// compares and bool logic on them, selects of f64 values, and conversions between f32 and
/// f64 and from i64 to i32 (f32 sin and cos reduce in f64; f32 pow computes in f64).
fn wide_op(kernel: &Kernel, ins: &KInstr, wide: &[bool]) -> bool {
    let args_are = |d: DType| ins.args.iter().all(|&a| kernel.body[a].dtype == d);
    let all_wide = ins.args.iter().all(|&a| wide[a]);
    match (&ins.op, ins.dtype) {
        (KOp::Convert(_), DType::F64) => args_are(DType::F32) || args_are(DType::F64),
        (KOp::Convert(_), DType::F32) => args_are(DType::F64),
        (KOp::Convert(_), DType::I32) => args_are(DType::I64),
        (KOp::Bitcast, DType::I64) => args_are(DType::F64),
        (KOp::Bitcast, DType::F64) => args_are(DType::I64),
        _ if !all_wide => false,
        (op, DType::F64) => match op {
            KOp::Const(_) | KOp::Fma | KOp::Select => true,
            KOp::Unary(u) => matches!(
                u,
                UnaryOp::Neg | UnaryOp::Abs | UnaryOp::Floor | UnaryOp::Ceil | UnaryOp::RoundEven
            ),
            KOp::Binary(b) => matches!(
                b,
                BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div
            ),
            _ => false,
        },
        (op, DType::I64) => match op {
            KOp::Const(_) | KOp::ShiftLeft(_) | KOp::ShiftRight(_) => true,
            KOp::Binary(b) => matches!(
                b,
                BinaryOp::Add | BinaryOp::Sub | BinaryOp::And | BinaryOp::Or | BinaryOp::Xor
            ),
            _ => false,
        },
        (op, DType::Bool) => match op {
            KOp::Compare(_) => args_are(DType::F64) || args_are(DType::I64),
            KOp::Unary(u) => *u == UnaryOp::Not,
            KOp::Binary(b) => matches!(b, BinaryOp::And | BinaryOp::Or | BinaryOp::Xor),
            _ => false,
        },
        _ => false,
    }
}

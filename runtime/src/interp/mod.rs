//! The reference interpreter: evaluates a verified `Func` op by op on host arrays. It is the
//! numerical oracle for every backend, so it favours accuracy: float sums and dot products
//! accumulate in f64 and round once, and f32/f16/bf16 transcendentals are computed in f64.
//! Files mirror `ir/src/ops/`.

mod contract;
mod elementwise;
mod movement;
mod reduce;

use crate::{Array, RuntimeError};
use ferrax_ir::{
    bf16_from_f64, f16_from_f64, infer_type, verify, DType, Elements, Func, Op, TensorType,
};

/// Evaluates `func` on `args`.
pub fn interpret(func: &Func, args: &[Array]) -> Result<Vec<Array>, RuntimeError> {
    verify(func)?;
    if args.len() != func.params.len() {
        return Err(RuntimeError::ArgCount {
            expected: func.params.len(),
            got: args.len(),
        });
    }
    for (index, (a, p)) in args.iter().zip(&func.params).enumerate() {
        if a.ty() != p {
            return Err(RuntimeError::ArgType {
                index,
                expected: p.clone(),
                got: a.ty().clone(),
            });
        }
    }
    // The last use of every value, so that intermediates are freed as soon as possible.
    let mut last_use = vec![0usize; func.num_values()];
    for (i, ins) in func.body.iter().enumerate() {
        for a in &ins.args {
            last_use[a.index()] = i;
        }
    }
    let pinned: Vec<bool> = {
        let mut p = vec![false; func.num_values()];
        for o in &func.outputs {
            p[o.index()] = true;
        }
        p
    };
    let mut values: Vec<Option<Array>> = args.iter().cloned().map(Some).collect();
    for (i, ins) in func.body.iter().enumerate() {
        let operands: Vec<&Array> = ins
            .args
            .iter()
            .filter_map(|a| values[a.index()].as_ref())
            .collect();
        let out = eval_typed(&ins.op, &operands, &ins.ty)?;
        values.push(Some(out));
        for a in &ins.args {
            if last_use[a.index()] == i && !pinned[a.index()] {
                values[a.index()] = None;
            }
        }
    }
    func.outputs
        .iter()
        .map(|o| {
            values[o.index()]
                .clone()
                .ok_or(RuntimeError::Freed { value: o.0 })
        })
        .collect()
}

/// Evaluates one op on concrete operands.
pub fn eval_op(op: &Op, args: &[&Array]) -> Result<Array, RuntimeError> {
    let types: Vec<&TensorType> = args.iter().map(|a| a.ty()).collect();
    let ty = infer_type(op, &types)?;
    eval_typed(op, args, &ty)
}

fn eval_typed(op: &Op, args: &[&Array], ty: &TensorType) -> Result<Array, RuntimeError> {
    let data: Elements = match op {
        Op::Constant(lit) => return Ok(Array::from_literal(lit)),
        Op::CustomVjp(c) => {
            let owned: Vec<Array> = args.iter().map(|&a| a.clone()).collect();
            let mut out = interpret(&c.primal, &owned)?;
            return out.pop().ok_or(RuntimeError::ArgCount {
                expected: 1,
                got: 0,
            });
        }
        Op::Iota { dim, .. } => movement::iota(ty, *dim),
        Op::Unary(u) => elementwise::unary(*u, args[0].elements()),
        Op::Binary(b) => elementwise::binary(*b, args[0].elements(), args[1].elements()),
        Op::Compare(c) => elementwise::compare(*c, args[0].elements(), args[1].elements()),
        Op::Select => {
            elementwise::select(args[0].elements(), args[1].elements(), args[2].elements())
        }
        Op::Clamp => elementwise::clamp(args[0].elements(), args[1].elements(), args[2].elements()),
        Op::Convert { to } => elementwise::convert(args[0].elements(), *to),
        Op::StopGradient | Op::Reshape { .. } => args[0].elements().clone(),
        Op::BroadcastInDim { dims, .. } => movement::broadcast_in_dim(args[0], ty, dims),
        Op::Transpose { perm } => movement::transpose(args[0], ty, perm),
        Op::Slice { start, strides, .. } => movement::slice(args[0], ty, start, strides),
        Op::Pad { low, interior, .. } => movement::pad(args[0], args[1], ty, low, interior),
        Op::Concatenate { axis } => movement::concatenate(args, ty, *axis),
        Op::Reduce { op, axes } => reduce::reduce(*op, args[0], axes),
        Op::DotGeneral(dims) => contract::dot_general(args[0], args[1], dims, ty),
    };
    Array::new(ty.shape.clone(), data)
}

/// Float elements widened to f64 (exactly).
fn floats(x: &Elements) -> Vec<f64> {
    match x {
        Elements::F32(v) => v.iter().map(|&a| a as f64).collect(),
        Elements::F64(v) => v.clone(),
        Elements::F16(v) => v.iter().map(|a| a.to_f64()).collect(),
        Elements::BF16(v) => v.iter().map(|a| a.to_f64()).collect(),
        other => other.to_f64_vec(),
    }
}

/// f64 values rounded once to the float dtype `to`.
fn from_floats(v: Vec<f64>, to: DType) -> Elements {
    match to {
        DType::F32 => Elements::F32(v.iter().map(|&a| a as f32).collect()),
        DType::F16 => Elements::F16(v.iter().map(|&a| f16_from_f64(a)).collect()),
        DType::BF16 => Elements::BF16(v.iter().map(|&a| bf16_from_f64(a)).collect()),
        _ => Elements::F64(v),
    }
}

/// Integer (or bool) elements widened to i64.
fn ints(x: &Elements) -> Vec<i64> {
    match x {
        Elements::I32(v) => v.iter().map(|&a| a as i64).collect(),
        Elements::I64(v) => v.clone(),
        Elements::U8(v) => v.iter().map(|&a| a as i64).collect(),
        Elements::Bool(v) => v.iter().map(|&a| a as i64).collect(),
        other => other.to_f64_vec().iter().map(|&a| a as i64).collect(),
    }
}

/// i64 values wrapped to the integer dtype `to`.
fn from_ints(v: Vec<i64>, to: DType) -> Elements {
    match to {
        DType::I32 => Elements::I32(v.iter().map(|&a| a as i32).collect()),
        DType::U8 => Elements::U8(v.iter().map(|&a| a as u8).collect()),
        DType::Bool => Elements::Bool(v.iter().map(|&a| a != 0).collect()),
        _ => Elements::I64(v),
    }
}

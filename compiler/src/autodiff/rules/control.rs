//! `while` and `cond`. Forward mode carries tangents beside the primal values: the loop's body
//! and each branch become their JVP programs, and the instruction yields the tangent of its
//! result. Reverse mode through `cond` runs the taken branch's VJP program (which recomputes
//! the branch's forward values) under the same index; through `while` it is refused, as JAX
//! refuses it: the trip count is only known at run time, so there is no fixed tape of
//! residuals to store.

use super::{or_zero, Emitter, R};
use crate::autodiff::{jvp as jvp_program, vjp as vjp_program, AutodiffError};
use ferrax_ir::{Cond, Func, FuncBuilder, Op, TensorType, ValueId, While};

/// Emits `func`'s instructions into `b` on `args` and returns its outputs.
pub(super) fn inline(b: &mut FuncBuilder, func: &Func, args: &[ValueId]) -> R<Vec<ValueId>> {
    let mut values: Vec<ValueId> = args.to_vec();
    for ins in &func.body {
        let operands: Vec<ValueId> = ins.args.iter().map(|a| values[a.index()]).collect();
        values.push(b.push(ins.op.clone(), &operands)?);
    }
    func.outputs
        .iter()
        .map(|o| {
            values
                .get(o.index())
                .copied()
                .ok_or(AutodiffError::Undefined(*o))
        })
        .collect()
}

/// `func` taking parameters `extra` after its own, which it does not read.
fn with_unread_params(func: &Func, extra: &[TensorType]) -> R<Func> {
    let mut b = FuncBuilder::new(func.name.clone());
    let args: Vec<ValueId> = func.params.iter().map(|t| b.param(t.clone())).collect();
    for t in extra {
        b.param(t.clone());
    }
    let outputs = inline(&mut b, func, &args)?;
    Ok(b.finish(outputs))
}

/// The operands' tangents, zeros where they are symbolically zero.
fn tangents(e: &mut Emitter, x: &[ValueId], t: &[Option<ValueId>]) -> R<Vec<ValueId>> {
    x.iter()
        .zip(t)
        .map(|(&xi, &ti)| or_zero(e, ti, xi))
        .collect()
}

pub(super) fn while_jvp(
    e: &mut Emitter,
    w: &While,
    x: &[ValueId],
    t: &[Option<ValueId>],
) -> R<Option<ValueId>> {
    let carried: Vec<TensorType> = x.iter().map(|&v| e.ty(v)).collect::<R<_>>()?;
    let looped = Op::While(Box::new(While {
        cond: with_unread_params(&w.cond, &carried)?,
        body: jvp_program(&w.body)?,
        result: x.len() + w.result,
    }));
    let mut args = x.to_vec();
    args.extend(tangents(e, x, t)?);
    e.push(looped, &args).map(Some)
}

pub(super) fn cond_jvp(
    e: &mut Emitter,
    c: &Cond,
    x: &[ValueId],
    t: &[Option<ValueId>],
) -> R<Option<ValueId>> {
    let Some((&index, operands)) = x.split_first() else {
        return Ok(None);
    };
    let results = c.branches.first().map_or(0, |b| b.outputs.len());
    let branches = c.branches.iter().map(jvp_program).collect::<R<_>>()?;
    let picked = Op::Cond(Box::new(Cond {
        branches,
        result: results + c.result,
    }));
    let mut args = vec![index];
    args.extend_from_slice(operands);
    args.extend(tangents(e, operands, t.get(1..).unwrap_or_default())?);
    e.push(picked, &args).map(Some)
}

/// `branch`'s reverse mode for the cotangent of its output `k` alone: the operands and that
/// cotangent to one cotangent per operand (the other outputs' cotangents are zeros).
fn branch_vjp(branch: &Func, k: usize) -> R<Func> {
    let program = vjp_program(branch)?;
    let outputs = branch.output_types();
    let mut b = FuncBuilder::new(format!("{}_ct{k}", program.name));
    let mut args: Vec<ValueId> = branch.params.iter().map(|t| b.param(t.clone())).collect();
    let g = b.param(
        outputs
            .get(k)
            .cloned()
            .ok_or(AutodiffError::Undefined(ValueId(0)))?,
    );
    let mut e = Emitter { b };
    for (j, ty) in outputs.iter().enumerate() {
        args.push(if j == k { g } else { e.splat(0.0, ty)? });
    }
    let all = inline(&mut e.b, &program, &args)?;
    let cts = all.get(outputs.len()..).unwrap_or_default().to_vec();
    Ok(e.b.finish(cts))
}

pub(super) fn cond_vjp(
    e: &mut Emitter,
    c: &Cond,
    x: &[ValueId],
    g: ValueId,
) -> R<Vec<Option<ValueId>>> {
    let Some((&index, operands)) = x.split_first() else {
        return Ok(Vec::new());
    };
    let branches: Vec<Func> = c
        .branches
        .iter()
        .map(|b| branch_vjp(b, c.result))
        .collect::<R<_>>()?;
    let mut args = vec![index];
    args.extend_from_slice(operands);
    args.push(g);
    let mut out = vec![None];
    for (j, &operand) in operands.iter().enumerate() {
        if !e.ty(operand)?.dtype.is_float() {
            out.push(None);
            continue;
        }
        let picked = Op::Cond(Box::new(Cond {
            branches: branches.clone(),
            result: j,
        }));
        out.push(Some(e.push(picked, &args)?));
    }
    Ok(out)
}

pub(super) fn while_vjp() -> R<Vec<Option<ValueId>>> {
    Err(AutodiffError::Unsupported(
        "reverse-mode differentiation of a `while` loop: its trip count is only known at run \
         time, so there is no fixed set of per-step values to store; use `lax::scan`, or \
         `lax::fori_loop` with Rust numbers as bounds (JAX refuses it too)"
            .into(),
    ))
}

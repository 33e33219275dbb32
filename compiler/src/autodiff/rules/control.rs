//! `while` and `cond`. Forward mode carries tangents beside the primal values: the loop's body
//! and each branch become their JVP programs, and one call yields both the primal results and
//! their tangents (the loop runs once). Reverse mode through `cond` runs the taken branch's VJP program (which recomputes
//! the branch's forward values) under the same index; through `while` it is refused, as JAX
//! refuses it: the trip count is only known at run time, so there is no fixed tape of
//! residuals to store.

use super::{or_zero, Emitter, R};
use crate::autodiff::{differentiable, jvp as jvp_program, vjp as vjp_program, AutodiffError};
use ferrax_ir::{Cond, Func, FuncBuilder, Op, TensorType, ValueId, While};

/// `func` taking parameters `extra` after its own, which it does not read.
fn with_unread_params(func: &Func, extra: &[TensorType]) -> R<Func> {
    let mut b = FuncBuilder::new(func.name.clone());
    let args: Vec<ValueId> = func.params.iter().map(|t| b.param(t.clone())).collect();
    for t in extra {
        b.param(t.clone());
    }
    let outputs = b.inline(func, &args)?;
    Ok(b.finish(outputs))
}

/// The operands' tangents, zeros where they are symbolically zero.
fn tangents(e: &mut Emitter, x: &[ValueId], t: &[Option<ValueId>]) -> R<Vec<ValueId>> {
    x.iter()
        .zip(t)
        .map(|(&xi, &ti)| or_zero(e, ti, xi))
        .collect()
}

/// The forward-mode calls emitted so far: for each primal call (its op and operands), the
/// JVP call (its op, yielding result 0, and operands) that replaces it.
#[derive(Default)]
pub(crate) struct Calls(Vec<(Op, Vec<ValueId>, Op, Vec<ValueId>)>);

/// Forward mode through a `while`, `cond`, `scan` or `remat` call `op` on `x` with tangents `t`: the primal
/// result and its tangent, both yielded by one JVP call over primal and tangent values. The
/// instructions of one primal call share the JVP call (same op and operands, so executors
/// run it once), and the primal call itself is left unread.
pub(super) fn call_jvp(
    e: &mut Emitter,
    calls: &mut Calls,
    op: &Op,
    x: &[ValueId],
    t: &[Option<ValueId>],
) -> R<(ValueId, Option<ValueId>)> {
    let unsupported =
        || AutodiffError::Unsupported(format!("forward mode of `{}` as a call", op.name()));
    let (k, n) = op.call_result().ok_or_else(unsupported)?;
    let known = calls
        .0
        .iter()
        .find(|(p, args, _, _)| args.as_slice() == x && p.same_call(op))
        .map(|(_, _, jop, jargs)| (jop.clone(), jargs.clone()));
    let (jop, jargs) = match known {
        Some(call) => call,
        None => {
            let call = match op {
                Op::While(w) => while_call(e, w, x, t)?,
                Op::Cond(c) => cond_call(e, c, x, t)?,
                Op::Remat(r) => {
                    let tangents = tangents(e, x, t)?;
                    super::remat::jvp_call(r, x, tangents)?
                }
                Op::Scan(s) => super::scan::jvp_call(e, s, x, t)?,
                Op::Constant(_)
                | Op::Iota { .. }
                | Op::Unary(_)
                | Op::Binary(_)
                | Op::Compare(_)
                | Op::Select
                | Op::Clamp
                | Op::Convert { .. }
                | Op::BitcastConvert { .. }
                | Op::BroadcastInDim { .. }
                | Op::Reshape { .. }
                | Op::Transpose { .. }
                | Op::Reverse { .. }
                | Op::Reduce { .. }
                | Op::DotGeneral(_)
                | Op::Slice { .. }
                | Op::Pad { .. }
                | Op::Concatenate { .. }
                | Op::Gather(_)
                | Op::Scatter(_)
                | Op::DynamicSlice { .. }
                | Op::DynamicUpdateSlice
                | Op::StopGradient
                | Op::Sort { .. }
                | Op::Argsort { .. }
                | Op::Fft { .. }
                | Op::TriangularSolve(_)
                | Op::Cholesky
                | Op::Lu(_)
                | Op::Qr(_)
                | Op::Eigh(_)
                | Op::Svd(_)
                | Op::Geqrf(_)
                | Op::HouseholderProduct
                | Op::Eig(_)
                | Op::CustomVjp(_)
                | Op::CustomJvp(_)
                | Op::Attention(_)
                | Op::DebugCallback { .. }
                | Op::PureCallback(_)
                | Op::IoCallback(_)
                | Op::AddDependency => return Err(unsupported()),
            };
            calls
                .0
                .push((op.clone(), x.to_vec(), call.0.clone(), call.1.clone()));
            call
        }
    };
    let (primal, tangent) = match op {
        Op::Scan(s) => super::scan::jvp_results(s, k),
        Op::While(_) | Op::Cond(_) | Op::Remat(_) => (k, n + k),
        Op::Constant(_)
        | Op::Iota { .. }
        | Op::Unary(_)
        | Op::Binary(_)
        | Op::Compare(_)
        | Op::Select
        | Op::Clamp
        | Op::Convert { .. }
        | Op::BitcastConvert { .. }
        | Op::BroadcastInDim { .. }
        | Op::Reshape { .. }
        | Op::Transpose { .. }
        | Op::Reverse { .. }
        | Op::Reduce { .. }
        | Op::DotGeneral(_)
        | Op::Slice { .. }
        | Op::Pad { .. }
        | Op::Concatenate { .. }
        | Op::Gather(_)
        | Op::Scatter(_)
        | Op::DynamicSlice { .. }
        | Op::DynamicUpdateSlice
        | Op::StopGradient
        | Op::Sort { .. }
        | Op::Argsort { .. }
        | Op::Fft { .. }
        | Op::TriangularSolve(_)
        | Op::Cholesky
        | Op::Lu(_)
        | Op::Qr(_)
        | Op::Eigh(_)
        | Op::Svd(_)
        | Op::Geqrf(_)
        | Op::HouseholderProduct
        | Op::Eig(_)
        | Op::CustomVjp(_)
        | Op::CustomJvp(_)
        | Op::Attention(_)
        | Op::DebugCallback { .. }
        | Op::PureCallback(_)
        | Op::IoCallback(_)
        | Op::AddDependency => return Err(unsupported()),
    };
    let y = e.push(jop.with_result(primal), &jargs)?;
    let dy = match differentiable(e.ty(y)?.dtype) {
        true => Some(e.push(jop.with_result(tangent), &jargs)?),
        false => None,
    };
    Ok((y, dy))
}

/// The JVP `while` (yielding result 0) and its operands: the carried values, then their
/// tangents; the body is the body's JVP program.
fn while_call(
    e: &mut Emitter,
    w: &While,
    x: &[ValueId],
    t: &[Option<ValueId>],
) -> R<(Op, Vec<ValueId>)> {
    let carried: Vec<TensorType> = x.iter().map(|&v| e.ty(v)).collect::<R<_>>()?;
    let looped = Op::While(Box::new(While {
        cond: with_unread_params(&w.cond, &carried)?,
        body: jvp_program(&w.body)?,
        result: 0,
    }));
    let mut args = x.to_vec();
    args.extend(tangents(e, x, t)?);
    Ok((looped, args))
}

/// The JVP `cond` (yielding result 0) and its operands: the index, the operands, then their
/// tangents; each branch is the branch's JVP program.
fn cond_call(
    e: &mut Emitter,
    c: &Cond,
    x: &[ValueId],
    t: &[Option<ValueId>],
) -> R<(Op, Vec<ValueId>)> {
    let Some((&index, operands)) = x.split_first() else {
        return Err(AutodiffError::Unsupported(
            "a `cond` without an index".into(),
        ));
    };
    let branches = c.branches.iter().map(jvp_program).collect::<R<_>>()?;
    let picked = Op::Cond(Box::new(Cond {
        branches,
        result: 0,
    }));
    let mut args = vec![index];
    args.extend_from_slice(operands);
    args.extend(tangents(e, operands, t.get(1..).unwrap_or_default())?);
    Ok((picked, args))
}

/// `branch`'s reverse mode for the cotangents of its outputs `ks` (in that order): the
/// operands and those cotangents to one cotangent per operand (the other outputs' cotangents
/// are zeros).
fn branch_vjp(branch: &Func, ks: &[usize]) -> R<Func> {
    let program = vjp_program(branch)?;
    let outputs = branch.output_types();
    let name = ks
        .iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join("_");
    let mut b = FuncBuilder::new(format!("{}_ct{name}", program.name));
    let mut args: Vec<ValueId> = branch.params.iter().map(|t| b.param(t.clone())).collect();
    let mut gs = Vec::with_capacity(ks.len());
    for &k in ks {
        let ty = outputs.get(k).ok_or(AutodiffError::Undefined(ValueId(0)))?;
        gs.push((k, b.param(ty.clone())));
    }
    let mut e = Emitter { b };
    for (j, ty) in outputs.iter().enumerate() {
        args.push(match gs.iter().find(|(k, _)| *k == j) {
            Some(&(_, g)) => g,
            None => e.splat(0.0, ty)?,
        });
    }
    let all = e.b.inline(&program, &args)?;
    let cts = all.get(outputs.len()..).unwrap_or_default().to_vec();
    Ok(e.b.finish(cts))
}

/// The cotangents of the cond's operands, given its results' (`gs`, by result index, `None`
/// where zero): the taken branch's reverse mode, once for all its results.
pub(in crate::autodiff) fn cond_vjp(
    e: &mut Emitter,
    c: &Cond,
    x: &[ValueId],
    gs: &[Option<ValueId>],
) -> R<Vec<Option<ValueId>>> {
    let Some((&index, operands)) = x.split_first() else {
        return Ok(Vec::new());
    };
    let ks: Vec<usize> = (0..gs.len()).filter(|&k| gs[k].is_some()).collect();
    let branches: Vec<Func> = c
        .branches
        .iter()
        .map(|b| branch_vjp(b, &ks))
        .collect::<R<_>>()?;
    let mut args = vec![index];
    args.extend_from_slice(operands);
    args.extend(gs.iter().flatten());
    let mut out = vec![None];
    for (j, &operand) in operands.iter().enumerate() {
        if !differentiable(e.ty(operand)?.dtype) {
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

//! Automatic differentiation as IR→IR transformations.
//!
//! [`jvp`] builds the forward-mode program and [`vjp`] the reverse-mode one; both copy the
//! primal computation and add derivative instructions from per-op rules (`rules/`, one file
//! per op family, mirroring `ir/src/ops/`). The results are ordinary `Func`s, so transforms
//! compose: differentiating a `vjp` program gives second derivatives.
//!
//! Only floating-point and complex values carry derivatives. Integer and bool values (and the
//! outputs of comparisons, rounding and `stop_gradient`) have zero derivative; their tangent
//! and cotangent slots exist so that signatures stay uniform, and are zeros.
//!
//! Complex values follow JAX's convention: a cotangent is the transpose of the derivative as a
//! real-linear map under the pairing `Re(u·v)` (no conjugation). Holomorphic ops then share the
//! real rules term for term, reverse mode of a real-valued `f(z)` yields `∂f/∂x − i·∂f/∂y`
//! (the conjugate of the steepest-ascent direction, as `jax.grad` returns), and only the ops
//! that are not holomorphic (`real`, `imag`, `complex`, the absolute value) have rules of
//! their own.

mod accumulate;
mod emit;
mod partial;
mod rules;

use crate::dce::eliminate_dead_code;
use emit::Emitter;
use ferrax_ir::{
    verify, DType, Func, FuncBuilder, Literal, Op, Scalar, TypeError, ValueId, VerifyError,
};
use std::ops::RangeInclusive;

#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum AutodiffError {
    #[error("a derivative rule built an ill-typed instruction: {0}")]
    Type(#[from] TypeError),
    #[error("value {0} is not defined in the derivative program")]
    Undefined(ValueId),
    #[error(transparent)]
    Verify(#[from] VerifyError),
    #[error("not supported: {0}")]
    Unsupported(String),
}

/// Whether values of `dtype` carry derivatives.
pub(crate) fn differentiable(dtype: DType) -> bool {
    dtype.is_float() || dtype.is_complex()
}

/// Forward mode. The result takes `func`'s parameters followed by one tangent per parameter
/// (same types) and returns `func`'s outputs followed by one tangent per output.
pub fn jvp(func: &Func) -> Result<Func, AutodiffError> {
    verify(func)?;
    let mut e = Emitter {
        b: FuncBuilder::new(format!("{}_jvp", func.name)),
    };
    let mut primal: Vec<ValueId> = func.params.iter().map(|t| e.b.param(t.clone())).collect();
    let mut tangent: Vec<Option<ValueId>> = func
        .params
        .iter()
        .map(|t| {
            let p = e.b.param(t.clone());
            differentiable(t.dtype).then_some(p)
        })
        .collect();
    // The JVP calls made so far: a loop or branch runs once, yielding primal and tangent.
    let mut calls = rules::Calls::default();
    for ins in &func.body {
        let args: Vec<ValueId> = ins.args.iter().map(|a| primal[a.index()]).collect();
        let tangents: Vec<Option<ValueId>> = ins.args.iter().map(|a| tangent[a.index()]).collect();
        let (y, t) = match rules::call_jvp(&mut e, &mut calls, &ins.op, &args, &tangents)? {
            Some((y, t)) => (y, t.filter(|_| differentiable(ins.ty.dtype))),
            None => {
                let y = e.push(ins.op.clone(), &args)?;
                let t = if differentiable(ins.ty.dtype) && tangents.iter().any(Option::is_some) {
                    rules::jvp(&mut e, &ins.op, &args, &tangents, y)?
                } else {
                    None
                };
                (y, t)
            }
        };
        primal.push(y);
        tangent.push(t);
    }
    let mut outputs: Vec<ValueId> = func.outputs.iter().map(|o| primal[o.index()]).collect();
    for o in &func.outputs {
        let t = match tangent[o.index()] {
            Some(t) => t,
            None => e.full_like(0.0, primal[o.index()])?,
        };
        outputs.push(t);
    }
    finish(e, outputs)
}

/// Reverse mode. The result takes `func`'s parameters followed by one cotangent per output
/// (same types) and returns `func`'s outputs followed by one cotangent per parameter.
pub fn vjp(func: &Func) -> Result<Func, AutodiffError> {
    vjp_wrt(func, &vec![true; func.params.len()])
}

/// [`vjp`] with respect to the parameters `wrt` marks: cotangents flow only into values that
/// depend on one of them, so work on the others alone is computed but never differentiated;
/// the other parameters' cotangents are zeros.
pub(crate) fn vjp_wrt(func: &Func, wrt: &[bool]) -> Result<Func, AutodiffError> {
    verify(func)?;
    let mut active: Vec<bool> = (0..func.params.len())
        .map(|p| wrt.get(p).copied().unwrap_or(false))
        .collect();
    for ins in &func.body {
        active.push(ins.args.iter().any(|a| active[a.index()]));
    }
    let mut e = Emitter {
        b: FuncBuilder::new(format!("{}_vjp", func.name)),
    };
    let mut primal: Vec<ValueId> = func.params.iter().map(|t| e.b.param(t.clone())).collect();
    let out_cts: Vec<ValueId> = func
        .outputs
        .iter()
        .filter_map(|&o| func.value_type(o).cloned())
        .map(|t| e.b.param(t))
        .collect();
    for ins in &func.body {
        let args: Vec<ValueId> = ins.args.iter().map(|a| primal[a.index()]).collect();
        primal.push(e.push(ins.op.clone(), &args)?);
    }
    // Each value's cotangent contributions, summed when its defining instruction is reached.
    let mut ct: Vec<Vec<ValueId>> = vec![Vec::new(); func.num_values()];
    for (o, &g) in func.outputs.iter().zip(&out_cts) {
        if active[o.index()] && func.value_type(*o).is_some_and(|t| differentiable(t.dtype)) {
            ct[o.index()].push(g);
        }
    }
    // Instructions whose cotangents were taken with another's (results of one call).
    let mut joined = vec![false; func.body.len()];
    for (i, ins) in func.body.iter().enumerate().rev() {
        if joined[i] {
            continue;
        }
        let members = match rules::joins_results(&ins.op) {
            true => call_members(func, i),
            false => i..=i,
        };
        let Some(gs) = cotangents(&mut e, func, members, &mut ct, &mut joined)? else {
            continue;
        };
        let args: Vec<ValueId> = ins.args.iter().map(|a| primal[a.index()]).collect();
        let y = primal[func.instr_value(i).index()];
        // What a rule recomputes (a scan's forward pass with residuals) runs no callbacks:
        // the primal call copied above runs them once.
        let op = match ins.op.has_effect() {
            true => ins.op.map_regions(silenced)?,
            false => ins.op.clone(),
        };
        let contributions = rules::vjp(&mut e, &op, &args, y, &gs)?;
        for (a, c) in ins.args.iter().zip(contributions) {
            let differentiable =
                active[a.index()] && func.value_type(*a).is_some_and(|t| differentiable(t.dtype));
            if let (Some(c), true) = (c, differentiable) {
                ct[a.index()].push(c);
            }
        }
    }
    let mut outputs: Vec<ValueId> = func.outputs.iter().map(|o| primal[o.index()]).collect();
    for (p, contributions) in ct.iter().take(func.params.len()).enumerate() {
        let g = match accumulate::sum(&mut e, contributions)? {
            Some(g) => g,
            None => e.full_like(0.0, primal[p])?,
        };
        outputs.push(g);
    }
    finish(e, outputs)
}

/// `func` without its callbacks (nor those of the functions it holds): each token they would
/// give is a constant.
fn silenced(func: &Func) -> Result<Func, AutodiffError> {
    let mut b = FuncBuilder::new(func.name.clone());
    let mut values: Vec<ValueId> = func.params.iter().map(|t| b.param(t.clone())).collect();
    for ins in &func.body {
        let value = match &ins.op {
            Op::DebugCallback { .. } => {
                b.push(Op::Constant(Literal::scalar(Scalar::Bool(false))), &[])?
            }
            // Its value is needed and the primal call made it: a second call would repeat
            // the effect.
            Op::IoCallback(_) => {
                return Err(AutodiffError::Unsupported(
                    "reverse mode through a loop whose body calls io_callback would call it \
                     again; compute the gradient outside the loop or use pure_callback"
                        .into(),
                ))
            }
            op => {
                let args: Vec<ValueId> = ins.args.iter().map(|a| values[a.index()]).collect();
                let op = match op.has_effect() {
                    true => op.map_regions(silenced)?,
                    false => op.clone(),
                };
                b.push(op, &args)?
            }
        };
        values.push(value);
    }
    let outputs = func.outputs.iter().map(|o| values[o.index()]).collect();
    Ok(eliminate_dead_code(&b.finish(outputs)))
}

/// The summed cotangents of the results that instructions `members` (of one call, or one
/// instruction) yield, by result index (`None` where there are none; no list where none has
/// any), the instructions marked `joined`.
fn cotangents(
    e: &mut Emitter,
    func: &Func,
    members: RangeInclusive<usize>,
    ct: &mut [Vec<ValueId>],
    joined: &mut [bool],
) -> Result<Option<Vec<Option<ValueId>>>, AutodiffError> {
    let count = func.body[*members.end()]
        .op
        .call_result()
        .map_or(1, |(_, n)| n);
    let mut gs = vec![None; count];
    for j in members {
        joined[j] = true;
        let value = func.instr_value(j);
        let k = func.body[j].op.call_result().map_or(0, |(k, _)| k);
        let slot = gs.get_mut(k).ok_or(AutodiffError::Undefined(value))?;
        let mut terms = std::mem::take(&mut ct[value.index()]);
        terms.extend(slot.take());
        *slot = accumulate::sum(e, &terms)?;
    }
    Ok(gs.iter().any(Option::is_some).then_some(gs))
}

/// Instruction `last` and the instructions just before it that are other results of its call
/// (the same op but for `result`, the same operands). Every use of their values comes after
/// `last`, so in reverse order their cotangents are complete when `last` is reached.
fn call_members(func: &Func, last: usize) -> RangeInclusive<usize> {
    let ins = &func.body[last];
    let mut first = last;
    while let Some(before) = first.checked_sub(1).map(|j| &func.body[j]) {
        if before.args != ins.args || !before.op.same_call(&ins.op) {
            break;
        }
        first -= 1;
    }
    first..=last
}

fn finish(e: Emitter, outputs: Vec<ValueId>) -> Result<Func, AutodiffError> {
    let func = crate::dce::eliminate_dead_code(&e.b.finish(outputs));
    verify(&func)?;
    Ok(func)
}

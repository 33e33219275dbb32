//! Partial evaluation of a reverse-mode program into a forward half and a backward half, as
//! JAX's `partial_eval_jaxpr_nounits` splits a loop body's VJP: the forward half runs the
//! primal computation and returns the residuals the backward half reads; the backward half
//! runs only what depends on the cotangents, from the residuals.
//!
//! Which primal work is stored and which the backward half computes again is the caller's
//! choice. A scan's reverse mode stores each step's residuals (JAX's rule), except work on the
//! scan's constants alone, computed again in the backward half, where hoisting moves it out of
//! the loop. A `remat` stores only what its policy saves (matrix products, say) and computes
//! the rest again from its operands; inside a scan, its backward call is the backward half's,
//! so a checkpointed body's steps store only its operands and saved values.

use super::emit::R;
use super::AutodiffError;
use ferrax_ir::{BinaryOp, Func, FuncBuilder, Instr, Op, UnaryOp, ValueId};
use std::collections::HashMap;

/// How the program's parameters are reached from the backward half.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Param {
    /// Read directly by the backward half (a scan's constants, a `remat`'s operands).
    Constant,
    /// Read directly by the backward half (a scan's slice of this step), but unlike a
    /// constant, work on it counts as per-step work.
    Available,
    /// Not available in the backward half: stored where read (a scan's carried values).
    Stored,
    /// A cotangent: the backward half's own input.
    Cotangent,
}

/// The two halves of a program.
pub(crate) struct Split {
    /// Takes the program's non-cotangent parameters and returns the program's first
    /// `primal_outputs` outputs followed by the residuals.
    pub forward: Func,
    /// Takes the `Constant` and `Available` parameters (in the program's order), the residuals,
    /// then the cotangent parameters, and returns the program's remaining outputs.
    pub backward: Func,
}

/// Which side computes a value.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    /// Reads a cotangent: backward only.
    Backward,
    /// Primal work the backward half computes again where it needs it.
    Recomputed,
    /// Primal work the forward half computes; stored where the backward half reads it.
    Stored,
    /// A parameter the backward half reads directly.
    Available,
}

fn undefined(v: ValueId) -> AutodiffError {
    AutodiffError::Undefined(v)
}

/// Splits `program`, whose parameters are classified by `params` and whose first
/// `primal_outputs` outputs do not depend on a cotangent. `store(op, constant_only)` says
/// whether a primal instruction of `op` is stored rather than computed again, given whether it
/// reads only constants and work on them. Where `recompute_cheap`, a stored value of a cheap
/// elementwise op whose operands the backward half has anyway is computed again there instead
/// ([`recompute_cheap_residuals`]).
pub(crate) fn split(
    program: &Func,
    params: &[Param],
    primal_outputs: usize,
    store: &dyn Fn(&Op, bool) -> bool,
    recompute_cheap: bool,
) -> R<Split> {
    let program = &deduplicated(program)?;
    let n = program.params.len();
    if params.len() != n || primal_outputs > program.outputs.len() {
        return Err(AutodiffError::Unsupported(format!(
            "partial evaluation of {}: {} parameter classes for {n} parameters",
            program.name,
            params.len()
        )));
    }
    let mut side: Vec<Side> = params
        .iter()
        .map(|p| match p {
            Param::Constant | Param::Available => Side::Available,
            Param::Stored => Side::Stored,
            Param::Cotangent => Side::Backward,
        })
        .collect();
    // Whether a value is a constant or computed from constants alone.
    let mut constant: Vec<bool> = params.iter().map(|p| *p == Param::Constant).collect();
    for ins in &program.body {
        let of = |a: &ValueId| side.get(a.index()).copied().ok_or(undefined(*a));
        let sides: Vec<Side> = ins.args.iter().map(of).collect::<R<_>>()?;
        let constant_only = ins.args.iter().all(|a| constant[a.index()]);
        side.push(if sides.contains(&Side::Backward) {
            Side::Backward
        } else if store(&ins.op, constant_only) {
            Side::Stored
        } else {
            Side::Recomputed
        });
        constant.push(constant_only);
    }
    for o in &program.outputs[..primal_outputs] {
        if side[o.index()] == Side::Backward {
            return Err(AutodiffError::Unsupported(format!(
                "partial evaluation of {}: primal output {o} reads a cotangent",
                program.name
            )));
        }
    }
    let mut needed = needed_by_backward(program, &side, primal_outputs);
    if recompute_cheap {
        recompute_cheap_residuals(program, &mut side, &needed);
        needed = needed_by_backward(program, &side, primal_outputs);
    }
    let residuals: Vec<ValueId> = (0..program.num_values())
        .filter(|&v| needed[v] && side[v] == Side::Stored)
        .map(|v| ValueId(v as u32))
        .collect();
    let forward = forward_half(program, params, &side, primal_outputs, &residuals)?;
    let backward = backward_half(program, params, &side, primal_outputs, &residuals)?;
    Ok(Split { forward, backward })
}

/// Which values the backward half needs (reads, or computes again from); the stored values
/// among them are the residuals.
fn needed_by_backward(program: &Func, side: &[Side], primal_outputs: usize) -> Vec<bool> {
    let n = program.params.len();
    let mut needed = vec![false; program.num_values()];
    for o in &program.outputs[primal_outputs..] {
        needed[o.index()] = true;
    }
    for (i, ins) in program.body.iter().enumerate().rev() {
        if needed[n + i] && matches!(side[n + i], Side::Backward | Side::Recomputed) {
            for a in &ins.args {
                needed[a.index()] = true;
            }
        }
    }
    needed
}

/// Ops a backward half computes again rather than read stored: a few instructions an element,
/// fused into the kernels that read them.
fn cheap(op: &Op) -> bool {
    matches!(
        op,
        Op::Binary(BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Max | BinaryOp::Min)
            | Op::Unary(UnaryOp::Neg | UnaryOp::Abs)
            | Op::Select
            | Op::Compare(_)
            | Op::BroadcastInDim { .. }
    )
}

/// Marks computed again in the backward half each stored value of a [`cheap`] op whose
/// operands the backward half has without storing more: values it reads anyway (`needed`
/// stored values, parameters it reads, work on constants), or values so marked. A scan's
/// `1 - tanh²`, say, is then computed from tanh's stored output rather than stored beside
/// it, as JAX's rule for `tanh` does. The residuals can only shrink: every operand of a value
/// marked is itself a residual already or computed again.
fn recompute_cheap_residuals(program: &Func, side: &mut [Side], needed: &[bool]) {
    let n = program.params.len();
    let at_hand = |v: usize, side: &[Side]| match side[v] {
        Side::Available | Side::Recomputed => true,
        Side::Stored => needed[v],
        Side::Backward => false,
    };
    for (i, ins) in program.body.iter().enumerate() {
        let v = n + i;
        let operands_at_hand = ins.args.iter().all(|a| at_hand(a.index(), side));
        if side[v] == Side::Stored && cheap(&ins.op) && operands_at_hand {
            side[v] = Side::Recomputed;
        }
    }
}

/// `program` with each instruction that repeats an earlier one (the same op on the same
/// operands) read as that one: the derivative rules of a call's results each emit the call's
/// forward values, which would otherwise be stored once per result.
fn deduplicated(program: &Func) -> R<Func> {
    let mut b = FuncBuilder::new(program.name.clone());
    let mut values: Vec<Option<ValueId>> = program
        .params
        .iter()
        .map(|t| Some(b.param(t.clone())))
        .collect();
    let mut seen: HashMap<(&Op, Vec<ValueId>), ValueId> = HashMap::new();
    for ins in &program.body {
        let args = renamed(&ins.args, &values)?;
        let v = match seen.get(&(&ins.op, args.clone())) {
            Some(&v) => v,
            None => {
                let v = b.push(ins.op.clone(), &args)?;
                seen.insert((&ins.op, args), v);
                v
            }
        };
        values.push(Some(v));
    }
    let outputs = renamed(&program.outputs, &values)?;
    Ok(crate::dce::eliminate_dead_code(&b.finish(outputs)))
}

/// `ids` renamed by `values`, each of which must be defined.
fn renamed(ids: &[ValueId], values: &[Option<ValueId>]) -> R<Vec<ValueId>> {
    ids.iter()
        .map(|v| {
            values
                .get(v.index())
                .copied()
                .flatten()
                .ok_or(undefined(*v))
        })
        .collect()
}

/// Appends `ins` to `b` with its operands renamed by `values`.
fn copy(b: &mut FuncBuilder, ins: &Instr, values: &[Option<ValueId>]) -> R {
    let args = renamed(&ins.args, values)?;
    Ok(b.push(ins.op.clone(), &args)?)
}

fn forward_half(
    program: &Func,
    params: &[Param],
    side: &[Side],
    primal_outputs: usize,
    residuals: &[ValueId],
) -> R<Func> {
    let mut b = FuncBuilder::new(format!("{}_forward", program.name));
    let mut values: Vec<Option<ValueId>> = Vec::with_capacity(program.num_values());
    for (ty, p) in program.params.iter().zip(params) {
        values.push((*p != Param::Cotangent).then(|| b.param(ty.clone())));
    }
    let n = program.params.len();
    for (i, ins) in program.body.iter().enumerate() {
        values.push(match side[n + i] {
            Side::Backward | Side::Available => None,
            Side::Stored | Side::Recomputed => Some(copy(&mut b, ins, &values)?),
        });
    }
    let outputs = renamed(
        &[&program.outputs[..primal_outputs], residuals].concat(),
        &values,
    )?;
    Ok(crate::dce::eliminate_dead_code(&b.finish(outputs)))
}

fn backward_half(
    program: &Func,
    params: &[Param],
    side: &[Side],
    primal_outputs: usize,
    residuals: &[ValueId],
) -> R<Func> {
    let mut b = FuncBuilder::new(format!("{}_backward", program.name));
    let mut values: Vec<Option<ValueId>> = vec![None; program.num_values()];
    for (i, (ty, p)) in program.params.iter().zip(params).enumerate() {
        if matches!(p, Param::Constant | Param::Available) {
            values[i] = Some(b.param(ty.clone()));
        }
    }
    for &r in residuals {
        let ty = program.value_type(r).ok_or(undefined(r))?;
        values[r.index()] = Some(b.param(ty.clone()));
    }
    for (i, (ty, p)) in program.params.iter().zip(params).enumerate() {
        if *p == Param::Cotangent {
            values[i] = Some(b.param(ty.clone()));
        }
    }
    let n = program.params.len();
    for (i, ins) in program.body.iter().enumerate() {
        if matches!(side[n + i], Side::Backward | Side::Recomputed) {
            values[n + i] = Some(copy(&mut b, ins, &values)?);
        }
    }
    let outputs = renamed(&program.outputs[primal_outputs..], &values)?;
    Ok(crate::dce::eliminate_dead_code(&b.finish(outputs)))
}

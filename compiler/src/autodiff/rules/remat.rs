//! `remat` (JAX's `checkpoint`). Forward mode is one call of the body's JVP program, yielding
//! the primal results and their tangents. Reverse mode splits the body's VJP program
//! (`partial.rs`): a forward call returns the values the policy saves, and a backward call
//! computes everything else again from the operands and those values. The backward call is a
//! `remat` of its own, so a scan that differentiates a checkpointed body stores per step only
//! what the backward call reads.

use super::{Emitter, R};
use crate::autodiff::partial::{split, Param};
use crate::autodiff::{differentiable, jvp as jvp_program, vjp as vjp_program, AutodiffError};
use ferrax_ir::{FuncBuilder, Op, Remat, TensorType, ValueId};

/// The JVP call (yielding result 0) of `remat` `r`: the body's JVP program, under the same
/// policy, on the operands and their tangents `tangents`.
pub(super) fn jvp_call(r: &Remat, x: &[ValueId], tangents: Vec<ValueId>) -> R<(Op, Vec<ValueId>)> {
    let call = Op::Remat(Box::new(Remat {
        body: jvp_program(&r.body)?,
        policy: r.policy,
        result: 0,
    }));
    let mut args = x.to_vec();
    args.extend(tangents);
    Ok((call, args))
}

pub(super) fn vjp(
    e: &mut Emitter,
    r: &Remat,
    x: &[ValueId],
    g: ValueId,
) -> R<Vec<Option<ValueId>>> {
    let outputs = r.body.output_types();
    let n = outputs.len();
    let program = vjp_program(&r.body)?;
    let classes: Vec<Param> = std::iter::repeat_n(Param::Constant, x.len())
        .chain(std::iter::repeat_n(Param::Cotangent, n))
        .collect();
    let policy = r.policy;
    let halves = split(&program, &classes, n, &|op, _| policy.saves(op), false)?;
    let saved_types = halves.forward.output_types().split_off(n);
    let forward = Op::Remat(Box::new(Remat {
        body: halves.forward,
        policy,
        result: 0,
    }));
    let saved: Vec<ValueId> = (0..saved_types.len())
        .map(|j| e.push(forward.with_result(n + j), x))
        .collect::<R<_>>()?;
    // The backward call: the operands, the saved values and this result's cotangent to one
    // cotangent per operand, the other results' cotangents zeros.
    let operand_types: Vec<TensorType> = x.iter().map(|&v| e.ty(v)).collect::<R<_>>()?;
    let mut b = FuncBuilder::new(format!("{}_backward", r.body.name));
    let mut args: Vec<ValueId> = operand_types
        .iter()
        .chain(&saved_types)
        .map(|t| b.param(t.clone()))
        .collect();
    let g_type = outputs
        .get(r.result)
        .cloned()
        .ok_or(AutodiffError::Undefined(g))?;
    let g_param = b.param(g_type);
    for (k, ty) in outputs.iter().enumerate() {
        args.push(match k == r.result {
            true => g_param,
            false => {
                let zero = ferrax_ir::Literal::splat(
                    ferrax_ir::Scalar::from_f64(ty.dtype, 0.0),
                    ty.shape.clone(),
                );
                b.push(Op::Constant(zero), &[])?
            }
        });
    }
    let cts = b.inline(&halves.backward, &args)?;
    let backward = Op::Remat(Box::new(Remat {
        body: b.finish(cts),
        policy,
        result: 0,
    }));
    let mut operands = x.to_vec();
    operands.extend(saved);
    operands.push(g);
    operand_types
        .iter()
        .enumerate()
        .map(|(i, ty)| match differentiable(ty.dtype) {
            true => e.push(backward.with_result(i), &operands).map(Some),
            false => Ok(None),
        })
        .collect()
}

//! `cond`, `while` and `remat`, as JAX batches them. A `remat` is a call of its batched body. A `cond` on an unbatched index stays a `cond` of
//! batched branches (an output batched in any branch is batched in all). On a batched index
//! each example may take another branch, so every branch runs on the batch and a select per
//! example picks the results. A `while` whose predicate stays unbatched loops over batched
//! carried values (a carried value is batched if its initial value or the body makes it so:
//! found by iterating to a fixed point). With a batched predicate the loop runs until no
//! example's predicate holds, and each step keeps the carried values of the examples already
//! done.

use super::{BVal, BatchError, Batcher, R};
use crate::batching::{batch_func, OutAxis};
use ferrax_ir::{Cond, DType, Func, FuncBuilder, Op, ReduceOp, Remat, ValueId, While};

/// The batch axes of region parameters: 0 where batched.
fn axes(batched: &[bool]) -> Vec<Option<usize>> {
    batched.iter().map(|&b| b.then_some(0)).collect()
}

/// Outputs at 0 where `batched`, left as they come elsewhere.
fn outs(batched: &[bool]) -> Vec<OutAxis> {
    batched
        .iter()
        .map(|&b| if b { OutAxis::At(0) } else { OutAxis::Auto })
        .collect()
}

/// The operands with their batch dimension first where batched.
fn leading(bt: &mut Batcher, args: &[BVal]) -> R<(Vec<ValueId>, Vec<bool>)> {
    let mut values = Vec::with_capacity(args.len());
    for a in args {
        values.push(match a.bdim {
            Some(_) => bt.materialize(*a, 0)?,
            None => a.v,
        });
    }
    Ok((values, args.iter().map(|a| a.bdim.is_some()).collect()))
}

/// One instruction per result of the call `op(k)` on `args`, batched where `batched`.
fn results(
    bt: &mut Batcher,
    op: impl Fn(usize) -> Op,
    args: &[ValueId],
    batched: &[bool],
) -> R<Vec<BVal>> {
    let mut out = Vec::with_capacity(batched.len());
    for (k, &b) in batched.iter().enumerate() {
        let v = bt.push(op(k), args)?;
        out.push(BVal {
            v,
            bdim: b.then_some(0),
        });
    }
    Ok(out)
}

/// `remat` stays a call of its body batched, under the same policy.
pub(super) fn remat(bt: &mut Batcher, r: &Remat, args: &[BVal]) -> R<Vec<BVal>> {
    let (values, in_batched) = leading(bt, args)?;
    let in_axes = axes(&in_batched);
    let auto = vec![OutAxis::Auto; r.body.outputs.len()];
    let (_, batched) = batch_func(&r.body, &in_axes, bt.size, &auto)?;
    let body = batch_func(&r.body, &in_axes, bt.size, &outs(&batched))?.0;
    let op = |k| {
        Op::Remat(Box::new(Remat {
            body: body.clone(),
            policy: r.policy,
            result: k,
        }))
    };
    results(bt, op, &values, &batched)
}

pub(super) fn cond(bt: &mut Batcher, c: &Cond, args: &[BVal]) -> R<Vec<BVal>> {
    let Some((&index, operands)) = args.split_first() else {
        return Err(BatchError::Malformed("cond: no index".into()));
    };
    let (values, in_batched) = leading(bt, operands)?;
    let in_axes = axes(&in_batched);
    let n_out = c.branches.first().map_or(0, |b| b.outputs.len());
    if index.bdim.is_none() {
        let mut batched = vec![false; n_out];
        for branch in &c.branches {
            let auto = vec![OutAxis::Auto; n_out];
            let (_, b) = batch_func(branch, &in_axes, bt.size, &auto)?;
            batched.iter_mut().zip(b).for_each(|(x, y)| *x |= y);
        }
        let branches = c
            .branches
            .iter()
            .map(|f| Ok(batch_func(f, &in_axes, bt.size, &outs(&batched))?.0))
            .collect::<R<Vec<Func>>>()?;
        let mut call_args = vec![index.v];
        call_args.extend(values);
        let op = |k| {
            Op::Cond(Box::new(Cond {
                branches: branches.clone(),
                result: k,
            }))
        };
        return results(bt, op, &call_args, &batched);
    }
    // Every branch on the whole batch, then each example's branch picked.
    let all = vec![OutAxis::At(0); n_out];
    let is_bool = bt.ty(index.v)?.dtype == DType::Bool;
    let mut picked: Option<Vec<ValueId>> = None;
    for (k, branch) in c.branches.iter().enumerate().rev() {
        let f = batch_func(branch, &in_axes, bt.size, &all)?.0;
        let out = bt.inline(&f, &values)?;
        picked = Some(match picked {
            None => out,
            // A bool predicate picks branch 1 when true (there are two branches).
            Some(rest) if is_bool => out
                .iter()
                .zip(&rest)
                .map(|(&o, &r)| bt.select(index.v, r, o))
                .collect::<R<_>>()?,
            // An index out of range picks the last branch.
            Some(rest) => {
                let is_k = bt.lane_equals(index.v, k)?;
                out.iter()
                    .zip(&rest)
                    .map(|(&o, &r)| bt.select(is_k, o, r))
                    .collect::<R<_>>()?
            }
        });
    }
    Ok(picked
        .unwrap_or_default()
        .into_iter()
        .map(|v| BVal::at(v, 0))
        .collect())
}

pub(super) fn while_loop(bt: &mut Batcher, w: &While, args: &[BVal]) -> R<Vec<BVal>> {
    let (_, mut batched) = leading(bt, args)?;
    // The carried values the body makes batched, to a fixed point.
    loop {
        let (_, b) = batch_func(&w.body, &axes(&batched), bt.size, &outs(&batched))?;
        let next: Vec<bool> = batched.iter().zip(&b).map(|(x, y)| *x || *y).collect();
        if next == batched {
            break;
        }
        batched = next;
    }
    let (_, pred) = batch_func(&w.cond, &axes(&batched), bt.size, &[OutAxis::Auto])?;
    if pred.first().copied().unwrap_or(false) {
        batched = vec![true; args.len()];
    }
    let mut values = Vec::with_capacity(args.len());
    for (a, &b) in args.iter().zip(&batched) {
        values.push(if b { bt.materialize(*a, 0)? } else { a.v });
    }
    let in_axes = axes(&batched);
    let body = batch_func(&w.body, &in_axes, bt.size, &outs(&batched))?.0;
    let cond = batch_func(&w.cond, &in_axes, bt.size, &[OutAxis::Auto])?.0;
    let (cond, body) = if pred.first().copied().unwrap_or(false) {
        lanes_until_done(bt.size, &cond, &body)?
    } else {
        (cond, body)
    };
    let op = |k| {
        Op::While(Box::new(While {
            cond: cond.clone(),
            body: body.clone(),
            result: k,
        }))
    };
    results(bt, op, &values, &batched)
}

/// For a batched predicate `cond` (`bool[B]`) over batched carried values: a condition that
/// holds while any example's does, and a body that steps only the examples whose does.
fn lanes_until_done(size: usize, cond: &Func, body: &Func) -> R<(Func, Func)> {
    let mut c = Batcher::new(FuncBuilder::new(cond.name.clone()), size);
    let params: Vec<ValueId> = cond.params.iter().map(|t| c.b.param(t.clone())).collect();
    let pred = c.inline(cond, &params)?;
    let any = c.push(
        Op::Reduce {
            op: ReduceOp::Max,
            axes: vec![0],
        },
        &pred,
    )?;
    let new_cond = c.b.finish(vec![any]);

    let mut s = Batcher::new(FuncBuilder::new(body.name.clone()), size);
    let params: Vec<ValueId> = body.params.iter().map(|t| s.b.param(t.clone())).collect();
    let pred = s.inline(cond, &params)?;
    let pred = *pred
        .first()
        .ok_or_else(|| BatchError::Malformed("while: a condition without a result".into()))?;
    let stepped = s.inline(body, &params)?;
    let mut kept = Vec::with_capacity(params.len());
    for (&new, &old) in stepped.iter().zip(&params) {
        kept.push(if new == old {
            old
        } else {
            s.select(pred, new, old)?
        });
    }
    Ok((new_cond, s.b.finish(kept)))
}

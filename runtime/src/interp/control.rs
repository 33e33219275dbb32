//! `while`, `cond`, `scan` and `remat`: their functions run on the interpreter, one call giving all its
//! results. A loop's iterations run one after another in a Rust loop, so the stack does not
//! grow with the trip count; functions nest a bounded depth (the shape rules' limit).

use super::run;
use crate::{Array, RuntimeError};
use ferrax_ir::{Cond, Op, Scalar, Scan, Shape, While};

/// Every result of the call `op` (a `while`, `cond`, `scan` or `remat`) on `args`; for other ops, `op`'s one
/// result. The functions are taken as verified (the enclosing function's verification
/// covers them).
pub(super) fn call(op: &Op, args: &[&Array]) -> Result<Vec<Array>, RuntimeError> {
    let owned: Vec<Array> = args.iter().map(|&a| a.clone()).collect();
    match op {
        Op::While(w) => while_loop(w, owned),
        Op::Cond(c) => cond(c, owned),
        Op::Scan(s) => scan(s, owned),
        Op::Remat(r) => run(&r.body, owned),
        op => Ok(vec![super::eval_op(op, args)?]),
    }
}

fn while_loop(w: &While, mut carried: Vec<Array>) -> Result<Vec<Array>, RuntimeError> {
    loop {
        let holds = run(&w.cond, carried.clone())?;
        let Some(Scalar::Bool(true)) = holds.first().map(|p| p.elements().get(0)) else {
            return Ok(carried);
        };
        carried = run(&w.body, carried)?;
    }
}

fn cond(c: &Cond, mut args: Vec<Array>) -> Result<Vec<Array>, RuntimeError> {
    if args.is_empty() {
        return Err(RuntimeError::ArgCount {
            expected: 1,
            got: 0,
        });
    }
    let index = args.remove(0);
    let branch = c
        .branches
        .get(branch_index(&index, c.branches.len()))
        .ok_or(RuntimeError::ArgCount {
            expected: 1,
            got: 0,
        })?;
    run(branch, args)
}

/// The branch of `branches` that a `cond`'s operand 0 picks: a `bool[]` predicate picks 0 for
/// false and 1 for true, an `i32[]` index its branch, an index out of range the last branch
/// (StableHLO's `case`).
pub fn branch_index(index: &Array, branches: usize) -> usize {
    let last = branches.saturating_sub(1);
    match index.elements().get(0) {
        Scalar::Bool(p) => usize::from(p),
        Scalar::I32(i) => usize::try_from(i).map_or(last, |i| i.min(last)),
        _ => last,
    }
}

/// Slice `t` of `x` along its leading dimension, without that dimension.
fn row(x: &Array, t: usize) -> Result<Array, RuntimeError> {
    let dims = x.dims();
    let mut start = vec![0; dims.len()];
    let mut limit = dims.to_vec();
    if let (Some(s), Some(l)) = (start.first_mut(), limit.first_mut()) {
        (*s, *l) = (t, t + 1);
    }
    let strides = vec![1; dims.len()];
    let slice = super::eval_op(
        &Op::Slice {
            start,
            limit,
            strides,
        },
        &[x],
    )?;
    let shape = Shape::new(dims.get(1..).unwrap_or_default().to_vec());
    super::eval_op(&Op::Reshape { shape }, &[&slice])
}

/// `rows` (one per step, in step order) stacked along a new leading dimension in index
/// order, as `ty`'s slices (a scan of no steps stacks none).
fn stack(rows: &[Array], ty: &ferrax_ir::TensorType, length: usize) -> Result<Array, RuntimeError> {
    let mut dims = vec![length];
    dims.extend_from_slice(ty.dims());
    if rows.is_empty() {
        return Ok(Array::zeros(ty.dtype, dims));
    }
    let mut one = vec![1];
    one.extend_from_slice(ty.dims());
    let lifted = rows
        .iter()
        .map(|r| {
            super::eval_op(
                &Op::Reshape {
                    shape: Shape::new(one.clone()),
                },
                &[r],
            )
        })
        .collect::<Result<Vec<_>, _>>()?;
    let refs: Vec<&Array> = lifted.iter().collect();
    super::eval_op(&Op::Concatenate { axis: 0 }, &refs)
}

fn scan(s: &Scan, args: Vec<Array>) -> Result<Vec<Array>, RuntimeError> {
    let (consts, rest) = args.split_at(s.consts.min(args.len()));
    let (carried, xs) = rest.split_at(s.carry.min(rest.len()));
    let mut carried = carried.to_vec();
    let outputs = s.body.output_types();
    let per_step = outputs.get(s.carry..).unwrap_or_default();
    let mut ys: Vec<Vec<Array>> = vec![Vec::with_capacity(s.length); per_step.len()];
    for step in 0..s.length {
        let t = if s.reverse { s.length - 1 - step } else { step };
        let mut inputs = consts.to_vec();
        inputs.extend(carried);
        for x in xs {
            inputs.push(row(x, t)?);
        }
        let mut out = run(&s.body, inputs)?;
        let y = out.split_off(s.carry.min(out.len()));
        carried = out;
        for (stacked, y) in ys.iter_mut().zip(y) {
            stacked.push(y);
        }
    }
    for (rows, ty) in ys.iter_mut().zip(per_step) {
        if s.reverse {
            rows.reverse();
        }
        carried.push(stack(rows, ty, s.length)?);
    }
    Ok(carried)
}

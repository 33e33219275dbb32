//! `while` and `cond`: their functions run on the interpreter, one call giving all its
//! results. A loop's iterations run one after another in a Rust loop, so the stack does not
//! grow with the trip count; functions nest a bounded depth (the shape rules' limit).

use super::run;
use crate::{Array, RuntimeError};
use ferrax_ir::{Cond, Op, Scalar, While};

/// Every result of the call `op` (a `while` or `cond`) on `args`; for other ops, `op`'s one
/// result. The functions are taken as verified (the enclosing function's verification
/// covers them).
pub(super) fn call(op: &Op, args: &[&Array]) -> Result<Vec<Array>, RuntimeError> {
    let owned: Vec<Array> = args.iter().map(|&a| a.clone()).collect();
    match op {
        Op::While(w) => while_loop(w, owned),
        Op::Cond(c) => cond(c, owned),
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
    let last = c.branches.len().saturating_sub(1);
    let k = match index.elements().get(0) {
        Scalar::Bool(p) => usize::from(p),
        Scalar::I32(i) => usize::try_from(i).map_or(last, |i| i.min(last)),
        _ => last,
    };
    let branch = c.branches.get(k).ok_or(RuntimeError::ArgCount {
        expected: 1,
        got: 0,
    })?;
    run(branch, args)
}

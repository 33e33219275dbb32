//! Reductions: the reduced axes are renumbered around the batch dimension, which stays (one
//! place earlier for each reduced axis before it).

use super::{BVal, Batcher, R};
use crate::batching::builder::shifted;
use ferrax_ir::{Op, ReduceOp};

pub(super) fn batch(bt: &mut Batcher, op: ReduceOp, axes: &[usize], x: BVal) -> R<BVal> {
    let new_axes: Vec<usize> = axes.iter().map(|&a| shifted(a, x.bdim)).collect();
    let v = bt.push(Op::Reduce { op, axes: new_axes }, &[x.v])?;
    let bdim = x
        .bdim
        .map(|b| b - axes.iter().filter(|&&a| shifted(a, x.bdim) < b).count());
    Ok(BVal { v, bdim })
}

//! `dot_general`: two batched operands pair their batch dimensions as a batch dimension of
//! the product (a batched matrix product); one batched operand keeps its batch dimension as a
//! free dimension (a matrix product with the examples as rows), so the unbatched operand is
//! read once for all examples.

use super::{BVal, Batcher, R};
use crate::batching::builder::shifted;
use ferrax_ir::{DotDims, Op};

/// The position of `d` among the free dimensions of an operand of rank `rank` (those neither
/// batch nor contracting).
fn free_position(d: usize, rank: usize, batch: &[usize], contract: &[usize]) -> usize {
    (0..d)
        .filter(|k| *k < rank && !batch.contains(k) && !contract.contains(k))
        .count()
}

fn free_count(rank: usize, batch: &[usize], contract: &[usize]) -> usize {
    free_position(rank, rank, batch, contract)
}

pub(super) fn batch(bt: &mut Batcher, dims: &DotDims, lhs: BVal, rhs: BVal) -> R<BVal> {
    let map = |list: &[usize], bdim: Option<usize>| -> Vec<usize> {
        list.iter().map(|&d| shifted(d, bdim)).collect()
    };
    let mut new = DotDims {
        lhs_batch: map(&dims.lhs_batch, lhs.bdim),
        rhs_batch: map(&dims.rhs_batch, rhs.bdim),
        lhs_contract: map(&dims.lhs_contract, lhs.bdim),
        rhs_contract: map(&dims.rhs_contract, rhs.bdim),
    };
    let (lhs_rank, rhs_rank) = (bt.ty(lhs.v)?.rank(), bt.ty(rhs.v)?.rank());
    let bdim = match (lhs.bdim, rhs.bdim) {
        (Some(l), Some(r)) => {
            new.lhs_batch.insert(0, l);
            new.rhs_batch.insert(0, r);
            0
        }
        (Some(l), None) => {
            new.lhs_batch.len() + free_position(l, lhs_rank, &new.lhs_batch, &new.lhs_contract)
        }
        (None, Some(r)) => {
            new.lhs_batch.len()
                + free_count(lhs_rank, &new.lhs_batch, &new.lhs_contract)
                + free_position(r, rhs_rank, &new.rhs_batch, &new.rhs_contract)
        }
        (None, None) => {
            let v = bt.push(Op::DotGeneral(new), &[lhs.v, rhs.v])?;
            return Ok(BVal { v, bdim: None });
        }
    };
    Ok(BVal::at(
        bt.push(Op::DotGeneral(new), &[lhs.v, rhs.v])?,
        bdim,
    ))
}

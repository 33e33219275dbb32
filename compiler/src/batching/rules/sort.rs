//! Sorting: the batch dimension is one more independent line position, so the sorted
//! dimension is renumbered around it and the batch dimension stays where it is.

use super::{BVal, Batcher, R};
use crate::batching::builder::shifted;
use ferrax_ir::Op;

/// `with_dimension` of the sorted dimension renumbered around `x`'s batch dimension.
pub(super) fn batch(
    bt: &mut Batcher,
    dimension: usize,
    x: BVal,
    with_dimension: impl Fn(usize) -> Op,
) -> R<BVal> {
    let v = bt.push(with_dimension(shifted(dimension, x.bdim)), &[x.v])?;
    Ok(BVal { v, bdim: x.bdim })
}

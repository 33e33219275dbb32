//! `triangular_solve`, `householder_product` and the decompositions (`cholesky`, `lu`, `qr`,
//! `eigh`, `svd`, `geqrf`, `eig`) take leading batch dimensions, so the examples of a `vmap`
//! become one more, in front (an unbatched operand is broadcast along it).

use super::{BVal, Batcher, R};
use ferrax_ir::Op;

/// `op` (a solve, a product of reflections, or one part of a decomposition) of the matrices of
/// `args`.
pub(super) fn leading(bt: &mut Batcher, op: Op, args: &[BVal]) -> R<BVal> {
    let args = args
        .iter()
        .map(|&a| bt.materialize(a, 0))
        .collect::<Result<Vec<_>, _>>()?;
    let v = bt.push(op, &args)?;
    Ok(BVal::at(v, 0))
}

//! `triangular_solve` and the decompositions (`cholesky`, `lu`, `qr`, `eigh`, `svd`) take
//! leading batch dimensions, so the examples of a `vmap` become one more, in front (an
//! unbatched operand of a solve is broadcast along it).

use super::{BVal, Batcher, R};
use ferrax_ir::{Op, TriangularSolve};

pub(super) fn triangular_solve(bt: &mut Batcher, s: TriangularSolve, a: BVal, b: BVal) -> R<BVal> {
    let a = bt.materialize(a, 0)?;
    let b = bt.materialize(b, 0)?;
    let v = bt.push(Op::TriangularSolve(s), &[a, b])?;
    Ok(BVal::at(v, 0))
}

/// A decomposition (`cholesky`, `lu`, `qr`, `eigh`, `svd`: one part of it, `op`) of the
/// matrices of `a`.
pub(super) fn decomposition(bt: &mut Batcher, op: Op, a: BVal) -> R<BVal> {
    let a = bt.materialize(a, 0)?;
    let v = bt.push(op, &[a])?;
    Ok(BVal::at(v, 0))
}

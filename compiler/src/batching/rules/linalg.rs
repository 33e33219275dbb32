//! `triangular_solve` takes leading batch dimensions on both operands, so the examples of a
//! `vmap` become one more, in front (an unbatched operand is broadcast along it).

use super::{BVal, Batcher, R};
use ferrax_ir::{Op, TriangularSolve};

pub(super) fn triangular_solve(bt: &mut Batcher, s: TriangularSolve, a: BVal, b: BVal) -> R<BVal> {
    let a = bt.materialize(a, 0)?;
    let b = bt.materialize(b, 0)?;
    let v = bt.push(Op::TriangularSolve(s), &[a, b])?;
    Ok(BVal::at(v, 0))
}

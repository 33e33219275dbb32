//! `triangular_solve`, `cholesky`, `lu`, `qr`, `eigh` and `svd` take leading batch dimensions, so the examples of a `vmap`
//! become one more, in front (an unbatched operand of a solve is broadcast along it).

use super::{BVal, Batcher, R};
use ferrax_ir::{EighPart, LuPart, Op, Qr, Svd, TriangularSolve};

pub(super) fn triangular_solve(bt: &mut Batcher, s: TriangularSolve, a: BVal, b: BVal) -> R<BVal> {
    let a = bt.materialize(a, 0)?;
    let b = bt.materialize(b, 0)?;
    let v = bt.push(Op::TriangularSolve(s), &[a, b])?;
    Ok(BVal::at(v, 0))
}

pub(super) fn cholesky(bt: &mut Batcher, a: BVal) -> R<BVal> {
    let a = bt.materialize(a, 0)?;
    let v = bt.push(Op::Cholesky, &[a])?;
    Ok(BVal::at(v, 0))
}

pub(super) fn lu(bt: &mut Batcher, part: LuPart, a: BVal) -> R<BVal> {
    let a = bt.materialize(a, 0)?;
    let v = bt.push(Op::Lu(part), &[a])?;
    Ok(BVal::at(v, 0))
}

pub(super) fn qr(bt: &mut Batcher, qr: Qr, a: BVal) -> R<BVal> {
    let a = bt.materialize(a, 0)?;
    let v = bt.push(Op::Qr(qr), &[a])?;
    Ok(BVal::at(v, 0))
}

pub(super) fn svd(bt: &mut Batcher, svd: Svd, a: BVal) -> R<BVal> {
    let a = bt.materialize(a, 0)?;
    let v = bt.push(Op::Svd(svd), &[a])?;
    Ok(BVal::at(v, 0))
}

pub(super) fn eigh(bt: &mut Batcher, part: EighPart, a: BVal) -> R<BVal> {
    let a = bt.materialize(a, 0)?;
    let v = bt.push(Op::Eigh(part), &[a])?;
    Ok(BVal::at(v, 0))
}

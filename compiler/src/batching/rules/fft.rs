//! Fourier transforms: they cover trailing dimensions, so a batch dimension among the leading
//! ones stays where it is; one among the transformed ones moves to the front first.

use super::{BVal, Batcher, R};
use ferrax_ir::{FftKind, Op};

pub(super) fn batch(bt: &mut Batcher, kind: FftKind, lengths: &[usize], x: BVal) -> R<BVal> {
    let op = Op::Fft {
        kind,
        lengths: lengths.to_vec(),
    };
    let rank = bt.rank(x)?;
    let x = match x.bdim {
        Some(d) if d + lengths.len() > rank => BVal::at(bt.materialize(x, 0)?, 0),
        _ => x,
    };
    let v = bt.push(op, &[x.v])?;
    Ok(BVal { v, bdim: x.bdim })
}

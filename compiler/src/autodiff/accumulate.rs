//! Summing the cotangent contributions of one value. A slice's contribution is its cotangent
//! padded with zeros to the sliced value's shape; summed pairwise, N slices of one value (the
//! steps of an unrolled loop reading `xs[t]`) would cost N full-size pads and adds, O(N²).
//! Contributions that are zero pads of disjoint ranges along one axis, full along the others,
//! are instead laid side by side in one `concatenate` with zero gaps: O(N).

use super::emit::{Emitter, R};
use ferrax_ir::{Op, ValueId};

/// A contribution that is `piece` padded with zeros by `low` before it along `axis` and
/// nothing along the other axes.
struct Padded {
    piece: ValueId,
    axis: usize,
    low: usize,
    len: usize,
}

/// The sum of `contributions` (at least one), all of one type.
pub(super) fn sum(e: &mut Emitter, contributions: &[ValueId]) -> R<Option<ValueId>> {
    let mut padded: Vec<(ValueId, Padded)> = Vec::new();
    let mut others: Vec<ValueId> = Vec::new();
    for &c in contributions {
        match padded_piece(e, c) {
            Some(p) if padded.first().is_none_or(|(_, q)| q.axis == p.axis) => {
                padded.push((c, p));
            }
            _ => others.push(c),
        }
    }
    padded.sort_by_key(|(_, p)| p.low);
    let disjoint = padded
        .windows(2)
        .all(|w| w[0].1.low + w[0].1.len <= w[1].1.low);
    if padded.len() >= 2 && disjoint {
        let pieces: Vec<&Padded> = padded.iter().map(|(_, p)| p).collect();
        others.push(side_by_side(e, &pieces, padded[0].0)?);
    } else {
        others.extend(padded.iter().map(|&(c, _)| c));
    }
    let mut total: Option<ValueId> = None;
    for c in others {
        total = Some(match total {
            Some(t) => e.add(t, c)?,
            None => c,
        });
    }
    Ok(total)
}

/// `c` as a [`Padded`] if it is a pad by zeros, without interior padding, along one axis.
fn padded_piece(e: &Emitter, c: ValueId) -> Option<Padded> {
    let ins = e.b.instr(c)?;
    let Op::Pad {
        low,
        high,
        interior,
    } = &ins.op
    else {
        return None;
    };
    let (&piece, &value) = (ins.args.first()?, ins.args.get(1)?);
    let zero = match &e.b.instr(value)?.op {
        // +0 only: a -0 pad would add nothing where the gap's +0 stands.
        Op::Constant(lit) => lit.is_splat() && lit.data.get(0).to_f64().to_bits() == 0,
        _ => false,
    };
    let padded_axes: Vec<usize> = (0..low.len())
        .filter(|&k| low[k] != 0 || high[k] != 0)
        .collect();
    let plain = interior.iter().all(|&i| i == 0)
        && low.iter().chain(high).all(|&l| l >= 0)
        && padded_axes.len() <= 1;
    if !(zero && plain) {
        return None;
    }
    let axis = padded_axes.first().copied().unwrap_or(0);
    let len = *e.b.value_type(piece)?.dims().get(axis)?;
    Some(Padded {
        piece,
        axis,
        low: usize::try_from(*low.get(axis)?).ok()?,
        len,
    })
}

/// The pieces laid out along their axis with zeros between them, in the type of `like`.
fn side_by_side(e: &mut Emitter, padded: &[&Padded], like: ValueId) -> R {
    let ty = e.ty(like)?;
    let axis = padded[0].axis;
    let total = ty.dims()[axis];
    let mut parts = Vec::with_capacity(2 * padded.len() + 1);
    let mut at = 0;
    let gap = |e: &mut Emitter, len: usize, parts: &mut Vec<ValueId>| -> R<()> {
        if len > 0 {
            let mut dims = ty.dims().to_vec();
            dims[axis] = len;
            parts.push(e.splat(0.0, &ty.with_shape(dims))?);
        }
        Ok(())
    };
    for p in padded {
        gap(e, p.low.saturating_sub(at), &mut parts)?;
        parts.push(p.piece);
        at = p.low + p.len;
    }
    gap(e, total.saturating_sub(at), &mut parts)?;
    e.push(Op::Concatenate { axis }, &parts)
}

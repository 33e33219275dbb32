//! Sorting, differentiated as JAX does through the permutation: the sorted values' tangent is
//! the tangent gathered by the stable permutation that sorts the operand, and the cotangent
//! flows back through the inverse permutation (itself the stable sort of the permutation,
//! a gather rather than a scatter). The permutation, an integer, has no derivative.

use super::{Emitter, R};
use ferrax_ir::{Gather, Op, ValueId};

/// The permutation sorting `x` along `dimension`, and `v` gathered by it.
fn permuted(e: &mut Emitter, perm: ValueId, v: ValueId, dimension: usize) -> R {
    let rank = e.ty(v)?.rank();
    let gather = Gather::along_axis(rank, dimension);
    e.push(Op::Gather(Box::new(gather)), &[v, perm])
}

pub(super) fn jvp(
    e: &mut Emitter,
    dimension: usize,
    descending: bool,
    x: ValueId,
    t: Option<ValueId>,
) -> R<Option<ValueId>> {
    let Some(t) = t else {
        return Ok(None);
    };
    let perm = e.push(
        Op::Argsort {
            dimension,
            descending,
        },
        &[x],
    )?;
    Ok(Some(permuted(e, perm, t, dimension)?))
}

pub(super) fn vjp(
    e: &mut Emitter,
    dimension: usize,
    descending: bool,
    x: ValueId,
    g: ValueId,
) -> R {
    let perm = e.push(
        Op::Argsort {
            dimension,
            descending,
        },
        &[x],
    )?;
    let inverse = e.push(
        Op::Argsort {
            dimension,
            descending: false,
        },
        &[perm],
    )?;
    permuted(e, inverse, g, dimension)
}

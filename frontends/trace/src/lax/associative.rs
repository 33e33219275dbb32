//! `lax.associative_scan`: all prefix combinations of an associative `fn` in `O(log n)`
//! rounds of whole-array calls, the work-efficient odd/even scheme JAX uses. Each level
//! combines adjacent pairs (halving the length) on the way down, then fills in the even
//! positions on the way up; the levels are kept in a list, not on the call stack.

use crate::tree_util::failed_like;
use crate::{Error, Tensor, Tree};
use std::panic::Location;

/// `jax.lax.associative_scan(fn, elems, reverse, axis)`: `[e0, fn(e0, e1), fn(fn(e0, e1),
/// e2), ...]` along `axis` of every leaf of `elems` (all of one length there). `fn` takes two
/// trees of `elems`' structure whose leaves are stacked along `axis` and combines them
/// elementwise; it must be associative. `reverse` scans from the end.
#[track_caller]
pub fn associative_scan<T: Tree>(f: impl Fn(T, T) -> T, elems: T, reverse: bool, axis: i64) -> T {
    let location = Location::caller();
    match scan_leaves(&f, &elems, reverse, axis, location) {
        Ok(t) => t,
        Err(e) => failed_like(&elems, e),
    }
}

fn scan_leaves<T: Tree>(
    f: &impl Fn(T, T) -> T,
    elems: &T,
    reverse: bool,
    axis: i64,
    location: &'static Location<'static>,
) -> Result<T, Error> {
    let fail = |message: String| Error::Trace { location, message };
    let mut leaves = Vec::new();
    let def = elems.flatten(&mut leaves);
    let Some(first) = leaves.first() else {
        return T::unflatten(&def, &mut leaves.into_iter());
    };
    let rank = first.ndim() as i64;
    let a = if axis < 0 { axis + rank } else { axis };
    if !(0..rank).contains(&a) {
        return Err(fail(format!(
            "associative_scan: axis {axis} of {}",
            first.ty()
        )));
    }
    let axis = a as usize;
    let n = first.shape()[axis];
    if let Some(l) = leaves
        .iter()
        .find(|l| l.ndim() <= axis || l.shape()[axis] != n)
    {
        return Err(fail(format!(
            "associative_scan: every leaf needs length {n} along axis {axis}, not {}",
            l.ty()
        )));
    }
    let leaves: Vec<Tensor> = match reverse {
        true => leaves.iter().map(|l| l.flip([axis])).collect(),
        false => leaves,
    };
    if let Some(e) = leaves.iter().find_map(Tensor::error) {
        return Err(e.clone());
    }
    let combine = |a: Vec<Tensor>, b: Vec<Tensor>| -> Result<Vec<Tensor>, Error> {
        if let Some(e) = a.iter().chain(&b).find_map(Tensor::error) {
            return Err(e.clone());
        }
        let types: Vec<_> = a.iter().map(|l| l.ty().clone()).collect();
        let (a, b) = (
            T::unflatten(&def, &mut a.into_iter())?,
            T::unflatten(&def, &mut b.into_iter())?,
        );
        let mut leaves = Vec::new();
        let out_def = f(a, b).flatten(&mut leaves);
        if out_def != def {
            return Err(fail(format!(
                "associative_scan: fn returns {out_def}, not the elements' structure {def}"
            )));
        }
        if let Some((l, t)) = leaves.iter().zip(&types).find(|(l, t)| l.ty() != *t) {
            return Err(fail(format!(
                "associative_scan: fn returns a {} leaf for operands of {t}",
                l.ty()
            )));
        }
        match leaves.iter().find_map(Tensor::error) {
            Some(e) => Err(e.clone()),
            None => Ok(leaves),
        }
    };
    let scanned = odd_even_scan(&combine, leaves, axis)?;
    let scanned: Vec<Tensor> = match reverse {
        true => scanned.iter().map(|l| l.flip([axis])).collect(),
        false => scanned,
    };
    T::unflatten(&def, &mut scanned.into_iter())
}

/// The elements `start, start + step, ...` before `stop` along `axis`.
fn strided(x: &Tensor, axis: usize, start: usize, stop: usize, step: usize) -> Tensor {
    let mut s = vec![0; x.ndim()];
    let mut limit = x.shape().to_vec();
    let mut strides = vec![1; x.ndim()];
    s[axis] = start.min(stop);
    limit[axis] = stop;
    strides[axis] = step;
    x.slice_strided(&s, &limit, &strides)
}

/// `even` and `odd` interleaved along `axis`: `even[0], odd[0], even[1], ...` (`even` as long
/// as `odd` or one longer).
fn interleave(even: &Tensor, odd: &Tensor, axis: usize) -> Tensor {
    let (ne, no) = (even.shape()[axis], odd.shape()[axis]);
    let pairs = strided(even, axis, 0, no, 1);
    let mut shape = pairs.shape().to_vec();
    shape[axis] = 2 * no;
    let woven = Tensor::stack(&[pairs, odd.clone()], axis as i64 + 1).reshape(shape);
    match ne > no {
        true => Tensor::concatenate(&[woven, strided(even, axis, no, ne, 1)], axis as i64),
        false => woven,
    }
}

type Leaves = Vec<Tensor>;

fn odd_even_scan(
    combine: &impl Fn(Leaves, Leaves) -> Result<Leaves, Error>,
    elems: Leaves,
    axis: usize,
) -> Result<Leaves, Error> {
    let len = |l: &Leaves| l.first().map_or(0, |x| x.shape()[axis]);
    // Down: each level combines the pairs (0, 1), (2, 3), ... of the one above.
    let mut levels = vec![elems];
    while let Some(top) = levels.last().filter(|l| len(l) >= 2) {
        let n = len(top);
        let left = top.iter().map(|x| strided(x, axis, 0, n - 1, 2)).collect();
        let right = top.iter().map(|x| strided(x, axis, 1, n, 2)).collect();
        let reduced = combine(left, right)?;
        // Each level halves the length (combine checks the types), so the loop ends.
        debug_assert_eq!(len(&reduced), n / 2);
        levels.push(reduced);
    }
    // Up: a level's scan gives the odd positions of the level above; the even ones (past
    // the first) combine the odd scan before them with the element there.
    let mut scanned = levels.pop().unwrap_or_default();
    while let Some(elems) = levels.pop() {
        let n = len(&elems);
        let odd = scanned;
        let prefix: Leaves = odd
            .iter()
            .map(|x| strided(x, axis, 0, (n - 1) / 2, 1))
            .collect();
        let later: Leaves = elems.iter().map(|x| strided(x, axis, 2, n, 2)).collect();
        let rest = match (n - 1) / 2 {
            0 => later,
            _ => combine(prefix, later)?,
        };
        let even: Leaves = elems
            .iter()
            .zip(rest)
            .map(|(e, r)| Tensor::concatenate(&[strided(e, axis, 0, 1, 1), r], axis as i64))
            .collect();
        scanned = even
            .iter()
            .zip(&odd)
            .map(|(e, o)| interleave(e, o, axis))
            .collect();
    }
    Ok(scanned)
}

//! Data movement. Broadcast, transpose and slice are one strided gather each (a broadcast
//! dimension has stride 0); pad fills the result and copies the surviving box of the operand
//! into it with strides; concatenate copies row blocks. All loops are generic over the element
//! type, selected once per op.

use crate::{Array, RuntimeError};
use ferrax_ir::{map_elements, Element, Elements, Shape, TensorType};
use rayon::prelude::*;

/// Calls `f(offset_a, offset_b)` once per innermost row of the index space `dims` (every
/// index but the last), where `offset = base + Σ idx[k] * strides[k]` in each of two
/// arrays. A rank-0 space has one row; an empty one has none.
pub(super) fn for_each_row(
    dims: &[usize],
    (base_a, strides_a): (usize, &[usize]),
    (base_b, strides_b): (usize, &[usize]),
    mut f: impl FnMut(usize, usize),
) {
    if dims.contains(&0) {
        return;
    }
    let outer = dims.len().saturating_sub(1);
    let mut idx = vec![0usize; outer];
    let (mut a, mut b) = (base_a, base_b);
    loop {
        f(a, b);
        // Advance the outer index like an odometer.
        let mut k = outer;
        loop {
            if k == 0 {
                return;
            }
            k -= 1;
            idx[k] += 1;
            // Wrapping: a step past the end is taken once, out of a dimension, and undone at
            // once (a pad's step over one element may be any size).
            a = a.wrapping_add(strides_a[k]);
            b = b.wrapping_add(strides_b[k]);
            if idx[k] < dims[k] {
                break;
            }
            a = a.wrapping_sub(strides_a[k].wrapping_mul(dims[k]));
            b = b.wrapping_sub(strides_b[k].wrapping_mul(dims[k]));
            idx[k] = 0;
        }
    }
}

/// Results with at least this many elements are gathered by parts of their leading dimension
/// across rayon's threads.
const PARALLEL_ELEMENTS: usize = 1 << 16;

/// `out[i] = f(src[base + Σ idx_k(i) * strides[k]])` over the row-major positions of `dims`;
/// large results by parts of the leading dimension across the cores (each element is written
/// once either way, so the result is the same).
pub(super) fn gather_with<T: Copy + Sync, U: Copy + Send>(
    src: &[T],
    base: usize,
    dims: &[usize],
    strides: &[usize],
    f: impl Fn(T) -> U + Sync,
) -> Vec<U> {
    let len: usize = dims.iter().product();
    let (Some(&lead), Some(&lead_stride)) = (dims.first(), strides.first()) else {
        return gather_part(src, base, dims, strides, &f);
    };
    if len < PARALLEL_ELEMENTS || lead < 2 || dims.len() < 2 || rayon::current_num_threads() < 2 {
        return gather_part(src, base, dims, strides, &f);
    }
    let row = len / lead;
    let rows = lead.div_ceil(rayon::current_num_threads() * 4);
    let (inner, step) = innermost(dims, strides);
    let mut out: Vec<U> = Vec::with_capacity(len);
    out.spare_capacity_mut()[..len]
        .par_chunks_mut(rows * row)
        .enumerate()
        .for_each(|(part, dst)| {
            let mut sub = dims.to_vec();
            sub[0] = dst.len() / row;
            let first = base + part * rows * lead_stride;
            let mut rest = dst;
            let unused = vec![0; sub.len()];
            for_each_row(&sub, (first, strides), (0, &unused), |at, _| {
                let (here, after) = std::mem::take(&mut rest).split_at_mut(inner);
                rest = after;
                if step == 1 {
                    for (slot, &x) in here.iter_mut().zip(&src[at..at + inner]) {
                        slot.write(f(x));
                    }
                } else {
                    for (j, slot) in here.iter_mut().enumerate() {
                        slot.write(f(src[at + j * step]));
                    }
                }
            });
        });
    // SAFETY: the parts cover the first `len` slots, and each part's rows (its share of the
    // leading dimension times the rest, `inner` elements each) write every slot of it once.
    unsafe { out.set_len(len) };
    out
}

/// The innermost dimension's length and stride (one element, stride 0, at rank 0).
fn innermost(dims: &[usize], strides: &[usize]) -> (usize, usize) {
    match (dims.last(), strides.last()) {
        (Some(&n), Some(&s)) => (n, s),
        _ => (1, 0),
    }
}

/// [`gather_with`] on the calling thread.
fn gather_part<T: Copy, U>(
    src: &[T],
    base: usize,
    dims: &[usize],
    strides: &[usize],
    f: &impl Fn(T) -> U,
) -> Vec<U> {
    let mut out = Vec::with_capacity(dims.iter().product());
    let (inner, step) = innermost(dims, strides);
    let unused = vec![0; dims.len()];
    for_each_row(dims, (base, strides), (0, &unused), |row, _| {
        if step == 1 {
            out.extend(src[row..row + inner].iter().map(|&x| f(x)));
        } else {
            out.extend((0..inner).map(|j| f(src[row + j * step])));
        }
    });
    out
}

pub(super) fn gather<T: Copy + Send + Sync>(
    src: &[T],
    base: usize,
    dims: &[usize],
    strides: &[usize],
) -> Vec<T> {
    gather_with(src, base, dims, strides, |x| x)
}

/// `x`'s elements with its dimensions reordered to `order` (a permutation of its axes).
pub(super) fn permuted<T: Copy + Send + Sync>(src: &[T], x: &Array, order: &[usize]) -> Vec<T> {
    permuted_with(src, x, order, |v| v)
}

pub(super) fn permuted_with<T: Copy + Sync, U: Copy + Send>(
    src: &[T],
    x: &Array,
    order: &[usize],
    f: impl Fn(T) -> U + Sync,
) -> Vec<U> {
    let strides = x.shape().strides();
    let dims: Vec<usize> = order.iter().map(|&a| x.dims()[a]).collect();
    let st: Vec<usize> = order.iter().map(|&a| strides[a]).collect();
    gather_with(src, 0, &dims, &st, f)
}

/// `x`'s elements in the reverse order along each of `axes`.
pub(super) fn reverse(x: &Array, axes: &[usize]) -> Elements {
    map_elements!(x.elements(), v => reversed(v, x.shape(), axes))
}

/// Row by row: each row of the last dimension read from its mirrored place along the leading
/// reversed axes, and reversed itself where the last axis is.
fn reversed<T: Copy>(src: &[T], shape: &Shape, axes: &[usize]) -> Vec<T> {
    let dims = shape.dims();
    let mut out = Vec::with_capacity(src.len());
    let Some((&inner, leading)) = dims.split_last() else {
        out.extend_from_slice(src);
        return out;
    };
    if src.is_empty() {
        return out;
    }
    let strides = shape.strides();
    let flipped: Vec<bool> = (0..dims.len()).map(|d| axes.contains(&d)).collect();
    let mut index = vec![0; leading.len()];
    loop {
        let base: usize = index
            .iter()
            .enumerate()
            .map(|(d, &i)| match flipped[d] {
                true => (dims[d] - 1 - i) * strides[d],
                false => i * strides[d],
            })
            .sum();
        let row = &src[base..base + inner];
        match flipped[leading.len()] {
            true => out.extend(row.iter().rev()),
            false => out.extend_from_slice(row),
        }
        // The next row: the leading index counts up, last dimension fastest.
        let mut d = leading.len();
        loop {
            if d == 0 {
                return out;
            }
            d -= 1;
            index[d] += 1;
            if index[d] < dims[d] {
                break;
            }
            index[d] = 0;
        }
    }
}

pub(super) fn broadcast_in_dim(x: &Array, ty: &TensorType, dims: &[usize]) -> Elements {
    let in_strides = x.shape().strides();
    let mut strides = vec![0; ty.rank()];
    for (i, &d) in dims.iter().enumerate() {
        if x.dims()[i] != 1 {
            strides[d] = in_strides[i];
        }
    }
    map_elements!(x.elements(), v => gather(v, 0, ty.dims(), &strides))
}

pub(super) fn transpose(x: &Array, perm: &[usize]) -> Elements {
    match last_two_swapped(perm) {
        true => map_elements!(x.elements(), v => swap_last_two(v, x.dims())),
        false => map_elements!(x.elements(), v => permuted(v, x, perm)),
    }
}

/// Whether `perm` swaps the last two axes and keeps the others in place (a matrix transpose,
/// or a batch of them).
fn last_two_swapped(perm: &[usize]) -> bool {
    let r = perm.len();
    r >= 2
        && perm[r - 2] == r - 1
        && perm[r - 1] == r - 2
        && perm[..r - 2].iter().enumerate().all(|(i, &p)| i == p)
}

/// `src` (row-major, of shape `dims`) with its last two axes swapped, by square tiles, so that
/// both the reads and the writes run along cache lines (read one element per line of the
/// source's rows, a large transpose misses the cache at every element); large ones by bands of
/// output rows across the cores.
fn swap_last_two<T: Copy + Send + Sync>(src: &[T], dims: &[usize]) -> Vec<T> {
    const TILE: usize = 16;
    let r = dims.len();
    let (rows, cols) = (dims[r - 2], dims[r - 1]);
    let Some(&first) = src.first() else {
        return Vec::new();
    };
    let mut out = vec![first; src.len()];
    let block = rows * cols;
    // Output rows `band * TILE..` (source columns) of one matrix.
    let band = |s: &[T], band: usize, o: &mut [T]| {
        let c0 = band * TILE;
        for r0 in (0..rows).step_by(TILE) {
            for (c, o) in (c0..).zip(o.chunks_exact_mut(rows)) {
                for (r, o) in (r0..(r0 + TILE).min(rows)).zip(&mut o[r0..]) {
                    *o = s[r * cols + c];
                }
            }
        }
    };
    let matrices = src.chunks_exact(block).zip(out.chunks_exact_mut(block));
    if src.len() < PARALLEL_ELEMENTS || rayon::current_num_threads() < 2 {
        for (s, o) in matrices {
            for (b, o) in o.chunks_mut(TILE * rows).enumerate() {
                band(s, b, o);
            }
        }
    } else {
        matrices.par_bridge().for_each(|(s, o)| {
            o.par_chunks_mut(TILE * rows)
                .enumerate()
                .for_each(|(b, o)| band(s, b, o));
        });
    }
    out
}

pub(super) fn slice(x: &Array, ty: &TensorType, start: &[usize], steps: &[usize]) -> Elements {
    let in_strides = x.shape().strides();
    let base = start.iter().zip(&in_strides).map(|(s, st)| s * st).sum();
    // Saturating: a step past the operand's end is only taken along a result dimension of
    // one element, which never moves.
    let strides: Vec<usize> = steps
        .iter()
        .zip(&in_strides)
        .map(|(s, st)| s.saturating_mul(*st))
        .collect();
    map_elements!(x.elements(), v => gather(v, base, ty.dims(), &strides))
}

/// The operand indices `first..first + count` of one dimension that land inside the result,
/// where index `i` lands at `low + i * (interior + 1)`.
fn pad_range(low: i64, interior: usize, in_dim: usize, out_dim: usize) -> (usize, usize) {
    // In i128: `low` may be any i64, and `-low` or `out_dim - 1 - low` overflow an i64.
    let (low, step) = (i128::from(low), interior as i128 + 1);
    // The smallest i with low + i * step >= 0, and the first i past out_dim - 1.
    let first = if low >= 0 {
        0
    } else {
        (-low + step - 1) / step
    };
    let last = out_dim as i128 - 1 - low;
    let end = if last < 0 {
        0
    } else {
        (last / step + 1).min(in_dim as i128)
    };
    let first = first.min(in_dim as i128);
    (first as usize, (end - first).max(0) as usize)
}

fn pad_typed<T: Element>(
    src: &[T],
    value: &[T],
    x: &Array,
    ty: &TensorType,
    low: &[i64],
    interior: &[usize],
) -> Vec<T> {
    let mut out = vec![value[0]; ty.numel()];
    let (in_strides, out_strides) = (x.shape().strides(), ty.shape.strides());
    let (mut src_base, mut dst_base) = (0usize, 0usize);
    let mut counts = Vec::with_capacity(x.dims().len());
    let mut src_steps = Vec::with_capacity(counts.capacity());
    let mut dst_steps = Vec::with_capacity(counts.capacity());
    for k in 0..x.dims().len() {
        let (first, count) = pad_range(low[k], interior[k], x.dims()[k], ty.dims()[k]);
        // Saturating: a step past the result's end is only taken by a dimension of fewer than
        // two elements that land, whose one element is at its base.
        let step = interior[k].saturating_add(1);
        counts.push(count);
        src_base += first * in_strides[k];
        src_steps.push(in_strides[k]);
        if count > 0 {
            // In range (so non-negative and below the result's length), in i128 on the way.
            let at = i128::from(low[k]) + first as i128 * step as i128;
            dst_base += at as usize * out_strides[k];
        }
        dst_steps.push(step.saturating_mul(out_strides[k]));
    }
    let (inner, src_step, dst_step) = match (counts.last(), src_steps.last(), dst_steps.last()) {
        (Some(&n), Some(&s), Some(&d)) => (n, s, d),
        _ => (1, 0, 0),
    };
    for_each_row(
        &counts,
        (src_base, &src_steps),
        (dst_base, &dst_steps),
        |s, d| {
            for j in 0..inner {
                out[d + j * dst_step] = src[s + j * src_step];
            }
        },
    );
    out
}

pub(super) fn pad(
    x: &Array,
    value: &Array,
    ty: &TensorType,
    low: &[i64],
    interior: &[usize],
) -> Result<Elements, RuntimeError> {
    Ok(map_elements!(x.elements(), v => pad_typed(v, value.as_slice()?, x, ty, low, interior)))
}

/// Row block `o` of every operand in turn; `first` is the first operand's data.
fn concatenate_typed<T: Element>(
    first: &[T],
    args: &[&Array],
    ty: &TensorType,
    axis: usize,
) -> Result<Vec<T>, RuntimeError> {
    let outer: usize = ty.dims()[..axis].iter().product();
    let block = |a: &Array| -> usize { a.dims()[axis..].iter().product() };
    let mut parts = vec![(first, block(args[0]))];
    for a in &args[1..] {
        parts.push((a.as_slice::<T>()?, block(a)));
    }
    let mut out = Vec::with_capacity(ty.numel());
    for o in 0..outer {
        for &(data, n) in &parts {
            out.extend_from_slice(&data[o * n..(o + 1) * n]);
        }
    }
    Ok(out)
}

pub(super) fn concatenate(
    args: &[&Array],
    ty: &TensorType,
    axis: usize,
) -> Result<Elements, RuntimeError> {
    Ok(map_elements!(args[0].elements(), v => concatenate_typed(v, args, ty, axis)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tiled swap of the last two axes gives what the general permutation gives, across
    /// tile edges, batches and empty shapes.
    #[test]
    fn swapping_the_last_two_axes_by_tiles_is_the_permutation() {
        for dims in [
            vec![1, 1],
            vec![3, 17],
            vec![33, 16],
            vec![2, 40, 5],
            vec![2, 3, 19, 21],
            vec![0, 4],
            vec![4, 0, 3],
        ] {
            let n: usize = dims.iter().product();
            let x = Array::from_vec(dims.clone(), (0..n).map(|i| i as f32).collect()).unwrap();
            let r = dims.len();
            let mut perm: Vec<usize> = (0..r).collect();
            perm.swap(r - 2, r - 1);
            assert!(last_two_swapped(&perm));
            let v = x.as_slice::<f32>().unwrap();
            assert_eq!(swap_last_two(v, &dims), permuted(v, &x, &perm), "{dims:?}");
        }
        // Large enough to split across the cores: both paths against the sequential gather.
        for dims in [vec![300, 257], vec![3, 130, 170], vec![8, 128, 4, 64]] {
            let n: usize = dims.iter().product();
            let x = Array::from_vec(dims.clone(), (0..n).map(|i| i as f32).collect()).unwrap();
            let v = x.as_slice::<f32>().unwrap();
            let r = dims.len();
            let mut swap: Vec<usize> = (0..r).collect();
            swap.swap(r - 2, r - 1);
            let strides = x.shape().strides();
            let sequential = |order: &[usize]| {
                let d: Vec<usize> = order.iter().map(|&a| dims[a]).collect();
                let st: Vec<usize> = order.iter().map(|&a| strides[a]).collect();
                gather_part(v, 0, &d, &st, &|x| x)
            };
            assert_eq!(swap_last_two(v, &dims), sequential(&swap), "{dims:?}");
            let mut rotate: Vec<usize> = (1..r).collect();
            rotate.push(0);
            assert_eq!(permuted(v, &x, &rotate), sequential(&rotate), "{dims:?}");
        }
        assert!(!last_two_swapped(&[1, 0, 2]));
        assert!(!last_two_swapped(&[2, 1, 0]));
        assert!(!last_two_swapped(&[0]));
    }
}

//! Matrix products on the `gemm` crate: batched, with the operand layouts `gemm` runs fast
//! (a product of two operands stored contracting dimension last is transposed first). The
//! compiler decides which `dot_general`s are such products ([`Gemm`]).

use crate::{threads, PARALLEL_THRESHOLD};
use ferrax_ir::{DType, Elements};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

/// A `dot_general` as one strided-batched GEMM on row-major operands.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Gemm {
    pub batch: usize,
    pub m: usize,
    pub n: usize,
    pub k: usize,
    /// The lhs is stored `[K, M]` (contracting dimensions first) rather than `[M, K]`.
    pub lhs_k_first: bool,
    /// The rhs is stored `[N, K]` rather than `[K, N]`.
    pub rhs_k_last: bool,
    /// Both operands are f32 holding bf16 values (a bf16 product widened by the compiler), so
    /// ferrax's bf16 kernel (`gemm_bf16.rs`) may compute it.
    pub bf16_operands: bool,
}

/// Products below this many multiply-adds run on one thread.
const GEMM_PARALLEL_THRESHOLD: usize = 1 << 18;

/// Whether each of the product's matrix products is split across the pool's threads.
pub(crate) fn splits(g: &Gemm) -> bool {
    g.m.saturating_mul(g.n).saturating_mul(g.k) >= GEMM_PARALLEL_THRESHOLD && threads() > 1
}

/// The float types `gemm` multiplies, with their one (the product's scale), and their buffers.
pub(crate) trait Unit: Copy + Default + Send + Sync + 'static {
    const ONE: Self;
    const DTYPE: DType;
    fn vec_of(e: Elements) -> Option<Vec<Self>>;
    fn elements(v: Vec<Self>) -> Elements;
}

macro_rules! impl_unit {
    ($t:ty, $variant:ident) => {
        impl Unit for $t {
            const ONE: $t = 1.0;
            const DTYPE: DType = DType::$variant;
            fn vec_of(e: Elements) -> Option<Vec<$t>> {
                match e {
                    Elements::$variant(v) => Some(v),
                    _ => None,
                }
            }
            fn elements(v: Vec<$t>) -> Elements {
                Elements::$variant(v)
            }
        }
    };
}

impl_unit!(f32, F32);
impl_unit!(f64, F64);

/// How [`matmul`] lays out a product whose operands are both stored contracting dimension last
/// (`a · bᵀ`, the backward pass's product with a weight matrix). `gemm` runs that form at about
/// half its usual speed, so
/// one operand is transposed first: the rhs, or where that copies more, the lhs and the result
/// (which `gemm` then computes column-major, its fast form).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NtLayout {
    Direct,
    TransposeRhs,
    TransposeLhsAndResult,
}

/// Products with fewer multiply-adds run as they are: the copies would cost more than they save.
const NT_TRANSPOSE_THRESHOLD: usize = 1 << 22;

/// Whether `gemm` would run operands read along these contracting strides in its slow form
/// (`a · bᵀ`: both contiguous along the contraction) at a size where copying one pays.
pub(crate) fn slow_in_place(g: &Gemm, lhs_step: usize, rhs_step: usize) -> bool {
    lhs_step == 1 && rhs_step == 1 && g.m * g.n * g.k >= NT_TRANSPOSE_THRESHOLD
}

pub(crate) fn nt_layout(g: &Gemm) -> NtLayout {
    let (m, n, k) = (g.m, g.n, g.k);
    if !g.rhs_k_last || g.lhs_k_first || m * n * k < NT_TRANSPOSE_THRESHOLD {
        NtLayout::Direct
    } else if n * k <= m * k + m * n {
        NtLayout::TransposeRhs
    } else {
        NtLayout::TransposeLhsAndResult
    }
}

/// `out` (`cols` x `rows`, row-major) = the transpose of row-major `x` (`rows` x `cols`), in
/// square tiles (whole cache lines read and written), split by output rows across the cores
/// when large.
fn transpose<T: Unit>(x: &[T], rows: usize, cols: usize, out: &mut [T]) {
    const TILE: usize = 16;
    let band = |first: usize, part: &mut [T]| {
        let here = part.len() / rows;
        for r0 in (0..rows).step_by(TILE) {
            for c0 in (0..here).step_by(TILE) {
                let (r1, c1) = ((r0 + TILE).min(rows), (c0 + TILE).min(here));
                for c in c0..c1 {
                    let column = first + c;
                    for (r, o) in (r0..r1).zip(&mut part[c * rows + r0..c * rows + r1]) {
                        *o = x[r * cols + column];
                    }
                }
            }
        }
    };
    let out = &mut out[..rows * cols];
    if rows * cols < PARALLEL_THRESHOLD || threads() < 2 {
        band(0, out);
        return;
    }
    // Bands of whole tiles of output rows.
    let band_rows = cols.div_ceil(threads() * 4).div_ceil(TILE) * TILE;
    out.par_chunks_mut(band_rows * rows)
        .enumerate()
        .for_each(|(i, part)| band(i * band_rows, part));
}

/// A matrix for `gemm`: its first element and its (row, column) strides in elements.
type Strided<P> = (P, (usize, usize));

/// `dst` (`m` x `n`) = `a` (`m` x `k`) · `b` (`k` x `n`) on `gemm`.
///
/// # Safety
/// Each matrix's elements, at its strides, lie in its allocation.
unsafe fn product<T: Unit>(
    (m, n, k): (usize, usize, usize),
    (dst, (dst_rs, dst_cs)): Strided<*mut T>,
    (a, (a_rs, a_cs)): Strided<*const T>,
    (b, (b_rs, b_cs)): Strided<*const T>,
    parallelism: ::gemm::Parallelism,
) {
    // SAFETY: as the caller promises.
    unsafe {
        ::gemm::gemm(
            m,
            n,
            k,
            dst,
            dst_cs as isize,
            dst_rs as isize,
            false,
            a,
            a_cs as isize,
            a_rs as isize,
            b,
            b_cs as isize,
            b_rs as isize,
            T::default(),
            T::ONE,
            false,
            false,
            false,
            parallelism,
        )
    }
}

/// `c` (batch·m·n elements, overwritten) = the row-major product `g` describes, batch by batch,
/// laid out as `layout` says, with `scratch` for its copies.
pub(crate) fn matmul<T: Unit>(
    g: &Gemm,
    layout: NtLayout,
    a: &[T],
    b: &[T],
    c: &mut [T],
    scratch: (&mut [T], &mut [T]),
) {
    let (m, n, k) = (g.m, g.n, g.k);
    let parallelism = if splits(g) {
        ::gemm::Parallelism::Rayon(threads())
    } else {
        ::gemm::Parallelism::None
    };
    for batch in 0..g.batch {
        let (a, b) = (&a[batch * m * k..], &b[batch * k * n..]);
        let c = &mut c[batch * m * n..];
        // Each operand and the result as (data, row stride, column stride) in elements.
        let mut lhs = (a, if g.lhs_k_first { (1, m) } else { (k, 1) });
        let mut rhs = (b, if g.rhs_k_last { (1, k) } else { (n, 1) });
        match layout {
            NtLayout::Direct => {}
            NtLayout::TransposeRhs => {
                transpose(b, n, k, scratch.0);
                rhs = (&*scratch.0, (n, 1));
            }
            NtLayout::TransposeLhsAndResult => {
                transpose(a, m, k, scratch.0);
                lhs = (&*scratch.0, (1, m));
            }
        }
        let column_major = layout == NtLayout::TransposeLhsAndResult;
        let (dst, (dst_rs, dst_cs)) = if column_major {
            (&mut *scratch.1, (1, m))
        } else {
            (&mut *c, (n, 1))
        };
        let ((a, a_strides), (b, b_strides)) = (lhs, rhs);
        // SAFETY: the slices hold at least m·k, k·n and m·n elements at these strides.
        unsafe {
            product(
                (m, n, k),
                (dst.as_mut_ptr(), (dst_rs, dst_cs)),
                (a.as_ptr(), a_strides),
                (b.as_ptr(), b_strides),
                parallelism,
            )
        };
        if column_major {
            transpose(scratch.1, n, m, c);
        }
    }
}

/// A batch of operand matrices read where they lie: matrix `b` starts at `offsets[b]`, and
/// element `l` of its line `i` (the lhs's rows, the rhs's columns) at `i * line + l * step`
/// from there, `l` along the contracting dimension.
pub(crate) struct Batch<'a, T> {
    pub(crate) data: &'a [T],
    pub(crate) offsets: Vec<usize>,
    pub(crate) line: usize,
    pub(crate) step: usize,
}

impl<'a, T> Batch<'a, T> {
    /// `x` (row-major, of shape `dims`) read through `perm`: the batch dimensions `perm[..nb]`
    /// (row-major order), one group of dimensions merged into the lines, and one into the
    /// steps, `lines_first` saying which group comes first in `perm` (the lhs: lines, then the
    /// contracting steps; the rhs: the steps first). `None` where a group's dimensions do not
    /// merge into one stride, or neither stride is 1 (bf16 packing reads along one of them).
    pub(crate) fn permuted(
        x: &'a [T],
        dims: &[usize],
        perm: &[usize],
        nb: usize,
        outer: usize,
        lines_first: bool,
    ) -> Option<Batch<'a, T>> {
        let rank = dims.len();
        if perm.len() != rank || nb + outer > rank {
            return None;
        }
        let mut strides = vec![1usize; rank];
        for d in (0..rank.saturating_sub(1)).rev() {
            strides[d] = strides[d + 1].checked_mul(dims[d + 1])?;
        }
        // The one stride of a group (1 for a group of one element).
        let merged = |group: &[usize]| -> Option<usize> {
            let kept: Vec<usize> = group.iter().copied().filter(|&d| dims[d] != 1).collect();
            let ok = kept
                .windows(2)
                .all(|w| strides[w[0]] == strides[w[1]] * dims[w[1]]);
            ok.then(|| kept.last().map_or(1, |&d| strides[d]))
        };
        let first = merged(&perm[nb..nb + outer])?;
        let second = merged(&perm[nb + outer..])?;
        let (line, step) = if lines_first {
            (first, second)
        } else {
            (second, first)
        };
        if line != 1 && step != 1 {
            return None;
        }
        let batch: Vec<usize> = perm[..nb].to_vec();
        let count: usize = batch.iter().map(|&d| dims[d]).product();
        let mut offsets = Vec::with_capacity(count);
        let mut index = vec![0usize; nb];
        for _ in 0..count {
            offsets.push(
                index
                    .iter()
                    .zip(&batch)
                    .map(|(&i, &d)| i * strides[d])
                    .sum(),
            );
            for k in (0..nb).rev() {
                index[k] += 1;
                if index[k] < dims[batch[k]] {
                    break;
                }
                index[k] = 0;
            }
        }
        Some(Batch {
            data: x,
            offsets,
            line,
            step,
        })
    }

    /// `g`'s lhs (`lhs`) or rhs, stored as `g` says, batch after batch.
    pub(crate) fn stored(g: &Gemm, x: &'a [T], lhs: bool) -> Batch<'a, T> {
        let (m, n, k) = (g.m, g.n, g.k);
        let (size, (line, step)) = if lhs {
            (m * k, if g.lhs_k_first { (1, m) } else { (k, 1) })
        } else {
            (k * n, if g.rhs_k_last { (k, 1) } else { (1, n) })
        };
        Batch {
            data: x,
            offsets: (0..g.batch).map(|b| b * size).collect(),
            line,
            step,
        }
    }

    /// `g`'s lhs `x` (row-major, of shape `dims`) read through `perm` (batch, free, then
    /// contracting dimensions), as [`Batch::permuted`] takes it.
    pub(crate) fn of_lhs(g: &Gemm, x: &'a [T], dims: &[usize], perm: &[usize]) -> Option<Self> {
        let (nb, free) = groups(dims, perm, g.batch, g.m)?;
        Batch::permuted(x, dims, perm, nb, free, true)
    }

    /// `g`'s rhs `x` read through `perm` (batch, contracting, then free dimensions).
    pub(crate) fn of_rhs(g: &Gemm, x: &'a [T], dims: &[usize], perm: &[usize]) -> Option<Self> {
        let (nb, contracting) = groups(dims, perm, g.batch, g.k)?;
        Batch::permuted(x, dims, perm, nb, contracting, false)
    }

    /// Whether each of the `count` matrices of `lines` lines of `k` elements lies in the data.
    fn fits(&self, count: usize, lines: usize, k: usize) -> bool {
        let span = lines
            .saturating_sub(1)
            .checked_mul(self.line)
            .and_then(|a| {
                k.saturating_sub(1)
                    .checked_mul(self.step)
                    .and_then(|b| a.checked_add(b))
            });
        self.offsets.len() == count
            && span.is_some_and(|span| {
                self.offsets
                    .iter()
                    .all(|&o| o.checked_add(span).is_some_and(|end| end < self.data.len()))
            })
    }
}

/// How many of `perm`'s leading dimensions of `dims` make up a batch of `batch` elements, and
/// how many of the rest a group of `first` elements.
fn groups(dims: &[usize], perm: &[usize], batch: usize, first: usize) -> Option<(usize, usize)> {
    let sizes: Vec<usize> = perm
        .iter()
        .map(|&d| dims.get(d).copied())
        .collect::<Option<_>>()?;
    let prefix = |from: usize, want: usize| {
        let mut product = 1usize;
        (from..=sizes.len()).find(|&end| {
            if end > from {
                product = product.saturating_mul(sizes[end - 1]);
            }
            product == want
        })
    };
    let nb = prefix(0, batch)?;
    Some((nb, prefix(nb, first)? - nb))
}

/// `c` (batch·m·n elements, overwritten) = the products of `lhs`'s and `rhs`'s matrices, read
/// where they lie, `g` giving the sizes; a batch at least as large as the pool's threads by
/// whole products per thread. False, with `c` untouched, where a matrix would reach past its
/// data.
pub(crate) fn matmul_batches<T: Unit>(
    g: &Gemm,
    lhs: &Batch<T>,
    rhs: &Batch<T>,
    c: &mut [T],
) -> bool {
    let (m, n, k) = (g.m, g.n, g.k);
    let fits = lhs.fits(g.batch, m, k) && rhs.fits(g.batch, n, k) && c.len() >= g.batch * m * n;
    if !fits || m * n == 0 {
        return fits;
    }
    let by_product = g.batch >= threads() && threads() > 1;
    let parallelism = if !by_product && splits(g) {
        ::gemm::Parallelism::Rayon(threads())
    } else {
        ::gemm::Parallelism::None
    };
    let one = |(b, c): (usize, &mut [T])| {
        let (a, x) = (
            lhs.data[lhs.offsets[b]..].as_ptr(),
            rhs.data[rhs.offsets[b]..].as_ptr(),
        );
        // SAFETY: `fits` checked every element each matrix reaches; `c` holds m·n here.
        unsafe {
            product(
                (m, n, k),
                (c.as_mut_ptr(), (n, 1)),
                (a, (lhs.line, lhs.step)),
                (x, (rhs.step, rhs.line)),
                parallelism,
            )
        }
    };
    let c = &mut c[..g.batch * m * n];
    if by_product {
        c.par_chunks_mut(m * n).enumerate().for_each(one);
    } else {
        c.chunks_mut(m * n).enumerate().for_each(one);
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Attention's products read through their permutations (batch dimensions not leading),
    /// by whole products per thread and within one product, against the sums in order; a
    /// matrix reaching past its data is refused.
    #[test]
    fn permuted_operands_multiply_where_they_lie() {
        let (b, t, s, h, d) = (2, 9, 7, 3, 5);
        let value = |i: usize| ((i * 37 % 101) as f64 - 50.0) / 16.0;
        let q: Vec<f64> = (0..b * t * h * d).map(value).collect();
        let k: Vec<f64> = (0..b * s * h * d).map(|i| value(i + 7)).collect();
        let lhs = Batch::permuted(&q, &[b, t, h, d], &[0, 2, 1, 3], 2, 1, true).unwrap();
        let rhs = Batch::permuted(&k, &[b, s, h, d], &[0, 2, 3, 1], 2, 1, false).unwrap();
        let g = Gemm {
            batch: b * h,
            m: t,
            n: s,
            k: d,
            lhs_k_first: false,
            rhs_k_last: false,
            bf16_operands: false,
        };
        let mut c = vec![f64::NAN; b * h * t * s];
        assert!(matmul_batches(&g, &lhs, &rhs, &mut c));
        for (bi, hi, ti, si) in (0..b).flat_map(|bi| {
            (0..h).flat_map(move |hi| {
                (0..t).flat_map(move |ti| (0..s).map(move |si| (bi, hi, ti, si)))
            })
        }) {
            let want: f64 = (0..d)
                .map(|di| {
                    q[((bi * t + ti) * h + hi) * d + di] * k[((bi * s + si) * h + hi) * d + di]
                })
                .sum();
            let got = c[((bi * h + hi) * t + ti) * s + si];
            assert!(
                (got - want).abs() <= 1e-12 * want.abs().max(1.0),
                "{got} against {want}"
            );
        }
        let short = Batch {
            data: &q[..q.len() - 1],
            ..lhs
        };
        assert!(!matmul_batches(&g, &short, &rhs, &mut c));
    }

    /// The shapes `tests/cpu.rs` checks the transposed products with take each layout.
    #[test]
    fn transposed_products_take_the_smaller_copy() {
        let nt = |batch, m, n, k| Gemm {
            batch,
            m,
            n,
            k,
            lhs_k_first: false,
            rhs_k_last: true,
            bf16_operands: false,
        };
        assert_eq!(nt_layout(&nt(1, 128, 256, 256)), NtLayout::TransposeRhs);
        assert_eq!(nt_layout(&nt(1, 515, 61, 250)), NtLayout::TransposeRhs);
        assert_eq!(
            nt_layout(&nt(2, 70, 500, 150)),
            NtLayout::TransposeLhsAndResult
        );
        assert_eq!(nt_layout(&nt(1, 64, 64, 64)), NtLayout::Direct);
        let nn = Gemm {
            rhs_k_last: false,
            ..nt(1, 1024, 1024, 1024)
        };
        assert_eq!(nt_layout(&nn), NtLayout::Direct);
    }
}

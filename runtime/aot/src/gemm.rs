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
        let ((a, (a_rs, a_cs)), (b, (b_rs, b_cs))) = (lhs, rhs);
        // SAFETY: the slices hold at least m·k, k·n and m·n elements at these strides.
        unsafe {
            ::gemm::gemm(
                m,
                n,
                k,
                dst.as_mut_ptr(),
                dst_cs as isize,
                dst_rs as isize,
                false,
                a.as_ptr(),
                a_cs as isize,
                a_rs as isize,
                b.as_ptr(),
                b_cs as isize,
                b_rs as isize,
                T::default(),
                T::ONE,
                false,
                false,
                false,
                parallelism,
            )
        };
        if column_major {
            transpose(scratch.1, n, m, c);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

//! Matrix products of bf16 values with f32 accumulation on AVX-512 BF16 (`vdpbf16ps`), for the
//! products of a bf16 mixed-precision program. The compiler marks a product whose operands both
//! hold bf16 values widened to f32 ([`Gemm::bf16_operands`]); on a CPU with the instructions,
//! this kernel multiplies them at twice the multiply-adds per instruction of an f32 GEMM (`gemm`
//! has no bf16 kernel), so a bf16 step is faster than its f32 twin instead of paying for its
//! roundings. Elsewhere the f32 `gemm` computes the same products.
//!
//! The operands are packed as bf16 pairs (two consecutive contracting elements in 32 bits):
//! the rhs in panels of [`NR`] columns; the lhs row by row where its rows are contiguous, else
//! in tiles of [`MR`] rows. No operand is transposed in memory first. The micro-kernel keeps
//! an `MR` x `NR` tile of sums in registers over blocks of the contracting dimension.
//!
//! Numerics: each product of two bf16 values is exact in f32, and the sums are f32 additions
//! rounded to nearest, as an f32 GEMM's are, in another order. The instructions treat subnormal
//! inputs as zero and flush subnormal results (magnitudes below 2^-126, far below anything a
//! bf16 product of a model reaches). Packing rounds to bf16 to nearest even, so operands that
//! are not bf16 values would be rounded, never truncated.

use crate::gemm::{Batch, Gemm};
use crate::threads;
use rayon::prelude::*;
use std::arch::x86_64::*;

/// Rows of a micro-tile: `MR` x [`NV`] accumulators, with the rhs's vectors and a broadcast,
/// fit the 32 vector registers.
const MR: usize = 6;
/// 16-lane vectors per micro-tile row.
const NV: usize = 4;
/// Columns of a micro-tile, and of a packed rhs panel.
const NR: usize = 16 * NV;
/// Contracting pairs per block: a panel's block (32 KiB) stays in the level-1 cache while the
/// micro-tiles of a row block run over it.
const KCP: usize = 128;
/// The most lhs rows one task packs and multiplies.
const MC: usize = 48;
/// Products with fewer multiply-adds stay on the f32 `gemm`: packing would cost more than the
/// faster multiply-adds save.
const MIN_MULTIPLY_ADDS: usize = 1 << 15;

/// Whether this CPU has the instructions.
fn available() -> bool {
    is_x86_feature_detected!("avx512f")
        && is_x86_feature_detected!("avx512bw")
        && is_x86_feature_detected!("avx512bf16")
}

/// Whether product `g` runs here rather than on the f32 `gemm`.
pub(crate) fn runs(g: &Gemm) -> bool {
    g.bf16_operands
        && g.m.saturating_mul(g.n).saturating_mul(g.k) >= MIN_MULTIPLY_ADDS
        && available()
}

/// An operand as lines (the lhs's rows, the rhs's columns) along the contracting dimension:
/// element `l` of line `i` is `data[i * line + l * step]`. Either `line` or `step` is 1 (a
/// [`Gemm`]'s layouts).
#[derive(Clone, Copy)]
struct Lines<'a> {
    data: &'a [f32],
    line: usize,
    step: usize,
}

impl Lines<'_> {
    /// Whether lines `first..first + width` of `k` elements lie in `data`.
    fn holds(&self, first: usize, width: usize, k: usize) -> bool {
        let last = (first + width).saturating_sub(1) * self.line + k.saturating_sub(1) * self.step;
        width > 0 && k > 0 && (self.line == 1 || self.step == 1) && last < self.data.len()
    }
}

/// The lowest `n` (at most 16) bits set.
fn low_bits(n: usize) -> u16 {
    ((1u32 << n.min(16)) - 1) as u16
}

/// Lines `first..first + width` of `x` (`width` <= `lanes`) as `k / 2` (rounded up) pairs of
/// `lanes` lanes in `out`: lane `j` of pair `p` holds elements `2p` and `2p + 1` of line
/// `first + j` rounded to bf16, zero past `k`. Lanes past `width` are left as they are.
fn pack_lines(x: Lines, first: usize, width: usize, k: usize, lanes: usize, out: &mut [u32]) {
    if x.holds(first, width, k) && width <= lanes && out.len() >= k.div_ceil(2) * lanes {
        // SAFETY: `runs` checked the instructions; the elements and pairs were checked above.
        unsafe { pack_lines_avx512(x, first, width, k, lanes, out) }
    }
}

/// [`pack_lines`], 32 elements rounded per instruction (`vcvtne2ps2bf16`: to nearest even,
/// NaNs quiet; it flushes subnormals, which the products treat as zero anyway).
///
/// # Safety
/// The CPU has AVX-512F, BW and BF16; `x` holds every element of the lines (`x.holds`) and
/// `out` every pair.
#[target_feature(enable = "avx512f,avx512bw,avx512bf16")]
unsafe fn pack_lines_avx512(
    x: Lines,
    first: usize,
    width: usize,
    k: usize,
    lanes: usize,
    out: &mut [u32],
) {
    let data = x.data.as_ptr();
    if x.step == 1 {
        // A line's consecutive elements, rounded, are its pairs in order: 16 pairs at a time
        // go to lanes `lanes` apart.
        let index = _mm512_mullo_epi32(
            _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
            _mm512_set1_epi32(lanes as i32),
        );
        for j in 0..width {
            let line = data.wrapping_add((first + j) * x.line);
            for start in (0..k).step_by(32) {
                // SAFETY: the line holds `k - start` elements from `start`.
                let pairs = unsafe { round_pairs(line.wrapping_add(start), k - start) };
                let to = out.as_mut_ptr().wrapping_add(start / 2 * lanes + j);
                let count = low_bits((k - start).min(32).div_ceil(2));
                // SAFETY: pairs `start / 2..` of lane `j`, up to the line's last, lie in `out`.
                unsafe { _mm512_mask_i32scatter_epi32::<4>(to.cast(), count, index, pairs) };
            }
        }
    } else {
        // Elements `2p` and `2p + 1` of 16 lines at a time, rounded and interleaved.
        const INTERLEAVE: [u16; 32] = {
            let mut index = [0u16; 32];
            let mut i = 0;
            while i < 16 {
                index[2 * i] = i as u16;
                index[2 * i + 1] = 16 + i as u16;
                i += 1;
            }
            index
        };
        // SAFETY: 64 bytes of plain data.
        let interleave = unsafe { _mm512_loadu_si512(INTERLEAVE.as_ptr().cast()) };
        for p in 0..k.div_ceil(2) {
            let (even, odd) = (2 * p, 2 * p + 1);
            for group in (0..width).step_by(16) {
                let mask = low_bits(width - group);
                let at = |l: usize| data.wrapping_add(l * x.step + first + group);
                // SAFETY: the masks keep the loads within the lines, at elements below `k`.
                let lo = unsafe { _mm512_maskz_loadu_ps(mask, at(even)) };
                let hi = if odd < k {
                    // SAFETY: as above.
                    unsafe { _mm512_maskz_loadu_ps(mask, at(odd)) }
                } else {
                    _mm512_setzero_ps()
                };
                // SAFETY: both are 512 bits of plain data.
                let rounded: __m512i = unsafe { std::mem::transmute(_mm512_cvtne2ps_pbh(hi, lo)) };
                let pairs = _mm512_permutexvar_epi16(interleave, rounded);
                let to = out.as_mut_ptr().wrapping_add(p * lanes + group);
                // SAFETY: lanes `group..width` of pair `p` lie in `out`.
                unsafe { _mm512_mask_storeu_epi32(to.cast(), mask, pairs) };
            }
        }
    }
}

/// The (up to) 32 contiguous elements at `at` (`left` of them remain in the line), rounded to
/// bf16, as 16 pairs (zero past the line's end).
///
/// # Safety
/// The CPU has AVX-512F and BF16; `at` points at `left` readable elements.
#[target_feature(enable = "avx512f,avx512bf16")]
unsafe fn round_pairs(at: *const f32, left: usize) -> __m512i {
    let len = left.min(32);
    // SAFETY: the masks keep the loads within the `left` elements.
    let (lo, hi) = unsafe {
        (
            _mm512_maskz_loadu_ps(low_bits(len), at),
            _mm512_maskz_loadu_ps(low_bits(len.saturating_sub(16)), at.wrapping_add(16)),
        )
    };
    // SAFETY: both are 512 bits of plain data.
    unsafe { std::mem::transmute(_mm512_cvtne2ps_pbh(hi, lo)) }
}

/// Row-major lines `first..first + width` of `x` (`x.step == 1`), rounded, as `k / 2` (rounded
/// up) pairs each, one line after another in `out`.
fn pack_rows(x: Lines, first: usize, width: usize, k: usize, out: &mut [u32]) {
    let kp = k.div_ceil(2);
    if x.holds(first, width, k) && x.step == 1 && out.len() >= width * kp {
        // SAFETY: `runs` checked the instructions; the elements and pairs were checked above.
        unsafe { pack_rows_avx512(x, first, width, k, out) }
    }
}

/// [`pack_rows`] with the instructions.
///
/// # Safety
/// The CPU has AVX-512F and BF16; `x` holds the lines and `out` their pairs.
#[target_feature(enable = "avx512f,avx512bf16")]
unsafe fn pack_rows_avx512(x: Lines, first: usize, width: usize, k: usize, out: &mut [u32]) {
    let kp = k.div_ceil(2);
    for j in 0..width {
        let line = x.data.as_ptr().wrapping_add((first + j) * x.line);
        for start in (0..k).step_by(32) {
            // SAFETY: the line holds `k - start` elements from `start`.
            let pairs = unsafe { round_pairs(line.wrapping_add(start), k - start) };
            let count = low_bits((k - start).min(32).div_ceil(2));
            let to = out.as_mut_ptr().wrapping_add(j * kp + start / 2);
            // SAFETY: the line's pairs from `start / 2` lie in `out`.
            unsafe { _mm512_mask_storeu_epi32(to.cast(), count, pairs) };
        }
    }
}

/// The rhs's `n` columns as panels of `NR` (zero past `n`), each packed by [`pack_lines`].
fn pack_rhs(b: Lines, k: usize, n: usize, parallel: bool, out: &mut Vec<u32>) {
    let kp = k.div_ceil(2);
    out.clear();
    out.resize(n.div_ceil(NR) * kp * NR, 0);
    let pack = |(panel, o): (usize, &mut [u32])| {
        let first = panel * NR;
        pack_lines(b, first, NR.min(n - first), k, NR, o);
    };
    if parallel {
        out.par_chunks_mut(kp * NR).enumerate().for_each(pack);
    } else {
        out.chunks_mut(kp * NR).enumerate().for_each(pack);
    }
}

/// Where a packed lhs keeps its pairs: pair `p` of row `r` at `r * row + p * pair`.
#[derive(Clone, Copy)]
struct LhsLayout {
    row: usize,
    pair: usize,
}

/// Rows `first..first + rows` of the lhs, padded with zero rows to whole tiles of `MR`: row
/// after row where the rows are contiguous, else tile after tile, each packed by
/// [`pack_lines`]. Returns where the pairs are.
fn pack_lhs(a: Lines, first: usize, rows: usize, k: usize, out: &mut Vec<u32>) -> LhsLayout {
    let kp = k.div_ceil(2);
    out.clear();
    out.resize(rows.div_ceil(MR) * MR * kp, 0);
    if a.step == 1 {
        pack_rows(a, first, rows, k, out);
        return LhsLayout { row: kp, pair: 1 };
    }
    for (tile, o) in out.chunks_mut(kp * MR).enumerate() {
        let start = tile * MR;
        pack_lines(a, first + start, MR.min(rows - start), k, MR, o);
    }
    LhsLayout { row: 1, pair: MR }
}

/// One micro-tile: `c` (`rows` <= `MR` rows of `cols` <= `NR` columns, row stride `ldc`) =
/// its sums so far where `accumulate`, plus the products of `pairs` pairs of the lhs tile at
/// `a` (laid out as `lhs` says) and the rhs panel at `b`.
///
/// # Safety
/// The CPU has AVX-512F and BF16; `a` holds `MR` rows of `pairs` pairs, `b` `pairs * NR`
/// values; `c` is valid for `rows` rows of `cols` elements at stride `ldc`.
#[target_feature(enable = "avx512f,avx512bf16")]
#[allow(clippy::too_many_arguments)]
unsafe fn micro_tile(
    pairs: usize,
    a: *const u32,
    lhs: LhsLayout,
    b: *const u32,
    c: *mut f32,
    ldc: usize,
    rows: usize,
    cols: usize,
    accumulate: bool,
) {
    let masks: [u16; NV] = std::array::from_fn(|v| low_bits(cols.saturating_sub(16 * v)));
    let lhs_rows: [*const u32; MR] = std::array::from_fn(|r| a.wrapping_add(r * lhs.row));
    let mut acc = [[_mm512_setzero_ps(); NV]; MR];
    if accumulate {
        for (r, row) in acc.iter_mut().enumerate().take(rows) {
            for (v, lane) in row.iter_mut().enumerate() {
                let at = c.wrapping_add(r * ldc + 16 * v);
                // SAFETY: masked-off lanes are not read; the others lie in row `r`'s `cols`.
                *lane = unsafe { _mm512_maskz_loadu_ps(masks[v], at) };
            }
        }
    }
    for p in 0..pairs {
        let mut bv = [_mm512_setzero_si512(); NV];
        for (v, lanes) in bv.iter_mut().enumerate() {
            // SAFETY: pair `p` of the panel is `NR` values at `p * NR`.
            *lanes = unsafe { _mm512_loadu_si512(b.add(p * NR + 16 * v).cast()) };
        }
        for (row, &from) in acc.iter_mut().zip(&lhs_rows) {
            // SAFETY: pair `p` of each of the tile's rows lies in the packed lhs.
            let pair = unsafe { *from.add(p * lhs.pair) };
            // SAFETY: both are 512 bits of plain data.
            let lhs: __m512bh = unsafe { std::mem::transmute(_mm512_set1_epi32(pair as i32)) };
            for (lane, &rhs) in row.iter_mut().zip(&bv) {
                // SAFETY: as above.
                let rhs: __m512bh = unsafe { std::mem::transmute(rhs) };
                *lane = _mm512_dpbf16_ps(*lane, lhs, rhs);
            }
        }
    }
    for (r, row) in acc.iter().enumerate().take(rows) {
        for (v, &lane) in row.iter().enumerate() {
            let at = c.wrapping_add(r * ldc + 16 * v);
            // SAFETY: as for the loads.
            unsafe { _mm512_mask_storeu_ps(at, masks[v], lane) };
        }
    }
}

/// Rows `first..first + rows` of `c` (`c` holds exactly those rows, `n` wide) = those rows of
/// the lhs times the packed rhs.
fn row_block(a: Lines, first: usize, k: usize, n: usize, rhs: &[u32], c: &mut [f32]) {
    thread_local! {
        static PACKED: std::cell::RefCell<Vec<u32>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    let rows = c.len() / n;
    let kp = k.div_ceil(2);
    PACKED.with_borrow_mut(|lhs| {
        let layout = pack_lhs(a, first, rows, k, lhs);
        for block in (0..kp).step_by(KCP) {
            let pairs = KCP.min(kp - block);
            for panel in 0..n.div_ceil(NR) {
                let cols = NR.min(n - panel * NR);
                for tile in 0..rows.div_ceil(MR) {
                    // Either layout keeps a tile's `MR * kp` pairs together.
                    let tile_lhs = tile * MR * kp + block * layout.pair;
                    // SAFETY: `runs` checked the instructions; the packed lhs holds whole
                    // tiles of `kp` pairs a row and the panel `kp` pairs from `block`; the
                    // tile's rows and columns lie in `c` (`rows` x `n`).
                    unsafe {
                        micro_tile(
                            pairs,
                            lhs.as_ptr().add(tile_lhs),
                            layout,
                            rhs.as_ptr().add((panel * kp + block) * NR),
                            c.as_mut_ptr().add(tile * MR * n + panel * NR),
                            n,
                            MR.min(rows - tile * MR),
                            cols,
                            block > 0,
                        )
                    };
                }
            }
        }
    });
}

/// One product: `c` (`m` x `n`, row-major, overwritten) = `a` · `b`, its row blocks across the
/// pool's threads where `parallel`.
fn product(g: &Gemm, a: Lines, b: Lines, c: &mut [f32], parallel: bool) {
    let (m, n, k) = (g.m, g.n, g.k);
    let mut rhs = Vec::new();
    pack_rhs(b, k, n, parallel, &mut rhs);
    let c = &mut c[..m * n];
    // Enough blocks for every thread to take several, for balance.
    let rows = if parallel {
        m.div_ceil(4 * threads()).div_ceil(MR) * MR
    } else {
        MC
    };
    let rows = rows.clamp(MR, MC);
    let block = |(i, part): (usize, &mut [f32])| row_block(a, i * rows, k, n, &rhs, part);
    if parallel {
        c.par_chunks_mut(rows * n).enumerate().for_each(block);
    } else {
        c.chunks_mut(rows * n).enumerate().for_each(block);
    }
}

/// Matrix `b` of `batch` as lines (empty where its offset lies outside the data; the packers
/// check the rest).
fn matrix<'a>(batch: &Batch<'a, f32>, b: usize) -> Lines<'a> {
    let start = batch.offsets.get(b).copied().unwrap_or(usize::MAX);
    Lines {
        data: batch.data.get(start..).unwrap_or(&[]),
        line: batch.line,
        step: batch.step,
    }
}

/// `c` (batch·m·n elements, overwritten) = the products of the lhs and rhs matrices of each
/// batch, `g` giving the sizes. Callers check [`runs`] first.
pub(crate) fn matmul_batches(g: &Gemm, lhs: &Batch<f32>, rhs: &Batch<f32>, c: &mut [f32]) {
    let (m, n) = (g.m, g.n);
    let c = &mut c[..g.batch * m * n];
    if g.batch >= threads() && threads() > 1 {
        // Whole products per thread: a batch of small products (attention's) splits evenly.
        c.par_chunks_mut(m * n)
            .enumerate()
            .for_each(|(i, c)| product(g, matrix(lhs, i), matrix(rhs, i), c, false));
    } else {
        let parallel = crate::gemm::splits(g);
        for (i, c) in c.chunks_mut(m * n).enumerate() {
            product(g, matrix(lhs, i), matrix(rhs, i), c, parallel);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `x` rounded to the nearest bf16 (ties to even), as its 16 bits.
    fn bf16_bits(x: f32) -> u32 {
        let b = x.to_bits();
        b.wrapping_add(0x7FFF + ((b >> 16) & 1)) >> 16
    }

    /// Deterministic bf16 values in [-2, 2), as f32.
    fn values(len: usize, seed: u32) -> Vec<f32> {
        let mut s = seed.max(1);
        (0..len)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 17;
                s ^= s << 5;
                let x = (s as f32 / u32::MAX as f32) * 4.0 - 2.0;
                f32::from_bits(bf16_bits(x) << 16)
            })
            .collect()
    }

    /// `c` = the row-major product `g` describes, of operands stored as `g` says.
    fn matmul(g: &Gemm, a: &[f32], b: &[f32], c: &mut [f32]) {
        matmul_batches(
            g,
            &Batch::stored(g, a, true),
            &Batch::stored(g, b, false),
            c,
        );
    }

    /// The product in f64 of the stored layouts `g` describes.
    fn reference(g: &Gemm, a: &[f32], b: &[f32]) -> Vec<f64> {
        let (m, n, k) = (g.m, g.n, g.k);
        let mut out = vec![0.0; g.batch * m * n];
        for batch in 0..g.batch {
            for i in 0..m {
                for j in 0..n {
                    let mut sum = 0.0f64;
                    for l in 0..k {
                        let x = if g.lhs_k_first {
                            a[batch * m * k + l * m + i]
                        } else {
                            a[batch * m * k + i * k + l]
                        };
                        let y = if g.rhs_k_last {
                            b[batch * k * n + j * k + l]
                        } else {
                            b[batch * k * n + l * n + j]
                        };
                        sum += x as f64 * y as f64;
                    }
                    out[batch * m * n + i * n + j] = sum;
                }
            }
        }
        out
    }

    /// Every shape class the packing and the micro-tiles handle: edges of every tile size,
    /// odd and one-element contractions, several K blocks, both stored layouts of each
    /// operand, batches (whole products per thread) and single large products (row blocks
    /// across threads); each element within f32 accumulation error of the exact sum.
    #[test]
    fn products_match_the_exact_sums() {
        if !available() {
            eprintln!("skipped: this CPU has no AVX-512 BF16");
            return;
        }
        let shapes = [
            (1, 1, 1, 1),
            (1, 7, 5, 3),
            (2, 6, 64, 2),
            (3, 13, 65, 33),
            (1, 49, 130, 257),
            (1, 100, 70, 300),
            (5, 37, 129, 31),
            (1, 300, 200, 512),
        ];
        for (batch, m, n, k) in shapes {
            for (lhs_k_first, rhs_k_last) in
                [(false, false), (true, false), (false, true), (true, true)]
            {
                let g = Gemm {
                    batch,
                    m,
                    n,
                    k,
                    lhs_k_first,
                    rhs_k_last,
                    bf16_operands: true,
                };
                let (a, b) = (values(batch * m * k, 7), values(batch * k * n, 11));
                let mut c = vec![f32::NAN; batch * m * n];
                matmul(&g, &a, &b, &mut c);
                let exact = reference(&g, &a, &b);
                // Each partial sum is rounded once: at most k relative errors of 2^-24 of
                // the sum of the magnitudes (at most 4 per term).
                let bound = k as f64 * 4.0 * f64::from(f32::EPSILON);
                for (i, (&got, &want)) in c.iter().zip(&exact).enumerate() {
                    assert!(
                        (got as f64 - want).abs() <= bound,
                        "{g:?}: element {i} is {got}, exact {want}"
                    );
                }
            }
        }
    }

    /// `x` (row-major, `dims`) permuted by `perm` into a new row-major buffer.
    fn permute(x: &[f32], dims: &[usize], perm: &[usize]) -> Vec<f32> {
        let rank = dims.len();
        let mut strides = vec![1; rank];
        for d in (0..rank - 1).rev() {
            strides[d] = strides[d + 1] * dims[d + 1];
        }
        let out_dims: Vec<usize> = perm.iter().map(|&d| dims[d]).collect();
        let mut index = vec![0; rank];
        (0..x.len())
            .map(|_| {
                let at: usize = index.iter().zip(perm).map(|(&i, &d)| i * strides[d]).sum();
                for k in (0..rank).rev() {
                    index[k] += 1;
                    if index[k] < out_dims[k] {
                        break;
                    }
                    index[k] = 0;
                }
                x[at]
            })
            .collect()
    }

    /// Attention's products read through their permutations give the bits of the same
    /// products of permuted copies; permutations whose groups do not merge, or that read
    /// along no unit stride, are refused.
    #[test]
    fn permuted_operands_read_in_place() {
        if !available() {
            eprintln!("skipped: this CPU has no AVX-512 BF16");
            return;
        }
        let (b, t, s, h, d) = (2, 37, 29, 3, 40);
        let q = values(b * t * h * d, 3);
        let k = values(b * s * h * d, 5);
        let v = values(b * s * h * d, 9);
        let p = values(b * h * t * s, 13);
        // Each operand as its elements, its shape and the permutation read; then m, n, k.
        type Operand<'a> = (&'a [f32], [usize; 4], [usize; 4]);
        let cases: [(Operand, Operand, (usize, usize, usize)); 2] = [
            // Scores: q [b,t,h,d] as [b,h | t | d] times k [b,s,h,d] as [b,h | d | s].
            (
                (&q, [b, t, h, d], [0, 2, 1, 3]),
                (&k, [b, s, h, d], [0, 2, 3, 1]),
                (t, s, d),
            ),
            // Mixing: p [b,h,t,s] as it is times v [b,s,h,d] as [b,h | s | d].
            (
                (&p, [b, h, t, s], [0, 1, 2, 3]),
                (&v, [b, s, h, d], [0, 2, 1, 3]),
                (t, d, s),
            ),
        ];
        for ((x, xd, xp), (y, yd, yp), (m, n, kk)) in cases {
            let g = Gemm {
                batch: b * h,
                m,
                n,
                k: kk,
                lhs_k_first: false,
                rhs_k_last: false,
                bf16_operands: true,
            };
            let lhs = Batch::permuted(x, &xd, &xp, 2, 1, true).expect("lhs view");
            let rhs = Batch::permuted(y, &yd, &yp, 2, 1, false).expect("rhs view");
            let mut in_place = vec![f32::NAN; b * h * m * n];
            matmul_batches(&g, &lhs, &rhs, &mut in_place);
            let mut copied = vec![f32::NAN; b * h * m * n];
            matmul(
                &g,
                &permute(x, &xd, &xp),
                &permute(y, &yd, &yp),
                &mut copied,
            );
            assert_eq!(
                in_place.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                copied.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                "{g:?}"
            );
        }
        // [b,t,h,d] as [b | t,h... ]: batch b, lines over (h, t) do not merge.
        assert!(Batch::permuted(&q, &[b, t, h, d], &[0, 2, 1, 3], 1, 2, true).is_none());
        // Lines along t and steps along h: neither stride is 1.
        assert!(Batch::permuted(&q, &[b, t, h, d], &[0, 3, 1, 2], 2, 1, true).is_none());
    }

    /// Operands that are not bf16 values are rounded to bf16 (to nearest even), as the
    /// interpreter's conversion does, and NaNs and infinities propagate.
    #[test]
    fn operands_round_to_bf16_and_specials_propagate() {
        if !available() {
            eprintln!("skipped: this CPU has no AVX-512 BF16");
            return;
        }
        let g = Gemm {
            batch: 1,
            m: 40,
            n: 40,
            k: 40,
            lhs_k_first: false,
            rhs_k_last: false,
            bf16_operands: true,
        };
        // 1 + 2^-8 and 1 + 3·2^-8 are ties between bf16 values (spaced 2^-7 there), rounded
        // to the even ones: 1 and 1 + 2^-6. Row 0 sums them; rows 1 and 2 hold a NaN and an
        // infinity; row 3 is zeros.
        let mut a = vec![0.0f32; 40 * 40];
        a[0] = 1.0 + 1.0 / 256.0;
        a[1] = 1.0 + 3.0 / 256.0;
        a[40] = f32::NAN;
        a[80] = f32::INFINITY;
        let b = vec![1.0f32; 40 * 40];
        let mut c = vec![0.0f32; 40 * 40];
        matmul(&g, &a, &b, &mut c);
        assert_eq!(c[0], 1.0 + (1.0 + 4.0 / 256.0));
        assert!(c[40].is_nan());
        assert_eq!(c[80], f32::INFINITY);
        assert_eq!(c[120], 0.0);
    }
}

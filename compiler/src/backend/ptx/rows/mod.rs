//! Row kernels on the GPU ([`crate::kernel::rows`]): softmax, layernorm and their gradients as
//! one launch instead of a kernel per elementwise run and one per reduction.
//!
//! One block per row (grid-striding over rows), [`row_threads`] threads of it. The row lives in
//! registers: thread `t` holds vectors `t`, `t + threads`, ... of the row, each 16 bytes of
//! consecutive columns where rows are whole vectors (one column otherwise), loaded and stored
//! by one instruction, so neighbouring threads touch neighbouring addresses; at most 16 columns
//! a thread (its slots). A value one pass computes and a later pass reads (the CPU's scratch
//! row) stays in its register, and an input read by several passes is loaded once. A reduction
//! folds each thread's slots as its pass computes them, then across the warp by butterfly
//! shuffles (every lane ends with the result), then, for blocks of several warps, through
//! shared memory, every thread folding the warps' partials in the same order: each thread holds
//! the same row value, so the next pass needs no broadcast. Row values are computed by every
//! thread alike; thread 0 stores them.
//!
//! A row longer than that (up to [`MAX_COLS`]: vocabulary-sized softmax) is streamed: 1,024
//! threads take it a chunk of 8 columns each at a time, every pass a loop over the chunks, and
//! a value an earlier pass computed is computed again from the inputs, which each pass reloads
//! ([`crate::kernel::rows::recompute_carried`]). Softmax so reads its row three times and
//! writes it once, where kernels and reduction kernels would make about six passes over memory.
//! But a block streams each row, so only rows enough to spread over the device stream
//! ([`ROW_LIMIT`]); fewer very long rows run as kernels and split reductions over many blocks.
//!
//! The entry is built in steps (`entry`): set-up (parameters, each thread's vectors, the
//! shared partials), then per pass its row values, its element values slot by slot
//! (`memory` loads and stores them) and the reductions they feed (`reduction`), and last
//! the row loop around them.

mod entry;
mod memory;
mod reduction;

pub(super) use entry::render_row_entry;
pub(super) use reduction::combine;

use crate::kernel::Kernel;
use crate::target::RowLimit;

/// Columns a thread of a row kernel holds at most.
const SLOTS: usize = 16;

/// The longest rows a row kernel takes: a block streams each row, so few long rows would keep
/// most of the device idle; longer rows run as kernels and reduction kernels over many blocks.
pub const MAX_COLS: usize = 262_144;

/// The rows that take a row kernel on the GPU: the GPU target's row limit. A streamed row takes
/// one block, so its time grows with its length however few rows there are: a few very long
/// rows run faster as kernels and split reductions over many blocks, while rows of up to 65,536
/// elements stream faster than that path even when few (measured on an H200; docs/perf-log.md).
/// Longer rows stream only when there are 32 or more.
pub const ROW_LIMIT: RowLimit = RowLimit {
    max_cols: MAX_COLS,
    long_cols: 65_536,
    min_long_rows: 32,
};

/// Columns a row kernel's thread loads and stores as one vector: 16 bytes of f32 (or of an
/// 8-byte type) where rows are whole vectors, else one.
pub fn row_vector(kernel: &Kernel, cols: usize) -> usize {
    let v = if kernel.sig.buffers.iter().any(|b| b.dtype.size_bytes() == 8) {
        2
    } else {
        4
    };
    if cols.is_multiple_of(v) {
        v
    } else {
        1
    }
}

/// Vectors a thread of a row kernel takes before its block grows by a warp. Two keep more
/// loads in flight and more rows on each multiprocessor than one; four make blocks of short
/// rows too small, which slowed the MLP step (docs/perf-log.md).
const VECTORS_PER_THREAD: usize = 2;

/// Threads per block of a row kernel over rows of `vectors` vectors of `v` columns: whole
/// warps, [`VECTORS_PER_THREAD`] vectors each up to 256 threads; beyond, as many warps (up to
/// 32, CUDA's 1,024 threads) as keep a thread's columns within [`SLOTS`].
pub fn row_threads(vectors: usize, v: usize) -> u32 {
    let warps = vectors.div_ceil(32 * VECTORS_PER_THREAD).clamp(1, 8);
    let held = vectors.div_ceil(32 * warps) * v;
    let warps = if held > SLOTS {
        vectors.div_ceil(32 * (SLOTS / v)).min(32)
    } else {
        warps
    };
    (warps * 32) as u32
}

/// How a row kernel spreads a row over its block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RowLayout {
    /// Columns loaded and stored as one vector.
    pub v: usize,
    pub threads: u32,
    /// Columns a thread holds: of the whole row, or of each chunk where `streamed`.
    pub slots: usize,
    /// Whether the row is taken a chunk of `threads * slots` columns at a time, each pass a
    /// loop over the chunks, because the whole row would not fit in [`SLOTS`] columns a thread.
    pub streamed: bool,
}

/// Columns a thread of a streamed row kernel holds of each chunk: two 16-byte vectors of f32.
const CHUNK_SLOTS: usize = 8;

/// How row kernel `kernel` spreads a row over a block.
pub fn row_layout(kernel: &Kernel) -> Option<RowLayout> {
    let cols = kernel.rows.as_ref()?.cols;
    let v = row_vector(kernel, cols);
    let threads = row_threads(cols / v, v);
    let slots = (cols / v).div_ceil(threads as usize) * v;
    Some(if slots <= SLOTS {
        RowLayout {
            v,
            threads,
            slots,
            streamed: false,
        }
    } else {
        RowLayout {
            v,
            threads: 1024,
            slots: CHUNK_SLOTS,
            streamed: true,
        }
    })
}

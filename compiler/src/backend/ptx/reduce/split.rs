//! Split reductions: a reduction with too few blocks to keep the GPU busy, each folding many
//! elements, becomes two kernels, the first folding segments of each result's elements in
//! blocks of their own, the second folding those partial results.

use super::{ReduceKernel, ReduceLayout};
use ferrax_ir::DType;

/// A reduction split in two kernels: `partial` folds each segment of each result's elements
/// into a partial result (`outputs × segments` of them: rows of partials, or for columns
/// `segments` rows of `outputs`), and `total` folds the partials into the results.
#[derive(Clone, Debug, PartialEq)]
pub struct SplitReduction {
    pub partial: ReduceKernel,
    pub total: ReduceKernel,
}

/// A reduction with fewer blocks than this may be split, so that more blocks share it.
const SPLIT_BELOW_BLOCKS: usize = 256;
/// Blocks a split reduction aims for: several per multiprocessor of a large GPU.
const SPLIT_BLOCKS: usize = 512;
/// The fewest elements a block of a split reduction folds: less, and a second launch costs
/// more than the first one saves.
const MIN_SEGMENT_ELEMENTS: usize = 16384;

impl ReduceKernel {
    /// This reduction in two kernels, where it has too few blocks to keep a GPU busy and
    /// each would fold many elements (a sum of a whole array, or a column sum over a large
    /// batch into a few columns: XLA's split reductions): each result's elements split into
    /// segments of at least [`MIN_SEGMENT_ELEMENTS`] per block, which fold into partial results
    /// (halves' in f32, so the result is still rounded once), then a second kernel folds
    /// those. Columns split when they are leading ones. `total_name` names the second kernel.
    pub fn split(&self, total_name: String) -> Option<SplitReduction> {
        let width = match self.layout {
            ReduceLayout::Rows => 1,
            ReduceLayout::Columns if self.inner == self.outputs => self.width(),
            ReduceLayout::Columns => return None,
        };
        let blocks = self.blocks();
        let per_block = self.reduced * width;
        if self.segments != 1 || blocks == 0 || blocks >= SPLIT_BELOW_BLOCKS {
            return None;
        }
        let wanted = SPLIT_BLOCKS
            .div_ceil(blocks)
            .min(per_block / MIN_SEGMENT_ELEMENTS);
        // Equal segments but the last, none empty.
        let segment = self.reduced.div_ceil(wanted.max(1));
        let segments = self.reduced.div_ceil(segment);
        if segments < 2 {
            return None;
        }
        let partial_type = match self.dtype {
            DType::F16 | DType::BF16 => DType::F32,
            other => other,
        };
        let partial = ReduceKernel {
            result: partial_type,
            segments,
            ..self.clone()
        };
        let total = ReduceKernel {
            name: total_name,
            dtype: partial_type,
            result: self.result,
            reduced: segments,
            inner: match self.layout {
                ReduceLayout::Rows => 1,
                ReduceLayout::Columns => self.outputs,
            },
            ..self.clone()
        };
        Some(SplitReduction { partial, total })
    }

    /// Elements of each segment but the last.
    pub fn segment(&self) -> usize {
        self.reduced.div_ceil(self.segments)
    }
}

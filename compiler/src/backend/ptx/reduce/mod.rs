//! Reduction kernels: a reduction over trailing dimensions is a row reduction (one block per
//! row: each thread strides the row, four loads in flight, then warp shuffles and one
//! shared-memory pass across the block's warps); one over leading or middle dimensions is a column reduction (one thread per
//! output, reading down its column, so neighbouring threads read neighbouring addresses; over
//! middle dimensions each leading index has its own block of rows). Axes that are not
//! consecutive are not lowered here.
//!
//! Max and min follow the interpreter (NaN wins, +0 beats -0 for max); float sums accumulate in
//! the element type, in a different order than the interpreter's pairwise f64 sum, so results
//! agree to rounding, not bit for bit. i32 and i64 reductions wrap, as the interpreter's do, so
//! they agree bit for bit.
//!
//! Planning (which reductions become kernels, their layout, blocks and grids) is here; a
//! reduction with too few blocks to keep the GPU busy is split in two kernels (`split`); the
//! entries are rendered by `render`, each reduction's code by `body`, on registers the entry
//! asks for by what they hold (`regs`).

mod body;
mod regs;
mod render;
mod split;

pub use render::{render_reduce, render_reduce_launch};
pub use split::SplitReduction;

use ferrax_ir::{DType, ReduceOp, TensorType};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceLayout {
    /// Output `r` reduces elements `r*reduced .. (r+1)*reduced`.
    Rows,
    /// Output `c` reduces elements `c, c + outputs, c + 2*outputs, ...`.
    Columns,
}

/// One reduction kernel.
#[derive(Clone, Debug, PartialEq)]
pub struct ReduceKernel {
    pub name: String,
    pub op: ReduceOp,
    /// The type of the elements read.
    pub dtype: DType,
    /// The type of the results: `dtype`, but f32 for the partial results of halves.
    pub result: DType,
    pub layout: ReduceLayout,
    /// Number of results.
    pub outputs: usize,
    /// Elements folded into each result.
    pub reduced: usize,
    /// Columns: elements from one folded element of a result to the next (the product of the
    /// dimensions after the reduced ones; `outputs` unless they are middle ones).
    pub inner: usize,
    /// Consecutive segments each result's elements are split into, each folded by a block of
    /// its own into a partial result (see [`ReduceKernel::split`]); 1 for a whole reduction.
    pub segments: usize,
}

impl ReduceKernel {
    /// The kernel for reducing `input` (of any type but the unsigned and narrow integers; bools
    /// by maxima and minima alone: any and all) over consecutive `axes`: trailing ones as rows,
    /// others as columns (middle ones as columns of each leading index); over no axes, as rows
    /// of one element.
    pub fn plan(name: String, op: ReduceOp, input: &TensorType, axes: &[usize]) -> Option<Self> {
        let defined = match input.dtype {
            // u32 and the 8-, 16- and 64-bit integers' reductions are the interpreter's (no
            // kernel of their own yet).
            DType::U8 | DType::U32 | DType::I8 | DType::I16 | DType::U16 | DType::U64 => false,
            DType::C64 | DType::C128 => false,
            DType::Bool => matches!(op, ReduceOp::Max | ReduceOp::Min),
            DType::F32 | DType::F64 | DType::F16 | DType::BF16 | DType::I32 | DType::I64 => true,
        };
        if !defined {
            return None;
        }
        let rank = input.rank();
        let consecutive = axes.windows(2).all(|w| w[1] == w[0] + 1);
        let reduced: usize = axes.iter().map(|&a| input.dims()[a]).product();
        let (layout, inner) = match axes.last() {
            None => (ReduceLayout::Rows, 1),
            Some(&last) => {
                let layout = match (consecutive, last + 1 == rank) {
                    (true, true) => ReduceLayout::Rows,
                    (true, false) => ReduceLayout::Columns,
                    _ => return None,
                };
                (layout, input.dims()[last + 1..].iter().product())
            }
        };
        // Rows count their results and elements in 32 bits; columns index their elements and
        // offset their bytes in 32 bits.
        let bytes = input.numel() * input.dtype.size_bytes();
        let indexable = match layout {
            ReduceLayout::Rows => reduced < 1 << 31 && input.numel() / reduced.max(1) < 1 << 31,
            ReduceLayout::Columns => input.numel() < 1 << 31 && bytes < 1 << 32,
        };
        (reduced > 0 && indexable).then(|| ReduceKernel {
            name,
            op,
            dtype: input.dtype,
            result: input.dtype,
            layout,
            outputs: input.numel() / reduced,
            reduced,
            inner,
            segments: 1,
        })
    }

    /// The type of the results it writes: one per output and segment.
    pub fn partials_type(&self) -> TensorType {
        TensorType::new(self.result, [self.outputs * self.segments])
    }

    /// Threads per block: rows get up to 256 threads (whole warps), columns 256.
    pub fn block(&self) -> u32 {
        match self.layout {
            ReduceLayout::Rows => self.segment().div_ceil(32).clamp(1, 8) as u32 * 32,
            ReduceLayout::Columns => 256,
        }
    }

    /// Columns a block of a column reduction takes: 32, or all there are if fewer.
    pub fn width(&self) -> usize {
        self.outputs.clamp(1, 32)
    }

    /// Row lanes of a column reduction's block: its 256 threads over `width` columns.
    pub fn lanes(&self) -> usize {
        256 / self.width()
    }

    /// Blocks that give each its own work: a row (or a row's segment) each, or `width`
    /// columns (of a segment of rows) each.
    pub fn blocks(&self) -> usize {
        self.segments
            * match self.layout {
                ReduceLayout::Rows => self.outputs,
                ReduceLayout::Columns => self.outputs.div_ceil(self.width()),
            }
    }

    /// Blocks to launch alone, given the device's multiprocessor count.
    pub fn grid(&self, multiprocessors: u32) -> u32 {
        self.blocks().clamp(1, multiprocessors as usize * 32) as u32
    }

    /// Whether the reduction may share a launch with others: few enough blocks that giving
    /// each its own costs nothing.
    pub fn groups(&self) -> bool {
        self.blocks() <= GROUPED_BLOCKS
    }
}

/// The most blocks of a reduction that shares a launch.
const GROUPED_BLOCKS: usize = 1024;

/// Independent reductions launched as one entry, each part over its own range of blocks:
/// small ones, such as a backward pass's bias gradients, cost one launch instead of one each.
/// Parts share a dtype; a launch of one is that reduction's own entry.
#[derive(Clone, Debug, PartialEq)]
pub struct ReduceLaunch {
    pub name: String,
    /// Indices into the module's reductions, in block order.
    pub parts: Vec<usize>,
}

impl ReduceLaunch {
    /// One launch per reduction, named after it.
    pub fn each(reductions: &[ReduceKernel]) -> Vec<ReduceLaunch> {
        (0..reductions.len())
            .map(|r| ReduceLaunch {
                name: reductions[r].name.clone(),
                parts: vec![r],
            })
            .collect()
    }

    /// Threads per block.
    pub fn block(&self, reductions: &[ReduceKernel]) -> u32 {
        match self.parts.as_slice() {
            [one] => reductions[*one].block(),
            _ => 256,
        }
    }

    /// Blocks to launch, given the device's multiprocessor count.
    pub fn grid(&self, reductions: &[ReduceKernel], multiprocessors: u32) -> u32 {
        match self.parts.as_slice() {
            [one] => reductions[*one].grid(multiprocessors),
            parts => parts.iter().map(|&r| reductions[r].blocks()).sum::<usize>() as u32,
        }
    }
}

//! What a backend can compute, as data that fusion and lowering receive: its support table
//! (which operation on which element type its kernels compute natively, which they compute
//! by an expansion into primitives, and which are left to the host) and its size limits.
//!
//! This module is a leaf (it names no backend and no pass), so the generic passes depend on
//! it and each backend publishes its own [`Target`] value: fusion asks the table what a kernel
//! may hold, legalization what it must expand, and instruction selection what it renders,
//! so the three cannot disagree.

use ferrax_ir::{BinaryOp, CompareOp, DType, ReduceOp, UnaryOp};

/// How a backend's kernels compute an operation on an element type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Support {
    /// One instruction (or a call) of the backend's own.
    Native,
    /// An expansion into natively computed primitives (`kernel::math`, `kernel::halves`,
    /// `kernel::compares_as_logic`) before instruction selection.
    Expand,
    /// Not in a kernel: the operation is a step of its own, run by the host (the reference
    /// interpreter).
    Host,
}

/// An operation as a kernel computes it, with the element type it computes on (see
/// [`Target::support`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KernelOp {
    /// Values held, loaded and stored unchanged (a broadcast read in place, a reshape, a
    /// stop_gradient, a splat constant).
    Hold,
    Unary(UnaryOp),
    Binary(BinaryOp),
    /// On its operands' type.
    Compare(CompareOp),
    /// On its branches' type.
    Select,
    Clamp,
    /// From the element type asked about to this one.
    Convert(DType),
    /// The bits of the element type asked about read as this one (same width).
    Bitcast(DType),
    /// A reduction over the trailing axes inside a row kernel.
    RowReduce(ReduceOp),
    /// A reduction over leading axes accumulated inside a flat kernel (bias gradients).
    ColumnReduce(ReduceOp),
    /// A load of whole rows picked by integer indices (an embedding lookup): a gather
    /// (`kernel::row_gather`) read in place, on the gathered element type.
    RowGather,
    /// Each element's index along one axis (an iota), on the iota's type.
    Iota,
    /// A window of the last axis of a value a flat kernel computes (a slice), stored as the
    /// kernel computes the whole rows (the kernel IR's window access), on its type.
    Window,
}

impl KernelOp {
    /// Every operation (conversions to each type), for tests that walk the whole table.
    pub fn all() -> Vec<KernelOp> {
        let mut ops = vec![
            KernelOp::Hold,
            KernelOp::RowGather,
            KernelOp::Iota,
            KernelOp::Window,
            KernelOp::Select,
            KernelOp::Clamp,
        ];
        ops.extend(UnaryOp::ALL.map(KernelOp::Unary));
        ops.extend(BinaryOp::ALL.map(KernelOp::Binary));
        ops.extend(CompareOp::ALL.map(KernelOp::Compare));
        ops.extend(DType::ALL.map(KernelOp::Convert));
        ops.extend(DType::ALL.map(KernelOp::Bitcast));
        ops.extend(ReduceOp::ALL.map(KernelOp::RowReduce));
        ops.extend(ReduceOp::ALL.map(KernelOp::ColumnReduce));
        ops
    }
}

/// The rows a backend's row kernels take: up to `max_cols` elements, and more than
/// `long_cols` only where there are at least `min_long_rows` of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RowLimit {
    pub max_cols: usize,
    pub long_cols: usize,
    pub min_long_rows: usize,
}

impl RowLimit {
    /// Any rows.
    pub const NONE: RowLimit = RowLimit {
        max_cols: usize::MAX,
        long_cols: usize::MAX,
        min_long_rows: 0,
    };

    /// Whether `rows` rows of `cols` elements take a row kernel.
    pub fn fits(self, rows: usize, cols: usize) -> bool {
        cols <= self.max_cols && (cols <= self.long_cols || rows >= self.min_long_rows)
    }
}

/// A backend as fusion and lowering see it.
#[derive(Clone, Copy)]
pub struct Target {
    /// The backend's name, for listings and errors.
    pub name: &'static str,
    /// The backend's support table: exhaustive over [`KernelOp`] and [`DType`].
    pub table: fn(KernelOp, DType) -> Support,
    /// The rows its row kernels take.
    pub rows: RowLimit,
    /// The fewest operand elements of a reduction over leading axes that its flat kernels
    /// fold as they go (fusion's column reductions); smaller ones are steps of their own.
    pub columns: usize,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Target")
            .field("name", &self.name)
            .field("rows", &self.rows)
            .field("columns", &self.columns)
            .finish()
    }
}

impl Target {
    /// How the backend computes `op` on element type `dtype`.
    pub fn support(&self, op: KernelOp, dtype: DType) -> Support {
        (self.table)(op, dtype)
    }

    /// Whether a kernel of the backend computes `op` on `dtype`, natively or expanded.
    pub fn computes(&self, op: KernelOp, dtype: DType) -> bool {
        self.support(op, dtype) != Support::Host
    }
}

//! The registers of a reduction entry, asked for by what they hold. They are the emitter's
//! ([`Emitter`]), as every entry's are: each is taken the first time the entry's code asks for
//! it, and the entry declares the emitter's counts. One reduction's code is repeated by each
//! part of a grouped launch ([`super::render_reduce_launch`]), the parts running one after
//! another, so every part asking for a register by what it holds gets the same one: an entry
//! has the registers of its largest part, not the sum of its parts'. For the same reason a
//! column part holds the values only columns have in registers a row part holds values only
//! rows have in ([`Reg::shared`]), so a launch of both layouts takes few more registers than
//! its largest part.

use super::render::element_types;
use crate::backend::ptx::emit::{Class, Emitter};
use crate::backend::ptx::MathMode;
use ferrax_ir::DType;
use std::collections::HashMap;

/// What a register of a reduction entry holds.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub(super) enum Reg {
    /// The thread's index in its block, and the threads of a block.
    Tid,
    Ntid,
    /// The block's index among its part's blocks, and the part's blocks.
    Block,
    Blocks,
    /// A grouped launch's block index, and whether the block is a later part's.
    Launched,
    Later,
    /// The global addresses of the input and of the results.
    Input,
    Output,
    /// The thread's place in its block taken as rows of `n` threads: `tid % n` and `tid / n`
    /// (rows: its lane and warp, `n` 32; columns: its column and row lane, `n` the width).
    X,
    Y,
    /// Whether the block has a (further) row or group of columns to fold.
    NextBlock,
    /// The accumulator, and an element or partial folded into it.
    Acc,
    Value,
    /// The four elements a thread has in flight.
    Four(usize),
    /// The thread's element of its row, or row of its column.
    Index,
    /// The address of the thread's elements, and an element's byte offset.
    Address,
    Offset,
    /// Whether four more elements fit, and whether the thread is done loading.
    Unrolled,
    Folding,
    /// The shared partials, a byte offset into them, and whether `Y` is not 0.
    Partials,
    SlotOffset,
    NotFirst,
    /// A result's byte offset and address.
    ResultOffset,
    ResultAddress,
    /// A segment's result (or group of columns), its index, its first element (or row), its
    /// length, and its first element's byte offset.
    SegmentOf,
    Segment,
    SegmentStart,
    SegmentLength,
    SegmentOffset,
    /// Max and min: whether the accumulator wins, the winner, the signed zeros' join (as a
    /// value, and the bits it joins and is), whether they are equal, whether either is NaN,
    /// and their sum (NaN's propagation).
    Wins,
    Picked,
    JoinedValue,
    AccBits,
    ValueBits,
    Joined,
    Equal,
    Nan,
    Sum,
    /// A half's bits, and a bf16's as the high half of an f32's.
    Half,
    HalfBits,
    /// Rows: the 32-bit words of a 64-bit value, and of its shuffled value.
    Words(usize),
    /// Rows: the warps of a block, the block's row (or segment), the address of a warp's
    /// partial, three and four strides of a thread's elements (in elements), the last element
    /// four loads start from, and the stride in bytes.
    Warps,
    Row,
    Slot,
    ThreeSteps,
    Limit,
    FourSteps,
    Stride,
    /// Rows: the addresses of the first and second of two elements in flight.
    LoadAt,
    LoadAfter,
    /// Rows: whether the thread is not its warp's lane 0, and whether its lane has no warp's
    /// partial to fold.
    NotLane,
    NoPartial,
    /// Columns: the block's index among the part's blocks as it takes group after group, the
    /// thread's column, the thread's slot of the partials, its column's first element and
    /// (for a middle reduction) the column's place in its leading index's block.
    ColumnBlock,
    Column,
    ThreadSlot,
    First,
    Within,
    /// Columns: the rows four loads start from, and the index of a segment's partial result.
    UnrolledRows,
    PartialIndex,
    /// Columns: another lane's index and slot as lane 0 folds them, and whether there are
    /// more.
    OtherLane,
    LaneSlot,
    MoreLanes,
    /// Columns: whether the thread's lane is done, and whether its column is beyond the
    /// results.
    TailDone,
    NoColumn,
}

impl Reg {
    /// The register holding this: a row part's, for values only columns have.
    fn shared(self) -> Reg {
        match self {
            Reg::ColumnBlock => Reg::Warps,
            Reg::Column => Reg::Row,
            Reg::ThreadSlot => Reg::ThreeSteps,
            Reg::First => Reg::Limit,
            Reg::Within => Reg::FourSteps,
            Reg::TailDone => Reg::NotLane,
            Reg::NoColumn => Reg::NoPartial,
            other => other,
        }
    }

    /// The class of the register, given the class of the values the reduction computes in
    /// and of their bits.
    fn class(self, value: Class, bits: Class) -> Class {
        match self {
            Reg::Acc | Reg::Value | Reg::Four(_) | Reg::Picked | Reg::JoinedValue | Reg::Sum => {
                value
            }
            Reg::AccBits | Reg::ValueBits | Reg::Joined => bits,
            Reg::Later
            | Reg::NextBlock
            | Reg::Unrolled
            | Reg::Folding
            | Reg::NotFirst
            | Reg::Wins
            | Reg::Equal
            | Reg::Nan
            | Reg::NotLane
            | Reg::NoPartial
            | Reg::MoreLanes
            | Reg::TailDone
            | Reg::NoColumn => Class::P,
            Reg::Input
            | Reg::Output
            | Reg::Address
            | Reg::Offset
            | Reg::ResultOffset
            | Reg::ResultAddress
            | Reg::SegmentOffset
            | Reg::Stride
            | Reg::LoadAt
            | Reg::LoadAfter => Class::Rd,
            Reg::Half => Class::Rs,
            Reg::Tid
            | Reg::Ntid
            | Reg::Block
            | Reg::Blocks
            | Reg::Launched
            | Reg::X
            | Reg::Y
            | Reg::Index
            | Reg::Partials
            | Reg::SlotOffset
            | Reg::SegmentOf
            | Reg::Segment
            | Reg::SegmentStart
            | Reg::SegmentLength
            | Reg::HalfBits
            | Reg::Words(_)
            | Reg::Warps
            | Reg::Row
            | Reg::Slot
            | Reg::ThreeSteps
            | Reg::Limit
            | Reg::FourSteps
            | Reg::ColumnBlock
            | Reg::Column
            | Reg::ThreadSlot
            | Reg::First
            | Reg::Within
            | Reg::UnrolledRows
            | Reg::PartialIndex
            | Reg::OtherLane
            | Reg::LaneSlot => Class::R,
        }
    }
}

/// The registers of one reduction entry.
pub(super) struct Regs {
    e: Emitter,
    taken: HashMap<Reg, String>,
    /// The classes of the values reductions of the entry's dtype compute in, and of their bits.
    value: Class,
    bits: Class,
}

impl Regs {
    /// The registers of an entry of reductions of `dtype`.
    pub(super) fn new(dtype: DType) -> Regs {
        let (t, bits, _) = element_types(dtype);
        let class = |ty: &str| match ty {
            "f32" => Class::F,
            "f64" => Class::Fd,
            "s64" | "b64" => Class::Rd,
            _ => Class::R,
        };
        Regs {
            // No float arithmetic is selected here: the math mode is never read.
            e: Emitter::new(MathMode::Accurate),
            taken: HashMap::new(),
            value: class(t),
            bits: class(bits),
        }
    }

    /// The register holding `reg`, taken from the emitter the first time it is asked for.
    pub(super) fn get(&mut self, reg: Reg) -> String {
        let reg = reg.shared();
        if let Some(r) = self.taken.get(&reg) {
            return r.clone();
        }
        let r = self.e.reg(reg.class(self.value, self.bits));
        self.taken.insert(reg, r.clone());
        r
    }

    /// The registers holding each of `regs`.
    pub(super) fn all<const N: usize>(&mut self, regs: [Reg; N]) -> [String; N] {
        regs.map(|reg| self.get(reg))
    }

    /// The declarations of every register taken.
    pub(super) fn declare(&self, out: &mut String) {
        self.e.declare(out);
    }
}

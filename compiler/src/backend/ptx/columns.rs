//! Flat kernels that also reduce over leading axes (a bias's or a layer-norm gain's gradient
//! beside the elementwise work that makes its operand): each thread owns a fixed residue of
//! the element index modulo a stride that every reduction's column count divides, so each of
//! its lanes stays in one column of every reduction and folds it in a register, with no
//! atomics and no reads back. A thread takes elements `slot·lanes + k·stride`, so
//! neighbouring threads still touch neighbouring addresses; each writes its lanes' partial
//! results at `slot·lanes`, and a reduction launch then folds the `stride / cols` partials of
//! each column ([`ColumnSplit`]). The operand itself is never written unless another step
//! reads it.

use super::emit::{reg_class, suffix, Class, Emitter};
use super::loops::{
    describe, emit_body, entry_header, global_addresses, store, vector_width, Index, LoopAddresses,
    Thread, Threads,
};
use super::rows::combine;
use super::{MathMode, PtxError};
use crate::kernel::{Kernel, Role};
use ferrax_ir::ReduceOp;
use std::collections::HashMap;
use std::fmt::Write;

/// Threads a column kernel aims for: enough to keep a large GPU's memory busy (about four
/// blocks of 256 a multiprocessor on an H100), few enough that the partials stay small (2 MiB
/// of f32 at four lanes a thread).
const TARGET_SLOTS: usize = 1 << 17;

/// The fewest operand elements a column kernel folds: its partials (at four lanes a thread)
/// are then at most a quarter of the operand it does not write. Below that a reduction
/// kernel, which can launch with others, reads the operand as cheaply.
pub const COLUMN_OPERAND: usize = 16 * TARGET_SLOTS;

/// How a column kernel's elements are dealt to its threads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ColumnSplit {
    /// Consecutive elements a thread takes per step.
    pub lanes: usize,
    /// Elements between a thread's steps: a multiple of every reduction's column count that
    /// divides the kernel's length.
    pub stride: usize,
}

impl ColumnSplit {
    /// The split of `kernel`, a flat kernel with at least one partial buffer, or `None` if it
    /// has none, no elements, or a column count that does not divide its length.
    pub fn of(kernel: &Kernel) -> Option<ColumnSplit> {
        let mut common = 1usize;
        let mut any = false;
        for b in &kernel.sig.buffers {
            if let Role::Partial(_) = b.role {
                let crate::kernel::Access::Inner(cols) = b.access else {
                    return None;
                };
                if cols == 0 || !kernel.len.is_multiple_of(cols) {
                    return None;
                }
                common = lcm(common, cols)?;
                any = true;
            }
        }
        if !any || kernel.len == 0 || kernel.rows.is_some() || !kernel.len.is_multiple_of(common) {
            return None;
        }
        let lanes = vector_width(kernel);
        // Every column count is a multiple of `lanes` where the kernel takes vectors.
        let wanted = (TARGET_SLOTS * lanes).div_ceil(common);
        let copies = wanted.clamp(1, kernel.len / common);
        Some(ColumnSplit {
            lanes,
            stride: common * copies,
        })
    }

    /// Threads with work: one per `lanes` elements of the stride.
    pub fn slots(&self) -> usize {
        self.stride / self.lanes
    }

    /// Partial results of a reduction over `cols` columns, as the `[stride / cols, cols]`
    /// array its second launch folds over the leading axis.
    pub fn partials(&self, cols: usize) -> [usize; 2] {
        [self.stride / cols.max(1), cols]
    }
}

fn lcm(a: usize, b: usize) -> Option<usize> {
    let (mut x, mut y) = (a, b);
    while y != 0 {
        (x, y) = (y, x % y);
    }
    (a / x).checked_mul(b)
}

/// The `.entry` of column kernel `kernel` (legalized): each thread's slots in turn, each slot
/// a loop over its elements folding every reduction's lanes in registers, then storing them.
pub(super) fn render_column_entry(
    name: &str,
    kernel: &Kernel,
    mode: MathMode,
) -> Result<String, PtxError> {
    let split = ColumnSplit::of(kernel)
        .ok_or_else(|| PtxError::unsupported(kernel, "a column reduction of these columns"))?;
    let ColumnSplit { lanes, stride } = split;
    let slots = split.slots();
    let wide = kernel.len > i32::MAX as usize;
    let (it, class) = if wide {
        ("u64", Class::Rd)
    } else {
        ("u32", Class::R)
    };
    let mut e = Emitter::new(mode);
    let Thread {
        ctaid,
        ntid,
        tid,
        nctaid,
    } = Thread::new(&mut e);
    let params: Vec<String> = (0..kernel.sig.buffers.len())
        .map(|i| format!("{name}_param_{i}"))
        .collect();
    let bases = global_addresses(&mut e, &params);
    let (slot, step, index, stride_reg) = (e.reg(class), e.reg(class), e.reg(class), e.reg(class));
    if wide {
        let t = e.reg(Class::Rd);
        e.pre_line(format!("mul.wide.u32 {slot}, {ctaid}, {ntid}"));
        e.pre_line(format!("cvt.u64.u32 {t}, {tid}"));
        e.pre_line(format!("add.s64 {slot}, {slot}, {t}"));
        e.pre_line(format!("mul.wide.u32 {step}, {nctaid}, {ntid}"));
    } else {
        e.pre_line(format!("mad.lo.s32 {slot}, {ctaid}, {ntid}, {tid}"));
        e.pre_line(format!("mul.lo.s32 {step}, {nctaid}, {ntid}"));
    }
    e.pre_line(format!("mov.{it} {stride_reg}, {stride}"));
    // Per partial buffer, its reduction and a register per lane.
    let mut accumulators: HashMap<usize, (ReduceOp, Vec<String>)> = HashMap::new();
    for (i, b) in kernel.sig.buffers.iter().enumerate() {
        if let Role::Partial(op) = b.role {
            let regs = (0..lanes).map(|_| e.reg(reg_class(b.dtype))).collect();
            accumulators.insert(i, (op, regs));
        }
    }
    let at = Index {
        index: index.clone(),
        stride: stride_reg.clone(),
        it,
        wide,
    };
    let mut addresses = LoopAddresses::new(kernel, bases.clone(), &at);
    emit_body(&mut e, kernel, &mut addresses, lanes, &accumulators)?;
    let inner = std::mem::take(&mut e.body);
    // A slot's start: every lane at its reduction's identity, the index at the slot's first.
    let mut partial_buffers: Vec<&usize> = accumulators.keys().collect();
    partial_buffers.sort();
    for &b in &partial_buffers {
        let (op, regs) = &accumulators[b];
        let d = kernel.sig.buffers[*b].dtype;
        let identity = e.constant(op.identity(d), d);
        let (t, _) = suffix(d);
        for r in regs {
            e.line(format!("mov.{t} {r}, {identity}"));
        }
    }
    e.line(format!("mul.lo.{} {index}, {slot}, {lanes}", signed(it)));
    let head = std::mem::take(&mut e.body);
    for &b in &partial_buffers {
        let buffer = &kernel.sig.buffers[*b];
        let bytes = lanes * buffer.dtype.size_bytes();
        let offset = e.reg(Class::Rd);
        if wide {
            e.line(format!("mul.lo.s64 {offset}, {slot}, {bytes}"));
        } else {
            e.line(format!("mul.wide.u32 {offset}, {slot}, {bytes}"));
        }
        let address = e.reg(Class::Rd);
        e.line(format!("add.s64 {address}, {}, {offset}", bases[*b]));
        store(&mut e, buffer.dtype, &address, &accumulators[b].1);
    }
    let tail = std::mem::take(&mut e.body);
    let (none, more, again) = (e.reg(Class::P), e.reg(Class::P), e.reg(Class::P));
    let mut out = describe(kernel, lanes);
    let _ = writeln!(
        out,
        "// column partials: {slots} threads, each over elements slot*{lanes} + k*{stride}"
    );
    entry_header(&mut out, name, &params, Threads::Any);
    e.declare(&mut out);
    out.push('\n');
    out.push_str(&e.pre);
    let _ = writeln!(out, "\tsetp.ge.{it} {none}, {slot}, {slots};");
    let _ = writeln!(out, "\t@{none} bra $L_done;");
    out.push_str("$L_slot:\n");
    out.push_str(&head);
    out.push_str("$L_loop:\n");
    out.push_str(&inner);
    let _ = writeln!(out, "\tadd.{} {index}, {index}, {stride_reg};", signed(it));
    let _ = writeln!(out, "\tsetp.lt.{it} {more}, {index}, {};", kernel.len);
    let _ = writeln!(out, "\t@{more} bra $L_loop;");
    out.push_str(&tail);
    let _ = writeln!(out, "\tadd.{} {slot}, {slot}, {step};", signed(it));
    let _ = writeln!(out, "\tsetp.lt.{it} {again}, {slot}, {slots};");
    let _ = writeln!(out, "\t@{again} bra $L_slot;");
    out.push_str("$L_done:\n\tret;\n}\n");
    Ok(out)
}

/// The signed integer type of index type `it`, for `add` and `mul.lo`.
fn signed(it: &str) -> &'static str {
    if it == "u64" {
        "s64"
    } else {
        "s32"
    }
}

/// Folds lane values `x` into accumulators `acc` by `op`.
pub(super) fn accumulate(
    e: &mut Emitter,
    (op, d): (ReduceOp, ferrax_ir::DType),
    acc: &[String],
    x: &[String],
) {
    let (t, _) = suffix(d);
    for (a, v) in acc.iter().zip(x) {
        let r = combine(e, op, d, a, v);
        e.line(format!("mov.{t} {a}, {r}"));
    }
}

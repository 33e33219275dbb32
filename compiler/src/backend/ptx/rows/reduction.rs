//! A row kernel's reductions: each thread folds its slots into an accumulator as its pass
//! computes them, then the row's value is taken across the warp by butterfly shuffles (every
//! lane ends with it) and, in a block of several warps, through shared memory, every thread
//! folding the warps' partials in the same order, so every thread holds the same row value and
//! the next pass needs no broadcast.

use crate::backend::ptx::emit::{reg_class, suffix, Class, Emitter};
use crate::kernel::{KInstr, KOp};
use ferrax_ir::{DType, ReduceOp};

/// Shared memory for the warps' partials of a block of several warps: 8 bytes per warp and
/// reduction, in the entry's array `{name}_partials`.
pub(super) struct Partials {
    /// Whether this thread is its warp's lane 0, which stores the warp's partial.
    lane_zero: String,
    /// The array's shared address.
    base: String,
    /// This warp's partial (of the first reduction).
    warp_slot: String,
    pub(super) warps: usize,
}

impl Partials {
    /// Registers for thread `tid`'s partials, set before the row loop.
    pub(super) fn new(e: &mut Emitter, name: &str, tid: &str, warps: usize) -> Partials {
        let (lane, warp, base, warp_slot) = (
            e.reg(Class::R),
            e.reg(Class::R),
            e.reg(Class::R),
            e.reg(Class::R),
        );
        let lane_zero = e.reg(Class::P);
        e.pre_line(format!("and.b32 {lane}, {tid}, 31"));
        e.pre_line(format!("setp.eq.u32 {lane_zero}, {lane}, 0"));
        e.pre_line(format!("shr.u32 {warp}, {tid}, 5"));
        e.pre_line(format!("mov.u32 {base}, {name}_partials"));
        e.pre_line(format!("shl.b32 {warp_slot}, {warp}, 3"));
        e.pre_line(format!("add.u32 {warp_slot}, {warp_slot}, {base}"));
        Partials {
            lane_zero,
            base,
            warp_slot,
            warps,
        }
    }
}

/// The row's `op` reduction (on `d`) of every thread's accumulator `acc`, into a new register
/// holding it in every thread: across the warp, then, where there are `partials`, across the
/// warps through the area of the entry's `index`-th reduction.
pub(super) fn reduce_row(
    e: &mut Emitter,
    op: ReduceOp,
    d: DType,
    acc: &str,
    partials: Option<(&Partials, usize)>,
) -> String {
    let (t, _) = suffix(d);
    let r = e.reg(reg_class(d));
    e.line(format!("mov.{t} {r}, {acc}"));
    for offset in [16, 8, 4, 2, 1] {
        let other = shuffle(e, d, &r, offset);
        let c = combine(e, op, d, &r, &other);
        e.line(format!("mov.{t} {r}, {c}"));
    }
    if let Some((shared, index)) = partials {
        let Partials {
            lane_zero,
            base,
            warp_slot,
            warps,
        } = shared;
        let area = index * warps * 8;
        e.line(format!(
            "@{lane_zero} st.shared.{t} [{warp_slot}+{area}], {r}"
        ));
        e.line("bar.sync 0".into());
        e.line(format!("ld.shared.{t} {r}, [{base}+{area}]"));
        for w in 1..*warps {
            let p = e.reg(reg_class(d));
            let at = area + 8 * w;
            e.line(format!("ld.shared.{t} {p}, [{base}+{at}]"));
            let c = combine(e, op, d, &r, &p);
            e.line(format!("mov.{t} {r}, {c}"));
        }
    }
    r
}

/// `op(a, b)` into a new register.
pub(in crate::backend::ptx) fn combine(
    e: &mut Emitter,
    op: ReduceOp,
    d: DType,
    a: &str,
    b: &str,
) -> String {
    let (t, _) = suffix(d);
    match op {
        ReduceOp::Max | ReduceOp::Min => e.min_max(a, b, d, op == ReduceOp::Max),
        ReduceOp::Sum | ReduceOp::Prod => {
            let r = e.reg(reg_class(d));
            let name = if op == ReduceOp::Sum { "add" } else { "mul" };
            e.line(format!("{name}.rn.{t} {r}, {a}, {b}"));
            r
        }
    }
}

/// Folds `slots` (the values of a thread's columns) into accumulator `acc` of `reduction`; a
/// vector's columns only where it is inside the row (`inside`, per vector of `v` columns).
pub(super) fn fold(
    e: &mut Emitter,
    reduction: &KInstr,
    acc: &str,
    slots: &[String],
    inside: &[Option<String>],
    v: usize,
) {
    let KOp::Reduce(op) = reduction.op else {
        return;
    };
    let d = reduction.dtype;
    let (t, _) = suffix(d);
    for (j, x) in slots.iter().enumerate() {
        let c = combine(e, op, d, acc, x);
        let line = format!("mov.{t} {acc}, {c}");
        e.line(match &inside[j / v] {
            Some(p) => format!("@{p} {line}"),
            None => line,
        });
    }
}

/// Lane `lane ^ offset`'s value of `v`.
fn shuffle(e: &mut Emitter, d: DType, v: &str, offset: u32) -> String {
    let r = e.reg(reg_class(d));
    if d == DType::F64 {
        let (lo, hi, slo, shi) = (
            e.reg(Class::R),
            e.reg(Class::R),
            e.reg(Class::R),
            e.reg(Class::R),
        );
        e.line(format!("mov.b64 {{{lo}, {hi}}}, {v}"));
        e.line(format!("shfl.sync.bfly.b32 {slo}, {lo}, {offset}, 31, -1"));
        e.line(format!("shfl.sync.bfly.b32 {shi}, {hi}, {offset}, 31, -1"));
        e.line(format!("mov.b64 {r}, {{{slo}, {shi}}}"));
    } else {
        e.line(format!("shfl.sync.bfly.b32 {r}, {v}, {offset}, 31, -1"));
    }
    r
}

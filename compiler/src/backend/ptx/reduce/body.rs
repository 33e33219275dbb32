//! The code of one reduction in an entry: a row reduction's block folds its row (or segment)
//! with four loads in flight a thread, then across its warps; a column reduction's block folds
//! `width` columns with a lane of rows per thread, then across the lanes through shared memory.
//! Registers are asked for by what they hold ([`Regs`]), so the parts of a grouped launch
//! ([`super::render_reduce_launch`]) reuse them in turn.

use super::regs::{Reg, Regs};
use super::render::{
    combine, element_types, init_literal, load_element, segment_of, store_result, warp_reduce,
};
use super::{ReduceKernel, ReduceLayout};
use std::fmt::Write;

/// The code of reduction `k`, given the thread and block size (`Reg::Tid`, `Reg::Ntid`), its
/// block and block count (`Reg::Block`, `Reg::Blocks`), and its input and result
/// (`Reg::Input`, `Reg::Output`); partials go through the shared array `shared`. It ends with
/// a `ret`.
pub(super) fn reduce_body(r: &mut Regs, k: &ReduceKernel, shared: &str) -> String {
    let mut s = match k.layout {
        ReduceLayout::Rows => row_body(r, k, shared),
        ReduceLayout::Columns => column_body(r, k, shared),
    };
    s.push_str("$L_end:\n\tret;\n");
    s
}

/// A row reduction's blocks: each folds its rows (or segments) in turn.
fn row_body(r: &mut Regs, k: &ReduceKernel, shared: &str) -> String {
    let (t, bits, size) = element_types(k.dtype);
    let init = init_literal(k.op, k.dtype);
    let (outputs, reduced) = (k.outputs, k.reduced);
    let segments = k.segments;
    let [tid, ntid, block, blocks, input] =
        r.all([Reg::Tid, Reg::Ntid, Reg::Block, Reg::Blocks, Reg::Input]);
    let [lane, warp, warps, partials, three, four, stride] = r.all([
        Reg::X,
        Reg::Y,
        Reg::Warps,
        Reg::Partials,
        Reg::ThreeSteps,
        Reg::FourSteps,
        Reg::Stride,
    ]);
    let [row, next, acc, index, address] =
        r.all([Reg::Row, Reg::NextBlock, Reg::Acc, Reg::Index, Reg::Address]);
    let mut s = String::new();
    let row_bytes = reduced * size;
    // Block `row` folds a row, or segment `row % segments` of row `row / segments`.
    let (results, length) = match segments {
        1 => (outputs, reduced.to_string()),
        _ => (outputs * segments, r.get(Reg::SegmentLength)),
    };
    let _ = writeln!(
        s,
        "\tand.b32 {lane}, {tid}, 31;\n\tshr.u32 {warp}, {tid}, 5;\n\tshr.u32 {warps}, {ntid}, 5;"
    );
    let _ = writeln!(s, "\tmov.u32 {partials}, {shared};");
    let _ = writeln!(
        s,
        "\tmul.lo.s32 {three}, {ntid}, 3;\n\tshl.b32 {four}, {ntid}, 2;\n\tmul.wide.u32 {stride}, {ntid}, {size};"
    );
    let _ = writeln!(s, "\tmov.u32 {row}, {block};");
    let _ = writeln!(
        s,
        "\tsetp.ge.u32 {next}, {row}, {results};\n\t@{next} bra $L_end;"
    );
    s.push_str("$L_row:\n");
    let _ = writeln!(s, "\tmov.{t} {acc}, {init};\n\tmov.u32 {index}, {tid};");
    if segments == 1 {
        let _ = writeln!(s, "\tcvt.u64.u32 {address}, {row};\n\tmul.lo.s64 {address}, {address}, {row_bytes};\n\tadd.s64 {address}, {input}, {address};");
    } else {
        s.push_str(&segment_of(r, &row, k));
        let [of, start, offset] = r.all([Reg::SegmentOf, Reg::SegmentStart, Reg::SegmentOffset]);
        let _ = writeln!(s, "\tcvt.u64.u32 {address}, {of};\n\tmul.lo.s64 {address}, {address}, {row_bytes};\n\tmul.wide.u32 {offset}, {start}, {size};\n\tadd.s64 {address}, {address}, {offset};\n\tadd.s64 {address}, {input}, {address};");
    }
    row_loads(r, k, &mut s, &length);
    s.push_str("$L_folded:\n");
    s.push_str(&warp_reduce(r, k, t, bits));
    let [not_lane, slot_offset, slot, not_first, no_partial] = r.all([
        Reg::NotLane,
        Reg::SlotOffset,
        Reg::Slot,
        Reg::NotFirst,
        Reg::NoPartial,
    ]);
    let _ = writeln!(
        s,
        "\tsetp.ne.u32 {not_lane}, {lane}, 0;\n\t@{not_lane} bra $L_stored;"
    );
    let _ = writeln!(
        s,
        "\tshl.b32 {slot_offset}, {warp}, 3;\n\tadd.s32 {slot}, {partials}, {slot_offset};\n\tst.shared.{t} [{slot}], {acc};"
    );
    s.push_str("$L_stored:\n\tbar.sync 0;\n");
    let _ = writeln!(
        s,
        "\tsetp.ne.u32 {not_first}, {warp}, 0;\n\t@{not_first} bra $L_next;"
    );
    let _ = writeln!(s, "\tmov.{t} {acc}, {init};");
    let _ = writeln!(
        s,
        "\tsetp.ge.u32 {no_partial}, {lane}, {warps};\n\t@{no_partial} bra $L_partial;"
    );
    let _ = writeln!(
        s,
        "\tshl.b32 {slot_offset}, {lane}, 3;\n\tadd.s32 {slot}, {partials}, {slot_offset};\n\tld.shared.{t} {acc}, [{slot}];"
    );
    s.push_str("$L_partial:\n");
    s.push_str(&warp_reduce(r, k, t, bits));
    let _ = writeln!(
        s,
        "\tsetp.ne.u32 {not_lane}, {lane}, 0;\n\t@{not_lane} bra $L_next;"
    );
    s.push_str(&store_result(r, k, &row));
    s.push_str("$L_next:\n\tbar.sync 0;\n");
    let _ = writeln!(
        s,
        "\tadd.s32 {row}, {row}, {blocks};\n\tsetp.lt.u32 {next}, {row}, {results};\n\t@{next} bra $L_row;"
    );
    s
}

/// A thread's fold of its elements of the row (at `Reg::Address`, `length` of them) into the
/// accumulator.
fn row_loads(r: &mut Regs, k: &ReduceKernel, s: &mut String, length: &str) {
    let (t, bits, size) = element_types(k.dtype);
    let [ntid, acc, v, index, address, offset] = r.all([
        Reg::Ntid,
        Reg::Acc,
        Reg::Value,
        Reg::Index,
        Reg::Address,
        Reg::Offset,
    ]);
    let [three, four, stride, limit, unrolled, folding, at, after] = r.all([
        Reg::ThreeSteps,
        Reg::FourSteps,
        Reg::Stride,
        Reg::Limit,
        Reg::Unrolled,
        Reg::Folding,
        Reg::LoadAt,
        Reg::LoadAfter,
    ]);
    let w = r.all([0, 1, 2, 3].map(Reg::Four));
    // Four loads in flight a thread (`stride` bytes apart), folded in the order a
    // one-load loop would fold them, while all four fall in the row (the element is
    // below `limit`: the length less three strides); then one at a time.
    let _ = writeln!(
        s,
        "\tmax.u32 {limit}, {three}, {length};\n\tsub.s32 {limit}, {limit}, {three};\n\tsetp.ge.u32 {unrolled}, {index}, {limit};\n\t@{unrolled} bra $L_tail;"
    );
    s.push_str("$L_four:\n");
    let _ = writeln!(
        s,
        "\tmul.wide.u32 {offset}, {index}, {size};\n\tadd.s64 {at}, {address}, {offset};\n\tadd.s64 {after}, {at}, {stride};"
    );
    for (j, to) in w.iter().enumerate() {
        if j == 2 {
            let _ = writeln!(
                s,
                "\tadd.s64 {at}, {after}, {stride};\n\tadd.s64 {after}, {at}, {stride};"
            );
        }
        let from = [&at, &after][j % 2];
        s.push_str(&load_element(r, k.dtype, to, from));
    }
    for x in &w {
        s.push_str(&combine(r, k.op, t, bits, &acc, x));
    }
    let _ = writeln!(
        s,
        "\tadd.s32 {index}, {index}, {four};\n\tsetp.lt.u32 {unrolled}, {index}, {limit};\n\t@{unrolled} bra $L_four;"
    );
    s.push_str("$L_tail:\n");
    let _ = writeln!(
        s,
        "\tsetp.ge.u32 {folding}, {index}, {length};\n\t@{folding} bra $L_folded;"
    );
    s.push_str("$L_col:\n");
    let _ = writeln!(
        s,
        "\tmul.wide.u32 {offset}, {index}, {size};\n\tadd.s64 {at}, {address}, {offset};"
    );
    s.push_str(&load_element(r, k.dtype, &v, &at));
    s.push_str(&combine(r, k.op, t, bits, &acc, &v));
    let _ = writeln!(
        s,
        "\tadd.s32 {index}, {index}, {ntid};\n\tsetp.lt.u32 {unrolled}, {index}, {length};\n\t@{unrolled} bra $L_col;"
    );
}

/// A column reduction's blocks: each folds its group of columns (or their segment of rows)
/// in turn.
fn column_body(r: &mut Regs, k: &ReduceKernel, shared: &str) -> String {
    let (t, _, _) = element_types(k.dtype);
    let init = init_literal(k.op, k.dtype);
    let (outputs, reduced) = (k.outputs, k.reduced);
    let segments = k.segments;
    let [tid, block, blocks, column, lane] =
        r.all([Reg::Tid, Reg::Block, Reg::Blocks, Reg::X, Reg::Y]);
    let [partials, slot_offset, thread_slot, column_block, next, acc, at] = r.all([
        Reg::Partials,
        Reg::SlotOffset,
        Reg::ThreadSlot,
        Reg::ColumnBlock,
        Reg::NextBlock,
        Reg::Acc,
        Reg::Column,
    ]);
    let mut s = String::new();
    // 256 threads = `width` columns × `lanes` row lanes (32 × 8, or for fewer columns
    // more lanes); each lane folds every `lanes`-th row, four loads in flight at a
    // time, then the partials of a column meet in shared memory. Block `column_block` folds
    // `width` columns, or segment `column_block % segments` of the rows of columns group
    // `column_block / segments`.
    let (width, lanes) = (k.width(), k.lanes());
    if width == 32 {
        let _ = writeln!(
            s,
            "\tand.b32 {column}, {tid}, 31;\n\tshr.u32 {lane}, {tid}, 5;"
        );
    } else {
        let _ = writeln!(
            s,
            "\trem.u32 {column}, {tid}, {width};\n\tdiv.u32 {lane}, {tid}, {width};"
        );
    }
    let _ = writeln!(s, "\tmov.u32 {partials}, {shared};");
    let _ = writeln!(
        s,
        "\tshl.b32 {slot_offset}, {tid}, 3;\n\tadd.s32 {thread_slot}, {partials}, {slot_offset};"
    );
    let _ = writeln!(s, "\tmov.u32 {column_block}, {block};");
    let block_count = k.blocks();
    let _ = writeln!(
        s,
        "\tsetp.ge.u32 {next}, {column_block}, {block_count};\n\t@{next} bra $L_end;"
    );
    s.push_str("$L_block:\n");
    let _ = writeln!(s, "\tmov.{t} {acc}, {init};");
    let ahead = 3 * lanes;
    let group = match segments {
        1 => column_block.clone(),
        _ => {
            s.push_str(&segment_of(r, &column_block, k));
            r.get(Reg::SegmentOf)
        }
    };
    let _ = writeln!(s, "\tmad.lo.s32 {at}, {group}, {width}, {column};");
    let (length, unrolled) = if segments == 1 {
        (
            reduced.to_string(),
            reduced.saturating_sub(ahead).to_string(),
        )
    } else {
        let [length, unrolled] = r.all([Reg::SegmentLength, Reg::UnrolledRows]);
        let _ = writeln!(
            s,
            "\tmax.u32 {unrolled}, {length}, {ahead};\n\tsub.s32 {unrolled}, {unrolled}, {ahead};"
        );
        (length, unrolled)
    };
    let folding = r.get(Reg::Folding);
    if width * lanes < 256 {
        // The threads beyond the last whole lane only take part in the barriers.
        let _ = writeln!(
            s,
            "\tsetp.ge.u32 {folding}, {lane}, {lanes};\n\t@{folding} bra $L_folded;"
        );
    }
    let _ = writeln!(
        s,
        "\tsetp.ge.u32 {folding}, {at}, {outputs};\n\t@{folding} bra $L_folded;"
    );
    column_loads(r, k, &mut s, &length, &unrolled);
    s.push_str("$L_folded:\n");
    let [not_first, no_column] = r.all([Reg::NotFirst, Reg::NoColumn]);
    let _ = writeln!(s, "\tst.shared.{t} [{thread_slot}], {acc};\n\tbar.sync 0;");
    let _ = writeln!(
        s,
        "\tsetp.ne.u32 {not_first}, {lane}, 0;\n\t@{not_first} bra $L_next;"
    );
    let _ = writeln!(
        s,
        "\tsetp.ge.u32 {no_column}, {at}, {outputs};\n\t@{no_column} bra $L_next;"
    );
    fold_lanes(r, k, &mut s);
    // A segment's partial results are a row of `outputs`.
    let result = match segments {
        1 => at,
        _ => {
            let [segment, index] = r.all([Reg::Segment, Reg::PartialIndex]);
            let _ = writeln!(s, "\tmad.lo.s32 {index}, {segment}, {outputs}, {at};");
            index
        }
    };
    s.push_str(&store_result(r, k, &result));
    s.push_str("$L_next:\n\tbar.sync 0;\n");
    let _ = writeln!(
        s,
        "\tadd.s32 {column_block}, {column_block}, {blocks};\n\tsetp.lt.u32 {next}, {column_block}, {block_count};\n\t@{next} bra $L_block;"
    );
    s
}

/// A thread's fold of its lane of rows of its column (`length` rows, the first `unrolled`
/// four at a time) into the accumulator.
fn column_loads(r: &mut Regs, k: &ReduceKernel, s: &mut String, length: &str, unrolled: &str) {
    let (t, bits, size) = element_types(k.dtype);
    let (inner, outputs, reduced) = (k.inner, k.outputs, k.reduced);
    let (segments, lanes) = (k.segments, k.lanes());
    let row_step = lanes * inner * size;
    let [input, lane, column, address, offset, index] = r.all([
        Reg::Input,
        Reg::Y,
        Reg::Column,
        Reg::Address,
        Reg::Offset,
        Reg::Index,
    ]);
    let [acc, v, four, tail_done] = r.all([Reg::Acc, Reg::Value, Reg::Unrolled, Reg::TailDone]);
    // Address of element (row lane, column): a column of a middle reduction starts at
    // its leading index's block of `reduced` rows.
    let _ = writeln!(s, "\tmul.wide.u32 {address}, {lane}, {};", inner * size);
    let first = if inner == outputs {
        column
    } else {
        let [first, within] = r.all([Reg::First, Reg::Within]);
        let _ = writeln!(
            s,
            "\tdiv.u32 {first}, {column}, {inner};\n\trem.u32 {within}, {column}, {inner};\n\tmad.lo.s32 {first}, {first}, {}, {within};",
            reduced * inner
        );
        first
    };
    let _ = writeln!(s, "\tmul.wide.u32 {offset}, {first}, {size};\n\tadd.s64 {address}, {address}, {offset};\n\tadd.s64 {address}, {input}, {address};");
    if segments > 1 {
        let [start, segment_offset] = r.all([Reg::SegmentStart, Reg::SegmentOffset]);
        let _ = writeln!(
            s,
            "\tmul.wide.u32 {segment_offset}, {start}, {};\n\tadd.s64 {address}, {address}, {segment_offset};",
            inner * size
        );
    }
    let _ = writeln!(s, "\tmov.u32 {index}, {lane};");
    let _ = writeln!(
        s,
        "\tsetp.ge.u32 {four}, {index}, {unrolled};\n\t@{four} bra $L_tail;"
    );
    s.push_str("$L_four:\n");
    let w = r.all([0, 1, 2, 3].map(Reg::Four));
    for (j, to) in w.iter().enumerate() {
        let at = format!("{address}+{}", j * row_step);
        s.push_str(&load_element(r, k.dtype, to, &at));
    }
    for x in &w {
        s.push_str(&combine(r, k.op, t, bits, &acc, x));
    }
    let _ = writeln!(
        s,
        "\tadd.s64 {address}, {address}, {};\n\tadd.s32 {index}, {index}, {};",
        4 * row_step,
        4 * lanes
    );
    let _ = writeln!(
        s,
        "\tsetp.lt.u32 {four}, {index}, {unrolled};\n\t@{four} bra $L_four;"
    );
    s.push_str("$L_tail:\n");
    let _ = writeln!(
        s,
        "\tsetp.ge.u32 {tail_done}, {index}, {length};\n\t@{tail_done} bra $L_folded;"
    );
    s.push_str(&load_element(r, k.dtype, &v, &address));
    s.push_str(&combine(r, k.op, t, bits, &acc, &v));
    let _ = writeln!(
        s,
        "\tadd.s64 {address}, {address}, {row_step};\n\tadd.s32 {index}, {index}, {lanes};\n\tbra.uni $L_tail;"
    );
}

/// Lane 0 folds the other lanes' partials of its column, `width` slots apart, into the
/// accumulator.
fn fold_lanes(r: &mut Regs, k: &ReduceKernel, s: &mut String) {
    let (t, bits, _) = element_types(k.dtype);
    let (width, lanes) = (k.width(), k.lanes());
    let stride = width * 8;
    let [acc, v, thread_slot] = r.all([Reg::Acc, Reg::Value, Reg::ThreadSlot]);
    if lanes <= 8 {
        for j in 1..lanes {
            let _ = writeln!(s, "\tld.shared.{t} {v}, [{thread_slot}+{}];", j * stride);
            s.push_str(&combine(r, k.op, t, bits, &acc, &v));
        }
    } else {
        let [slot, other, more] = r.all([Reg::LaneSlot, Reg::OtherLane, Reg::MoreLanes]);
        let _ = writeln!(
            s,
            "\tadd.s32 {slot}, {thread_slot}, {stride};\n\tmov.u32 {other}, 1;"
        );
        s.push_str("$L_lanes:\n");
        let _ = writeln!(s, "\tld.shared.{t} {v}, [{slot}];");
        s.push_str(&combine(r, k.op, t, bits, &acc, &v));
        let _ = writeln!(
            s,
            "\tadd.s32 {slot}, {slot}, {stride};\n\tadd.s32 {other}, {other}, 1;\n\tsetp.lt.u32 {more}, {other}, {lanes};\n\t@{more} bra $L_lanes;"
        );
    }
}

//! The code of one reduction in an entry: a row reduction's block folds its row (or segment)
//! with four loads in flight a thread, then across its warps; a column reduction's block folds
//! `width` columns with a lane of rows per thread, then across the lanes through shared memory.
//! Registers are named, not allocated: the entry declares them ([`super::render`]), and the
//! parts of a grouped launch ([`super::render_reduce_launch`]) reuse them in turn.

use super::render::{
    combine, element_types, init_literal, load_element, segment_of, store_element, warp_reduce,
};
use super::{ReduceKernel, ReduceLayout};
use std::fmt::Write;

/// The code of reduction `k`, given the thread (`%r1`) and block size (`%r2`), its block
/// (`%r3`) and block count (`%r4`), and its input (`%rd1`) and result (`%rd2`); partials go
/// through the shared array `shared`. It ends with a `ret`.
pub(super) fn reduce_body(k: &ReduceKernel, shared: &str) -> String {
    let mut s = match k.layout {
        ReduceLayout::Rows => row_body(k, shared),
        ReduceLayout::Columns => column_body(k, shared),
    };
    s.push_str("$L_end:\n\tret;\n");
    s
}

/// A row reduction's blocks: each folds its rows (or segments) in turn.
fn row_body(k: &ReduceKernel, shared: &str) -> String {
    let (t, bits, size) = element_types(k.dtype);
    let result_size = element_types(k.result).2;
    let init = init_literal(k.op, k.dtype);
    let (outputs, reduced) = (k.outputs, k.reduced);
    let segments = k.segments;
    let mut s = String::new();
    let row_bytes = reduced * size;
    // Block `%r8` folds a row, or segment `%r8 % segments` of row `%r8 / segments`.
    let (results, length) = match segments {
        1 => (outputs, reduced.to_string()),
        _ => (outputs * segments, "%r27".to_string()),
    };
    let _ = writeln!(
        s,
        "\tand.b32 %r5, %r1, 31;\n\tshr.u32 %r6, %r1, 5;\n\tshr.u32 %r7, %r2, 5;"
    );
    let _ = writeln!(s, "\tmov.u32 %r12, {shared};");
    let _ = writeln!(
        s,
        "\tmul.lo.s32 %r13, %r2, 3;\n\tshl.b32 %r15, %r2, 2;\n\tmul.wide.u32 %rd9, %r2, {size};"
    );
    let _ = writeln!(s, "\tmov.u32 %r8, %r3;");
    let _ = writeln!(s, "\tsetp.ge.u32 %p1, %r8, {results};\n\t@%p1 bra $L_end;");
    s.push_str("$L_row:\n");
    let _ = writeln!(s, "\tmov.{t} %v1, {init};\n\tmov.u32 %r9, %r1;");
    if segments == 1 {
        let _ = writeln!(s, "\tcvt.u64.u32 %rd3, %r8;\n\tmul.lo.s64 %rd3, %rd3, {row_bytes};\n\tadd.s64 %rd3, %rd1, %rd3;");
    } else {
        s.push_str(&segment_of("%r8", k));
        let _ = writeln!(s, "\tcvt.u64.u32 %rd3, %r24;\n\tmul.lo.s64 %rd3, %rd3, {row_bytes};\n\tmul.wide.u32 %rd8, %r26, {size};\n\tadd.s64 %rd3, %rd3, %rd8;\n\tadd.s64 %rd3, %rd1, %rd3;");
    }
    row_loads(k, &mut s, &length);
    s.push_str("$L_folded:\n");
    s.push_str(&warp_reduce(k, t, bits));
    let _ = writeln!(s, "\tsetp.ne.u32 %p4, %r5, 0;\n\t@%p4 bra $L_stored;");
    let _ = writeln!(
        s,
        "\tshl.b32 %r11, %r6, 3;\n\tadd.s32 %r10, %r12, %r11;\n\tst.shared.{t} [%r10], %v1;"
    );
    s.push_str("$L_stored:\n\tbar.sync 0;\n");
    let _ = writeln!(s, "\tsetp.ne.u32 %p5, %r6, 0;\n\t@%p5 bra $L_next;");
    let _ = writeln!(s, "\tmov.{t} %v1, {init};");
    let _ = writeln!(s, "\tsetp.ge.u32 %p6, %r5, %r7;\n\t@%p6 bra $L_partial;");
    let _ = writeln!(
        s,
        "\tshl.b32 %r11, %r5, 3;\n\tadd.s32 %r10, %r12, %r11;\n\tld.shared.{t} %v1, [%r10];"
    );
    s.push_str("$L_partial:\n");
    s.push_str(&warp_reduce(k, t, bits));
    let _ = writeln!(s, "\tsetp.ne.u32 %p4, %r5, 0;\n\t@%p4 bra $L_next;");
    let _ = writeln!(
        s,
        "\tmul.wide.u32 %rd6, %r8, {result_size};\n\tadd.s64 %rd7, %rd2, %rd6;"
    );
    s.push_str(&store_element(k.result, "%rd7", "%v1"));
    s.push_str("$L_next:\n\tbar.sync 0;\n");
    let _ = writeln!(
        s,
        "\tadd.s32 %r8, %r8, %r4;\n\tsetp.lt.u32 %p1, %r8, {results};\n\t@%p1 bra $L_row;"
    );
    s
}

/// A thread's fold of its elements of the row (at `%rd3`, `length` of them) into `%v1`.
fn row_loads(k: &ReduceKernel, s: &mut String, length: &str) {
    let (t, bits, size) = element_types(k.dtype);
    // Four loads in flight a thread (`%rd9` bytes apart), folded in the order a
    // one-load loop would fold them, while all four fall in the row (the element is
    // below `%r14`: the length less three strides); then one at a time.
    let _ = writeln!(
        s,
        "\tmax.u32 %r14, %r13, {length};\n\tsub.s32 %r14, %r14, %r13;\n\tsetp.ge.u32 %p3, %r9, %r14;\n\t@%p3 bra $L_tail;"
    );
    s.push_str("$L_four:\n");
    let _ = writeln!(
        s,
        "\tmul.wide.u32 %rd4, %r9, {size};\n\tadd.s64 %rd5, %rd3, %rd4;\n\tadd.s64 %rd10, %rd5, %rd9;"
    );
    for j in 0..4 {
        let (to, at) = (format!("%w{}", j + 1), ["%rd5", "%rd10"][j % 2]);
        if j == 2 {
            let _ = writeln!(
                s,
                "\tadd.s64 %rd5, %rd10, %rd9;\n\tadd.s64 %rd10, %rd5, %rd9;"
            );
        }
        s.push_str(&load_element(k.dtype, &to, at));
    }
    for j in 0..4 {
        s.push_str(&combine(k.op, t, bits, "%v1", &format!("%w{}", j + 1)));
    }
    let _ = writeln!(
        s,
        "\tadd.s32 %r9, %r9, %r15;\n\tsetp.lt.u32 %p3, %r9, %r14;\n\t@%p3 bra $L_four;"
    );
    s.push_str("$L_tail:\n");
    let _ = writeln!(
        s,
        "\tsetp.ge.u32 %p2, %r9, {length};\n\t@%p2 bra $L_folded;"
    );
    s.push_str("$L_col:\n");
    let _ = writeln!(
        s,
        "\tmul.wide.u32 %rd4, %r9, {size};\n\tadd.s64 %rd5, %rd3, %rd4;"
    );
    s.push_str(&load_element(k.dtype, "%v2", "%rd5"));
    s.push_str(&combine(k.op, t, bits, "%v1", "%v2"));
    let _ = writeln!(
        s,
        "\tadd.s32 %r9, %r9, %r2;\n\tsetp.lt.u32 %p3, %r9, {length};\n\t@%p3 bra $L_col;"
    );
}

/// A column reduction's blocks: each folds its group of columns (or their segment of rows)
/// in turn.
fn column_body(k: &ReduceKernel, shared: &str) -> String {
    let (t, _, _) = element_types(k.dtype);
    let result_size = element_types(k.result).2;
    let init = init_literal(k.op, k.dtype);
    let (outputs, reduced) = (k.outputs, k.reduced);
    let segments = k.segments;
    let mut s = String::new();
    // 256 threads = `width` columns × `lanes` row lanes (32 × 8, or for fewer columns
    // more lanes); each lane folds every `lanes`-th row, four loads in flight at a
    // time, then the partials of a column meet in shared memory. Block `%r7` folds
    // `width` columns, or segment `%r7 % segments` of the rows of columns group
    // `%r7 / segments`.
    let (width, lanes) = (k.width(), k.lanes());
    if width == 32 {
        let _ = writeln!(s, "\tand.b32 %r5, %r1, 31;\n\tshr.u32 %r6, %r1, 5;");
    } else {
        let _ = writeln!(
            s,
            "\trem.u32 %r5, %r1, {width};\n\tdiv.u32 %r6, %r1, {width};"
        );
    }
    let _ = writeln!(s, "\tmov.u32 %r12, {shared};");
    let _ = writeln!(s, "\tshl.b32 %r11, %r1, 3;\n\tadd.s32 %r13, %r12, %r11;");
    let _ = writeln!(s, "\tmov.u32 %r7, %r3;");
    let blocks = k.blocks();
    let _ = writeln!(s, "\tsetp.ge.u32 %p1, %r7, {blocks};\n\t@%p1 bra $L_end;");
    s.push_str("$L_block:\n");
    let _ = writeln!(s, "\tmov.{t} %v1, {init};");
    let ahead = 3 * lanes;
    let group = match segments {
        1 => "%r7",
        _ => {
            s.push_str(&segment_of("%r7", k));
            "%r24"
        }
    };
    let _ = writeln!(s, "\tmad.lo.s32 %r8, {group}, {width}, %r5;");
    let (length, unrolled) = if segments == 1 {
        (
            reduced.to_string(),
            reduced.saturating_sub(ahead).to_string(),
        )
    } else {
        let _ = writeln!(
            s,
            "\tmax.u32 %r28, %r27, {ahead};\n\tsub.s32 %r28, %r28, {ahead};"
        );
        ("%r27".to_string(), "%r28".to_string())
    };
    if width * lanes < 256 {
        // The threads beyond the last whole lane only take part in the barriers.
        let _ = writeln!(s, "\tsetp.ge.u32 %p2, %r6, {lanes};\n\t@%p2 bra $L_folded;");
    }
    let _ = writeln!(
        s,
        "\tsetp.ge.u32 %p2, %r8, {outputs};\n\t@%p2 bra $L_folded;"
    );
    column_loads(k, &mut s, &length, &unrolled);
    s.push_str("$L_folded:\n");
    let _ = writeln!(s, "\tst.shared.{t} [%r13], %v1;\n\tbar.sync 0;");
    let _ = writeln!(s, "\tsetp.ne.u32 %p5, %r6, 0;\n\t@%p5 bra $L_next;");
    let _ = writeln!(s, "\tsetp.ge.u32 %p6, %r8, {outputs};\n\t@%p6 bra $L_next;");
    fold_lanes(k, &mut s);
    // A segment's partial results are a row of `outputs`.
    let at = match segments {
        1 => "%r8",
        _ => {
            let _ = writeln!(s, "\tmad.lo.s32 %r29, %r25, {outputs}, %r8;");
            "%r29"
        }
    };
    let _ = writeln!(
        s,
        "\tmul.wide.u32 %rd6, {at}, {result_size};\n\tadd.s64 %rd7, %rd2, %rd6;"
    );
    s.push_str(&store_element(k.result, "%rd7", "%v1"));
    s.push_str("$L_next:\n\tbar.sync 0;\n");
    let _ = writeln!(
        s,
        "\tadd.s32 %r7, %r7, %r4;\n\tsetp.lt.u32 %p1, %r7, {blocks};\n\t@%p1 bra $L_block;"
    );
    s
}

/// A thread's fold of its lane of rows of its column (`length` rows, the first `unrolled`
/// four at a time) into `%v1`.
fn column_loads(k: &ReduceKernel, s: &mut String, length: &str, unrolled: &str) {
    let (t, bits, size) = element_types(k.dtype);
    let (inner, outputs, reduced) = (k.inner, k.outputs, k.reduced);
    let (segments, lanes) = (k.segments, k.lanes());
    let row_step = lanes * inner * size;
    // Address of element (row lane, column): a column of a middle reduction starts at
    // its leading index's block of `reduced` rows.
    let _ = writeln!(s, "\tmul.wide.u32 %rd3, %r6, {};", inner * size);
    let first = if inner == outputs {
        "%r8"
    } else {
        let _ = writeln!(
            s,
            "\tdiv.u32 %r14, %r8, {inner};\n\trem.u32 %r15, %r8, {inner};\n\tmad.lo.s32 %r14, %r14, {}, %r15;",
            reduced * inner
        );
        "%r14"
    };
    let _ = writeln!(s, "\tmul.wide.u32 %rd4, {first}, {size};\n\tadd.s64 %rd3, %rd3, %rd4;\n\tadd.s64 %rd3, %rd1, %rd3;");
    if segments > 1 {
        let _ = writeln!(
            s,
            "\tmul.wide.u32 %rd8, %r26, {};\n\tadd.s64 %rd3, %rd3, %rd8;",
            inner * size
        );
    }
    let _ = writeln!(s, "\tmov.u32 %r9, %r6;");
    let _ = writeln!(
        s,
        "\tsetp.ge.u32 %p3, %r9, {unrolled};\n\t@%p3 bra $L_tail;"
    );
    s.push_str("$L_four:\n");
    for j in 0..4 {
        let (to, at) = (format!("%w{}", j + 1), format!("%rd3+{}", j * row_step));
        s.push_str(&load_element(k.dtype, &to, &at));
    }
    for j in 0..4 {
        s.push_str(&combine(k.op, t, bits, "%v1", &format!("%w{}", j + 1)));
    }
    let _ = writeln!(
        s,
        "\tadd.s64 %rd3, %rd3, {};\n\tadd.s32 %r9, %r9, {};",
        4 * row_step,
        4 * lanes
    );
    let _ = writeln!(
        s,
        "\tsetp.lt.u32 %p3, %r9, {unrolled};\n\t@%p3 bra $L_four;"
    );
    s.push_str("$L_tail:\n");
    let _ = writeln!(
        s,
        "\tsetp.ge.u32 %p4, %r9, {length};\n\t@%p4 bra $L_folded;"
    );
    s.push_str(&load_element(k.dtype, "%v2", "%rd3"));
    s.push_str(&combine(k.op, t, bits, "%v1", "%v2"));
    let _ = writeln!(
        s,
        "\tadd.s64 %rd3, %rd3, {row_step};\n\tadd.s32 %r9, %r9, {lanes};\n\tbra.uni $L_tail;"
    );
}

/// Lane 0 folds the other lanes' partials of its column, `width` slots apart, into `%v1`.
fn fold_lanes(k: &ReduceKernel, s: &mut String) {
    let (t, bits, _) = element_types(k.dtype);
    let (width, lanes) = (k.width(), k.lanes());
    let stride = width * 8;
    if lanes <= 8 {
        for j in 1..lanes {
            let _ = writeln!(s, "\tld.shared.{t} %v2, [%r13+{}];", j * stride);
            s.push_str(&combine(k.op, t, bits, "%v1", "%v2"));
        }
    } else {
        let _ = writeln!(s, "\tadd.s32 %r31, %r13, {stride};\n\tmov.u32 %r30, 1;");
        s.push_str("$L_lanes:\n");
        let _ = writeln!(s, "\tld.shared.{t} %v2, [%r31];");
        s.push_str(&combine(k.op, t, bits, "%v1", "%v2"));
        let _ = writeln!(
            s,
            "\tadd.s32 %r31, %r31, {stride};\n\tadd.s32 %r30, %r30, 1;\n\tsetp.lt.u32 %p8, %r30, {lanes};\n\t@%p8 bra $L_lanes;"
        );
    }
}

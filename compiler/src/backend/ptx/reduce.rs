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

use ferrax_ir::{DType, ReduceOp, Scalar, TensorType};
use std::fmt::Write;

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
    /// The kernel for reducing `input` (of any type but u8, which the GPU only converts; bools
    /// by maxima and minima alone: any and all) over consecutive `axes`: trailing ones as rows,
    /// others as columns (middle ones as columns of each leading index); over no axes, as rows
    /// of one element.
    pub fn plan(name: String, op: ReduceOp, input: &TensorType, axes: &[usize]) -> Option<Self> {
        let defined = match input.dtype {
            DType::U8 => false,
            DType::Bool => matches!(op, ReduceOp::Max | ReduceOp::Min),
            _ => true,
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

/// `op`'s identity as a PTX immediate of the accumulator's type (halves accumulate in f32).
fn init_literal(op: ReduceOp, dtype: DType) -> String {
    match op.identity(dtype) {
        Scalar::Bool(b) => u8::from(b).to_string(),
        Scalar::I32(v) => v.to_string(),
        Scalar::I64(v) => v.to_string(),
        Scalar::U8(v) => v.to_string(),
        Scalar::F64(v) => format!("0d{:016X}", v.to_bits()),
        v => format!("0f{:08X}", (v.to_f64() as f32).to_bits()),
    }
}

/// `acc = op(acc, v)`, using scratch registers `%s1..%s4` (value type), `%q1..%q3` (bits) and
/// `%g1..%g3` (predicates).
fn combine(op: ReduceOp, t: &str, bits: &str, acc: &str, v: &str) -> String {
    if matches!(t, "s32" | "s64" | "u32") {
        // Wrapping, as the interpreter's: the order of the terms does not matter.
        let name = match op {
            ReduceOp::Sum => "add",
            ReduceOp::Prod => "mul.lo",
            ReduceOp::Max => "max",
            ReduceOp::Min => "min",
        };
        return format!("\t{name}.{t} {acc}, {acc}, {v};\n");
    }
    match op {
        ReduceOp::Sum => format!("\tadd.rn.{t} {acc}, {acc}, {v};\n"),
        ReduceOp::Prod => format!("\tmul.rn.{t} {acc}, {acc}, {v};\n"),
        ReduceOp::Max | ReduceOp::Min => {
            let (cmp, join) = if op == ReduceOp::Max {
                ("gt", "and")
            } else {
                ("lt", "or")
            };
            format!(
                "\tsetp.{cmp}.{t} %g1, {acc}, {v};\n\
                 \tselp.{t} %s1, {acc}, {v}, %g1;\n\
                 \tmov.{bits} %q1, {acc};\n\
                 \tmov.{bits} %q2, {v};\n\
                 \t{join}.{bits} %q3, %q1, %q2;\n\
                 \tmov.{bits} %s2, %q3;\n\
                 \tsetp.eq.{t} %g2, {acc}, {v};\n\
                 \tselp.{t} %s1, %s2, %s1, %g2;\n\
                 \tsetp.nan.{t} %g3, {acc}, {v};\n\
                 \tadd.rn.{t} %s3, {acc}, {v};\n\
                 \tselp.{t} {acc}, %s3, %s1, %g3;\n"
            )
        }
    }
}

/// Folds `%v1` across the 32 lanes of each warp with butterfly shuffles.
fn warp_reduce(k: &ReduceKernel, t: &str, bits: &str) -> String {
    let mut out = String::new();
    for offset in [16, 8, 4, 2, 1] {
        if bits == "b32" {
            let _ = writeln!(out, "\tshfl.sync.bfly.b32 %v2, %v1, {offset}, 31, -1;");
        } else {
            let _ = writeln!(out, "\tmov.b64 {{%r20, %r21}}, %v1;");
            let _ = writeln!(out, "\tshfl.sync.bfly.b32 %r22, %r20, {offset}, 31, -1;");
            let _ = writeln!(out, "\tshfl.sync.bfly.b32 %r23, %r21, {offset}, 31, -1;");
            let _ = writeln!(out, "\tmov.b64 %v2, {{%r22, %r23}};");
        }
        out.push_str(&combine(k.op, t, bits, "%v1", "%v2"));
    }
    out
}

/// PTX types a reduction computes in (halves in f32, bools as 0 and 1 in u32) and their bits,
/// and the size in bytes of its elements.
fn element_types(dtype: DType) -> (&'static str, &'static str, usize) {
    match dtype {
        DType::F32 => ("f32", "b32", 4),
        DType::F16 | DType::BF16 => ("f32", "b32", 2),
        DType::I32 => ("s32", "b32", 4),
        DType::I64 => ("s64", "b64", 8),
        DType::Bool => ("u32", "b32", 1),
        _ => ("f64", "b64", 8),
    }
}

/// Loads the element at `address` into `to`, in the type the reduction computes in.
fn load_element(dtype: DType, to: &str, address: &str) -> String {
    match dtype {
        DType::F16 => format!("\tld.global.nc.b16 %h1, [{address}];\n\tcvt.f32.f16 {to}, %h1;\n"),
        // A bf16 is the high half of the f32 of the same value.
        DType::BF16 => format!(
            "\tld.global.nc.b16 %h1, [{address}];\n\tcvt.u32.u16 %u1, %h1;\n\tshl.b32 %u1, %u1, 16;\n\tmov.b32 {to}, %u1;\n"
        ),
        DType::Bool => format!("\tld.global.nc.u8 {to}, [{address}];\n"),
        _ => format!("\tld.global.nc.{} {to}, [{address}];\n", element_types(dtype).0),
    }
}

/// Stores `from` (in the type the reduction computes in) at `address` as an element.
fn store_element(dtype: DType, address: &str, from: &str) -> String {
    match dtype {
        DType::F16 => format!("\tcvt.rn.f16.f32 %h1, {from};\n\tst.global.b16 [{address}], %h1;\n"),
        DType::BF16 => {
            format!("\tcvt.rn.bf16.f32 %h1, {from};\n\tst.global.b16 [{address}], %h1;\n")
        }
        DType::Bool => format!("\tst.global.u8 [{address}], {from};\n"),
        _ => format!(
            "\tst.global.{} [{address}], {from};\n",
            element_types(dtype).0
        ),
    }
}

/// A comment line saying what `k` reduces.
fn describe(k: &ReduceKernel) -> String {
    let layout = match k.layout {
        ReduceLayout::Rows => "rows",
        ReduceLayout::Columns => "columns",
    };
    let mut line = format!(
        "// {} over {layout}: {} results of {} {} elements each",
        k.op.name(),
        k.outputs,
        k.reduced,
        k.dtype
    );
    if k.segments > 1 {
        let _ = write!(
            line,
            ", in {} segments of {} (partial results, {})",
            k.segments,
            k.segment(),
            k.result
        );
    } else if k.result != k.dtype {
        let _ = write!(line, ", into {}", k.result);
    }
    line + "\n"
}

/// Register declarations and the shared partials of an entry of reductions of `dtype` into
/// `result`.
fn declarations(dtype: DType, result: DType, shared: &str, columns: bool) -> String {
    let (t, bits, _) = element_types(dtype);
    let mut s = String::new();
    let _ = writeln!(s, "\t.reg .pred %p<9>;\n\t.reg .pred %g<4>;");
    let _ = writeln!(s, "\t.reg .b32 %r<32>;\n\t.reg .b64 %rd<12>;");
    let _ = writeln!(
        s,
        "\t.reg .{t} %v<4>;\n\t.reg .{t} %s<4>;\n\t.reg .{bits} %q<4>;"
    );
    let _ = writeln!(s, "\t.reg .{t} %w<5>;");
    if [dtype, result]
        .iter()
        .any(|d| matches!(d, DType::F16 | DType::BF16))
    {
        let _ = writeln!(s, "\t.reg .b16 %h<2>;\n\t.reg .b32 %u<2>;");
    }
    // Rows: one partial per warp (at most 32); columns: one per thread (256), 8 bytes each.
    let partials = if columns { 2048 } else { 256 };
    let _ = writeln!(s, "\t.shared .align 8 .b8 {shared}[{partials}];");
    s
}

/// Loads parameters `first` and `first + 1` of entry `name` as the global addresses of the
/// input (`%rd1`) and the result (`%rd2`).
fn load_addresses(name: &str, first: usize) -> String {
    format!(
        "\tld.param.u64 %rd1, [{name}_param_{first}];\n\tcvta.to.global.u64 %rd1, %rd1;\n\
         \tld.param.u64 %rd2, [{name}_param_{}];\n\tcvta.to.global.u64 %rd2, %rd2;\n",
        first + 1
    )
}

/// The `.entry` of a reduction kernel (without the module header).
pub fn render_reduce(k: &ReduceKernel) -> String {
    let name = &k.name;
    let mut s = describe(k);
    let params = [format!("{name}_param_0"), format!("{name}_param_1")];
    super::loops::entry_header(&mut s, name, &params, None);
    let shared = format!("{name}_partial");
    s.push_str(&declarations(
        k.dtype,
        k.result,
        &shared,
        k.layout == ReduceLayout::Columns,
    ));
    s.push_str(&load_addresses(name, 0));
    let _ = writeln!(s, "\tmov.u32 %r1, %tid.x;\n\tmov.u32 %r2, %ntid.x;");
    let _ = writeln!(s, "\tmov.u32 %r3, %ctaid.x;\n\tmov.u32 %r4, %nctaid.x;");
    s.push_str(&reduce_body(k, &shared));
    s.push_str("}\n");
    s
}

/// The `.entry` of `launch`: its reductions (indices into `reductions`, of one dtype) one after
/// another over the blocks, each part taking `blocks()` of them with 256 threads each.
pub fn render_reduce_launch(launch: &ReduceLaunch, reductions: &[ReduceKernel]) -> String {
    if let [one] = launch.parts.as_slice() {
        return render_reduce(&reductions[*one]);
    }
    let name = &launch.name;
    let parts: Vec<&ReduceKernel> = launch.parts.iter().map(|&r| &reductions[r]).collect();
    let mut s = format!(
        "// {} reductions in one launch, each over its own blocks:\n",
        parts.len()
    );
    for k in &parts {
        s.push_str(&describe(k));
    }
    let params: Vec<String> = (0..2 * parts.len())
        .map(|i| format!("{name}_param_{i}"))
        .collect();
    super::loops::entry_header(&mut s, name, &params, None);
    let shared = format!("{name}_partial");
    let columns = parts.iter().any(|k| k.layout == ReduceLayout::Columns);
    s.push_str(&declarations(
        parts[0].dtype,
        parts[0].result,
        &shared,
        columns,
    ));
    let _ = writeln!(s, "\tmov.u32 %r1, %tid.x;\n\tmov.u32 %r2, %ntid.x;");
    let _ = writeln!(s, "\tmov.u32 %r16, %ctaid.x;");
    let mut first = 0;
    for (i, k) in parts.iter().enumerate() {
        let blocks = k.blocks();
        if i > 0 {
            let _ = writeln!(s, "$L_part{i}:");
        }
        if i + 1 < parts.len() {
            let _ = writeln!(
                s,
                "\tsetp.ge.u32 %p7, %r16, {};\n\t@%p7 bra $L_part{};",
                first + blocks,
                i + 1
            );
        }
        let _ = match first {
            0 => writeln!(s, "\tmov.u32 %r3, %r16;"),
            _ => writeln!(s, "\tsub.u32 %r3, %r16, {first};"),
        };
        let _ = writeln!(s, "\tmov.u32 %r4, {blocks};");
        s.push_str(&load_addresses(name, 2 * i));
        s.push_str(&reduce_body(k, &shared).replace("$L_", &format!("$L{i}_")));
        first += blocks;
    }
    s.push_str("}\n");
    s
}

/// Block `block` of split reduction `k` taken apart: the result (a row, or a group of columns)
/// it folds a segment of (`%r24`), the segment (`%r25`), its first element or row (`%r26`) and
/// its length (`%r27`: `segment`, or what is left for the last).
fn segment_of(block: &str, k: &ReduceKernel) -> String {
    let (segments, segment, reduced) = (k.segments, k.segment(), k.reduced);
    format!(
        "\tdiv.u32 %r24, {block}, {segments};\n\trem.u32 %r25, {block}, {segments};\n\
         \tmul.lo.s32 %r26, %r25, {segment};\n\tmov.u32 %r27, {reduced};\n\
         \tsub.s32 %r27, %r27, %r26;\n\tmin.u32 %r27, %r27, {segment};\n"
    )
}

/// The code of reduction `k`, given the thread (`%r1`) and block size (`%r2`), its block
/// (`%r3`) and block count (`%r4`), and its input (`%rd1`) and result (`%rd2`); partials go
/// through the shared array `shared`. It ends with a `ret`.
fn reduce_body(k: &ReduceKernel, shared: &str) -> String {
    let (t, bits, size) = element_types(k.dtype);
    let result_size = element_types(k.result).2;
    let init = init_literal(k.op, k.dtype);
    let (outputs, reduced) = (k.outputs, k.reduced);
    let segments = k.segments;
    let mut s = String::new();
    match k.layout {
        ReduceLayout::Rows => {
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
            s.push_str("$L_folded:\n");
            s.push_str(&warp_reduce(k, t, bits));
            let _ = writeln!(s, "\tsetp.ne.u32 %p4, %r5, 0;\n\t@%p4 bra $L_stored;");
            let _ = writeln!(s, "\tshl.b32 %r11, %r6, 3;\n\tadd.s32 %r10, %r12, %r11;\n\tst.shared.{t} [%r10], %v1;");
            s.push_str("$L_stored:\n\tbar.sync 0;\n");
            let _ = writeln!(s, "\tsetp.ne.u32 %p5, %r6, 0;\n\t@%p5 bra $L_next;");
            let _ = writeln!(s, "\tmov.{t} %v1, {init};");
            let _ = writeln!(s, "\tsetp.ge.u32 %p6, %r5, %r7;\n\t@%p6 bra $L_partial;");
            let _ = writeln!(s, "\tshl.b32 %r11, %r5, 3;\n\tadd.s32 %r10, %r12, %r11;\n\tld.shared.{t} %v1, [%r10];");
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
        }
        ReduceLayout::Columns => {
            // 256 threads = `width` columns × `lanes` row lanes (32 × 8, or for fewer columns
            // more lanes); each lane folds every `lanes`-th row, four loads in flight at a
            // time, then the partials of a column meet in shared memory. Block `%r7` folds
            // `width` columns, or segment `%r7 % segments` of the rows of columns group
            // `%r7 / segments`.
            let (inner, width, lanes) = (k.inner, k.width(), k.lanes());
            let row_step = lanes * inner * size;
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
            s.push_str("$L_folded:\n");
            let _ = writeln!(s, "\tst.shared.{t} [%r13], %v1;\n\tbar.sync 0;");
            let _ = writeln!(s, "\tsetp.ne.u32 %p5, %r6, 0;\n\t@%p5 bra $L_next;");
            let _ = writeln!(s, "\tsetp.ge.u32 %p6, %r8, {outputs};\n\t@%p6 bra $L_next;");
            // Lane 0 folds the other lanes' partials of its column, `width` slots apart.
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
        }
    }
    s.push_str("$L_end:\n\tret;\n");
    s
}

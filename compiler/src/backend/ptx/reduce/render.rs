//! The entries of reduction kernels: one reduction's own, or several small ones launched as
//! one over consecutive ranges of blocks; and the pieces every reduction's code is made of
//! (element loads and stores in the type it computes in, folds, warp shuffles).

use super::body::reduce_body;
use super::{ReduceKernel, ReduceLaunch, ReduceLayout};
use crate::backend::ptx::loops::entry_header;
use ferrax_ir::{DType, ReduceOp, Scalar};
use std::fmt::Write;

/// `op`'s identity as a PTX immediate of the accumulator's type (halves accumulate in f32).
pub(super) fn init_literal(op: ReduceOp, dtype: DType) -> String {
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
pub(super) fn combine(op: ReduceOp, t: &str, bits: &str, acc: &str, v: &str) -> String {
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
pub(super) fn warp_reduce(k: &ReduceKernel, t: &str, bits: &str) -> String {
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
pub(super) fn element_types(dtype: DType) -> (&'static str, &'static str, usize) {
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
pub(super) fn load_element(dtype: DType, to: &str, address: &str) -> String {
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
pub(super) fn store_element(dtype: DType, address: &str, from: &str) -> String {
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
    entry_header(&mut s, name, &params, None);
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
    entry_header(&mut s, name, &params, None);
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
pub(super) fn segment_of(block: &str, k: &ReduceKernel) -> String {
    let (segments, segment, reduced) = (k.segments, k.segment(), k.reduced);
    format!(
        "\tdiv.u32 %r24, {block}, {segments};\n\trem.u32 %r25, {block}, {segments};\n\
         \tmul.lo.s32 %r26, %r25, {segment};\n\tmov.u32 %r27, {reduced};\n\
         \tsub.s32 %r27, %r27, %r26;\n\tmin.u32 %r27, %r27, {segment};\n"
    )
}

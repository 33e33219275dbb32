//! The entries of reduction kernels: one reduction's own, or several small ones launched as
//! one over consecutive ranges of blocks; and the pieces every reduction's code is made of
//! (element loads and stores in the type it computes in, folds, warp shuffles). Registers are
//! the entry's [`Regs`], declared once its code is complete.

use super::body::reduce_body;
use super::regs::{Reg, Regs};
use super::{ReduceKernel, ReduceLaunch, ReduceLayout};
use crate::backend::ptx::loops::{entry_header, Threads};
use crate::backend::ptx::select::half_to_f32;
use ferrax_ir::{DType, ReduceOp, Scalar};
use std::fmt::Write;

/// `op`'s identity as a PTX immediate of the accumulator's type (halves accumulate in f32).
pub(super) fn init_literal(op: ReduceOp, dtype: DType) -> String {
    match op.identity(dtype) {
        Scalar::Bool(b) => u8::from(b).to_string(),
        Scalar::I32(v) => v.to_string(),
        Scalar::I64(v) => v.to_string(),
        Scalar::U32(v) => v.to_string(),
        Scalar::U8(v) => v.to_string(),
        Scalar::F64(v) => format!("0d{:016X}", v.to_bits()),
        v => format!("0f{:08X}", (v.to_f64() as f32).to_bits()),
    }
}

/// `acc = op(acc, v)`; max and min use scratch registers of the value type, of its bits and
/// predicates.
pub(super) fn combine(
    r: &mut Regs,
    op: ReduceOp,
    t: &str,
    bits: &str,
    acc: &str,
    v: &str,
) -> String {
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
            let [wins, picked, acc_bits, v_bits, joined, joined_value, equal, nan, sum] = r.all([
                Reg::Wins,
                Reg::Picked,
                Reg::AccBits,
                Reg::ValueBits,
                Reg::Joined,
                Reg::JoinedValue,
                Reg::Equal,
                Reg::Nan,
                Reg::Sum,
            ]);
            format!(
                "\tsetp.{cmp}.{t} {wins}, {acc}, {v};\n\
                 \tselp.{t} {picked}, {acc}, {v}, {wins};\n\
                 \tmov.{bits} {acc_bits}, {acc};\n\
                 \tmov.{bits} {v_bits}, {v};\n\
                 \t{join}.{bits} {joined}, {acc_bits}, {v_bits};\n\
                 \tmov.{bits} {joined_value}, {joined};\n\
                 \tsetp.eq.{t} {equal}, {acc}, {v};\n\
                 \tselp.{t} {picked}, {joined_value}, {picked}, {equal};\n\
                 \tsetp.nan.{t} {nan}, {acc}, {v};\n\
                 \tadd.rn.{t} {sum}, {acc}, {v};\n\
                 \tselp.{t} {acc}, {sum}, {picked}, {nan};\n"
            )
        }
    }
}

/// Folds the accumulator across the 32 lanes of each warp with butterfly shuffles.
pub(super) fn warp_reduce(r: &mut Regs, k: &ReduceKernel, t: &str, bits: &str) -> String {
    let [acc, v] = r.all([Reg::Acc, Reg::Value]);
    let mut out = String::new();
    for offset in [16, 8, 4, 2, 1] {
        if bits == "b32" {
            let _ = writeln!(out, "\tshfl.sync.bfly.b32 {v}, {acc}, {offset}, 31, -1;");
        } else {
            let [lo, hi, shuffled_lo, shuffled_hi] = r.all([0, 1, 2, 3].map(Reg::Words));
            let _ = writeln!(out, "\tmov.b64 {{{lo}, {hi}}}, {acc};");
            let _ = writeln!(
                out,
                "\tshfl.sync.bfly.b32 {shuffled_lo}, {lo}, {offset}, 31, -1;"
            );
            let _ = writeln!(
                out,
                "\tshfl.sync.bfly.b32 {shuffled_hi}, {hi}, {offset}, 31, -1;"
            );
            let _ = writeln!(out, "\tmov.b64 {v}, {{{shuffled_lo}, {shuffled_hi}}};");
        }
        out.push_str(&combine(r, k.op, t, bits, &acc, &v));
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
        DType::U32 => ("u32", "b32", 4),
        DType::F64 => ("f64", "b64", 8),
        // Never planned (`ReduceKernel::plan`).
        DType::U8 | DType::I8 | DType::I16 | DType::U16 | DType::U64 | DType::C64 | DType::C128 => {
            ("f64", "b64", 8)
        }
    }
}

/// Loads the element at `address` into `to`, in the type the reduction computes in.
pub(super) fn load_element(r: &mut Regs, dtype: DType, to: &str, address: &str) -> String {
    match dtype {
        DType::F16 | DType::BF16 => {
            let h = r.get(Reg::Half);
            // A bf16 widens through 32 bits; an f16 converts.
            let u = if dtype == DType::BF16 {
                r.get(Reg::HalfBits)
            } else {
                String::new()
            };
            let mut s = format!("\tld.global.nc.b16 {h}, [{address}];\n");
            for line in half_to_f32(dtype, &h, &u, to) {
                s.push_str(&format!("\t{line};\n"));
            }
            s
        }
        DType::Bool => format!("\tld.global.nc.u8 {to}, [{address}];\n"),
        _ => format!(
            "\tld.global.nc.{} {to}, [{address}];\n",
            element_types(dtype).0
        ),
    }
}

/// Stores the accumulator as result `index` of `k`.
pub(super) fn store_result(r: &mut Regs, k: &ReduceKernel, index: &str) -> String {
    let [output, acc, offset, address] =
        r.all([Reg::Output, Reg::Acc, Reg::ResultOffset, Reg::ResultAddress]);
    let size = element_types(k.result).2;
    let mut s = format!(
        "\tmul.wide.u32 {offset}, {index}, {size};\n\tadd.s64 {address}, {output}, {offset};\n"
    );
    s.push_str(&store_element(r, k.result, &address, &acc));
    s
}

/// Stores `from` (in the type the reduction computes in) at `address` as an element.
fn store_element(r: &mut Regs, dtype: DType, address: &str, from: &str) -> String {
    match dtype {
        DType::F16 => {
            let h = r.get(Reg::Half);
            format!("\tcvt.rn.f16.f32 {h}, {from};\n\tst.global.b16 [{address}], {h};\n")
        }
        DType::BF16 => {
            let h = r.get(Reg::Half);
            format!("\tcvt.rn.bf16.f32 {h}, {from};\n\tst.global.b16 [{address}], {h};\n")
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

/// The shared partials of an entry (named `shared`), and its registers' declarations.
fn declarations(r: &Regs, shared: &str, columns: bool) -> String {
    let mut s = String::new();
    r.declare(&mut s);
    // Rows: one partial per warp (at most 32); columns: one per thread (256), 8 bytes each.
    let partials = if columns { 2048 } else { 256 };
    let _ = writeln!(s, "\t.shared .align 8 .b8 {shared}[{partials}];");
    s
}

/// Loads parameters `first` and `first + 1` of entry `name` as the global addresses of the
/// input and the result.
fn load_addresses(r: &mut Regs, name: &str, first: usize) -> String {
    let [input, output] = r.all([Reg::Input, Reg::Output]);
    format!(
        "\tld.param.u64 {input}, [{name}_param_{first}];\n\tcvta.to.global.u64 {input}, {input};\n\
         \tld.param.u64 {output}, [{name}_param_{}];\n\tcvta.to.global.u64 {output}, {output};\n",
        first + 1
    )
}

/// The `.entry` of a reduction kernel (without the module header).
pub fn render_reduce(k: &ReduceKernel) -> String {
    let name = &k.name;
    let shared = format!("{name}_partial");
    let mut r = Regs::new(k.dtype);
    let mut code = load_addresses(&mut r, name, 0);
    let [tid, ntid, block, blocks] = r.all([Reg::Tid, Reg::Ntid, Reg::Block, Reg::Blocks]);
    let _ = writeln!(code, "\tmov.u32 {tid}, %tid.x;\n\tmov.u32 {ntid}, %ntid.x;");
    let _ = writeln!(
        code,
        "\tmov.u32 {block}, %ctaid.x;\n\tmov.u32 {blocks}, %nctaid.x;"
    );
    code.push_str(&reduce_body(&mut r, k, &shared));
    let mut s = describe(k);
    let params = [format!("{name}_param_0"), format!("{name}_param_1")];
    entry_header(&mut s, name, &params, Threads::Any);
    s.push_str(&declarations(
        &r,
        &shared,
        k.layout == ReduceLayout::Columns,
    ));
    s.push_str(&code);
    s.push_str("}\n");
    s
}

/// The `.entry` of `launch`: its reductions (indices into `reductions`, of one dtype) one after
/// another over the blocks, each part taking `blocks()` of them with 256 threads each, all on
/// the same registers.
pub fn render_reduce_launch(launch: &ReduceLaunch, reductions: &[ReduceKernel]) -> String {
    if let [one] = launch.parts.as_slice() {
        return render_reduce(&reductions[*one]);
    }
    let name = &launch.name;
    let parts: Vec<&ReduceKernel> = launch.parts.iter().map(|&r| &reductions[r]).collect();
    let shared = format!("{name}_partial");
    let mut r = Regs::new(parts[0].dtype);
    let [tid, ntid, launched] = r.all([Reg::Tid, Reg::Ntid, Reg::Launched]);
    let mut code = format!("\tmov.u32 {tid}, %tid.x;\n\tmov.u32 {ntid}, %ntid.x;\n");
    let _ = writeln!(code, "\tmov.u32 {launched}, %ctaid.x;");
    let mut first = 0;
    for (i, k) in parts.iter().enumerate() {
        let blocks = k.blocks();
        if i > 0 {
            let _ = writeln!(code, "$L_part{i}:");
        }
        let [block, part_blocks] = r.all([Reg::Block, Reg::Blocks]);
        if i + 1 < parts.len() {
            let later = r.get(Reg::Later);
            let _ = writeln!(
                code,
                "\tsetp.ge.u32 {later}, {launched}, {};\n\t@{later} bra $L_part{};",
                first + blocks,
                i + 1
            );
        }
        let _ = match first {
            0 => writeln!(code, "\tmov.u32 {block}, {launched};"),
            _ => writeln!(code, "\tsub.u32 {block}, {launched}, {first};"),
        };
        let _ = writeln!(code, "\tmov.u32 {part_blocks}, {blocks};");
        code.push_str(&load_addresses(&mut r, name, 2 * i));
        code.push_str(&reduce_body(&mut r, k, &shared).replace("$L_", &format!("$L{i}_")));
        first += blocks;
    }
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
    entry_header(&mut s, name, &params, Threads::Any);
    let columns = parts.iter().any(|k| k.layout == ReduceLayout::Columns);
    s.push_str(&declarations(&r, &shared, columns));
    s.push_str(&code);
    s.push_str("}\n");
    s
}

/// Block `block` of split reduction `k` taken apart: the result (a row, or a group of columns)
/// it folds a segment of, the segment, its first element or row and its length (`segment`, or
/// what is left for the last).
pub(super) fn segment_of(r: &mut Regs, block: &str, k: &ReduceKernel) -> String {
    let (segments, segment, reduced) = (k.segments, k.segment(), k.reduced);
    let [of, index, start, length] = r.all([
        Reg::SegmentOf,
        Reg::Segment,
        Reg::SegmentStart,
        Reg::SegmentLength,
    ]);
    format!(
        "\tdiv.u32 {of}, {block}, {segments};\n\trem.u32 {index}, {block}, {segments};\n\
         \tmul.lo.s32 {start}, {index}, {segment};\n\tmov.u32 {length}, {reduced};\n\
         \tsub.s32 {length}, {length}, {start};\n\tmin.u32 {length}, {length}, {segment};\n"
    )
}

//! Integer matrix products, which cuBLAS does not compute (it multiplies i8 into i32 sums, not
//! i32, i64 or u8 into their own type): one thread per result element in a grid-stride loop,
//! summing its `k` products in the element type with wrapping arithmetic, as the interpreter's
//! do, so results agree bit for bit. Operands are batched matrices in the [`Gemm`] layouts
//! (either operand's contracting dimension first or last); neighbouring threads take
//! neighbouring result columns.

use crate::backend::gemm::Gemm;
use ferrax_ir::DType;
use std::fmt::Write;

/// One integer product kernel.
#[derive(Clone, Debug, PartialEq)]
pub struct IntGemmKernel {
    pub name: String,
    pub dtype: DType,
    pub gemm: Gemm,
}

impl IntGemmKernel {
    /// The kernel for `gemm` on `dtype` (i32, i64 or u8), whose operands and result it indexes
    /// in 32 bits.
    pub fn plan(name: String, dtype: DType, gemm: Gemm) -> Option<IntGemmKernel> {
        let Gemm { batch, m, n, k, .. } = gemm;
        let sizes = [batch * m * k, batch * k * n, batch * m * n];
        let indexable = sizes.iter().all(|&s| s < 1 << 31);
        (indexable && matches!(dtype, DType::I32 | DType::I64 | DType::U8))
            .then_some(IntGemmKernel { name, dtype, gemm })
    }

    /// Result elements.
    pub fn results(&self) -> usize {
        self.gemm.batch * self.gemm.m * self.gemm.n
    }
}

/// The `.entry` of an integer product kernel (without the module header): parameters lhs,
/// rhs, result.
pub fn render_int_gemm(kernel: &IntGemmKernel) -> String {
    let name = &kernel.name;
    let g = &kernel.gemm;
    // Load type, register (and arithmetic) type: u8 sums wrap mod 2^16 in registers, and
    // storing the low byte leaves them mod 2^8.
    let (load, acc) = match kernel.dtype {
        DType::I64 => ("s64", "s64"),
        DType::U8 => ("u8", "u16"),
        _ => ("s32", "s32"),
    };
    let size = kernel.dtype.size_bytes();
    let (len, mn) = (kernel.results(), g.m * g.n);
    // Element (i, l) of the lhs is at i·i_step + l·l_step in its batch; (l, j) of the rhs at
    // l·l_step + j·j_step.
    let (lhs_i, lhs_l) = if g.lhs_k_first { (1, g.m) } else { (g.k, 1) };
    let (rhs_l, rhs_j) = if g.rhs_k_last { (1, g.k) } else { (g.n, 1) };
    let mut s = String::new();
    let layout = |first: bool, a: &str, b: &str| {
        if first {
            format!("[{a}, {b}]")
        } else {
            format!("[{b}, {a}]")
        }
    };
    let _ = writeln!(
        s,
        "// {} matrix product: {} batches of {} x {} results, {} terms each (lhs {}, rhs {})",
        kernel.dtype,
        g.batch,
        g.m,
        g.n,
        g.k,
        layout(g.lhs_k_first, "K", "M"),
        layout(!g.rhs_k_last, "K", "N"),
    );
    let registers = format!(
        "\t.reg .pred %p<3>;\n\t.reg .b32 %r<16>;\n\t.reg .b64 %rd<10>;\n\t.reg .{acc} %a<4>;\n"
    );
    s.push_str(&super::loops::grid_stride_entry(name, 3, &registers, len));
    s.push_str("$L_out:\n");
    // Result o is (b, i, j): b = o / mn, i = o % mn / n, j = o % n.
    let _ = writeln!(
        s,
        "\tdiv.u32 %r7, %r5, {mn};\n\trem.u32 %r8, %r5, {mn};\n\tdiv.u32 %r9, %r8, {n};\n\trem.u32 %r10, %r8, {n};",
        n = g.n
    );
    let _ = writeln!(
        s,
        "\tmul.lo.s32 %r11, %r7, {};\n\tmad.lo.s32 %r11, %r9, {lhs_i}, %r11;",
        g.m * g.k
    );
    let _ = writeln!(
        s,
        "\tmul.lo.s32 %r12, %r7, {};\n\tmad.lo.s32 %r12, %r10, {rhs_j}, %r12;",
        g.k * g.n
    );
    let _ = writeln!(s, "\tmov.{acc} %a1, 0;\n\tmov.u32 %r13, 0;");
    s.push_str("$L_term:\n");
    let _ = writeln!(
        s,
        "\tmul.wide.u32 %rd4, %r11, {size};\n\tadd.s64 %rd5, %rd1, %rd4;\n\tld.global.nc.{load} %a2, [%rd5];"
    );
    let _ = writeln!(
        s,
        "\tmul.wide.u32 %rd6, %r12, {size};\n\tadd.s64 %rd7, %rd2, %rd6;\n\tld.global.nc.{load} %a3, [%rd7];"
    );
    let _ = writeln!(s, "\tmad.lo.{acc} %a1, %a2, %a3, %a1;");
    let _ = writeln!(
        s,
        "\tadd.s32 %r11, %r11, {lhs_l};\n\tadd.s32 %r12, %r12, {rhs_l};\n\tadd.s32 %r13, %r13, 1;"
    );
    let _ = writeln!(s, "\tsetp.lt.u32 %p2, %r13, {};\n\t@%p2 bra $L_term;", g.k);
    let _ = writeln!(
        s,
        "\tmul.wide.u32 %rd8, %r5, {size};\n\tadd.s64 %rd9, %rd3, %rd8;\n\tst.global.{load} [%rd9], %a1;"
    );
    let _ = writeln!(
        s,
        "\tadd.s32 %r5, %r5, %r6;\n\tsetp.lt.u32 %p1, %r5, {len};\n\t@%p1 bra $L_out;"
    );
    s.push_str("$L_done:\n\tret;\n}\n");
    s
}

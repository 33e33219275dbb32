//! Integer matrix products, which cuBLAS does not compute (it multiplies i8 into i32 sums, not
//! i32, i64 or u8 into their own type): one thread per result element in a grid-stride loop,
//! summing its `k` products in the element type with wrapping arithmetic, as the interpreter's
//! do, so results agree bit for bit. Operands are batched matrices in the [`Gemm`] layouts
//! (either operand's contracting dimension first or last); neighbouring threads take
//! neighbouring result columns.

use super::emit::{reg_class, Class, Emitter};
use super::loops::grid_stride_entry;
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
    // Result o is (b, i, j): b = o / mn, i = o % mn / n, j = o % n.
    let product = |e: &mut Emitter, addresses: &[String], o: &str| {
        let (lhs, rhs, result) = (&addresses[0], &addresses[1], &addresses[2]);
        let (b, ij, i, j) = (
            e.reg(Class::R),
            e.reg(Class::R),
            e.reg(Class::R),
            e.reg(Class::R),
        );
        // The elements of the current term, and the terms taken.
        let (l, r, term) = (e.reg(Class::R), e.reg(Class::R), e.reg(Class::R));
        let (lo, la, ro, ra) = (
            e.reg(Class::Rd),
            e.reg(Class::Rd),
            e.reg(Class::Rd),
            e.reg(Class::Rd),
        );
        let (offset, at) = (e.reg(Class::Rd), e.reg(Class::Rd));
        // The sum and the term's factors.
        let (sum, a, x) = (
            e.reg(reg_class(kernel.dtype)),
            e.reg(reg_class(kernel.dtype)),
            e.reg(reg_class(kernel.dtype)),
        );
        let n = g.n;
        e.line(format!("div.u32 {b}, {o}, {mn}"));
        e.line(format!("rem.u32 {ij}, {o}, {mn}"));
        e.line(format!("div.u32 {i}, {ij}, {n}"));
        e.line(format!("rem.u32 {j}, {ij}, {n}"));
        e.line(format!("mul.lo.s32 {l}, {b}, {}", g.m * g.k));
        e.line(format!("mad.lo.s32 {l}, {i}, {lhs_i}, {l}"));
        e.line(format!("mul.lo.s32 {r}, {b}, {}", g.k * g.n));
        e.line(format!("mad.lo.s32 {r}, {j}, {rhs_j}, {r}"));
        e.line(format!("mov.{acc} {sum}, 0"));
        e.line(format!("mov.u32 {term}, 0"));
        e.body.push_str("$L_term:\n");
        e.line(format!("mul.wide.u32 {lo}, {l}, {size}"));
        e.line(format!("add.s64 {la}, {lhs}, {lo}"));
        e.line(format!("ld.global.nc.{load} {a}, [{la}]"));
        e.line(format!("mul.wide.u32 {ro}, {r}, {size}"));
        e.line(format!("add.s64 {ra}, {rhs}, {ro}"));
        e.line(format!("ld.global.nc.{load} {x}, [{ra}]"));
        e.line(format!("mad.lo.{acc} {sum}, {a}, {x}, {sum}"));
        e.line(format!("add.s32 {l}, {l}, {lhs_l}"));
        e.line(format!("add.s32 {r}, {r}, {rhs_l}"));
        e.line(format!("add.s32 {term}, {term}, 1"));
        let more = e.reg(Class::P);
        e.line(format!("setp.lt.u32 {more}, {term}, {}", g.k));
        e.line(format!("@{more} bra $L_term"));
        e.line(format!("mul.wide.u32 {offset}, {o}, {size}"));
        e.line(format!("add.s64 {at}, {result}, {offset}"));
        e.line(format!("st.global.{load} [{at}], {sum}"));
    };
    s.push_str(&grid_stride_entry(name, 3, len, "out", product));
    s
}

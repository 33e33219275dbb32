//! A row kernel's entry, in the order its parts run: set-up before the row loop (parameters,
//! each thread's vectors, the shared partials), then for each pass the values computed once
//! per row (the reductions of the passes before it among them) and the values computed for
//! each element, slot by slot (a streamed pass as a loop over the row's chunks), and last the
//! row loop around them.

use super::memory::{load, store, RowAddresses};
use super::reduction::{fold, reduce_row, Partials};
use super::{row_layout, RowLayout, MAX_COLS};
use crate::backend::ptx::emit::{float_literal, reg_class, suffix, Class, Emitter};
use crate::backend::ptx::loops::{entry_header, index_along, Thread, Threads};
use crate::backend::ptx::select::emit_op;
use crate::backend::ptx::{MathMode, PtxError};
use crate::kernel::{Access, KInstr, KOp, Kernel, Role, Rows, Stage};
use std::collections::HashMap;
use std::fmt::Write;

/// The `.entry` of a legalized row kernel (a streamed one with no scratch rows:
/// [`crate::kernel::rows::recompute_carried`]).
pub(in crate::backend::ptx) fn render_row_entry(
    name: &str,
    kernel: &Kernel,
    mode: MathMode,
) -> Result<String, PtxError> {
    let (Some(shape), Some(layout)) = (&kernel.rows, row_layout(kernel)) else {
        return Err(PtxError::unsupported(
            kernel,
            "a flat kernel as a row kernel",
        ));
    };
    let (rows, cols) = (shape.rows, shape.cols);
    if rows > i32::MAX as usize || cols > MAX_COLS {
        return Err(PtxError::unsupported(
            kernel,
            format!("rows of {cols} elements ({rows} rows)"),
        ));
    }
    let mut e = Emitter::new(mode);
    let thread = Thread::new(&mut e);
    let (params, bases) = parameters(&mut e, name, kernel)?;
    let mut entry = RowEntry::new(e, name, kernel, shape, layout, &thread, bases)?;
    for pass in 0..=shape.passes {
        entry.row_values(pass)?;
        if pass == shape.passes {
            break;
        }
        entry.element_pass(pass)?;
    }
    Ok(entry.finish(name, &params, &thread.nctaid))
}

/// The entry's parameters and each buffer's base address, loaded before the row loop; scratch
/// rows stay in registers and take no parameter.
fn parameters(
    e: &mut Emitter,
    name: &str,
    kernel: &Kernel,
) -> Result<(Vec<String>, Vec<Option<String>>), PtxError> {
    let mut params = Vec::new();
    let mut bases: Vec<Option<String>> = Vec::new();
    for b in &kernel.sig.buffers {
        match b.role {
            Role::Scratch => bases.push(None),
            Role::Input | Role::Output => {
                let r = e.reg(Class::Rd);
                let param = format!("{name}_param_{}", params.len());
                e.pre_line(format!("ld.param.u64 {r}, [{param}]"));
                e.pre_line(format!("cvta.to.global.u64 {r}, {r}"));
                params.push(param);
                bases.push(Some(r));
            }
            Role::Partial(_) => return Err(PtxError::unsupported(kernel, "a column reduction")),
        }
    }
    Ok((params, bases))
}

/// A row kernel's entry under construction.
struct RowEntry<'a> {
    kernel: &'a Kernel,
    shape: &'a Rows,
    e: Emitter,
    /// Columns a vector holds, and vectors a row.
    v: usize,
    vectors: usize,
    threads: usize,
    /// Columns a thread holds (of each chunk, where streamed).
    slots: usize,
    /// Vectors a chunk of a streamed row.
    chunk: usize,
    tid: String,
    /// Whether the thread is the block's first, which stores row values.
    first: String,
    /// Per vector of the thread, whether it is inside the row (none where it always is).
    inside: Vec<Option<String>>,
    addresses: RowAddresses<'a>,
    /// The kernel's reductions (indices into its body).
    reductions: Vec<usize>,
    partials: Option<Partials>,
    /// Where streamed: a pass's first vector of the chunk (the same in every thread), and
    /// whether another chunk follows.
    chunks: Option<(String, String)>,
    /// Per instruction, its register in each slot (a row value: the same register in all).
    values: Vec<Vec<String>>,
    /// Registers that hold a buffer's slots once loaded in this row (or chunk).
    loaded: HashMap<usize, Vec<String>>,
    /// Registers that hold a scratch row's slots.
    scratch: HashMap<usize, Vec<String>>,
    /// Each reduction's accumulator while its pass runs.
    accumulators: HashMap<usize, String>,
}

impl<'a> RowEntry<'a> {
    /// The set-up before the row loop: each vector's index in the row and whether it is inside
    /// it (set once, or per chunk where streamed: only a last, partial chunk has vectors
    /// outside), the first thread, the shared partials, and the block's first row.
    fn new(
        mut e: Emitter,
        name: &str,
        kernel: &'a Kernel,
        shape: &'a Rows,
        layout: RowLayout,
        thread: &Thread,
        bases: Vec<Option<String>>,
    ) -> Result<Self, PtxError> {
        let RowLayout {
            v,
            threads,
            slots,
            streamed,
        } = layout;
        // A thread's columns come in vectors of `v`: vector `q` of thread `t` is the row's (or,
        // streamed, the chunk's) `t + q·threads`-th; its `v` columns are slots `q·v ..`.
        let (vectors, threads, held) = (shape.cols / v, threads as usize, slots / v);
        let chunk = threads * held;
        let tid = thread.tid.clone();
        let mut columns = Vec::with_capacity(held);
        let mut inside = Vec::with_capacity(held);
        for q in 0..held {
            let c = e.reg(Class::R);
            let p = if streamed {
                (!vectors.is_multiple_of(chunk)).then(|| e.reg(Class::P))
            } else {
                e.pre_line(format!("add.u32 {c}, {tid}, {}", q * threads));
                ((q + 1) * threads > vectors).then(|| {
                    let p = e.reg(Class::P);
                    e.pre_line(format!("setp.lt.u32 {p}, {c}, {vectors}"));
                    p
                })
            };
            columns.push(c);
            inside.push(p);
        }
        let first = e.reg(Class::P);
        e.pre_line(format!("setp.eq.u32 {first}, {tid}, 0"));
        let reductions: Vec<usize> = (0..kernel.body.len())
            .filter(|&k| matches!(kernel.body[k].op, KOp::Reduce(_)))
            .collect();
        let warps = threads / 32;
        let partials =
            (warps > 1 && !reductions.is_empty()).then(|| Partials::new(&mut e, name, &tid, warps));
        let row = e.reg(Class::R);
        e.pre_line(format!("mov.u32 {row}, {}", thread.ctaid));
        let chunks = streamed.then(|| (e.reg(Class::R), e.reg(Class::P)));
        let mut addresses = RowAddresses::new(kernel, bases, columns, row, v, streamed);
        if streamed {
            // Row addresses once per row, outside the chunk loops.
            addresses.start_rows(&mut e)?;
        }
        Ok(RowEntry {
            kernel,
            shape,
            e,
            v,
            vectors,
            threads,
            slots,
            chunk,
            tid,
            first,
            inside,
            addresses,
            reductions,
            partials,
            chunks,
            values: vec![Vec::new(); kernel.body.len()],
            loaded: HashMap::new(),
            scratch: HashMap::new(),
            accumulators: HashMap::new(),
        })
    }

    /// The values of pass `pass` computed once per row: what it needs of the reductions
    /// before it.
    fn row_values(&mut self, pass: usize) -> Result<(), PtxError> {
        let (kernel, shape) = (self.kernel, self.shape);
        for (k, ins) in kernel.body.iter().enumerate() {
            if shape.stages[k] == Stage::Row(pass) {
                let r = self.row_value(k, ins)?;
                self.values[k] = vec![r; self.slots];
            }
        }
        Ok(())
    }

    /// Instruction `k`, `ins`, once per row; returns its register.
    fn row_value(&mut self, k: usize, ins: &KInstr) -> Result<String, PtxError> {
        let kernel = self.kernel;
        let d = ins.dtype;
        let e = &mut self.e;
        let row = &self.addresses.row;
        Ok(match &ins.op {
            KOp::Const(s) => e.constant(*s, d),
            KOp::Load(b) => {
                let buffer = &kernel.sig.buffers[*b];
                let r = e.reg(reg_class(d));
                let at = std::slice::from_ref(&r);
                match buffer.access {
                    Access::Scalar => {
                        let base = self.addresses.base(*b)?;
                        load(e, d, "ld.global", at, &base, None, true);
                    }
                    Access::Outer(n) if n == self.shape.cols => {
                        let (o, a) = (e.reg(Class::Rd), e.reg(Class::Rd));
                        let size = buffer.dtype.size_bytes();
                        e.line(format!("mul.wide.u32 {o}, {row}, {size}"));
                        e.line(format!("add.s64 {a}, {}, {o}", self.addresses.base(*b)?));
                        load(e, d, "ld.global.nc", at, &a, None, false);
                    }
                    other => {
                        return Err(PtxError::unsupported(kernel, format!("{other:?} per row")))
                    }
                }
                r
            }
            KOp::Store(b) => {
                let v = self.values[ins.args[0]][0].clone();
                let (o, a) = (e.reg(Class::Rd), e.reg(Class::Rd));
                let size = kernel.sig.buffers[*b].dtype.size_bytes();
                e.line(format!("mul.wide.u32 {o}, {row}, {size}"));
                e.line(format!("add.s64 {a}, {}, {o}", self.addresses.base(*b)?));
                store(e, d, &a, std::slice::from_ref(&v), Some(&self.first));
                v
            }
            // An index that is the same across the row: of the row's first element.
            KOp::Index { stride, size } => {
                let r = e.reg(Class::R);
                e.line(format!("mov.u32 {r}, {row}"));
                let per_row = stride / self.shape.cols;
                index_along(e, &r, "u32", (per_row, *size), self.shape.rows);
                r
            }
            KOp::Reduce(op) => {
                let acc = self
                    .accumulators
                    .get(&k)
                    .ok_or_else(|| PtxError::unsupported(kernel, "a reduction of no pass"))?;
                let partials = self.partials.as_ref().map(|p| {
                    let index = self.reductions.iter().position(|&x| x == k);
                    (p, index.unwrap_or(0))
                });
                reduce_row(e, *op, d, acc, partials)
            }
            _ => {
                let args: Vec<String> = ins
                    .args
                    .iter()
                    .map(|&a| self.values[a][0].clone())
                    .collect();
                emit_op(e, kernel, ins, &args)?
            }
        })
    }

    /// Pass `pass` over the row's elements: its reductions start from their identity, then
    /// each of its values slot by slot (streamed, a chunk at a time), folded into the
    /// reductions that read them.
    fn element_pass(&mut self, pass: usize) -> Result<(), PtxError> {
        let (kernel, shape) = (self.kernel, self.shape);
        let stages = &shape.stages;
        for &k in &self.reductions {
            if stages[k] == Stage::Row(pass + 1) {
                let KOp::Reduce(op) = kernel.body[k].op else {
                    continue;
                };
                let d = kernel.body[k].dtype;
                let acc = self.e.reg(reg_class(d));
                let init = float_literal(op.identity(d)).unwrap_or_default();
                self.e.line(format!("mov.{} {acc}, {init}", suffix(d).0));
                self.accumulators.insert(k, acc);
            }
        }
        let chunk_loop = self.start_chunk(pass);
        for (k, ins) in kernel.body.iter().enumerate() {
            if stages[k] == Stage::Elem(pass) {
                self.values[k] = self.element_value(ins)?;
                // Fold the slots into the reductions that read this value.
                for i in 0..self.reductions.len() {
                    let r = self.reductions[i];
                    if kernel.body[r].args[0] == k {
                        self.fold_into(r, k);
                    }
                }
            }
        }
        // A reduction of a row value (a constant, say) folds it in for each of the row's
        // elements, as the other backends do.
        for i in 0..self.reductions.len() {
            let r = self.reductions[i];
            let arg = kernel.body[r].args[0];
            if stages[r] == Stage::Row(pass + 1) && matches!(stages[arg], Stage::Row(_)) {
                self.fold_into(r, arg);
            }
        }
        if let (Some(label), Some((start, more))) = (chunk_loop, &self.chunks) {
            let (chunk, vectors) = (self.chunk, self.vectors);
            self.e.line(format!("add.u32 {start}, {start}, {chunk}"));
            self.e
                .line(format!("setp.lt.u32 {more}, {start}, {vectors}"));
            self.e.line(format!("@{more} bra {label}"));
        }
        Ok(())
    }

    /// Where streamed, the start of pass `pass`'s loop over the chunks: each chunk's vector
    /// indices, and nothing kept of the chunk before. Returns the loop's label.
    fn start_chunk(&mut self, pass: usize) -> Option<String> {
        let (start, _) = self.chunks.as_ref()?;
        let e = &mut self.e;
        let label = e.label(&format!("pass{pass}"));
        e.line(format!("mov.u32 {start}, 0"));
        e.body.push_str(&format!("{label}:\n"));
        let columns = &self.addresses.columns;
        for (q, (c, p)) in columns.iter().zip(&self.inside).enumerate() {
            e.line(format!("add.u32 {c}, {start}, {}", self.tid));
            if q > 0 {
                e.line(format!("add.u32 {c}, {c}, {}", q * self.threads));
            }
            if let Some(p) = p {
                e.line(format!("setp.lt.u32 {p}, {c}, {}", self.vectors));
            }
        }
        self.addresses.forget();
        self.loaded.clear();
        Some(label)
    }

    /// Element instruction `ins`, slot by slot; returns its register in each.
    fn element_value(&mut self, ins: &KInstr) -> Result<Vec<String>, PtxError> {
        let kernel = self.kernel;
        let (d, v, e) = (ins.dtype, self.v, &mut self.e);
        let scratch_row = |b: &usize| kernel.sig.buffers[*b].role == Role::Scratch;
        Ok(match &ins.op {
            KOp::Const(s) => vec![e.constant(*s, d); self.slots],
            KOp::Load(b) if scratch_row(b) => self.scratch.get(b).cloned().ok_or_else(|| {
                PtxError::unsupported(kernel, "a scratch row read before written")
            })?,
            KOp::Load(b) => match self.loaded.get(b) {
                Some(regs) => regs.clone(),
                None => {
                    let regs: Vec<String> = (0..self.slots).map(|_| e.reg(reg_class(d))).collect();
                    for (q, p) in self.inside.iter().enumerate() {
                        let a = self.addresses.vector(e, *b, q)?;
                        let lanes = &regs[q * v..(q + 1) * v];
                        load(e, d, "ld.global.nc", lanes, &a, p.as_deref(), false);
                    }
                    self.loaded.insert(*b, regs.clone());
                    regs
                }
            },
            // An index along the row: of each slot's column.
            KOp::Index { stride, size } => {
                let columns = &self.addresses.columns;
                (0..self.slots)
                    .map(|j| {
                        let r = e.reg(Class::R);
                        e.line(format!(
                            "mad.lo.u32 {r}, {}, {v}, {}",
                            columns[j / v],
                            j % v
                        ));
                        index_along(e, &r, "u32", (*stride, *size), self.shape.cols);
                        r
                    })
                    .collect()
            }
            KOp::Store(b) if scratch_row(b) => {
                if self.chunks.is_some() {
                    return Err(PtxError::unsupported(
                        kernel,
                        "a scratch row in a streamed row",
                    ));
                }
                let x = self.values[ins.args[0]].clone();
                self.scratch.insert(*b, x.clone());
                x
            }
            KOp::Store(b) => {
                let x = self.values[ins.args[0]].clone();
                for (q, p) in self.inside.iter().enumerate() {
                    let a = self.addresses.vector(e, *b, q)?;
                    store(e, d, &a, &x[q * v..(q + 1) * v], p.as_ref());
                }
                x
            }
            _ => (0..self.slots)
                .map(|j| {
                    let args: Vec<String> = ins
                        .args
                        .iter()
                        .map(|&a| self.values[a][j].clone())
                        .collect();
                    emit_op(e, kernel, ins, &args)
                })
                .collect::<Result<_, _>>()?,
        })
    }

    /// Folds the slots of value `k` into reduction `r`'s accumulator.
    fn fold_into(&mut self, r: usize, k: usize) {
        let (acc, slots) = (&self.accumulators[&r], &self.values[k]);
        let reduction = &self.kernel.body[r];
        fold(&mut self.e, reduction, acc, slots, &self.inside, self.v);
    }

    /// The entry's text: a comment describing it, its header and declarations, the set-up,
    /// and the row loop around the body built.
    fn finish(mut self, name: &str, params: &[String], nctaid: &str) -> String {
        let body = std::mem::take(&mut self.e.body);
        let e = &mut self.e;
        let (done, more) = (e.reg(Class::P), e.reg(Class::P));
        let (rows, cols, passes) = (self.shape.rows, self.shape.cols, self.shape.passes);
        let (slots, v, threads) = (self.slots, self.v, self.threads);
        let streamed = self.chunks.is_some();
        let spread = if streamed {
            format!(
                "{slots} columns each of every chunk of {} in vectors of {v}",
                self.chunk * v
            )
        } else {
            format!("{slots} columns each in vectors of {v}")
        };
        let mut out = String::new();
        let _ = writeln!(
            out,
            "// {rows} rows of {cols} elements, {threads} threads per row, {spread}, {passes} \
             passes; buffers:"
        );
        for (i, b) in self.kernel.sig.buffers.iter().enumerate() {
            let role = match b.role {
                Role::Input => "in",
                Role::Scratch if streamed => "recomputed",
                Role::Scratch => "kept",
                _ => "out",
            };
            let _ = writeln!(out, "//   #{i} {role} {} {:?}", b.dtype, b.access);
        }
        entry_header(&mut out, name, params, Threads::AtMost(threads));
        e.declare(&mut out);
        if let Some(p) = &self.partials {
            let bytes = self.reductions.len() * p.warps * 8;
            let _ = writeln!(out, "\t.shared .align 8 .b8 {name}_partials[{bytes}];");
        }
        out.push('\n');
        out.push_str(&e.pre);
        let row = &self.addresses.row;
        let _ = writeln!(out, "\tsetp.ge.u32 {done}, {row}, {rows};");
        let _ = writeln!(out, "\t@{done} bra $L_done;");
        out.push_str("$L_row:\n");
        out.push_str(&body);
        if self.partials.is_some() && self.reductions.len() == 1 {
            // The next row's partial overwrites this one only once every warp has read it. With
            // several reductions, the barriers of the others already order the two.
            out.push_str("\tbar.sync 0;\n");
        }
        let _ = writeln!(out, "\tadd.u32 {row}, {row}, {nctaid};");
        let _ = writeln!(out, "\tsetp.lt.u32 {more}, {row}, {rows};");
        let _ = writeln!(out, "\t@{more} bra $L_row;");
        out.push_str("$L_done:\n\tret;\n}\n");
        out
    }
}

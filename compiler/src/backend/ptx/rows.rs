//! Row kernels on the GPU ([`crate::kernel::rows`]): softmax, layernorm and their gradients as
//! one launch instead of a kernel per elementwise run and one per reduction.
//!
//! One block per row (grid-striding over rows), [`row_threads`] threads of it. The row lives in
//! registers: thread `t` holds vectors `t`, `t + threads`, ... of the row, each 16 bytes of
//! consecutive columns where rows are whole vectors (one column otherwise), loaded and stored
//! by one instruction, so neighbouring threads touch neighbouring addresses; at most 16 columns
//! a thread (its slots). A value one pass computes and a later pass reads (the CPU's scratch
//! row) stays in its register, and an input read by several passes is loaded once. A reduction
//! folds each thread's slots as its pass computes them, then across the warp by butterfly
//! shuffles (every lane ends with the result), then, for blocks of several warps, through
//! shared memory, every thread folding the warps' partials in the same order: each thread holds
//! the same row value, so the next pass needs no broadcast. Row values are computed by every
//! thread alike; thread 0 stores them.
//!
//! A row longer than that (up to [`MAX_COLS`]: vocabulary-sized softmax) is streamed: 1,024
//! threads take it a chunk of 8 columns each at a time, every pass a loop over the chunks, and
//! a value an earlier pass computed is computed again from the inputs, which each pass reloads
//! ([`crate::kernel::rows::recompute_carried`]). Softmax so reads its row three times and
//! writes it once, where kernels and reduction kernels would make about six passes over memory.
//! But a block streams each row, so only rows enough to spread over the device stream
//! ([`ROW_LIMIT`]); fewer very long rows run as kernels and split reductions over many blocks.

use super::emit::{float_literal, reg_class, suffix, Class, Emitter};
use super::loops::{entry_header, Thread};
use super::select::emit_op;
use super::{MathMode, PtxError};
use crate::kernel::{Access, KInstr, KOp, Kernel, Role, Stage};
use crate::target::RowLimit;
use ferrax_ir::{DType, ReduceOp, Scalar};
use std::collections::HashMap;
use std::fmt::Write;

/// Columns a thread of a row kernel holds at most.
const SLOTS: usize = 16;

/// The longest rows a row kernel takes: a block streams each row, so few long rows would keep
/// most of the device idle; longer rows run as kernels and reduction kernels over many blocks.
pub const MAX_COLS: usize = 262_144;

/// The rows that take a row kernel on the GPU: the GPU target's row limit. A streamed row takes
/// one block, so its time grows with its length however few rows there are: a few very long
/// rows run faster as kernels and split reductions over many blocks, while rows of up to 65,536
/// elements stream faster than that path even when few (measured on an H200; docs/perf-log.md).
/// Longer rows stream only when there are 32 or more.
pub const ROW_LIMIT: RowLimit = RowLimit {
    max_cols: MAX_COLS,
    long_cols: 65_536,
    min_long_rows: 32,
};

/// Columns a row kernel's thread loads and stores as one vector: 16 bytes of f32 (or of an
/// 8-byte type) where rows are whole vectors, else one.
pub fn row_vector(kernel: &Kernel, cols: usize) -> usize {
    let v = if kernel.sig.buffers.iter().any(|b| b.dtype.size_bytes() == 8) {
        2
    } else {
        4
    };
    if cols.is_multiple_of(v) {
        v
    } else {
        1
    }
}

/// Vectors a thread of a row kernel takes before its block grows by a warp. Two keep more
/// loads in flight and more rows on each multiprocessor than one; four make blocks of short
/// rows too small, which slowed the MLP step (docs/perf-log.md).
const VECTORS_PER_THREAD: usize = 2;

/// Threads per block of a row kernel over rows of `vectors` vectors of `v` columns: whole
/// warps, [`VECTORS_PER_THREAD`] vectors each up to 256 threads; beyond, as many warps (up to
/// 32, CUDA's 1,024 threads) as keep a thread's columns within [`SLOTS`].
pub fn row_threads(vectors: usize, v: usize) -> u32 {
    let warps = vectors.div_ceil(32 * VECTORS_PER_THREAD).clamp(1, 8);
    let held = vectors.div_ceil(32 * warps) * v;
    let warps = if held > SLOTS {
        vectors.div_ceil(32 * (SLOTS / v)).min(32)
    } else {
        warps
    };
    (warps * 32) as u32
}

/// How a row kernel spreads a row over its block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RowLayout {
    /// Columns loaded and stored as one vector.
    pub v: usize,
    pub threads: u32,
    /// Columns a thread holds: of the whole row, or of each chunk where `streamed`.
    pub slots: usize,
    /// Whether the row is taken a chunk of `threads * slots` columns at a time, each pass a
    /// loop over the chunks, because the whole row would not fit in [`SLOTS`] columns a thread.
    pub streamed: bool,
}

/// Columns a thread of a streamed row kernel holds of each chunk: two 16-byte vectors of f32.
const CHUNK_SLOTS: usize = 8;

/// How row kernel `kernel` spreads a row over a block.
pub fn row_layout(kernel: &Kernel) -> Option<RowLayout> {
    let cols = kernel.rows.as_ref()?.cols;
    let v = row_vector(kernel, cols);
    let threads = row_threads(cols / v, v);
    let slots = (cols / v).div_ceil(threads as usize) * v;
    Some(if slots <= SLOTS {
        RowLayout {
            v,
            threads,
            slots,
            streamed: false,
        }
    } else {
        RowLayout {
            v,
            threads: 1024,
            slots: CHUNK_SLOTS,
            streamed: true,
        }
    })
}

/// `op(a, b)` into a new register.
fn combine(e: &mut Emitter, op: ReduceOp, d: DType, a: &str, b: &str) -> String {
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

/// Where a row kernel's vectors are: the address of each buffer's row (once per row) and of
/// each of the thread's vectors in it (once per row, or, in a streamed kernel, once per chunk:
/// [`RowAddresses::forget`] at each chunk), computed where first needed.
struct RowAddresses<'a> {
    kernel: &'a Kernel,
    bases: &'a [Option<String>],
    /// Each of the thread's vectors' index in the row.
    columns: &'a [String],
    row: &'a str,
    v: usize,
    streamed: bool,
    /// Byte offsets of each vector, by element size.
    offsets: HashMap<(usize, usize), String>,
    /// Per buffer, the address of its row's first element.
    starts: HashMap<usize, String>,
}

impl RowAddresses<'_> {
    fn base(&self, b: usize) -> Result<String, PtxError> {
        self.bases[b].clone().ok_or_else(|| PtxError::Unsupported {
            kernel: self.kernel.name.clone(),
            what: "scratch access".into(),
        })
    }

    /// The address of vector `q` of buffer `b` in this row.
    fn vector(&mut self, e: &mut Emitter, b: usize, q: usize) -> Result<String, PtxError> {
        let buffer = &self.kernel.sig.buffers[b];
        let size = buffer.dtype.size_bytes();
        let cols = self.kernel.rows.as_ref().map_or(0, |r| r.cols);
        let offset = match self.offsets.get(&(q, size)) {
            Some(o) => o.clone(),
            None => {
                let o = e.reg(Class::Rd);
                let line = format!("mul.wide.u32 {o}, {}, {}", self.columns[q], self.v * size);
                if self.streamed {
                    e.line(line);
                } else {
                    e.pre_line(line);
                }
                self.offsets.insert((q, size), o.clone());
                o
            }
        };
        let start = match buffer.access {
            Access::Each => self.row_start(e, b)?,
            Access::Inner(n) if n == cols => self.base(b)?,
            other => {
                return Err(PtxError::Unsupported {
                    kernel: self.kernel.name.clone(),
                    what: format!("{other:?} per element"),
                })
            }
        };
        let a = e.reg(Class::Rd);
        e.line(format!("add.s64 {a}, {start}, {offset}"));
        Ok(a)
    }

    /// The address of the first element of buffer `b`'s row (a per-element buffer).
    fn row_start(&mut self, e: &mut Emitter, b: usize) -> Result<String, PtxError> {
        if let Some(a) = self.starts.get(&b) {
            return Ok(a.clone());
        }
        let size = self.kernel.sig.buffers[b].dtype.size_bytes();
        let cols = self.kernel.rows.as_ref().map_or(0, |r| r.cols);
        let (o, a) = (e.reg(Class::Rd), e.reg(Class::Rd));
        e.line(format!("mul.wide.u32 {o}, {}, {}", self.row, cols * size));
        e.line(format!("add.s64 {a}, {}, {o}", self.base(b)?));
        self.starts.insert(b, a.clone());
        Ok(a)
    }

    /// Drops the vector offsets of the chunk before.
    fn forget(&mut self) {
        self.offsets.clear();
    }
}

/// The `.entry` of a legalized row kernel (a streamed one with no scratch rows:
/// [`crate::kernel::rows::recompute_carried`]).
pub(super) fn render_row_entry(
    name: &str,
    kernel: &Kernel,
    mode: MathMode,
) -> Result<String, PtxError> {
    let unsupported = |what: String| PtxError::Unsupported {
        kernel: kernel.name.clone(),
        what,
    };
    let (Some(shape), Some(layout)) = (&kernel.rows, row_layout(kernel)) else {
        return Err(unsupported("a flat kernel as a row kernel".into()));
    };
    let (rows, cols) = (shape.rows, shape.cols);
    if rows > i32::MAX as usize || cols > MAX_COLS {
        return Err(unsupported(format!(
            "rows of {cols} elements ({rows} rows)"
        )));
    }
    let RowLayout {
        v,
        threads,
        slots,
        streamed,
    } = layout;
    // A thread's columns come in vectors of `v`: vector `q` of thread `t` is the row's (or,
    // streamed, the chunk's) `t + q·threads`-th; its `v` columns are slots `q·v ..`.
    let (vectors, threads, held) = (cols / v, threads as usize, slots / v);
    let chunk = threads * held;
    let warps = threads / 32;
    let mut e = Emitter::new(mode);
    let Thread {
        ctaid, tid, nctaid, ..
    } = Thread::new(&mut e);
    // Buffer base addresses; scratch rows stay in registers and take no parameter.
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
            Role::Partial(_) => return Err(unsupported("a column reduction".into())),
        }
    }
    // Each vector's index in the row, and whether it is inside the row: set once, or per
    // chunk where streamed (only a last, partial chunk has vectors outside).
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
    // Shared memory for the warps' partials: 8 bytes per warp and reduction.
    let reductions: Vec<usize> = (0..kernel.body.len())
        .filter(|&k| matches!(kernel.body[k].op, KOp::Reduce(_)))
        .collect();
    let shared = warps > 1 && !reductions.is_empty();
    let (lane_zero, shared_base, warp_slot) = if shared {
        let (lane, warp, sbase, slot) = (
            e.reg(Class::R),
            e.reg(Class::R),
            e.reg(Class::R),
            e.reg(Class::R),
        );
        let zero = e.reg(Class::P);
        e.pre_line(format!("and.b32 {lane}, {tid}, 31"));
        e.pre_line(format!("setp.eq.u32 {zero}, {lane}, 0"));
        e.pre_line(format!("shr.u32 {warp}, {tid}, 5"));
        e.pre_line(format!("mov.u32 {sbase}, {name}_partials"));
        e.pre_line(format!("shl.b32 {slot}, {warp}, 3"));
        e.pre_line(format!("add.u32 {slot}, {slot}, {sbase}"));
        (zero, sbase, slot)
    } else {
        Default::default()
    };
    let row = e.reg(Class::R);
    e.pre_line(format!("mov.u32 {row}, {ctaid}"));
    // A streamed pass's first vector of the chunk, the same in every thread.
    let (chunk_start, more_chunks) = if streamed {
        (e.reg(Class::R), e.reg(Class::P))
    } else {
        Default::default()
    };

    // Per instruction, its register in each slot (a row value: the same register in all).
    let mut values: Vec<Vec<String>> = vec![Vec::new(); kernel.body.len()];
    // Registers that hold a buffer's slots once loaded in this row (or chunk).
    let mut loaded: HashMap<usize, Vec<String>> = HashMap::new();
    let mut scratch: HashMap<usize, Vec<String>> = HashMap::new();
    let mut addresses = RowAddresses {
        kernel,
        bases: &bases,
        columns: &columns,
        row: &row,
        v,
        streamed,
        offsets: HashMap::new(),
        starts: HashMap::new(),
    };
    let mut accumulators: HashMap<usize, String> = HashMap::new();
    let stage = |k: usize| shape.stages[k];
    if streamed {
        // Row addresses once per row, outside the chunk loops.
        for (b, buffer) in kernel.sig.buffers.iter().enumerate() {
            if buffer.access == Access::Each && bases[b].is_some() {
                addresses.row_start(&mut e, b)?;
            }
        }
    }

    for pass in 0..=shape.passes {
        // Once per row: what this pass needs of the reductions before it.
        for (k, ins) in kernel.body.iter().enumerate() {
            if stage(k) != Stage::Row(pass) {
                continue;
            }
            let d = ins.dtype;
            let (t, _) = suffix(d);
            let class = reg_class(d);
            let r = match &ins.op {
                KOp::Const(s) => e.constant(*s, d),
                KOp::Load(b) => {
                    let buffer = &kernel.sig.buffers[*b];
                    let r = e.reg(class);
                    match buffer.access {
                        Access::Scalar => {
                            load(
                                &mut e,
                                d,
                                "ld.global",
                                std::slice::from_ref(&r),
                                &addresses.base(*b)?,
                                None,
                                true,
                            );
                        }
                        Access::Outer(n) if n == cols => {
                            let (o, a) = (e.reg(Class::Rd), e.reg(Class::Rd));
                            let size = buffer.dtype.size_bytes();
                            e.line(format!("mul.wide.u32 {o}, {row}, {size}"));
                            e.line(format!("add.s64 {a}, {}, {o}", addresses.base(*b)?));
                            load(
                                &mut e,
                                d,
                                "ld.global.nc",
                                std::slice::from_ref(&r),
                                &a,
                                None,
                                false,
                            );
                        }
                        other => return Err(unsupported(format!("{other:?} per row"))),
                    }
                    r
                }
                KOp::Store(b) => {
                    let v = values[ins.args[0]][0].clone();
                    let (o, a) = (e.reg(Class::Rd), e.reg(Class::Rd));
                    let size = kernel.sig.buffers[*b].dtype.size_bytes();
                    e.line(format!("mul.wide.u32 {o}, {row}, {size}"));
                    e.line(format!("add.s64 {a}, {}, {o}", addresses.base(*b)?));
                    store(&mut e, d, &a, std::slice::from_ref(&v), Some(&first));
                    v
                }
                KOp::Reduce(op) => {
                    let acc = accumulators
                        .get(&k)
                        .cloned()
                        .ok_or_else(|| unsupported("a reduction of no pass".into()))?;
                    let r = e.reg(class);
                    e.line(format!("mov.{t} {r}, {acc}"));
                    for offset in [16, 8, 4, 2, 1] {
                        let other = shuffle(&mut e, d, &r, offset);
                        let c = combine(&mut e, *op, d, &r, &other);
                        e.line(format!("mov.{t} {r}, {c}"));
                    }
                    if shared {
                        let area = reductions.iter().position(|&x| x == k).unwrap_or(0) * warps * 8;
                        e.line(format!(
                            "@{lane_zero} st.shared.{t} [{warp_slot}+{area}], {r}"
                        ));
                        e.line("bar.sync 0".into());
                        e.line(format!("ld.shared.{t} {r}, [{shared_base}+{area}]"));
                        for w in 1..warps {
                            let p = e.reg(class);
                            let at = area + 8 * w;
                            e.line(format!("ld.shared.{t} {p}, [{shared_base}+{at}]"));
                            let c = combine(&mut e, *op, d, &r, &p);
                            e.line(format!("mov.{t} {r}, {c}"));
                        }
                    }
                    r
                }
                _ => {
                    let args: Vec<String> =
                        ins.args.iter().map(|&a| values[a][0].clone()).collect();
                    emit_op(&mut e, kernel, ins, &args)?
                }
            };
            values[k] = vec![r; slots];
        }
        if pass == shape.passes {
            break;
        }
        // The reductions of this pass start from their identity.
        for &k in &reductions {
            if stage(k) == Stage::Row(pass + 1) {
                let KOp::Reduce(op) = kernel.body[k].op else {
                    continue;
                };
                let d = kernel.body[k].dtype;
                let acc = e.reg(reg_class(d));
                let init = float_literal(op.identity(d)).unwrap_or_default();
                e.line(format!("mov.{} {acc}, {init}", suffix(d).0));
                accumulators.insert(k, acc);
            }
        }
        let chunk_loop = streamed.then(|| e.label(&format!("pass{pass}")));
        if let Some(label) = &chunk_loop {
            // Each chunk: its vectors' indices, and nothing kept of the chunk before.
            e.line(format!("mov.u32 {chunk_start}, 0"));
            e.body.push_str(&format!("{label}:\n"));
            for (q, (c, p)) in columns.iter().zip(&inside).enumerate() {
                e.line(format!("add.u32 {c}, {chunk_start}, {tid}"));
                if q > 0 {
                    e.line(format!("add.u32 {c}, {c}, {}", q * threads));
                }
                if let Some(p) = p {
                    e.line(format!("setp.lt.u32 {p}, {c}, {vectors}"));
                }
            }
            addresses.forget();
            loaded.clear();
        }
        // Per element of the row, slot by slot.
        for (k, ins) in kernel.body.iter().enumerate() {
            if stage(k) != Stage::Elem(pass) {
                continue;
            }
            let d = ins.dtype;
            let class = reg_class(d);
            values[k] = match &ins.op {
                KOp::Const(s) => vec![e.constant(*s, d); slots],
                KOp::Load(b) if kernel.sig.buffers[*b].role == Role::Scratch => scratch
                    .get(b)
                    .cloned()
                    .ok_or_else(|| unsupported("a scratch row read before written".into()))?,
                KOp::Load(b) => match loaded.get(b) {
                    Some(regs) => regs.clone(),
                    None => {
                        let regs: Vec<String> = (0..slots).map(|_| e.reg(class)).collect();
                        for (q, p) in inside.iter().enumerate() {
                            let a = addresses.vector(&mut e, *b, q)?;
                            let lanes = &regs[q * v..(q + 1) * v];
                            load(&mut e, d, "ld.global.nc", lanes, &a, p.as_deref(), false);
                        }
                        loaded.insert(*b, regs.clone());
                        regs
                    }
                },
                KOp::Store(b) if kernel.sig.buffers[*b].role == Role::Scratch => {
                    if streamed {
                        return Err(unsupported("a scratch row in a streamed row".into()));
                    }
                    let v = values[ins.args[0]].clone();
                    scratch.insert(*b, v.clone());
                    v
                }
                KOp::Store(b) => {
                    let x = values[ins.args[0]].clone();
                    for (q, p) in inside.iter().enumerate() {
                        let a = addresses.vector(&mut e, *b, q)?;
                        store(&mut e, d, &a, &x[q * v..(q + 1) * v], p.as_ref());
                    }
                    x
                }
                _ => (0..slots)
                    .map(|j| {
                        let args: Vec<String> =
                            ins.args.iter().map(|&a| values[a][j].clone()).collect();
                        emit_op(&mut e, kernel, ins, &args)
                    })
                    .collect::<Result<_, _>>()?,
            };
            // Fold the slots into the reductions that read this value.
            for &r in &reductions {
                if kernel.body[r].args[0] == k {
                    fold(
                        &mut e,
                        &kernel.body[r],
                        &accumulators[&r],
                        &values[k],
                        &inside,
                        v,
                    );
                }
            }
        }
        // A reduction of a row value (a constant, say) folds it in for each of the row's
        // elements, as the other backends do.
        for &r in &reductions {
            let arg = kernel.body[r].args[0];
            if stage(r) == Stage::Row(pass + 1) && matches!(stage(arg), Stage::Row(_)) {
                fold(
                    &mut e,
                    &kernel.body[r],
                    &accumulators[&r],
                    &values[arg],
                    &inside,
                    v,
                );
            }
        }
        if let Some(label) = chunk_loop {
            e.line(format!("add.u32 {chunk_start}, {chunk_start}, {chunk}"));
            e.line(format!(
                "setp.lt.u32 {more_chunks}, {chunk_start}, {vectors}"
            ));
            e.line(format!("@{more_chunks} bra {label}"));
        }
    }
    let body = std::mem::take(&mut e.body);
    let (done, more) = (e.reg(Class::P), e.reg(Class::P));
    let mut out = String::new();
    let spread = if streamed {
        format!(
            "{slots} columns each of every chunk of {} in vectors of {v}",
            chunk * v
        )
    } else {
        format!("{slots} columns each in vectors of {v}")
    };
    let _ = writeln!(
        out,
        "// {rows} rows of {cols} elements, {threads} threads per row, {spread}, {} passes; \
         buffers:",
        shape.passes
    );
    for (i, b) in kernel.sig.buffers.iter().enumerate() {
        let role = match b.role {
            Role::Input => "in",
            Role::Scratch if streamed => "recomputed",
            Role::Scratch => "kept",
            _ => "out",
        };
        let _ = writeln!(out, "//   #{i} {role} {} {:?}", b.dtype, b.access);
    }
    entry_header(&mut out, name, &params, Some(threads));
    e.declare(&mut out);
    if shared {
        let bytes = reductions.len() * warps * 8;
        let _ = writeln!(out, "\t.shared .align 8 .b8 {name}_partials[{bytes}];");
    }
    out.push('\n');
    out.push_str(&e.pre);
    let _ = writeln!(out, "\tsetp.ge.u32 {done}, {row}, {rows};");
    let _ = writeln!(out, "\t@{done} bra $L_done;");
    out.push_str("$L_row:\n");
    out.push_str(&body);
    if shared && reductions.len() == 1 {
        // The next row's partial overwrites this one only once every warp has read it. With
        // several reductions, the barriers of the others already order the two.
        out.push_str("\tbar.sync 0;\n");
    }
    let _ = writeln!(out, "\tadd.u32 {row}, {row}, {nctaid};");
    let _ = writeln!(out, "\tsetp.lt.u32 {more}, {row}, {rows};");
    let _ = writeln!(out, "\t@{more} bra $L_row;");
    out.push_str("$L_done:\n\tret;\n}\n");
    Ok(out)
}

/// Folds `slots` (the values of a thread's columns) into accumulator `acc` of `reduction`; a
/// vector's columns only where it is inside the row (`inside`, per vector of `v` columns).
fn fold(
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

/// `regs = [a..]` (consecutive elements, guarded by `p`), or, `pre`, before the row loop.
fn load(
    e: &mut Emitter,
    d: DType,
    space: &str,
    regs: &[String],
    a: &str,
    p: Option<&str>,
    pre: bool,
) {
    let (t, bits) = suffix(d);
    let guard = p.map(|p| format!("@{p} ")).unwrap_or_default();
    let mut lines = Vec::new();
    if d == DType::Bool {
        for (lane, r) in regs.iter().enumerate() {
            let s = e.reg(Class::Rs);
            lines.push(format!("mov.u16 {s}, 0"));
            lines.push(format!("{guard}{space}.u8 {s}, [{a}+{lane}]"));
            lines.push(format!("setp.ne.u16 {r}, {s}, 0"));
        }
    } else {
        if p.is_some() {
            // Outside the row the registers still get a value: nothing reads it, but it is set.
            let zero = match d {
                DType::F32 | DType::F64 => {
                    float_literal(Scalar::from_f64(d, 0.0)).unwrap_or_default()
                }
                _ => "0".into(),
            };
            lines.extend(regs.iter().map(|r| format!("mov.{bits} {r}, {zero}")));
        }
        match regs {
            [r] => lines.push(format!("{guard}{space}.{t} {r}, [{a}]")),
            _ => lines.push(format!(
                "{guard}{space}.v{}.{t} {{{}}}, [{a}]",
                regs.len(),
                regs.join(", ")
            )),
        }
    }
    for line in lines {
        if pre {
            e.pre_line(line);
        } else {
            e.line(line);
        }
    }
}

/// `[a..] = values` (consecutive elements), guarded by `p`.
fn store(e: &mut Emitter, d: DType, a: &str, values: &[String], p: Option<&String>) {
    let (t, _) = suffix(d);
    let guard = p.map(|p| format!("@{p} ")).unwrap_or_default();
    if d == DType::Bool {
        for (lane, x) in values.iter().enumerate() {
            let s = e.reg(Class::Rs);
            e.line(format!("selp.u16 {s}, 1, 0, {x}"));
            e.line(format!("{guard}st.global.u8 [{a}+{lane}], {s}"));
        }
    } else if let [x] = values {
        e.line(format!("{guard}st.global.{t} [{a}], {x}"));
    } else {
        e.line(format!(
            "{guard}st.global.v{}.{t} [{a}], {{{}}}",
            values.len(),
            values.join(", ")
        ));
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

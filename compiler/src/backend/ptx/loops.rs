//! Flat kernels as grid-stride loops, and the entries that launch them. Each thread takes
//! elements `index, index + stride, ...` of a kernel, a vector of consecutive elements at a time
//! where every access pattern allows ([`vector_width`]), so any grid covers any length and
//! neighbouring threads touch neighbouring addresses. Several independent kernels launched as
//! one ([`Launch`]) are their loops in turn, so small kernels cost one launch between them.
//! Copies and integer products are grid-stride entries too, of one element a thread and step
//! ([`grid_stride_entry`]).

use super::columns::accumulate;
use super::emit::{reg_class, suffix, Class, Emitter};
use super::select::emit_op;
use super::{entry_name, MathMode, PtxError};
use crate::kernel::{Access, KOp, Kernel, Role};
use ferrax_ir::{DType, ReduceOp};
use std::collections::HashMap;
use std::fmt::Write;

/// Kernels launched as one: the entry `name` runs each of `kernels` (indices into the
/// module's kernels) in turn, its parameters theirs in that order. They must not read one
/// another's outputs.
#[derive(Clone, Debug, PartialEq)]
pub struct Launch {
    pub name: String,
    pub kernels: Vec<usize>,
    /// For a column kernel launched alone ([`super::columns`]), per partial buffer in
    /// parameter order, the reduction launches that fold its partials in turn.
    pub totals: Vec<Vec<usize>>,
}

impl Launch {
    /// One launch per kernel, named after it.
    pub fn each(kernels: &[Kernel]) -> Vec<Launch> {
        (0..kernels.len())
            .map(|k| Launch {
                name: entry_name(&kernels[k]),
                kernels: vec![k],
                totals: Vec::new(),
            })
            .collect()
    }
}

/// Elements per thread and iteration: 16 bytes of f32 (or of an 8-byte type) when every access
/// pattern keeps groups of that many consecutive elements together, else 1.
pub(super) fn vector_width(kernel: &Kernel) -> usize {
    let v = if kernel.sig.buffers.iter().any(|b| b.dtype.size_bytes() == 8) {
        2
    } else {
        4
    };
    let fits = kernel.len.is_multiple_of(v)
        && kernel.sig.buffers.iter().all(|b| match b.access {
            Access::Outer(n) | Access::Inner(n) | Access::Gather { n, .. } => n.is_multiple_of(v),
            // A vector is all inside a window or all outside it.
            Access::Window { row, start, len } => [row, start, len].iter().all(|n| n % v == 0),
            Access::Each | Access::Scalar => true,
        });
    if fits {
        v
    } else {
        1
    }
}

/// The `.entry` of a launch: its legalized kernels' grid-stride loops one after another, every
/// thread running each in turn (so no kernel may read another's output: nothing orders one
/// thread's stores before another thread's loads).
pub(super) fn render_entry(
    name: &str,
    kernels: &[&Kernel],
    mode: MathMode,
) -> Result<String, PtxError> {
    let mut e = Emitter::new(mode);
    let thread = Thread::new(&mut e);
    let mut params = Vec::new();
    let mut comments = String::new();
    let mut loops = String::new();
    let mut k = 0;
    while let Some(kernel) = kernels.get(k) {
        // Repeats of one kernel over other buffers (each parameter's optimizer update) are
        // one loop over them, so the entry's code does not grow with their number.
        let repeats = kernels[k..]
            .iter()
            .take_while(|o| o.same_code(kernel))
            .count();
        let first = params.len();
        let buffers = repeats * kernel.sig.buffers.len();
        params.extend((0..buffers).map(|i| format!("{name}_param_{}", first + i)));
        let tag = if kernels.len() > 1 {
            format!("_{k}")
        } else {
            String::new()
        };
        let (comment, text) = if repeats > 1 {
            render_repeats(&mut e, kernel, (&params[first], repeats), &thread, &tag)?
        } else {
            render_loop(&mut e, kernel, &params[first..], &thread, &tag)?
        };
        comments.push_str(&comment);
        loops.push_str(&text);
        k += repeats;
    }
    let mut out = comments;
    entry_header(&mut out, name, &params, Threads::Any);
    e.declare(&mut out);
    out.push('\n');
    out.push_str(&e.pre);
    out.push_str(&loops);
    out.push_str("\tret;\n}\n");
    Ok(out)
}

/// `.visible .entry name(params)`, with its largest block size where given, up to the `{`.
pub(super) fn entry_header(out: &mut String, name: &str, params: &[String], threads: Threads) {
    let declared: Vec<String> = params
        .iter()
        .map(|p| format!("\t.param .u64 {p}"))
        .collect();
    let _ = writeln!(out, ".visible .entry {name}(\n{}\n)", declared.join(",\n"));
    match threads {
        Threads::Any => {}
        Threads::AtMost(n) => {
            let _ = writeln!(out, ".maxntid {n}, 1, 1");
        }
        // One block a multiprocessor is all it asks: without it, ptxas at times spilled
        // registers to fit more blocks.
        Threads::Exactly(n) => {
            let _ = writeln!(out, ".reqntid {n}, 1, 1\n.minnctapersm 1");
        }
    }
    out.push_str("{\n");
}

/// What an entry tells the assembler of its blocks' threads.
#[derive(Clone, Copy)]
pub(super) enum Threads {
    Any,
    AtMost(usize),
    Exactly(usize),
}

/// A grid-stride entry of one element a thread and step, over `len` elements (32-bit indices)
/// with `buffers` address parameters, whose loop (labelled `$L_{label}`) has the body `body`
/// writes into the emitter, given the buffers' global addresses and the element's index. The
/// emitter is the entry's, so the body takes its registers where the set-up left off.
pub(super) fn grid_stride_entry(
    name: &str,
    buffers: usize,
    len: usize,
    label: &str,
    body: impl FnOnce(&mut Emitter, &[String], &str),
) -> String {
    // No float arithmetic is selected here: the math mode is never read.
    let mut e = Emitter::new(MathMode::Accurate);
    let params: Vec<String> = (0..buffers).map(|p| format!("{name}_param_{p}")).collect();
    let addresses = global_addresses(&mut e, &params);
    let Thread {
        ctaid,
        ntid,
        tid,
        nctaid,
    } = Thread::new(&mut e);
    let (index, stride, none) = (e.reg(Class::R), e.reg(Class::R), e.reg(Class::P));
    e.pre_line(format!("mad.lo.s32 {index}, {ctaid}, {ntid}, {tid}"));
    e.pre_line(format!("mul.lo.s32 {stride}, {nctaid}, {ntid}"));
    e.pre_line(format!("setp.ge.u32 {none}, {index}, {len}"));
    e.pre_line(format!("@{none} bra $L_done"));
    body(&mut e, &addresses, &index);
    let more = e.reg(Class::P);
    e.line(format!("add.s32 {index}, {index}, {stride}"));
    e.line(format!("setp.lt.u32 {more}, {index}, {len}"));
    e.line(format!("@{more} bra $L_{label}"));
    let mut s = String::new();
    entry_header(&mut s, name, &params, Threads::Any);
    e.declare(&mut s);
    s.push_str(&e.pre);
    let _ = writeln!(s, "$L_{label}:");
    s.push_str(&e.body);
    s.push_str("$L_done:\n\tret;\n}\n");
    s
}

/// Registers holding the global addresses of the buffers passed as `params`, loaded before the
/// loops.
pub(super) fn global_addresses(e: &mut Emitter, params: &[String]) -> Vec<String> {
    params
        .iter()
        .map(|param| {
            let r = e.reg(Class::Rd);
            e.pre_line(format!("ld.param.u64 {r}, [{param}]"));
            e.pre_line(format!("cvta.to.global.u64 {r}, {r}"));
            r
        })
        .collect()
}

/// The special registers every loop of an entry starts from.
pub(super) struct Thread {
    pub(super) ctaid: String,
    pub(super) ntid: String,
    pub(super) tid: String,
    pub(super) nctaid: String,
}

impl Thread {
    /// Registers holding them, read before the loops.
    pub(super) fn new(e: &mut Emitter) -> Thread {
        let (ctaid, ntid, tid, nctaid) = (
            e.reg(Class::R),
            e.reg(Class::R),
            e.reg(Class::R),
            e.reg(Class::R),
        );
        e.pre_line(format!("mov.u32 {ctaid}, %ctaid.x"));
        e.pre_line(format!("mov.u32 {ntid}, %ntid.x"));
        e.pre_line(format!("mov.u32 {tid}, %tid.x"));
        e.pre_line(format!("mov.u32 {nctaid}, %nctaid.x"));
        Thread {
            ctaid,
            ntid,
            tid,
            nctaid,
        }
    }
}

/// A loop's element index: this thread's first, and the grid's stride, both in elements, in
/// 64 bits (`wide`) where the length needs them.
pub(super) struct Index {
    pub(super) index: String,
    pub(super) stride: String,
    /// The PTX type of index arithmetic: `u32` or `u64`.
    pub(super) it: &'static str,
    pub(super) wide: bool,
}

impl Index {
    /// Registers set before the loop to the first index and the stride of `lanes`-element steps.
    fn new(e: &mut Emitter, thread: &Thread, lanes: usize, wide: bool) -> Index {
        let Thread {
            ctaid,
            ntid,
            tid,
            nctaid,
        } = thread;
        if wide {
            let (i, s, t) = (e.reg(Class::Rd), e.reg(Class::Rd), e.reg(Class::Rd));
            e.pre_line(format!("mul.wide.u32 {i}, {ctaid}, {ntid}"));
            e.pre_line(format!("cvt.u64.u32 {t}, {tid}"));
            e.pre_line(format!("add.s64 {i}, {i}, {t}"));
            e.pre_line(format!("mul.lo.s64 {i}, {i}, {lanes}"));
            e.pre_line(format!("mul.wide.u32 {s}, {nctaid}, {ntid}"));
            e.pre_line(format!("mul.lo.s64 {s}, {s}, {lanes}"));
            Index {
                index: i,
                stride: s,
                it: "u64",
                wide,
            }
        } else {
            let (i, s) = (e.reg(Class::R), e.reg(Class::R));
            e.pre_line(format!("mad.lo.s32 {i}, {ctaid}, {ntid}, {tid}"));
            e.pre_line(format!("mul.lo.s32 {i}, {i}, {lanes}"));
            e.pre_line(format!("mul.lo.s32 {s}, {nctaid}, {ntid}"));
            e.pre_line(format!("mul.lo.s32 {s}, {s}, {lanes}"));
            Index {
                index: i,
                stride: s,
                it: "u32",
                wide,
            }
        }
    }
}

/// Per-iteration addresses of element `index` (or its broadcast source), one per buffer,
/// computed where first needed.
pub(super) struct LoopAddresses<'a> {
    kernel: &'a Kernel,
    /// Buffer base addresses.
    bases: Vec<String>,
    index: &'a Index,
    addresses: HashMap<usize, String>,
    /// Per window buffer, the predicate of the step's elements lying in its window.
    inside: HashMap<usize, String>,
}

impl<'a> LoopAddresses<'a> {
    /// Addresses of `kernel`'s buffers, whose base addresses are in `bases`, at `index`.
    pub(super) fn new(kernel: &'a Kernel, bases: Vec<String>, index: &'a Index) -> Self {
        LoopAddresses {
            kernel,
            bases,
            index,
            addresses: HashMap::new(),
            inside: HashMap::new(),
        }
    }

    /// The predicate of the step's elements lying in `buffer`'s window, or `None` where it has
    /// no window.
    fn inside_of(&mut self, e: &mut Emitter, buffer: usize) -> Option<String> {
        if !matches!(
            self.kernel.sig.buffers[buffer].access,
            Access::Window { .. }
        ) {
            return None;
        }
        self.address(e, buffer);
        self.inside.get(&buffer).cloned()
    }

    fn address(&mut self, e: &mut Emitter, buffer: usize) -> String {
        if let Some(a) = self.addresses.get(&buffer) {
            return a.clone();
        }
        let Index {
            index, it, wide, ..
        } = self.index;
        let b = &self.kernel.sig.buffers[buffer];
        let size = b.dtype.size_bytes();
        if let Access::Gather { index: of, n, rows } = b.access {
            return self.gathered(e, buffer, of, (n, rows));
        }
        let idx_class = if *wide { Class::Rd } else { Class::R };
        let idx = match b.access {
            Access::Each => index.clone(),
            Access::Scalar => {
                let z = e.reg(idx_class);
                e.line(format!("mov.{it} {z}, 0"));
                z
            }
            Access::Outer(n) => {
                let q = e.reg(idx_class);
                e.line(format!("div.{it} {q}, {index}, {n}"));
                q
            }
            Access::Inner(n) => {
                let q = e.reg(idx_class);
                e.line(format!("rem.{it} {q}, {index}, {n}"));
                q
            }
            // `(i / row) * len + (i % row - start)`; the column's offset in the window, as
            // unsigned, is below `len` exactly inside it.
            Access::Window { row, start, len } => {
                let (q, c) = (e.reg(idx_class), e.reg(idx_class));
                let signed = if *wide { "s64" } else { "s32" };
                e.line(format!("rem.{it} {c}, {index}, {row}"));
                e.line(format!("sub.{signed} {c}, {c}, {start}"));
                let inside = e.reg(Class::P);
                e.line(format!("setp.lt.{it} {inside}, {c}, {len}"));
                self.inside.insert(buffer, inside);
                e.line(format!("div.{it} {q}, {index}, {row}"));
                e.line(format!("mad.lo.{signed} {q}, {q}, {len}, {c}"));
                q
            }
            Access::Gather { .. } => unreachable!("gathers return above"),
        };
        let offset = e.reg(Class::Rd);
        if *wide {
            e.line(format!("mul.lo.s64 {offset}, {idx}, {size}"));
        } else {
            e.line(format!("mul.wide.u32 {offset}, {idx}, {size}"));
        }
        let addr = e.reg(Class::Rd);
        e.line(format!("add.s64 {addr}, {}, {offset}", self.bases[buffer]));
        self.addresses.insert(buffer, addr.clone());
        addr
    }
}

impl LoopAddresses<'_> {
    /// The address of `buffer`'s element in the row a gather picks: the index at `i / n` in
    /// buffer `of` (i32 or i64), clamped to `0..rows`, times `n`, plus `i % n`; in 64 bits,
    /// since the table may be larger than the kernel's range.
    fn gathered(
        &mut self,
        e: &mut Emitter,
        buffer: usize,
        of: usize,
        (n, rows): (usize, usize),
    ) -> String {
        let at = self.address(e, of);
        let Index {
            index, it, wide, ..
        } = self.index;
        let row = e.reg(Class::Rd);
        if self.kernel.sig.buffers[of].dtype == DType::I64 {
            e.line(format!("ld.global.nc.s64 {row}, [{at}]"));
        } else {
            let narrow = e.reg(Class::R);
            e.line(format!("ld.global.nc.s32 {narrow}, [{at}]"));
            e.line(format!("cvt.s64.s32 {row}, {narrow}"));
        }
        e.line(format!("max.s64 {row}, {row}, 0"));
        e.line(format!("min.s64 {row}, {row}, {}", rows.saturating_sub(1)));
        let col = e.reg(Class::Rd);
        if *wide {
            e.line(format!("rem.{it} {col}, {index}, {n}"));
        } else {
            let c = e.reg(Class::R);
            e.line(format!("rem.{it} {c}, {index}, {n}"));
            e.line(format!("cvt.u64.u32 {col}, {c}"));
        }
        let offset = e.reg(Class::Rd);
        e.line(format!("mad.lo.s64 {offset}, {row}, {n}, {col}"));
        let size = self.kernel.sig.buffers[buffer].dtype.size_bytes();
        e.line(format!("mul.lo.s64 {offset}, {offset}, {size}"));
        let addr = e.reg(Class::Rd);
        e.line(format!("add.s64 {addr}, {}, {offset}", self.bases[buffer]));
        self.addresses.insert(buffer, addr.clone());
        addr
    }
}

/// `kernel`'s loop for each of `repeats` launches of it whose buffers are the parameters from
/// `first` on, its own after another's: a loop over them that reads each one's addresses from
/// the parameter space (8 bytes a parameter, in order) and sets up its loop.
fn render_repeats(
    e: &mut Emitter,
    kernel: &Kernel,
    (first, repeats): (&str, usize),
    thread: &Thread,
    tag: &str,
) -> Result<(String, String), PtxError> {
    let (base, done) = (e.reg(Class::Rd), e.reg(Class::R));
    e.pre_line(format!("mov.u64 {base}, {first}"));
    e.pre_line(format!("mov.u32 {done}, 0"));
    let buffers = kernel.sig.buffers.len();
    let params: Vec<String> = (0..buffers).map(|b| format!("{base}+{}", 8 * b)).collect();
    e.instance = Some(String::new());
    let rendered = render_loop(e, kernel, &params, thread, tag);
    let setup = e.instance.take().unwrap_or_default();
    let (comment, text) = rendered?;
    let more = e.reg(Class::P);
    let mut out = String::new();
    let _ = writeln!(out, "$L_repeat{tag}:");
    out.push_str(&setup);
    out.push_str(&text);
    let _ = writeln!(out, "\tadd.s64 {base}, {base}, {};", 8 * buffers);
    let _ = writeln!(out, "\tadd.u32 {done}, {done}, 1;");
    let _ = writeln!(out, "\tsetp.lt.u32 {more}, {done}, {repeats};");
    let _ = writeln!(out, "\t@{more} bra $L_repeat{tag};");
    Ok((
        format!("// {repeats} times, on buffers of their own:\n{comment}"),
        out,
    ))
}

/// One kernel's grid-stride loop (its setup goes to `e.pre`), on the buffers whose addresses
/// are the parameters `params`; `tag` keeps its labels apart from other loops of the entry.
/// Returns the comment describing it and the loop's text.
fn render_loop(
    e: &mut Emitter,
    kernel: &Kernel,
    params: &[String],
    thread: &Thread,
    tag: &str,
) -> Result<(String, String), PtxError> {
    let lanes = vector_width(kernel);
    let bases = global_addresses(e, params);
    let index = Index::new(e, thread, lanes, kernel.len > i32::MAX as usize);
    let mut addresses = LoopAddresses::new(kernel, bases, &index);
    emit_body(e, kernel, &mut addresses, lanes, &HashMap::new())?;
    Ok((
        describe(kernel, lanes),
        close_loop(e, kernel.len, &index, tag),
    ))
}

/// The body of one step of `lanes` elements at `addresses`' index, into `e.body`. A column
/// reduction's accumulate folds its lanes into `accumulators` (per partial buffer, its
/// reduction and a register a lane), which only a column kernel has
/// ([`super::columns`]).
pub(super) fn emit_body(
    e: &mut Emitter,
    kernel: &Kernel,
    addresses: &mut LoopAddresses,
    lanes: usize,
    accumulators: &HashMap<usize, (ReduceOp, Vec<String>)>,
) -> Result<(), PtxError> {
    let index = addresses.index;
    // Per instruction, its register in each lane.
    let mut values: Vec<Vec<String>> = Vec::with_capacity(kernel.body.len());
    for ins in &kernel.body {
        let out = match &ins.op {
            KOp::Load(buffer) => load(e, ins.dtype, *buffer, lanes, addresses),
            KOp::Const(s) => vec![e.constant(*s, ins.dtype); lanes],
            KOp::Index { stride, size } => (0..lanes)
                .map(|lane| element_index(e, index, lane, (*stride, *size), kernel.len))
                .collect(),
            KOp::Store(buffer) => {
                let v = values[ins.args[0]].clone();
                let a = addresses.address(e, *buffer);
                match addresses.inside.get(buffer).cloned() {
                    Some(inside) => {
                        let outside = e.label("outside");
                        e.line(format!("@!{inside} bra {outside}"));
                        store(e, ins.dtype, &a, &v);
                        e.body.push_str(&format!("{outside}:\n"));
                    }
                    None => store(e, ins.dtype, &a, &v),
                }
                v
            }
            KOp::Accumulate(buffer) => {
                let (op, acc) = accumulators.get(buffer).ok_or_else(|| {
                    PtxError::unsupported(kernel, "a column reduction outside a column kernel")
                })?;
                accumulate(e, (*op, ins.dtype), acc, &values[ins.args[0]]);
                acc.clone()
            }
            _ => (0..lanes)
                .map(|lane| {
                    let args: Vec<String> =
                        ins.args.iter().map(|&a| values[a][lane].clone()).collect();
                    emit_op(e, kernel, ins, &args)
                })
                .collect::<Result<_, _>>()?,
        };
        values.push(out);
    }
    Ok(())
}

/// The index `(i / stride) % size` of lane `lane`'s element `i`, in a 32-bit register.
fn element_index(
    e: &mut Emitter,
    index: &Index,
    lane: usize,
    (stride, size): (usize, usize),
    len: usize,
) -> String {
    let Index {
        index, it, wide, ..
    } = index;
    let class = if *wide { Class::Rd } else { Class::R };
    let r = e.reg(class);
    e.line(format!("add.{it} {r}, {index}, {lane}"));
    index_along(e, &r, it, (stride, size), len);
    if !*wide {
        return r;
    }
    let narrow = e.reg(Class::R);
    e.line(format!("cvt.u32.u64 {narrow}, {r}"));
    narrow
}

/// Element index `r` (of type `it`, among `len`) turned in place into its index along an
/// axis: `(r / stride) % size`, without the steps that change nothing.
pub(super) fn index_along(
    e: &mut Emitter,
    r: &str,
    it: &str,
    (stride, size): (usize, usize),
    len: usize,
) {
    if stride > 1 {
        e.line(format!("div.{it} {r}, {r}, {stride}"));
    }
    if stride.saturating_mul(size) < len {
        e.line(format!("rem.{it} {r}, {r}, {size}"));
    }
}

/// Each lane's register of `buffer`'s elements (of type `d`): a broadcast source's one
/// element is loaded once for all of them, a scalar's before the loop.
fn load(
    e: &mut Emitter,
    d: DType,
    buffer: usize,
    lanes: usize,
    addresses: &mut LoopAddresses,
) -> Vec<String> {
    let (t, _) = suffix(d);
    let b = &addresses.kernel.sig.buffers[buffer];
    let shared = matches!(b.access, Access::Scalar | Access::Outer(_));
    let count = if shared { 1 } else { lanes };
    let regs: Vec<String> = (0..count).map(|_| e.reg(reg_class(d))).collect();
    let space = if b.access == Access::Scalar {
        "ld.global"
    } else {
        "ld.global.nc"
    };
    let mut text = Vec::new();
    // A window's elements are loaded only inside it (outside, the address is not the
    // buffer's, and what is picked there is another operand's); its registers are zero
    // before, so none is read unwritten.
    let inside = addresses.inside_of(e, buffer);
    let guard = |line: String| match &inside {
        Some(p) => format!("@{p} {line}"),
        None => line,
    };
    if d == DType::Bool {
        for (lane, r) in regs.iter().enumerate() {
            let s = e.reg(Class::Rs);
            if inside.is_some() {
                text.push(format!("mov.u16 {s}, 0"));
            }
            text.push(guard(format!("{space}.u8 {s}, [ADDR+{lane}]")));
            text.push(format!("setp.ne.u16 {r}, {s}, 0"));
        }
    } else {
        if inside.is_some() {
            // Float registers take float literals; the rest, integers and raw halves, `0`.
            let zero = if d == DType::F32 {
                "0f00000000"
            } else if d == DType::F64 {
                "0d0000000000000000"
            } else {
                "0"
            };
            text.extend(regs.iter().map(|r| format!("mov.{t} {r}, {zero}")));
        }
        let loaded = if count == 1 {
            format!("{space}.{t} {}, [ADDR]", regs[0])
        } else {
            format!("{space}.v{count}.{t} {{{}}}, [ADDR]", regs.join(", "))
        };
        text.push(guard(loaded));
    }
    for line in text {
        if b.access == Access::Scalar {
            e.pre_line(line.replace("ADDR", &addresses.bases[buffer]));
        } else {
            let a = addresses.address(e, buffer);
            e.line(line.replace("ADDR", &a));
        }
    }
    if shared {
        vec![regs[0].clone(); lanes]
    } else {
        regs
    }
}

/// Stores the lanes' values `v` (of type `d`) at address `a`.
pub(super) fn store(e: &mut Emitter, d: DType, a: &str, v: &[String]) {
    let (t, _) = suffix(d);
    if d == DType::Bool {
        for (lane, p) in v.iter().enumerate() {
            let s = e.reg(Class::Rs);
            e.line(format!("selp.u16 {s}, 1, 0, {p}"));
            e.line(format!("st.global.u8 [{a}+{lane}], {s}"));
        }
    } else if let [x] = v {
        e.line(format!("st.global.{t} [{a}], {x}"));
    } else {
        e.line(format!(
            "st.global.v{}.{t} [{a}], {{{}}}",
            v.len(),
            v.join(", ")
        ));
    }
}

/// The comment describing a kernel's loop.
pub(super) fn describe(kernel: &Kernel, lanes: usize) -> String {
    let mut comment = String::new();
    let _ = writeln!(
        comment,
        "// {} elements, {lanes} per thread and step; buffers:",
        kernel.len
    );
    for (i, b) in kernel.sig.buffers.iter().enumerate() {
        let role = match b.role {
            Role::Input => "in",
            Role::Output => "out",
            Role::Partial(_) => "partials",
            Role::Scratch => "scratch",
        };
        let _ = writeln!(comment, "//   #{i} {role} {} {:?}", b.dtype, b.access);
    }
    comment
}

/// The loop around the body built so far (taken out of `e`), over `len` elements.
fn close_loop(e: &mut Emitter, len: usize, index: &Index, tag: &str) -> String {
    let Index {
        index, stride, it, ..
    } = index;
    let (done, more) = (e.reg(Class::P), e.reg(Class::P));
    let mut out = String::new();
    let _ = writeln!(out, "\tsetp.ge.{it} {done}, {index}, {len};");
    let _ = writeln!(out, "\t@{done} bra $L_done{tag};");
    let _ = writeln!(out, "$L_loop{tag}:");
    out.push_str(&std::mem::take(&mut e.body));
    let _ = writeln!(out, "\tadd.s{} {index}, {index}, {stride};", &it[1..]);
    let _ = writeln!(out, "\tsetp.lt.{it} {more}, {index}, {len};");
    let _ = writeln!(out, "\t@{more} bra $L_loop{tag};");
    let _ = writeln!(out, "$L_done{tag}:");
    out
}

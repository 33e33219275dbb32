//! Dot-product attention's forward pass as one kernel (flash attention's forward pass): the
//! output and the row log-sum-exps without the `T x S` scores in memory. A thread takes one
//! query row, its query and its output accumulator in registers; a block takes [`ROWS`] rows
//! of one batch and head, and visits the keys and values in tiles of [`TILE`] that its
//! threads load into shared memory together (each tile read from memory once per block, not
//! once per row). Per tile a thread computes its scores, then rescales what it accumulated
//! by the change of its running maximum and adds the tile's weighted values (the online
//! softmax), so each score is exponentiated once. A causal block stops at the keys its last
//! row sees. Exponentials and logarithms are the kernels' own (`kernel::math`'s expansions, or
//! fast math's approximations). Under a product precision the operands, scores, weights and
//! results are rounded where the plain-op spelling rounds them, but for the weights, rounded
//! relative to the running maximum rather than normalized (a rounding apart). Half operands
//! (queries, keys and values already of the precision's type) are loaded as they are and
//! widened. Products at bf16 over multiples of 16 features run on the tensor cores instead
//! (`attention_mma`). The gradient parts have kernels of their own (`attention_grad`).

use super::attention_mma::{self, on_tensor_cores, render_attention_mma};
use super::emit::{Class, Emitter};
use super::legalize::legalize;
use super::loops::{entry_header, global_addresses, Thread, Threads};
use super::select::{emit_op, half_to_f32};
use super::{MathMode, PtxError};
use crate::kernel::{Access, Buffer, KInstr, KOp, Kernel, KernelSig, Role};
use ferrax_ir::{Attention, AttentionPart, DType, Scalar, TensorType, UnaryOp, ValueId};
use std::fmt::Write;

/// Query rows (threads) of a block.
pub const ROWS: usize = 64;
/// Keys of a tile.
pub const TILE: usize = 8;
/// The most head features a thread keeps in registers (twice: query and accumulator).
pub const MAX_FEATURES: usize = 64;

/// The forward kernel of one attention: which of its results it writes, and its sizes.
#[derive(Clone, Debug, PartialEq)]
pub struct AttentionKernel {
    pub name: String,
    pub batch: usize,
    pub queries: usize,
    pub keys: usize,
    pub heads: usize,
    pub features: usize,
    pub causal: bool,
    /// The half type the products' operands and results are rounded to, if any.
    pub precision: Option<DType>,
    /// The dtype of queries, keys and values: f32, or the precision's half type.
    pub operands: DType,
    pub out: bool,
    pub lse: bool,
}

/// Whether a kernel computes part `a` on operands of types `args` (this module's for the
/// forward parts, `attention_grad`'s for the gradients): the softmax in f32 (products of f32
/// or of values rounded to bf16 or f16, half operands included), of up to [`MAX_FEATURES`] head features (a multiple of 4,
/// for 16-byte loads), non-empty, with 32-bit indices.
pub fn supports(a: &Attention, args: &[&TensorType]) -> bool {
    let Ok(d) = a.dims(args) else {
        return false;
    };
    let sizes = [d.batch, d.queries, d.keys, d.heads, d.features];
    matches!(a.precision, None | Some(DType::BF16 | DType::F16))
        && d.dtype == DType::F32
        && d.features <= MAX_FEATURES
        && d.features % 4 == 0
        && sizes.iter().all(|&n| n > 0)
        && args.iter().all(|t| t.numel() < i32::MAX as usize)
}

impl AttentionKernel {
    /// The kernel writing `out` and/or `lse` for attention `a` on `args`, if it supports them.
    pub fn plan(
        name: String,
        a: &Attention,
        args: &[&TensorType],
        (out, lse): (bool, bool),
    ) -> Option<AttentionKernel> {
        let forward = matches!(a.part, AttentionPart::Output | AttentionPart::LogSumExp);
        if !forward || !supports(a, args) || !(out || lse) {
            return None;
        }
        let d = a.dims(args).ok()?;
        Some(AttentionKernel {
            name,
            batch: d.batch,
            queries: d.queries,
            keys: d.keys,
            heads: d.heads,
            features: d.features,
            causal: a.causal,
            precision: a.precision,
            operands: d.operands,
            out,
            lse,
        })
    }

    /// Blocks of the launch: the query rows' blocks of each batch and head.
    pub fn blocks(&self) -> usize {
        self.queries.div_ceil(ROWS) * self.batch * self.heads
    }

    /// Threads of a block: a row each, or on the tensor cores a warp per 16 rows.
    pub fn threads(&self) -> usize {
        match on_tensor_cores(self.precision, self.features) {
            true => attention_mma::THREADS,
            false => ROWS,
        }
    }
}

/// `u(x)` of the f32 register `x` as kernels compute it in the emitter's math mode: the
/// kernel `y = u(x)` legalized (expanded where the mode does not approximate it) and its
/// arithmetic emitted in place.
pub(super) fn unary(e: &mut Emitter, u: UnaryOp, x: &str) -> Result<String, PtxError> {
    inline(e, &[(KOp::Unary(u), DType::F32)], x)
}

/// The f32 register `x` rounded to the half type `h` (and widened back), where there is one.
pub(super) fn rounded(e: &mut Emitter, h: Option<DType>, x: String) -> Result<String, PtxError> {
    match h {
        Some(h) => inline(
            e,
            &[(KOp::Convert(h), h), (KOp::Convert(DType::F32), DType::F32)],
            &x,
        ),
        None => Ok(x),
    }
}

/// The f32 register `x` through `ops` (each with its result type), ending in f32, as a kernel
/// computes them: legalized, and its arithmetic emitted in place.
fn inline(e: &mut Emitter, ops: &[(KOp, DType)], x: &str) -> Result<String, PtxError> {
    let buffer = |role, value| Buffer {
        role,
        dtype: DType::F32,
        access: Access::Each,
        value: ValueId(value),
    };
    let instr = |op, args: Vec<usize>, dtype| KInstr { op, args, dtype };
    let mut body = vec![instr(KOp::Load(0), vec![], DType::F32)];
    for (k, (op, dtype)) in ops.iter().enumerate() {
        body.push(instr(op.clone(), vec![k], *dtype));
    }
    body.push(instr(KOp::Store(1), vec![ops.len()], DType::F32));
    let kernel = Kernel {
        name: "attention_math".into(),
        len: 1,
        sig: KernelSig {
            buffers: vec![buffer(Role::Input, 0), buffer(Role::Output, 1)],
        },
        body,
        rows: None,
    };
    let legal = legalize(&kernel, e.mode)?;
    let mut regs: Vec<String> = Vec::with_capacity(legal.body.len());
    let mut result = None;
    for ins in &legal.body {
        let r = match &ins.op {
            KOp::Load(_) => x.to_string(),
            KOp::Const(s) => e.constant(*s, ins.dtype),
            KOp::Store(_) => {
                result = regs.get(ins.args[0]).cloned();
                String::new()
            }
            _ => {
                let args: Vec<String> = ins.args.iter().map(|&a| regs[a].clone()).collect();
                emit_op(e, &legal, ins, &args)?
            }
        };
        regs.push(r);
    }
    result.ok_or_else(|| PtxError::unsupported(&kernel, format!("{ops:?} stores nothing")))
}

/// An attention entry's start: its `count` parameters' names and global addresses, the
/// special registers, and the f32 constants 0 and -inf, set up before the loops.
pub(super) struct EntryStart {
    pub(super) params: Vec<String>,
    pub(super) addresses: Vec<String>,
    pub(super) thread: Thread,
    pub(super) zero: String,
    pub(super) minus_inf: String,
}

/// The [`EntryStart`] of entry `name` with `count` parameters.
pub(super) fn entry_start(e: &mut Emitter, name: &str, count: usize) -> EntryStart {
    let params: Vec<String> = (0..count).map(|p| format!("{name}_param_{p}")).collect();
    let addresses = global_addresses(e, &params);
    let thread = Thread::new(e);
    let zero = e.constant(Scalar::F32(0.0), DType::F32);
    let minus_inf = e.constant(Scalar::F32(f32::NEG_INFINITY), DType::F32);
    EntryStart {
        params,
        addresses,
        thread,
        zero,
        minus_inf,
    }
}

/// A block's place and its thread's row: the batch-and-head index `bh`, the block of rows
/// `rb`, the batch `b` and head `h`, the row, and whether the row exists (`active`), set up
/// before the loops; a block takes `ROWS` rows of one batch and head.
pub(super) struct BlockRow {
    pub(super) bh: String,
    pub(super) rb: String,
    pub(super) b: String,
    pub(super) h: String,
    pub(super) row: String,
    pub(super) active: String,
}

/// Which of a launch's blocks of rows carry the most work, to be sent out first: a causal
/// query block visits the keys up to its last row (the last rows most), a causal key block the
/// queries from its first row (the first rows most).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum HeavyRows {
    Last,
    First,
}

/// The batch-and-head index `bh` and the block of rows `rb` of block `ctaid` of a launch over
/// `pairs` batches and heads of `row_blocks` blocks of rows each, set up before the loops.
/// Blocks start in `ctaid` order, so each row block of every batch and head goes out in turn,
/// the heaviest first: the light ones then fill the launch's end, where a heavy block started
/// last would run on alone (about a sixth of a causal launch's time at GPT-2's size).
pub(super) fn block_place(
    e: &mut Emitter,
    ctaid: &str,
    (row_blocks, pairs): (usize, usize),
    heavy: HeavyRows,
) -> [String; 2] {
    let [bh, rb] = e.regs::<2>(Class::R);
    e.pre_line(format!("rem.u32 {bh}, {ctaid}, {pairs}"));
    e.pre_line(format!("div.u32 {rb}, {ctaid}, {pairs}"));
    match heavy {
        HeavyRows::First => {}
        HeavyRows::Last => {
            let last = e.reg(Class::R);
            e.pre_line(format!("mov.u32 {last}, {}", row_blocks - 1));
            e.pre_line(format!("sub.s32 {rb}, {last}, {rb}"));
        }
    }
    [bh, rb]
}

/// The [`BlockRow`] of thread `tid` of block `ctaid` over rows `0..len` of `batch` batches of
/// `heads` heads, blocks sent out as [`block_place`] says.
pub(super) fn block_row(
    e: &mut Emitter,
    (ctaid, tid): (&str, &str),
    len: usize,
    (batch, heads): (usize, usize),
    heavy: HeavyRows,
) -> BlockRow {
    let row_blocks = len.div_ceil(ROWS);
    let [bh, rb] = block_place(e, ctaid, (row_blocks, batch * heads), heavy);
    let [b, h, row] = e.regs::<3>(Class::R);
    e.pre_line(format!("div.u32 {b}, {bh}, {heads}"));
    e.pre_line(format!("rem.u32 {h}, {bh}, {heads}"));
    e.pre_line(format!("mad.lo.s32 {row}, {rb}, {ROWS}, {tid}"));
    let active = e.reg(Class::P);
    e.pre_line(format!("setp.lt.u32 {active}, {row}, {len}"));
    BlockRow {
        bh,
        rb,
        b,
        h,
        row,
        active,
    }
}

/// The block's row clamped to the last of `len` (what threads past it load), set up before
/// the loops.
pub(super) fn clamped_row(e: &mut Emitter, at: &BlockRow, len: usize) -> String {
    let r = e.reg(Class::R);
    e.pre_line(format!("min.u32 {r}, {}, {}", at.row, len - 1));
    r
}

/// The element where row `position` of the block's batch and head starts in a
/// `[B, len, heads, d]` operand, `((b * len + position) * heads + h) * d`, set up before the
/// loops.
pub(super) fn row_element(
    e: &mut Emitter,
    at: &BlockRow,
    position: &str,
    (len, heads, d): (usize, usize, usize),
) -> String {
    let r = e.reg(Class::R);
    e.pre_line(format!("mad.lo.s32 {r}, {}, {len}, {position}", at.b));
    e.pre_line(format!("mad.lo.s32 {r}, {r}, {heads}, {}", at.h));
    e.pre_line(format!("mul.lo.s32 {r}, {r}, {d}"));
    r
}

/// The f32 register `x` rounded to the half type `h` into a new 16-bit register.
pub(super) fn narrowed(e: &mut Emitter, h: DType, x: &str) -> String {
    let r = e.reg(Class::Rs);
    e.line(format!("cvt.rn.{}.f32 {r}, {x}", h.name()));
    r
}

/// Registers of one row of `d` features at element `at` of the buffer at `base` of dtype
/// `dtype` (f32, rounded to `precision` where given, or a half type, widened), loaded before
/// the loops.
pub(super) fn load_row(
    e: &mut Emitter,
    (base, dtype): (&str, DType),
    at: &str,
    d: usize,
    precision: Option<DType>,
) -> Result<Vec<String>, PtxError> {
    let address = e.reg(Class::Rd);
    e.pre_line(format!(
        "mul.wide.u32 {address}, {at}, {}",
        dtype.size_bytes()
    ));
    e.pre_line(format!("add.s64 {address}, {base}, {address}"));
    let regs: Vec<String> = (0..d).map(|_| e.reg(Class::F)).collect();
    if dtype != DType::F32 {
        let (h, w) = (e.reg(Class::Rs), e.reg(Class::R));
        for (i, x) in regs.iter().enumerate() {
            e.pre_line(format!("ld.global.nc.b16 {h}, [{address}+{}]", 2 * i));
            for line in half_to_f32(dtype, &h, &w, x) {
                e.pre_line(line);
            }
        }
        return Ok(regs);
    }
    for (i, group) in regs.chunks(4).enumerate() {
        e.pre_line(format!(
            "ld.global.nc.v4.f32 {{{}}}, [{address}+{}]",
            group.join(", "),
            16 * i
        ));
    }
    round_in_setup(e, &regs, precision)?;
    Ok(regs)
}

/// `regs` rounded to `precision` in place, where given, by instructions of the set-up.
pub(super) fn round_in_setup(
    e: &mut Emitter,
    regs: &[String],
    precision: Option<DType>,
) -> Result<(), PtxError> {
    if precision.is_none() {
        return Ok(());
    }
    let body = std::mem::take(&mut e.body);
    for r in regs {
        let x = rounded(e, precision, r.clone())?;
        e.line(format!("mov.f32 {r}, {x}"));
    }
    let rounding = std::mem::replace(&mut e.body, body);
    e.pre.push_str(&rounding);
    Ok(())
}

/// Where a tile loop reads its two operands' rows: their global addresses and dtypes, the
/// element of the batch and head's first row (`base`), a row's stride in elements, the tile's
/// first row (`start`, a register) and the rows there are (`len`), and the shared tiles
/// (`shared`: the first operand's `TILE x d`, then the second's).
pub(super) struct Tiles<'a> {
    pub(super) sources: [(&'a str, DType); 2],
    pub(super) base: &'a str,
    pub(super) row: usize,
    pub(super) start: &'a str,
    pub(super) len: usize,
    pub(super) shared: &'a str,
}

/// A tile loop's loads: `TILE` rows of `d` features of both operands, f32 ones rounded to
/// `precision` and half ones widened, into shared memory, zeros for rows past the end; every
/// thread of the block takes part.
/// Returns the label after the loads (the caller adds what else it loads, then a barrier).
pub(super) fn load_tiles(
    e: &mut Emitter,
    t: &Tiles<'_>,
    (d, tid, zero): (usize, &str, &str),
    precision: Option<DType>,
) -> Result<String, PtxError> {
    let [i, j, f, row, at, slot] = e.regs::<6>(Class::R);
    let inside = e.reg(Class::P);
    let (load_loop, loaded) = (e.label("load"), e.label("loaded"));
    let tile_bytes = TILE * d * 4;
    e.line(format!("mov.u32 {i}, {tid}"));
    e.body.push_str(&format!("{load_loop}:\n"));
    e.line(format!("setp.ge.u32 {inside}, {i}, {}", TILE * d));
    e.line(format!("@{inside} bra {loaded}"));
    e.line(format!("div.u32 {j}, {i}, {d}"));
    e.line(format!("rem.u32 {f}, {i}, {d}"));
    e.line(format!("add.u32 {row}, {}, {j}", t.start));
    e.line(format!("setp.lt.u32 {inside}, {row}, {}", t.len));
    e.line(format!("mad.lo.s32 {at}, {row}, {}, {}", t.row, t.base));
    e.line(format!("add.s32 {at}, {at}, {f}"));
    let mut values = Vec::with_capacity(2);
    for (source, dtype) in t.sources {
        let address = e.reg(Class::Rd);
        let x = e.reg(Class::F);
        e.line(format!(
            "mul.wide.u32 {address}, {at}, {}",
            dtype.size_bytes()
        ));
        e.line(format!("add.s64 {address}, {source}, {address}"));
        if dtype == DType::F32 {
            e.line(format!("mov.f32 {x}, {zero}"));
            e.line(format!("@{inside} ld.global.nc.f32 {x}, [{address}]"));
            values.push(rounded(e, precision, x)?);
        } else {
            let (h, w) = (e.reg(Class::Rs), e.reg(Class::R));
            e.line(format!("mov.b16 {h}, 0"));
            e.line(format!("@{inside} ld.global.nc.b16 {h}, [{address}]"));
            for line in half_to_f32(dtype, &h, &w, &x) {
                e.line(line);
            }
            values.push(x);
        }
    }
    let [x1, x2] = [&values[0], &values[1]];
    e.line(format!("shl.b32 {slot}, {i}, 2"));
    e.line(format!("add.u32 {slot}, {slot}, {}", t.shared));
    e.line(format!("st.shared.f32 [{slot}], {x1}"));
    e.line(format!("st.shared.f32 [{slot}+{tile_bytes}], {x2}"));
    e.line(format!("add.u32 {i}, {i}, {ROWS}"));
    e.line(format!("bra {load_loop}"));
    Ok(loaded)
}

/// The kernel's `.entry`: parameters q, k, v, then the output and the log-sum-exps (those it
/// writes).
pub fn render_attention(k: &AttentionKernel, mode: MathMode) -> Result<String, PtxError> {
    if on_tensor_cores(k.precision, k.features) {
        return render_attention_mma(k, mode);
    }
    let mut e = Emitter::new(mode);
    let name = &k.name;
    let (t_len, s_len, heads, d) = (k.queries, k.keys, k.heads, k.features);
    let outputs = usize::from(k.out) + usize::from(k.lse);
    let EntryStart {
        params,
        addresses: a,
        thread: Thread { ctaid, tid, .. },
        zero,
        minus_inf,
    } = entry_start(&mut e, name, 3 + outputs);

    // The block's batch and head, and this thread's row.
    let heavy = match k.causal {
        true => HeavyRows::Last,
        false => HeavyRows::First,
    };
    let at = block_row(&mut e, (&ctaid, &tid), t_len, (k.batch, heads), heavy);
    let BlockRow {
        bh,
        rb: tb,
        b,
        h,
        row,
        active,
    } = &at;
    // Keys the block visits: all, or up to its last row's (causal).
    let end = e.reg(Class::R);
    if k.causal {
        // min((tb + 1) * ROWS, T, S): the last row's keys.
        let last = t_len.min(s_len);
        e.pre_line(format!("mad.lo.s32 {end}, {tb}, {ROWS}, {ROWS}"));
        e.pre_line(format!("min.u32 {end}, {end}, {last}"));
    } else {
        e.pre_line(format!("mov.u32 {end}, {s_len}"));
    }

    // This row's query (threads past the last row load the last's), rounded to the precision.
    let clamped = clamped_row(&mut e, &at, t_len);
    let q_at = row_element(&mut e, &at, &clamped, (t_len, heads, d));
    let q = load_row(&mut e, (&a[0], k.operands), &q_at, d, k.precision)?;
    let acc: Vec<String> = (0..d).map(|_| e.reg(Class::F)).collect();
    for r in &acc {
        e.pre_line(format!("mov.f32 {r}, {zero}"));
    }
    let [max, total] = e.regs::<2>(Class::F);
    e.pre_line(format!("mov.f32 {max}, {minus_inf}"));
    e.pre_line(format!("mov.f32 {total}, {zero}"));

    // The shared tiles: keys, then values, [TILE, d] each.
    let tile_bytes = TILE * d * 4;
    let [keys_base, values_base, start] = e.regs::<3>(Class::R);
    e.pre_line(format!("mov.u32 {keys_base}, {name}_tiles"));
    e.pre_line(format!("add.u32 {values_base}, {keys_base}, {tile_bytes}"));
    e.pre_line(format!("mov.u32 {start}, 0"));
    // The first key of the batch and head: element (b * S * heads + h) * d; a key's row is
    // `heads * d` elements on.
    let kv_base = e.reg(Class::R);
    e.pre_line(format!("mul.lo.s32 {kv_base}, {b}, {}", s_len * heads));
    e.pre_line(format!("add.s32 {kv_base}, {kv_base}, {h}"));
    e.pre_line(format!("mul.lo.s32 {kv_base}, {kv_base}, {d}"));

    // The tile loop: load, then fold.
    let tile_loop = e.label("tile");
    e.body.push_str(&format!("{tile_loop}:\n"));
    e.line("bar.sync 0".into());
    let tiles = Tiles {
        sources: [(&a[1], k.operands), (&a[2], k.operands)],
        base: &kv_base,
        row: heads * d,
        start: &start,
        len: s_len,
        shared: &keys_base,
    };
    let loaded = load_tiles(&mut e, &tiles, (d, &tid, &zero), k.precision)?;
    e.body.push_str(&format!("{loaded}:\n"));
    e.line("bar.sync 0".into());

    // Scores of the tile's keys, masked to -inf where a key is past the end or (causal)
    // after the row.
    let mut scores = Vec::with_capacity(TILE);
    for jj in 0..TILE {
        let s = e.reg(Class::F);
        e.line(format!("mov.f32 {s}, {zero}"));
        for (g, group) in q.chunks(4).enumerate() {
            let ks = e.regs::<4>(Class::F);
            e.line(format!(
                "ld.shared.v4.f32 {{{}}}, [{keys_base}+{}]",
                ks.join(", "),
                (jj * d + 4 * g) * 4
            ));
            for (qr, kr) in group.iter().zip(&ks) {
                e.line(format!("fma.rn.f32 {s}, {qr}, {kr}, {s}"));
            }
        }
        let (kj, valid) = (e.reg(Class::R), e.reg(Class::P));
        e.line(format!("add.u32 {kj}, {start}, {jj}"));
        e.line(format!("setp.lt.u32 {valid}, {kj}, {s_len}"));
        if k.causal {
            let seen = e.reg(Class::P);
            e.line(format!("setp.le.u32 {seen}, {kj}, {row}"));
            e.line(format!("and.pred {valid}, {valid}, {seen}"));
        }
        let s = rounded(&mut e, k.precision, s)?;
        e.line(format!("selp.f32 {s}, {s}, {minus_inf}, {valid}"));
        scores.push(s);
    }
    // The running maximum, and the rescaling of what came before (`exp(-inf)`: nothing yet);
    // a maximum still -inf (no key seen) shifts by 0 so no -inf - -inf arises.
    let mut tile_max = scores[0].clone();
    for s in &scores[1..] {
        tile_max = e.min_max(&tile_max, s, DType::F32, true);
    }
    let new_max = e.min_max(&max, &tile_max, DType::F32, true);
    let (unseen, shift) = (e.reg(Class::P), e.reg(Class::F));
    e.line(format!("setp.eq.f32 {unseen}, {new_max}, {minus_inf}"));
    e.line(format!("selp.f32 {shift}, {zero}, {new_max}, {unseen}"));
    let old = e.reg(Class::F);
    e.line(format!("sub.rn.f32 {old}, {max}, {shift}"));
    let scale = unary(&mut e, UnaryOp::Exp, &old)?;
    e.line(format!("mul.rn.f32 {total}, {total}, {scale}"));
    for r in &acc {
        e.line(format!("mul.rn.f32 {r}, {r}, {scale}"));
    }
    for (jj, s) in scores.iter().enumerate() {
        let shifted = e.reg(Class::F);
        e.line(format!("sub.rn.f32 {shifted}, {s}, {shift}"));
        let p = unary(&mut e, UnaryOp::Exp, &shifted)?;
        e.line(format!("add.rn.f32 {total}, {total}, {p}"));
        // The weight as the mixing product reads it (relative to the running maximum: the
        // normalized weight's rounding up to that scaling).
        let p = rounded(&mut e, k.precision, p)?;
        for (g, group) in acc.chunks(4).enumerate() {
            let vs = e.regs::<4>(Class::F);
            e.line(format!(
                "ld.shared.v4.f32 {{{}}}, [{values_base}+{}]",
                vs.join(", "),
                (jj * d + 4 * g) * 4
            ));
            for (ar, vr) in group.iter().zip(&vs) {
                e.line(format!("fma.rn.f32 {ar}, {p}, {vr}, {ar}"));
            }
        }
    }
    e.line(format!("mov.f32 {max}, {new_max}"));
    let more = e.reg(Class::P);
    e.line(format!("add.u32 {start}, {start}, {TILE}"));
    e.line(format!("setp.lt.u32 {more}, {start}, {end}"));
    e.line(format!("@{more} bra {tile_loop}"));

    // Results of the rows inside: the accumulator over the sum, and max + log(sum).
    let done = e.label("done");
    let outside = e.reg(Class::P);
    e.line(format!("not.pred {outside}, {active}"));
    e.line(format!("@{outside} bra {done}"));
    let mut param = 3;
    if k.out {
        let address = e.reg(Class::Rd);
        let out_at = e.reg(Class::R);
        e.line(format!("mad.lo.s32 {out_at}, {b}, {t_len}, {row}"));
        e.line(format!("mad.lo.s32 {out_at}, {out_at}, {heads}, {h}"));
        e.line(format!("mul.lo.s32 {out_at}, {out_at}, {d}"));
        e.line(format!("mul.wide.u32 {address}, {out_at}, 4"));
        e.line(format!("add.s64 {address}, {}, {address}", a[param]));
        for (g, group) in acc.chunks(4).enumerate() {
            let rs = e.regs::<4>(Class::F);
            for (r, ar) in rs.iter().zip(group) {
                e.line(format!("div.rn.f32 {r}, {ar}, {total}"));
                if k.precision.is_some() {
                    let x = rounded(&mut e, k.precision, r.clone())?;
                    e.line(format!("mov.f32 {r}, {x}"));
                }
            }
            e.line(format!(
                "st.global.v4.f32 [{address}+{}], {{{}}}",
                16 * g,
                rs.join(", ")
            ));
        }
        param += 1;
    }
    if k.lse {
        let log = unary(&mut e, UnaryOp::Log, &total)?;
        let lse = e.reg(Class::F);
        e.line(format!("add.rn.f32 {lse}, {max}, {log}"));
        let (lse_at, address) = (e.reg(Class::R), e.reg(Class::Rd));
        e.line(format!("mad.lo.s32 {lse_at}, {bh}, {t_len}, {row}"));
        e.line(format!("mul.wide.u32 {address}, {lse_at}, 4"));
        e.line(format!("add.s64 {address}, {}, {address}", a[param]));
        e.line(format!("st.global.f32 [{address}], {lse}"));
    }
    e.body.push_str(&format!("{done}:\n"));

    let mut s = String::new();
    let _ = writeln!(
        s,
        "// attention forward: [{}, {t_len}, {heads}, {d}] over {s_len} keys, causal {}, \
         products {:?}, out {}, lse {}",
        k.batch, k.causal, k.precision, k.out, k.lse
    );
    entry_header(&mut s, name, &params, Threads::AtMost(ROWS));
    e.declare(&mut s);
    let _ = writeln!(
        s,
        "\t.shared .align 16 .b8 {name}_tiles[{}];",
        2 * tile_bytes
    );
    s.push_str(&e.pre);
    s.push_str(&e.body);
    s.push_str("\tret;\n}\n");
    Ok(s)
}

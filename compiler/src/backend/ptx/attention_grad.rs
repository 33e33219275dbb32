//! Dot-product attention's gradient parts as kernels (flash attention's backward pass): each
//! recomputes the softmax weights from the scores and the row log-sum-exps instead of reading
//! them, so nothing of `T x S` is in memory. The queries' gradient takes a thread per query row
//! and visits the keys and values in shared-memory tiles, as the forward kernel does; the keys'
//! and the values' gradients take a thread per key row and visit the queries and the output's
//! cotangent in tiles, with each tile's log-sum-exps (and for the keys' gradient each query's
//! `rowsum(d_out * out) - d_lse`, computed as the tile loads). A causal block of queries stops
//! at its last row's keys, one of keys starts at its first key's query. Products round their
//! operands and results to the attention's precision where it has one, as its plain-op
//! spelling does. Products at bf16 over multiples of 16 features run on the tensor cores
//! instead (`attention_grad_mma`).

use super::attention::{
    block_row, clamped_row, entry_start, load_row, load_tiles, narrowed, round_in_setup, rounded,
    row_element, supports, unary, BlockRow, EntryStart, HeavyRows, Tiles, ROWS, TILE,
};
use super::attention_grad_mma::render_attention_grad_mma;
use super::attention_mma::{self, on_tensor_cores};
use super::emit::{Class, Emitter};
use super::loops::{entry_header, Thread, Threads};
use super::{MathMode, PtxError};
use ferrax_ir::{Attention, AttentionPart, DType, TensorType, UnaryOp};
use std::fmt::Write;

/// The kernel of one gradient part of an attention.
#[derive(Clone, Debug, PartialEq)]
pub struct AttentionGradKernel {
    pub name: String,
    pub batch: usize,
    pub queries: usize,
    pub keys: usize,
    pub heads: usize,
    pub features: usize,
    pub causal: bool,
    pub precision: Option<DType>,
    /// The dtype of queries, keys and values, and of the gradient: f32, or the precision's
    /// half type.
    pub operands: DType,
    /// [`AttentionPart::QueryGrad`], [`AttentionPart::KeyGrad`] or [`AttentionPart::ValueGrad`].
    pub part: AttentionPart,
    /// The keys' gradient kernel writes the values' gradient too (after it), from the same
    /// weights: on the tensor cores ([`AttentionGradKernel::pairs`]).
    pub values_too: bool,
}

impl AttentionGradKernel {
    /// The kernel of gradient part `a` on `args`, if one computes it.
    pub fn plan(name: String, a: &Attention, args: &[&TensorType]) -> Option<AttentionGradKernel> {
        let grad = matches!(
            a.part,
            AttentionPart::QueryGrad | AttentionPart::KeyGrad | AttentionPart::ValueGrad
        );
        if !grad || !supports(a, args) {
            return None;
        }
        let d = a.dims(args).ok()?;
        Some(AttentionGradKernel {
            name,
            batch: d.batch,
            queries: d.queries,
            keys: d.keys,
            heads: d.heads,
            features: d.features,
            causal: a.causal,
            precision: a.precision,
            operands: d.operands,
            part: a.part,
            values_too: false,
        })
    }

    /// Whether this part's kernel can compute the keys' and the values' gradients together
    /// (`values_too`): one of those, on the tensor cores.
    pub fn pairs(&self) -> bool {
        let keys = matches!(self.part, AttentionPart::KeyGrad | AttentionPart::ValueGrad);
        keys && on_tensor_cores(self.precision, self.features)
    }

    /// Blocks of the launch: the rows' blocks (queries' or keys') of each batch and head.
    pub fn blocks(&self) -> usize {
        let rows = match self.part {
            AttentionPart::QueryGrad => self.queries,
            AttentionPart::KeyGrad
            | AttentionPart::ValueGrad
            | AttentionPart::Output
            | AttentionPart::LogSumExp => self.keys,
        };
        rows.div_ceil(ROWS) * self.batch * self.heads
    }

    /// Threads of a block: a row each, or on the tensor cores a warp per 16 rows.
    pub fn threads(&self) -> usize {
        match on_tensor_cores(self.precision, self.features) {
            true => attention_mma::THREADS,
            false => ROWS,
        }
    }
}

/// `sum(a[f] * tile[f])` over the row of shared memory at `base`.
fn dot_shared(e: &mut Emitter, a: &[String], base: &str, zero: &str) -> String {
    let s = e.reg(Class::F);
    e.line(format!("mov.f32 {s}, {zero}"));
    for (g, group) in a.chunks(4).enumerate() {
        let t = e.regs::<4>(Class::F);
        e.line(format!(
            "ld.shared.v4.f32 {{{}}}, [{base}+{}]",
            t.join(", "),
            16 * g
        ));
        for (x, y) in group.iter().zip(&t) {
            e.line(format!("fma.rn.f32 {s}, {x}, {y}, {s}"));
        }
    }
    s
}

/// `sum(own[f] * tile[f])` of two rows of shared memory: this thread's at `own`, the tile's
/// at `base`.
fn dot_rows(e: &mut Emitter, d: usize, own: &str, base: &str, zero: &str) -> String {
    let s = e.reg(Class::F);
    e.line(format!("mov.f32 {s}, {zero}"));
    for g in 0..d / 4 {
        let (x, t) = (e.regs::<4>(Class::F), e.regs::<4>(Class::F));
        e.line(format!(
            "ld.shared.v4.f32 {{{}}}, [{own}+{}]",
            x.join(", "),
            16 * g
        ));
        e.line(format!(
            "ld.shared.v4.f32 {{{}}}, [{base}+{}]",
            t.join(", "),
            16 * g
        ));
        for (a, b) in x.iter().zip(&t) {
            e.line(format!("fma.rn.f32 {s}, {a}, {b}, {s}"));
        }
    }
    s
}

/// `acc[f] += w * tile[f]` over the row of shared memory at `base`.
fn add_scaled_shared(e: &mut Emitter, acc: &[String], w: &str, base: &str) {
    for (g, group) in acc.chunks(4).enumerate() {
        let t = e.regs::<4>(Class::F);
        e.line(format!(
            "ld.shared.v4.f32 {{{}}}, [{base}+{}]",
            t.join(", "),
            16 * g
        ));
        for (a, y) in group.iter().zip(&t) {
            e.line(format!("fma.rn.f32 {a}, {w}, {y}, {a}"));
        }
    }
}

/// The rows a block of gradient kernel `k` visits, set up before the loops: the first
/// (`start`) and the end, keys up to the block's last query (causal) for a block of queries
/// (`by_query`), for one of keys queries from its first key on (causal); and the first element
/// of the visited operands' batch and head (a row is `heads * d` further), for a block's
/// place `rb` among the blocks of batch `b` and head `h`.
pub(super) fn visited_rows(
    e: &mut Emitter,
    k: &AttentionGradKernel,
    by_query: bool,
    (rb, b, h): (&str, &str, &str),
) -> [String; 3] {
    let (t_len, s_len, heads, d) = (k.queries, k.keys, k.heads, k.features);
    let other_len = if by_query { s_len } else { t_len };
    let [start, end] = e.regs::<2>(Class::R);
    match (by_query, k.causal) {
        (true, true) => {
            e.pre_line(format!("mov.u32 {start}, 0"));
            e.pre_line(format!("mad.lo.s32 {end}, {rb}, {ROWS}, {ROWS}"));
            e.pre_line(format!("min.u32 {end}, {end}, {}", t_len.min(s_len)));
        }
        (false, true) => {
            e.pre_line(format!("mul.lo.s32 {start}, {rb}, {ROWS}"));
            e.pre_line(format!("mov.u32 {end}, {t_len}"));
        }
        (_, false) => {
            e.pre_line(format!("mov.u32 {start}, 0"));
            e.pre_line(format!("mov.u32 {end}, {other_len}"));
        }
    }
    let other_base = e.reg(Class::R);
    e.pre_line(format!(
        "mul.lo.s32 {other_base}, {b}, {}",
        other_len * heads
    ));
    e.pre_line(format!("add.s32 {other_base}, {other_base}, {h}"));
    e.pre_line(format!("mul.lo.s32 {other_base}, {other_base}, {d}"));
    [start, end, other_base]
}

/// Where a key block's tile loop finds its queries' rows: the log-sum-exps, their cotangents,
/// the output and its cotangent (global addresses, in that order), the first element of the
/// batch and head's queries (`base`), the tile's first query (`start`), the thread, and the
/// shared rows the results go to.
pub(super) struct QueryRows<'a> {
    pub(super) sources: [&'a str; 4],
    pub(super) base: &'a str,
    pub(super) bh: &'a str,
    pub(super) start: &'a str,
    pub(super) tid: &'a str,
    pub(super) shared: &'a str,
    pub(super) zero: &'a str,
}

/// The first `count` threads of a key block: their query's log-sum-exp, and (with `delta`)
/// `rowsum(d_out * out) - d_lse` (zero without), into the shared rows (the deltas `4 * count`
/// bytes on); zeros past the last query.
pub(super) fn load_query_rows(
    e: &mut Emitter,
    q: &QueryRows<'_>,
    (count, t_len, heads, d): (usize, usize, usize, usize),
    delta: bool,
) {
    let [lse_in, dlse_in, o_in, do_in] = q.sources;
    let (zero, tid) = (q.zero, q.tid);
    let (rows_done, query) = (e.label("rows"), e.reg(Class::R));
    let (skip, inside) = (e.reg(Class::P), e.reg(Class::P));
    e.line(format!("setp.ge.u32 {skip}, {tid}, {count}"));
    e.line(format!("@{skip} bra {rows_done}"));
    e.line(format!("add.u32 {query}, {}, {tid}", q.start));
    e.line(format!("setp.lt.u32 {inside}, {query}, {t_len}"));
    e.line(format!("min.u32 {query}, {query}, {}", t_len - 1));
    let [lse, sum] = e.regs::<2>(Class::F);
    let (slot_at, address) = (e.reg(Class::R), e.reg(Class::Rd));
    e.line(format!("mad.lo.s32 {slot_at}, {}, {t_len}, {query}", q.bh));
    e.line(format!("mul.wide.u32 {address}, {slot_at}, 4"));
    let at = e.reg(Class::Rd);
    e.line(format!("add.s64 {at}, {lse_in}, {address}"));
    e.line(format!("ld.global.nc.f32 {lse}, [{at}]"));
    e.line(format!("selp.f32 {lse}, {lse}, {zero}, {inside}"));
    e.line(format!("mov.f32 {sum}, {zero}"));
    if delta {
        let dlse = e.reg(Class::F);
        e.line(format!("add.s64 {at}, {dlse_in}, {address}"));
        e.line(format!("ld.global.nc.f32 {dlse}, [{at}]"));
        // rowsum(d_out * out) over the query's row, d_out unrounded.
        let row_at = e.reg(Class::R);
        e.line(format!(
            "mad.lo.s32 {row_at}, {query}, {}, {}",
            heads * d,
            q.base
        ));
        let (o_address, g_address) = (e.reg(Class::Rd), e.reg(Class::Rd));
        e.line(format!("mul.wide.u32 {o_address}, {row_at}, 4"));
        e.line(format!("add.s64 {g_address}, {do_in}, {o_address}"));
        e.line(format!("add.s64 {o_address}, {o_in}, {o_address}"));
        for g in 0..d / 4 {
            let (ov, gv) = (e.regs::<4>(Class::F), e.regs::<4>(Class::F));
            e.line(format!(
                "ld.global.nc.v4.f32 {{{}}}, [{o_address}+{}]",
                ov.join(", "),
                16 * g
            ));
            e.line(format!(
                "ld.global.nc.v4.f32 {{{}}}, [{g_address}+{}]",
                gv.join(", "),
                16 * g
            ));
            for (x, y) in ov.iter().zip(&gv) {
                e.line(format!("fma.rn.f32 {sum}, {x}, {y}, {sum}"));
            }
        }
        e.line(format!("sub.rn.f32 {sum}, {sum}, {dlse}"));
        e.line(format!("selp.f32 {sum}, {sum}, {zero}, {inside}"));
    }
    let slot = e.reg(Class::R);
    e.line(format!("mad.lo.s32 {slot}, {tid}, 4, {}", q.shared));
    e.line(format!("st.shared.f32 [{slot}], {lse}"));
    e.line(format!("st.shared.f32 [{slot}+{}], {sum}", 4 * count));
    e.body.push_str(&format!("{rows_done}:\n"));
}

/// The kernel's `.entry`: parameters q, k, v, out, lse, d_out, d_lse, then the gradient.
pub fn render_attention_grad(k: &AttentionGradKernel, mode: MathMode) -> Result<String, PtxError> {
    if on_tensor_cores(k.precision, k.features) {
        return render_attention_grad_mma(k, mode);
    }
    if k.values_too {
        return Err(PtxError::Unsupported {
            kernel: k.name.clone(),
            what: "the keys' and values' gradients in one kernel off the tensor cores".into(),
        });
    }
    let mut e = Emitter::new(mode);
    let name = &k.name;
    let (t_len, s_len, heads, d, h16) = (k.queries, k.keys, k.heads, k.features, k.precision);
    let by_query = k.part == AttentionPart::QueryGrad;
    let EntryStart {
        params,
        addresses: a,
        thread: Thread { ctaid, tid, .. },
        zero,
        minus_inf,
    } = entry_start(&mut e, name, 8);
    let (q_in, k_in, v_in, o_in, lse_in, do_in, dlse_in, result) =
        (&a[0], &a[1], &a[2], &a[3], &a[4], &a[5], &a[6], &a[7]);

    // The block's batch and head, and this thread's row (a query's or a key's).
    let (own_len, other_len) = if by_query {
        (t_len, s_len)
    } else {
        (s_len, t_len)
    };
    let heavy = match (by_query, k.causal) {
        (true, true) => HeavyRows::Last,
        (false, true) | (_, false) => HeavyRows::First,
    };
    let at = block_row(&mut e, (&ctaid, &tid), own_len, (k.batch, heads), heavy);
    let BlockRow {
        bh,
        rb,
        b,
        h,
        row: own,
        active,
    } = &at;
    let clamped = clamped_row(&mut e, &at, own_len);
    let own_at = row_element(&mut e, &at, &clamped, (own_len, heads, d));
    let [start, end, other_base] = visited_rows(&mut e, k, by_query, (rb, b, h));

    // This thread's rows. A query: q, d_out (raw for delta, then rounded), its log-sum-exp
    // and delta = rowsum(d_out * out) - d_lse. A key: k, and v for the keys' gradient.
    let lse_slot = e.reg(Class::R);
    let (mine, second, lse_own, delta_own) = if by_query {
        let q = load_row(&mut e, (q_in, k.operands), &own_at, d, h16)?;
        let d_out = load_row(&mut e, (do_in, DType::F32), &own_at, d, None)?;
        let out = load_row(&mut e, (o_in, DType::F32), &own_at, d, None)?;
        let delta = e.reg(Class::F);
        e.pre_line(format!("mov.f32 {delta}, {zero}"));
        for (x, y) in d_out.iter().zip(&out) {
            e.pre_line(format!("fma.rn.f32 {delta}, {x}, {y}, {delta}"));
        }
        e.pre_line(format!("mad.lo.s32 {lse_slot}, {bh}, {t_len}, {clamped}"));
        let [lse, dlse] = e.regs::<2>(Class::F);
        let address = e.reg(Class::Rd);
        e.pre_line(format!("mul.wide.u32 {address}, {lse_slot}, 4"));
        let at = e.reg(Class::Rd);
        e.pre_line(format!("add.s64 {at}, {lse_in}, {address}"));
        e.pre_line(format!("ld.global.nc.f32 {lse}, [{at}]"));
        e.pre_line(format!("add.s64 {at}, {dlse_in}, {address}"));
        e.pre_line(format!("ld.global.nc.f32 {dlse}, [{at}]"));
        e.pre_line(format!("sub.rn.f32 {delta}, {delta}, {dlse}"));
        round_in_setup(&mut e, &d_out, h16)?;
        (q, Some(d_out), Some(lse), Some(delta))
    } else {
        let key = load_row(&mut e, (k_in, k.operands), &own_at, d, h16)?;
        let value = match k.part {
            AttentionPart::KeyGrad => Some(load_row(&mut e, (v_in, k.operands), &own_at, d, h16)?),
            AttentionPart::ValueGrad
            | AttentionPart::QueryGrad
            | AttentionPart::Output
            | AttentionPart::LogSumExp => None,
        };
        (key, value, None, None)
    };
    // The second row (a query's d_out, a key's value) waits in this thread's row of shared
    // memory, so three rows of registers (query or key, it, the gradient) do not spill; rows
    // are padded by 16 bytes so a warp's loads fall in distinct banks.
    let own_stride = (d + 4) * 4;
    let own_slot = e.reg(Class::R);
    if let Some(regs) = &second {
        e.pre_line(format!("mov.u32 {own_slot}, {name}_own"));
        e.pre_line(format!(
            "mad.lo.s32 {own_slot}, {tid}, {own_stride}, {own_slot}"
        ));
        for (g, group) in regs.chunks(4).enumerate() {
            e.pre_line(format!(
                "st.shared.v4.f32 [{own_slot}+{}], {{{}}}",
                16 * g,
                group.join(", ")
            ));
        }
    }
    let acc: Vec<String> = (0..d).map(|_| e.reg(Class::F)).collect();
    for r in &acc {
        e.pre_line(format!("mov.f32 {r}, {zero}"));
    }

    // Shared tiles of the visited rows: keys and values (a query block), or queries and
    // output cotangents (a key block), [TILE, d] each, rounded; then a key block's per-query
    // log-sum-exps and deltas, TILE each.
    let tile_bytes = TILE * d * 4;
    let [first_base, second_base, rows_base] = e.regs::<3>(Class::R);
    e.pre_line(format!("mov.u32 {first_base}, {name}_tiles"));
    e.pre_line(format!("add.u32 {second_base}, {first_base}, {tile_bytes}"));
    e.pre_line(format!("add.u32 {rows_base}, {second_base}, {tile_bytes}"));
    let (first_in, second_in) = if by_query {
        ((k_in.as_str(), k.operands), (v_in.as_str(), k.operands))
    } else {
        ((q_in.as_str(), k.operands), (do_in.as_str(), DType::F32))
    };

    let tile_loop = e.label("tile");
    e.body.push_str(&format!("{tile_loop}:\n"));
    e.line("bar.sync 0".into());
    let tiles = Tiles {
        sources: [first_in, second_in],
        base: &other_base,
        row: heads * d,
        start: &start,
        len: other_len,
        shared: &first_base,
    };
    let loaded = load_tiles(&mut e, &tiles, (d, &tid, &zero), h16)?;
    e.body.push_str(&format!("{loaded}:\n"));
    if !by_query {
        let rows = QueryRows {
            sources: [lse_in, dlse_in, o_in, do_in],
            base: &other_base,
            bh,
            start: &start,
            tid: &tid,
            shared: &rows_base,
            zero: &zero,
        };
        let delta = k.part == AttentionPart::KeyGrad;
        load_query_rows(&mut e, &rows, (TILE, t_len, heads, d), delta);
    }
    e.line("bar.sync 0".into());

    // Each visited row of the tile, in a loop (not unrolled: one row's registers at a time).
    let [r, first_row, second_row, row_slot] = e.regs::<4>(Class::R);
    let row_loop = e.label("row");
    e.line(format!("mov.u32 {r}, 0"));
    e.body.push_str(&format!("{row_loop}:\n"));
    // Unrolled, the rows' loads and products overlap past the registers at 64 features.
    e.line(".pragma \"nounroll\"".into());
    e.line(format!(
        "mad.lo.s32 {first_row}, {r}, {}, {first_base}",
        d * 4
    ));
    e.line(format!(
        "mad.lo.s32 {second_row}, {r}, {}, {second_base}",
        d * 4
    ));
    e.line(format!("mad.lo.s32 {row_slot}, {r}, 4, {rows_base}"));
    // The score, masked where the visited row is past its end or (causal) the key comes
    // after the query.
    let s = dot_shared(&mut e, &mine, &first_row, &zero);
    let s = rounded(&mut e, h16, s)?;
    let (visited, valid) = (e.reg(Class::R), e.reg(Class::P));
    e.line(format!("add.u32 {visited}, {start}, {r}"));
    e.line(format!("setp.lt.u32 {valid}, {visited}, {other_len}"));
    if k.causal {
        let seen = e.reg(Class::P);
        match by_query {
            true => e.line(format!("setp.le.u32 {seen}, {visited}, {own}")),
            false => e.line(format!("setp.le.u32 {seen}, {own}, {visited}")),
        }
        e.line(format!("and.pred {valid}, {valid}, {seen}"));
    }
    e.line(format!("selp.f32 {s}, {s}, {minus_inf}, {valid}"));
    let (lse, delta) = match (&lse_own, &delta_own) {
        (Some(l), Some(dl)) => (l.clone(), dl.clone()),
        _ => {
            let [l, dl] = e.regs::<2>(Class::F);
            e.line(format!("ld.shared.f32 {l}, [{row_slot}]"));
            e.line(format!("ld.shared.f32 {dl}, [{row_slot}+{}]", 4 * TILE));
            (l, dl)
        }
    };
    let shifted = e.reg(Class::F);
    e.line(format!("sub.rn.f32 {shifted}, {s}, {lse}"));
    let p = unary(&mut e, UnaryOp::Exp, &shifted)?;
    match k.part {
        AttentionPart::ValueGrad => {
            let p = rounded(&mut e, h16, p)?;
            add_scaled_shared(&mut e, &acc, &p, &second_row);
        }
        AttentionPart::QueryGrad
        | AttentionPart::KeyGrad
        | AttentionPart::Output
        | AttentionPart::LogSumExp => {
            // d score = p * (d_out . v - delta), then its product with the other operand.
            // A query's d_out against the tile's value row; a key's value against the
            // tile's d_out row.
            let dp = dot_rows(&mut e, d, &own_slot, &second_row, &zero);
            let dp = rounded(&mut e, h16, dp)?;
            let (centred, ds) = (e.reg(Class::F), e.reg(Class::F));
            e.line(format!("sub.rn.f32 {centred}, {dp}, {delta}"));
            e.line(format!("mul.rn.f32 {ds}, {p}, {centred}"));
            let ds = rounded(&mut e, h16, ds)?;
            // dq += ds * k (the tile's key row); dk += ds * q (the tile's query row).
            add_scaled_shared(&mut e, &acc, &ds, &first_row);
        }
    }
    let next_row = e.reg(Class::P);
    e.line(format!("add.u32 {r}, {r}, 1"));
    e.line(format!("setp.lt.u32 {next_row}, {r}, {TILE}"));
    e.line(format!("@{next_row} bra {row_loop}"));
    let more = e.reg(Class::P);
    e.line(format!("add.u32 {start}, {start}, {TILE}"));
    e.line(format!("setp.lt.u32 {more}, {start}, {end}"));
    e.line(format!("@{more} bra {tile_loop}"));

    // This row's gradient, rounded to the precision (of the operands' type).
    let done = e.label("done");
    let outside = e.reg(Class::P);
    e.line(format!("not.pred {outside}, {active}"));
    e.line(format!("@{outside} bra {done}"));
    let address = e.reg(Class::Rd);
    let out_at = e.reg(Class::R);
    e.line(format!("mad.lo.s32 {out_at}, {b}, {own_len}, {own}"));
    e.line(format!("mad.lo.s32 {out_at}, {out_at}, {heads}, {h}"));
    e.line(format!("mul.lo.s32 {out_at}, {out_at}, {d}"));
    e.line(format!(
        "mul.wide.u32 {address}, {out_at}, {}",
        k.operands.size_bytes()
    ));
    e.line(format!("add.s64 {address}, {result}, {address}"));
    for (g, group) in acc.chunks(4).enumerate() {
        let mut values = Vec::with_capacity(4);
        for r in group {
            values.push(rounded(&mut e, h16, r.clone())?);
        }
        if k.operands == DType::F32 {
            e.line(format!(
                "st.global.v4.f32 [{address}+{}], {{{}}}",
                16 * g,
                values.join(", ")
            ));
            continue;
        }
        for (i, x) in values.iter().enumerate() {
            let h = narrowed(&mut e, k.operands, x);
            e.line(format!(
                "st.global.b16 [{address}+{}], {h}",
                2 * (4 * g + i)
            ));
        }
    }
    e.body.push_str(&format!("{done}:\n"));

    let mut s = String::new();
    let _ = writeln!(
        s,
        "// attention {:?}: [{}, {t_len}, {heads}, {d}] over {s_len} keys, causal {}, \
         products {:?}",
        k.part, k.batch, k.causal, k.precision
    );
    entry_header(&mut s, name, &params, Threads::AtMost(ROWS));
    e.declare(&mut s);
    let _ = writeln!(
        s,
        "\t.shared .align 16 .b8 {name}_tiles[{}];",
        2 * tile_bytes + 2 * TILE * 4
    );
    if second.is_some() {
        let _ = writeln!(
            s,
            "\t.shared .align 16 .b8 {name}_own[{}];",
            ROWS * own_stride
        );
    }
    s.push_str(&e.pre);
    s.push_str(&e.body);
    s.push_str("\tret;\n}\n");
    Ok(s)
}

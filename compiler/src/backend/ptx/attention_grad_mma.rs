//! Dot-product attention's gradient parts on the tensor cores (products at bf16 over multiples
//! of 16 head features), with the warp machinery of `attention_mma`. Each recomputes the
//! weights from the scores and the row log-sum-exps, as the scalar kernels (`attention_grad`)
//! do, and rounds where the plain-op spelling rounds.
//!
//! - The queries' gradient: a warp's 16 queries hold their query and output cotangent rows as
//!   operand fragments, and each row's `rowsum(d_out * out) - d_lse`; per tile of keys, the
//!   scores against the keys, the weights' cotangents against the values, and
//!   `dq += ds · k` against the keys transposed.
//! - The keys' gradient: a warp's 16 keys hold their key and value rows; per tile of queries
//!   (whose log-sum-exps and deltas the block computes as it loads the tile), the transposed
//!   scores against the queries, the transposed weights' cotangents against the output
//!   cotangents, and `dk += dsᵀ · q` against the queries transposed.
//! - The values' gradient: the transposed scores as for the keys', and `dv += pᵀ · d_out`
//!   against the output cotangents transposed.

use super::attention::{entry_start, rounded, unary, EntryStart, HeavyRows};
use super::attention_grad::{load_query_rows, visited_rows, AttentionGradKernel, QueryRows};
use super::attention_mma::{
    accumulators, across_row, entry_text, fragments_of, lane_rows, load_pairs, load_tiles, mask,
    mix, operand_fragments, packed, scores, skip_unseen, store_rows, tile, warp_rows, Layout, Own,
    Tile, Visited, KEYS,
};
use super::emit::{Class, Emitter};
use super::loops::Thread;
use super::{MathMode, PtxError};
use ferrax_ir::{AttentionPart, DType, UnaryOp};

/// What a kernel does with the weights of a tile: one or both of these.
struct Work {
    /// The values' gradient: `dv += pᵀ · d_out`, the output cotangents transposed in a tile.
    weights: Option<Tile>,
    cotangents: Option<Cotangents>,
}

/// The queries' or keys' gradient: the weights' cotangents from the warp's `second` fragments
/// (a query's d_out, a key's value) against `second_tile` (values, output cotangents), then
/// their product with the visited rows, `transposed` in a tile.
struct Cotangents {
    second: Vec<Vec<String>>,
    second_tile: Tile,
    transposed: Tile,
}

/// The kernel's `.entry`: parameters q, k, v, out, lse, d_out, d_lse, then the gradient, as
/// the scalar kernel's (the keys', then the values' where the kernel writes both).
pub fn render_attention_grad_mma(
    k: &AttentionGradKernel,
    mode: MathMode,
) -> Result<String, PtxError> {
    let mut e = Emitter::new(mode);
    let name = &k.name;
    let (t_len, s_len, heads, d) = (k.queries, k.keys, k.heads, k.features);
    let own = match k.part {
        AttentionPart::QueryGrad => Own::Queries,
        AttentionPart::KeyGrad
        | AttentionPart::ValueGrad
        | AttentionPart::Output
        | AttentionPart::LogSumExp => Own::Keys,
    };
    let EntryStart {
        params,
        addresses: a,
        thread: Thread { ctaid, tid, .. },
        zero,
        minus_inf,
    } = entry_start(&mut e, name, 8 + usize::from(k.values_too));
    let (q_in, k_in, v_in, o_in, lse_in, do_in, dlse_in, result) =
        (&a[0], &a[1], &a[2], &a[3], &a[4], &a[5], &a[6], &a[7]);
    let values_result = a.get(8);
    let (own_len, other_len) = match own {
        Own::Queries => (t_len, s_len),
        Own::Keys => (s_len, t_len),
    };
    let heavy = match (own, k.causal) {
        (Own::Queries, true) => HeavyRows::Last,
        (Own::Keys, true) | (_, false) => HeavyRows::First,
    };
    let w = warp_rows(&mut e, (&ctaid, &tid), own_len, (k.batch, heads), heavy);
    let [start, end, other_base] =
        visited_rows(&mut e, k, own == Own::Queries, (&w.rb, &w.b, &w.h));

    // The warp's rows as operand fragments: a query's q and d_out, with its log-sum-exp and
    // delta = rowsum(d_out * out) - d_lse (d_out unrounded there, its partial sums over the
    // lane's columns added across the row's lanes); a key's k, and v for the keys' gradient.
    let own_dims = (own_len, heads, d);
    let operands = k.operands;
    // An operand's rows: f32 pairs as loaded, or (operands) the packed fragments.
    let pairs = |e: &mut Emitter, base: &str| {
        let rows = lane_rows(e, &w, (base, DType::F32), own_dims);
        load_pairs(e, &rows, d)
    };
    let fragments = |e: &mut Emitter, base: &str| {
        let rows = lane_rows(e, &w, (base, operands), own_dims);
        fragments_of(e, &rows, d, operands)
    };
    let mut row_values = None;
    let (first, second) = match own {
        Own::Queries => {
            let q = fragments(&mut e, q_in);
            let d_out = pairs(&mut e, do_in);
            let out = pairs(&mut e, o_in);
            let partial = e.regs::<2>(Class::F);
            for p in &partial {
                e.pre_line(format!("mov.f32 {p}, {zero}"));
            }
            // Pair `k` of a step is row `k % 2`'s.
            let pairs = d_out.iter().flatten().zip(out.iter().flatten());
            for (k, (g, o)) in pairs.enumerate() {
                for (x, y) in g.iter().zip(o) {
                    e.pre_line(format!("fma.rn.f32 {0}, {x}, {y}, {0}", partial[k % 2]));
                }
            }
            let mut lse_delta = Vec::with_capacity(2);
            for (r, p) in partial.iter().enumerate() {
                let (at, address) = (e.reg(Class::R), e.reg(Class::Rd));
                e.pre_line(format!("min.u32 {at}, {}, {}", w.rows[r], t_len - 1));
                e.pre_line(format!("mad.lo.s32 {at}, {}, {t_len}, {at}", w.bh));
                e.pre_line(format!("mul.wide.u32 {address}, {at}, 4"));
                let [lse, dlse] = e.regs::<2>(Class::F);
                let [lse_at, dlse_at] = e.regs::<2>(Class::Rd);
                e.pre_line(format!("add.s64 {lse_at}, {lse_in}, {address}"));
                e.pre_line(format!("ld.global.nc.f32 {lse}, [{lse_at}]"));
                e.pre_line(format!("add.s64 {dlse_at}, {dlse_in}, {address}"));
                e.pre_line(format!("ld.global.nc.f32 {dlse}, [{dlse_at}]"));
                let sum = across_row(&mut e, p, "add.rn.f32");
                let delta = e.reg(Class::F);
                e.line(format!("sub.rn.f32 {delta}, {sum}, {dlse}"));
                lse_delta.push((lse, delta));
            }
            row_values = Some(lse_delta);
            (q, Some(packed(&mut e, &d_out)))
        }
        Own::Keys => {
            let key = fragments(&mut e, k_in);
            let value = match k.part {
                AttentionPart::KeyGrad => Some(fragments(&mut e, v_in)),
                AttentionPart::ValueGrad
                | AttentionPart::QueryGrad
                | AttentionPart::Output
                | AttentionPart::LogSumExp => None,
            };
            (key, value)
        }
    };
    let acc = accumulators(&mut e, d / 8, &zero);
    // The values' gradient's own, where the keys' gradient kernel writes it too.
    let values_acc = match k.values_too {
        true => accumulators(&mut e, d / 8, &zero),
        false => Vec::new(),
    };

    // The shared tiles of the visited rows, from their operands: keys (as they are and
    // transposed) and values, or queries (as they are and, for the keys' gradient,
    // transposed) and output cotangents (as they are for the keys' gradient, transposed for
    // the values'); then a key block's per-query log-sum-exps and deltas.
    let mut shared = |what: &str, layout| tile(&mut e, &w, format!("{name}_{what}"), layout, d);
    let (first_in, second_in) = match own {
        Own::Queries => ((k_in, operands), (v_in, operands)),
        Own::Keys => ((q_in, operands), (do_in, DType::F32)),
    };
    let (rows_tile, work) = match (k.part, second) {
        (AttentionPart::QueryGrad, Some(second)) => (
            shared("keys", Layout::Rows),
            Work {
                weights: None,
                cotangents: Some(Cotangents {
                    transposed: shared("keys_t", Layout::Transposed),
                    second,
                    second_tile: shared("values", Layout::Rows),
                }),
            },
        ),
        (AttentionPart::KeyGrad, Some(second)) => (
            shared("queries", Layout::Rows),
            Work {
                weights: k.values_too.then(|| shared("d_out_t", Layout::Transposed)),
                cotangents: Some(Cotangents {
                    transposed: shared("queries_t", Layout::Transposed),
                    second,
                    second_tile: shared("d_out", Layout::Rows),
                }),
            },
        ),
        (AttentionPart::ValueGrad, None) => (
            shared("queries", Layout::Rows),
            Work {
                weights: Some(shared("d_out_t", Layout::Transposed)),
                cotangents: None,
            },
        ),
        (
            part @ (AttentionPart::QueryGrad
            | AttentionPart::KeyGrad
            | AttentionPart::ValueGrad
            | AttentionPart::Output
            | AttentionPart::LogSumExp),
            _,
        ) => {
            return Err(PtxError::Unsupported {
                kernel: name.clone(),
                what: format!("{part:?} as a gradient kernel"),
            })
        }
    };
    // The visited rows' tiles: the first operand's as they are (and transposed for the
    // cotangents' product), the second's as they are for the weights' cotangents and
    // transposed for the values' gradient.
    let mut first_tiles = vec![&rows_tile];
    let mut second_tiles = Vec::with_capacity(2);
    if let Some(c) = &work.cotangents {
        first_tiles.push(&c.transposed);
        second_tiles.push(&c.second_tile);
    }
    second_tiles.extend(&work.weights);
    let sources = vec![
        (first_in.0.as_str(), first_in.1, first_tiles.clone()),
        (second_in.0.as_str(), second_in.1, second_tiles.clone()),
    ];
    // A key block's per-query rows: log-sum-exps, then deltas.
    let per_query = match own {
        Own::Keys => 2 * KEYS * 4,
        Own::Queries => 0,
    };
    let [rows_base, columns] = e.regs::<2>(Class::R);
    if own == Own::Keys {
        e.pre_line(format!("mov.u32 {rows_base}, {name}_rows"));
        e.pre_line(format!("mad.lo.s32 {columns}, {}, 4, {rows_base}", w.pair));
    }

    let tile_loop = e.label("tile");
    e.body.push_str(&format!("{tile_loop}:\n"));
    e.line("bar.sync 0".into());
    let visited = Visited {
        kernel: name,
        base: &other_base,
        len: other_len,
        row: heads * d,
        start: &start,
    };
    load_tiles(&mut e, &visited, &sources, (d, &tid, &zero))?;
    if own == Own::Keys {
        let rows = QueryRows {
            sources: [lse_in, dlse_in, o_in, do_in],
            base: &other_base,
            bh: &w.bh,
            start: &start,
            tid: &tid,
            shared: &rows_base,
            zero: &zero,
        };
        let delta = k.part == AttentionPart::KeyGrad;
        load_query_rows(&mut e, &rows, (KEYS, t_len, heads, d), delta);
    }
    e.line("bar.sync 0".into());
    let next = e.label("next");
    if k.causal {
        skip_unseen(&mut e, &w, &start, own, &next);
    }
    let s = scores(&mut e, &first, &rows_tile, d, &zero)?;
    mask(
        &mut e,
        &s,
        &w,
        (&start, other_len),
        k.causal.then_some(own),
        &minus_inf,
    );
    // Per 8 visited rows, a value per own row (a query's) or per visited column (a key
    // block's, from shared memory: `offset` bytes into the per-query rows).
    let row_or_column =
        |e: &mut Emitter, j: usize, offset: usize, pick: fn(&(String, String)) -> &String| {
            match &row_values {
                Some(rows) => [0, 1, 2, 3].map(|i| pick(&rows[i / 2]).clone()),
                None => {
                    let v = e.regs::<2>(Class::F);
                    e.line(format!(
                        "ld.shared.v2.f32 {{{}, {}}}, [{columns}+{}]",
                        v[0],
                        v[1],
                        offset + 32 * j
                    ));
                    [0, 1, 2, 3].map(|i| v[i % 2].clone())
                }
            }
        };
    let mut weights = Vec::with_capacity(s.len());
    for (j, scores) in s.iter().enumerate() {
        let lse = row_or_column(&mut e, j, 0, |(l, _)| l);
        let mut p = Vec::with_capacity(4);
        for (x, l) in scores.iter().zip(&lse) {
            let shifted = e.reg(Class::F);
            e.line(format!("sub.rn.f32 {shifted}, {x}, {l}"));
            p.push(unary(&mut e, UnaryOp::Exp, &shifted)?);
        }
        weights.push(p);
    }
    // dv += pᵀ · d_out.
    if let Some(d_out_t) = &work.weights {
        let p = operand_fragments(&mut e, &weights);
        let into = match work.cotangents.is_some() {
            true => &values_acc,
            false => &acc,
        };
        mix(&mut e, into, &p, d_out_t);
    }
    // ds = p * (d_out . v - delta), rounded as the product's operand; then its product with
    // the first operand's rows.
    if let Some(Cotangents {
        second,
        second_tile,
        transposed,
    }) = &work.cotangents
    {
        let dp = scores(&mut e, second, second_tile, d, &zero)?;
        let mut ds = Vec::with_capacity(dp.len());
        for (j, (dp, p)) in dp.iter().zip(&weights).enumerate() {
            let delta = row_or_column(&mut e, j, 4 * KEYS, |(_, dl)| dl);
            let mut row = Vec::with_capacity(4);
            for ((x, p), dl) in dp.iter().zip(p).zip(&delta) {
                let (centred, y) = (e.reg(Class::F), e.reg(Class::F));
                e.line(format!("sub.rn.f32 {centred}, {x}, {dl}"));
                e.line(format!("mul.rn.f32 {y}, {p}, {centred}"));
                row.push(y);
            }
            ds.push(row);
        }
        let ds = operand_fragments(&mut e, &ds);
        mix(&mut e, &acc, &ds, transposed);
    }
    e.body.push_str(&format!("{next}:\n"));
    let more = e.reg(Class::P);
    e.line(format!("add.u32 {start}, {start}, {KEYS}"));
    e.line(format!("setp.lt.u32 {more}, {start}, {end}"));
    e.line(format!("@{more} bra {tile_loop}"));

    let round = |e: &mut Emitter, x: &str, _| rounded(e, Some(DType::BF16), x.to_string());
    store_rows(&mut e, &w, &acc, (result, operands, own_dims), round)?;
    if let Some(values_result) = values_result {
        store_rows(
            &mut e,
            &w,
            &values_acc,
            (values_result, operands, own_dims),
            round,
        )?;
    }
    let comment = format!(
        "attention {:?}{} on tensor cores: [{}, {t_len}, {heads}, {d}] over {s_len} keys, \
         causal {}, products bf16",
        k.part,
        if k.values_too { " and ValueGrad" } else { "" },
        k.batch,
        k.causal
    );
    let tiles: Vec<&Tile> = first_tiles.into_iter().chain(second_tiles).collect();
    Ok(entry_text(
        &e,
        (&comment, name, &params),
        &tiles,
        d,
        per_query,
    ))
}

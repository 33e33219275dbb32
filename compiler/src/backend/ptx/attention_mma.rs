//! Dot-product attention on the tensor cores, for products at bf16 (the w10 policy) over head
//! features in multiples of 16: flash attention with its products as warp matrix products
//! (`mma.sync` m16n8k16, bf16 operands, f32 sums). This module holds the warps' machinery and
//! the forward kernel; `attention_grad_mma` the gradients' kernels.
//!
//! A block takes [`ROWS`] rows of one batch and head (queries for the forward pass and the
//! queries' gradient, keys for the keys' and values' gradients), a warp 16 of them: the warp
//! holds its rows as bf16 operand fragments in registers, and visits the other operand's rows
//! in tiles of [`KEYS`], which the block's threads load (rounded to bf16, or as they are for
//! bf16 operands) into shared memory together, as they are and, where a product contracts over the tile's rows, transposed. Per
//! tile a warp computes its 16 x 64 scores with tensor-core products against the tile, then
//! works on the score fragments where they lie: masks, exponentials, each row's maximum and
//! sum over the four lanes that hold it (butterfly shuffles), and packs the resulting weights
//! to bf16 straight into the operand fragments of the product over the tile's rows, whose
//! accumulators are the warp's result rows. Shared rows are padded so that the eight rows a
//! fragment load reads fall in different banks.
//!
//! The roundings are the scalar kernels' (`attention`, `attention_grad`): operands, scores,
//! products and results to bf16; the forward weights relative to the running maximum. The
//! products' sums are the tensor cores' (exact bf16 products, f32 sums in their own order).

use super::attention::{
    block_place, entry_start, rounded, unary, AttentionKernel, EntryStart, HeavyRows, ROWS,
};
use super::emit::{Class, Emitter};
use super::loops::{entry_header, Thread, Threads};
use super::{MathMode, PtxError};
use ferrax_ir::{DType, UnaryOp};
use std::fmt::Write;

/// Rows a warp takes: the rows of one matrix product.
const WARP_ROWS: usize = 16;
/// Threads of a block: a warp per 16 of its [`ROWS`] rows.
pub const THREADS: usize = 32 * ROWS / WARP_ROWS;
/// Rows of a visited tile.
pub const KEYS: usize = 64;
/// Padding of a shared row, in bf16 elements: 16 bytes, so that consecutive rows start four
/// banks apart.
const PAD: usize = 8;
/// The warp matrix product, accumulating in place.
const MMA: &str = "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32";

/// Whether attention kernels at `precision` over `features` run on the tensor cores: products
/// at bf16, over a multiple of 16 head features (the products' contracting step).
pub fn on_tensor_cores(precision: Option<DType>, features: usize) -> bool {
    precision == Some(DType::BF16) && features.is_multiple_of(16)
}

/// A block's batch and head, and a lane's place among the warp's rows: `group` (its rows
/// `group` and `group + 8` of the warp's 16) and `pair` (its two columns of each 8-wide tile,
/// `pair` and `pair + 1`), set up before the loops.
pub(super) struct WarpRows {
    pub(super) bh: String,
    pub(super) rb: String,
    pub(super) b: String,
    pub(super) h: String,
    /// The warp's first row.
    pub(super) first: String,
    pub(super) group: String,
    pub(super) pair: String,
    /// The lane's two rows, and whether each exists.
    pub(super) rows: [String; 2],
    pub(super) active: [String; 2],
}

/// The [`WarpRows`] of thread `tid` of block `ctaid` over rows `0..len` of `batch` batches of
/// `heads` heads, blocks sent out as [`block_place`] says.
pub(super) fn warp_rows(
    e: &mut Emitter,
    (ctaid, tid): (&str, &str),
    len: usize,
    (batch, heads): (usize, usize),
    heavy: HeavyRows,
) -> WarpRows {
    let row_blocks = len.div_ceil(ROWS);
    let [bh, rb] = block_place(e, ctaid, (row_blocks, batch * heads), heavy);
    let [b, h, warp, lane, group, pair, first] = e.regs::<7>(Class::R);
    e.pre_line(format!("div.u32 {b}, {bh}, {heads}"));
    e.pre_line(format!("rem.u32 {h}, {bh}, {heads}"));
    e.pre_line(format!("shr.u32 {warp}, {tid}, 5"));
    e.pre_line(format!("and.b32 {lane}, {tid}, 31"));
    e.pre_line(format!("shr.u32 {group}, {lane}, 2"));
    e.pre_line(format!("and.b32 {pair}, {lane}, 3"));
    e.pre_line(format!("shl.b32 {pair}, {pair}, 1"));
    e.pre_line(format!("mul.lo.s32 {first}, {warp}, {WARP_ROWS}"));
    e.pre_line(format!("mad.lo.s32 {first}, {rb}, {ROWS}, {first}"));
    let rows = e.regs::<2>(Class::R);
    let active = e.regs::<2>(Class::P);
    e.pre_line(format!("add.s32 {}, {first}, {group}", rows[0]));
    e.pre_line(format!("add.s32 {}, {}, 8", rows[1], rows[0]));
    for (row, on) in rows.iter().zip(&active) {
        e.pre_line(format!("setp.lt.u32 {on}, {row}, {len}"));
    }
    WarpRows {
        bh,
        rb,
        b,
        h,
        first,
        group,
        pair,
        rows,
        active,
    }
}

/// Where the lane's two rows (the last's for rows past it) start at feature `pair` in the
/// `[B, len, heads, d]` operand at `base` of dtype `dtype`, set up before the loops.
pub(super) fn lane_rows(
    e: &mut Emitter,
    w: &WarpRows,
    (base, dtype): (&str, DType),
    (len, heads, d): (usize, usize, usize),
) -> [String; 2] {
    w.rows.clone().map(|row| {
        let (at, address) = (e.reg(Class::R), e.reg(Class::Rd));
        e.pre_line(format!("min.u32 {at}, {row}, {}", len - 1));
        e.pre_line(format!("mad.lo.s32 {at}, {}, {len}, {at}", w.b));
        e.pre_line(format!("mad.lo.s32 {at}, {at}, {heads}, {}", w.h));
        e.pre_line(format!("mad.lo.s32 {at}, {at}, {d}, {}", w.pair));
        e.pre_line(format!(
            "mul.wide.u32 {address}, {at}, {}",
            dtype.size_bytes()
        ));
        e.pre_line(format!("add.s64 {address}, {base}, {address}"));
        address
    })
}

/// The lane's operand fragments of its rows (at [`lane_rows`]) of a `dtype` operand, loaded
/// before the loops: f32 ones loaded as [`load_pairs`] and rounded to bf16, bf16 ones a pair
/// per load, as they are.
pub(super) fn fragments_of(
    e: &mut Emitter,
    rows: &[String; 2],
    d: usize,
    dtype: DType,
) -> Vec<Vec<String>> {
    if dtype == DType::F32 {
        let pairs = load_pairs(e, rows, d);
        return packed(e, &pairs);
    }
    (0..d / 16)
        .map(|step| {
            let mut pairs = Vec::with_capacity(4);
            for half in 0..2 {
                for address in rows {
                    let r = e.reg(Class::R);
                    e.pre_line(format!(
                        "ld.global.nc.b32 {r}, [{address}+{}]",
                        2 * (16 * step + 8 * half)
                    ));
                    pairs.push(r);
                }
            }
            pairs
        })
        .collect()
}

/// The lane's elements of its rows' operand fragments (f32, as loaded before the loops), per
/// step of 16 features: four pairs, rows `group` and `group + 8` at features `pair, pair + 1`,
/// then both at `pair + 8, pair + 9` (`rows[k % 2]` holds pair `k`).
pub(super) fn load_pairs(e: &mut Emitter, rows: &[String; 2], d: usize) -> Vec<Vec<[String; 2]>> {
    (0..d / 16)
        .map(|step| {
            let mut pairs = Vec::with_capacity(4);
            for half in 0..2 {
                for address in rows {
                    let x = e.regs::<2>(Class::F);
                    e.pre_line(format!(
                        "ld.global.nc.v2.f32 {{{}, {}}}, [{address}+{}]",
                        x[0],
                        x[1],
                        4 * (16 * step + 8 * half)
                    ));
                    pairs.push(x);
                }
            }
            pairs
        })
        .collect()
}

/// `pairs` rounded to bf16 and packed: the operand fragments, in the set-up.
pub(super) fn packed(e: &mut Emitter, pairs: &[Vec<[String; 2]>]) -> Vec<Vec<String>> {
    pairs
        .iter()
        .map(|step| step.iter().map(|x| pack(e, &x[1], &x[0], true)).collect())
        .collect()
}

/// `hi` and `lo` (f32) rounded to bf16 and packed into one register, `lo` in the lower half.
fn pack(e: &mut Emitter, hi: &str, lo: &str, setup: bool) -> String {
    let r = e.reg(Class::R);
    let line = format!("cvt.rn.bf16x2.f32 {r}, {hi}, {lo}");
    match setup {
        true => e.pre_line(line),
        false => e.line(line),
    }
    r
}

/// Four f32 accumulators set to zero before the loops, `n` times.
pub(super) fn accumulators(e: &mut Emitter, n: usize, zero: &str) -> Vec<Vec<String>> {
    let acc: Vec<Vec<String>> = (0..n)
        .map(|_| (0..4).map(|_| e.reg(Class::F)).collect())
        .collect();
    for r in acc.iter().flatten() {
        e.pre_line(format!("mov.f32 {r}, {zero}"));
    }
    acc
}

/// How a shared tile holds the visited rows' elements.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Layout {
    /// `[KEYS, d + PAD]`: the rows as they are.
    Rows,
    /// `[d, KEYS + PAD]`: features by rows.
    Transposed,
}

impl Layout {
    /// Bytes of a shared row.
    fn row_bytes(self, d: usize) -> usize {
        match self {
            Layout::Rows => 2 * (d + PAD),
            Layout::Transposed => 2 * (KEYS + PAD),
        }
    }

    /// Bytes of the tile.
    pub(super) fn bytes(self, d: usize) -> usize {
        match self {
            Layout::Rows => KEYS * self.row_bytes(d),
            Layout::Transposed => d * self.row_bytes(d),
        }
    }
}

/// A shared tile: its `.shared` variable, layout, and where the lane's fragments start in it.
pub(super) struct Tile {
    pub(super) name: String,
    pub(super) layout: Layout,
    base: String,
    fragment: String,
}

/// Shared tile `name` in `layout`, its registers set up for the lanes of `w`.
pub(super) fn tile(e: &mut Emitter, w: &WarpRows, name: String, layout: Layout, d: usize) -> Tile {
    let [base, fragment] = e.regs::<2>(Class::R);
    e.pre_line(format!("mov.u32 {base}, {name}"));
    e.pre_line(format!(
        "mad.lo.s32 {fragment}, {}, {}, {base}",
        w.group,
        layout.row_bytes(d)
    ));
    e.pre_line(format!("mad.lo.s32 {fragment}, {}, 2, {fragment}", w.pair));
    Tile {
        name,
        layout,
        base,
        fragment,
    }
}

/// Where a tile loop's loads read: the visited operands' batch and head's first element
/// (`base`), the visited rows there are (`len`), a row's stride in elements, and the tile's
/// first row (`start`, a register); `kernel` names the kernel.
pub(super) struct Visited<'a> {
    pub(super) kernel: &'a str,
    pub(super) base: &'a str,
    pub(super) len: usize,
    pub(super) row: usize,
    pub(super) start: &'a str,
}

/// The tile's loads, every thread of the block taking part: `KEYS` rows of `d` features of
/// each operand at its global address, f32 ones rounded to bf16 and bf16 ones as they are,
/// into its tiles; zeros for rows past the end. A unit of work is two rows' four features, and
/// a thread's units are unrolled (`d` a multiple of 16: as many units a thread), each
/// operand's loads issued before any of its stores, so that a tile costs one trip to memory
/// rather than one a unit.
pub(super) fn load_tiles(
    e: &mut Emitter,
    v: &Visited<'_>,
    sources: &[(&str, DType, Vec<&Tile>)],
    (d, tid, zero): (usize, &str, &str),
) -> Result<(), PtxError> {
    let quads = d / 4;
    let units = KEYS / 2 * quads;
    if !units.is_multiple_of(THREADS) {
        return Err(PtxError::Unsupported {
            kernel: v.kernel.to_string(),
            what: format!("tensor-core attention tiles of {d} features"),
        });
    }
    // Per unit of the thread: its pair of rows, first feature, rows' predicates and element.
    let placed: Vec<_> = (0..units / THREADS)
        .map(|i| {
            let [unit, pair_of_rows, feature, row, at] = e.regs::<5>(Class::R);
            let inside = e.regs::<2>(Class::P);
            e.line(format!("add.u32 {unit}, {tid}, {}", i * THREADS));
            e.line(format!("div.u32 {pair_of_rows}, {unit}, {quads}"));
            e.line(format!("rem.u32 {feature}, {unit}, {quads}"));
            e.line(format!("shl.b32 {feature}, {feature}, 2"));
            e.line(format!("mad.lo.s32 {row}, {pair_of_rows}, 2, {}", v.start));
            e.line(format!("setp.lt.u32 {}, {row}, {}", inside[0], v.len));
            e.line(format!("add.u32 {at}, {row}, 1"));
            e.line(format!("setp.lt.u32 {}, {at}, {}", inside[1], v.len));
            e.line(format!("mad.lo.s32 {at}, {row}, {}, {}", v.row, v.base));
            e.line(format!("add.s32 {at}, {at}, {feature}"));
            (pair_of_rows, feature, inside, at)
        })
        .collect();
    let slot = e.reg(Class::R);
    for (source, dtype, tiles) in sources {
        let bytes = dtype.size_bytes();
        let loaded: Vec<Quads> = placed
            .iter()
            .map(|(_, _, inside, at)| {
                let address = e.reg(Class::Rd);
                e.line(format!("mul.wide.u32 {address}, {at}, {bytes}"));
                e.line(format!("add.s64 {address}, {source}, {address}"));
                load_quads(e, (&address, *dtype), (inside, v.row), zero)
            })
            .collect();
        for ((pair_of_rows, feature, _, _), two) in placed.iter().zip(&loaded) {
            for t in tiles {
                store_quads(e, t, two, (pair_of_rows, feature, &slot), d);
            }
        }
    }
    Ok(())
}

/// A unit's two rows' four features (`two`, as loaded) stored into tile `t` at rows
/// `2 * pair_of_rows` and the next, features `feature..+4` (`slot` a scratch register).
fn store_quads(
    e: &mut Emitter,
    t: &Tile,
    two: &Quads,
    (pair_of_rows, feature, slot): (&str, &str, &str),
    d: usize,
) {
    match t.layout {
        Layout::Rows => {
            e.line(format!(
                "mad.lo.s32 {slot}, {pair_of_rows}, {}, {feature}",
                2 * (d + PAD)
            ));
            e.line(format!("mad.lo.s32 {slot}, {slot}, 2, {}", t.base));
            for k in 0..2 {
                let [low, high] = match two {
                    Quads::Wide(x) => [
                        pack(e, &x[k][1], &x[k][0], false),
                        pack(e, &x[k][3], &x[k][2], false),
                    ],
                    Quads::Packed(w) => w[k].clone(),
                };
                e.line(format!(
                    "st.shared.v2.b32 [{slot}+{}], {{{low}, {high}}}",
                    k * Layout::Rows.row_bytes(d)
                ));
            }
        }
        Layout::Transposed => {
            // Feature rows `feature..+4`, the two rows side by side.
            e.line(format!(
                "mad.lo.s32 {slot}, {feature}, {}, {pair_of_rows}",
                (KEYS + PAD) / 2
            ));
            e.line(format!("mad.lo.s32 {slot}, {slot}, 4, {}", t.base));
            for f in 0..4 {
                let packed = match two {
                    Quads::Wide(x) => pack(e, &x[1][f], &x[0][f], false),
                    Quads::Packed(w) => interleaved(e, &w[0][f / 2], &w[1][f / 2], f % 2 == 1),
                };
                e.line(format!(
                    "st.shared.b32 [{slot}+{}], {packed}",
                    f * Layout::Transposed.row_bytes(d)
                ));
            }
        }
    }
}

/// Four features of each of two rows, as loaded.
enum Quads {
    /// f32 registers, to be rounded to bf16 as they are packed.
    Wide([[String; 4]; 2]),
    /// Two bf16 pairs a row, the first feature in the first pair's lower half.
    Packed([[String; 2]; 2]),
}

/// Four features of two rows, at `address` (of dtype `dtype`, f32 or bf16) and `row` elements
/// on; zeros for a row whose predicate in `inside` is false.
fn load_quads(
    e: &mut Emitter,
    (address, dtype): (&str, DType),
    (inside, row): (&[String; 2], usize),
    zero: &str,
) -> Quads {
    if dtype == DType::F32 {
        let x = [0, 1].map(|k| {
            let x = e.regs::<4>(Class::F);
            for r in &x {
                e.line(format!("mov.f32 {r}, {zero}"));
            }
            e.line(format!(
                "@{} ld.global.nc.v4.f32 {{{}}}, [{address}+{}]",
                inside[k],
                x.join(", "),
                4 * k * row
            ));
            x
        });
        return Quads::Wide(x);
    }
    Quads::Packed([0, 1].map(|k| {
        let w = e.regs::<2>(Class::R);
        for r in &w {
            e.line(format!("mov.b32 {r}, 0"));
        }
        e.line(format!(
            "@{} ld.global.nc.v2.b32 {{{}}}, [{address}+{}]",
            inside[k],
            w.join(", "),
            2 * k * row
        ));
        w
    }))
}

/// One register of the bf16 halves of `first` and `second` (pairs of two rows' features), the
/// first row's in the lower half: their upper halves where `upper`, else their lower ones.
fn interleaved(e: &mut Emitter, first: &str, second: &str, upper: bool) -> String {
    let [a, b, r] = e.regs::<3>(Class::R);
    match upper {
        true => {
            e.line(format!("shr.b32 {a}, {first}, 16"));
            e.line(format!("and.b32 {b}, {second}, 0xFFFF0000"));
        }
        false => {
            e.line(format!("and.b32 {a}, {first}, 0xFFFF"));
            e.line(format!("shl.b32 {b}, {second}, 16"));
        }
    }
    e.line(format!("or.b32 {r}, {a}, {b}"));
    r
}

/// `acc += a · b` for a warp: `a` four registers of bf16 pairs, `b` two, `acc` four f32.
fn mma(e: &mut Emitter, acc: &[String], a: &[String], b: &[String]) {
    let acc = acc.join(", ");
    e.line(format!(
        "{MMA} {{{acc}}}, {{{}}}, {{{}}}, {{{acc}}}",
        a.join(", "),
        b.join(", ")
    ));
}

/// The two registers of a product's second operand at `offset` bytes past the lane's
/// fragment in `t`: its rows `pair, pair + 1`, then 8 further on.
fn operand(e: &mut Emitter, t: &Tile, offset: usize) -> Vec<String> {
    (0..2)
        .map(|i| {
            let r = e.reg(Class::R);
            e.line(format!(
                "ld.shared.b32 {r}, [{}+{}]",
                t.fragment,
                offset + 16 * i
            ));
            r
        })
        .collect()
}

/// The warp's rows (operand fragments `a`, per 16 features) against the 64 rows of `t` (as
/// they are), rounded to bf16: per 8 visited rows, the four f32 of the lane.
pub(super) fn scores(
    e: &mut Emitter,
    a: &[Vec<String>],
    t: &Tile,
    d: usize,
    zero: &str,
) -> Result<Vec<Vec<String>>, PtxError> {
    let mut scores = Vec::with_capacity(KEYS / 8);
    for j in 0..KEYS / 8 {
        let s: Vec<String> = (0..4).map(|_| e.reg(Class::F)).collect();
        for r in &s {
            e.line(format!("mov.f32 {r}, {zero}"));
        }
        for (step, fragment) in a.iter().enumerate() {
            let b = operand(e, t, 2 * (8 * j * (d + PAD) + 16 * step));
            mma(e, &s, fragment, &b);
        }
        let mut rounded_scores = Vec::with_capacity(4);
        for x in s {
            rounded_scores.push(rounded(e, Some(DType::BF16), x)?);
        }
        scores.push(rounded_scores);
    }
    Ok(scores)
}

/// `acc[f] += p · t` over the tile's 64 rows, `t` transposed and `p` the weights' operand
/// fragments (per 16 rows), for each 8 features `f`.
pub(super) fn mix(e: &mut Emitter, acc: &[Vec<String>], p: &[Vec<String>], t: &Tile) {
    for (f, o) in acc.iter().enumerate() {
        for (step, fragment) in p.iter().enumerate() {
            let b = operand(e, t, 2 * (8 * f * (KEYS + PAD) + 16 * step));
            mma(e, o, fragment, &b);
        }
    }
}

/// The f32 score-shaped values `w` (per 8 visited rows, the lane's four) as the operand
/// fragments of a product over the visited rows, per 16 of them: two 8-row tiles' four
/// registers, rounded to bf16 and packed.
pub(super) fn operand_fragments(e: &mut Emitter, w: &[Vec<String>]) -> Vec<Vec<String>> {
    w.chunks(2)
        .map(|two| {
            two.iter()
                .flat_map(|x| [pack(e, &x[1], &x[0], false), pack(e, &x[3], &x[2], false)])
                .collect()
        })
        .collect()
}

/// Which way a causal mask runs: a row of queries sees the keys up to it; a row of keys is
/// seen by the queries from it on.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Own {
    Queries,
    Keys,
}

/// Score fragments masked to -inf where the visited row is past `len` or (causal) hidden from
/// the lane's row, unless the whole tile is visible to every row of the warp (a branch around
/// the masking).
pub(super) fn mask(
    e: &mut Emitter,
    scores: &[Vec<String>],
    w: &WarpRows,
    (start, len): (&str, usize),
    causal: Option<Own>,
    minus_inf: &str,
) {
    let masked = e.label("masked");
    let (whole, bound) = (e.reg(Class::P), e.reg(Class::R));
    e.line(format!("add.u32 {bound}, {start}, {KEYS}"));
    e.line(format!("setp.le.u32 {whole}, {bound}, {len}"));
    if let Some(own) = causal {
        let (edge, visible) = (e.reg(Class::R), e.reg(Class::P));
        match own {
            // The tile's last key at or before the warp's first query.
            Own::Queries => {
                e.line(format!("add.u32 {edge}, {start}, {}", KEYS - 1));
                e.line(format!("setp.le.u32 {visible}, {edge}, {}", w.first));
            }
            // The warp's last key at or before the tile's first query.
            Own::Keys => {
                e.line(format!("add.u32 {edge}, {}, {}", w.first, WARP_ROWS - 1));
                e.line(format!("setp.le.u32 {visible}, {edge}, {start}"));
            }
        }
        e.line(format!("and.pred {whole}, {whole}, {visible}"));
    }
    e.line(format!("@{whole} bra {masked}"));
    let column = e.reg(Class::R);
    e.line(format!("add.u32 {column}, {start}, {}", w.pair));
    for (j, s) in scores.iter().enumerate() {
        for (i, x) in s.iter().enumerate() {
            let (visited, valid) = (e.reg(Class::R), e.reg(Class::P));
            e.line(format!("add.u32 {visited}, {column}, {}", 8 * j + i % 2));
            e.line(format!("setp.lt.u32 {valid}, {visited}, {len}"));
            let row = &w.rows[i / 2];
            let seen = match causal {
                Some(Own::Queries) => Some(format!("{visited}, {row}")),
                Some(Own::Keys) => Some(format!("{row}, {visited}")),
                None => None,
            };
            if let Some(operands) = seen {
                let p = e.reg(Class::P);
                e.line(format!("setp.le.u32 {p}, {operands}"));
                e.line(format!("and.pred {valid}, {valid}, {p}"));
            }
            e.line(format!("selp.f32 {x}, {x}, {minus_inf}, {valid}"));
        }
    }
    e.body.push_str(&format!("{masked}:\n"));
}

/// A branch to `label` for a causal warp none of whose rows sees the tile at `start`.
pub(super) fn skip_unseen(e: &mut Emitter, w: &WarpRows, start: &str, own: Own, label: &str) {
    let (edge, unseen) = (e.reg(Class::R), e.reg(Class::P));
    match own {
        // The tile's first key after the warp's last query.
        Own::Queries => {
            e.line(format!("add.u32 {edge}, {}, {}", w.first, WARP_ROWS - 1));
            e.line(format!("setp.gt.u32 {unseen}, {start}, {edge}"));
        }
        // The tile's last query before the warp's first key.
        Own::Keys => {
            e.line(format!("add.u32 {edge}, {start}, {}", KEYS - 1));
            e.line(format!("setp.lt.u32 {unseen}, {edge}, {}", w.first));
        }
    }
    e.line(format!("@{unseen} bra {label}"));
}

/// The sum (or maximum) of `x` over the four lanes that hold a row's fragments.
pub(super) fn across_row(e: &mut Emitter, x: &str, op: &str) -> String {
    let mut acc = x.to_string();
    for offset in [1, 2] {
        let (other, r) = (e.reg(Class::F), e.reg(Class::F));
        e.line(format!(
            "shfl.sync.bfly.b32 {other}, {acc}, {offset}, 31, -1"
        ));
        e.line(format!("{op} {r}, {acc}, {other}"));
        acc = r;
    }
    acc
}

/// Stores the lane's part of the warp's result rows `acc` (per 8 features, rows `group`
/// (0, 1) and `group + 8` (2, 3)), each value through `finish`, into the `[B, len, heads, d]`
/// result at `base` of dtype `dtype` (f32, or bf16 for values `finish` rounded to it), for the
/// rows inside.
pub(super) fn store_rows(
    e: &mut Emitter,
    w: &WarpRows,
    acc: &[Vec<String>],
    (base, dtype, (len, heads, d)): (&str, DType, (usize, usize, usize)),
    mut finish: impl FnMut(&mut Emitter, &str, usize) -> Result<String, PtxError>,
) -> Result<(), PtxError> {
    let bytes = dtype.size_bytes();
    for r in 0..2 {
        let (at, address) = (e.reg(Class::R), e.reg(Class::Rd));
        e.line(format!("mad.lo.s32 {at}, {}, {len}, {}", w.b, w.rows[r]));
        e.line(format!("mad.lo.s32 {at}, {at}, {heads}, {}", w.h));
        e.line(format!("mad.lo.s32 {at}, {at}, {d}, {}", w.pair));
        e.line(format!("mul.wide.u32 {address}, {at}, {bytes}"));
        e.line(format!("add.s64 {address}, {base}, {address}"));
        for (f, o) in acc.iter().enumerate() {
            let mut results = Vec::with_capacity(2);
            for x in &o[2 * r..2 * r + 2] {
                results.push(finish(e, x, r)?);
            }
            if dtype != DType::F32 {
                let pair = pack(e, &results[1], &results[0], false);
                e.line(format!(
                    "@{} st.global.b32 [{address}+{}], {pair}",
                    w.active[r],
                    8 * bytes * f
                ));
                continue;
            }
            e.line(format!(
                "@{} st.global.v2.f32 [{address}+{}], {{{}}}",
                w.active[r],
                32 * f,
                results.join(", ")
            ));
        }
    }
    Ok(())
}

/// The entry's text: a comment, its header for [`THREADS`] threads exactly, registers, shared tiles (and
/// `extra` shared bytes as `{name}_rows`), set-up and body.
pub(super) fn entry_text(
    e: &Emitter,
    (comment, name, params): (&str, &str, &[String]),
    tiles: &[&Tile],
    d: usize,
    extra: usize,
) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "// {comment}");
    entry_header(&mut s, name, params, Threads::Exactly(THREADS));
    e.declare(&mut s);
    for t in tiles {
        let _ = writeln!(
            s,
            "\t.shared .align 16 .b8 {}[{}];",
            t.name,
            t.layout.bytes(d)
        );
    }
    if extra > 0 {
        let _ = writeln!(s, "\t.shared .align 16 .b8 {name}_rows[{extra}];");
    }
    s.push_str(&e.pre);
    s.push_str(&e.body);
    s.push_str("\tret;\n}\n");
    s
}

/// The forward kernel's `.entry`: parameters q, k, v, then the output and the log-sum-exps
/// (those it writes), as the scalar kernel's.
pub fn render_attention_mma(k: &AttentionKernel, mode: MathMode) -> Result<String, PtxError> {
    let mut e = Emitter::new(mode);
    let name = &k.name;
    let (t_len, s_len, heads, d) = (k.queries, k.keys, k.heads, k.features);
    let precision = Some(DType::BF16);
    let outputs = usize::from(k.out) + usize::from(k.lse);
    let EntryStart {
        params,
        addresses: a,
        thread: Thread { ctaid, tid, .. },
        zero,
        minus_inf,
    } = entry_start(&mut e, name, 3 + outputs);

    let heavy = match k.causal {
        true => HeavyRows::Last,
        false => HeavyRows::First,
    };
    let w = warp_rows(&mut e, (&ctaid, &tid), t_len, (k.batch, heads), heavy);
    let q_rows = lane_rows(&mut e, &w, (&a[0], k.operands), (t_len, heads, d));
    let queries = fragments_of(&mut e, &q_rows, d, k.operands);
    // The output rows' accumulators; each row's running maximum and partial sum.
    let acc = accumulators(&mut e, d / 8, &zero);
    let (max, total) = (e.regs::<2>(Class::F), e.regs::<2>(Class::F));
    for r in 0..2 {
        e.pre_line(format!("mov.f32 {}, {minus_inf}", max[r]));
        e.pre_line(format!("mov.f32 {}, {zero}", total[r]));
    }
    // Keys the block visits: all, or up to its last row's (causal).
    let [start, end] = e.regs::<2>(Class::R);
    e.pre_line(format!("mov.u32 {start}, 0"));
    if k.causal {
        e.pre_line(format!("mad.lo.s32 {end}, {}, {ROWS}, {ROWS}", w.rb));
        e.pre_line(format!("min.u32 {end}, {end}, {}", t_len.min(s_len)));
    } else {
        e.pre_line(format!("mov.u32 {end}, {s_len}"));
    }
    let keys = tile(&mut e, &w, format!("{name}_keys"), Layout::Rows, d);
    let values = tile(&mut e, &w, format!("{name}_values"), Layout::Transposed, d);
    // The first key of the batch and head; a key's row is `heads * d` elements on.
    let kv_base = e.reg(Class::R);
    e.pre_line(format!("mul.lo.s32 {kv_base}, {}, {}", w.b, s_len * heads));
    e.pre_line(format!("add.s32 {kv_base}, {kv_base}, {}", w.h));
    e.pre_line(format!("mul.lo.s32 {kv_base}, {kv_base}, {d}"));

    let tile_loop = e.label("tile");
    e.body.push_str(&format!("{tile_loop}:\n"));
    e.line("bar.sync 0".into());
    let visited = Visited {
        kernel: name,
        base: &kv_base,
        len: s_len,
        row: heads * d,
        start: &start,
    };
    let sources = [
        (a[1].as_str(), k.operands, vec![&keys]),
        (a[2].as_str(), k.operands, vec![&values]),
    ];
    load_tiles(&mut e, &visited, &sources, (d, &tid, &zero))?;
    e.line("bar.sync 0".into());
    let next = e.label("next");
    if k.causal {
        skip_unseen(&mut e, &w, &start, Own::Queries, &next);
    }
    let scores = scores(&mut e, &queries, &keys, d, &zero)?;
    let causal = k.causal.then_some(Own::Queries);
    mask(&mut e, &scores, &w, (&start, s_len), causal, &minus_inf);

    // Per row: the running maximum, the rescaling of what came before (a maximum still -inf,
    // no key seen, shifts by 0 so that no -inf - -inf arises), the weights and their sum.
    let mut shifts = Vec::with_capacity(2);
    for r in 0..2 {
        let mut tile_max = scores[0][2 * r].clone();
        for x in scores.iter().flat_map(|s| &s[2 * r..2 * r + 2]).skip(1) {
            let m = e.reg(Class::F);
            e.line(format!("max.f32 {m}, {tile_max}, {x}"));
            tile_max = m;
        }
        let tile_max = across_row(&mut e, &tile_max, "max.f32");
        let (new_max, unseen) = (e.reg(Class::F), e.reg(Class::P));
        let (shift, old) = (e.reg(Class::F), e.reg(Class::F));
        e.line(format!("max.f32 {new_max}, {}, {tile_max}", max[r]));
        e.line(format!("setp.eq.f32 {unseen}, {new_max}, {minus_inf}"));
        e.line(format!("selp.f32 {shift}, {zero}, {new_max}, {unseen}"));
        e.line(format!("sub.rn.f32 {old}, {}, {shift}", max[r]));
        let scale = unary(&mut e, UnaryOp::Exp, &old)?;
        e.line(format!("mul.rn.f32 {0}, {0}, {scale}", total[r]));
        for x in acc.iter().flat_map(|o| &o[2 * r..2 * r + 2]) {
            e.line(format!("mul.rn.f32 {x}, {x}, {scale}"));
        }
        e.line(format!("mov.f32 {}, {new_max}", max[r]));
        shifts.push(shift);
    }
    let mut weights = Vec::with_capacity(scores.len());
    for s in &scores {
        let mut p = Vec::with_capacity(4);
        for (i, x) in s.iter().enumerate() {
            let shifted = e.reg(Class::F);
            e.line(format!("sub.rn.f32 {shifted}, {x}, {}", shifts[i / 2]));
            let y = unary(&mut e, UnaryOp::Exp, &shifted)?;
            e.line(format!("add.rn.f32 {0}, {0}, {y}", total[i / 2]));
            p.push(y);
        }
        weights.push(p);
    }
    let mixing = operand_fragments(&mut e, &weights);
    mix(&mut e, &acc, &mixing, &values);
    e.body.push_str(&format!("{next}:\n"));
    let more = e.reg(Class::P);
    e.line(format!("add.u32 {start}, {start}, {KEYS}"));
    e.line(format!("setp.lt.u32 {more}, {start}, {end}"));
    e.line(format!("@{more} bra {tile_loop}"));

    // Each row's sum over its four lanes; the output rows over their sums, rounded, and
    // max + log(sum), for the rows inside.
    let totals: Vec<String> = total
        .iter()
        .map(|t| across_row(&mut e, t, "add.rn.f32"))
        .collect();
    let mut param = 3;
    if k.out {
        let out = (a[param].as_str(), DType::F32, (t_len, heads, d));
        store_rows(&mut e, &w, &acc, out, |e, x, r| {
            let y = e.reg(Class::F);
            e.line(format!("div.rn.f32 {y}, {x}, {}", totals[r]));
            rounded(e, precision, y)
        })?;
        param += 1;
    }
    if k.lse {
        let first = e.reg(Class::P);
        e.line(format!("setp.eq.u32 {first}, {}, 0", w.pair));
        for r in 0..2 {
            let log = unary(&mut e, UnaryOp::Log, &totals[r])?;
            let (lse, at) = (e.reg(Class::F), e.reg(Class::R));
            let (address, writes) = (e.reg(Class::Rd), e.reg(Class::P));
            e.line(format!("add.rn.f32 {lse}, {}, {log}", max[r]));
            e.line(format!("mad.lo.s32 {at}, {}, {t_len}, {}", w.bh, w.rows[r]));
            e.line(format!("mul.wide.u32 {address}, {at}, 4"));
            e.line(format!("add.s64 {address}, {}, {address}", a[param]));
            e.line(format!("and.pred {writes}, {first}, {}", w.active[r]));
            e.line(format!("@{writes} st.global.f32 [{address}], {lse}"));
        }
    }
    let comment = format!(
        "attention forward on tensor cores: [{}, {t_len}, {heads}, {d}] over {s_len} keys, \
         causal {}, products bf16, out {}, lse {}",
        k.batch, k.causal, k.out, k.lse
    );
    Ok(entry_text(
        &e,
        (&comment, name, &params),
        &[&keys, &values],
        d,
        0,
    ))
}

//! Row scatters on the GPU (an embedding's gradient: whole rows of the operand's leading axis
//! combined with update rows at indices), in one of two ways ([`RowScatterMode`]).
//!
//! Sorted, deterministic and equal to the interpreter bit for bit: `rank` gives each update
//! its place in the order of (row, update position) by counting the updates before it, a tile
//! of keys at a time from shared memory (stable, no atomics); `bounds` finds each row's run of
//! sorted updates; `apply` runs one thread per result element and combines its row's updates
//! into the operand's element in update order, as the interpreter does. Updates whose row is
//! outside the operand sort last and are dropped.
//!
//! Atomic: `copy` writes the operand to the result and `combine` adds (or takes the minimum
//! or maximum of) each update element into it with `red`. Integer sums, minima and maxima are
//! the same in any order, so integers always take this path; float sums take it only when
//! asked (`GpuOptions::atomic_float_scatter`), since their rounding then varies from run to
//! run, as JAX's GPU scatter-add does.

use super::emit::{reg_class, suffix, Class, Emitter};
use super::loops::{entry_header, global_addresses, grid_stride_entry, Thread, Threads};
use super::MathMode;
use ferrax_ir::{DType, Scatter, ScatterCombine, TensorType};
use std::fmt::Write;

/// The most updates the sorted path takes: each rank thread counts over all of them.
pub const MAX_UPDATES: usize = 1 << 16;

/// Threads per block of the rank entry, and so the keys in a tile of shared memory.
pub const RANK_BLOCK: u32 = 256;

/// How a row scatter combines its updates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowScatterMode {
    /// Sorted by row, combined in update order: deterministic.
    Sorted,
    /// Combined into the result by atomic reductions, in the hardware's order.
    Atomic,
}

/// A row scatter's entries: `{name}_rank`, `{name}_bounds` and `{name}_apply` sorted,
/// `{name}_copy` and `{name}_combine` atomic.
#[derive(Clone, Debug, PartialEq)]
pub struct ScatterKernels {
    pub name: String,
    /// Rows of the operand, and elements in a row.
    pub rows: usize,
    pub n: usize,
    /// Update rows (index values).
    pub updates: usize,
    pub index: DType,
    pub dtype: DType,
    pub combine: ScatterCombine,
    pub mode: RowScatterMode,
    /// The operand is one value repeated (a splat constant, as the zeros an embedding's
    /// gradient starts from): its first element is read for every one, so the result is
    /// written without reading a whole operand.
    pub splat_operand: bool,
}

impl ScatterKernels {
    /// The kernels of `s` on these operand types, where it scatters whole rows of the leading
    /// axis at scalar i32/i64 indices with a combiner computed exactly here; `None` otherwise.
    /// Float sums are atomic where `atomic_floats` allows it.
    pub fn plan(
        name: String,
        s: &Scatter,
        (operand, indices, updates): (&TensorType, &TensorType, &TensorType),
        atomic_floats: bool,
    ) -> Option<ScatterKernels> {
        let rank = operand.rank();
        if rank == 0 {
            return None;
        }
        let batch = indices.rank();
        let scalar_indices = s.index_vector_dim == batch
            || (s.index_vector_dim + 1 == batch && indices.dims()[s.index_vector_dim] == 1);
        let batch = if s.index_vector_dim == batch {
            batch
        } else {
            batch - 1
        };
        let rows_of_updates = updates.rank() == batch + rank - 1
            && updates.dims()[batch..] == operand.dims()[1..]
            && s.update_window_dims
                .iter()
                .copied()
                .eq(batch..batch + rank - 1);
        let mode = match atomic_mode(operand.dtype, s.combine, atomic_floats) {
            Some(mode) => mode,
            None if exact_here(operand.dtype, s.combine) => RowScatterMode::Sorted,
            None => return None,
        };
        let n: usize = operand.dims()[1..].iter().product();
        let count = indices.numel();
        let ok = scalar_indices
            && rows_of_updates
            && matches!(indices.dtype, DType::I32 | DType::I64)
            && s.inserted_window_dims == [0]
            && s.scatter_dims_to_operand_dims == [0]
            && s.input_batching_dims.is_empty()
            && (mode == RowScatterMode::Atomic || count <= MAX_UPDATES)
            && operand.numel() > 0
            && operand.numel() < i32::MAX as usize
            && updates.numel() < i32::MAX as usize;
        ok.then(|| ScatterKernels {
            name,
            rows: operand.dims()[0],
            n,
            updates: count,
            index: indices.dtype,
            dtype: operand.dtype,
            combine: s.combine,
            mode,
            splat_operand: false,
        })
    }

    /// These kernels reading the operand as a splat where `splat` says it is one.
    pub fn with_splat_operand(self, splat: bool) -> ScatterKernels {
        ScatterKernels {
            splat_operand: splat,
            ..self
        }
    }

    /// The entries' names, in launch order.
    pub fn entry_names(&self) -> Vec<String> {
        let parts: &[&str] = match self.mode {
            RowScatterMode::Sorted => &["rank", "bounds", "apply"],
            RowScatterMode::Atomic => &["copy", "combine"],
        };
        parts.iter().map(|p| format!("{}_{p}", self.name)).collect()
    }

    /// Elements of the result.
    pub fn len(&self) -> usize {
        self.rows * self.n
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The atomic mode where the GPU's reductions give the interpreter's result in any order
/// (integer sums, minima and maxima), or float sums where the caller allows a varying order.
fn atomic_mode(dtype: DType, how: ScatterCombine, floats: bool) -> Option<RowScatterMode> {
    let integer = match dtype {
        DType::I32 | DType::I64 => true,
        DType::F32 | DType::F64 => false,
        DType::F16
        | DType::BF16
        | DType::U32
        | DType::U8
        | DType::I8
        | DType::I16
        | DType::U16
        | DType::U64
        | DType::Bool
        | DType::C64
        | DType::C128 => return None,
    };
    let atomic = match how {
        ScatterCombine::Add => integer || floats,
        ScatterCombine::Min | ScatterCombine::Max => integer,
        ScatterCombine::Replace | ScatterCombine::Mul => false,
    };
    atomic.then_some(RowScatterMode::Atomic)
}

/// Whether the GPU combines `dtype` values as the interpreter does: all four combiners on
/// i32 and i64; replace, add and mul on f32 and f64 (PTX's float min and max order NaN and
/// signed zeros otherwise).
pub(super) fn exact_here(dtype: DType, how: ScatterCombine) -> bool {
    let float = match dtype {
        DType::F32 | DType::F64 => true,
        DType::I32 | DType::I64 => false,
        DType::F16
        | DType::BF16
        | DType::U32
        | DType::U8
        | DType::I8
        | DType::I16
        | DType::U16
        | DType::U64
        | DType::Bool
        | DType::C64
        | DType::C128 => return false,
    };
    match how {
        ScatterCombine::Replace | ScatterCombine::Add | ScatterCombine::Mul => true,
        ScatterCombine::Min | ScatterCombine::Max => !float,
    }
}

/// Emits the row update `j` targets into `key` (u32): its index if in `0..rows`, else `rows`.
fn key_of(e: &mut Emitter, k: &ScatterKernels, indices: &str, j: &str, key: &str) {
    let (size, ty) = if k.index == DType::I64 {
        (8, "s64")
    } else {
        (4, "s32")
    };
    let (addr, row) = (e.reg(Class::Rd), e.reg(Class::Rd));
    e.line(format!("mul.wide.u32 {addr}, {j}, {size}"));
    e.line(format!("add.s64 {addr}, {indices}, {addr}"));
    if k.index == DType::I64 {
        e.line(format!("ld.global.nc.{ty} {row}, [{addr}]"));
    } else {
        let narrow = e.reg(Class::R);
        e.line(format!("ld.global.nc.{ty} {narrow}, [{addr}]"));
        e.line(format!("cvt.s64.s32 {row}, {narrow}"));
    }
    let (below, above) = (e.reg(Class::P), e.reg(Class::P));
    e.line(format!("setp.lt.s64 {below}, {row}, 0"));
    e.line(format!("setp.ge.s64 {above}, {row}, {}", k.rows));
    e.line(format!("or.pred {below}, {below}, {above}"));
    e.line(format!("cvt.u32.u64 {key}, {row}"));
    e.line(format!("@{below} mov.u32 {key}, {}", k.rows));
}

/// The rank entry: thread `b` counts the updates ordered before it by (row, position) and
/// writes its position and row there: params indices, order (u32), sorted rows (u32). Each
/// block steps over the updates a block at a time (so every thread of a block meets the same
/// barriers), and counts over the keys a tile at a time, each tile computed once per block
/// into shared memory.
fn render_rank(k: &ScatterKernels) -> String {
    let name = format!("{}_rank", k.name);
    let count = k.updates;
    let mut e = Emitter::new(MathMode::Accurate);
    let params: Vec<String> = (0..3).map(|p| format!("{name}_param_{p}")).collect();
    let a = global_addresses(&mut e, &params);
    let Thread {
        ctaid,
        ntid,
        tid,
        nctaid,
    } = Thread::new(&mut e);
    let [base, stride, keys, slot] = e.regs(Class::R);
    e.pre_line(format!("mul.lo.s32 {base}, {ctaid}, {ntid}"));
    e.pre_line(format!("mul.lo.s32 {stride}, {nctaid}, {ntid}"));
    e.pre_line(format!("mov.u32 {keys}, {name}_keys"));
    e.pre_line(format!("mad.lo.s32 {slot}, {tid}, 4, {keys}"));
    let [b, mine, rank, t0, j, key, n, s, other, place] = e.regs(Class::R);
    let [finished, live, load, end, before, same, earlier] = e.regs(Class::P);
    let (tiles, tiles_done, loaded, compare, compared, keyed, placed) = (
        e.label("tile"),
        e.label("tiles_done"),
        e.label("loaded"),
        e.label("compare"),
        e.label("compared"),
        e.label("keyed"),
        e.label("placed"),
    );
    e.line(format!("setp.ge.u32 {finished}, {base}, {count}"));
    e.line(format!("@{finished} bra $L_done"));
    e.line(format!("add.s32 {b}, {base}, {tid}"));
    e.line(format!("setp.lt.u32 {live}, {b}, {count}"));
    e.line(format!("mov.u32 {mine}, 0"));
    e.line(format!("@!{live} bra {keyed}"));
    key_of(&mut e, k, &a[0], &b, &mine);
    e.body.push_str(&format!("{keyed}:\n"));
    e.line(format!("mov.u32 {rank}, 0"));
    e.line(format!("mov.u32 {t0}, 0"));
    e.body.push_str(&format!("{tiles}:\n"));
    e.line(format!("setp.ge.u32 {end}, {t0}, {count}"));
    e.line(format!("@{end} bra {tiles_done}"));
    e.line(format!("add.s32 {j}, {t0}, {tid}"));
    e.line(format!("setp.lt.u32 {load}, {j}, {count}"));
    e.line(format!("@!{load} bra {loaded}"));
    key_of(&mut e, k, &a[0], &j, &key);
    e.line(format!("st.shared.u32 [{slot}], {key}"));
    e.body.push_str(&format!("{loaded}:\n"));
    e.line("bar.sync 0".to_string());
    e.line(format!("sub.s32 {n}, {count}, {t0}"));
    e.line(format!("min.u32 {n}, {n}, {ntid}"));
    e.line(format!("mov.u32 {s}, 0"));
    e.body.push_str(&format!("{compare}:\n"));
    e.line(format!("setp.ge.u32 {end}, {s}, {n}"));
    e.line(format!("@{end} bra {compared}"));
    e.line(format!("mad.lo.s32 {other}, {s}, 4, {keys}"));
    e.line(format!("ld.shared.u32 {other}, [{other}]"));
    e.line(format!("add.s32 {place}, {t0}, {s}"));
    // An update's place in the order is its position.
    e.line(format!("setp.lt.u32 {before}, {other}, {mine}"));
    e.line(format!("setp.eq.u32 {same}, {other}, {mine}"));
    e.line(format!("setp.lt.u32 {earlier}, {place}, {b}"));
    e.line(format!("and.pred {same}, {same}, {earlier}"));
    e.line(format!("or.pred {before}, {before}, {same}"));
    e.line(format!("@{before} add.s32 {rank}, {rank}, 1"));
    e.line(format!("add.s32 {s}, {s}, 1"));
    e.line(format!("bra {compare}"));
    e.body.push_str(&format!("{compared}:\n"));
    e.line("bar.sync 0".to_string());
    e.line(format!("add.s32 {t0}, {t0}, {ntid}"));
    e.line(format!("bra {tiles}"));
    e.body.push_str(&format!("{tiles_done}:\n"));
    e.line(format!("@!{live} bra {placed}"));
    emit_place(&mut e, (&a[1], &a[2]), &rank, (&b, &mine));
    e.body.push_str(&format!("{placed}:\n"));
    e.line(format!("add.s32 {base}, {base}, {stride}"));
    e.line("bra $L_rank".to_string());
    let mut out = String::new();
    entry_header(
        &mut out,
        &name,
        &params,
        Threads::AtMost(RANK_BLOCK as usize),
    );
    let _ = writeln!(
        out,
        "\t.shared .align 8 .b8 {name}_keys[{}];",
        4 * RANK_BLOCK
    );
    e.declare(&mut out);
    out.push_str(&e.pre);
    out.push_str("$L_rank:\n");
    out.push_str(&e.body);
    out.push_str("$L_done:\n\tret;\n}\n");
    out
}

/// The bounds entry: where each row's run starts among the sorted rows, and one past the
/// last row where they end: params sorted rows (u32), bounds (u32, rows + 1).
fn render_bounds(k: &ScatterKernels) -> String {
    let name = format!("{}_bounds", k.name);
    grid_stride_entry(&name, 2, k.rows + 1, "bounds", |e, a, row| {
        let (lo, at) = (e.reg(Class::R), e.reg(Class::Rd));
        lower_bound(e, k.updates, &a[0], row, &lo);
        e.line(format!("mul.wide.u32 {at}, {row}, 4"));
        e.line(format!("add.s64 {at}, {}, {at}", a[1]));
        e.line(format!("st.global.u32 [{at}], {lo}"));
    })
}

/// Counts, over the `count` entries, those before (`key`, `place`) in (key, place) order,
/// `others` giving entry `j`'s key and place; returns the register holding the count.
pub(super) fn emit_count_before(
    e: &mut Emitter,
    count: usize,
    (key, place): (&str, &str),
    others: impl Fn(&mut Emitter, &str) -> (String, String),
) -> String {
    let (rank, j) = (e.reg(Class::R), e.reg(Class::R));
    e.line(format!("mov.u32 {rank}, 0"));
    e.line(format!("mov.u32 {j}, 0"));
    let (top, done) = (e.label("count"), e.label("counted"));
    e.body.push_str(&format!("{top}:\n"));
    let (end, before, same, earlier, one) = (
        e.reg(Class::P),
        e.reg(Class::P),
        e.reg(Class::P),
        e.reg(Class::P),
        e.reg(Class::R),
    );
    e.line(format!("setp.ge.u32 {end}, {j}, {count}"));
    e.line(format!("@{end} bra {done}"));
    let (other, other_place) = others(e, &j);
    e.line(format!("setp.lt.u32 {before}, {other}, {key}"));
    e.line(format!("setp.eq.u32 {same}, {other}, {key}"));
    e.line(format!("setp.lt.u32 {earlier}, {other_place}, {place}"));
    e.line(format!("and.pred {same}, {same}, {earlier}"));
    e.line(format!("or.pred {before}, {before}, {same}"));
    e.line(format!("selp.u32 {one}, 1, 0, {before}"));
    e.line(format!("add.u32 {rank}, {rank}, {one}"));
    e.line(format!("add.u32 {j}, {j}, 1"));
    e.line(format!("bra {top}"));
    e.body.push_str(&format!("{done}:\n"));
    rank
}

/// Writes `number` to the order and `key` to the sorted keys (params `order`, `sorted`), at
/// position `rank`.
pub(super) fn emit_place(
    e: &mut Emitter,
    (order, sorted): (&str, &str),
    rank: &str,
    (number, key): (&str, &str),
) {
    let (at, target) = (e.reg(Class::Rd), e.reg(Class::Rd));
    e.line(format!("mul.wide.u32 {at}, {rank}, 4"));
    e.line(format!("add.s64 {target}, {order}, {at}"));
    e.line(format!("st.global.u32 [{target}], {number}"));
    e.line(format!("add.s64 {target}, {sorted}, {at}"));
    e.line(format!("st.global.u32 [{target}], {key}"));
}

/// Emits the first of the `count` sorted keys at `rows` that is not below `row` into `lo`.
pub(super) fn lower_bound(e: &mut Emitter, count: usize, rows: &str, row: &str, lo: &str) {
    let (hi, mid, at, value) = (
        e.reg(Class::R),
        e.reg(Class::R),
        e.reg(Class::Rd),
        e.reg(Class::R),
    );
    let (found, below) = (e.reg(Class::P), e.reg(Class::P));
    e.line(format!("mov.u32 {lo}, 0"));
    e.line(format!("mov.u32 {hi}, {count}"));
    let (top, done) = (e.label("search"), e.label("searched"));
    e.body.push_str(&format!("{top}:\n"));
    e.line(format!("setp.ge.u32 {found}, {lo}, {hi}"));
    e.line(format!("@{found} bra {done}"));
    e.line(format!("add.u32 {mid}, {lo}, {hi}"));
    e.line(format!("shr.u32 {mid}, {mid}, 1"));
    e.line(format!("mul.wide.u32 {at}, {mid}, 4"));
    e.line(format!("add.s64 {at}, {rows}, {at}"));
    e.line(format!("ld.global.u32 {value}, [{at}]"));
    e.line(format!("setp.lt.u32 {below}, {value}, {row}"));
    e.line(format!("@{below} add.u32 {lo}, {mid}, 1"));
    e.line(format!("@!{below} mov.u32 {hi}, {mid}"));
    e.line(format!("bra {top}"));
    e.body.push_str(&format!("{done}:\n"));
}

/// `acc = combine(acc, v)` on registers of `dtype`.
pub(super) fn combine(e: &mut Emitter, (dtype, how): (DType, ScatterCombine), acc: &str, v: &str) {
    let (t, _) = suffix(dtype);
    let float = matches!(dtype, DType::F32 | DType::F64);
    let line = match (how, float) {
        (ScatterCombine::Replace, _) => format!("mov.{t} {acc}, {v}"),
        (ScatterCombine::Add, true) => format!("add.rn.{t} {acc}, {acc}, {v}"),
        (ScatterCombine::Mul, true) => format!("mul.rn.{t} {acc}, {acc}, {v}"),
        (ScatterCombine::Add, false) => format!("add.{t} {acc}, {acc}, {v}"),
        (ScatterCombine::Mul, false) => format!("mul.lo.{t} {acc}, {acc}, {v}"),
        (ScatterCombine::Min, _) => format!("min.{t} {acc}, {acc}, {v}"),
        (ScatterCombine::Max, _) => format!("max.{t} {acc}, {acc}, {v}"),
    };
    e.line(line);
}

/// The apply entry: params operand, updates, order, bounds, result.
fn render_apply(k: &ScatterKernels) -> String {
    let name = format!("{}_apply", k.name);
    grid_stride_entry(&name, 5, k.len(), "apply", |e, a, i| {
        let (row, col) = (e.reg(Class::R), e.reg(Class::R));
        e.line(format!("div.u32 {row}, {i}, {}", k.n));
        e.line(format!("rem.u32 {col}, {i}, {}", k.n));
        let col64 = e.reg(Class::Rd);
        e.line(format!("cvt.u64.u32 {col64}, {col}"));
        let (n, size) = (k.n, k.dtype.size_bytes());
        let (lo, hi, at) = (e.reg(Class::R), e.reg(Class::R), e.reg(Class::Rd));
        e.line(format!("mul.wide.u32 {at}, {row}, 4"));
        e.line(format!("add.s64 {at}, {}, {at}", a[3]));
        e.line(format!("ld.global.u32 {lo}, [{at}]"));
        e.line(format!("ld.global.u32 {hi}, [{at}+4]"));
        // Update `b`'s element of this column: (b * n + col) * size, in 64 bits.
        let element = |e: &mut Emitter, b: &str| {
            let elem = e.reg(Class::Rd);
            e.line(format!("mul.wide.u32 {elem}, {b}, {n}"));
            e.line(format!("add.s64 {elem}, {elem}, {col64}"));
            e.line(format!("mul.lo.s64 {elem}, {elem}, {size}"));
            elem
        };
        let operand = (k.splat_operand, a[0].as_str());
        emit_apply(
            e,
            (k.dtype, k.combine),
            a,
            operand,
            (i, (&lo, &hi)),
            element,
        );
    })
}

/// Registers holding the run `lo..hi` of the `count` sorted keys at `sorted` equal to `key`.
pub(super) fn sorted_run(
    e: &mut Emitter,
    count: usize,
    sorted: &str,
    key: &str,
) -> (String, String) {
    let (lo, hi, next) = (e.reg(Class::R), e.reg(Class::R), e.reg(Class::R));
    lower_bound(e, count, sorted, key, &lo);
    e.line(format!("add.u32 {next}, {key}, 1"));
    lower_bound(e, count, sorted, &next, &hi);
    (lo, hi)
}

/// The apply step of both sorted scatter forms, at result element `i` whose updates are the
/// sorted run `lo..hi`: the operand's element (or its first, where it is a splat) combined, in
/// order, with each update (param 1, at the byte offset `element` gives for the update's
/// number read from the order, param 2), then stored to the result (param 4).
pub(super) fn emit_apply(
    e: &mut Emitter,
    (dtype, how): (DType, ScatterCombine),
    a: &[String],
    (splat, operand): (bool, &str),
    (i, (lo, hi)): (&str, (&str, &str)),
    element: impl Fn(&mut Emitter, &str) -> String,
) {
    let size = dtype.size_bytes();
    let (t, _) = suffix(dtype);
    let (at, acc) = (e.reg(Class::Rd), e.reg(reg_class(dtype)));
    e.line(format!("mul.wide.u32 {at}, {i}, {size}"));
    emit_operand_load(e, (splat, operand), &at, t, &acc);
    let (top, done) = (e.label("combine"), e.label("combined"));
    let (end, number, offset, value) = (
        e.reg(Class::P),
        e.reg(Class::R),
        e.reg(Class::Rd),
        e.reg(reg_class(dtype)),
    );
    e.body.push_str(&format!("{top}:\n"));
    e.line(format!("setp.ge.u32 {end}, {lo}, {hi}"));
    e.line(format!("@{end} bra {done}"));
    e.line(format!("mul.wide.u32 {offset}, {lo}, 4"));
    e.line(format!("add.s64 {offset}, {}, {offset}", a[2]));
    e.line(format!("ld.global.u32 {number}, [{offset}]"));
    let elem = element(e, &number);
    e.line(format!("add.s64 {elem}, {}, {elem}", a[1]));
    e.line(format!("ld.global.nc.{t} {value}, [{elem}]"));
    combine(e, (dtype, how), &acc, &value);
    e.line(format!("add.u32 {lo}, {lo}, 1"));
    e.line(format!("bra {top}"));
    e.body.push_str(&format!("{done}:\n"));
    let target = e.reg(Class::Rd);
    e.line(format!("add.s64 {target}, {}, {at}", a[4]));
    e.line(format!("st.global.{t} [{target}], {acc}"));
}

/// Loads into `value` the operand's element at byte offset `at`, or its first where it is a
/// splat (one address every thread reads, served from cache).
fn emit_operand_load(
    e: &mut Emitter,
    (splat, operand): (bool, &str),
    at: &str,
    t: &str,
    value: &str,
) {
    if splat {
        e.line(format!("ld.global.nc.{t} {value}, [{operand}]"));
    } else {
        let source = e.reg(Class::Rd);
        e.line(format!("add.s64 {source}, {operand}, {at}"));
        e.line(format!("ld.global.nc.{t} {value}, [{source}]"));
    }
}

/// The copy entry of the atomic path (a fill, where the operand is a splat): params operand,
/// result.
fn render_copy(k: &ScatterKernels) -> String {
    let name = format!("{}_copy", k.name);
    let (size, (_, bits)) = (k.dtype.size_bytes(), suffix(k.dtype));
    grid_stride_entry(&name, 2, k.len(), "copy", |e, a, i| {
        let (at, to, v) = (
            e.reg(Class::Rd),
            e.reg(Class::Rd),
            e.reg(reg_class(k.dtype)),
        );
        e.line(format!("mul.wide.u32 {at}, {i}, {size}"));
        emit_operand_load(e, (k.splat_operand, &a[0]), &at, bits, &v);
        e.line(format!("add.s64 {to}, {}, {at}", a[1]));
        e.line(format!("st.global.{bits} [{to}], {v}"));
    })
}

/// The combine entry of the atomic path, one thread per update element: its row's element of
/// the result, where the row is inside the operand, takes the update by `red`. Params
/// indices, updates, result.
fn render_combine(k: &ScatterKernels) -> String {
    let name = format!("{}_combine", k.name);
    let (n, size) = (k.n, k.dtype.size_bytes());
    let op = match k.combine {
        ScatterCombine::Add => "add",
        ScatterCombine::Min => "min",
        ScatterCombine::Max => "max",
        // Never planned atomic (`atomic_mode`).
        ScatterCombine::Replace | ScatterCombine::Mul => "add",
    };
    // PTX has no signed 64-bit `red.add`; two's complement sums are the unsigned ones.
    let ty = match (k.dtype, k.combine) {
        (DType::I64, ScatterCombine::Add) => "u64",
        (d, _) => suffix(d).0,
    };
    grid_stride_entry(&name, 3, k.updates * k.n, "combine", |e, a, i| {
        let (b, col, key) = (e.reg(Class::R), e.reg(Class::R), e.reg(Class::R));
        e.line(format!("div.u32 {b}, {i}, {n}"));
        e.line(format!("rem.u32 {col}, {i}, {n}"));
        key_of(e, k, &a[0], &b, &key);
        let (outside, skip) = (e.reg(Class::P), e.label("dropped"));
        e.line(format!("setp.ge.u32 {outside}, {key}, {}", k.rows));
        e.line(format!("@{outside} bra {skip}"));
        let (from, to, v) = (
            e.reg(Class::Rd),
            e.reg(Class::Rd),
            e.reg(reg_class(k.dtype)),
        );
        e.line(format!("mul.wide.u32 {from}, {i}, {size}"));
        e.line(format!("add.s64 {from}, {}, {from}", a[1]));
        e.line(format!("ld.global.nc.{} {v}, [{from}]", suffix(k.dtype).0));
        e.line(format!("mad.lo.s32 {col}, {key}, {n}, {col}"));
        e.line(format!("mul.wide.u32 {to}, {col}, {size}"));
        e.line(format!("add.s64 {to}, {}, {to}", a[2]));
        e.line(format!("red.global.{op}.{ty} [{to}], {v}"));
        e.body.push_str(&format!("{skip}:\n"));
    })
}

/// A row scatter's entries (without the module header).
pub fn render_scatter(k: &ScatterKernels) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "// row scatter ({:?}, {:?}) of {} update rows into {} rows of {} elements",
        k.combine, k.mode, k.updates, k.rows, k.n
    );
    let entries = match k.mode {
        RowScatterMode::Sorted => [render_rank(k), render_bounds(k), render_apply(k)].to_vec(),
        RowScatterMode::Atomic => [render_copy(k), render_combine(k)].to_vec(),
    };
    s.push_str(&entries.join("\n"));
    s
}

//! Row scatters on the GPU (an embedding's gradient: whole rows of the operand's leading axis
//! combined with update rows at indices), deterministic and equal to the interpreter bit for
//! bit. Two entries: `rank` gives each update its place in the order of (row, update
//! position), counting the updates before it (stable, no atomics); `apply` runs one thread per
//! result element, finds its row's run of updates by binary search and combines them into the
//! operand's element in update order, as the interpreter does. Updates whose row is outside
//! the operand sort last and are dropped. Atomics would be faster for floats, but their order
//! (and so the rounding) would change from run to run.

use super::emit::{reg_class, suffix, Class, Emitter};
use super::loops::grid_stride_entry;
use ferrax_ir::{DType, Scatter, ScatterCombine, TensorType};
use std::fmt::Write;

/// The most updates the rank entry takes: each thread counts over all of them.
pub const MAX_UPDATES: usize = 1 << 16;

/// A row scatter's two entries (`{name}_rank`, `{name}_apply`).
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
}

impl ScatterKernels {
    /// The kernels of `s` on these operand types, where it scatters whole rows of the leading
    /// axis at scalar i32/i64 indices with a combiner computed exactly here; `None` otherwise.
    pub fn plan(
        name: String,
        s: &Scatter,
        (operand, indices, updates): (&TensorType, &TensorType, &TensorType),
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
        let exact = exact_here(operand.dtype, s.combine);
        let n: usize = operand.dims()[1..].iter().product();
        let count = indices.numel();
        let ok = scalar_indices
            && rows_of_updates
            && exact
            && matches!(indices.dtype, DType::I32 | DType::I64)
            && s.inserted_window_dims == [0]
            && s.scatter_dims_to_operand_dims == [0]
            && s.input_batching_dims.is_empty()
            && count <= MAX_UPDATES
            && operand.numel() > 0
            && operand.numel() < i32::MAX as usize;
        ok.then(|| ScatterKernels {
            name,
            rows: operand.dims()[0],
            n,
            updates: count,
            index: indices.dtype,
            dtype: operand.dtype,
            combine: s.combine,
        })
    }

    pub fn rank_name(&self) -> String {
        format!("{}_rank", self.name)
    }

    pub fn apply_name(&self) -> String {
        format!("{}_apply", self.name)
    }

    /// Elements the apply entry runs over.
    pub fn len(&self) -> usize {
        self.rows * self.n
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Whether the GPU combines `dtype` values as the interpreter does: all four combiners on
/// i32 and i64; replace, add and mul on f32 and f64 (PTX's float min and max order NaN and
/// signed zeros otherwise).
pub(super) fn exact_here(dtype: DType, how: ScatterCombine) -> bool {
    let float = match dtype {
        DType::F32 | DType::F64 => true,
        DType::I32 | DType::I64 => false,
        DType::F16 | DType::BF16 | DType::U8 | DType::Bool => return false,
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
/// writes its position and row there: params indices, order (u32), sorted rows (u32).
fn render_rank(k: &ScatterKernels) -> String {
    grid_stride_entry(&k.rank_name(), 3, k.updates, "rank", |e, a, b| {
        let (mine, other) = (e.reg(Class::R), e.reg(Class::R));
        key_of(e, k, &a[0], b, &mine);
        // An update's place in the order is its position.
        let others = |e: &mut Emitter, j: &str| {
            key_of(e, k, &a[0], j, &other);
            (other.clone(), j.to_string())
        };
        let rank = emit_count_before(e, k.updates, (&mine, b), others);
        emit_place(e, (&a[1], &a[2]), &rank, (b, &mine));
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

/// The apply entry: params operand, updates, order, sorted rows, result.
fn render_apply(k: &ScatterKernels) -> String {
    grid_stride_entry(&k.apply_name(), 5, k.len(), "apply", |e, a, i| {
        let (row, col) = (e.reg(Class::R), e.reg(Class::R));
        e.line(format!("div.u32 {row}, {i}, {}", k.n));
        e.line(format!("rem.u32 {col}, {i}, {}", k.n));
        let col64 = e.reg(Class::Rd);
        e.line(format!("cvt.u64.u32 {col64}, {col}"));
        let (n, size) = (k.n, k.dtype.size_bytes());
        // Update `b`'s element of this column: (b * n + col) * size, in 64 bits.
        let element = |e: &mut Emitter, b: &str| {
            let elem = e.reg(Class::Rd);
            e.line(format!("mul.wide.u32 {elem}, {b}, {n}"));
            e.line(format!("add.s64 {elem}, {elem}, {col64}"));
            e.line(format!("mul.lo.s64 {elem}, {elem}, {size}"));
            elem
        };
        emit_apply(e, (k.dtype, k.combine), k.updates, a, (i, &row), element);
    })
}

/// The apply step of both scatter forms, at result element `i` whose updates are those of
/// sorted key `key`: the operand's element (param 0) combined, in order, with each update
/// (param 1, at the byte offset `element` gives for the update's number read from the order,
/// param 2), then stored to the result (param 4). The sorted keys are param 3.
pub(super) fn emit_apply(
    e: &mut Emitter,
    (dtype, how): (DType, ScatterCombine),
    count: usize,
    a: &[String],
    (i, key): (&str, &str),
    element: impl Fn(&mut Emitter, &str) -> String,
) {
    let size = dtype.size_bytes();
    let (t, _) = suffix(dtype);
    let (lo, hi, next) = (e.reg(Class::R), e.reg(Class::R), e.reg(Class::R));
    lower_bound(e, count, &a[3], key, &lo);
    e.line(format!("add.u32 {next}, {key}, 1"));
    lower_bound(e, count, &a[3], &next, &hi);
    let (at, source, acc) = (e.reg(Class::Rd), e.reg(Class::Rd), e.reg(reg_class(dtype)));
    e.line(format!("mul.wide.u32 {at}, {i}, {size}"));
    e.line(format!("add.s64 {source}, {}, {at}", a[0]));
    e.line(format!("ld.global.nc.{t} {acc}, [{source}]"));
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

/// Both entries of a row scatter (without the module header).
pub fn render_scatter(k: &ScatterKernels) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "// row scatter ({:?}) of {} update rows into {} rows of {} elements",
        k.combine, k.updates, k.rows, k.n
    );
    s.push_str(&render_rank(k));
    s.push('\n');
    s.push_str(&render_apply(k));
    s
}

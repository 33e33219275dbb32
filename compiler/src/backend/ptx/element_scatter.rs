//! Scatters on the GPU that are not row scatters (any dimension numbers: a gradient of
//! `take_along_axis`, updates of columns), for up to [`MAX_UPDATE_ELEMENTS`] update elements,
//! deterministic and equal to the interpreter bit for bit. Three entries: `keys` gives each
//! update element its result element (or, where its window is dropped, one past the last)
//! and its place in the interpreter's order (batch position, then window element); `rank`
//! sorts them by (result element, place) by counting; `apply` runs one thread per result
//! element, combining its updates in that order into the operand's element.

use super::emit::{Class, Emitter};
use super::loops::grid_stride_entry;
use super::scatter::{emit_apply, emit_count_before, emit_place, exact_here, sorted_run};
use ferrax_ir::{DType, IndexMap, Scatter, ScatterCombine, Shape, TensorType};
use std::fmt::Write;

/// The most update elements: each rank thread counts over all of them.
pub const MAX_UPDATE_ELEMENTS: usize = 1 << 16;

/// One update dimension as the keys entry steps it.
#[derive(Clone, Debug, PartialEq)]
pub struct UpdateDim {
    pub size: usize,
    /// Operand stride it moves (window and batching dimensions), the indices' stride (batch
    /// dimensions), and its weight in the batch position and in the window element.
    pub operand_stride: usize,
    pub index_stride: usize,
    pub batch_weight: usize,
    pub window_weight: usize,
}

/// A scatter's three entries (`{name}_keys`, `{name}_rank`, `{name}_apply`).
#[derive(Clone, Debug, PartialEq)]
pub struct ElementScatter {
    pub name: String,
    pub update_dims: Vec<UpdateDim>,
    /// Per index vector entry: its offset in the indices, the operand stride of the
    /// dimension it starts, and the largest start at which the window fits.
    pub starts: Vec<(usize, usize, usize)>,
    /// Update elements in a window (the batch position's weight in the order).
    pub window: usize,
    /// Elements of the operand (and result), and of the updates.
    pub operand_len: usize,
    pub updates: usize,
    pub index: DType,
    pub dtype: DType,
    pub combine: ScatterCombine,
}

impl ElementScatter {
    /// The entries of `s` on these operand types; `None` for more update elements than the
    /// rank entry takes, indices of another type than i32 or i64, a combiner the GPU does not
    /// compute exactly on the type, or windows that never fit.
    pub fn plan(
        name: String,
        s: &Scatter,
        (operand, indices, updates): (&TensorType, &TensorType, &TensorType),
    ) -> Option<ElementScatter> {
        let ok = exact_here(operand.dtype, s.combine)
            && matches!(indices.dtype, DType::I32 | DType::I64)
            && updates.numel() <= MAX_UPDATE_ELEMENTS
            && operand.numel() > 0
            && operand.numel() < i32::MAX as usize;
        if !ok {
            return None;
        }
        let map = IndexMap::of_scatter(s, operand.rank(), updates.rank());
        let (in_strides, ind_strides) = (operand.shape.strides(), indices.shape.strides());
        let batch_of_indices = map.indices_batch_dims(indices.rank());
        let extent = s.window_extent(operand.rank(), updates.dims());
        let batch_sizes: Vec<usize> = map.batch_dims.iter().map(|&d| updates.dims()[d]).collect();
        let window_sizes: Vec<usize> = map.window_dims.iter().map(|&d| updates.dims()[d]).collect();
        let (batch_weights, window_weights) = (
            Shape::new(batch_sizes.clone()).strides(),
            Shape::new(window_sizes.clone()).strides(),
        );
        let mut update_dims: Vec<UpdateDim> = updates
            .dims()
            .iter()
            .map(|&size| UpdateDim {
                size,
                operand_stride: 0,
                index_stride: 0,
                batch_weight: 0,
                window_weight: 0,
            })
            .collect();
        for (j, (&u, &d)) in map
            .window_dims
            .iter()
            .zip(&map.window_to_operand)
            .enumerate()
        {
            update_dims[u].operand_stride = in_strides[d];
            update_dims[u].window_weight = window_weights[j];
        }
        for (p, (&u, &i)) in map.batch_dims.iter().zip(&batch_of_indices).enumerate() {
            update_dims[u].index_stride = ind_strides[i];
            update_dims[u].batch_weight = batch_weights[p];
            for (d, batch) in map.operand_to_batch.iter().enumerate() {
                if *batch == Some(p) {
                    update_dims[u].operand_stride = in_strides[d];
                }
            }
        }
        let vector_stride = ind_strides.get(s.index_vector_dim).copied().unwrap_or(0);
        let starts = s
            .scatter_dims_to_operand_dims
            .iter()
            .enumerate()
            .map(|(k, &d)| {
                let max = operand.dims()[d].checked_sub(extent[d])?;
                Some((k * vector_stride, in_strides[d], max))
            })
            .collect::<Option<Vec<_>>>()?;
        Some(ElementScatter {
            name,
            update_dims,
            starts,
            window: window_sizes.iter().product(),
            operand_len: operand.numel(),
            updates: updates.numel(),
            index: indices.dtype,
            dtype: operand.dtype,
            combine: s.combine,
        })
    }

    pub fn entry_names(&self) -> [String; 3] {
        ["keys", "rank", "apply"].map(|what| format!("{}_{what}", self.name))
    }
}

/// The keys entry: params indices, result element per update element (u32), place (u32).
fn render_keys(k: &ElementScatter) -> String {
    let [name, _, _] = k.entry_names();
    grid_stride_entry(&name, 3, k.updates, "keys", |e, a, index| {
        let (left, coordinate, to, at, batch, within) = (
            e.reg(Class::R),
            e.reg(Class::R),
            e.reg(Class::R),
            e.reg(Class::R),
            e.reg(Class::R),
            e.reg(Class::R),
        );
        e.line(format!("mov.u32 {left}, {index}"));
        for r in [&to, &at, &batch, &within] {
            e.line(format!("mov.u32 {r}, 0"));
        }
        for (d, dim) in k.update_dims.iter().enumerate().rev() {
            if d > 0 {
                e.line(format!("rem.u32 {coordinate}, {left}, {}", dim.size));
                e.line(format!("div.u32 {left}, {left}, {}", dim.size));
            } else {
                e.line(format!("mov.u32 {coordinate}, {left}"));
            }
            for (r, w) in [
                (&to, dim.operand_stride),
                (&at, dim.index_stride),
                (&batch, dim.batch_weight),
                (&within, dim.window_weight),
            ] {
                if w != 0 {
                    e.line(format!("mad.lo.s32 {r}, {coordinate}, {w}, {r}"));
                }
            }
        }
        let index_size = if k.index == DType::I64 { 8 } else { 4 };
        let (dropped, outside, zero) = (e.reg(Class::P), e.reg(Class::P), e.reg(Class::R));
        e.line(format!("mov.u32 {zero}, 0"));
        e.line(format!("setp.ne.u32 {dropped}, {zero}, 0"));
        for &(offset, stride, max) in &k.starts {
            let (entry, address, start, narrow) = (
                e.reg(Class::R),
                e.reg(Class::Rd),
                e.reg(Class::Rd),
                e.reg(Class::R),
            );
            e.line(format!("add.u32 {entry}, {at}, {offset}"));
            e.line(format!("mul.wide.u32 {address}, {entry}, {index_size}"));
            e.line(format!("add.s64 {address}, {}, {address}", a[0]));
            if k.index == DType::I64 {
                e.line(format!("ld.global.nc.s64 {start}, [{address}]"));
            } else {
                e.line(format!("ld.global.nc.s32 {narrow}, [{address}]"));
                e.line(format!("cvt.s64.s32 {start}, {narrow}"));
            }
            e.line(format!("setp.lt.s64 {outside}, {start}, 0"));
            e.line(format!("or.pred {dropped}, {dropped}, {outside}"));
            e.line(format!("setp.gt.s64 {outside}, {start}, {max}"));
            e.line(format!("or.pred {dropped}, {dropped}, {outside}"));
            e.line(format!("cvt.u32.u64 {narrow}, {start}"));
            e.line(format!("mad.lo.s32 {to}, {narrow}, {stride}, {to}"));
        }
        e.line(format!("@{dropped} mov.u32 {to}, {}", k.operand_len));
        e.line(format!(
            "mad.lo.s32 {batch}, {batch}, {}, {within}",
            k.window
        ));
        let (offset, target) = (e.reg(Class::Rd), e.reg(Class::Rd));
        e.line(format!("mul.wide.u32 {offset}, {index}, 4"));
        e.line(format!("add.s64 {target}, {}, {offset}", a[1]));
        e.line(format!("st.global.u32 [{target}], {to}"));
        e.line(format!("add.s64 {target}, {}, {offset}", a[2]));
        e.line(format!("st.global.u32 [{target}], {batch}"));
    })
}

/// The rank entry: params result elements, places, order (u32), sorted result elements (u32).
fn render_rank(k: &ElementScatter) -> String {
    let [_, name, _] = k.entry_names();
    grid_stride_entry(&name, 4, k.updates, "rank", |e, a, index| {
        let load = |e: &mut Emitter, base: &str, i: &str| {
            let (at, value) = (e.reg(Class::Rd), e.reg(Class::R));
            e.line(format!("mul.wide.u32 {at}, {i}, 4"));
            e.line(format!("add.s64 {at}, {base}, {at}"));
            e.line(format!("ld.global.u32 {value}, [{at}]"));
            value
        };
        let mine = load(e, &a[0], index);
        let place = load(e, &a[1], index);
        let others = |e: &mut Emitter, j: &str| (load(e, &a[0], j), load(e, &a[1], j));
        let rank = emit_count_before(e, k.updates, (&mine, &place), others);
        emit_place(e, (&a[2], &a[3]), &rank, (index, &mine));
    })
}

/// The apply entry: params operand, updates, order, sorted result elements, result.
fn render_apply(k: &ElementScatter) -> String {
    let [_, _, name] = k.entry_names();
    let size = k.dtype.size_bytes();
    grid_stride_entry(&name, 5, k.operand_len, "apply", |e, a, i| {
        let element = |e: &mut Emitter, u: &str| {
            let offset = e.reg(Class::Rd);
            e.line(format!("mul.wide.u32 {offset}, {u}, {size}"));
            offset
        };
        let (lo, hi) = sorted_run(e, k.updates, &a[3], i);
        emit_apply(
            e,
            (k.dtype, k.combine),
            a,
            (false, &a[0]),
            (i, (&lo, &hi)),
            element,
        );
    })
}

/// The three entries of an element scatter (without the module header).
pub fn render_element_scatter(k: &ElementScatter) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "// scatter ({:?}) of {} update elements into {} elements, starts {:?}",
        k.combine, k.updates, k.operand_len, k.starts
    );
    s.push_str(&render_keys(k));
    s.push('\n');
    s.push_str(&render_rank(k));
    s.push('\n');
    s.push_str(&render_apply(k));
    s
}

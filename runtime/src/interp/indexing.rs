//! Indexing by values. Gather and scatter walk the batch positions of their indices; at each
//! one they find the window's start in the operand and then copy (or combine) the whole
//! window as strided rows, so a row gather moves rows, not elements. Dynamic slices are the
//! one-window case with the start indices as scalars.

use super::complex;
use super::movement::for_each_row;
use super::num::{fmax, fmin, Float, Int};
use super::undefined;
use crate::{Array, RuntimeError};
use ferrax_ir::{map_elements, Element, Elements, Gather, IndexMap, Scatter, ScatterCombine};

/// The indices' values widened to i64 (every integer dtype fits).
fn index_values(indices: &Array) -> Result<Vec<i64>, RuntimeError> {
    Ok(match indices.elements() {
        Elements::I32(v) => v.iter().map(|&i| i64::from(i)).collect(),
        Elements::I64(v) => v.clone(),
        Elements::U32(v) => v.iter().map(|&i| i64::from(i)).collect(),
        Elements::U8(v) => v.iter().map(|&i| i64::from(i)).collect(),
        Elements::I8(v) => v.iter().map(|&i| i64::from(i)).collect(),
        Elements::I16(v) => v.iter().map(|&i| i64::from(i)).collect(),
        Elements::U16(v) => v.iter().map(|&i| i64::from(i)).collect(),
        // Beyond i64's range is out of bounds either way: clamped or dropped as the largest.
        Elements::U64(v) => v
            .iter()
            .map(|&i| i64::try_from(i).unwrap_or(i64::MAX))
            .collect(),
        other => return Err(undefined("index", other.dtype())),
    })
}

/// Steps a multi-index over `dims` in row-major order; false once it wraps around.
fn advance(idx: &mut [usize], dims: &[usize]) -> bool {
    for k in (0..idx.len()).rev() {
        idx[k] += 1;
        if idx[k] < dims[k] {
            return true;
        }
        idx[k] = 0;
    }
    false
}

/// One window to move: its element dims and the strided placement on each side.
struct Window<'a> {
    dims: &'a [usize],
    src: (usize, &'a [usize]),
    dst: (usize, &'a [usize]),
}

/// `dst[j] = f(dst[j], src[i])` for each element of the window.
fn combine_window<T: Copy>(src: &[T], dst: &mut [T], w: &Window, f: impl Fn(T, T) -> T) {
    let (inner, src_step, dst_step) = match w.dims.last() {
        Some(&n) => (n, w.src.1[w.dims.len() - 1], w.dst.1[w.dims.len() - 1]),
        None => (1, 0, 0),
    };
    for_each_row(w.dims, w.src, w.dst, |s, d| {
        for j in 0..inner {
            let at = d + j * dst_step;
            dst[at] = f(dst[at], src[s + j * src_step]);
        }
    });
}

pub(super) fn gather(
    g: &Gather,
    operand: &Array,
    indices: &Array,
    result_dims: &[usize],
) -> Result<Elements, RuntimeError> {
    let idx = index_values(indices)?;
    Ok(
        map_elements!(operand.elements(), v => gather_typed(g, (operand, v), indices, &idx, result_dims)),
    )
}

fn gather_typed<T: Copy>(
    g: &Gather,
    (operand, src): (&Array, &[T]),
    indices: &Array,
    idx: &[i64],
    result_dims: &[usize],
) -> Vec<T> {
    let total: usize = result_dims.iter().product();
    // A non-empty result reads at least one element: the slice sizes are all non-zero.
    let Some(&first) = src.first().filter(|_| total > 0) else {
        return Vec::new();
    };
    let map = IndexMap::of_gather(g, operand.dims().len(), result_dims.len());
    let batch_sizes: Vec<usize> = map.batch_dims.iter().map(|&d| result_dims[d]).collect();
    let window: Vec<usize> = map.window_dims.iter().map(|&d| result_dims[d]).collect();
    let out_strides = ferrax_ir::Shape::new(result_dims.to_vec()).strides();
    let in_strides = operand.shape().strides();
    let window_out: Vec<usize> = map.window_dims.iter().map(|&d| out_strides[d]).collect();
    let window_in: Vec<usize> = map
        .window_to_operand
        .iter()
        .map(|&d| in_strides[d])
        .collect();
    let mut out = vec![first; total];
    let mut batch = vec![0usize; batch_sizes.len()];
    let reader = map.start_reader(indices.dims());
    let mut start = Vec::with_capacity(operand.dims().len());
    loop {
        map.start(&reader, idx, &batch, &mut start);
        // Clamped so that the slice lies inside the operand.
        let src_base: usize = (0..operand.dims().len())
            .map(|d| {
                let hi = (operand.dims()[d] - g.slice_sizes[d]) as i64;
                start[d].clamp(0, hi) as usize * in_strides[d]
            })
            .sum();
        let dst_base: usize = map
            .batch_dims
            .iter()
            .zip(&batch)
            .map(|(&d, &b)| b * out_strides[d])
            .sum();
        let w = Window {
            dims: &window,
            src: (src_base, &window_in),
            dst: (dst_base, &window_out),
        };
        combine_window(src, &mut out, &w, |_, v| v);
        if !advance(&mut batch, &batch_sizes) {
            return out;
        }
    }
}

pub(super) fn scatter(
    s: &Scatter,
    operand: &Array,
    indices: &Array,
    updates: &Array,
) -> Result<Elements, RuntimeError> {
    Ok(match (operand.elements(), updates.elements()) {
        (Elements::F32(o), Elements::F32(u)) => {
            Elements::F32(scatter_float(s, operand, indices, updates, o, u)?)
        }
        (Elements::F64(o), Elements::F64(u)) => {
            Elements::F64(scatter_float(s, operand, indices, updates, o, u)?)
        }
        (Elements::F16(o), Elements::F16(u)) => {
            Elements::F16(scatter_float(s, operand, indices, updates, o, u)?)
        }
        (Elements::BF16(o), Elements::BF16(u)) => {
            Elements::BF16(scatter_float(s, operand, indices, updates, o, u)?)
        }
        (Elements::I32(o), Elements::I32(u)) => {
            Elements::I32(scatter_int(s, operand, indices, updates, o, u)?)
        }
        (Elements::I64(o), Elements::I64(u)) => {
            Elements::I64(scatter_int(s, operand, indices, updates, o, u)?)
        }
        (Elements::U32(o), Elements::U32(u)) => {
            Elements::U32(scatter_int(s, operand, indices, updates, o, u)?)
        }
        (Elements::U8(o), Elements::U8(u)) => {
            Elements::U8(scatter_int(s, operand, indices, updates, o, u)?)
        }
        (Elements::I8(o), Elements::I8(u)) => {
            Elements::I8(scatter_int(s, operand, indices, updates, o, u)?)
        }
        (Elements::I16(o), Elements::I16(u)) => {
            Elements::I16(scatter_int(s, operand, indices, updates, o, u)?)
        }
        (Elements::U16(o), Elements::U16(u)) => {
            Elements::U16(scatter_int(s, operand, indices, updates, o, u)?)
        }
        (Elements::U64(o), Elements::U64(u)) => {
            Elements::U64(scatter_int(s, operand, indices, updates, o, u)?)
        }
        (Elements::Bool(o), Elements::Bool(u)) => {
            // Sums and maxima of bools are `or`, products and minima `and`.
            let f: fn(bool, bool) -> bool = match s.combine {
                ScatterCombine::Replace => |_, u| u,
                ScatterCombine::Add | ScatterCombine::Max => |a, u| a | u,
                ScatterCombine::Mul | ScatterCombine::Min => |a, u| a & u,
            };
            Elements::Bool(scatter_with(s, (operand, o), indices, (updates, u), f)?)
        }
        (Elements::C64(o), Elements::C64(u)) => {
            let f = complex::scatter_combine::<f32>(s.combine)?;
            Elements::C64(scatter_with(s, (operand, o), indices, (updates, u), f)?)
        }
        (Elements::C128(o), Elements::C128(u)) => {
            let f = complex::scatter_combine::<f64>(s.combine)?;
            Elements::C128(scatter_with(s, (operand, o), indices, (updates, u), f)?)
        }
        (o, u) => {
            return Err(undefined(
                s.combine.name(),
                if o.dtype() == u.dtype() {
                    o.dtype()
                } else {
                    u.dtype()
                },
            ))
        }
    })
}

fn scatter_float<T: Float>(
    s: &Scatter,
    operand: &Array,
    indices: &Array,
    updates: &Array,
    o: &[T],
    u: &[T],
) -> Result<Vec<T>, RuntimeError> {
    let f: fn(T, T) -> T = match s.combine {
        ScatterCombine::Replace => |_, u| u,
        ScatterCombine::Add => |a, u| T::from_arith(a.to_arith() + u.to_arith()),
        ScatterCombine::Mul => |a, u| T::from_arith(a.to_arith() * u.to_arith()),
        ScatterCombine::Min => |a, u| T::from_arith(fmin(a.to_arith(), u.to_arith())),
        ScatterCombine::Max => |a, u| T::from_arith(fmax(a.to_arith(), u.to_arith())),
    };
    scatter_with(s, (operand, o), indices, (updates, u), f)
}

fn scatter_int<T: Int>(
    s: &Scatter,
    operand: &Array,
    indices: &Array,
    updates: &Array,
    o: &[T],
    u: &[T],
) -> Result<Vec<T>, RuntimeError> {
    let f: fn(T, T) -> T = match s.combine {
        ScatterCombine::Replace => |_, u| u,
        ScatterCombine::Add => T::add,
        ScatterCombine::Mul => T::mul,
        ScatterCombine::Min => Ord::min,
        ScatterCombine::Max => Ord::max,
    };
    scatter_with(s, (operand, o), indices, (updates, u), f)
}

/// The operand with each update window combined in by `f(old, update)`, in row-major order
/// of the updates' batch positions. A window reaching outside the operand is skipped whole.
fn scatter_with<T: Element>(
    s: &Scatter,
    (operand, o): (&Array, &[T]),
    indices: &Array,
    (updates, u): (&Array, &[T]),
    f: fn(T, T) -> T,
) -> Result<Vec<T>, RuntimeError> {
    let map = IndexMap::of_scatter(s, operand.dims().len(), updates.dims().len());
    let idx = index_values(indices)?;
    let mut out = o.to_vec();
    if updates.numel() == 0 {
        return Ok(out);
    }
    let batch_sizes: Vec<usize> = map.batch_dims.iter().map(|&d| updates.dims()[d]).collect();
    let window: Vec<usize> = map.window_dims.iter().map(|&d| updates.dims()[d]).collect();
    let up_strides = updates.shape().strides();
    let op_strides = operand.shape().strides();
    let window_src: Vec<usize> = map.window_dims.iter().map(|&d| up_strides[d]).collect();
    let window_dst: Vec<usize> = map
        .window_to_operand
        .iter()
        .map(|&d| op_strides[d])
        .collect();
    // The window's extent along each operand dimension (1 where it has none).
    let mut extent = vec![1usize; operand.dims().len()];
    for (&d, &n) in map.window_to_operand.iter().zip(&window) {
        extent[d] = n;
    }
    let mut batch = vec![0usize; batch_sizes.len()];
    let reader = map.start_reader(indices.dims());
    let mut start = Vec::with_capacity(operand.dims().len());
    loop {
        map.start(&reader, &idx, &batch, &mut start);
        let inside = start
            .iter()
            .zip(operand.dims().iter().zip(&extent))
            .all(|(&st, (&dim, &ext))| st >= 0 && st as u64 + ext as u64 <= dim as u64);
        if inside {
            let dst_base = start
                .iter()
                .zip(&op_strides)
                .map(|(&st, &stride)| st as usize * stride)
                .sum();
            let src_base = map
                .batch_dims
                .iter()
                .zip(&batch)
                .map(|(&d, &b)| b * up_strides[d])
                .sum();
            let w = Window {
                dims: &window,
                src: (src_base, &window_src),
                dst: (dst_base, &window_dst),
            };
            combine_window(u, &mut out, &w, f);
        }
        if !advance(&mut batch, &batch_sizes) {
            return Ok(out);
        }
    }
}

/// The start of a dynamic slice of `sizes` in `x`: each start index clamped to
/// `0..=dim - size`, as a flat offset.
fn dynamic_base(x: &Array, starts: &[&Array], sizes: &[usize]) -> Result<usize, RuntimeError> {
    let strides = x.shape().strides();
    let mut base = 0;
    for (d, s) in starts.iter().enumerate() {
        let v = index_values(s)?.first().copied().unwrap_or(0);
        let hi = (x.dims()[d] - sizes[d]) as i64;
        base += v.clamp(0, hi) as usize * strides[d];
    }
    Ok(base)
}

pub(super) fn dynamic_slice(
    x: &Array,
    starts: &[&Array],
    sizes: &[usize],
) -> Result<Elements, RuntimeError> {
    let base = dynamic_base(x, starts, sizes)?;
    let strides = x.shape().strides();
    Ok(map_elements!(x.elements(), v => super::movement::gather(v, base, sizes, &strides)))
}

pub(super) fn dynamic_update_slice(
    x: &Array,
    update: &Array,
    starts: &[&Array],
) -> Result<Elements, RuntimeError> {
    let base = dynamic_base(x, starts, update.dims())?;
    let dst_strides = x.shape().strides();
    let src_strides = update.shape().strides();
    let w = Window {
        dims: update.dims(),
        src: (0, &src_strides),
        dst: (base, &dst_strides),
    };
    fn write<T: Element>(x: &[T], u: &[T], w: &Window) -> Vec<T> {
        let mut out = x.to_vec();
        if !u.is_empty() {
            combine_window(u, &mut out, w, |_, v| v);
        }
        out
    }
    Ok(match (x.elements(), update.elements()) {
        (Elements::F32(a), Elements::F32(b)) => Elements::F32(write(a, b, &w)),
        (Elements::F64(a), Elements::F64(b)) => Elements::F64(write(a, b, &w)),
        (Elements::F16(a), Elements::F16(b)) => Elements::F16(write(a, b, &w)),
        (Elements::BF16(a), Elements::BF16(b)) => Elements::BF16(write(a, b, &w)),
        (Elements::I32(a), Elements::I32(b)) => Elements::I32(write(a, b, &w)),
        (Elements::I64(a), Elements::I64(b)) => Elements::I64(write(a, b, &w)),
        (Elements::U32(a), Elements::U32(b)) => Elements::U32(write(a, b, &w)),
        (Elements::U8(a), Elements::U8(b)) => Elements::U8(write(a, b, &w)),
        (Elements::I8(a), Elements::I8(b)) => Elements::I8(write(a, b, &w)),
        (Elements::I16(a), Elements::I16(b)) => Elements::I16(write(a, b, &w)),
        (Elements::U16(a), Elements::U16(b)) => Elements::U16(write(a, b, &w)),
        (Elements::U64(a), Elements::U64(b)) => Elements::U64(write(a, b, &w)),
        (Elements::Bool(a), Elements::Bool(b)) => Elements::Bool(write(a, b, &w)),
        (a, _) => return Err(undefined("dynamic_update_slice", a.dtype())),
    })
}

//! Gather and scatter on the CPU, for the element types whose arithmetic Rust's operators
//! compute exactly as the interpreter does (f32, f64, i32, i64); the others take the
//! interpreter. The index arithmetic runs once per window (one offset per batch position),
//! then windows move as contiguous runs. A gather whose batch dimensions lead its result
//! copies windows in parallel; a scatter splits the operand into ranges, one per thread, and
//! each thread applies, in the updates' row-major order, the parts of every window that land
//! in its range: no atomics, and the result is the interpreter's, bit for bit.

use ferrax_ir::{DType, Elements, Gather, IndexMap, Scatter, ScatterCombine, Shape};
use ferrax_runtime::Array;
use rayon::prelude::*;

/// Elements moved below which threads do not pay.
const PARALLEL_THRESHOLD: usize = 1 << 16;

/// The index values of `indices` widened to i64; `None` for a dtype that is not an integer.
fn index_values(indices: &Array) -> Option<Vec<i64>> {
    Some(match indices.elements() {
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
        Elements::F32(_)
        | Elements::F64(_)
        | Elements::F16(_)
        | Elements::BF16(_)
        | Elements::Bool(_)
        | Elements::C64(_)
        | Elements::C128(_) => return None,
    })
}

/// Whether this module moves and combines `dtype` values as the interpreter does: Rust's
/// operators on f32, f64, i32 and i64 (halves, the other integers, bools and complex numbers
/// take the interpreter).
fn fast(dtype: DType) -> bool {
    match dtype {
        DType::F32 | DType::F64 | DType::I32 | DType::I64 => true,
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
        | DType::C128 => false,
    }
}

/// A window's elements as contiguous runs: the outer dimensions to step through, their
/// strides on both sides, and the run length (trailing dimensions that are contiguous on
/// both sides merge into one run).
struct Runs {
    outer: Vec<usize>,
    src: Vec<usize>,
    dst: Vec<usize>,
    len: usize,
}

impl Runs {
    fn new(dims: &[usize], src: &[usize], dst: &[usize]) -> Runs {
        let mut k = dims.len();
        let mut len = 1;
        while k > 0 && src[k - 1] == len && dst[k - 1] == len {
            len *= dims[k - 1];
            k -= 1;
        }
        Runs {
            outer: dims[..k].to_vec(),
            src: src[..k].to_vec(),
            dst: dst[..k].to_vec(),
            len,
        }
    }

    /// Calls `f(src_offset, dst_offset)` for each run of a window at the given bases.
    fn each(&self, src_base: usize, dst_base: usize, mut f: impl FnMut(usize, usize)) {
        if self.outer.contains(&0) || self.len == 0 {
            return;
        }
        let mut idx = vec![0usize; self.outer.len()];
        let (mut s, mut d) = (src_base, dst_base);
        loop {
            f(s, d);
            let mut k = self.outer.len();
            loop {
                if k == 0 {
                    return;
                }
                k -= 1;
                idx[k] += 1;
                s += self.src[k];
                d += self.dst[k];
                if idx[k] < self.outer[k] {
                    break;
                }
                s -= self.src[k] * self.outer[k];
                d -= self.dst[k] * self.outer[k];
                idx[k] = 0;
            }
        }
    }
}

/// The start of each batch position's window in the operand, in row-major order of the batch
/// positions: `sizes` are the batch sizes, `extent` the window's extent per operand dimension.
/// `clamp` moves a start so the window fits (gather); otherwise a window that does not fit is
/// `None` (scatter drops it).
fn window_starts(
    map: &IndexMap,
    (idx, indices_dims): (&[i64], &[usize]),
    batch_sizes: &[usize],
    (operand_dims, extent): (&[usize], &[usize]),
    clamp: bool,
) -> Vec<Option<usize>> {
    let op_strides = Shape::new(operand_dims.to_vec()).strides();
    let reader = map.start_reader(indices_dims);
    let count: usize = batch_sizes.iter().product();
    let mut out = Vec::with_capacity(count);
    let mut batch = vec![0usize; batch_sizes.len()];
    let mut starts = Vec::with_capacity(operand_dims.len());
    for _ in 0..count {
        map.start(&reader, idx, &batch, &mut starts);
        let mut offset = Some(0usize);
        for (d, &start) in starts.iter().enumerate() {
            let hi = operand_dims[d] as i64 - extent[d] as i64;
            let start = if clamp {
                Some(start.clamp(0, hi.max(0)))
            } else {
                (start >= 0 && start <= hi).then_some(start)
            };
            offset = offset
                .zip(start)
                .map(|(o, s)| o + s as usize * op_strides[d]);
        }
        out.push(offset);
        for k in (0..batch.len()).rev() {
            batch[k] += 1;
            if batch[k] < batch_sizes[k] {
                break;
            }
            batch[k] = 0;
        }
    }
    out
}

/// `gather(operand, indices)` into `out` (of the result's length), or `None` where the
/// interpreter should run it.
pub(crate) fn gather(
    g: &Gather,
    operand: &Array,
    indices: &Array,
    result_dims: &[usize],
    out: &mut Elements,
) -> Option<()> {
    if !fast(operand.dtype()) {
        return None;
    }
    let idx = index_values(indices)?;
    let map = IndexMap::of_gather(g, operand.dims().len(), result_dims.len());
    let batch_sizes: Vec<usize> = map.batch_dims.iter().map(|&d| result_dims[d]).collect();
    let window: Vec<usize> = map.window_dims.iter().map(|&d| result_dims[d]).collect();
    let out_strides = Shape::new(result_dims.to_vec()).strides();
    let in_strides = operand.shape().strides();
    let runs = Runs::new(
        &window,
        &map.window_to_operand
            .iter()
            .map(|&d| in_strides[d])
            .collect::<Vec<_>>(),
        &map.window_dims
            .iter()
            .map(|&d| out_strides[d])
            .collect::<Vec<_>>(),
    );
    if result_dims.contains(&0) {
        return Some(());
    }
    let starts = window_starts(
        &map,
        (&idx, indices.dims()),
        &batch_sizes,
        (operand.dims(), &g.slice_sizes),
        true,
    );
    // Batch dimensions leading the result: each window is one contiguous chunk of it.
    let leading = map.batch_dims.iter().enumerate().all(|(k, &d)| k == d);
    let window_len: usize = window.iter().product();
    let dst_bases: Vec<usize> = if leading {
        Vec::new()
    } else {
        batch_offsets(&map.batch_dims, &batch_sizes, &out_strides)
    };
    fn copy<T: Copy + Send + Sync>(
        src: &[T],
        out: &mut [T],
        runs: &Runs,
        (starts, dst_bases): (&[Option<usize>], &[usize]),
        window_len: usize,
    ) {
        let copy_window = |s: usize, chunk: &mut [T], base: usize| {
            runs.each(s, base, |s, d| {
                chunk[d..d + runs.len].copy_from_slice(&src[s..s + runs.len]);
            });
        };
        if dst_bases.is_empty() && window_len > 0 {
            let go = |(chunk, s): (&mut [T], &Option<usize>)| copy_window(s.unwrap_or(0), chunk, 0);
            if out.len() >= PARALLEL_THRESHOLD {
                out.par_chunks_mut(window_len).zip(starts).for_each(go);
            } else {
                out.chunks_mut(window_len).zip(starts).for_each(go);
            }
        } else {
            for (s, &base) in starts.iter().zip(dst_bases) {
                copy_window(s.unwrap_or(0), out, base);
            }
        }
    }
    let parts = (starts.as_slice(), dst_bases.as_slice());
    match (operand.elements(), out) {
        (Elements::F32(src), Elements::F32(out)) => copy(src, out, &runs, parts, window_len),
        (Elements::F64(src), Elements::F64(out)) => copy(src, out, &runs, parts, window_len),
        (Elements::I32(src), Elements::I32(out)) => copy(src, out, &runs, parts, window_len),
        (Elements::I64(src), Elements::I64(out)) => copy(src, out, &runs, parts, window_len),
        // Other types left above; a result of another type than the operand is ill-typed.
        _ => return None,
    }
    Some(())
}

/// The flat offset of each batch position in an array with strides `strides`, whose batch
/// runs over `dims` of sizes `sizes`, in row-major order of the batch.
fn batch_offsets(dims: &[usize], sizes: &[usize], strides: &[usize]) -> Vec<usize> {
    let count: usize = sizes.iter().product();
    let mut out = Vec::with_capacity(count);
    let mut batch = vec![0usize; sizes.len()];
    for _ in 0..count {
        out.push(dims.iter().zip(&batch).map(|(&d, &b)| b * strides[d]).sum());
        for k in (0..batch.len()).rev() {
            batch[k] += 1;
            if batch[k] < sizes[k] {
                break;
            }
            batch[k] = 0;
        }
    }
    out
}

/// NaN-propagating maximum with max(-0, +0) = +0 and minimum with min(-0, +0) = -0, as the
/// interpreter computes them.
macro_rules! float_extrema {
    ($max:ident, $min:ident, $t:ty) => {
        fn $max(a: $t, b: $t) -> $t {
            if a.is_nan() || a > b || (a == b && !a.is_sign_negative()) {
                a
            } else {
                b
            }
        }
        fn $min(a: $t, b: $t) -> $t {
            if a.is_nan() || a < b || (a == b && a.is_sign_negative()) {
                a
            } else {
                b
            }
        }
    };
}

float_extrema!(max_f32, min_f32, f32);
float_extrema!(max_f64, min_f64, f64);

/// `scatter(operand, indices, updates)` applied to `operand`'s elements in place, or `None`
/// (the elements untouched) where the interpreter should run it.
pub(crate) fn scatter(
    s: &Scatter,
    operand: &mut Elements,
    operand_dims: &[usize],
    indices: &Array,
    updates: &Array,
) -> Option<()> {
    if !fast(updates.dtype()) {
        return None;
    }
    let idx = index_values(indices)?;
    let map = IndexMap::of_scatter(s, operand_dims.len(), updates.dims().len());
    let up_dims = updates.dims();
    let batch_sizes: Vec<usize> = map.batch_dims.iter().map(|&d| up_dims[d]).collect();
    let window: Vec<usize> = map.window_dims.iter().map(|&d| up_dims[d]).collect();
    let up_strides = updates.shape().strides();
    let op_strides = Shape::new(operand_dims.to_vec()).strides();
    let runs = Runs::new(
        &window,
        &map.window_dims
            .iter()
            .map(|&d| up_strides[d])
            .collect::<Vec<_>>(),
        &map.window_to_operand
            .iter()
            .map(|&d| op_strides[d])
            .collect::<Vec<_>>(),
    );
    let extent = s.window_extent(operand_dims.len(), up_dims);
    let plan = ScatterPlan {
        starts: window_starts(
            &map,
            (&idx, indices.dims()),
            &batch_sizes,
            (operand_dims, &extent),
            false,
        ),
        sources: batch_offsets(&map.batch_dims, &batch_sizes, &up_strides),
        runs,
        work: updates.numel(),
    };
    use ScatterCombine as C;
    match (operand, updates.elements()) {
        (Elements::F32(o), Elements::F32(u)) => match s.combine {
            C::Replace => plan.apply(o, u, |_, u| u),
            C::Add => plan.apply(o, u, |a, u| a + u),
            C::Mul => plan.apply(o, u, |a, u| a * u),
            C::Min => plan.apply(o, u, min_f32),
            C::Max => plan.apply(o, u, max_f32),
        },
        (Elements::F64(o), Elements::F64(u)) => match s.combine {
            C::Replace => plan.apply(o, u, |_, u| u),
            C::Add => plan.apply(o, u, |a, u| a + u),
            C::Mul => plan.apply(o, u, |a, u| a * u),
            C::Min => plan.apply(o, u, min_f64),
            C::Max => plan.apply(o, u, max_f64),
        },
        (Elements::I32(o), Elements::I32(u)) => plan.apply_int(o, u, s.combine),
        (Elements::I64(o), Elements::I64(u)) => plan.apply_int(o, u, s.combine),
        // Other types left above; updates of another type than the operand are ill-typed.
        _ => return None,
    }
    Some(())
}

/// Where each window of a scatter lands (`None`: dropped) and where it is read from.
struct ScatterPlan {
    starts: Vec<Option<usize>>,
    sources: Vec<usize>,
    runs: Runs,
    work: usize,
}

trait WrappingInt: Copy + Ord + Send + Sync {
    fn wrapping_add(self, b: Self) -> Self;
    fn wrapping_mul(self, b: Self) -> Self;
}

macro_rules! wrapping_int {
    ($t:ty) => {
        impl WrappingInt for $t {
            fn wrapping_add(self, b: Self) -> Self {
                <$t>::wrapping_add(self, b)
            }
            fn wrapping_mul(self, b: Self) -> Self {
                <$t>::wrapping_mul(self, b)
            }
        }
    };
}

wrapping_int!(i32);
wrapping_int!(i64);

impl ScatterPlan {
    fn apply_int<T: WrappingInt>(&self, o: &mut [T], u: &[T], combine: ScatterCombine) {
        match combine {
            ScatterCombine::Replace => self.apply(o, u, |_, u| u),
            ScatterCombine::Add => self.apply(o, u, T::wrapping_add),
            ScatterCombine::Mul => self.apply(o, u, T::wrapping_mul),
            ScatterCombine::Min => self.apply(o, u, Ord::min),
            ScatterCombine::Max => self.apply(o, u, Ord::max),
        }
    }

    /// Combines every kept window into `o` with `f(old, update)`. With threads, each owns one
    /// contiguous range of `o` and applies the parts of the windows that fall in it, in the
    /// same order as one thread would.
    fn apply<T: Copy + Send + Sync>(&self, o: &mut [T], u: &[T], f: impl Fn(T, T) -> T + Sync) {
        let part = |lo: usize, chunk: &mut [T]| {
            let hi = lo + chunk.len();
            for (start, &src) in self.starts.iter().zip(&self.sources) {
                let Some(dst) = *start else { continue };
                self.runs.each(src, dst, |s, d| {
                    let (from, to) = (d.max(lo), (d + self.runs.len).min(hi));
                    for at in from..to {
                        let v = &mut chunk[at - lo];
                        *v = f(*v, u[s + at - d]);
                    }
                });
            }
        };
        let threads = rayon::current_num_threads();
        if self.work < PARALLEL_THRESHOLD || threads < 2 || o.is_empty() {
            part(0, o);
            return;
        }
        let size = o.len().div_ceil(threads);
        o.par_chunks_mut(size)
            .enumerate()
            .for_each(|(k, chunk)| part(k * size, chunk));
    }
}

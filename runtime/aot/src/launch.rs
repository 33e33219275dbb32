//! Running a compiled kernel over its elements or rows: large launches are cut into parts
//! that rayon's threads take as they free up; column reductions get partial buffers per part,
//! combined in part order.

use crate::kernel::{Access, KernelFn, KernelLaunch, Role};
use crate::{threads, PARALLEL_THRESHOLD};
use ferrax_ir::{with_elements, DType, Elements, ReduceOp, Scalar};
use rayon::prelude::*;

/// Parts per thread that a large launch is cut into; rayon's threads take them as they free
/// up, so when another process holds a core for a while the other thread takes over its parts
/// rather than waiting for them (faster than one part per thread on the row and
/// transcendental workloads of `benches/`).
const PARTS_PER_THREAD: usize = 4;

/// Raw buffer pointers shared by the threads of one launch.
pub(crate) struct Launch<'a> {
    pub(crate) args: &'a [*mut u8],
}

// SAFETY: the buffers outlive the launch (they are owned by the caller's stack frame), inputs
// are only read, and each thread writes a disjoint range of every output buffer.
unsafe impl Sync for Launch<'_> {}

impl Launch<'_> {
    /// A copy of the argument block, for a thread to fill in its own scratch pointers.
    fn pointers(&self) -> Vec<*mut u8> {
        self.args.to_vec()
    }
}

/// An input buffer's data, which kernels only read.
pub(crate) fn data_ptr(e: &Elements) -> *mut u8 {
    with_elements!(e, v => v.as_ptr().cast::<u8>().cast_mut())
}

/// An output buffer's data, which kernels write.
pub(crate) fn data_ptr_mut(e: &mut Elements) -> *mut u8 {
    with_elements!(e, v => v.as_mut_ptr().cast::<u8>())
}

/// Runs row kernel `entry` over `rows` rows, split across the cores when large; each part
/// gets its own scratch rows.
pub(crate) fn launch_rows(entry: KernelFn, kernel: &KernelLaunch, args: &[*mut u8], rows: usize) {
    let shared = Launch { args };
    let shared = &shared;
    let run = |start: usize, end: usize| {
        // 8-byte words cover every element type's alignment.
        let mut scratch: Vec<Vec<u64>> = Vec::new();
        let mut own = shared.pointers();
        for (b, arg) in kernel.sig.buffers.iter().zip(own.iter_mut()) {
            if b.role == Role::Scratch {
                let cols = kernel.rows.map_or(0, |(_, cols)| cols);
                let mut row = vec![0u64; (cols * b.dtype.size_bytes()).div_ceil(8)];
                *arg = row.as_mut_ptr().cast::<u8>();
                scratch.push(row);
            }
        }
        // SAFETY: `own` points at live buffers of the kernel's types and sizes (the scratch rows
        // above live until the call returns); threads run disjoint row ranges.
        unsafe { entry(own.as_ptr(), start as i64, end as i64) };
    };
    let threads = threads();
    if kernel.len < PARALLEL_THRESHOLD || threads < 2 || rows < 2 {
        run(0, rows);
        return;
    }
    let parts = PARTS_PER_THREAD * threads;
    let chunk = rows.div_ceil(parts);
    let run = &run;
    rayon::scope(|s| {
        for t in 0..parts {
            let (start, end) = ((t * chunk).min(rows), ((t + 1) * chunk).min(rows));
            s.spawn(move |_| run(start, end));
        }
    });
}

/// The parts a flat launch over `len` elements runs in: one when small, else
/// [`PARTS_PER_THREAD`] per thread of rayon's pool, each starting at a multiple of `step`,
/// the vector loop's step or its chunk (the flat code relies on it).
fn parts(len: usize, step: usize) -> Vec<(usize, usize)> {
    let threads = threads();
    if len < PARALLEL_THRESHOLD || threads < 2 {
        return vec![(0, len)];
    }
    let parts = PARTS_PER_THREAD * threads;
    let chunk = len.div_ceil(parts).div_ceil(step) * step;
    (0..parts)
        .map(|t| ((t * chunk).min(len), ((t + 1) * chunk).min(len)))
        .collect()
}

/// Runs flat kernel `entry` over its elements, in their [`parts`], and returns the values of
/// its column reductions (see [`launch_partial`]).
pub(crate) fn launch(entry: KernelFn, kernel: &KernelLaunch, args: &[*mut u8]) -> Vec<Elements> {
    let partial: Vec<(usize, ReduceOp, DType, usize)> = kernel
        .sig
        .buffers
        .iter()
        .enumerate()
        .filter_map(|(k, b)| match (b.role, b.access) {
            (Role::Partial(op), Access::Inner(cols)) => Some((k, op, b.dtype, cols)),
            _ => None,
        })
        .collect();
    if !partial.is_empty() {
        return launch_partial(entry, (kernel.len, kernel.step), args, &partial);
    }
    let shared = Launch { args };
    let shared = &shared;
    let parts = parts(kernel.len, kernel.step);
    if let [(start, end)] = parts[..] {
        // SAFETY: `args` points at live buffers of at least `len` elements of the kernel's types.
        unsafe { entry(shared.args.as_ptr(), start as i64, end as i64) };
        return Vec::new();
    }
    rayon::scope(|s| {
        for (start, end) in parts {
            s.spawn(move |_| {
                // SAFETY: as above; the ranges of the parts are disjoint.
                unsafe { entry(shared.args.as_ptr(), start as i64, end as i64) };
            });
        }
    });
    Vec::new()
}

/// One part of a launch with column reductions: its range, its argument block, and the
/// partial buffers that block points at.
struct PartialRun {
    range: (usize, usize),
    args: Vec<*mut u8>,
    partials: Vec<Elements>,
}

// SAFETY: a part's argument block points at the caller's buffers (inputs only read, outputs
// written in the part's own range) and at the part's own partial buffers.
unsafe impl Send for PartialRun {}

/// Runs flat kernel `entry` over its [`parts`] of `len` elements (starting at multiples of
/// `step`), each accumulating its
/// column reductions (`partial`: buffer index, op, dtype, columns) into partial buffers of its
/// own (set to the reduction's identity), and returns each reduction's value: the parts'
/// partials combined in part order.
pub(crate) fn launch_partial(
    entry: KernelFn,
    (len, step): (usize, usize),
    args: &[*mut u8],
    partial: &[(usize, ReduceOp, DType, usize)],
) -> Vec<Elements> {
    let mut runs: Vec<PartialRun> = parts(len, step)
        .into_iter()
        .map(|range| {
            let mut partials: Vec<Elements> = partial
                .iter()
                .map(|&(_, op, dtype, cols)| identities(op, dtype, cols))
                .collect();
            let mut args = args.to_vec();
            for (&(k, ..), p) in partial.iter().zip(partials.iter_mut()) {
                args[k] = data_ptr_mut(p);
            }
            PartialRun {
                range,
                args,
                partials,
            }
        })
        .collect();
    runs.par_iter_mut().for_each(|run| {
        // SAFETY: `args` points at live buffers of the kernel's types and sizes, the partial
        // buffers of `cols` elements each; the parts' ranges are disjoint.
        unsafe { entry(run.args.as_ptr(), run.range.0 as i64, run.range.1 as i64) };
    });
    let mut per_part: Vec<_> = runs.into_iter().map(|r| r.partials.into_iter()).collect();
    partial
        .iter()
        .map(|&(_, op, dtype, _)| {
            let mut parts = per_part.iter_mut().filter_map(Iterator::next);
            let first = parts.next().unwrap_or_else(|| identities(op, dtype, 0));
            parts.fold(first, |acc, p| match (acc, p) {
                (Elements::F32(a), Elements::F32(b)) => Elements::F32(combine(op, a, &b)),
                (Elements::F64(a), Elements::F64(b)) => Elements::F64(combine(op, a, &b)),
                (acc, _) => acc,
            })
        })
        .collect()
}

/// `cols` elements of `dtype` (f32 or f64) set to `op`'s identity.
fn identities(op: ReduceOp, dtype: DType, cols: usize) -> Elements {
    let v = op.identity(dtype);
    match v {
        Scalar::F64(x) => Elements::F64(vec![x; cols]),
        _ => Elements::F32(vec![v.to_f64() as f32; cols]),
    }
}

/// `a` combined elementwise with `b` as the kernel's accumulation does: sums add, max and min
/// propagate NaN and order -0 below +0.
fn combine<T>(op: ReduceOp, mut a: Vec<T>, b: &[T]) -> Vec<T>
where
    T: Copy + PartialOrd + std::ops::Add<Output = T> + std::ops::Mul<Output = T> + Into<f64>,
{
    let negative = |x: T| x.into().is_sign_negative();
    let nan = |v: T| v.partial_cmp(&v).is_none();
    for (x, &y) in a.iter_mut().zip(b) {
        *x = match op {
            ReduceOp::Sum => *x + y,
            ReduceOp::Prod => *x * y,
            _ if nan(*x) => *x,
            _ if nan(y) => y,
            ReduceOp::Max if *x > y || (*x == y && negative(y)) => *x,
            ReduceOp::Min if *x < y || (*x == y && negative(*x)) => *x,
            _ => y,
        };
    }
    a
}

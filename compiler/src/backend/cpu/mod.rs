//! The CPU executable: a fused program whose kernels are compiled with Cranelift, whose matrix
//! products run on the `gemm` crate's packed SIMD kernels (f32 accumulates in f32, as XLA
//! does), and whose other ops run on the reference interpreter's op evaluator (until reductions
//! and data movement get kernels of their own). Large kernels and products use every core.

pub mod clif;
pub mod support;

use crate::backend::gemm::{plan_gemm, Gemm};
use crate::fuse::{listing, partition, schedule, Step};
use crate::kernel::rows::lower_rows;
use crate::kernel::{lower, Access, Kernel, Role};
use clif::KernelFn;
use ferrax_ir::{verify, with_elements, DType, Elements, Func, ReduceOp, Scalar, ValueId};
use ferrax_runtime::{check_args, eval_op, recycle, Array, RuntimeError};
use rayon::prelude::*;
use std::collections::HashMap;
use std::sync::Mutex;

/// Elements per kernel launch below which splitting across threads does not pay.
const PARALLEL_THRESHOLD: usize = 1 << 16;

/// Parts per thread that a large launch is cut into; rayon's threads take them as they free
/// up, so when another process holds a core for a while the other thread takes over its parts
/// rather than waiting for them (faster than one part per thread on the row and
/// transcendental workloads of `benches/`).
const PARTS_PER_THREAD: usize = 4;

#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    #[error(transparent)]
    Codegen(#[from] clif::CodegenError),
    #[error(transparent)]
    Verify(#[from] ferrax_ir::VerifyError),
    #[error("could not lower instructions {start}..{end} to a kernel")]
    Lowering { start: usize, end: usize },
}

enum ExecStep {
    Kernel(usize),
    Gemm(usize, Gemm),
    Op(usize),
}

/// A program compiled for the CPU.
pub struct CpuExecutable {
    /// The program as compiled: scheduled for fusion (see [`schedule`]).
    func: Func,
    /// `func` annotated with the step that runs each instruction.
    fused: String,
    steps: Vec<ExecStep>,
    kernels: Vec<Kernel>,
    code: clif::Compiled,
    /// Per step, the values whose last use it is (never a program output).
    frees: Vec<Vec<ValueId>>,
    memory: MemoryReport,
    /// Buffers of dead values, by dtype and length, for later steps and later runs.
    pool: Mutex<HashMap<(DType, usize), Vec<Elements>>>,
}

/// The memory plan's figures, in bytes: every value is released after its last use, so the
/// peak is the largest set of values alive at once (inputs included while still needed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryReport {
    pub inputs: usize,
    pub outputs: usize,
    /// Peak of live values over the run, with nothing freed early by donation.
    pub peak: usize,
    /// What keeping every value to the end (no plan) would take.
    pub unplanned: usize,
}

/// The operands each step reads and the values it defines.
fn step_values(func: &Func, kernels: &[Kernel], step: &ExecStep) -> (Vec<ValueId>, Vec<ValueId>) {
    match *step {
        ExecStep::Op(i) | ExecStep::Gemm(i, _) => {
            (func.body[i].args.clone(), vec![func.instr_value(i)])
        }
        ExecStep::Kernel(k) => {
            let of = |made: bool| {
                kernels[k]
                    .sig
                    .buffers
                    .iter()
                    .filter(|b| match b.role {
                        Role::Input => !made,
                        Role::Output | Role::Partial(_) => made,
                        Role::Scratch => false,
                    })
                    .map(|b| b.value)
                    .collect()
            };
            (of(false), of(true))
        }
    }
}

/// Last uses and the peak of live bytes, stepping through the program.
fn plan_memory(
    func: &Func,
    kernels: &[Kernel],
    steps: &[ExecStep],
) -> (Vec<Vec<ValueId>>, MemoryReport) {
    let bytes = |v: ValueId| {
        func.value_type(v)
            .map_or(0, |t| t.numel() * t.dtype.size_bytes())
    };
    let mut last = vec![None; func.num_values()];
    for (s, step) in steps.iter().enumerate() {
        for v in step_values(func, kernels, step).0 {
            last[v.index()] = Some(s);
        }
    }
    let mut frees = vec![Vec::new(); steps.len()];
    for (v, l) in last.iter().enumerate() {
        let value = ValueId(v as u32);
        if let Some(s) = l {
            if !func.outputs.contains(&value) {
                frees[*s].push(value);
            }
        }
    }
    let inputs: usize = (0..func.params.len())
        .map(|p| bytes(ValueId(p as u32)))
        .sum();
    let outputs: usize = func.outputs.iter().map(|&o| bytes(o)).sum();
    let (mut live, mut peak, mut unplanned) = (inputs, inputs, inputs);
    for (s, step) in steps.iter().enumerate() {
        let defined: usize = step_values(func, kernels, step)
            .1
            .into_iter()
            .map(bytes)
            .sum();
        live += defined;
        unplanned += defined;
        peak = peak.max(live);
        live -= frees[s].iter().map(|&v| bytes(v)).sum::<usize>();
    }
    let report = MemoryReport {
        inputs,
        outputs,
        peak,
        unplanned,
    };
    (frees, report)
}

/// Raw buffer pointers shared by the threads of one launch.
struct Launch<'a> {
    args: &'a [*mut u8],
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
fn data_ptr(e: &Elements) -> *mut u8 {
    with_elements!(e, v => v.as_ptr().cast::<u8>().cast_mut())
}

/// An output buffer's data, which kernels write.
fn data_ptr_mut(e: &mut Elements) -> *mut u8 {
    with_elements!(e, v => v.as_mut_ptr().cast::<u8>())
}

impl CpuExecutable {
    pub fn compile(func: &Func) -> Result<CpuExecutable, BackendError> {
        verify(func)?;
        let func = &schedule(func, &support::TARGET);
        let mut steps = Vec::new();
        let mut kernels = Vec::new();
        let partition = partition(func, &support::TARGET);
        let mut names = Vec::with_capacity(partition.len());
        for step in &partition {
            match *step {
                Step::Op { index } => {
                    let step = match &func.body[index].op {
                        ferrax_ir::Op::DotGeneral(dims) => {
                            match plan_gemm(func, index, dims, &[DType::F32, DType::F64]) {
                                Some(g) => ExecStep::Gemm(index, g),
                                None => ExecStep::Op(index),
                            }
                        }
                        _ => ExecStep::Op(index),
                    };
                    let runner = match step {
                        ExecStep::Gemm(..) => "gemm",
                        _ => "interpreter",
                    };
                    names.push(runner.to_string());
                    steps.push(step);
                }
                Step::Kernel { start, end } => {
                    let name = format!("{}_k{}", func.name, kernels.len());
                    names.push(format!("kernel @{name}"));
                    let kernel = lower(func, start, end, name)
                        .ok_or(BackendError::Lowering { start, end })?;
                    steps.push(ExecStep::Kernel(kernels.len()));
                    kernels.push(kernel);
                }
                Step::Rows {
                    start,
                    end,
                    rows,
                    cols,
                    ref roles,
                } => {
                    let name = format!("{}_k{}", func.name, kernels.len());
                    names.push(format!("row kernel @{name}"));
                    let kernel = lower_rows(func, (start, end), (rows, cols), roles, name)
                        .ok_or(BackendError::Lowering { start, end })?;
                    steps.push(ExecStep::Kernel(kernels.len()));
                    kernels.push(kernel);
                }
            }
        }
        // Fusion's contract with the code generator: no kernel holds what the table leaves to
        // the host (expansions' own primitives come later and are the generator's).
        if let Some((kernel, ins)) = kernels
            .iter()
            .find_map(|k| k.unsupported(&support::TARGET).map(|ins| (k, ins)))
        {
            return Err(BackendError::Codegen(clif::CodegenError::Unsupported {
                kernel: kernel.name.clone(),
                what: format!("{:?} on {}", ins.op, ins.dtype),
            }));
        }
        let code = clif::compile(&kernels)?;
        let (frees, memory) = plan_memory(func, &kernels, &steps);
        Ok(CpuExecutable {
            func: func.clone(),
            fused: listing(func, &partition, &names),
            steps,
            kernels,
            code,
            frees,
            memory,
            pool: Mutex::new(HashMap::new()),
        })
    }

    /// The fused program: the program as scheduled for fusion, each step headed by what runs
    /// it (a kernel by name, gemm or the interpreter). Kernels name values as it does.
    pub fn fused(&self) -> &str {
        &self.fused
    }

    /// The memory plan's figures (peak bytes of live values, against keeping them all).
    pub fn memory(&self) -> MemoryReport {
        self.memory
    }

    /// Bytes held for reuse by later steps and runs.
    pub fn pooled_bytes(&self) -> usize {
        let pool = self.pool.lock().unwrap_or_else(|e| e.into_inner());
        pool.iter()
            .map(|((d, len), v)| d.size_bytes() * len * v.len())
            .sum()
    }

    /// A buffer of `len` elements of `dtype`, whose contents the caller overwrites entirely.
    fn buffer(&self, dtype: DType, len: usize) -> Elements {
        let reused = self
            .pool
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_mut(&(dtype, len))
            .and_then(Vec::pop);
        reused
            .or_else(|| recycle::take(dtype, len))
            .unwrap_or_else(|| Elements::zeros(dtype, len))
    }

    /// Releases `value`: its buffer joins the pool when nothing else holds it.
    fn release(&self, value: Option<Array>) {
        if let Some(Ok(e)) = value.map(Array::into_elements) {
            self.keep(e);
        }
    }

    /// Puts a buffer in the pool.
    fn keep(&self, e: Elements) {
        let key = (e.dtype(), e.len());
        let mut pool = self.pool.lock().unwrap_or_else(|e| e.into_inner());
        let kept = pool.entry(key).or_default();
        // A few of each size cover a program's reuse; more would only hold memory.
        if kept.len() < 4 {
            kept.push(e);
        }
    }

    /// The product `g` of row-major `a` and `b` in a pooled buffer, with any transposed copies
    /// [`nt_layout`] asks for made in pooled scratch buffers.
    fn gemm<T: Unit>(&self, g: &Gemm, a: &[T], b: &[T]) -> Option<Elements> {
        let mut c = T::vec_of(self.buffer(T::DTYPE, g.batch * g.m * g.n))?;
        let layout = nt_layout(g);
        let (first, second) = match layout {
            NtLayout::Direct => (0, 0),
            NtLayout::TransposeRhs => (g.n * g.k, 0),
            NtLayout::TransposeLhsAndResult => (g.m * g.k, g.m * g.n),
        };
        // Only the copies a layout makes take buffers from the pool (a direct product, none).
        let take = |len: usize| match len {
            0 => Some(Vec::new()),
            len => T::vec_of(self.buffer(T::DTYPE, len)),
        };
        let mut scratch = [take(first), take(second)];
        let [Some(s0), Some(s1)] = &mut scratch else {
            return None;
        };
        matmul(g, layout, a, b, &mut c, (s0, s1));
        for s in scratch.into_iter().flatten().filter(|s| !s.is_empty()) {
            self.keep(T::elements(s));
        }
        Some(T::elements(c))
    }

    /// The kernels, with the Cranelift IR of each.
    pub fn kernels(&self) -> impl Iterator<Item = (&Kernel, &str)> {
        self.kernels
            .iter()
            .zip(self.code.clif.iter().map(String::as_str))
    }

    pub fn run(&self, args: &[Array]) -> Result<Vec<Array>, RuntimeError> {
        self.run_donated(args.to_vec())
    }

    /// Runs on `args` given by value: an input nothing else holds is donated, its buffer
    /// reused for later values once the program no longer needs it.
    pub fn run_donated(&self, args: Vec<Array>) -> Result<Vec<Array>, RuntimeError> {
        let func = &self.func;
        check_args(func, &args)?;
        let mut values: Vec<Option<Array>> = args.into_iter().map(Some).collect();
        values.resize(func.num_values(), None);
        let get = |values: &[Option<Array>], v: ValueId| {
            values[v.index()]
                .clone()
                .ok_or(RuntimeError::Freed { value: v.0 })
        };
        for (s, step) in self.steps.iter().enumerate() {
            match *step {
                ExecStep::Op(i) => {
                    let ins = &func.body[i];
                    let operands = ins
                        .args
                        .iter()
                        .map(|&a| get(&values, a))
                        .collect::<Result<Vec<_>, _>>()?;
                    let refs: Vec<&Array> = operands.iter().collect();
                    values[func.instr_value(i).index()] = Some(eval_op(&ins.op, &refs)?);
                }
                ExecStep::Gemm(i, g) => {
                    let ins = &func.body[i];
                    let (lhs, rhs) = (get(&values, ins.args[0])?, get(&values, ins.args[1])?);
                    let out = match (lhs.elements(), rhs.elements()) {
                        (Elements::F32(a), Elements::F32(b)) => self.gemm(&g, a, b),
                        (Elements::F64(a), Elements::F64(b)) => self.gemm(&g, a, b),
                        _ => None,
                    };
                    let out = match out {
                        Some(out) => out,
                        None => eval_op(&ins.op, &[&lhs, &rhs])?.elements().clone(),
                    };
                    values[func.instr_value(i).index()] =
                        Some(Array::new(ins.ty.shape.clone(), out)?);
                }
                ExecStep::Kernel(k) => {
                    let kernel = &self.kernels[k];
                    let inputs = kernel
                        .sig
                        .buffers
                        .iter()
                        .filter(|b| b.role == Role::Input)
                        .map(|b| get(&values, b.value))
                        .collect::<Result<Vec<_>, _>>()?;
                    let mut outputs: Vec<Elements> = kernel
                        .sig
                        .buffers
                        .iter()
                        .filter(|b| b.role == Role::Output)
                        .map(|b| {
                            let len = func.value_type(b.value).map_or(0, |t| t.numel());
                            self.buffer(b.dtype, len)
                        })
                        .collect();
                    let out_ptrs: Vec<*mut u8> = outputs.iter_mut().map(data_ptr_mut).collect();
                    let (mut next_in, mut next_out) = (0, 0);
                    let packed = kernel.sig.pack(|_, b| match b.role {
                        Role::Input => {
                            next_in += 1;
                            data_ptr(inputs[next_in - 1].elements())
                        }
                        Role::Output => {
                            next_out += 1;
                            out_ptrs[next_out - 1]
                        }
                        // Each thread's or part's own, filled in at launch.
                        Role::Scratch | Role::Partial(_) => std::ptr::null_mut(),
                    });
                    let entry = self.code.entries[k];
                    match &kernel.rows {
                        None => outputs.extend(launch(entry, kernel, &packed)),
                        Some(r) => launch_rows(entry, kernel, &packed, r.rows),
                    }
                    let out_buffers = kernel.sig.buffers.iter().filter(|b| b.role == Role::Output);
                    let partial = kernel
                        .sig
                        .buffers
                        .iter()
                        .filter(|b| matches!(b.role, Role::Partial(_)));
                    for (b, data) in out_buffers.chain(partial).zip(outputs.drain(..)) {
                        let ty = func
                            .value_type(b.value)
                            .ok_or(RuntimeError::Freed { value: b.value.0 })?;
                        values[b.value.index()] = Some(Array::new(ty.shape.clone(), data)?);
                    }
                }
            }
            for &v in &self.frees[s] {
                self.release(values[v.index()].take());
            }
        }
        func.outputs.iter().map(|&o| get(&values, o)).collect()
    }
}

/// Products below this many multiply-adds run on one thread.
const GEMM_PARALLEL_THRESHOLD: usize = 1 << 18;

fn threads() -> usize {
    rayon::current_num_threads()
}

/// The float types `gemm` multiplies, with their one (the product's scale), and their buffers.
trait Unit: Copy + Default + Send + Sync + 'static {
    const ONE: Self;
    const DTYPE: DType;
    fn vec_of(e: Elements) -> Option<Vec<Self>>;
    fn elements(v: Vec<Self>) -> Elements;
}

macro_rules! impl_unit {
    ($t:ty, $variant:ident) => {
        impl Unit for $t {
            const ONE: $t = 1.0;
            const DTYPE: DType = DType::$variant;
            fn vec_of(e: Elements) -> Option<Vec<$t>> {
                match e {
                    Elements::$variant(v) => Some(v),
                    _ => None,
                }
            }
            fn elements(v: Vec<$t>) -> Elements {
                Elements::$variant(v)
            }
        }
    };
}

impl_unit!(f32, F32);
impl_unit!(f64, F64);

/// How [`matmul`] lays out a product whose operands are both stored contracting dimension last
/// (`a · bᵀ`, the backward pass's product with a weight matrix). `gemm` runs that form at about
/// half its usual speed, so
/// one operand is transposed first: the rhs, or where that copies more, the lhs and the result
/// (which `gemm` then computes column-major, its fast form).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum NtLayout {
    Direct,
    TransposeRhs,
    TransposeLhsAndResult,
}

/// Products with fewer multiply-adds run as they are: the copies would cost more than they save.
const NT_TRANSPOSE_THRESHOLD: usize = 1 << 22;

fn nt_layout(g: &Gemm) -> NtLayout {
    let (m, n, k) = (g.m, g.n, g.k);
    if !g.rhs_k_last || g.lhs_k_first || m * n * k < NT_TRANSPOSE_THRESHOLD {
        NtLayout::Direct
    } else if n * k <= m * k + m * n {
        NtLayout::TransposeRhs
    } else {
        NtLayout::TransposeLhsAndResult
    }
}

/// `out` (`cols` x `rows`, row-major) = the transpose of row-major `x` (`rows` x `cols`), in
/// square tiles (whole cache lines read and written), split by output rows across the cores
/// when large.
fn transpose<T: Unit>(x: &[T], rows: usize, cols: usize, out: &mut [T]) {
    const TILE: usize = 16;
    let band = |first: usize, part: &mut [T]| {
        let here = part.len() / rows;
        for r0 in (0..rows).step_by(TILE) {
            for c0 in (0..here).step_by(TILE) {
                let (r1, c1) = ((r0 + TILE).min(rows), (c0 + TILE).min(here));
                for c in c0..c1 {
                    let column = first + c;
                    for (r, o) in (r0..r1).zip(&mut part[c * rows + r0..c * rows + r1]) {
                        *o = x[r * cols + column];
                    }
                }
            }
        }
    };
    let out = &mut out[..rows * cols];
    if rows * cols < PARALLEL_THRESHOLD || threads() < 2 {
        band(0, out);
        return;
    }
    // Bands of whole tiles of output rows.
    let band_rows = cols.div_ceil(threads() * 4).div_ceil(TILE) * TILE;
    out.par_chunks_mut(band_rows * rows)
        .enumerate()
        .for_each(|(i, part)| band(i * band_rows, part));
}

/// `c` (batch·m·n elements, overwritten) = the row-major product `g` describes, batch by batch,
/// laid out as `layout` says, with `scratch` for its copies.
fn matmul<T: Unit>(
    g: &Gemm,
    layout: NtLayout,
    a: &[T],
    b: &[T],
    c: &mut [T],
    scratch: (&mut [T], &mut [T]),
) {
    let (m, n, k) = (g.m, g.n, g.k);
    let parallelism = if m * n * k >= GEMM_PARALLEL_THRESHOLD && threads() > 1 {
        ::gemm::Parallelism::Rayon(threads())
    } else {
        ::gemm::Parallelism::None
    };
    for batch in 0..g.batch {
        let (a, b) = (&a[batch * m * k..], &b[batch * k * n..]);
        let c = &mut c[batch * m * n..];
        // Each operand and the result as (data, row stride, column stride) in elements.
        let mut lhs = (a, if g.lhs_k_first { (1, m) } else { (k, 1) });
        let mut rhs = (b, if g.rhs_k_last { (1, k) } else { (n, 1) });
        match layout {
            NtLayout::Direct => {}
            NtLayout::TransposeRhs => {
                transpose(b, n, k, scratch.0);
                rhs = (&*scratch.0, (n, 1));
            }
            NtLayout::TransposeLhsAndResult => {
                transpose(a, m, k, scratch.0);
                lhs = (&*scratch.0, (1, m));
            }
        }
        let column_major = layout == NtLayout::TransposeLhsAndResult;
        let (dst, (dst_rs, dst_cs)) = if column_major {
            (&mut *scratch.1, (1, m))
        } else {
            (&mut *c, (n, 1))
        };
        let ((a, (a_rs, a_cs)), (b, (b_rs, b_cs))) = (lhs, rhs);
        // SAFETY: the slices hold at least m·k, k·n and m·n elements at these strides.
        unsafe {
            ::gemm::gemm(
                m,
                n,
                k,
                dst.as_mut_ptr(),
                dst_cs as isize,
                dst_rs as isize,
                false,
                a.as_ptr(),
                a_cs as isize,
                a_rs as isize,
                b.as_ptr(),
                b_cs as isize,
                b_rs as isize,
                T::default(),
                T::ONE,
                false,
                false,
                false,
                parallelism,
            )
        };
        if column_major {
            transpose(scratch.1, n, m, c);
        }
    }
}

/// Runs row kernel `entry` over `rows` rows, split across the cores when large; each part
/// gets its own scratch rows.
fn launch_rows(entry: KernelFn, kernel: &Kernel, args: &[*mut u8], rows: usize) {
    let shared = Launch { args };
    let shared = &shared;
    let run = |start: usize, end: usize| {
        // 8-byte words cover every element type's alignment.
        let mut scratch: Vec<Vec<u64>> = Vec::new();
        let mut own = shared.pointers();
        for (b, arg) in kernel.sig.buffers.iter().zip(own.iter_mut()) {
            if b.role == Role::Scratch {
                let cols = kernel.rows.as_ref().map_or(0, |r| r.cols);
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
/// [`PARTS_PER_THREAD`] per thread of rayon's pool, each starting at a multiple of the vector
/// width.
fn parts(len: usize) -> Vec<(usize, usize)> {
    let threads = threads();
    if len < PARALLEL_THRESHOLD || threads < 2 {
        return vec![(0, len)];
    }
    let lanes = clif::LANES as usize;
    let parts = PARTS_PER_THREAD * threads;
    let chunk = len.div_ceil(parts).div_ceil(lanes) * lanes;
    (0..parts)
        .map(|t| ((t * chunk).min(len), ((t + 1) * chunk).min(len)))
        .collect()
}

/// Runs flat kernel `entry` over its elements, in their [`parts`], and returns the values of
/// its column reductions (see [`launch_partial`]).
fn launch(entry: KernelFn, kernel: &Kernel, args: &[*mut u8]) -> Vec<Elements> {
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
        return launch_partial(entry, kernel.len, args, &partial);
    }
    let shared = Launch { args };
    let shared = &shared;
    let parts = parts(kernel.len);
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

/// Runs flat kernel `entry` over its [`parts`] of `len` elements, each accumulating its
/// column reductions (`partial`: buffer index, op, dtype, columns) into partial buffers of its
/// own (set to the reduction's identity), and returns each reduction's value: the parts'
/// partials combined in part order.
fn launch_partial(
    entry: KernelFn,
    len: usize,
    args: &[*mut u8],
    partial: &[(usize, ReduceOp, DType, usize)],
) -> Vec<Elements> {
    let mut runs: Vec<PartialRun> = parts(len)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The shapes `tests/cpu.rs` checks the transposed products with take each layout.
    #[test]
    fn transposed_products_take_the_smaller_copy() {
        let nt = |batch, m, n, k| Gemm {
            batch,
            m,
            n,
            k,
            lhs_k_first: false,
            rhs_k_last: true,
        };
        assert_eq!(nt_layout(&nt(1, 128, 256, 256)), NtLayout::TransposeRhs);
        assert_eq!(nt_layout(&nt(1, 515, 61, 250)), NtLayout::TransposeRhs);
        assert_eq!(
            nt_layout(&nt(2, 70, 500, 150)),
            NtLayout::TransposeLhsAndResult
        );
        assert_eq!(nt_layout(&nt(1, 64, 64, 64)), NtLayout::Direct);
        let nn = Gemm {
            rhs_k_last: false,
            ..nt(1, 1024, 1024, 1024)
        };
        assert_eq!(nt_layout(&nn), NtLayout::Direct);
    }
}

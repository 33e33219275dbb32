//! The CPU executable: a fused program whose kernels are compiled with Cranelift, whose matrix
//! products run on the `gemm` crate's packed SIMD kernels (f32 accumulates in f32, as XLA
//! does), and whose other ops run on the reference interpreter's op evaluator (until reductions
//! and data movement get kernels of their own). Large kernels and products use every core.

pub mod clif;
pub mod gemm;
pub mod gpu;
pub mod ptx;

use crate::fuse::{partition, Step};
use crate::kernel::{lower, Kernel, Role};
use clif::KernelFn;
use ferrax_ir::{verify, with_elements, Elements, Func, ValueId};
use ferrax_runtime::{check_args, eval_op, Array, RuntimeError};
use gemm::{plan_gemm, Gemm};
use std::sync::OnceLock;

/// Elements per kernel launch below which splitting across threads does not pay.
const PARALLEL_THRESHOLD: usize = 1 << 16;

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
    func: Func,
    steps: Vec<ExecStep>,
    kernels: Vec<Kernel>,
    code: clif::Compiled,
}

/// Raw buffer pointers shared by the threads of one launch.
struct Launch<'a> {
    args: &'a [*mut u8],
}

// SAFETY: the buffers outlive the launch (they are owned by the caller's stack frame), inputs
// are only read, and each thread writes a disjoint range of every output buffer.
unsafe impl Sync for Launch<'_> {}

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
        let mut steps = Vec::new();
        let mut kernels = Vec::new();
        for step in partition(func) {
            match step {
                Step::Op { index } => steps.push(match &func.body[index].op {
                    ferrax_ir::Op::DotGeneral(dims) => match plan_gemm(func, index, dims) {
                        Some(g) => ExecStep::Gemm(index, g),
                        None => ExecStep::Op(index),
                    },
                    _ => ExecStep::Op(index),
                }),
                Step::Kernel { start, end } => {
                    let name = format!("{}_k{}", func.name, kernels.len());
                    let kernel = lower(func, start, end, name)
                        .ok_or(BackendError::Lowering { start, end })?;
                    steps.push(ExecStep::Kernel(kernels.len()));
                    kernels.push(kernel);
                }
            }
        }
        let code = clif::compile(&kernels)?;
        Ok(CpuExecutable {
            func: func.clone(),
            steps,
            kernels,
            code,
        })
    }

    /// The kernels, with the Cranelift IR of each.
    pub fn kernels(&self) -> impl Iterator<Item = (&Kernel, &str)> {
        self.kernels
            .iter()
            .zip(self.code.clif.iter().map(String::as_str))
    }

    pub fn run(&self, args: &[Array]) -> Result<Vec<Array>, RuntimeError> {
        let func = &self.func;
        check_args(func, args)?;
        let mut values: Vec<Option<Array>> = args.iter().cloned().map(Some).collect();
        values.resize(func.num_values(), None);
        let get = |values: &[Option<Array>], v: ValueId| {
            values[v.index()]
                .clone()
                .ok_or(RuntimeError::Freed { value: v.0 })
        };
        for step in &self.steps {
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
                        (Elements::F32(a), Elements::F32(b)) => Elements::F32(matmul(&g, a, b)),
                        (Elements::F64(a), Elements::F64(b)) => Elements::F64(matmul(&g, a, b)),
                        _ => eval_op(&ins.op, &[&lhs, &rhs])?.elements().clone(),
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
                        .map(|b| Elements::zeros(b.dtype, kernel.len))
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
                    });
                    launch(self.code.entries[k], &packed, kernel.len);
                    let out_buffers = kernel.sig.buffers.iter().filter(|b| b.role == Role::Output);
                    for (b, data) in out_buffers.zip(outputs.drain(..)) {
                        let ty = func
                            .value_type(b.value)
                            .ok_or(RuntimeError::Freed { value: b.value.0 })?;
                        values[b.value.index()] = Some(Array::new(ty.shape.clone(), data)?);
                    }
                }
            }
        }
        func.outputs.iter().map(|&o| get(&values, o)).collect()
    }
}

/// Products below this many multiply-adds run on one thread.
const GEMM_PARALLEL_THRESHOLD: usize = 1 << 18;

fn threads() -> usize {
    static THREADS: OnceLock<usize> = OnceLock::new();
    *THREADS.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// The float types `gemm` multiplies, with their one (the product's scale).
trait Unit: Copy + Default + 'static {
    const ONE: Self;
}

impl Unit for f32 {
    const ONE: f32 = 1.0;
}

impl Unit for f64 {
    const ONE: f64 = 1.0;
}

/// The row-major product `g` describes, batch by batch.
fn matmul<T: Unit>(g: &Gemm, a: &[T], b: &[T]) -> Vec<T> {
    let mut c = vec![T::default(); g.batch * g.m * g.n];
    let (m, n, k) = (g.m, g.n, g.k);
    // Strides in elements: (row stride, column stride) of each operand.
    let (a_rs, a_cs) = if g.lhs_k_first { (1, m) } else { (k, 1) };
    let (b_rs, b_cs) = if g.rhs_k_last { (1, k) } else { (n, 1) };
    let parallelism = if m * n * k >= GEMM_PARALLEL_THRESHOLD && threads() > 1 {
        ::gemm::Parallelism::Rayon(threads())
    } else {
        ::gemm::Parallelism::None
    };
    for batch in 0..g.batch {
        let (a, b) = (&a[batch * m * k..], &b[batch * k * n..]);
        let c = &mut c[batch * m * n..];
        // SAFETY: the slices hold at least m·k, k·n and m·n elements at these strides.
        unsafe {
            ::gemm::gemm(
                m,
                n,
                k,
                c.as_mut_ptr(),
                1,
                n as isize,
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
    }
    c
}

/// Runs `entry` over `len` elements, split across the available cores when large.
fn launch(entry: KernelFn, args: &[*mut u8], len: usize) {
    let shared = Launch { args };
    if len < PARALLEL_THRESHOLD {
        // SAFETY: `args` points at live buffers of at least `len` elements of the kernel's types.
        unsafe { entry(shared.args.as_ptr(), 0, len as i64) };
        return;
    }
    let threads = threads();
    if threads < 2 {
        // SAFETY: `args` points at live buffers of at least `len` elements of the kernel's types.
        unsafe { entry(shared.args.as_ptr(), 0, len as i64) };
        return;
    }
    // Chunks start at multiples of the vector width.
    let lanes = clif::LANES as usize;
    let chunk = len.div_ceil(threads).div_ceil(lanes) * lanes;
    std::thread::scope(|s| {
        for t in 0..threads {
            let (start, end) = ((t * chunk).min(len), ((t + 1) * chunk).min(len));
            let shared = &shared;
            s.spawn(move || {
                // SAFETY: as above; the ranges of the threads are disjoint.
                unsafe { entry(shared.args.as_ptr(), start as i64, end as i64) };
            });
        }
    });
}

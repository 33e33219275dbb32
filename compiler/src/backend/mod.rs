//! The CPU executable: a fused program whose kernels are compiled with Cranelift and whose
//! other ops run on the reference interpreter's op evaluator (the library path, until GEMM,
//! reductions and data movement get kernels of their own). Large kernels run on every core.

pub mod clif;
pub mod gpu;
pub mod ptx;

use crate::fuse::{partition, Step};
use crate::kernel::{lower, Kernel, Role};
use clif::KernelFn;
use ferrax_ir::{verify, with_elements, Elements, Func, ValueId};
use ferrax_runtime::{check_args, eval_op, Array, RuntimeError};
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
                Step::Op { index } => steps.push(ExecStep::Op(index)),
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

/// Runs `entry` over `len` elements, split across the available cores when large.
fn launch(entry: KernelFn, args: &[*mut u8], len: usize) {
    let shared = Launch { args };
    if len < PARALLEL_THRESHOLD {
        // SAFETY: `args` points at live buffers of at least `len` elements of the kernel's types.
        unsafe { entry(shared.args.as_ptr(), 0, len as i64) };
        return;
    }
    static THREADS: OnceLock<usize> = OnceLock::new();
    let threads =
        *THREADS.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    if threads < 2 {
        // SAFETY: `args` points at live buffers of at least `len` elements of the kernel's types.
        unsafe { entry(shared.args.as_ptr(), 0, len as i64) };
        return;
    }
    let chunk = len.div_ceil(threads);
    std::thread::scope(|s| {
        for t in 0..threads {
            let (start, end) = (t * chunk, ((t + 1) * chunk).min(len));
            let shared = &shared;
            s.spawn(move || {
                // SAFETY: as above; the ranges of the threads are disjoint.
                unsafe { entry(shared.args.as_ptr(), start as i64, end as i64) };
            });
        }
    });
}

//! The CPU executable: a fused program whose kernels are compiled with Cranelift, whose matrix
//! products run on the `gemm` crate's packed SIMD kernels (f32 accumulates in f32, as XLA
//! does; f16 and bf16 products are widened to f32 ones before fusion, `widen`), and whose
//! other ops run on the reference interpreter's op evaluator (until reductions
//! and data movement get kernels of their own). Large kernels and products use every core.

mod artifact;
pub mod clif;
mod control;
mod indexing;
mod launch;
mod matmul;
mod remat;
mod reuse;
mod rounding;
pub mod support;
mod widen;

use crate::backend::gemm::{plan_gemm, plan_permuted_gemm, Gemm};
use crate::backend::liveness::{
    liveness, memory, peak_listing, Liveness, MemoryReport, StepValues,
};
use crate::fuse::{listing, partition, schedule, Step};
use crate::kernel::rows::lower_rows;
use crate::kernel::LastReads;
use crate::kernel::{lower, Kernel, Role};
use ferrax_ir::{verify, DType, Elements, Func, Gather, Op, Scalar, Scatter, TensorType, ValueId};
use ferrax_runtime::{check_args, eval_op, recycle, Array, RuntimeError};
use launch::{data_ptr, data_ptr_mut, launch, launch_rows};
use matmul::{matmul, nt_layout, NtLayout, Unit};
use reuse::{in_place, reused, take_unique};
use rounding::{plan_rounding, Rounding};
use std::collections::HashMap;
use std::sync::Mutex;

pub use artifact::{inspect_artifact, ArtifactError, ArtifactInfo, CpuTarget, FORMAT_VERSION};

/// Elements per kernel launch below which splitting across threads does not pay.
const PARALLEL_THRESHOLD: usize = 1 << 16;

fn threads() -> usize {
    rayon::current_num_threads()
}

#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    #[error(transparent)]
    Codegen(#[from] clif::CodegenError),
    #[error(transparent)]
    Verify(#[from] ferrax_ir::VerifyError),
    #[error("could not lower instructions {start}..{end} to a kernel")]
    Lowering { start: usize, end: usize },
}

#[derive(Clone, serde::Serialize, serde::Deserialize)]
enum ExecStep {
    Kernel(usize),
    /// A matrix product on `gemm`, its operands first permuted into batched-matrix layout
    /// where the `Permutes` say so (batch dimensions that do not lead, as in attention), its
    /// result rounded to a half type and widened back where the `Rounding` says so (the
    /// rounding's output is then the value it defines).
    Gemm(usize, Gemm, Option<Box<Permutes>>, Option<Rounding>),
    /// A gather or scatter, by `indexing` where it takes the dtype, else the interpreter.
    Gather(usize, Gather),
    Scatter(usize, Scatter),
    Op(usize),
    /// A control-flow call on the interpreter, run once for all its instructions (`control`).
    Call(Vec<usize>),
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
    /// The compiled regions of each control-flow step, by its first instruction (`control`).
    calls: HashMap<usize, control::Compiled>,
}

/// The permutations of a product's operands (lhs, rhs) that its GEMM reads.
type Permutes = (Vec<usize>, Vec<usize>);

/// The live value `v` of a run.
fn live(values: &[Option<Array>], v: ValueId) -> Result<Array, RuntimeError> {
    values[v.index()]
        .clone()
        .ok_or(RuntimeError::Freed { value: v.0 })
}

/// The operands each step reads and the values it defines.
fn step_values(func: &Func, kernels: &[Kernel], step: &ExecStep) -> StepValues {
    match *step {
        ExecStep::Op(i)
        | ExecStep::Gather(i, _)
        | ExecStep::Scatter(i, _)
        | ExecStep::Gemm(i, _, _, None) => StepValues {
            reads: func.body[i].args.clone(),
            writes: vec![func.instr_value(i)],
        },
        ExecStep::Gemm(i, _, _, Some(r)) => StepValues {
            reads: func.body[i].args.clone(),
            writes: vec![r.output],
        },
        ExecStep::Call(ref members) => StepValues {
            reads: members
                .first()
                .map_or_else(Vec::new, |&i| func.body[i].args.clone()),
            writes: members.iter().map(|&j| func.instr_value(j)).collect(),
        },
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
            StepValues {
                reads: of(false),
                writes: of(true),
            }
        }
    }
}

impl CpuExecutable {
    pub fn compile(func: &Func) -> Result<CpuExecutable, BackendError> {
        verify(func)?;
        let func = &schedule(&widen::widen_half_products(func), &support::TARGET);
        let func = &remat::rematerialize(func, &support::TARGET);
        let mut steps = Vec::new();
        let mut kernels = Vec::new();
        let partition = partition(func, &support::TARGET);
        let reads = LastReads::of(func);
        let uses = rounding::uses(func);
        let mut names = Vec::with_capacity(partition.len());
        let mut calls = control::Calls::new();
        for step in &partition {
            match *step {
                Step::Op { index } => {
                    let step = match &func.body[index].op {
                        Op::DotGeneral(dims) => {
                            let dtypes = [DType::F32, DType::F64];
                            match plan_gemm(func, index, dims, &dtypes) {
                                Some(g) => ExecStep::Gemm(index, g, None, None),
                                None => match plan_permuted_gemm(func, index, dims, &dtypes) {
                                    Some((l, r, g)) => {
                                        ExecStep::Gemm(index, g, Some(Box::new((l, r))), None)
                                    }
                                    None => ExecStep::Op(index),
                                },
                            }
                        }
                        Op::Gather(g) => ExecStep::Gather(index, (**g).clone()),
                        Op::Scatter(sc) => ExecStep::Scatter(index, (**sc).clone()),
                        op if op.call_result().is_some() => match calls.step(func, index) {
                            Ok(members) => ExecStep::Call(members),
                            Err(first) => {
                                let by = func.instr_value(first);
                                names.push(format!("interpreter: the call of {by}"));
                                continue;
                            }
                        },
                        _ => ExecStep::Op(index),
                    };
                    let runner = match step {
                        ExecStep::Gemm(..) => "gemm",
                        ExecStep::Gather(..) | ExecStep::Scatter(..) => "indexing",
                        _ => "interpreter",
                    };
                    names.push(runner.to_string());
                    steps.push(step);
                }
                Step::Kernel { start, end } => {
                    // A product's rounding, with nothing else, is done by the product's step
                    // (which is the only reader of the product, so nothing between them reads
                    // it).
                    let product = func.body[start].args.first().map(|v| v.index());
                    let dot = product.and_then(|v| v.checked_sub(func.params.len()));
                    let at = dot.and_then(|d| {
                        steps
                            .iter()
                            .rposition(|s| matches!(s, ExecStep::Gemm(i, ..) if *i == d))
                    });
                    if let Some(ExecStep::Gemm(dot, _, _, rounded @ None)) =
                        at.and_then(|at| steps.get_mut(at))
                    {
                        if let Some(r) = plan_rounding(func, &uses, *dot, (start, end)) {
                            *rounded = Some(r);
                            names.push(format!("gemm's rounding to {}", r.dtype));
                            continue;
                        }
                    }
                    let name = format!("{}_k{}", func.name, kernels.len());
                    names.push(format!("kernel @{name}"));
                    let kernel = lower(func, &reads, (start, end), name)
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
                    let kernel = lower_rows(func, &reads, (start, end), (rows, cols), roles, name)
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
        let compiled_calls = control::compile_steps(func, &steps)?;
        let values: Vec<StepValues> = steps
            .iter()
            .map(|step| step_values(func, &kernels, step))
            .collect();
        let Liveness { frees, .. } = liveness(func, &values);
        let reused = reused(func, &steps, &kernels, &frees);
        let memory = memory(func, &values, &frees, &reused);
        Ok(CpuExecutable {
            func: func.clone(),
            fused: listing(func, &partition, &names),
            steps,
            kernels,
            code,
            frees,
            memory,
            pool: Mutex::new(HashMap::new()),
            calls: compiled_calls,
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

    /// The values live when the memory plan peaks, largest first ([`peak_listing`]).
    pub fn live_at_peak(&self) -> String {
        let steps: Vec<StepValues> = self
            .steps
            .iter()
            .map(|step| step_values(&self.func, &self.kernels, step))
            .collect();
        let reused = reused(&self.func, &self.steps, &self.kernels, &self.frees);
        peak_listing(&self.func, &steps, (&self.frees, &reused), &self.memory)
    }

    /// Bytes held for reuse by later steps and runs.
    pub fn pooled_bytes(&self) -> usize {
        let pool = self.pool.lock().unwrap_or_else(|e| e.into_inner());
        pool.iter()
            .map(|((d, len), v)| d.size_bytes() * len * v.len())
            .sum()
    }

    /// A buffer of `len` elements of `dtype`, whose contents the caller overwrites entirely;
    /// an error where memory for it cannot be had.
    fn buffer(&self, dtype: DType, len: usize) -> Result<Elements, RuntimeError> {
        let reused = self
            .pool
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_mut(&(dtype, len))
            .and_then(Vec::pop);
        match reused.or_else(|| recycle::take(dtype, len)) {
            Some(buffer) => Ok(buffer),
            None => Elements::try_splat(Scalar::zero(dtype), len).ok_or_else(|| {
                RuntimeError::OutOfMemory {
                    ty: TensorType::new(dtype, [len]),
                }
            }),
        }
    }

    /// Instruction `i` made in a recycled buffer if it is a large splat constant: filling one
    /// costs no page faults, where a fresh allocation's first writes do.
    fn large_splat(&self, i: usize) -> Option<Result<Array, RuntimeError>> {
        let Op::Constant(lit) = &self.func.body[i].op else {
            return None;
        };
        let bytes = lit.ty.numel() * lit.ty.dtype.size_bytes();
        if !lit.is_splat() || bytes < recycle::MIN_BYTES {
            return None;
        }
        let mut data = match self.buffer(lit.ty.dtype, lit.ty.numel()) {
            Ok(data) => data,
            Err(e) => return Some(Err(e)),
        };
        data.fill(lit.data.get(0))
            .then(|| Array::new(lit.ty.shape.clone(), data))
    }

    /// Gather instruction `i`, by `indexing` where it takes the dtype.
    fn gather(
        &self,
        i: usize,
        g: &Gather,
        values: &[Option<Array>],
    ) -> Result<Array, RuntimeError> {
        let ins = &self.func.body[i];
        let (operand, indices) = (live(values, ins.args[0])?, live(values, ins.args[1])?);
        let mut out = self.buffer(ins.ty.dtype, ins.ty.numel())?;
        match indexing::gather(g, &operand, &indices, ins.ty.dims(), &mut out) {
            Some(()) => Array::new(ins.ty.shape.clone(), out),
            None => {
                self.keep(out);
                eval_op(&ins.op, &[&operand, &indices])
            }
        }
    }

    /// Scatter instruction `i`, by `indexing` where it takes the dtype. It updates its
    /// operand's buffer in place when this is the operand's last use (`frees`) and nothing
    /// else holds it.
    fn scatter(
        &self,
        i: usize,
        sc: &Scatter,
        values: &mut [Option<Array>],
        frees: &[ValueId],
    ) -> Result<Array, RuntimeError> {
        let ins = &self.func.body[i];
        let (indices, updates) = (live(values, ins.args[1])?, live(values, ins.args[2])?);
        let target = ins.args[0];
        let last_use = frees.contains(&target) && !ins.args[1..].contains(&target);
        let mut data = match values[target.index()].take() {
            Some(a) if last_use => a.into_elements().unwrap_or_else(|a| a.elements().clone()),
            taken => {
                values[target.index()] = taken;
                live(values, target)?.elements().clone()
            }
        };
        match indexing::scatter(sc, &mut data, ins.ty.dims(), &indices, &updates) {
            Some(()) => Array::new(ins.ty.shape.clone(), data),
            None => {
                let operand = Array::new(ins.ty.shape.clone(), data)?;
                eval_op(&ins.op, &[&operand, &indices, &updates])
            }
        }
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
        // Where memory runs out, the interpreter's product reports it.
        let mut c = T::vec_of(self.buffer(T::DTYPE, g.batch * g.m * g.n).ok()?)?;
        let layout = nt_layout(g);
        let (first, second) = match layout {
            NtLayout::Direct => (0, 0),
            NtLayout::TransposeRhs => (g.n * g.k, 0),
            NtLayout::TransposeLhsAndResult => (g.m * g.k, g.m * g.n),
        };
        // Only the copies a layout makes take buffers from the pool (a direct product, none).
        let take = |len: usize| match len {
            0 => Some(Vec::new()),
            len => self.buffer(T::DTYPE, len).ok().and_then(T::vec_of),
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
        for (s, step) in self.steps.iter().enumerate() {
            match *step {
                ExecStep::Op(i) => {
                    let ins = &func.body[i];
                    let out = match self.large_splat(i) {
                        Some(filled) => filled?,
                        None => {
                            let operands = ins
                                .args
                                .iter()
                                .map(|&a| live(&values, a))
                                .collect::<Result<Vec<_>, _>>()?;
                            let refs: Vec<&Array> = operands.iter().collect();
                            eval_op(&ins.op, &refs)?
                        }
                    };
                    values[func.instr_value(i).index()] = Some(out);
                }
                ExecStep::Call(ref members) => {
                    let compiled = members.first().and_then(|i| self.calls.get(i));
                    control::run_call(func, members, compiled, &mut values)?
                }
                ExecStep::Gather(i, ref g) => {
                    let out = self.gather(i, g, &values)?;
                    values[func.instr_value(i).index()] = Some(out);
                }
                ExecStep::Scatter(i, ref sc) => {
                    let out = self.scatter(i, sc, &mut values, &self.frees[s])?;
                    values[func.instr_value(i).index()] = Some(out);
                }
                ExecStep::Gemm(i, g, ref permutes, rounded) => {
                    let ins = &func.body[i];
                    let (lhs, rhs) = (live(&values, ins.args[0])?, live(&values, ins.args[1])?);
                    let permuted = match permutes.as_deref() {
                        Some((l, r)) => Some((permute(&lhs, l)?, permute(&rhs, r)?)),
                        None => None,
                    };
                    let (a, b) = permuted.as_ref().map_or((&lhs, &rhs), |(a, b)| (a, b));
                    let out = match (a.elements(), b.elements()) {
                        (Elements::F32(a), Elements::F32(b)) => self.gemm(&g, a, b),
                        (Elements::F64(a), Elements::F64(b)) => self.gemm(&g, a, b),
                        _ => None,
                    };
                    let mut out = match out {
                        Some(out) => out,
                        None => eval_op(&ins.op, &[&lhs, &rhs])?.elements().clone(),
                    };
                    let defined = match rounded {
                        Some(r) => {
                            out = rounding::round(out, r);
                            r.output
                        }
                        None => func.instr_value(i),
                    };
                    values[defined.index()] = Some(Array::new(ins.ty.shape.clone(), out)?);
                }
                ExecStep::Kernel(k) => {
                    let kernel = &self.kernels[k];
                    // Outputs first: one written over a dying input takes its buffer, which
                    // the kernel then reads through the output's pointer.
                    let mut taken = HashMap::new();
                    let over = in_place(func, kernel, &self.frees[s]);
                    let mut outputs: Vec<Elements> = kernel
                        .sig
                        .buffers
                        .iter()
                        .filter(|b| b.role == Role::Output)
                        .zip(&over)
                        .enumerate()
                        .map(|(n, (b, over))| {
                            if let Some(e) = over.and_then(|v| take_unique(&mut values, v)) {
                                taken.insert(over, n);
                                return Ok(e);
                            }
                            let len = func.value_type(b.value).map_or(0, |t| t.numel());
                            self.buffer(b.dtype, len)
                        })
                        .collect::<Result<_, _>>()?;
                    let inputs = kernel
                        .sig
                        .buffers
                        .iter()
                        .filter(|b| b.role == Role::Input && !taken.contains_key(&Some(b.value)))
                        .map(|b| live(&values, b.value))
                        .collect::<Result<Vec<_>, _>>()?;
                    let out_ptrs: Vec<*mut u8> = outputs.iter_mut().map(data_ptr_mut).collect();
                    let (mut next_in, mut next_out) = (0, 0);
                    let packed = kernel.sig.pack(|_, b| match b.role {
                        Role::Input => match taken.get(&Some(b.value)) {
                            Some(&n) => out_ptrs[n],
                            None => {
                                next_in += 1;
                                data_ptr(inputs[next_in - 1].elements())
                            }
                        },
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
        func.outputs.iter().map(|&o| live(&values, o)).collect()
    }
}

/// `x` with its dimensions reordered to `perm`.
fn permute(x: &Array, perm: &[usize]) -> Result<Array, RuntimeError> {
    eval_op(
        &Op::Transpose {
            perm: perm.to_vec(),
        },
        &[x],
    )
}

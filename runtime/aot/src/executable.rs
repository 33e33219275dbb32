//! A compiled CPU executable and its runs: the scheduled program's steps in order, each a
//! kernel launch, a matrix product on `gemm`, a gather or scatter, or an op of the reference
//! interpreter; values let go of after their last use (the memory plan), their buffers kept in
//! a pool for later steps and runs. The compiler builds one from a program; the artifact
//! loader from a file. Either way nothing here generates code.

use crate::code::Code;
use crate::control::{self, CompiledCall, Region};
use crate::error::ArtifactError;
use crate::gemm::{self, matmul, nt_layout, Batch, Gemm, NtLayout, Unit};
#[cfg(target_arch = "x86_64")]
use crate::gemm_bf16;
use crate::indexing;
use crate::kernel::Role;
use crate::launch::{data_ptr, data_ptr_mut, launch, launch_rows};
use crate::memory::{live, MemoryReport};
use crate::plan::{ExecStep, Permutes, RunPlan};
use crate::reuse::{in_place, take_unique};
use crate::rounding;
use crate::{threads, PARALLEL_THRESHOLD};
use ferrax_ir::{DType, Elements, Func, Gather, Op, Scalar, Scatter, TensorType, ValueId};
use ferrax_runtime::{check_args, eval_op, recycle, Array, RuntimeError, SharedParts};
use std::collections::HashMap;
use std::sync::Mutex;

/// A program compiled for the CPU, ready to run.
pub struct Executable {
    plan: RunPlan,
    code: Code,
    /// Buffers of dead values, by dtype and length, for later steps and later runs.
    pool: Mutex<HashMap<(DType, usize), Vec<Elements>>>,
    /// The compiled regions of control-flow steps, by the call's first instruction (a call
    /// without runs on the interpreter).
    calls: HashMap<usize, CompiledCall<Executable>>,
    /// Whether runs start on rayon's pool: where a step splits its work across the threads.
    on_pool: bool,
}

impl Executable {
    /// `plan` run with `code`, after the checks an artifact's plan gets, so that no plan,
    /// however made, reads or writes outside its buffers when it runs.
    pub fn new(plan: RunPlan, code: Code) -> Result<Executable, ArtifactError> {
        crate::check::check_plan(&plan, code.len())?;
        Ok(Executable::checked(plan, code))
    }

    /// `plan` run with `code`, the plan already checked against it.
    pub(crate) fn checked(plan: RunPlan, code: Code) -> Executable {
        Executable {
            on_pool: threads() > 1 && plan.steps.iter().any(|s| splits(&plan, s)),
            plan,
            code,
            pool: Mutex::new(HashMap::new()),
            calls: HashMap::new(),
        }
    }

    /// This executable with the compiled regions of its control-flow steps, by each call's
    /// first instruction.
    pub fn with_calls(mut self, calls: HashMap<usize, CompiledCall<Executable>>) -> Executable {
        self.calls = calls;
        self
    }

    pub fn plan(&self) -> &RunPlan {
        &self.plan
    }

    pub fn code(&self) -> &Code {
        &self.code
    }

    /// The compiled regions of its control-flow steps, by each call's first instruction.
    pub fn calls(&self) -> &HashMap<usize, CompiledCall<Executable>> {
        &self.calls
    }

    /// The program as compiled (scheduled for fusion).
    pub fn program(&self) -> &Func {
        &self.plan.func
    }

    /// The fused program: the program as scheduled for fusion, each step headed by what runs
    /// it (a kernel by name, gemm or the interpreter). Kernels name values as it does.
    pub fn fused(&self) -> &str {
        &self.plan.fused
    }

    /// The memory plan's figures (peak bytes of live values, against keeping them all).
    pub fn memory(&self) -> MemoryReport {
        self.plan.memory
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
        let Op::Constant(lit) = &self.plan.func.body[i].op else {
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
        let ins = &self.plan.func.body[i];
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
        let ins = &self.plan.func.body[i];
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

    /// The product `g` of operands read through permutations `perms` where they lie, with no
    /// permuted copies: where each operand's batch, line and contracting dimensions merge into
    /// one stride per group (and one of the last two strides is 1), on the bf16 kernel where
    /// it runs, else on `gemm` unless the layout is `gemm`'s slow one at a size where the
    /// copies pay.
    fn gemm_permuted(
        &self,
        g: &Gemm,
        lhs: &Array,
        rhs: &Array,
        (l, r): &Permutes,
    ) -> Option<Elements> {
        match (lhs.elements(), rhs.elements()) {
            (Elements::F32(a), Elements::F32(b)) => {
                let lv = Batch::of_lhs(g, a, lhs.dims(), l)?;
                let rv = Batch::of_rhs(g, b, rhs.dims(), r)?;
                self.gemm_bf16_batches(g, &lv, &rv)
                    .or_else(|| self.gemm_batches(g, &lv, &rv))
            }
            (Elements::F64(a), Elements::F64(b)) => {
                let lv = Batch::of_lhs(g, a, lhs.dims(), l)?;
                let rv = Batch::of_rhs(g, b, rhs.dims(), r)?;
                self.gemm_batches(g, &lv, &rv)
            }
            _ => None,
        }
    }

    /// The product `g` of the matrices of `lhs` and `rhs` on `gemm`, in a pooled buffer, unless
    /// `gemm` would run their layout in its slow form at a size where copies pay.
    fn gemm_batches<T: Unit>(&self, g: &Gemm, lhs: &Batch<T>, rhs: &Batch<T>) -> Option<Elements> {
        if gemm::slow_in_place(g, lhs.step, rhs.step) {
            return None;
        }
        let mut c = T::vec_of(self.buffer(T::DTYPE, g.batch * g.m * g.n).ok()?)?;
        if !gemm::matmul_batches(g, lhs, rhs, &mut c) {
            self.keep(T::elements(c));
            return None;
        }
        Some(T::elements(c))
    }

    /// The product `g` of batches of f32 operands holding bf16 values on the bf16 kernel, in
    /// a pooled buffer, where it runs on this CPU.
    #[cfg(target_arch = "x86_64")]
    fn gemm_bf16_batches(&self, g: &Gemm, lhs: &Batch<f32>, rhs: &Batch<f32>) -> Option<Elements> {
        if !gemm_bf16::runs(g) {
            return None;
        }
        let mut c = f32::vec_of(self.buffer(DType::F32, g.batch * g.m * g.n).ok()?)?;
        gemm_bf16::matmul_batches(g, lhs, rhs, &mut c);
        Some(Elements::F32(c))
    }

    /// The bf16 kernel needs x86-64's AVX-512 BF16.
    #[cfg(not(target_arch = "x86_64"))]
    fn gemm_bf16_batches(&self, _: &Gemm, _: &Batch<f32>, _: &Batch<f32>) -> Option<Elements> {
        None
    }

    pub fn run(&self, args: &[Array]) -> Result<Vec<Array>, RuntimeError> {
        self.run_donated(args.to_vec())
    }

    /// Runs on `args` given by value: an input nothing else holds is donated, its buffer
    /// reused for later values once the program no longer needs it.
    pub fn run_donated(&self, args: Vec<Array>) -> Result<Vec<Array>, RuntimeError> {
        // Parallel work started from a thread of the pool is a push onto its own queue; from
        // outside, a hand-off to the pool and a wake-up back each time, with the caller's
        // thread competing for the cores with the pool's. So a program with parallel steps
        // (a loop's body, with its products, may start some at every iteration) runs on the
        // pool, at the cost of one hand-off a run.
        if self.on_pool && rayon::current_thread_index().is_none() {
            return rayon::scope(|_| self.run_here(args));
        }
        self.run_here(args)
    }

    /// [`Executable::run_donated`] on the calling thread.
    fn run_here(&self, args: Vec<Array>) -> Result<Vec<Array>, RuntimeError> {
        let func = &self.plan.func;
        check_args(func, &args)?;
        let mut values: Vec<Option<Array>> = args.into_iter().map(Some).collect();
        values.resize(func.num_values(), None);
        // Decompositions several of whose parts the program reads, computed once.
        let mut shared = SharedParts::default();
        for (s, step) in self.plan.steps.iter().enumerate() {
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
                            match shared.value(func, i, &refs)? {
                                Some(part) => part,
                                None => eval_op(&ins.op, &refs)?,
                            }
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
                    let out = self.scatter(i, sc, &mut values, &self.plan.frees[s])?;
                    values[func.instr_value(i).index()] = Some(out);
                }
                ExecStep::Gemm(i, g, ref permutes, rounded) => {
                    let ins = &func.body[i];
                    let (lhs, rhs) = (live(&values, ins.args[0])?, live(&values, ins.args[1])?);
                    // Permuted operands are read where they lie where they can be.
                    let in_place = permutes
                        .as_deref()
                        .and_then(|p| self.gemm_permuted(&g, &lhs, &rhs, p));
                    let out = match in_place {
                        Some(out) => Some(out),
                        None => {
                            let permuted = match permutes.as_deref() {
                                Some((l, r)) => Some((permute(&lhs, l)?, permute(&rhs, r)?)),
                                None => None,
                            };
                            let (a, b) = permuted.as_ref().map_or((&lhs, &rhs), |(a, b)| (a, b));
                            match (a.elements(), b.elements()) {
                                (Elements::F32(a), Elements::F32(b)) => {
                                    let (l, r) =
                                        (Batch::stored(&g, a, true), Batch::stored(&g, b, false));
                                    self.gemm_bf16_batches(&g, &l, &r)
                                        .or_else(|| self.gemm(&g, a, b))
                                }
                                (Elements::F64(a), Elements::F64(b)) => self.gemm(&g, a, b),
                                _ => None,
                            }
                        }
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
                    let kernel = &self.plan.kernels[k];
                    // Outputs first: one written over a dying input takes its buffer, which
                    // the kernel then reads through the output's pointer.
                    let mut taken = HashMap::new();
                    let over = in_place(func, kernel, &self.plan.frees[s]);
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
                    match kernel.rows {
                        None => outputs.extend(launch(entry, kernel, &packed)),
                        Some((rows, _)) => launch_rows(entry, kernel, &packed, rows),
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
            for &v in &self.plan.frees[s] {
                self.release(values[v.index()].take());
            }
        }
        func.outputs.iter().map(|&o| live(&values, o)).collect()
    }
}

/// Whether `step` of `plan` may split its work across the pool's threads (a control-flow
/// call may, at every iteration).
fn splits(plan: &RunPlan, step: &ExecStep) -> bool {
    let elements = |i: usize| plan.func.body.get(i).map_or(0, |ins| ins.ty.numel());
    match step {
        ExecStep::Kernel(k) => plan
            .kernels
            .get(*k)
            .is_some_and(|k| k.len >= PARALLEL_THRESHOLD),
        ExecStep::Gemm(_, g, ..) => gemm::splits(g),
        ExecStep::Gather(i, _) | ExecStep::Scatter(i, _) => elements(*i) >= PARALLEL_THRESHOLD,
        ExecStep::Op(_) => false,
        ExecStep::Call(_) => true,
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

impl Region for Executable {
    fn run_donated(&self, args: Vec<Array>) -> Result<Vec<Array>, RuntimeError> {
        Executable::run_donated(self, args)
    }

    fn output_types(&self) -> Vec<TensorType> {
        self.plan.func.output_types()
    }

    fn reclaim(&self, value: Array) {
        self.release(Some(value));
    }
}

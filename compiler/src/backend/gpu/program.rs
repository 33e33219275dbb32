//! Running a plan on a [`GpuMachine`]: the module and constants loaded once, then each run's
//! steps queued on one stream, each value let go of after its last use.

use crate::backend::liveness::MemoryReport;
use crate::backend::ptx::scatter::{RowScatterMode, RANK_BLOCK};
use crate::backend::ptx::{PtxTarget, Scatters};
use crate::kernel::{Kernel, Role};
use ferrax_ir::{Func, TensorType, ValueId};
use ferrax_runtime::{check_args, eval_op, Array, RuntimeError};

use super::*;
impl<M: GpuMachine> GpuProgram<M> {
    pub fn compile(func: &Func, machine: &M, options: GpuOptions) -> Result<GpuProgram<M>, GpuError>
    where
        M: Clone,
    {
        let (major, minor) = machine.compute_capability();
        let target = PtxTarget::for_compute_capability(major, minor);
        let plan = GpuPlan::with_options(func, target, options)?;
        GpuProgram::load(plan, machine, options.matmul)
    }

    /// `plan`'s module, constants and control-flow regions loaded on `machine`, its f32
    /// products computed as `matmul` says.
    pub(super) fn load(
        mut plan: GpuPlan,
        machine: &M,
        matmul: MatmulPrecision,
    ) -> Result<GpuProgram<M>, GpuError>
    where
        M: Clone,
    {
        let calls = std::mem::take(&mut plan.calls)
            .into_iter()
            .map(|c| control::Call::load(c, machine, matmul))
            .collect::<Result<_, _>>()?;
        let mut names: Vec<&str> = plan.launches.iter().map(|l| l.name.as_str()).collect();
        names.extend(plan.reduce_launches.iter().map(|r| r.name.as_str()));
        names.extend(plan.copies.iter().map(|c| c.name.as_str()));
        names.extend(plan.int_gemms.iter().map(|g| g.name.as_str()));
        let scatter_names: Vec<String> = plan
            .scatters
            .iter()
            .flat_map(Scatters::entry_names)
            .collect();
        names.extend(scatter_names.iter().map(String::as_str));
        names.extend(plan.gathers.iter().map(|g| g.name.as_str()));
        // Each module's entries are the next of `names`, which lists them in module order.
        let mut modules = Vec::with_capacity(plan.modules.len());
        let mut rest = names.as_slice();
        for (ptx, entries) in &plan.modules {
            let (mine, others) = rest.split_at((*entries).min(rest.len()));
            modules.push((ptx.as_str(), mine));
            rest = others;
        }
        let mut functions = machine.load_modules(&modules)?;
        let gather_functions = functions.split_off(functions.len() - plan.gathers.len());
        let mut scatter_entries = functions.split_off(functions.len() - scatter_names.len());
        let mut scatter_functions = Vec::with_capacity(plan.scatters.len());
        for k in &plan.scatters {
            let rest = scatter_entries.split_off(k.entry_names().len());
            scatter_functions.push(std::mem::replace(&mut scatter_entries, rest));
        }
        let int_gemm_functions = functions.split_off(functions.len() - plan.int_gemms.len());
        let copy_functions = functions.split_off(functions.len() - plan.copies.len());
        let reduce_functions = functions.split_off(functions.len() - plan.reduce_launches.len());
        let constants = plan
            .steps
            .iter()
            .filter_map(|s| match s {
                GpuStep::Constant(i) => Some(*i),
                _ => None,
            })
            .map(|i| {
                // The interpreter materializes splats to their full shape.
                let host = eval_op(&plan.func.body[i].op, &[])?;
                Ok((i, machine.upload(&host)?))
            })
            .collect::<Result<_, GpuError>>()?;
        Ok(GpuProgram {
            plan,
            machine: machine.clone(),
            constants,
            functions,
            reduce_functions,
            copy_functions,
            int_gemm_functions,
            scatter_functions,
            gather_functions,
            calls,
            matmul,
        })
    }

    /// The PTX module of the program's kernels.
    pub fn ptx(&self) -> &str {
        &self.plan.ptx
    }

    pub fn kernels(&self) -> &[Kernel] {
        &self.plan.kernels
    }

    /// The memory plan's figures: the peak of live device memory over a run.
    pub fn memory(&self) -> MemoryReport {
        self.plan.memory
    }

    /// How many instructions run on the host path, those of control-flow regions included.
    pub fn host_steps(&self) -> usize {
        let regions = self.calls.iter().flat_map(control::Call::regions);
        self.plan.host_ops().len() + regions.map(GpuProgram::host_steps).sum::<usize>()
    }

    /// Strided copy `c` of `input` into a new array.
    fn copy(&self, c: usize, input: &M::Array) -> Result<M::Array, GpuError> {
        let ty = M::array_type(input);
        let ty = ferrax_ir::TensorType::new(ty.dtype, self.plan.copies[c].dims.clone());
        let out = self.machine.alloc(&ty)?;
        self.copy_into(c, (input, &out), &[])?;
        Ok(out)
    }

    /// Strided copy `c` of `input` into `out`, which it writes part or all of.
    fn copy_into(
        &self,
        c: usize,
        (input, out): (&M::Array, &M::Array),
        starts: &[M::Array],
    ) -> Result<(), GpuError> {
        let grid = self.machine.grid_for(self.plan.copies[c].len(), BLOCK);
        let mut addresses = vec![M::address(input), M::address(out)];
        addresses.extend(starts.iter().map(M::address));
        // SAFETY: the copy reads within the operand and writes within the result: the plan
        // took its strides and bases from their shapes, and clamps the start indices it reads.
        unsafe {
            self.machine
                .launch_blocks(&self.copy_functions[c], grid, BLOCK, &addresses)?;
        }
        Ok(())
    }

    /// Copies `args` to the device, runs, and copies the results back.
    pub fn run(&self, args: &[Array]) -> Result<Vec<Array>, GpuError> {
        check_args(&self.plan.func, args)?;
        let up = args
            .iter()
            .map(|a| self.machine.upload(a))
            .collect::<Result<Vec<_>, _>>()?;
        let results = self.run_device(&up)?;
        Ok(results
            .iter()
            .map(|a| self.machine.download(a))
            .collect::<Result<_, _>>()?)
    }

    /// Runs on arrays already on the device; the results stay there. Work is queued, not
    /// waited for, unless a host step needs a value.
    pub fn run_device(&self, args: &[M::Array]) -> Result<Vec<M::Array>, GpuError> {
        let func = &self.plan.func;
        if args.len() != func.params.len() {
            return Err(RuntimeError::ArgCount {
                expected: func.params.len(),
                got: args.len(),
            }
            .into());
        }
        for (index, (a, p)) in args.iter().zip(&func.params).enumerate() {
            let got = M::array_type(a);
            if &got != p {
                return Err(RuntimeError::ArgType {
                    index,
                    expected: p.clone(),
                    got,
                }
                .into());
            }
        }
        let mut values: Vec<Option<M::Array>> = args.iter().cloned().map(Some).collect();
        values.resize(func.num_values(), None);
        for (step, released) in self.plan.steps.iter().zip(&self.plan.releases) {
            for (v, array) in self.run_step(step, &values)? {
                values[v.index()] = Some(array);
            }
            for v in released {
                values[v.index()] = None;
            }
        }
        func.outputs.iter().map(|&o| get(&values, o)).collect()
    }

    /// Queues `step`, reading the live `values`; returns the values it defines.
    fn run_step(
        &self,
        step: &GpuStep,
        values: &[Option<M::Array>],
    ) -> Result<Vec<(ValueId, M::Array)>, GpuError> {
        let func = &self.plan.func;
        let defined = |i: usize, array: M::Array| Ok(vec![(func.instr_value(i), array)]);
        match step {
            GpuStep::Launch(l) => self.launch_kernels(*l, values),
            GpuStep::Gemm {
                index,
                gemm,
                lhs_copy,
                rhs_copy,
                int,
            } => defined(
                *index,
                self.gemm(*index, gemm, (*lhs_copy, *rhs_copy), *int, values)?,
            ),
            GpuStep::Reduce { launch, instrs } => self.reduce(*launch, instrs, values),
            GpuStep::SplitReduce {
                index,
                partial,
                total,
            } => defined(
                *index,
                self.split_reduce(*index, (*partial, *total), values)?,
            ),
            GpuStep::Copies(i, parts) => {
                let ins = &func.body[*i];
                let out = self.machine.alloc(&ins.ty)?;
                for &(c, operand) in parts {
                    let starts = self.plan.copies[c]
                        .starts
                        .iter()
                        .map(|s| get(values, ins.args[s.operand]))
                        .collect::<Result<Vec<_>, _>>()?;
                    self.copy_into(c, (&get(values, ins.args[operand])?, &out), &starts)?;
                }
                defined(*i, out)
            }
            GpuStep::Constant(i) => {
                let c = self
                    .constants
                    .get(i)
                    .ok_or(GpuError::Missing(func.instr_value(*i).0))?;
                defined(*i, c.clone())
            }
            GpuStep::View(i) => {
                let ins = &func.body[*i];
                let operand = get(values, ins.args[0])?;
                defined(*i, M::reshaped(&operand, ins.ty.shape.clone()))
            }
            GpuStep::Scatter { index, kernels } => {
                defined(*index, self.scatter(*index, *kernels, values)?)
            }
            GpuStep::Gather { index, kernel } => {
                let ins = &func.body[*index];
                let (operand, indices) = (get(values, ins.args[0])?, get(values, ins.args[1])?);
                let out = self.machine.alloc(&ins.ty)?;
                let len = self.plan.gathers[*kernel].len();
                // SAFETY: the gather reads its index vectors within the indices, clamps each
                // start so the element read lies inside the operand, and writes each result
                // element once.
                unsafe {
                    self.machine.launch_blocks(
                        &self.gather_functions[*kernel],
                        self.machine.grid_for(len, BLOCK),
                        BLOCK,
                        &[M::address(&operand), M::address(&indices), M::address(&out)],
                    )?;
                }
                defined(*index, out)
            }
            GpuStep::Host(i) => defined(*i, self.host(*i, values)?),
            GpuStep::Call { members, call } => self.call(members, *call, values),
        }
    }

    /// Scatter `k` computing instruction `index`: each update's (or update element's) place
    /// in (result position, interpreter order) order, then every result element from its
    /// operand element and its updates in that order.
    fn scatter(
        &self,
        index: usize,
        k: usize,
        values: &[Option<M::Array>],
    ) -> Result<M::Array, GpuError> {
        let ins = &self.plan.func.body[index];
        let (operand, indices, updates) = (
            get(values, ins.args[0])?,
            get(values, ins.args[1])?,
            get(values, ins.args[2])?,
        );
        let machine = &self.machine;
        let scratch = |n: usize| machine.alloc(&TensorType::new(ferrax_ir::DType::I32, [n]));
        let out = machine.alloc(&ins.ty)?;
        let entries = &self.scatter_functions[k];
        let a = |x: &M::Array| M::address(x);
        // Scratch (held until the launches are queued), then each launch: its block size,
        // the elements it covers and its parameters.
        let held: Vec<M::Array>;
        let launches: Vec<(u32, usize, Vec<u64>)> = match &self.plan.scatters[k] {
            Scatters::Rows(r) if r.mode == RowScatterMode::Atomic => vec![
                (BLOCK, r.len(), vec![a(&operand), a(&out)]),
                (
                    BLOCK,
                    r.updates * r.n,
                    vec![a(&indices), a(&updates), a(&out)],
                ),
            ],
            Scatters::Rows(r) => {
                // The order, the sorted rows, and each row's bounds among them.
                held = vec![
                    scratch(r.updates)?,
                    scratch(r.updates)?,
                    scratch(r.rows + 1)?,
                ];
                vec![
                    (
                        RANK_BLOCK,
                        r.updates,
                        vec![a(&indices), a(&held[0]), a(&held[1])],
                    ),
                    (BLOCK, r.rows + 1, vec![a(&held[1]), a(&held[2])]),
                    (
                        BLOCK,
                        r.len(),
                        vec![a(&operand), a(&updates), a(&held[0]), a(&held[2]), a(&out)],
                    ),
                ]
            }
            Scatters::Elements(s) => {
                // The update elements' targets and places, the order and the sorted targets.
                let (count, len) = (s.updates, s.operand_len);
                held = (0..4)
                    .map(|_| scratch(count))
                    .collect::<Result<Vec<_>, _>>()?;
                vec![
                    (BLOCK, count, vec![a(&indices), a(&held[0]), a(&held[1])]),
                    (
                        BLOCK,
                        count,
                        vec![a(&held[0]), a(&held[1]), a(&held[2]), a(&held[3])],
                    ),
                    (
                        BLOCK,
                        len,
                        vec![a(&operand), a(&updates), a(&held[2]), a(&held[3]), a(&out)],
                    ),
                ]
            }
        };
        for (entry, (block, len, params)) in entries.iter().zip(&launches) {
            // SAFETY: the keys and rank entries read the indices and write one place per
            // update into scratch of that many, the bounds entry one per row and one more;
            // the apply and copy entries read the operand and write the result at its
            // elements, the apply entry reading the updates at the places written; the combine
            // entry reads each update element and its index, and reduces into the result at
            // rows inside it.
            unsafe {
                machine.launch_blocks(entry, machine.grid_for(*len, *block), *block, params)?
            };
        }
        Ok(out)
    }

    /// Kernel launch `l`: its outputs allocated, its entry queued over its elements.
    fn launch_kernels(
        &self,
        l: usize,
        values: &[Option<M::Array>],
    ) -> Result<Vec<(ValueId, M::Array)>, GpuError> {
        let (func, machine) = (&self.plan.func, &self.machine);
        let mut addresses = Vec::new();
        let mut outputs = Vec::new();
        for &k in &self.plan.launches[l].kernels {
            for b in &self.plan.kernels[k].sig.buffers {
                match b.role {
                    Role::Input => addresses.push(M::address(&get(values, b.value)?)),
                    Role::Output => {
                        let ty = func
                            .value_type(b.value)
                            .ok_or(GpuError::Missing(b.value.0))?;
                        let array = machine.alloc(ty)?;
                        addresses.push(M::address(&array));
                        outputs.push((b.value, array));
                    }
                    // A row kernel keeps its scratch rows in registers.
                    Role::Scratch => {}
                    Role::Partial(_) => return Err(GpuError::Missing(b.value.0)),
                }
            }
        }
        let (len, block) = self.plan.launch_shape(l);
        let grid = machine.grid_for(len, block);
        // SAFETY: every address is a live buffer of its kernel's element count (inputs are
        // kept alive in `values`, outputs in `outputs`).
        unsafe { machine.launch_blocks(&self.functions[l], grid, block, &addresses)? };
        Ok(outputs)
    }

    /// The matrix product of instruction `index`: its operands first copied into matrix
    /// layout where `copies` says, then cuBLAS, or integer kernel `int`.
    fn gemm(
        &self,
        index: usize,
        g: &Gemm,
        (lhs_copy, rhs_copy): (Option<usize>, Option<usize>),
        int: Option<usize>,
        values: &[Option<M::Array>],
    ) -> Result<M::Array, GpuError> {
        let machine = &self.machine;
        let ins = &self.plan.func.body[index];
        let operand = |k: usize, copy: Option<usize>| {
            let value = get(values, ins.args[k])?;
            match copy {
                Some(c) => self.copy(c, &value),
                None => Ok(value),
            }
        };
        let (lhs, rhs) = (operand(0, lhs_copy)?, operand(1, rhs_copy)?);
        let ty = &ins.ty;
        let out = machine.alloc(ty)?;
        match int {
            Some(k) => {
                let grid = machine.grid_for(self.plan.int_gemms[k].results(), BLOCK);
                let addresses = [M::address(&lhs), M::address(&rhs), M::address(&out)];
                // SAFETY: operands and result hold exactly the kernel's shapes.
                unsafe {
                    machine.launch_blocks(&self.int_gemm_functions[k], grid, BLOCK, &addresses)?
                };
            }
            None => {
                let lda = if g.lhs_k_first { g.m } else { g.k };
                let ldb = if g.rhs_k_last { g.k } else { g.n };
                // Row-major C = A·B is column-major Cᵀ = Bᵀ·Aᵀ.
                // SAFETY: operand and result buffers hold exactly these shapes.
                unsafe {
                    machine.gemm(
                        ty.dtype,
                        (g.rhs_k_last, g.lhs_k_first),
                        (g.n, g.m, g.k),
                        (M::address(&rhs), ldb, g.k * g.n),
                        (M::address(&lhs), lda, g.m * g.k),
                        (M::address(&out), g.n, g.m * g.n),
                        g.batch,
                        self.matmul,
                    )?
                }
            }
        }
        Ok(out)
    }

    /// Reduction launch `launch`, computing instructions `instrs`.
    fn reduce(
        &self,
        launch: usize,
        instrs: &[usize],
        values: &[Option<M::Array>],
    ) -> Result<Vec<(ValueId, M::Array)>, GpuError> {
        let (func, machine) = (&self.plan.func, &self.machine);
        let mut addresses = Vec::with_capacity(2 * instrs.len());
        let mut outputs = Vec::with_capacity(instrs.len());
        for &i in instrs {
            let ins = &func.body[i];
            let out = machine.alloc(&ins.ty)?;
            addresses.push(M::address(&get(values, ins.args[0])?));
            addresses.push(M::address(&out));
            outputs.push((func.instr_value(i), out));
        }
        let reductions = &self.plan.reductions;
        let l = &self.plan.reduce_launches[launch];
        let grid = l.grid(reductions, machine.multiprocessors());
        // SAFETY: each input holds `outputs * reduced` elements of its part, each result
        // `outputs` (inputs are kept alive in `values`, results in `outputs`).
        unsafe {
            machine.launch_blocks(
                &self.reduce_functions[launch],
                grid,
                l.block(reductions),
                &addresses,
            )?
        };
        Ok(outputs)
    }

    /// Instruction `index`, a reduction in two launches: into partial results, then their
    /// total.
    fn split_reduce(
        &self,
        index: usize,
        (partial, total): (usize, usize),
        values: &[Option<M::Array>],
    ) -> Result<M::Array, GpuError> {
        let machine = &self.machine;
        let ins = &self.plan.func.body[index];
        let reductions = &self.plan.reductions;
        let launches = &self.plan.reduce_launches;
        let first = &reductions[launches[partial].parts[0]];
        let partials = machine.alloc(&TensorType::new(
            first.result,
            [first.outputs * first.segments],
        ))?;
        let out = machine.alloc(&ins.ty)?;
        let input = get(values, ins.args[0])?;
        for (l, from, to) in [(partial, &input, &partials), (total, &partials, &out)] {
            let launch = &launches[l];
            // SAFETY: the input holds the reduction's elements, the partials buffer
            // `outputs × segments` partial results, the result `outputs`.
            unsafe {
                machine.launch_blocks(
                    &self.reduce_functions[l],
                    launch.grid(reductions, machine.multiprocessors()),
                    launch.block(reductions),
                    &[M::address(from), M::address(to)],
                )?
            };
        }
        Ok(out)
    }

    /// Instruction `index` on the host: its operands copied back, evaluated by the reference
    /// interpreter, its result copied up again.
    fn host(&self, index: usize, values: &[Option<M::Array>]) -> Result<M::Array, GpuError> {
        let ins = &self.plan.func.body[index];
        let operands = ins
            .args
            .iter()
            .map(|&a| Ok(self.machine.download(&get(values, a)?)?))
            .collect::<Result<Vec<_>, GpuError>>()?;
        let refs: Vec<&Array> = operands.iter().collect();
        Ok(self.machine.upload(&eval_op(&ins.op, &refs)?)?)
    }
}

/// The live value `v` of a run.
pub(super) fn get<A: Clone>(values: &[Option<A>], v: ValueId) -> Result<A, GpuError> {
    values[v.index()].clone().ok_or(GpuError::Missing(v.0))
}

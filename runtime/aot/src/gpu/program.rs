//! Running a [`GpuRunPlan`] on a [`GpuMachine`]: the modules and constants loaded once, then
//! each run's steps queued on one stream, each value let go of after its last use.

use super::check::check_gpu_plan;
use super::control::Call;
use super::plan::{GpuRunPlan, GpuStep, Param, ScatterLaunches, BLOCK};
use super::GpuRunError;
use crate::error::ArtifactError;
use crate::gemm::Gemm;
use ferrax_ir::{DType, TensorType, ValueId};
use ferrax_runtime::cuda::MatmulPrecision;
use ferrax_runtime::machine::GpuMachine;
use ferrax_runtime::{check_args, eval_op, Array, RuntimeError, SharedParts};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

/// A GPU program loaded on a machine: its plan, its entries and its constants there.
pub struct GpuProgram<M: GpuMachine> {
    pub(super) plan: GpuRunPlan,
    pub(super) machine: M,
    constants: HashMap<usize, M::Array>,
    /// Per kernel launch, its entry.
    functions: Vec<M::Function>,
    reduce_functions: Vec<M::Function>,
    copy_functions: Vec<M::Function>,
    int_gemm_functions: Vec<M::Function>,
    /// Per scatter, its entries in launch order.
    scatter_functions: Vec<Vec<M::Function>>,
    gather_functions: Vec<M::Function>,
    attention_functions: Vec<M::Function>,
    /// Per control-flow call, its regions' programs.
    calls: Vec<Call<M>>,
    matmul: MatmulPrecision,
    /// Whether its modules were loaded as machine code (cubins), not compiled from PTX.
    machine_code: bool,
    /// This program's identity among the process's, for its recordings.
    id: u64,
}

impl<M: GpuMachine + Clone> GpuProgram<M> {
    /// `plan`, once checked, with its modules, constants and control-flow regions loaded on
    /// `machine`, its f32 products computed as `matmul` says.
    pub fn load(
        plan: GpuRunPlan,
        machine: &M,
        matmul: MatmulPrecision,
    ) -> Result<GpuProgram<M>, GpuRunError> {
        check_gpu_plan(&plan)?;
        GpuProgram::load_checked(plan, machine, matmul)
    }

    /// [`GpuProgram::load`] of a plan already checked, regions included.
    pub(crate) fn load_checked(
        mut plan: GpuRunPlan,
        machine: &M,
        matmul: MatmulPrecision,
    ) -> Result<GpuProgram<M>, GpuRunError> {
        let calls = std::mem::take(&mut plan.calls)
            .into_iter()
            .map(|c| Call::load(c, machine, matmul))
            .collect::<Result<_, _>>()?;
        let (order, wanted) = module_entries(&plan);
        let modules: Vec<(&str, &[&str])> = plan
            .modules
            .iter()
            .zip(&wanted)
            .map(|((ptx, _), names)| (ptx.as_str(), names.as_slice()))
            .collect();
        // Machine code where the plan has it for this device and the device takes it; else
        // the PTX, which the driver compiles.
        let cubins = plan
            .cubins
            .as_ref()
            .filter(|c| c.run_on(machine.compute_capability()) && c.modules.len() == modules.len());
        let assembled = cubins.and_then(|c| {
            let images: Vec<(&[u8], &[&str])> = c
                .modules
                .iter()
                .zip(&modules)
                .map(|(cubin, (_, entries))| (cubin.as_slice(), *entries))
                .collect();
            machine.load_cubins(&images).ok()
        });
        let machine_code = assembled.is_some();
        let loaded = match assembled {
            Some(functions) => functions,
            None => machine.load_modules(&modules)?,
        };
        let mut functions = in_launch_order(loaded, &order)?;
        let split = |functions: &mut Vec<M::Function>, n: usize| {
            functions.split_off(functions.len().saturating_sub(n))
        };
        let attention_functions = split(&mut functions, plan.attentions.len());
        let gather_functions = split(&mut functions, plan.gathers.len());
        let scatter_entries: usize = plan.scatters.iter().map(|s| s.entries.len()).sum();
        let mut scatter_entries = split(&mut functions, scatter_entries);
        let mut scatter_functions = Vec::with_capacity(plan.scatters.len());
        for s in &plan.scatters {
            let rest = scatter_entries.split_off(s.entries.len().min(scatter_entries.len()));
            scatter_functions.push(std::mem::replace(&mut scatter_entries, rest));
        }
        let int_gemm_functions = split(&mut functions, plan.int_gemms.len());
        let copy_functions = split(&mut functions, plan.copies.len());
        let reduce_functions = split(&mut functions, plan.reduce_launches.len());
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
            .collect::<Result<_, GpuRunError>>()?;
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
            attention_functions,
            calls,
            matmul,
            machine_code,
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
        })
    }
}

/// Per module of `plan`, the names of the launches whose entry it defines, and where each
/// launch stands among all of them ([`GpuRunPlan::entry_names`], in launch order). The modules
/// define [`GpuRunPlan::defined_entries`], `modules[m].1` of them each.
fn module_entries(plan: &GpuRunPlan) -> (Vec<usize>, Vec<Vec<&str>>) {
    let modules = plan
        .modules
        .iter()
        .enumerate()
        .flat_map(|(m, (_, n))| std::iter::repeat_n(m, *n));
    let module_of: HashMap<&str, usize> = plan.defined_entries().into_iter().zip(modules).collect();
    let mut wanted: Vec<Vec<(usize, &str)>> = vec![Vec::new(); plan.modules.len()];
    for (launch, name) in plan.entry_names().into_iter().enumerate() {
        // Checked: the modules define every name.
        if let Some(w) = module_of.get(name).and_then(|&m| wanted.get_mut(m)) {
            w.push((launch, name));
        }
    }
    let order = wanted.iter().flatten().map(|&(launch, _)| launch).collect();
    let names = wanted
        .into_iter()
        .map(|w| w.into_iter().map(|(_, name)| name).collect())
        .collect();
    (order, names)
}

/// `functions`, loaded module by module, put back in launch order: `order[i]` is where the
/// `i`th loaded stands.
fn in_launch_order<F>(functions: Vec<F>, order: &[usize]) -> Result<Vec<F>, GpuRunError> {
    if functions.len() != order.len() {
        return Err(GpuRunError::Plan(ArtifactError::Malformed(
            "its modules do not define its entries".into(),
        )));
    }
    let mut placed: Vec<(usize, F)> = order.iter().copied().zip(functions).collect();
    placed.sort_by_key(|&(launch, _)| launch);
    Ok(placed.into_iter().map(|(_, f)| f).collect())
}

/// The identity the next program loaded takes.
static NEXT_ID: AtomicU64 = AtomicU64::new(0);

impl<M: GpuMachine> GpuProgram<M> {
    /// This program's identity among the process's.
    pub(super) fn id(&self) -> u64 {
        self.id
    }

    /// The plan this program runs (its regions' plans are those of [`GpuProgram::regions`]).
    pub fn plan(&self) -> &GpuRunPlan {
        &self.plan
    }

    /// The programs of the control-flow regions, in call order, each call's in region order.
    pub fn regions(&self) -> impl Iterator<Item = &GpuProgram<M>> {
        self.calls.iter().flat_map(Call::regions)
    }

    /// Whether the program's modules (its regions' aside) were loaded as machine code
    /// assembled ahead of time, with no compilation by the driver.
    pub fn loaded_machine_code(&self) -> bool {
        self.machine_code
    }

    /// How f32 products are computed.
    pub fn matmul(&self) -> MatmulPrecision {
        self.matmul
    }

    /// How many instructions run on the host path, those of control-flow regions included.
    pub fn host_steps(&self) -> usize {
        let own = self
            .plan
            .steps
            .iter()
            .filter(|s| matches!(s, GpuStep::Host(_)))
            .count();
        own + self.regions().map(GpuProgram::host_steps).sum::<usize>()
    }

    /// Copies `args` to the device, runs, and copies the results back.
    pub fn run(&self, args: &[Array]) -> Result<Vec<Array>, GpuRunError> {
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
    /// waited for, unless a host step needs a value. A memory plan whose peak, beyond the
    /// inputs, exceeds what the device can still allocate is refused before anything runs.
    pub fn run_device(&self, args: &[M::Array]) -> Result<Vec<M::Array>, GpuRunError> {
        self.check_memory()?;
        self.run_planned(args)
    }

    /// Refuses a memory plan whose peak, beyond the inputs, exceeds what the device can
    /// still allocate.
    pub(super) fn check_memory(&self) -> Result<(), GpuRunError> {
        let memory = &self.plan.memory;
        let needed = memory.peak.saturating_sub(memory.inputs);
        if needed > 0 {
            let available = self.machine.memory_available()?;
            if needed > available {
                return Err(GpuRunError::OutOfMemory {
                    needed,
                    available,
                    peak_step: memory.peak_step,
                });
            }
        }
        Ok(())
    }

    /// Refuses arguments other than the program's parameters in number and type.
    pub(super) fn check_device_args(&self, args: &[M::Array]) -> Result<(), GpuRunError> {
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
        Ok(())
    }

    /// [`Self::run_device`] without the memory check: a control-flow region's run, inside
    /// one its caller checked.
    pub(super) fn run_planned(&self, args: &[M::Array]) -> Result<Vec<M::Array>, GpuRunError> {
        self.check_device_args(args)?;
        let func = &self.plan.func;
        let mut values: Vec<Option<M::Array>> = args.iter().cloned().map(Some).collect();
        values.resize(func.num_values(), None);
        // Decompositions several of whose parts the program reads, computed once on the host.
        let mut shared = SharedParts::default();
        for (step, released) in self.plan.steps.iter().zip(&self.plan.releases) {
            for (v, array) in self.run_step(step, &values, &mut shared)? {
                if let Some(slot) = values.get_mut(v.index()) {
                    *slot = Some(array);
                }
            }
            for v in released {
                if let Some(slot) = values.get_mut(v.index()) {
                    *slot = None;
                }
            }
        }
        func.outputs.iter().map(|&o| get(&values, o)).collect()
    }

    /// Strided copy `c` of `input` into a new array.
    fn copy(&self, c: usize, input: &M::Array) -> Result<M::Array, GpuRunError> {
        let out = self.machine.alloc(&self.plan.copies[c].output)?;
        self.copy_into(c, (input, &out), &[])?;
        Ok(out)
    }

    /// Strided copy `c` of `input` into `out`, which it writes part or all of.
    fn copy_into(
        &self,
        c: usize,
        (input, out): (&M::Array, &M::Array),
        starts: &[M::Array],
    ) -> Result<(), GpuRunError> {
        let grid = self.machine.grid_for(self.plan.copies[c].len, BLOCK);
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

    /// Queues `step`, reading the live `values`; returns the values it defines.
    fn run_step(
        &self,
        step: &GpuStep,
        values: &[Option<M::Array>],
        shared: &mut SharedParts,
    ) -> Result<Vec<(ValueId, M::Array)>, GpuRunError> {
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
                partials,
            } => defined(
                *index,
                self.split_reduce(*index, (*partial, *total), partials, values)?,
            ),
            GpuStep::Copies(i, parts) => {
                let ins = &func.body[*i];
                let out = self.machine.alloc(&ins.ty)?;
                for &(c, operand) in parts {
                    let starts = self.plan.copies[c]
                        .starts
                        .iter()
                        .map(|(s, _)| get(values, ins.args[*s]))
                        .collect::<Result<Vec<_>, _>>()?;
                    self.copy_into(c, (&get(values, ins.args[operand])?, &out), &starts)?;
                }
                defined(*i, out)
            }
            GpuStep::Constant(i) => {
                let c = self
                    .constants
                    .get(i)
                    .ok_or(GpuRunError::Missing(func.instr_value(*i).0))?;
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
                let len = self.plan.gathers[*kernel].len;
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
            GpuStep::Attention { launch, .. } => self.attention(*launch, values),
            GpuStep::Host(i) => defined(*i, self.host(*i, values, shared)?),
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
    ) -> Result<M::Array, GpuRunError> {
        let ins = &self.plan.func.body[index];
        let (operand, indices, updates) = (
            get(values, ins.args[0])?,
            get(values, ins.args[1])?,
            get(values, ins.args[2])?,
        );
        let machine = &self.machine;
        let scratch = |n: usize| machine.alloc(&TensorType::new(DType::I32, [n]));
        let out = machine.alloc(&ins.ty)?;
        let entries = &self.scatter_functions[k];
        let a = |x: &M::Array| M::address(x);
        // Scratch (held until the launches are queued), then each launch: its block size,
        // the elements it covers and its parameters.
        let held: Vec<M::Array>;
        let launches: Vec<(u32, usize, Vec<u64>)> = match self.plan.scatters[k].launches {
            ScatterLaunches::Atomic {
                len,
                update_elements,
            } => vec![
                (BLOCK, len, vec![a(&operand), a(&out)]),
                (
                    BLOCK,
                    update_elements,
                    vec![a(&indices), a(&updates), a(&out)],
                ),
            ],
            ScatterLaunches::Sorted {
                updates: count,
                rows,
                len,
                rank_block,
            } => {
                // The order, the sorted rows, and each row's bounds among them.
                held = vec![scratch(count)?, scratch(count)?, scratch(rows + 1)?];
                vec![
                    (
                        rank_block,
                        count,
                        vec![a(&indices), a(&held[0]), a(&held[1])],
                    ),
                    (BLOCK, rows + 1, vec![a(&held[1]), a(&held[2])]),
                    (
                        BLOCK,
                        len,
                        vec![a(&operand), a(&updates), a(&held[0]), a(&held[2]), a(&out)],
                    ),
                ]
            }
            ScatterLaunches::Elements {
                updates: count,
                operand_len,
            } => {
                // The update elements' targets and places, the order and the sorted targets.
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
                        operand_len,
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

    /// The addresses of `params` in order: each input's live value, and each output and
    /// partials buffer newly allocated (returned with its value).
    #[allow(clippy::type_complexity)]
    fn bind(
        &self,
        params: &[Param],
        values: &[Option<M::Array>],
    ) -> Result<(Vec<u64>, Vec<(ValueId, M::Array)>), GpuRunError> {
        let mut addresses = Vec::with_capacity(params.len());
        let mut outputs = Vec::new();
        for param in params {
            match param {
                Param::Input(v, _) => addresses.push(M::address(&get(values, *v)?)),
                Param::Output(v, ty)
                | Param::Partial {
                    value: v,
                    partials: ty,
                    ..
                } => {
                    let array = self.machine.alloc(ty)?;
                    addresses.push(M::address(&array));
                    outputs.push((*v, array));
                }
            }
        }
        Ok((addresses, outputs))
    }

    /// Each column reduction's result from the partials its launch wrote (in `outputs`, in
    /// `params`' order): folded by its reduction launches in turn.
    fn fold_partials(
        &self,
        params: &[Param],
        outputs: &mut [(ValueId, M::Array)],
    ) -> Result<(), GpuRunError> {
        let machine = &self.machine;
        let written = params
            .iter()
            .filter(|p| matches!(p, Param::Output(..) | Param::Partial { .. }));
        for (param, (_, array)) in written.zip(outputs.iter_mut()) {
            let Param::Partial { totals, .. } = param else {
                continue;
            };
            for (l, ty) in totals {
                let folded = machine.alloc(ty)?;
                let launch = &self.plan.reduce_launches[*l];
                // SAFETY: the plan's check matched each fold's parts with the buffer it reads
                // (the partials, or the fold before) and the one it writes.
                unsafe {
                    machine.launch_blocks(
                        &self.reduce_functions[*l],
                        launch.grid(machine.multiprocessors()),
                        launch.block,
                        &[M::address(array), M::address(&folded)],
                    )?
                };
                *array = folded;
            }
        }
        Ok(())
    }

    /// Attention launch `l`: its results allocated, one block a unit of work.
    fn attention(
        &self,
        l: usize,
        values: &[Option<M::Array>],
    ) -> Result<Vec<(ValueId, M::Array)>, GpuRunError> {
        let launch = &self.plan.attentions[l];
        let (addresses, outputs) = self.bind(&launch.params, values)?;
        let blocks = u32::try_from(launch.blocks)
            .map_err(|_| ArtifactError::Malformed(format!("{} blocks", launch.blocks)))?;
        // SAFETY: the plan's check matched the parameters with the attention's operands and
        // results; the kernel reads rows of its operands' sizes and writes each result
        // element of its block's rows once.
        unsafe {
            self.machine.launch_blocks(
                &self.attention_functions[l],
                blocks,
                launch.block,
                &addresses,
            )?;
        }
        Ok(outputs)
    }

    /// Kernel launch `l`: its outputs allocated, its entry queued over its elements.
    fn launch_kernels(
        &self,
        l: usize,
        values: &[Option<M::Array>],
    ) -> Result<Vec<(ValueId, M::Array)>, GpuRunError> {
        let machine = &self.machine;
        let launch = &self.plan.launches[l];
        let (addresses, mut outputs) = self.bind(&launch.params, values)?;
        let grid = machine.grid_for(launch.threads, launch.block);
        // SAFETY: every address is a live buffer of its kernel's element count (inputs are
        // kept alive in `values`, outputs in `outputs`), a column reduction's partials
        // buffer of the partials it writes.
        unsafe { machine.launch_blocks(&self.functions[l], grid, launch.block, &addresses)? };
        self.fold_partials(&launch.params, &mut outputs)?;
        Ok(outputs)
    }

    /// The matrix product of instruction `index`: its operands first copied into matrix
    /// layout where `copies` says, then cuBLAS, or integer product `int`.
    fn gemm(
        &self,
        index: usize,
        g: &Gemm,
        (lhs_copy, rhs_copy): (Option<usize>, Option<usize>),
        int: Option<usize>,
        values: &[Option<M::Array>],
    ) -> Result<M::Array, GpuRunError> {
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
                let grid = machine.grid_for(self.plan.int_gemms[k].len, BLOCK);
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
    ) -> Result<Vec<(ValueId, M::Array)>, GpuRunError> {
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
        let l = &self.plan.reduce_launches[launch];
        // SAFETY: each input holds `outputs * reduced` elements of its part, each result
        // `outputs` (inputs are kept alive in `values`, results in `outputs`).
        unsafe {
            machine.launch_blocks(
                &self.reduce_functions[launch],
                l.grid(machine.multiprocessors()),
                l.block,
                &addresses,
            )?
        };
        Ok(outputs)
    }

    /// Instruction `index`, a reduction in two launches: into partial results (a buffer of
    /// type `partials`), then their total.
    fn split_reduce(
        &self,
        index: usize,
        (partial, total): (usize, usize),
        partials: &TensorType,
        values: &[Option<M::Array>],
    ) -> Result<M::Array, GpuRunError> {
        let machine = &self.machine;
        let ins = &self.plan.func.body[index];
        let launches = &self.plan.reduce_launches;
        let partials = machine.alloc(partials)?;
        let out = machine.alloc(&ins.ty)?;
        let input = get(values, ins.args[0])?;
        for (l, from, to) in [(partial, &input, &partials), (total, &partials, &out)] {
            let launch = &launches[l];
            // SAFETY: the input holds the reduction's elements, the partials buffer
            // `outputs × segments` partial results, the result `outputs`.
            unsafe {
                machine.launch_blocks(
                    &self.reduce_functions[l],
                    launch.grid(machine.multiprocessors()),
                    launch.block,
                    &[M::address(from), M::address(to)],
                )?
            };
        }
        Ok(out)
    }

    /// Instruction `index` on the host: its operands copied back, evaluated by the reference
    /// interpreter (a decomposition once for the parts the program reads), its result copied
    /// up again.
    fn host(
        &self,
        index: usize,
        values: &[Option<M::Array>],
        shared: &mut SharedParts,
    ) -> Result<M::Array, GpuRunError> {
        let func = &self.plan.func;
        let ins = &func.body[index];
        let operands = ins
            .args
            .iter()
            .map(|&a| Ok(self.machine.download(&get(values, a)?)?))
            .collect::<Result<Vec<_>, GpuRunError>>()?;
        let refs: Vec<&Array> = operands.iter().collect();
        let out = match shared.value(func, index, &refs)? {
            Some(part) => part,
            None => eval_op(&ins.op, &refs)?,
        };
        Ok(self.machine.upload(&out)?)
    }

    /// The call whose instructions are `members` (one per result, the same operands), by
    /// the regions of `call`; returns each instruction's result.
    fn call(
        &self,
        members: &[usize],
        call: usize,
        values: &[Option<M::Array>],
    ) -> Result<Vec<(ValueId, M::Array)>, GpuRunError> {
        let func = &self.plan.func;
        let Some(&first) = members.first() else {
            return Ok(Vec::new());
        };
        let args = func.body[first]
            .args
            .iter()
            .map(|&a| get(values, a))
            .collect::<Result<Vec<_>, _>>()?;
        let results = self.calls[call].run(&self.machine, args)?;
        members
            .iter()
            .map(|&i| {
                let k = func.body[i].op.call_result().map_or(0, |(k, _)| k);
                let out = results.get(k).ok_or(GpuRunError::MissingCallPart(k))?;
                Ok((func.instr_value(i), out.clone()))
            })
            .collect()
    }
}

/// The live value `v` of a run.
pub(super) fn get<A: Clone>(values: &[Option<A>], v: ValueId) -> Result<A, GpuRunError> {
    values
        .get(v.index())
        .cloned()
        .flatten()
        .ok_or(GpuRunError::Missing(v.0))
}

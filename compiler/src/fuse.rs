//! Fusion: the program is cut into steps, each either one kernel (a run of elementwise ops over
//! one element count, compiled to a single loop) or one op left to the library path (the
//! reference interpreter for now). Values that live only inside a kernel never touch memory.
//!
//! [`schedule`] first reorders the program on its dataflow graph so that fusible instructions
//! of one element count that the dependencies allow together sit together (the order a tracer
//! emits interleaves them with unrelated work: in an MLP step, the ReLU after a matrix product
//! was split from the mask beside it by the loss's arithmetic). The partition then keeps that
//! order: a kernel is a maximal run of consecutive fusible instructions with the same element
//! count. Where the backend has row kernels, a run that reduces over trailing axes (softmax,
//! layernorm, row sums) becomes one row kernel instead: its elementwise producers, the
//! reductions, the per-row arithmetic on their results and the elementwise consumers of those,
//! all in one pass over each row's data per reduction.

use crate::kernel::rows::{row_index, RowRole};
use crate::kernel::{broadcast_access, row_gather, splat_constant, Access, LastReads};
use crate::target::{KernelOp, Target};
use ferrax_ir::{CompareOp, DType, Func, Instr, Op, TensorType, ValueId};
use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::Direction;
use std::collections::{BTreeSet, HashMap};

/// One step of a fused program.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// Instructions `start..end` of the body, fused into one kernel.
    Kernel { start: usize, end: usize },
    /// Instruction `index` of the body, run on its own.
    Op { index: usize },
    /// Instructions `start..end`, one row kernel over `rows` rows of `cols` elements;
    /// `roles[k]` is how instruction `start + k` takes part.
    Rows {
        start: usize,
        end: usize,
        rows: usize,
        cols: usize,
        roles: Vec<RowRole>,
    },
}

/// Whether instruction `i` can be computed element by element inside a kernel of `target`:
/// what its support table does not leave to the host, splat constants, and broadcasts a kernel
/// reads in place.
pub(crate) fn fusible(func: &Func, i: usize, target: &Target) -> bool {
    let ins = &func.body[i];
    let d = ins.ty.dtype;
    let operand = || ins.args.first().and_then(|&a| func.value_type(a));
    let computes = |op: KernelOp, d: DType| target.computes(op, d);
    match &ins.op {
        // Of the operand's type too where it differs: a complex number's absolute value is
        // real.
        Op::Unary(u) => {
            let op = KernelOp::Unary(*u);
            computes(op, d) && operand().is_some_and(|t| t.dtype == d || computes(op, t.dtype))
        }
        Op::Binary(b) => computes(KernelOp::Binary(*b), d),
        Op::Compare(c) => operand().is_some_and(|t| computes(KernelOp::Compare(*c), t.dtype)),
        Op::Select => computes(KernelOp::Select, d) && computes(KernelOp::Hold, DType::Bool),
        Op::Clamp => computes(KernelOp::Clamp, d),
        Op::Convert { to } => operand().is_some_and(|t| computes(KernelOp::Convert(*to), t.dtype)),
        Op::BitcastConvert { to } => {
            operand().is_some_and(|t| computes(KernelOp::Bitcast(*to), t.dtype))
        }
        Op::StopGradient => computes(KernelOp::Hold, d),
        Op::Constant(lit) => lit.is_splat() && computes(KernelOp::Hold, d),
        // Broadcasts that are a scalar, a row or a column pattern are read in place.
        Op::BroadcastInDim { dims, .. } => {
            computes(KernelOp::Hold, d)
                && operand().is_some_and(|t| broadcast_access(t, &ins.ty, dims).is_some())
        }
        // Row gathers (embedding lookups) are loads from the rows the indices pick, both
        // arrays in memory (kernels inline splat constants instead of reading them).
        Op::Gather(g) => {
            let types = (operand(), ins.args.get(1).and_then(|&a| func.value_type(a)));
            computes(KernelOp::RowGather, d)
                && matches!(types, (Some(x), Some(i)) if row_gather(x, i, g).is_some())
                && ins.args.iter().all(|&a| splat_constant(func, a).is_none())
        }
        Op::Iota { dtype, shape, dim } => {
            computes(KernelOp::Iota, *dtype) && iota_fits(*dtype, shape.dims(), *dim)
        }
        // Along the last axis: each operand loaded in its window of the row, picked by the
        // column (a backward pass's q, k and v gradients joined for their projection).
        Op::Concatenate { axis } => {
            let row = ins.ty.dims().last().copied().unwrap_or(0);
            computes(KernelOp::Window, d)
                && computes(KernelOp::Select, d)
                && computes(KernelOp::Iota, DType::I32)
                && computes(KernelOp::Compare(CompareOp::Lt), DType::I32)
                && computes(KernelOp::Hold, DType::Bool)
                && *axis + 1 == ins.ty.rank()
                && ins.ty.numel() > 0
                && row <= i32::MAX as usize
        }
        Op::Reshape { .. }
        | Op::Transpose { .. }
        | Op::Reverse { .. }
        | Op::Reduce { .. }
        | Op::DotGeneral(_)
        | Op::Slice { .. }
        | Op::Pad { .. }
        | Op::Scatter(_)
        | Op::DynamicSlice { .. }
        | Op::DynamicUpdateSlice
        | Op::Sort { .. }
        | Op::Argsort { .. }
        | Op::Fft { .. }
        | Op::TriangularSolve(_)
        | Op::Cholesky
        | Op::Lu(_)
        | Op::Qr(_)
        | Op::Eigh(_)
        | Op::Svd(_)
        | Op::Geqrf(_)
        | Op::HouseholderProduct
        | Op::Eig(_)
        | Op::Attention(_)
        | Op::CustomVjp(_)
        | Op::CustomJvp(_)
        | Op::DebugCallback { .. }
        | Op::PureCallback(_)
        | Op::IoCallback(_)
        | Op::AddDependency
        | Op::While(_)
        | Op::Cond(_)
        | Op::Scan(_)
        | Op::Remat(_) => false,
    }
}

/// Whether a kernel's iota of `dtype` along `dim` of `dims` holds its indices exactly (the
/// interpreter's iota wraps them into the type; a kernel computes them in the index's width).
fn iota_fits(dtype: DType, dims: &[usize], dim: usize) -> bool {
    let size = dims.get(dim).copied().unwrap_or(0) as u64;
    match dtype {
        DType::I32 => size <= 1 << 31,
        DType::U32 => size <= 1 << 32,
        DType::I64
        | DType::U8
        | DType::I8
        | DType::I16
        | DType::U16
        | DType::U64
        | DType::F32
        | DType::F64
        | DType::F16
        | DType::BF16
        | DType::Bool
        | DType::C64
        | DType::C128 => false,
    }
}

/// `func` with its instructions in a dataflow order that keeps fusible work together: a list
/// schedule that, after an instruction a kernel of `target` could compute, takes next a ready
/// one of the same element count that reads a value of the current run if there is one, and
/// otherwise the ready instruction that came first. (A ready instruction that reads nothing of
/// the run, such as a broadcast of a parameter, would only leave the kernel as an extra
/// output.) Only the order changes (values are renumbered), so results are the same.
pub fn schedule(func: &Func, target: &Target) -> Func {
    let n = func.body.len();
    let params = func.params.len();
    let producer = |a: &ValueId| a.index().checked_sub(params);
    // Constants and broadcasts are placed just before their first user rather than where they
    // were traced, and so is elementwise work on parameters and constants alone that computed
    // work of its element count reads (`late`). A broadcast of a computed value waits for it
    // (`waits_for`: its users do). Where they were traced (AdamW's bias corrections and moment
    // decays, after the whole backward pass), they would hold back the parameter updates that
    // read them, apart from the gradients they update with. Free work that only free work
    // reads keeps its place in the schedule, so that it fuses by its element count.
    let mut free = vec![false; n];
    for (i, ins) in func.body.iter().enumerate() {
        let args_free = ins.args.iter().all(|a| producer(a).is_none_or(|j| free[j]));
        free[i] = match &ins.op {
            Op::Constant(_) => true,
            op => (op.is_elementwise() || matches!(op, Op::BroadcastInDim { .. })) && args_free,
        };
    }
    let mut users = vec![Vec::new(); n];
    for (i, ins) in func.body.iter().enumerate() {
        for j in ins.args.iter().filter_map(producer) {
            users[j].push(i);
        }
    }
    // Only where the reader counts the same elements: placed before a reader of another
    // count (a broadcast of a bias correction), free work would cut that reader's run in two.
    let mut late = vec![false; n];
    for i in (0..n).rev() {
        let numel = func.body[i].ty.numel();
        late[i] = free[i]
            && users[i]
                .iter()
                .any(|&u| (!free[u] || late[u]) && func.body[u].ty.numel() == numel);
    }
    let mut leaf = vec![false; n];
    let mut waits_for: Vec<Option<usize>> = vec![None; n];
    for (i, ins) in func.body.iter().enumerate() {
        // Elementwise work waits for nothing: not for a broadcast of a value of another count.
        let placed_anywhere =
            |a: &ValueId| producer(a).is_none_or(|j| leaf[j] && waits_for[j].is_none());
        leaf[i] = match &ins.op {
            Op::Constant(_) | Op::BroadcastInDim { .. } => true,
            _ => late[i] && ins.args.iter().all(placed_anywhere),
        };
        waits_for[i] = match ins.op {
            Op::BroadcastInDim { .. } => ins.args.iter().filter_map(producer).find_map(|j| {
                if leaf[j] {
                    waits_for[j]
                } else {
                    Some(j)
                }
            }),
            _ => None,
        };
    }
    let mut graph = DiGraph::<usize, ()>::with_capacity(n, n);
    let nodes: Vec<NodeIndex> = (0..n).map(|i| graph.add_node(i)).collect();
    for (i, ins) in func.body.iter().enumerate() {
        for j in ins.args.iter().filter_map(producer) {
            let dependency = if leaf[j] { waits_for[j] } else { Some(j) };
            if let Some(d) = dependency {
                graph.update_edge(nodes[d], nodes[i], ());
            }
        }
    }
    let mut waiting: Vec<usize> = nodes
        .iter()
        .map(|&v| graph.neighbors_directed(v, Direction::Incoming).count())
        .collect();
    let class: Vec<Option<usize>> = (0..n)
        .map(|i| match row_reduction(func, i, target) {
            Some(_) => Some(func.body[i].ty.numel()),
            None => flat_len(func, i, target),
        })
        .collect();
    // A row reduction's rows and element count: work of either count, and reductions of the
    // same rows, that read the run's values join the run (a loss's gradient over the logits,
    // after the row statistics), rather than waiting behind other ready work.
    let row_shape: Vec<Option<(usize, usize)>> = (0..n)
        .map(|i| row_reduction(func, i, target).map(|(rows, cols)| (rows, rows * cols)))
        .collect();
    let mut ready: BTreeSet<usize> = (0..n).filter(|&i| !leaf[i] && waiting[i] == 0).collect();
    let mut order = Vec::with_capacity(n);
    let mut placed = vec![false; n];
    // The ready instructions that read a value of the current run and share its class: an
    // instruction becomes ready when the last instruction it reads is scheduled, so these are
    // exactly the users made ready during the run that share its class.
    // (Picking from `ready` only when none joins ends the run: `joining` is then empty.)
    let mut joining: BTreeSet<usize> = BTreeSet::new();
    // The rows the current run reduces and their element count, once it reduces rows.
    let mut run_rows: Option<(usize, usize)> = None;
    // Between runs, work no kernel computes (a matrix product, say) goes first, so that
    // fusible work that waits for nothing joins, as late as it may, the run that reads it;
    // then scalar work, which larger runs read as broadcasts: done first, it cannot cut a
    // run in two (a PRNG's key schedule before the hash of its counters).
    let next_run = |ready: &BTreeSet<usize>| {
        let unfused = ready.iter().find(|&&i| class[i].is_none());
        let scalar = || ready.iter().find(|&&i| class[i] == Some(1));
        unfused.or_else(scalar).or_else(|| ready.first()).copied()
    };
    while let Some(i) = joining.first().copied().or_else(|| next_run(&ready)) {
        ready.remove(&i);
        joining.remove(&i);
        place(func, i, &leaf, &mut placed, &mut order);
        // Work of another count ends the rows' run.
        if !of_rows(run_rows, class[i]) {
            run_rows = None;
        }
        run_rows = row_shape[i].or(run_rows);
        for user in graph.neighbors_directed(nodes[i], Direction::Outgoing) {
            let u = graph[user];
            waiting[u] -= 1;
            if waiting[u] == 0 {
                ready.insert(u);
                let rows = of_rows(run_rows, class[u])
                    || run_rows.is_some_and(|(_, e)| row_shape[u].is_some_and(|(_, f)| f == e));
                if class[i].is_some() && (class[u] == class[i] || rows) {
                    joining.insert(u);
                }
            }
        }
    }
    // Leaves that only the outputs use.
    for i in 0..n {
        place(func, i, &leaf, &mut placed, &mut order);
    }
    // Every instruction once, after what it reads, or the traced order is kept.
    let mut position = vec![usize::MAX; n];
    for (k, &i) in order.iter().enumerate() {
        position[i] = k;
    }
    let ordered = order.len() == n
        && order.iter().enumerate().all(|(k, &i)| {
            let mut reads = func.body[i].args.iter().filter_map(producer);
            reads.all(|j| position[j] < k)
        });
    if !ordered {
        return func.clone();
    }
    let mut renamed: Vec<ValueId> = (0..params).map(|i| ValueId(i as u32)).collect();
    renamed.resize(params + n, ValueId(0));
    for (k, &i) in order.iter().enumerate() {
        renamed[params + i] = ValueId((params + k) as u32);
    }
    Func {
        name: func.name.clone(),
        params: func.params.clone(),
        body: order
            .iter()
            .map(|&i| {
                let ins = &func.body[i];
                Instr {
                    op: ins.op.clone(),
                    args: ins.args.iter().map(|a| renamed[a.index()]).collect(),
                    ty: ins.ty.clone(),
                }
            })
            .collect(),
        outputs: func.outputs.iter().map(|o| renamed[o.index()]).collect(),
    }
}

/// Whether work of class `c` counts the rows or the elements of a run over rows `rows`.
fn of_rows(rows: Option<(usize, usize)>, c: Option<usize>) -> bool {
    rows.is_some_and(|(r, e)| c == Some(r) || c == Some(e))
}

/// Appends instruction `i` to `order` unless it is there already, after the leaves it reads
/// (see [`schedule`]) that are not.
fn place(func: &Func, i: usize, leaf: &[bool], placed: &mut [bool], order: &mut Vec<usize>) {
    if placed[i] {
        return;
    }
    placed[i] = true;
    for a in &func.body[i].args {
        if let Some(j) = a.index().checked_sub(func.params.len()) {
            if leaf[j] {
                place(func, j, leaf, placed, order);
            }
        }
    }
    order.push(i);
}

/// The most instructions one flat kernel takes. Code generation's time per instruction grows
/// with a function's size (register allocation is super-linear), so a longer run is cut into
/// kernels of bounded size: measured on chains of `tanh`, compile time per instruction is flat
/// at this bound and at 64, and five to nine times higher with no bound at 5,000 instructions.
const KERNEL_BOUND: usize = 256;

/// Where to end a kernel that starts at `start` and would run past [`KERNEL_BOUND`]: in the
/// bound's second half, at the point the fewest values cross (values of the kernel read after
/// that point), the latest such point on a tie.
fn split_point(func: &Func, reads: &LastReads, start: usize) -> usize {
    // crossing[k]: values of start..start+k read at or after start+k.
    let mut delta = vec![0i64; KERNEL_BOUND + 2];
    for j in start..start + KERNEL_BOUND {
        let v = func.instr_value(j);
        if splat_constant(func, v).is_some() {
            continue;
        }
        let last = reads.last(v).max(j).saturating_sub(start);
        delta[j - start + 1] += 1;
        delta[(last + 1).min(KERNEL_BOUND + 1)] -= 1;
    }
    let mut crossing = 0;
    let mut best = (i64::MAX, start + KERNEL_BOUND);
    for (k, d) in delta.iter().enumerate().take(KERNEL_BOUND + 1) {
        crossing += d;
        if k >= KERNEL_BOUND / 2 && crossing <= best.0 {
            best = (crossing, start + k);
        }
    }
    best.1
}

/// The steps of `func`, in program order, for kernels of `target`.
pub fn partition(func: &Func, target: &Target) -> Vec<Step> {
    let reads = LastReads::of(func);
    let reductions = next_row_reductions(func, target);
    let mut steps = Vec::new();
    let mut i = 0;
    while i < func.body.len() {
        if let Some(step) = row_group(func, i, target, &reductions) {
            if let Step::Rows { end, .. } = step {
                i = end;
            }
            steps.push(step);
            continue;
        }
        let Some(len) = flat_len(func, i, target) else {
            steps.push(Step::Op { index: i });
            i += 1;
            continue;
        };
        // A column reduction's value is whole only after the kernel, and a window's elements
        // are not the kernel's: what reads either is not in.
        let mut stored: Vec<ValueId> = Vec::new();
        let mut end = i;
        while end < func.body.len()
            && flat_len(func, end, target) == Some(len)
            && !func.body[end].args.iter().any(|a| stored.contains(a))
            && !reads_from_memory(func, end, i..end)
        {
            if end - i == KERNEL_BOUND {
                end = split_point(func, &reads, i);
                break;
            }
            if column_reduction(func, end, target) || window(func, end, target) {
                stored.push(func.instr_value(end));
            }
            end += 1;
        }
        // A kernel that only moves a constant or a scalar is not worth a launch.
        let computes = func.body[i..end]
            .iter()
            .any(|ins| !matches!(ins.op, Op::Constant(_) | Op::BroadcastInDim { .. }));
        if computes {
            steps.push(Step::Kernel { start: i, end });
        } else {
            steps.extend((i..end).map(|index| Step::Op { index }));
        }
        i = end;
    }
    materialize_constants(func, steps)
}

/// `func` printed with a comment before each step naming what runs it (`names[k]` for
/// `steps[k]`; a run of steps of one name is named once): the fused program. Splat constants
/// that only kernels read, which no step makes, are marked as inlined.
pub fn listing(func: &Func, steps: &[Step], names: &[String]) -> String {
    let inlined = "inlined into kernels".to_string();
    let mut heads: Vec<Option<&String>> = vec![Some(&inlined); func.body.len()];
    for (step, name) in steps.iter().zip(names) {
        if let Step::Kernel { start, end } | Step::Rows { start, end, .. } = *step {
            heads[start..end].fill(None);
            heads[start] = Some(name);
        }
    }
    for (step, name) in steps.iter().zip(names) {
        if let Step::Op { index } = *step {
            if heads[index].is_some() {
                heads[index] = Some(name);
            }
        }
    }
    // The line each instruction starts on: one holding functions (a loop's body) takes several.
    let mut starts = HashMap::new();
    let mut line = 1;
    for (i, ins) in func.body.iter().enumerate() {
        starts.insert(line, i);
        line += match ins.op.regions().is_empty() {
            true => 1,
            false => ins.to_string().lines().count(),
        };
    }
    let text = func.to_string();
    let mut out = String::with_capacity(text.len() * 2);
    let mut last = None;
    for (k, line) in text.lines().enumerate() {
        if let Some(&Some(head)) = starts.get(&k).and_then(|&i| heads.get(i)) {
            if last != Some(head) {
                out.push_str(&format!("  // {head}\n"));
                last = Some(head);
            }
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// Kernels inline the splat constants they read (see [`kernel_outputs`]), so such a constant
/// is made as an array (a step of its own, after the kernel that holds it) only where a library
/// op reads it or the program returns it; otherwise no step makes it at all.
fn materialize_constants(func: &Func, steps: Vec<Step>) -> Vec<Step> {
    let mut in_kernel = vec![false; func.body.len()];
    for step in &steps {
        if let Step::Kernel { start, end } | Step::Rows { start, end, .. } = *step {
            in_kernel[start..end].fill(true);
        }
    }
    // Values read outside kernels or returned, found in one pass.
    let mut read_as_array = vec![false; func.params.len() + func.body.len()];
    for (j, ins) in func.body.iter().enumerate() {
        if !in_kernel[j] {
            for a in &ins.args {
                read_as_array[a.index()] = true;
            }
        }
    }
    for v in &func.outputs {
        read_as_array[v.index()] = true;
    }
    let constant = |i: usize| splat_constant(func, func.instr_value(i)).is_some();
    // A splat made as an array that is a broadcast reads its operand as an array too (the
    // scalar constant it broadcasts), though only kernels read that otherwise; users come
    // after their operands, so one pass from the end reaches every link of a chain.
    for (j, ins) in func.body.iter().enumerate().rev() {
        if constant(j) && read_as_array[func.instr_value(j).index()] {
            for a in &ins.args {
                read_as_array[a.index()] = true;
            }
        }
    }
    let needed = |i: usize| read_as_array[func.instr_value(i).index()];
    let mut out = Vec::with_capacity(steps.len());
    for step in steps {
        match step {
            Step::Op { index } if constant(index) && !needed(index) => {}
            Step::Kernel { start, end } | Step::Rows { start, end, .. } => {
                out.push(step);
                out.extend(
                    (start..end)
                        .filter(|&i| constant(i) && needed(i))
                        .map(|index| Step::Op { index }),
                );
            }
            step => out.push(step),
        }
    }
    out
}

/// Whether instruction `i` reads from memory a value computed by instructions `run`, so that
/// it cannot join their kernel: a gather reads its rows and indices from memory, and so does a
/// broadcast that is not element for element (possible in one run only where both are empty).
fn reads_from_memory(func: &Func, i: usize, run: std::ops::Range<usize>) -> bool {
    let ins = &func.body[i];
    let params = func.params.len();
    let in_run = |a: &ValueId| {
        a.index()
            .checked_sub(params)
            .is_some_and(|k| run.contains(&k))
    };
    match &ins.op {
        // A concatenation loads its operands' windows.
        Op::Gather(_) | Op::Concatenate { .. } => ins.args.iter().any(in_run),
        Op::BroadcastInDim { dims, .. } => {
            let operand = ins.args[0];
            let access = func
                .value_type(operand)
                .and_then(|t| broadcast_access(t, &ins.ty, dims));
            in_run(&operand) && !matches!(access, Some(Access::Each | Access::Scalar))
        }
        // Elementwise ops, column reductions and windows read the run's values in registers;
        // the rest never join a run.
        Op::Constant(_)
        | Op::Iota { .. }
        | Op::Unary(_)
        | Op::Binary(_)
        | Op::Compare(_)
        | Op::Select
        | Op::Clamp
        | Op::Convert { .. }
        | Op::BitcastConvert { .. }
        | Op::Reshape { .. }
        | Op::Transpose { .. }
        | Op::Reverse { .. }
        | Op::Reduce { .. }
        | Op::DotGeneral(_)
        | Op::Slice { .. }
        | Op::Pad { .. }
        | Op::Scatter(_)
        | Op::DynamicSlice { .. }
        | Op::DynamicUpdateSlice
        | Op::StopGradient
        | Op::Sort { .. }
        | Op::Argsort { .. }
        | Op::Fft { .. }
        | Op::TriangularSolve(_)
        | Op::Cholesky
        | Op::Lu(_)
        | Op::Qr(_)
        | Op::Eigh(_)
        | Op::Svd(_)
        | Op::Geqrf(_)
        | Op::HouseholderProduct
        | Op::Eig(_)
        | Op::Attention(_)
        | Op::CustomVjp(_)
        | Op::CustomJvp(_)
        | Op::DebugCallback { .. }
        | Op::PureCallback(_)
        | Op::IoCallback(_)
        | Op::AddDependency
        | Op::While(_)
        | Op::Cond(_)
        | Op::Scan(_)
        | Op::Remat(_) => false,
    }
}

/// The element count of the flat kernel instruction `i` can be part of: its own for a fusible
/// instruction, its operand's for a column reduction or a window.
fn flat_len(func: &Func, i: usize, target: &Target) -> Option<usize> {
    if fusible(func, i, target) {
        return Some(func.body[i].ty.numel());
    }
    if !column_reduction(func, i, target) && !window(func, i, target) {
        return None;
    }
    func.value_type(func.body[i].args[0]).map(TensorType::numel)
}

/// Whether instruction `i` is a slice a flat kernel stores as it computes its operand, where
/// the target does: a window of the last axis (unit strides, every other axis whole, the
/// q, k and v of a fused projection), of a value of more elements.
pub fn window(func: &Func, i: usize, target: &Target) -> bool {
    let ins = &func.body[i];
    let Op::Slice {
        start,
        limit,
        strides,
    } = &ins.op
    else {
        return false;
    };
    let Some(operand) = ins.args.first().and_then(|&a| func.value_type(a)) else {
        return false;
    };
    let rank = operand.rank();
    let whole = (0..rank.saturating_sub(1))
        .all(|a| start.get(a) == Some(&0) && limit.get(a) == operand.dims().get(a));
    target.computes(KernelOp::Window, ins.ty.dtype)
        && rank > 0
        && whole
        && strides.iter().all(|&s| s == 1)
        && ins.ty.numel() > 0
        && operand.numel() > ins.ty.numel()
}

/// Whether instruction `i` is a reduction a flat kernel computes as it goes (accumulating
/// each column in partial results per launch part): one over leading axes that keeps at least
/// one axis (bias gradients, layernorm's parameter gradients), where the target computes it,
/// of an operand of at least the target's [`Target::columns`] elements.
pub fn column_reduction(func: &Func, i: usize, target: &Target) -> bool {
    let ins = &func.body[i];
    let Op::Reduce { op, axes } = &ins.op else {
        return false;
    };
    let Some(operand) = ins.args.first().and_then(|&a| func.value_type(a)) else {
        return false;
    };
    let leading = axes.iter().enumerate().all(|(k, &a)| a == k);
    target.computes(KernelOp::ColumnReduce(*op), ins.ty.dtype)
        && !axes.is_empty()
        && leading
        && axes.len() < operand.rank()
        && operand.numel() > ins.ty.numel()
        && operand.numel() >= target.columns
}

/// `(rows, cols)` of a reduction a row kernel computes: one over the trailing axes (at least
/// two elements per row) in rows the target takes, where it computes it. There must be a row:
/// over none, a row value and an element value both have no elements, so roles would be
/// ambiguous (and there is nothing to compute).
fn row_reduction(func: &Func, i: usize, target: &Target) -> Option<(usize, usize)> {
    let ins = &func.body[i];
    let Op::Reduce { op, axes } = &ins.op else {
        return None;
    };
    let operand = func.value_type(*ins.args.first()?)?;
    let rank = operand.rank();
    let trailing = axes
        .iter()
        .enumerate()
        .all(|(k, &a)| a == rank - axes.len() + k);
    let cols: usize = axes.iter().map(|&a| operand.dims()[a]).product();
    let ok = target.rows.fits(ins.ty.numel(), cols)
        && target.computes(KernelOp::RowReduce(*op), ins.ty.dtype)
        && !axes.is_empty()
        && trailing
        && cols >= 2
        && ins.ty.numel() > 0;
    ok.then(|| (ins.ty.numel(), cols))
}

/// The role of instruction `i` in a row kernel over `rows` by `cols` that starts at
/// instruction `start`, or `None` if it cannot be part of it.
fn row_role(
    func: &Func,
    i: usize,
    target: &Target,
    (rows, cols): (usize, usize),
    start: usize,
) -> Option<RowRole> {
    if row_reduction(func, i, target) == Some((rows, cols)) {
        return Some(RowRole::Reduce);
    }
    let ins = &func.body[i];
    let n = ins.ty.numel();
    let role = if n == rows * cols {
        RowRole::Elem
    } else if n == rows {
        RowRole::Row
    } else {
        return None;
    };
    let operand = ins.args.first().and_then(|&a| func.value_type(a));
    let ok = match &ins.op {
        // Same elements, another shape: the kernel reads them in place.
        Op::Reshape { .. } => {
            operand.is_some_and(|t| t.numel() == n) && target.computes(KernelOp::Hold, ins.ty.dtype)
        }
        Op::BroadcastInDim { dims, .. } if fusible(func, i, target) => {
            let t = operand?;
            let defined_here = (start..i).any(|k| func.instr_value(k) == ins.args[0]);
            match broadcast_access(t, &ins.ty, dims)? {
                Access::Each | Access::Scalar => true,
                _ if t.numel() == n => true,
                Access::Outer(m) => role == RowRole::Elem && m == cols,
                // A row of columns is read from memory, never from a value of the kernel.
                Access::Inner(m) => role == RowRole::Elem && m == cols && !defined_here,
                Access::Gather { .. } | Access::Window { .. } => false,
            }
        }
        // Row kernels do not index rows by value, nor load windows (flat kernels do).
        Op::Gather(_) | Op::Concatenate { .. } => false,
        // An iota along the row or across rows (a one-hot's class index, say).
        Op::Iota { shape, dim, .. } => {
            fusible(func, i, target) && row_index(shape.dims(), *dim, role, (rows, cols)).is_some()
        }
        _ => fusible(func, i, target),
    };
    ok.then_some(role)
}

/// For each instruction, the first row reduction at or after it that a run of fusible
/// instructions and reshapes reaches, with its rows and columns: one backward pass, so that
/// looking for a row group from every instruction costs the program's length once.
fn next_row_reductions(func: &Func, target: &Target) -> Vec<Option<(usize, (usize, usize))>> {
    let n = func.body.len();
    let mut next = vec![None; n + 1];
    for j in (0..n).rev() {
        next[j] = match row_reduction(func, j, target) {
            Some(shape) => Some((j, shape)),
            None if fusible(func, j, target) || matches!(func.body[j].op, Op::Reshape { .. }) => {
                next[j + 1]
            }
            None => None,
        };
    }
    next
}

/// The row kernel that starts at instruction `start`: its end, `(rows, cols)` and the role of
/// each of its instructions. It needs a row reduction, reached from `start` through fusible
/// instructions, (`reductions`), and takes every following instruction
/// that fits.
fn row_group(
    func: &Func,
    start: usize,
    target: &Target,
    reductions: &[Option<(usize, (usize, usize))>],
) -> Option<Step> {
    let (j, shape) = (*reductions.get(start)?)?;
    let mut roles = (start..j)
        .map(|k| row_role(func, k, target, shape, start))
        .collect::<Option<Vec<_>>>()?;
    let mut end = j;
    while let Some(role) = func
        .body
        .get(end)
        .and_then(|_| row_role(func, end, target, shape, start))
    {
        roles.push(role);
        end += 1;
    }
    Some(Step::Rows {
        start,
        end,
        rows: shape.0,
        cols: shape.1,
        roles,
    })
}

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

use crate::kernel::Access;
use ferrax_ir::{BinaryOp, DType, Func, Instr, Op, ReduceOp, Scalar, TensorType, UnaryOp, ValueId};
use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::Direction;
use std::collections::BTreeSet;

/// One step of a fused program.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Step {
    /// Instructions `start..end` of the body, fused into one kernel.
    Kernel { start: usize, end: usize },
    /// Instruction `index` of the body, run on its own.
    Op { index: usize },
    /// Instructions `start..end`, one row kernel over `rows` rows of `cols` elements.
    Rows {
        start: usize,
        end: usize,
        rows: usize,
        cols: usize,
    },
}

/// The rows a backend's row kernels take: up to `max_cols` elements, and more than
/// `long_cols` only where there are at least `min_long_rows` of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RowLimit {
    pub max_cols: usize,
    pub long_cols: usize,
    pub min_long_rows: usize,
}

impl RowLimit {
    /// Any rows.
    pub const NONE: RowLimit = RowLimit {
        max_cols: usize::MAX,
        long_cols: usize::MAX,
        min_long_rows: 0,
    };

    /// Whether `rows` rows of `cols` elements take a row kernel.
    pub fn fits(self, rows: usize, cols: usize) -> bool {
        cols <= self.max_cols && (cols <= self.long_cols || rows >= self.min_long_rows)
    }
}

/// What a backend's kernels handle: f32, f64, f16 and bf16 (stored as such, computed in f32)
/// arithmetic, remainders included, bool and i32 arithmetic always; i64 arithmetic where `int64`
/// is set; integer division, remainders, powers, abs and sign where `int_edge_cases` is; where
/// `conversions` is, conversions of u8 and i64 values to and from i32, f32 and f64, and of bools
/// to and from i32, f32 and f64; row kernels over the rows `rows` admits; reductions over leading axes inside flat kernels where
/// `columns` is set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelTypes {
    pub rows: RowLimit,
    pub int64: bool,
    pub int_edge_cases: bool,
    pub conversions: bool,
    pub columns: bool,
}

impl KernelTypes {
    /// The CPU code generator's set.
    pub const CPU: KernelTypes = KernelTypes {
        rows: RowLimit::NONE,
        int64: false,
        int_edge_cases: false,
        conversions: false,
        columns: true,
    };
    /// The PTX renderer's set: a row kernel keeps its row in registers, at most 16 elements to
    /// each of up to 1,024 threads, or streams rows of up to 262,144 elements a chunk at a time
    /// where there are enough of them ([`crate::backend::ptx::rows::ROW_LIMIT`]); other rows
    /// and reductions over leading axes are kernels of their own; i32
    /// division does not trap (the renderer guards the divisor for the interpreter's edge
    /// cases), and powers, abs and sign follow the interpreter's.
    pub const GPU: KernelTypes = KernelTypes {
        rows: crate::backend::ptx::rows::ROW_LIMIT,
        int64: true,
        int_edge_cases: true,
        conversions: true,
        columns: false,
    };

    pub fn float(self, d: DType) -> bool {
        matches!(d, DType::F32 | DType::F64 | DType::F16 | DType::BF16)
    }

    pub fn handles(self, d: DType) -> bool {
        self.float(d) || matches!(d, DType::Bool | DType::I32) || (self.int64 && d == DType::I64)
    }
}

/// Whether kernels compute `b` on i32 (and i64): the ops that wrap as the interpreter's do, and, where
/// `edge_cases` is set, division, remainders and powers (the interpreter's `x / 0 = -1`,
/// `x % 0 = x`, wrapping `MIN / -1` and negative exponents need a backend's own handling: the
/// CPU leaves them to the interpreter, where Cranelift's `sdiv` would trap).
pub fn int_fusible(b: BinaryOp, edge_cases: bool) -> bool {
    b.is_logical()
        || matches!(
            b,
            BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Max | BinaryOp::Min
        )
        || (edge_cases && matches!(b, BinaryOp::Div | BinaryOp::Rem | BinaryOp::Pow))
}

/// Whether kernels compute `u` on i32 (and i64): negation and not, which wrap as the interpreter's do,
/// and abs and sign where `edge_cases` is set (`abs(MIN) = MIN`).
pub fn int_unary_fusible(u: UnaryOp, edge_cases: bool) -> bool {
    matches!(u, UnaryOp::Neg | UnaryOp::Not)
        || (edge_cases && matches!(u, UnaryOp::Abs | UnaryOp::Sign))
}

/// The conversions a backend with `KernelTypes::conversions` adds to those between i32 and
/// floats: of u8 and i64 values (u8 ones go no further than a conversion) to and from each other,
/// i32, f32 and f64; of bools to and from i32, f32 and f64; and of integers to and from f16 and
/// bf16 (rounded once, which through f32 alone would not be for bf16).
pub fn wider_conversion(from: DType, to: DType) -> bool {
    let narrow = |d: DType| matches!(d, DType::U8 | DType::I64);
    let wide = |d: DType| matches!(d, DType::I32 | DType::F32 | DType::F64);
    let ints =
        (narrow(from) || narrow(to)) && (narrow(from) || wide(from)) && (narrow(to) || wide(to));
    let bools = (from == DType::Bool && wide(to)) || (wide(from) && to == DType::Bool);
    let int = |d: DType| matches!(d, DType::U8 | DType::I32 | DType::I64);
    let half = |d: DType| matches!(d, DType::F16 | DType::BF16);
    let halves = (int(from) && half(to)) || (half(from) && int(to));
    ints || bools || halves
}

/// Whether instruction `i` can be computed element by element inside a kernel of `len` elements.
fn fusible(func: &Func, i: usize, types: KernelTypes) -> bool {
    let ins = &func.body[i];
    if let (Op::Convert { to }, true) = (&ins.op, types.conversions) {
        let from = ins.args.first().and_then(|&a| func.value_type(a));
        if from.is_some_and(|t| wider_conversion(t.dtype, *to)) {
            return true;
        }
    }
    let types_ok = types.handles(ins.ty.dtype)
        && ins
            .args
            .iter()
            .filter_map(|&a| func.value_type(a))
            .all(|t| types.handles(t.dtype));
    let float_result = types.float(ins.ty.dtype);
    types_ok
        && match &ins.op {
            // Integer arithmetic wraps, as the interpreter's does; division, remainders, powers,
            // abs and sign only where the backend computes their edge cases as it does.
            Op::Unary(u) => match ins.ty.dtype {
                DType::Bool => *u == UnaryOp::Not,
                DType::I32 | DType::I64 => int_unary_fusible(*u, types.int_edge_cases),
                _ => float_result && *u != UnaryOp::Not,
            },
            Op::Binary(b) => match ins.ty.dtype {
                DType::Bool => b.is_logical(),
                DType::I32 | DType::I64 => int_fusible(*b, types.int_edge_cases),
                _ => float_result && !b.is_logical(),
            },
            // Compares of bools are computed as logic (`kernel::compares_as_logic`).
            Op::Compare(_) => true,
            Op::Select | Op::StopGradient => true,
            Op::Clamp => ins.ty.dtype != DType::Bool,
            // Between i32 and f32 or f64 (truncating and saturating, NaN to 0, as the
            // interpreter's): a half type would round i32 twice, through f32.
            Op::Convert { to } => {
                let from = ins
                    .args
                    .first()
                    .and_then(|&a| func.value_type(a))
                    .map(|t| t.dtype);
                let wide_float = |d: DType| matches!(d, DType::F32 | DType::F64);
                match (from, *to) {
                    (Some(f), t) if types.float(f) && types.float(t) => true,
                    (Some(DType::I32), t) | (Some(t), DType::I32) => {
                        t == DType::I32 || wide_float(t)
                    }
                    _ => false,
                }
            }
            Op::Constant(lit) => lit.is_splat(),
            // Broadcasts that are a scalar, a row or a column pattern are read in place.
            Op::BroadcastInDim { dims, .. } => ins
                .args
                .first()
                .and_then(|&a| func.value_type(a))
                .is_some_and(|t| broadcast_access(t, &ins.ty, dims).is_some()),
            _ => false,
        }
}

/// How a kernel over `result`'s elements reads `operand` broadcast with `dims`: one value
/// for all (a scalar), element `i / n` (the operand fills the leading dimensions, like a
/// keep-dims row statistic), element `i % n` (it fills the trailing dimensions, like a bias), or
/// none of these.
pub fn broadcast_access(
    operand: &TensorType,
    result: &TensorType,
    dims: &[usize],
) -> Option<Access> {
    if operand.numel() == 1 {
        return Some(Access::Scalar);
    }
    let kept: Vec<usize> = dims
        .iter()
        .zip(operand.dims())
        .filter(|(_, &size)| size != 1)
        .map(|(&d, _)| d)
        .collect();
    let (&first, &last) = (kept.first()?, kept.last()?);
    if kept.windows(2).any(|w| w[1] != w[0] + 1) {
        return None;
    }
    let rank = result.rank();
    match (first == 0, last + 1 == rank) {
        (true, true) => Some(Access::Each),
        (true, false) => Some(Access::Outer(result.dims()[last + 1..].iter().product())),
        (false, true) => Some(Access::Inner(result.dims()[first..].iter().product())),
        (false, false) => None,
    }
}

/// `func` with its instructions in a dataflow order that keeps fusible work together: a list
/// schedule that, after an instruction a kernel of `types` could compute, takes next a ready
/// one of the same element count that reads a value of the current run if there is one, and
/// otherwise the ready instruction that came first. (A ready instruction that reads nothing of
/// the run, such as a broadcast of a parameter, would only leave the kernel as an extra
/// output.) Only the order changes (values are renumbered), so results are the same.
pub fn schedule(func: &Func, types: KernelTypes) -> Func {
    let n = func.body.len();
    let params = func.params.len();
    let producer = |a: &ValueId| a.index().checked_sub(params);
    // Constants and broadcasts of parameters and constants: placed just before their first
    // user rather than where they were traced.
    let mut leaf = vec![false; n];
    for (i, ins) in func.body.iter().enumerate() {
        leaf[i] = match ins.op {
            Op::Constant(_) => true,
            Op::BroadcastInDim { .. } => {
                ins.args.iter().all(|a| producer(a).is_none_or(|j| leaf[j]))
            }
            _ => false,
        };
    }
    let mut graph = DiGraph::<usize, ()>::with_capacity(n, n);
    let nodes: Vec<NodeIndex> = (0..n).map(|i| graph.add_node(i)).collect();
    for (i, ins) in func.body.iter().enumerate() {
        for j in ins.args.iter().filter_map(producer) {
            if !leaf[j] {
                graph.update_edge(nodes[j], nodes[i], ());
            }
        }
    }
    let mut waiting: Vec<usize> = nodes
        .iter()
        .map(|&v| graph.neighbors_directed(v, Direction::Incoming).count())
        .collect();
    let class: Vec<Option<usize>> = (0..n)
        .map(|i| match row_reduction(func, i, types) {
            Some(_) => Some(func.body[i].ty.numel()),
            None => flat_len(func, i, types),
        })
        .collect();
    let mut ready: BTreeSet<usize> = (0..n).filter(|&i| !leaf[i] && waiting[i] == 0).collect();
    let mut order = Vec::with_capacity(n);
    let mut placed = vec![false; n];
    // The ready instructions that read a value of the current run and share its class: an
    // instruction becomes ready when the last instruction it reads is scheduled, so these are
    // exactly the users made ready during the run that share its class.
    // (Picking from `ready` only when none joins ends the run: `joining` is then empty.)
    let mut joining: BTreeSet<usize> = BTreeSet::new();
    // Between runs, work no kernel computes (a matrix product, say) goes first, so that
    // fusible work that waits for nothing joins, as late as it may, the run that reads it.
    let next_run = |ready: &BTreeSet<usize>| {
        let unfused = ready.iter().find(|&&i| class[i].is_none());
        unfused.or_else(|| ready.first()).copied()
    };
    while let Some(i) = joining.first().copied().or_else(|| next_run(&ready)) {
        ready.remove(&i);
        joining.remove(&i);
        place(func, i, &leaf, &mut placed, &mut order);
        for user in graph.neighbors_directed(nodes[i], Direction::Outgoing) {
            let u = graph[user];
            waiting[u] -= 1;
            if waiting[u] == 0 {
                ready.insert(u);
                if class[i].is_some() && class[u] == class[i] {
                    joining.insert(u);
                }
            }
        }
    }
    // Leaves that only the outputs use.
    for i in 0..n {
        place(func, i, &leaf, &mut placed, &mut order);
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

/// The steps of `func`, in program order, for kernels of `types`.
pub fn partition(func: &Func, types: KernelTypes) -> Vec<Step> {
    let mut steps = Vec::new();
    let mut i = 0;
    while i < func.body.len() {
        if let Some((end, rows, cols)) = row_group(func, i, types) {
            steps.push(Step::Rows {
                start: i,
                end,
                rows,
                cols,
            });
            i = end;
            continue;
        }
        let Some(len) = flat_len(func, i, types) else {
            steps.push(Step::Op { index: i });
            i += 1;
            continue;
        };
        // A column reduction's value is whole only after the kernel: what reads it is not in.
        let mut columns: Vec<ValueId> = Vec::new();
        let mut end = i;
        while end < func.body.len()
            && flat_len(func, end, types) == Some(len)
            && !func.body[end].args.iter().any(|a| columns.contains(a))
        {
            if column_reduction(func, end, types) {
                columns.push(func.instr_value(end));
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
    let text = func.to_string();
    let mut out = String::with_capacity(text.len() * 2);
    let mut last = None;
    for (k, line) in text.lines().enumerate() {
        if let Some(&Some(head)) = k.checked_sub(1).and_then(|i| heads.get(i)) {
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

/// The splat value of `v` when it is a splat constant, or a broadcast or reshape of one.
pub fn splat_constant(func: &Func, v: ValueId) -> Option<Scalar> {
    let ins = func.body.get(v.index().checked_sub(func.params.len())?)?;
    match &ins.op {
        Op::Constant(lit) if lit.is_splat() => Some(lit.data.get(0)),
        Op::BroadcastInDim { .. } | Op::Reshape { .. } => splat_constant(func, ins.args[0]),
        _ => None,
    }
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
    let needed = |i: usize| read_as_array[func.instr_value(i).index()];
    let constant = |i: usize| splat_constant(func, func.instr_value(i)).is_some();
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

/// The element count of the flat kernel instruction `i` can be part of: its own for a fusible
/// instruction, its operand's for a column reduction.
fn flat_len(func: &Func, i: usize, types: KernelTypes) -> Option<usize> {
    if fusible(func, i, types) {
        return Some(func.body[i].ty.numel());
    }
    if !column_reduction(func, i, types) {
        return None;
    }
    func.value_type(func.body[i].args[0]).map(TensorType::numel)
}

/// Whether instruction `i` is a reduction a flat kernel computes as it goes (accumulating
/// each column in partial results per launch part): a sum, max or min of f32 or f64 over
/// leading axes, keeping at least one axis (bias gradients, layernorm's parameter gradients).
pub fn column_reduction(func: &Func, i: usize, types: KernelTypes) -> bool {
    let ins = &func.body[i];
    let Op::Reduce { op, axes } = &ins.op else {
        return false;
    };
    let Some(operand) = ins.args.first().and_then(|&a| func.value_type(a)) else {
        return false;
    };
    let leading = axes.iter().enumerate().all(|(k, &a)| a == k);
    types.columns
        && matches!(ins.ty.dtype, DType::F32 | DType::F64)
        && matches!(op, ReduceOp::Sum | ReduceOp::Max | ReduceOp::Min)
        && !axes.is_empty()
        && leading
        && axes.len() < operand.rank()
        && operand.numel() > ins.ty.numel()
}

/// `(rows, cols)` of a reduction a row kernel computes: a sum, max or min of floats over the
/// trailing axes (at least two elements per row; products stay with the interpreter, which
/// accumulates them in f64 and so cannot overflow early).
fn row_reduction(func: &Func, i: usize, types: KernelTypes) -> Option<(usize, usize)> {
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
    let ok = types.rows.fits(ins.ty.numel(), cols)
        && types.float(ins.ty.dtype)
        && !matches!(op, ReduceOp::Prod)
        && !axes.is_empty()
        && trailing
        && cols >= 2;
    ok.then(|| (ins.ty.numel(), cols))
}

/// How an instruction takes part in a row kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowRole {
    /// Computed for every element (`rows * cols` of them).
    Elem,
    /// Computed once per row.
    Row,
    /// A reduction of each row to one value.
    Reduce,
}

/// The role of instruction `i` in a row kernel over `rows` by `cols` that starts at
/// instruction `start`, or `None` if it cannot be part of it.
pub fn row_role(
    func: &Func,
    i: usize,
    types: KernelTypes,
    (rows, cols): (usize, usize),
    start: usize,
) -> Option<RowRole> {
    if row_reduction(func, i, types) == Some((rows, cols)) {
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
            operand.is_some_and(|t| t.numel() == n) && types.handles(ins.ty.dtype)
        }
        Op::BroadcastInDim { dims, .. } if fusible(func, i, types) => {
            let t = operand?;
            let defined_here = (start..i).any(|k| func.instr_value(k) == ins.args[0]);
            match broadcast_access(t, &ins.ty, dims)? {
                Access::Each | Access::Scalar => true,
                _ if t.numel() == n => true,
                Access::Outer(m) => role == RowRole::Elem && m == cols,
                // A row of columns is read from memory, never from a value of the kernel.
                Access::Inner(m) => role == RowRole::Elem && m == cols && !defined_here,
            }
        }
        _ => fusible(func, i, types),
    };
    ok.then_some(role)
}

/// The row kernel that starts at instruction `start`: its end and `(rows, cols)`. It needs a
/// row reduction, reached from `start` through fusible instructions, and takes every
/// following instruction that fits.
fn row_group(func: &Func, start: usize, types: KernelTypes) -> Option<(usize, usize, usize)> {
    let mut j = start;
    let shape = loop {
        let ins = func.body.get(j)?;
        if let Some(shape) = row_reduction(func, j, types) {
            break shape;
        }
        if !(fusible(func, j, types) || matches!(ins.op, Op::Reshape { .. })) {
            return None;
        }
        j += 1;
    };
    if (start..j).any(|k| row_role(func, k, types, shape, start).is_none()) {
        return None;
    }
    let mut end = j + 1;
    while end < func.body.len() && row_role(func, end, types, shape, start).is_some() {
        end += 1;
    }
    Some((end, shape.0, shape.1))
}

/// The values of instructions `start..end` that are used after the kernel or returned, splat
/// constants aside: every kernel inlines those, and [`partition`] makes the ones needed as
/// arrays in steps of their own.
pub fn kernel_outputs(func: &Func, start: usize, end: usize) -> Vec<ValueId> {
    (start..end)
        .map(|i| func.instr_value(i))
        .filter(|&v| {
            splat_constant(func, v).is_none()
                && (func.outputs.contains(&v)
                    || func.body[end..].iter().any(|ins| ins.args.contains(&v)))
        })
        .collect()
}

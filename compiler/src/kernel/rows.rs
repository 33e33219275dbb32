//! Lowering of a row group (a fused program's row step, each instruction with its
//! [`RowRole`]) to a row kernel.
//!
//! Each instruction gets the earliest stage its operands allow: an elementwise instruction runs
//! in the pass after the reductions it depends on, a reduction's result is available from the
//! row stage after its operand's pass, and per-row arithmetic runs once per row as soon as its
//! operands are there. Constants and scalar inputs are per-row values too, so every pass shares
//! them. A pass that needs an element computed in an earlier pass reloads it if it is an input,
//! and otherwise reads it back from a row of scratch memory the earlier pass wrote (the row is
//! small and recently touched, so this stays in cache, unlike recomputing an exp). The GPU keeps
//! that row in registers, or, for a row too long to hold, computes the value again
//! ([`recompute_carried`]).

use super::{
    broadcast_access, kernel_outputs, splat_constant, Access, Buffer, KInstr, KOp, Kernel,
    KernelSig, LastReads, Role, Rows, Stage,
};
use ferrax_ir::{BinaryOp, DType, Func, Op, Scalar, ValueId};
use std::collections::HashMap;

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

/// An iota of `dims` along `dim` taking part in a row kernel over `rows` by `cols` as `role`:
/// `(stride, size, per_row)` of the [`KOp::Index`] that computes it from the kernel's element
/// index, `per_row` where it is the same across each row. `None` where its axis runs across
/// the boundary of rows (never for axes of the reduced operand's shape).
pub fn row_index(
    dims: &[usize],
    dim: usize,
    role: RowRole,
    (rows, cols): (usize, usize),
) -> Option<(usize, usize, bool)> {
    let size = *dims.get(dim)?;
    let stride: usize = dims.get(dim + 1..)?.iter().product();
    let numel = stride
        .checked_mul(size)?
        .checked_mul(dims[..dim].iter().product())?;
    match role {
        RowRole::Elem if numel == rows.checked_mul(cols)? => {
            if stride
                .checked_mul(size)
                .is_some_and(|n| cols.is_multiple_of(n))
            {
                Some((stride, size, false))
            } else if stride.is_multiple_of(cols) {
                Some((stride, size, true))
            } else {
                None
            }
        }
        // A row value's index counts rows: elements `cols` apart.
        RowRole::Row if numel == rows => Some((stride.checked_mul(cols)?, size, true)),
        RowRole::Elem | RowRole::Row | RowRole::Reduce => None,
    }
}

/// A program value as the kernel sees it.
#[derive(Clone, Copy, Debug)]
enum Operand {
    /// A kernel value and the stage that computes it.
    Kernel(usize, Stage),
    /// A value from outside the kernel, read with `access`.
    Outside(ValueId, Access),
}

struct RowLowering<'a> {
    func: &'a Func,
    rows: usize,
    cols: usize,
    sig: KernelSig,
    body: Vec<KInstr>,
    stages: Vec<Stage>,
    values: HashMap<ValueId, Operand>,
    /// Loads, by buffer and stage.
    loads: HashMap<(usize, Stage), usize>,
    /// An element value of one pass, made available in a later one.
    carried: HashMap<(usize, usize), usize>,
    /// The scratch buffer of each spilled element value.
    spills: HashMap<usize, usize>,
    /// The program value of each kernel value that a program value maps to.
    origin: HashMap<usize, ValueId>,
    /// The reciprocal of each row value that elements are divided by.
    reciprocals: HashMap<usize, usize>,
    /// Per kernel value, whether it is an element value computed from element indices and
    /// row values alone (so that a later pass computes it again rather than keep it).
    of_indices: Vec<bool>,
}

impl RowLowering<'_> {
    fn emit(&mut self, op: KOp, args: Vec<usize>, dtype: DType, stage: Stage) -> usize {
        let computed_from_indices = || {
            args.iter()
                .all(|&a| matches!(self.stages[a], Stage::Row(_)) || self.of_indices[a])
        };
        let of_indices = match (&op, stage) {
            (_, Stage::Row(_)) => false,
            (KOp::Index { .. }, Stage::Elem(_)) => true,
            (
                KOp::Load(_) | KOp::Store(_) | KOp::Reduce(_) | KOp::Accumulate(_),
                Stage::Elem(_),
            ) => false,
            (
                KOp::Const(_)
                | KOp::Unary(_)
                | KOp::Binary(_)
                | KOp::Compare(_)
                | KOp::Select
                | KOp::Clamp
                | KOp::Convert(_)
                | KOp::Fma
                | KOp::Bitcast
                | KOp::ShiftLeft(_)
                | KOp::ShiftRight(_)
                | KOp::ShiftRightLogical(_)
                | KOp::Beyond(_),
                Stage::Elem(_),
            ) => computed_from_indices(),
        };
        self.body.push(KInstr { op, args, dtype });
        self.stages.push(stage);
        self.of_indices.push(of_indices);
        self.body.len() - 1
    }

    /// The input buffer of `value` read with `access` (one per pair).
    fn buffer(&mut self, value: ValueId, access: Access, role: Role) -> Option<usize> {
        let dtype = self.func.value_type(value)?.dtype;
        let found = self
            .sig
            .buffers
            .iter()
            .position(|b| b.role == role && b.value == value && b.access == access);
        Some(found.unwrap_or_else(|| {
            self.sig.buffers.push(Buffer {
                role,
                dtype,
                access,
                value,
            });
            self.sig.buffers.len() - 1
        }))
    }

    fn load(&mut self, buffer: usize, stage: Stage) -> usize {
        if let Some(&k) = self.loads.get(&(buffer, stage)) {
            return k;
        }
        let dtype = self.sig.buffers[buffer].dtype;
        let k = self.emit(KOp::Load(buffer), Vec::new(), dtype, stage);
        self.loads.insert((buffer, stage), k);
        k
    }

    /// How the kernel reads outside value `v` when it is used as is.
    fn outside(&self, v: ValueId) -> Option<Operand> {
        let n = self.func.value_type(v)?.numel();
        let access = if n == 1 {
            Access::Scalar
        } else if n == self.rows {
            Access::Outer(self.cols)
        } else if n == self.rows * self.cols {
            Access::Each
        } else {
            return None;
        };
        Some(Operand::Outside(v, access))
    }

    /// How the kernel sees program value `v`; a splat constant from outside is inlined as a
    /// row value.
    fn operand(&mut self, v: ValueId) -> Option<Operand> {
        if let Some(&o) = self.values.get(&v) {
            return Some(o);
        }
        if let Some(c) = splat_constant(self.func, v) {
            let dtype = self.func.value_type(v)?.dtype;
            let stage = Stage::Row(0);
            let k = self.emit(KOp::Const(c), Vec::new(), dtype, stage);
            self.define(v, k, stage);
            return self.values.get(&v).copied();
        }
        self.outside(v)
    }

    /// The pass (for an element stage) or row stage that can first use `o`.
    fn ready(o: Operand) -> usize {
        match o {
            Operand::Kernel(_, Stage::Row(p) | Stage::Elem(p)) => p,
            Operand::Outside(..) => 0,
        }
    }

    /// Operand `o` as a kernel value usable at `stage` (not before the stage `ready` gives).
    fn at(&mut self, o: Operand, stage: Stage) -> Option<usize> {
        match (o, stage) {
            (Operand::Kernel(k, Stage::Row(_)), _) => Some(k),
            (Operand::Kernel(k, Stage::Elem(p)), Stage::Elem(q)) if p == q => Some(k),
            (Operand::Kernel(k, Stage::Elem(p)), Stage::Elem(q)) if p < q => {
                Some(self.carry(k, p, q))
            }
            (Operand::Kernel(..), _) => None,
            (Operand::Outside(v, access @ (Access::Scalar | Access::Outer(_))), _) => {
                let b = self.buffer(v, access, Role::Input)?;
                Some(self.load(b, Stage::Row(0)))
            }
            (Operand::Outside(v, access), Stage::Elem(_)) => {
                let b = self.buffer(v, access, Role::Input)?;
                Some(self.load(b, stage))
            }
            (Operand::Outside(..), Stage::Row(_)) => None,
        }
    }

    /// Element value `k` of pass `p` in later pass `q`: loads are repeated, values computed
    /// from element indices and row values alone (a one-hot's mask) computed again, anything
    /// else is written to scratch in pass `p` and read back.
    fn carry(&mut self, k: usize, p: usize, q: usize) -> usize {
        if let Some(&c) = self.carried.get(&(k, q)) {
            return c;
        }
        let dtype = self.body[k].dtype;
        let c = match self.body[k].op {
            KOp::Load(b) => self.load(b, Stage::Elem(q)),
            _ if self.of_indices[k] => self.recompute(k, q),
            _ => {
                let scratch = match self.spills.get(&k) {
                    Some(&s) => s,
                    None => {
                        self.sig.buffers.push(Buffer {
                            role: Role::Scratch,
                            dtype,
                            access: Access::Inner(self.cols),
                            value: self.origin[&k],
                        });
                        let s = self.sig.buffers.len() - 1;
                        self.emit(KOp::Store(s), vec![k], dtype, Stage::Elem(p));
                        self.spills.insert(k, s);
                        s
                    }
                };
                self.emit(KOp::Load(scratch), Vec::new(), dtype, Stage::Elem(q))
            }
        };
        self.carried.insert((k, q), c);
        c
    }

    /// Element value `k`, computed from element indices and row values alone, computed again
    /// in pass `q`: each instruction of its element work in program order, once.
    fn recompute(&mut self, k: usize, q: usize) -> usize {
        let mut cone = vec![k];
        let mut todo = vec![k];
        while let Some(i) = todo.pop() {
            for &a in &self.body[i].args {
                let elem = matches!(self.stages[a], Stage::Elem(_));
                if elem && !cone.contains(&a) && !self.carried.contains_key(&(a, q)) {
                    cone.push(a);
                    todo.push(a);
                }
            }
        }
        cone.sort_unstable();
        for i in cone {
            let ins = &self.body[i];
            let (op, dtype) = (ins.op.clone(), ins.dtype);
            let args = ins
                .args
                .iter()
                .map(|&a| match self.stages[a] {
                    Stage::Row(_) => a,
                    Stage::Elem(_) => self.carried[&(a, q)],
                })
                .collect();
            let c = self.emit(op, args, dtype, Stage::Elem(q));
            self.carried.insert((i, q), c);
        }
        self.carried[&(k, q)]
    }

    /// `1 / d` for row value `d`, computed once per row where `d` is (row stage `stage`).
    fn reciprocal(&mut self, d: usize, stage: Stage) -> usize {
        if let Some(&r) = self.reciprocals.get(&d) {
            return r;
        }
        let dtype = self.body[d].dtype;
        let one = self.emit(
            KOp::Const(Scalar::from_f64(dtype, 1.0)),
            Vec::new(),
            dtype,
            Stage::Row(0),
        );
        let r = self.emit(KOp::Binary(BinaryOp::Div), vec![one, d], dtype, stage);
        self.reciprocals.insert(d, r);
        r
    }

    fn define(&mut self, v: ValueId, k: usize, stage: Stage) {
        self.values.insert(v, Operand::Kernel(k, stage));
        self.origin.entry(k).or_insert(v);
    }
}

/// The row kernel for instructions `start..end` of `func` over `rows` rows of `cols` elements,
/// instruction `start + k` taking part as `roles[k]`.
pub fn lower_rows(
    func: &Func,
    reads: &LastReads,
    (start, end): (usize, usize),
    (rows, cols): (usize, usize),
    roles: &[RowRole],
    name: String,
) -> Option<Kernel> {
    let mut l = RowLowering {
        func,
        rows,
        cols,
        sig: KernelSig::default(),
        body: Vec::new(),
        stages: Vec::new(),
        values: HashMap::new(),
        loads: HashMap::new(),
        carried: HashMap::new(),
        spills: HashMap::new(),
        origin: HashMap::new(),
        reciprocals: HashMap::new(),
        of_indices: Vec::new(),
    };
    for i in start..end {
        l.instr(i, *roles.get(i - start)?)?;
    }
    for v in kernel_outputs(func, reads, start, end) {
        l.store_output(v)?;
    }
    // Loops run for every element stage; the last row stage follows the last loop.
    let passes = l
        .stages
        .iter()
        .map(|s| match *s {
            Stage::Row(p) => p,
            Stage::Elem(p) => p + 1,
        })
        .max()
        .unwrap_or(0);
    Some(super::contract(super::compares_as_logic(
        super::integers::lower(Kernel {
            name,
            len: rows * cols,
            sig: l.sig,
            body: l.body,
            rows: Some(Rows {
                rows,
                cols,
                passes,
                stages: l.stages,
            }),
        }),
    )))
}

impl RowLowering<'_> {
    /// Instruction `i` of the function, taking part as `role`: a reduction runs in the row
    /// stage after its operand's pass, reshapes and broadcasts are views of their operand,
    /// constants are row values.
    fn instr(&mut self, i: usize, role: RowRole) -> Option<()> {
        let func = self.func;
        let ins = &func.body[i];
        let v = func.instr_value(i);
        let dtype = ins.ty.dtype;
        match &ins.op {
            Op::Reduce { op, .. } => {
                let o = self.operand(ins.args[0])?;
                let p = RowLowering::ready(o);
                let x = self.at(o, Stage::Elem(p))?;
                let stage = Stage::Row(p + 1);
                let k = self.emit(KOp::Reduce(*op), vec![x], dtype, stage);
                self.define(v, k, stage);
            }
            Op::Reshape { .. } | Op::StopGradient => {
                let o = self.operand(ins.args[0])?;
                self.values.insert(v, o);
            }
            Op::BroadcastInDim { dims, .. } => {
                let operand = ins.args[0];
                let t = func.value_type(operand)?;
                let o = match (
                    self.values.get(&operand),
                    broadcast_access(t, &ins.ty, dims)?,
                ) {
                    // Every element of a row sees the row's value.
                    (Some(&o), _) => o,
                    _ if splat_constant(func, operand).is_some() => self.operand(operand)?,
                    (None, Access::Each) => self.outside(operand)?,
                    (None, access) => Operand::Outside(operand, access),
                };
                self.values.insert(v, o);
            }
            Op::Constant(lit) => {
                let stage = Stage::Row(0);
                let k = self.emit(KOp::Const(lit.data.get(0)), Vec::new(), dtype, stage);
                self.define(v, k, stage);
            }
            Op::Iota { shape, dim, .. } => {
                let (stride, size, per_row) =
                    row_index(shape.dims(), *dim, role, (self.rows, self.cols))?;
                let stage = match per_row {
                    true => Stage::Row(0),
                    false => Stage::Elem(0),
                };
                let k = self.emit(KOp::Index { stride, size }, Vec::new(), dtype, stage);
                self.define(v, k, stage);
            }
            op => self.compute(v, op, &ins.args, dtype, role)?,
        }
        Some(())
    }

    /// Program value `v = op(inputs)` of type `dtype`, per element or per row as `role` says,
    /// in the first stage where all its operands are there.
    fn compute(
        &mut self,
        v: ValueId,
        op: &Op,
        inputs: &[ValueId],
        dtype: DType,
        role: RowRole,
    ) -> Option<()> {
        let operands = inputs
            .iter()
            .map(|&a| self.operand(a))
            .collect::<Option<Vec<_>>>()?;
        let ready = operands.iter().map(|&o| RowLowering::ready(o)).max();
        let ready = ready.unwrap_or(0);
        let stage = match role {
            RowRole::Elem => Stage::Elem(ready),
            _ => Stage::Row(ready),
        };
        let args = operands
            .iter()
            .map(|&o| self.at(o, stage))
            .collect::<Option<Vec<_>>>()?;
        // Elements divided by a row value are multiplied by its reciprocal, computed once per
        // row, as XLA does (one rounding more, a multiply for a divide).
        let row_divisor = match operands.get(1) {
            Some(Operand::Kernel(_, row @ Stage::Row(_))) => Some(*row),
            Some(Operand::Outside(_, Access::Scalar | Access::Outer(_))) => Some(Stage::Row(0)),
            _ => None,
        };
        if let (Op::Binary(BinaryOp::Div), Stage::Elem(_), Some(row), DType::F32 | DType::F64) =
            (op, stage, row_divisor, dtype)
        {
            let r = self.reciprocal(args[1], row);
            let k = self.emit(KOp::Binary(BinaryOp::Mul), vec![args[0], r], dtype, stage);
            self.define(v, k, stage);
            return Some(());
        }
        let kop = match op {
            Op::Unary(u) => KOp::Unary(*u),
            Op::Binary(b) => KOp::Binary(*b),
            Op::Compare(c) => KOp::Compare(*c),
            Op::Select => KOp::Select,
            Op::Clamp => KOp::Clamp,
            Op::Convert { to } => KOp::Convert(*to),
            Op::BitcastConvert { .. } => KOp::Bitcast,
            // Fusion puts no other op into a kernel's arithmetic.
            Op::Constant(_)
            | Op::Iota { .. }
            | Op::BroadcastInDim { .. }
            | Op::Reshape { .. }
            | Op::Transpose { .. }
            | Op::Reverse { .. }
            | Op::Reduce { .. }
            | Op::DotGeneral(_)
            | Op::Slice { .. }
            | Op::Pad { .. }
            | Op::Concatenate { .. }
            | Op::Gather(_)
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
            | Op::Remat(_) => return None,
        };
        let k = self.emit(kop, args, dtype, stage);
        self.define(v, k, stage);
        Some(())
    }

    /// A store of kernel output `v` in the stage it is ready in: every element, or (a value of
    /// one per row) every row.
    fn store_output(&mut self, v: ValueId) -> Option<()> {
        let func = self.func;
        let ty = func.value_type(v)?;
        let o = self.operand(v)?;
        let (stage, access) = if ty.numel() == self.rows * self.cols {
            (Stage::Elem(RowLowering::ready(o)), Access::Each)
        } else {
            (Stage::Row(RowLowering::ready(o)), Access::Outer(self.cols))
        };
        let k = self.at(o, stage)?;
        let b = self.buffer(v, access, Role::Output)?;
        self.emit(KOp::Store(b), vec![k], ty.dtype, stage);
        Some(())
    }
}

/// Row kernel `kernel` with no scratch rows: each element value a later pass read back from
/// scratch is computed again in that pass, from the inputs it reloads and the row values before
/// it. A streamed row kernel (a row longer than its block holds in registers, taken a chunk at
/// a time) keeps nothing of the row between passes; recomputing there reads the inputs once
/// more, where a scratch row would be written once and read once. Every copy computes what the
/// original did, bit for bit. The scratch buffers stay in the signature, unused, so that it
/// still lists the launch's parameters (a scratch buffer takes none).
pub fn recompute_carried(kernel: &Kernel) -> Kernel {
    let Some(shape) = &kernel.rows else {
        return kernel.clone();
    };
    let scratch = |b: usize| kernel.sig.buffers[b].role == Role::Scratch;
    let mut copier = Copier {
        kernel,
        stages: &shape.stages,
        stored: kernel
            .body
            .iter()
            .filter_map(|ins| match ins.op {
                KOp::Store(b) if scratch(b) => Some((b, *ins.args.first()?)),
                _ => None,
            })
            .collect(),
        mapped: Vec::with_capacity(kernel.body.len()),
        copies: HashMap::new(),
    };
    super::rewrite(kernel, |e, k, ins, args| {
        let new = match (&ins.op, shape.stages[k]) {
            (KOp::Store(b), _) if scratch(*b) => args[0],
            (KOp::Load(b), Stage::Elem(pass)) if copier.stored.contains_key(b) => {
                copier.copy(e, copier.stored[b], pass)
            }
            _ => e.op(ins.op.clone(), &args, ins.dtype),
        };
        copier.mapped.push(new);
        new
    })
}

/// Copies of element values into later passes, for [`recompute_carried`].
struct Copier<'a> {
    kernel: &'a Kernel,
    stages: &'a [Stage],
    /// The value each scratch buffer holds.
    stored: HashMap<usize, usize>,
    /// The new index of each instruction rewritten so far.
    mapped: Vec<usize>,
    /// The copy of each element value in each later pass.
    copies: HashMap<(usize, usize), usize>,
}

impl Copier<'_> {
    /// Element value `k` (of an earlier pass) computed again in pass `pass`.
    fn copy(&mut self, e: &mut super::math::Emit, k: usize, pass: usize) -> usize {
        if let Stage::Row(_) = self.stages[k] {
            return self.mapped[k];
        }
        if let Some(&c) = self.copies.get(&(k, pass)) {
            return c;
        }
        let kernel = self.kernel;
        let ins = &kernel.body[k];
        let c = match ins.op {
            KOp::Load(b) if self.stored.contains_key(&b) => self.copy(e, self.stored[&b], pass),
            _ => {
                let args: Vec<usize> = ins.args.iter().map(|&a| self.copy(e, a, pass)).collect();
                e.op(ins.op.clone(), &args, ins.dtype)
            }
        };
        self.copies.insert((k, pass), c);
        c
    }
}

//! Kernel IR: one loop over `len` elements that loads its inputs, computes in registers and
//! stores its outputs. Both the CPU and the PTX backends lower from it. [`KernelSig`] lists the
//! kernel's buffers once; it generates the compiled function's parameter list and the packing
//! of arguments at launch, so the two cannot disagree.
//!
//! A row kernel ([`Rows`], see [`rows`]) is the same body over `rows` rows of `cols` elements,
//! each instruction tagged with a [`Stage`]: once per row, or per element in one of the passes
//! over the row; reductions carry a pass's values over to the next stage.

mod access;
pub mod halves;
mod integers;
pub mod math;
pub mod parts;
mod print;
pub mod rows;

use crate::target::{KernelOp, Target};
pub use access::{broadcast_access, kernel_outputs, row_gather, splat_constant, LastReads};
pub use ferrax_aot_runtime::kernel::{Access, Buffer, KernelLaunch, KernelSig, Role};
use ferrax_ir::{BinaryOp, CompareOp, DType, Func, Op, ReduceOp, Scalar, UnaryOp, ValueId};
use math::Emit;
use std::collections::HashMap;

#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum KOp {
    Load(usize),
    Const(Scalar),
    Unary(UnaryOp),
    Binary(BinaryOp),
    Compare(CompareOp),
    Select,
    Clamp,
    Convert(DType),
    /// `a * b + c` rounded once.
    Fma,
    /// The bits of the argument reinterpreted as the instruction's type (same width).
    Bitcast,
    /// Integer shift left by a constant.
    ShiftLeft(u32),
    /// Arithmetic (sign-filling) integer shift right by a constant.
    ShiftRight(u32),
    /// Logical (zero-filling) 32-bit integer shift right by a constant.
    ShiftRightLogical(u32),
    /// The element's index along one axis of its value (a fused iota): `(i / stride) %
    /// size` of the kernel's flat element index `i`.
    Index {
        stride: usize,
        size: usize,
    },
    Store(usize),
    /// A row kernel's reduction of its argument over the row.
    Reduce(ReduceOp),
    /// Combines the argument into its column of partial buffer `b` (a [`Role::Partial`]):
    /// element `i % cols` becomes the reduction of itself and the argument.
    Accumulate(usize),
    /// `args[1]`, the expansion of `op` at `args[0]`, where `|args[0]|` is below the limit
    /// of its short reduction ([`math::SIN_COS_F32_LIMIT`], f64: [`math::SIN_COS_F64_LIMIT`]),
    /// else `op` computed over the whole domain: by the host's f64 function on the CPU, by the
    /// expansion that reduces exactly on the GPU. sin and cos of possibly large arguments.
    Beyond(UnaryOp),
}

impl KOp {
    /// The support-table entry the instruction asks about, or `None` for a primitive of the
    /// kernel IR that no program op names (loads, stores, constants, fma, bit casts, shifts,
    /// the huge-argument path of sin and cos).
    pub fn kernel_op(&self) -> Option<KernelOp> {
        Some(match self {
            KOp::Unary(u) => KernelOp::Unary(*u),
            KOp::Binary(b) => KernelOp::Binary(*b),
            KOp::Compare(c) => KernelOp::Compare(*c),
            KOp::Select => KernelOp::Select,
            KOp::Clamp => KernelOp::Clamp,
            KOp::Convert(to) => KernelOp::Convert(*to),
            KOp::Reduce(r) => KernelOp::RowReduce(*r),
            // The partial buffer's role holds the reduction; tables answer for all alike.
            KOp::Accumulate(_) => KernelOp::ColumnReduce(ReduceOp::Sum),
            KOp::Index { .. } => KernelOp::Iota,
            KOp::Load(_)
            | KOp::Const(_)
            | KOp::Fma
            | KOp::Bitcast
            | KOp::ShiftLeft(_)
            | KOp::ShiftRight(_)
            | KOp::ShiftRightLogical(_)
            | KOp::Store(_)
            | KOp::Beyond(_) => return None,
        })
    }
}

/// One instruction; its result (if any) is the next kernel value.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct KInstr {
    pub op: KOp,
    pub args: Vec<usize>,
    pub dtype: DType,
}

#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Kernel {
    pub name: String,
    /// Elements the kernel runs over (`rows * cols` for a row kernel).
    pub len: usize,
    pub sig: KernelSig,
    pub body: Vec<KInstr>,
    /// The row structure of a row kernel; `None` for one flat loop.
    pub rows: Option<Rows>,
}

impl Kernel {
    /// Whether `other` computes as this kernel does, on buffers of its own: equal but for
    /// its name and the values its buffers hold, so one kernel's code runs either.
    pub fn same_code(&self, other: &Kernel) -> bool {
        let same =
            |a: &Buffer, b: &Buffer| (a.role, a.dtype, a.access) == (b.role, b.dtype, b.access);
        self.len == other.len
            && self.body == other.body
            && self.rows == other.rows
            && self.sig.buffers.len() == other.sig.buffers.len()
            && self
                .sig
                .buffers
                .iter()
                .zip(&other.sig.buffers)
                .all(|(a, b)| same(a, b))
    }

    /// The kernel as its launches see it, a flat one cut into parts at multiples of `step`.
    pub fn launch(&self, step: usize) -> KernelLaunch {
        KernelLaunch {
            name: self.name.clone(),
            len: self.len,
            sig: self.sig.clone(),
            rows: self.rows.as_ref().map(|r| (r.rows, r.cols)),
            step,
        }
    }

    /// The support-table entry instruction `ins` of the kernel asks about, with the type it
    /// computes on (a compare's, conversion's or reduction's operand type).
    pub fn support_entry(&self, ins: &KInstr) -> Option<(KernelOp, DType)> {
        let op = ins.op.kernel_op()?;
        let operand = ins.args.first().map(|&a| self.body[a].dtype);
        let dtype = match op {
            KernelOp::Compare(_)
            | KernelOp::Convert(_)
            | KernelOp::Bitcast(_)
            | KernelOp::RowReduce(_)
            | KernelOp::ColumnReduce(_) => operand.unwrap_or(ins.dtype),
            KernelOp::Hold
            | KernelOp::RowGather
            | KernelOp::Iota
            | KernelOp::Window
            | KernelOp::Unary(_)
            | KernelOp::Binary(_)
            | KernelOp::Select
            | KernelOp::Clamp => ins.dtype,
        };
        Some((op, dtype))
    }

    /// The first instruction `target` leaves to the host, if any: fusion put it in a kernel
    /// the target does not compute.
    pub fn unsupported(&self, target: &Target) -> Option<&KInstr> {
        self.body.iter().find(|ins| {
            self.support_entry(ins)
                .is_some_and(|(op, d)| !target.computes(op, d))
        })
    }
}

/// Where a row kernel's instruction runs.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub enum Stage {
    /// Once per row, after the reductions of the passes before `pass` (before its loop).
    Row(usize),
    /// For each element of the row, in the loop of `pass`.
    Elem(usize),
}

/// A row kernel's shape: `rows` rows of `cols` elements, `passes` loops over each row, and the
/// stage of every body instruction. Buffers index element `i = row * cols + col` as in a flat
/// kernel; row stages run at `i = row * cols`, so a per-row buffer is read `[i / cols]`.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Rows {
    pub rows: usize,
    pub cols: usize,
    pub passes: usize,
    pub stages: Vec<Stage>,
}

struct Lowering<'a> {
    func: &'a Func,
    len: usize,
    sig: KernelSig,
    body: Vec<KInstr>,
    values: HashMap<ValueId, usize>,
    loads: HashMap<(ValueId, Access), usize>,
}

impl Lowering<'_> {
    fn emit(&mut self, op: KOp, args: Vec<usize>, dtype: DType) -> usize {
        self.body.push(KInstr { op, args, dtype });
        self.body.len() - 1
    }

    /// The kernel value of program value `v`: computed here, an inlined splat constant, or
    /// loaded from outside.
    fn value(&mut self, v: ValueId) -> Option<usize> {
        if let Some(&k) = self.values.get(&v) {
            return Some(k);
        }
        let ty = self.func.value_type(v)?;
        if let Some(c) = splat_constant(self.func, v) {
            let k = self.emit(KOp::Const(c), Vec::new(), ty.dtype);
            self.values.insert(v, k);
            return Some(k);
        }
        let access = if ty.numel() == 1 && self.len != 1 {
            Access::Scalar
        } else {
            Access::Each
        };
        self.load(v, access)
    }

    /// A load of outside value `v` with `access` (one per value and access).
    fn load(&mut self, v: ValueId, access: Access) -> Option<usize> {
        if let Some(&k) = self.loads.get(&(v, access)) {
            return Some(k);
        }
        let dtype = self.func.value_type(v)?.dtype;
        self.sig.buffers.push(Buffer {
            role: Role::Input,
            dtype,
            access,
            value: v,
        });
        let k = self.emit(KOp::Load(self.sig.buffers.len() - 1), Vec::new(), dtype);
        self.loads.insert((v, access), k);
        Some(k)
    }
}

/// The kernel for instructions `start..end` of `func` (a fused program's kernel step).
pub fn lower(
    func: &Func,
    reads: &LastReads,
    (start, end): (usize, usize),
    name: String,
) -> Option<Kernel> {
    // A column reduction and a window run over their operand's elements.
    let first = func.body.get(start)?;
    let len = match first.op {
        Op::Reduce { .. } | Op::Slice { .. } => func.value_type(*first.args.first()?)?.numel(),
        _ => first.ty.numel(),
    };
    let mut l = Lowering {
        func,
        len,
        sig: KernelSig::default(),
        body: Vec::new(),
        values: HashMap::new(),
        loads: HashMap::new(),
    };
    for i in start..end {
        let ins = &func.body[i];
        let dtype = ins.ty.dtype;
        let k = match &ins.op {
            Op::Constant(lit) => l.emit(KOp::Const(lit.data.get(0)), Vec::new(), dtype),
            Op::Iota { shape, dim, .. } => {
                let stride = shape.dims().get(dim + 1..)?.iter().product();
                let size = *shape.dims().get(*dim)?;
                l.emit(KOp::Index { stride, size }, Vec::new(), dtype)
            }
            Op::BroadcastInDim { dims, .. } => {
                let operand = ins.args[0];
                match broadcast_access(func.value_type(operand)?, &ins.ty, dims)? {
                    _ if splat_constant(func, operand).is_some() => l.value(operand)?,
                    Access::Each | Access::Scalar if l.values.contains_key(&operand) => {
                        l.values[&operand]
                    }
                    access => l.load(operand, access)?,
                }
            }
            Op::StopGradient => l.value(ins.args[0])?,
            Op::Gather(g) => {
                let (operand, indices) = (ins.args[0], ins.args[1]);
                let (n, rows) =
                    row_gather(func.value_type(operand)?, func.value_type(indices)?, g)?;
                l.sig.buffers.push(Buffer {
                    role: Role::Input,
                    dtype: func.value_type(indices)?.dtype,
                    access: Access::Outer(n),
                    value: indices,
                });
                let index = l.sig.buffers.len() - 1;
                l.load(operand, Access::Gather { index, n, rows })?
            }
            // Along the last axis (as fusion takes it): each operand loaded in its window,
            // the last one whose window starts at or before the column picked.
            Op::Concatenate { .. } => {
                let row = *ins.ty.dims().last()?;
                let column = l.emit(
                    KOp::Index {
                        stride: 1,
                        size: row,
                    },
                    Vec::new(),
                    DType::I32,
                );
                let mut picked = None;
                let mut start = 0;
                for &a in &ins.args {
                    let len = *func.value_type(a)?.dims().last()?;
                    if len == 0 {
                        continue;
                    }
                    // Kernels inline splat constants rather than read them.
                    let part = match splat_constant(func, a) {
                        Some(_) => l.value(a)?,
                        None => l.load(a, Access::Window { row, start, len })?,
                    };
                    picked = Some(match picked {
                        None => part,
                        Some(before) => {
                            let at = i32::try_from(start).ok()?;
                            let bound = l.emit(KOp::Const(Scalar::I32(at)), Vec::new(), DType::I32);
                            let inside = l.emit(
                                KOp::Compare(CompareOp::Lt),
                                vec![column, bound],
                                DType::Bool,
                            );
                            l.emit(KOp::Select, vec![inside, before, part], dtype)
                        }
                    });
                    start += len;
                }
                picked?
            }
            // A window of the last axis: stored as the rows are computed, not a kernel
            // value.
            Op::Slice { start, .. } => {
                let x = l.value(ins.args[0])?;
                let row = *func.value_type(ins.args[0])?.dims().last()?;
                l.sig.buffers.push(Buffer {
                    role: Role::Output,
                    dtype,
                    access: Access::Window {
                        row,
                        start: *start.last()?,
                        len: *ins.ty.dims().last()?,
                    },
                    value: func.instr_value(i),
                });
                let buffer = l.sig.buffers.len() - 1;
                l.emit(KOp::Store(buffer), vec![x], dtype);
                continue;
            }
            // A column reduction: its value is the combined partial
            // buffer, not a kernel value.
            Op::Reduce { op, .. } => {
                let x = l.value(ins.args[0])?;
                l.sig.buffers.push(Buffer {
                    role: Role::Partial(*op),
                    dtype,
                    access: Access::Inner(ins.ty.numel()),
                    value: func.instr_value(i),
                });
                let buffer = l.sig.buffers.len() - 1;
                l.emit(KOp::Accumulate(buffer), vec![x], dtype);
                continue;
            }
            op => {
                let args = ins
                    .args
                    .iter()
                    .map(|&a| l.value(a))
                    .collect::<Option<Vec<_>>>()?;
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
                l.emit(kop, args, dtype)
            }
        };
        l.values.insert(func.instr_value(i), k);
    }
    // Column reductions and windows have their buffers already.
    let stored = |v: &ValueId| l.sig.buffers.iter().any(|b| b.value == *v);
    let outputs: Vec<ValueId> = kernel_outputs(func, reads, start, end)
        .into_iter()
        .filter(|v| !stored(v))
        .collect();
    for v in outputs {
        let k = *l.values.get(&v)?;
        let dtype = func.value_type(v)?.dtype;
        l.sig.buffers.push(Buffer {
            role: Role::Output,
            dtype,
            access: Access::Each,
            value: v,
        });
        let buffer = l.sig.buffers.len() - 1;
        l.emit(KOp::Store(buffer), vec![k], dtype);
    }
    Some(contract(compares_as_logic(integers::lower(Kernel {
        name,
        len,
        sig: l.sig,
        body: l.body,
        rows: None,
    }))))
}

/// `kernel` with each instruction replaced by what `f` emits for it (given its index and its
/// mapped arguments); a row kernel's new instructions run in the stage of the one they replace.
fn rewrite(
    kernel: &Kernel,
    mut f: impl FnMut(&mut Emit, usize, &KInstr, Vec<usize>) -> usize,
) -> Kernel {
    let mut e = Emit { body: Vec::new() };
    let mut map = Vec::with_capacity(kernel.body.len());
    let mut stages = Vec::new();
    for (k, ins) in kernel.body.iter().enumerate() {
        let args = ins.args.iter().map(|&a| map[a]).collect();
        map.push(f(&mut e, k, ins, args));
        if let Some(r) = &kernel.rows {
            stages.resize(e.body.len(), r.stages[k]);
        }
    }
    Kernel {
        name: kernel.name.clone(),
        len: kernel.len,
        sig: kernel.sig.clone(),
        body: e.body,
        rows: kernel.rows.as_ref().map(|r| Rows {
            stages,
            ..r.clone()
        }),
    }
}

/// `kernel` with each compare of two bools (false below true) computed as logic: `a < b` is
/// `!a & b`, `a <= b` is `!a | b`, `a == b` is `!(a ^ b)`, and so on. Both backends have the
/// logic; a CPU kernel's vector bools are 0/-1 masks, which its signed compares would order
/// backwards.
fn compares_as_logic(kernel: Kernel) -> Kernel {
    let bools = |ins: &KInstr| {
        matches!(ins.op, KOp::Compare(_))
            && ins.args.first().map(|&a| kernel.body[a].dtype) == Some(DType::Bool)
    };
    if !kernel.body.iter().any(bools) {
        return kernel;
    }
    rewrite(&kernel, |e, _, ins, args| {
        let KOp::Compare(c) = ins.op else {
            return e.op(ins.op.clone(), &args, ins.dtype);
        };
        if !bools(ins) {
            return e.op(ins.op.clone(), &args, ins.dtype);
        }
        let (a, b) = (args[0], args[1]);
        let not = |e: &mut math::Emit, x: usize| e.op(KOp::Unary(UnaryOp::Not), &[x], DType::Bool);
        let logic = |e: &mut math::Emit, op: BinaryOp, x: usize, y: usize| {
            e.op(KOp::Binary(op), &[x, y], DType::Bool)
        };
        match c {
            CompareOp::Eq => {
                let differ = logic(e, BinaryOp::Xor, a, b);
                not(e, differ)
            }
            CompareOp::Ne => logic(e, BinaryOp::Xor, a, b),
            // a > b is b < a; a < b is !a & b, a <= b is !a | b.
            CompareOp::Lt | CompareOp::Le | CompareOp::Gt | CompareOp::Ge => {
                let below = matches!(c, CompareOp::Lt | CompareOp::Le);
                let (low, high) = if below { (a, b) } else { (b, a) };
                let not_low = not(e, low);
                let strict = matches!(c, CompareOp::Lt | CompareOp::Gt);
                let op = if strict { BinaryOp::And } else { BinaryOp::Or };
                logic(e, op, not_low, high)
            }
        }
    })
}

/// How many instructions use each kernel value.
fn use_counts(kernel: &Kernel) -> Vec<usize> {
    let mut uses = vec![0usize; kernel.body.len()];
    for ins in &kernel.body {
        for &a in &ins.args {
            uses[a] += 1;
        }
    }
    uses
}

/// `kernel` with every f32/f64 `a*b + c` whose product has no other use (and, in a row kernel,
/// runs in the same stage) computed as one fma, as XLA does on the CPU and the GPU (LLVM's
/// fp-contract=fast): one rounding fewer, so never less accurate, and one instruction fewer on
/// the dependency chain that bounds transcendental-heavy loops.
pub fn contract(mut kernel: Kernel) -> Kernel {
    let n = kernel.body.len();
    let uses = use_counts(&kernel);
    let stage = |k: usize| kernel.rows.as_ref().map(|r| r.stages[k]);
    let mut dead = vec![false; n];
    for i in 0..n {
        let ins = &kernel.body[i];
        if ins.op != KOp::Binary(BinaryOp::Add) || !matches!(ins.dtype, DType::F32 | DType::F64) {
            continue;
        }
        let product = ins.args.iter().position(|&a| {
            let m = &kernel.body[a];
            m.op == KOp::Binary(BinaryOp::Mul)
                && m.dtype == ins.dtype
                && uses[a] == 1
                && stage(a) == stage(i)
        });
        if let Some(p) = product {
            let (m, addend) = (ins.args[p], ins.args[1 - p]);
            let factors = &kernel.body[m].args;
            kernel.body[i].args = vec![factors[0], factors[1], addend];
            kernel.body[i].op = KOp::Fma;
            dead[m] = true;
        }
    }
    // Drop the fused products and renumber the rest.
    let index: Vec<usize> = dead
        .iter()
        .scan(0, |next, &d| {
            let i = *next;
            *next += usize::from(!d);
            Some(i)
        })
        .collect();
    let mut kept = dead.iter().map(|&d| !d);
    kernel.body.retain(|_| kept.next().unwrap_or(true));
    for ins in &mut kernel.body {
        for a in &mut ins.args {
            *a = index[*a];
        }
    }
    if let Some(r) = &mut kernel.rows {
        let mut kept = dead.iter().map(|&d| !d);
        r.stages.retain(|_| kept.next().unwrap_or(true));
    }
    kernel
}

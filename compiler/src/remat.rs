//! Rematerialization: elementwise values that one kernel stores only for a much later kernel
//! (a training step's forward values kept for its backward pass, such as GELU's
//! intermediates) are computed again inside that later kernel from values it holds anyway,
//! so they no longer stay in memory in between. XLA's fusion does the same by duplicating
//! elementwise producers into their consumers' fusions; without it, the w9 GPT step kept six
//! [B, T, 4D] values of each layer's GELU alive from the forward to the backward pass.
//!
//! For the CPU ([`Remat::KeepLives`]), a value is recomputed for a use only when everything the
//! copy reads is live there already (a parameter, a splat constant, or a value the original
//! program still needs then), so no value lives longer than it did and the peak never grows.
//! A GPU step's time is mostly memory traffic, so there ([`Remat::ExtendLives`]) a copy may
//! also keep values alive until its use, as long as they take no more bytes than the value
//! it replaces (values of a sixty-fourth of it or less, such as a row's statistics, not
//! counted): GELU's f32 intermediates are recomputed from the bf16 product they came from,
//! the softmax of a cross-entropy's gradient from the bf16 logits and the row's maximum, and
//! the later kernel reads half the bytes or less. The copies compute exactly what
//! the original did: products that a kernel would contract into an fma with their sum where
//! the original stored them are kept apart by a conversion to their own dtype (free in code),
//! so results stay bit for bit the same.

use crate::fuse::{fusible, partition, Step};
use crate::target::Target;
use ferrax_ir::{BinaryOp, DType, Func, Instr, Op, TensorType, ValueId};
use std::collections::HashMap;

/// The most instructions one value's copy may take: bounds the extra work and compile time.
const MAX_COPY: usize = 24;

/// Values smaller than this are not worth recomputing.
const MIN_BYTES: usize = 64 << 10;

/// What a copy may read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Remat {
    /// Only values live where it is read: no value lives longer.
    KeepLives,
    /// Also values that would be dead there, kept alive until then, up to the bytes of the
    /// value it replaces.
    ExtendLives,
}

/// What the analysis of the original program knows of each instruction.
struct Plan<'a> {
    func: &'a Func,
    /// The step of the fused program that computes each instruction, if one does.
    step: Vec<Option<usize>>,
    /// Whether each step is a kernel (flat or row), into which copies fuse.
    kernel: Vec<bool>,
    /// Whether each step is a flat (elementwise) kernel.
    flat: Vec<bool>,
    /// Per value, the last instruction that reads it (`usize::MAX` for results).
    last_use: Vec<usize>,
    /// Per value, the last instruction that needs it stored whatever is recomputed: a
    /// reader outside kernels (`usize::MAX` for results).
    pinned: Vec<usize>,
    /// Instructions that may be copied.
    copyable: Vec<bool>,
    /// Float products whose only reader is a sum in their own flat kernel: contracted
    /// there into an fma, and copied without a barrier so that the copy contracts alike.
    contracted: Vec<bool>,
    remat: Remat,
}

impl Plan<'_> {
    fn new<'a>(func: &'a Func, target: &Target, remat: Remat) -> Plan<'a> {
        let (n, params) = (func.body.len(), func.params.len());
        let steps = partition(func, target);
        let mut step = vec![None; n];
        let mut flat = Vec::with_capacity(steps.len());
        let mut kernel = Vec::with_capacity(steps.len());
        for (s, st) in steps.iter().enumerate() {
            let (range, is_flat) = match *st {
                Step::Kernel { start, end } => (start..end, true),
                Step::Rows { start, end, .. } => (start..end, false),
                Step::Op { index } => (index..index + 1, false),
            };
            step[range].fill(Some(s));
            flat.push(is_flat);
            kernel.push(!matches!(st, Step::Op { .. }));
        }
        let in_flat = |j: usize| step[j].is_some_and(|s| flat[s]);
        let in_kernel = |j: usize| step[j].is_some_and(|s| kernel[s]);
        let mut last_use = vec![0; func.num_values()];
        let mut pinned = vec![0; func.num_values()];
        let mut readers = vec![Vec::new(); func.num_values()];
        for (j, ins) in func.body.iter().enumerate() {
            for a in &ins.args {
                last_use[a.index()] = j;
                readers[a.index()].push(j);
                let defined_in = a.index().checked_sub(params).and_then(|i| step[i]);
                if !in_kernel(j) && defined_in != step[j] {
                    pinned[a.index()] = j;
                }
            }
        }
        for o in &func.outputs {
            last_use[o.index()] = usize::MAX;
            pinned[o.index()] = usize::MAX;
        }
        let copyable = (0..n)
            .map(|i| {
                let op = &func.body[i].op;
                let elementwise = op.is_elementwise()
                    || matches!(op, Op::BroadcastInDim { .. } | Op::Iota { .. });
                elementwise && fusible(func, i, target)
            })
            .collect();
        let contracted = (0..n)
            .map(|i| {
                let ins = &func.body[i];
                let float = matches!(ins.ty.dtype, DType::F32 | DType::F64);
                let r = &readers[params + i];
                ins.op == Op::Binary(BinaryOp::Mul)
                    && float
                    && r.len() == 1
                    && func.body[r[0]].op == Op::Binary(BinaryOp::Add)
                    && step[r[0]] == step[i]
                    && in_flat(i)
                    && last_use[params + i] != usize::MAX
            })
            .collect();
        Plan {
            func,
            step,
            kernel,
            flat,
            last_use,
            pinned,
            copyable,
            contracted,
            remat,
        }
    }

    /// The instruction that defines `v`, if it is not a parameter.
    fn instr(&self, v: ValueId) -> Option<usize> {
        v.index().checked_sub(self.func.params.len())
    }

    /// Whether reading `v` at instruction `j` of step `s` keeps nothing alive longer: `v` is
    /// a splat constant, computed in `s`, or read at or after `j` in the original program.
    fn free_at(&self, v: ValueId, j: usize, s: usize) -> bool {
        match self.instr(v) {
            Some(i) if self.step[i] == Some(s) => true,
            Some(i) if matches!(&self.func.body[i].op, Op::Constant(l) if l.is_splat()) => true,
            _ => self.last_use[v.index()] >= j,
        }
    }

    /// How a copy made for instruction `j` of step `s` reads operand `a` of `copied`:
    /// `Some(false)` as it is (it is stored for later anyway, or it is free there and cannot
    /// be copied), `Some(true)` by a copy of its own (so that it need not be kept), `None`
    /// not at all. Copies count into `size`.
    fn read(
        &self,
        a: ValueId,
        copied: usize,
        j: usize,
        s: usize,
        budget: &mut Budget,
    ) -> Option<bool> {
        let kept =
            self.instr(a).is_none_or(|i| self.step[i] == Some(s)) || self.pinned[a.index()] >= j;
        let broadcast = matches!(self.func.body[copied].op, Op::BroadcastInDim { .. });
        if kept || broadcast {
            return self.readable(a, j, s, budget).then_some(false);
        }
        if self.can_copy(a, j, s, budget) {
            Some(true)
        } else {
            self.readable(a, j, s, budget).then_some(false)
        }
    }

    /// Whether a copy made for instruction `j` of step `s` may read `v` as it is: it is free
    /// there, or the budget lets it live until then.
    fn readable(&self, v: ValueId, j: usize, s: usize, budget: &mut Budget) -> bool {
        if self.free_at(v, j, s) || budget.extended.contains(&v) {
            return true;
        }
        let bytes = self.func.value_type(v).and_then(TensorType::checked_bytes);
        // A value of a sixty-fourth of the limit or less (a row's statistics) costs nothing.
        if bytes.is_some_and(|b| b.saturating_mul(64) <= budget.extend_limit) {
            budget.extended.push(v);
            return true;
        }
        match bytes.and_then(|b| b.checked_add(budget.extended_bytes)) {
            Some(total) if total <= budget.extend_limit => {
                budget.extended_bytes = total;
                budget.extended.push(v);
                true
            }
            _ => false,
        }
    }

    /// Whether `v` can be copied into step `s` for instruction `j` within the size budget.
    fn can_copy(&self, v: ValueId, j: usize, s: usize, budget: &mut Budget) -> bool {
        if let Some(&known) = budget.decided.get(&v) {
            return known;
        }
        // A row kernel may run a product and its sum in different stages, uncontracted.
        let Some(i) = self
            .instr(v)
            .filter(|&i| self.copyable[i] && (self.flat[s] || !self.contracted[i]))
        else {
            return false;
        };
        let (size, accepted) = (budget.size, budget.accepted.len());
        let (extended, extended_bytes) = (budget.extended.len(), budget.extended_bytes);
        budget.size += 1;
        let copied = budget.size <= MAX_COPY
            && self.func.body[i]
                .args
                .iter()
                .all(|&a| self.read(a, i, j, s, budget).is_some());
        if copied {
            budget.accepted.push(v);
        } else {
            // Nothing of a copy that is not made counts.
            budget.size = size;
            budget.extended.truncate(extended);
            budget.extended_bytes = extended_bytes;
            for u in budget.accepted.split_off(accepted) {
                budget.decided.remove(&u);
            }
        }
        budget.decided.insert(v, copied);
        copied
    }
}

/// What one question to [`Plan::can_copy`] has settled: how many instructions the copy takes
/// (each counted once, however many times it is read, as [`Rewrite::copy`] makes it once), the
/// values already decided, copied or not, and those it keeps alive longer.
#[derive(Default)]
struct Budget {
    size: usize,
    /// Values the copy reads that would be dead where it runs, and their bytes, up to
    /// `extend_limit`.
    extended: Vec<ValueId>,
    extended_bytes: usize,
    extend_limit: usize,
    decided: HashMap<ValueId, bool>,
    /// The values accepted for copying, in order, so that a copy refused after them can take
    /// back those made for it.
    accepted: Vec<ValueId>,
}

/// Builds the new body: instructions of the original in order, copies before their readers.
struct Rewrite<'a> {
    plan: Plan<'a>,
    body: Vec<Instr>,
    /// The new value of each original value.
    map: Vec<ValueId>,
    /// Copies made for a step: (original value, step) to the copy's value.
    copies: HashMap<(ValueId, usize), ValueId>,
}

impl Rewrite<'_> {
    fn push(&mut self, ins: Instr) -> ValueId {
        self.body.push(ins);
        ValueId((self.plan.func.params.len() + self.body.len() - 1) as u32)
    }

    /// The value to read for `v` at instruction `j` of step `s`, copying it there if that
    /// lets it die earlier.
    fn operand(&mut self, v: ValueId, j: usize, s: usize) -> ValueId {
        let p = &self.plan;
        // Copies fuse into `j`'s kernel where they count its elements (`j` is elementwise).
        let numel = p.func.body[j].ty.numel();
        let worth = p.instr(v).is_some_and(|i| {
            let ty = &p.func.body[i].ty;
            p.step[i] != Some(s)
                && p.pinned[v.index()] < j
                && ty.numel() == numel
                && ty.numel() * ty.dtype.size_bytes() >= MIN_BYTES
                && !matches!(
                    p.func.body[j].op,
                    Op::BroadcastInDim { .. } | Op::Reduce { .. }
                )
        });
        let extend_limit = match p.remat {
            Remat::KeepLives => None,
            Remat::ExtendLives => p.func.value_type(v).and_then(TensorType::checked_bytes),
        };
        let mut budget = Budget {
            extend_limit: extend_limit.unwrap_or(0),
            ..Budget::default()
        };
        if worth && p.can_copy(v, j, s, &mut budget) {
            self.copy(v, s, &budget)
        } else {
            self.map[v.index()]
        }
    }

    /// Copies `v` (which [`Plan::can_copy`] accepted with `budget`) into step `s`.
    fn copy(&mut self, v: ValueId, s: usize, budget: &Budget) -> ValueId {
        if let Some(&c) = self.copies.get(&(v, s)) {
            return c;
        }
        let p = &self.plan;
        let Some(i) = p.instr(v) else {
            return self.map[v.index()];
        };
        let mut args = p.func.body[i].args.clone();
        for a in &mut args {
            *a = match budget.decided.get(a) {
                Some(true) => self.copy(*a, s, budget),
                _ => self.map[a.index()],
            };
        }
        let p = &self.plan;
        let ins = &p.func.body[i];
        let (op, ty, barrier) = (ins.op.clone(), ins.ty.clone(), !p.contracted[i]);
        let is_product =
            op == Op::Binary(BinaryOp::Mul) && matches!(ty.dtype, DType::F32 | DType::F64);
        let mut c = self.push(Instr {
            op,
            args,
            ty: ty.clone(),
        });
        if is_product && barrier {
            let to = ty.dtype;
            c = self.push(Instr {
                op: Op::Convert { to },
                args: vec![c],
                ty,
            });
        }
        self.copies.insert((v, s), c);
        c
    }
}

/// `func` (scheduled for fusion) with elementwise values recomputed in the kernels that
/// read them long after they are made, where that shortens their lives (see the module).
pub fn rematerialize(func: &Func, target: &Target, remat: Remat) -> Func {
    let plan = Plan::new(func, target, remat);
    let params = func.params.len();
    let mut r = Rewrite {
        map: (0..params).map(|p| ValueId(p as u32)).collect(),
        body: Vec::with_capacity(func.body.len()),
        copies: HashMap::new(),
        plan,
    };
    for (j, ins) in func.body.iter().enumerate() {
        let s = r.plan.step[j].filter(|&s| r.plan.kernel[s]);
        let args = ins
            .args
            .iter()
            .map(|&a| match s {
                Some(s) => r.operand(a, j, s),
                None => r.map[a.index()],
            })
            .collect();
        let v = r.push(Instr {
            op: ins.op.clone(),
            args,
            ty: ins.ty.clone(),
        });
        r.map.push(v);
    }
    Func {
        name: func.name.clone(),
        params: func.params.clone(),
        outputs: func.outputs.iter().map(|o| r.map[o.index()]).collect(),
        body: r.body,
    }
}

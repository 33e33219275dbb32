//! Control flow: `while`, `cond`, `scan` and `remat` hold their regions as nested [`Func`]s, as StableHLO and
//! JAX's jaxprs do. An instruction has one result, so a call with several results is written
//! as one instruction per result it yields (`result=k`); instructions that differ only in
//! `result` and read the same operands are one call, which executors run once.

use crate::{Func, Op};
use serde::{Deserialize, Serialize};

/// `while`: the operands are the initial carried values; while `cond` (carried values to
/// `bool[]`) holds, `body` maps the carried values to their next ones. The instruction's value
/// is carried value `result` once `cond` fails.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct While {
    pub cond: Func,
    pub body: Func,
    pub result: usize,
}

/// `cond` (JAX's `cond`/`switch`, StableHLO's `case` and `if`): operand 0, an `i32[]` index
/// or a `bool[]` predicate (false 0, true 1), picks the branch applied to the other operands;
/// an index out of range picks the last branch (StableHLO's `case`). Every branch takes the
/// same operands and returns the same types; the instruction's value is output `result`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Cond {
    pub branches: Vec<Func>,
    pub result: usize,
}

/// `scan` (JAX's `lax.scan`): the operands are `consts` values every step reads, `carry`
/// initial carried values, then arrays whose leading dimension is `length`; step `t`
/// (counting down from `length - 1` when `reverse`) applies `body` to the constants, the
/// carried values and slice `t` of each array, giving the next carried values and one slice
/// of each stacked output. The call's results are the final carried values, then the outputs
/// stacked along a new leading dimension of `length`. `unroll` (JAX's, at least 1) is how many
/// steps each iteration of the compiled loop runs; it does not change the results.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Scan {
    pub body: Func,
    pub consts: usize,
    pub carry: usize,
    pub length: usize,
    pub reverse: bool,
    pub result: usize,
    #[serde(default = "one")]
    pub unroll: usize,
}

fn one() -> usize {
    1
}

/// `remat` (JAX's `checkpoint`): a call of `body` on the operands, whose value is output
/// `result`. It computes what `body` does; reverse mode stores only the values `policy`
/// saves and computes the others again in the backward pass.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Remat {
    pub body: Func,
    pub policy: RematPolicy,
    pub result: usize,
}

/// Which of a `remat` body's values reverse mode stores for the backward pass (JAX's
/// `jax.checkpoint_policies`); the body's operands are always available.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum RematPolicy {
    /// `nothing_saveable`: the backward pass computes the body again from its operands.
    NothingSaveable,
    /// `dots_saveable`: matrix products' results are stored.
    DotsSaveable,
    /// `dots_with_no_batch_dims_saveable`: results of products without batch dimensions are
    /// stored.
    DotsWithNoBatchDimsSaveable,
    /// `everything_saveable`: as without `remat`.
    EverythingSaveable,
}

impl RematPolicy {
    pub const ALL: [RematPolicy; 4] = [
        RematPolicy::NothingSaveable,
        RematPolicy::DotsSaveable,
        RematPolicy::DotsWithNoBatchDimsSaveable,
        RematPolicy::EverythingSaveable,
    ];

    /// The op's name in the text format under this policy.
    pub fn op_name(self) -> &'static str {
        match self {
            RematPolicy::NothingSaveable => "remat",
            RematPolicy::DotsSaveable => "remat_dots",
            RematPolicy::DotsWithNoBatchDimsSaveable => "remat_dots_no_batch",
            RematPolicy::EverythingSaveable => "remat_everything",
        }
    }

    /// Whether reverse mode stores the value of an instruction of `op`.
    pub fn saves(self, op: &Op) -> bool {
        match self {
            RematPolicy::NothingSaveable => false,
            RematPolicy::DotsSaveable => matches!(op, Op::DotGeneral(_)),
            RematPolicy::DotsWithNoBatchDimsSaveable => {
                matches!(op, Op::DotGeneral(d) if d.lhs_batch.is_empty())
            }
            RematPolicy::EverythingSaveable => true,
        }
    }
}

impl Func {
    /// Whether running this function has an effect (a `debug_callback` in it or in a
    /// function it holds).
    pub fn has_effects(&self) -> bool {
        self.body.iter().any(|ins| ins.op.has_effect())
    }

    /// Whether this function (or one it holds) calls host functions of this process
    /// (`debug_callback`, `pure_callback`, `io_callback`), which no other process has.
    pub fn calls_host(&self) -> bool {
        self.body.iter().any(|ins| {
            matches!(
                ins.op,
                Op::DebugCallback { .. } | Op::PureCallback(_) | Op::IoCallback(_)
            ) || ins.op.regions().iter().any(|(_, f)| f.calls_host())
        })
    }
}

impl Op {
    /// The functions this op holds, each with its role as errors name it.
    pub fn regions(&self) -> Vec<(String, &Func)> {
        match self {
            Op::CustomVjp(c) => vec![
                ("primal".into(), &c.primal),
                ("fwd".into(), &c.fwd),
                ("bwd".into(), &c.bwd),
            ],
            Op::CustomJvp(c) => vec![("primal".into(), &c.primal), ("jvp".into(), &c.jvp)],
            Op::While(w) => vec![("cond".into(), &w.cond), ("body".into(), &w.body)],
            Op::Scan(s) => vec![("body".into(), &s.body)],
            Op::Remat(r) => vec![("body".into(), &r.body)],
            Op::Cond(c) => c
                .branches
                .iter()
                .enumerate()
                .map(|(k, b)| (format!("branch {k}"), b))
                .collect(),
            Op::Constant(_)
            | Op::Iota { .. }
            | Op::Unary(_)
            | Op::Binary(_)
            | Op::Compare(_)
            | Op::Select
            | Op::Clamp
            | Op::Convert { .. }
            | Op::BitcastConvert { .. }
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
            | Op::DebugCallback { .. }
            | Op::PureCallback(_)
            | Op::IoCallback(_)
            | Op::AddDependency => Vec::new(),
        }
    }

    /// Whether running this op has an effect beyond its value: a `debug_callback` or
    /// `io_callback`, or an op holding a function that runs one.
    pub fn has_effect(&self) -> bool {
        matches!(self, Op::DebugCallback { .. } | Op::IoCallback(_))
            || self.regions().iter().any(|(_, f)| f.has_effects())
    }

    /// This op with each of its functions replaced by `f` of it (the op itself where it
    /// holds none).
    pub fn map_regions<E>(&self, mut f: impl FnMut(&Func) -> Result<Func, E>) -> Result<Op, E> {
        Ok(match self {
            Op::CustomVjp(c) => Op::CustomVjp(Box::new(crate::CustomVjp {
                primal: f(&c.primal)?,
                fwd: f(&c.fwd)?,
                bwd: f(&c.bwd)?,
            })),
            Op::CustomJvp(c) => Op::CustomJvp(Box::new(crate::CustomJvp {
                primal: f(&c.primal)?,
                jvp: f(&c.jvp)?,
            })),
            Op::While(w) => Op::While(Box::new(While {
                cond: f(&w.cond)?,
                body: f(&w.body)?,
                result: w.result,
            })),
            Op::Cond(c) => Op::Cond(Box::new(Cond {
                branches: c.branches.iter().map(&mut f).collect::<Result<_, E>>()?,
                result: c.result,
            })),
            Op::Scan(s) => Op::Scan(Box::new(Scan {
                body: f(&s.body)?,
                ..(**s).clone()
            })),
            Op::Remat(r) => Op::Remat(Box::new(Remat {
                body: f(&r.body)?,
                ..(**r).clone()
            })),
            op => op.clone(),
        })
    }

    /// For a control-flow op: which of its call's results it yields, and how many the call
    /// has.
    pub fn call_result(&self) -> Option<(usize, usize)> {
        match self {
            Op::While(w) => Some((w.result, w.body.outputs.len())),
            Op::Cond(c) => Some((c.result, c.branches.first()?.outputs.len())),
            Op::Scan(s) => Some((s.result, s.body.outputs.len())),
            Op::Remat(r) => Some((r.result, r.body.outputs.len())),
            Op::CustomVjp(_)
            | Op::CustomJvp(_)
            | Op::Constant(_)
            | Op::Iota { .. }
            | Op::Unary(_)
            | Op::Binary(_)
            | Op::Compare(_)
            | Op::Select
            | Op::Clamp
            | Op::Convert { .. }
            | Op::BitcastConvert { .. }
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
            | Op::DebugCallback { .. }
            | Op::PureCallback(_)
            | Op::IoCallback(_)
            | Op::AddDependency => None,
        }
    }

    /// The same call yielding result `k` instead (the op itself where it is no call).
    pub fn with_result(&self, k: usize) -> Op {
        match self {
            Op::While(w) => Op::While(Box::new(While {
                cond: w.cond.clone(),
                body: w.body.clone(),
                result: k,
            })),
            Op::Cond(c) => Op::Cond(Box::new(Cond {
                branches: c.branches.clone(),
                result: k,
            })),
            Op::Scan(s) => Op::Scan(Box::new(Scan {
                result: k,
                ..(**s).clone()
            })),
            Op::Remat(r) => Op::Remat(Box::new(Remat {
                result: k,
                ..(**r).clone()
            })),
            op => op.clone(),
        }
    }

    /// Whether `self` and `other` are one control-flow call, perhaps yielding different
    /// results (given the same operands, they run once).
    pub fn same_call(&self, other: &Op) -> bool {
        match (self, other) {
            (Op::While(a), Op::While(b)) => a.cond == b.cond && a.body == b.body,
            (Op::Cond(a), Op::Cond(b)) => a.branches == b.branches,
            (Op::Remat(a), Op::Remat(b)) => a.body == b.body && a.policy == b.policy,
            (Op::Scan(a), Op::Scan(b)) => {
                a.body == b.body
                    && (a.consts, a.carry, a.length, a.reverse, a.unroll)
                        == (b.consts, b.carry, b.length, b.reverse, b.unroll)
            }
            _ => false,
        }
    }
}

impl Func {
    /// The instructions from `i` on that are one call with instruction `i` (the same
    /// control-flow op but for `result`, the same operands), `i` first; empty where `i` is no
    /// control-flow instruction.
    pub fn call_instructions(&self, i: usize) -> Vec<usize> {
        let Some(ins) = self
            .body
            .get(i)
            .filter(|ins| ins.op.call_result().is_some())
        else {
            return Vec::new();
        };
        (i..self.body.len())
            .filter(|&j| self.body[j].args == ins.args && self.body[j].op.same_call(&ins.op))
            .collect()
    }
}

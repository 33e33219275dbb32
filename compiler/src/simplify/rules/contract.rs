//! `dot_general` absorbs transposes: of an operand, when the free dimensions keep their order,
//! and of its result, when the transpose only swaps the two operands' free dimensions.

use super::{add_op, leaf_op, node_op, pattern, var, Build, Rule};
use crate::simplify::lang::Graph;
use egg::{Id, Rewrite, Subst};
use ferrax_ir::{DotDims, Op};

fn rule(name: &str, lhs: &str, build: fn(&mut Graph, &Subst) -> Option<Id>) -> Rule {
    Rewrite::new(name, pattern(lhs), Build(build)).unwrap_or_else(|e| panic!("rule {name}: {e}"))
}

fn rank(egraph: &Graph, id: Id) -> Option<usize> {
    egraph[id].data.ty.as_ref().map(|t| t.rank())
}

/// Maps one operand's dimension numbers through `perm` (operand = transpose(x, perm)), if its
/// free dimensions keep their relative order.
fn through(
    perm: &[usize],
    batch: &[usize],
    contract: &[usize],
) -> Option<(Vec<usize>, Vec<usize>)> {
    let free: Vec<usize> = (0..perm.len())
        .filter(|d| !batch.contains(d) && !contract.contains(d))
        .map(|d| perm[d])
        .collect();
    if free.windows(2).any(|w| w[0] > w[1]) {
        return None;
    }
    Some((
        batch.iter().map(|&d| perm[d]).collect(),
        contract.iter().map(|&d| perm[d]).collect(),
    ))
}

fn absorb(egraph: &mut Graph, subst: &Subst, lhs: bool) -> Option<Id> {
    let (Op::DotGeneral(d), Op::Transpose { perm }) = (
        leaf_op(egraph, subst, var("?d"))?,
        leaf_op(egraph, subst, var("?p"))?,
    ) else {
        return None;
    };
    let (x, other) = (subst[var("?x")], subst[var("?y")]);
    let dims = if lhs {
        let (lhs_batch, lhs_contract) = through(&perm, &d.lhs_batch, &d.lhs_contract)?;
        DotDims {
            lhs_batch,
            lhs_contract,
            ..d
        }
    } else {
        let (rhs_batch, rhs_contract) = through(&perm, &d.rhs_batch, &d.rhs_contract)?;
        DotDims {
            rhs_batch,
            rhs_contract,
            ..d
        }
    };
    let operands = if lhs { [x, other] } else { [other, x] };
    Some(add_op(egraph, &Op::DotGeneral(dims), &operands))
}

fn absorb_lhs(egraph: &mut Graph, subst: &Subst) -> Option<Id> {
    absorb(egraph, subst, true)
}

fn absorb_rhs(egraph: &mut Graph, subst: &Subst) -> Option<Id> {
    absorb(egraph, subst, false)
}

/// The dimension numbers of `dot(b, a)` where `transpose(dot(a, b), perm)` equals it: where
/// `perm` moves the rhs's free dimensions before the lhs's (ranks `lhs_rank`, `rhs_rank`).
pub fn swapped_operands(
    d: &DotDims,
    lhs_rank: usize,
    rhs_rank: usize,
    perm: &[usize],
) -> Option<DotDims> {
    let nb = d.lhs_batch.len();
    let nl = lhs_rank.checked_sub(nb + d.lhs_contract.len())?;
    let nr = rhs_rank.checked_sub(nb + d.rhs_contract.len())?;
    let swapped: Vec<usize> = (0..nb)
        .chain(nb + nl..nb + nl + nr)
        .chain(nb..nb + nl)
        .collect();
    (perm == swapped).then(|| DotDims {
        lhs_batch: d.rhs_batch.clone(),
        rhs_batch: d.lhs_batch.clone(),
        lhs_contract: d.rhs_contract.clone(),
        rhs_contract: d.lhs_contract.clone(),
    })
}

/// `transpose(dot(a, b))` that moves the rhs free dimensions before the lhs ones is `dot(b, a)`.
fn swap_operands(egraph: &mut Graph, subst: &Subst) -> Option<Id> {
    let Op::Transpose { perm } = leaf_op(egraph, subst, var("?p"))? else {
        return None;
    };
    let (Op::DotGeneral(d), operands) = node_op(egraph, subst[var("?e")], "dot_general")? else {
        return None;
    };
    let [a, b] = operands.as_slice() else {
        return None;
    };
    let dims = swapped_operands(&d, rank(egraph, *a)?, rank(egraph, *b)?, &perm)?;
    Some(add_op(egraph, &Op::DotGeneral(dims), &[*b, *a]))
}

pub fn rules() -> Vec<Rule> {
    vec![
        rule(
            "dot-absorbs-lhs-transpose",
            "(dot_general ?d (transpose ?p ?x) ?y)",
            absorb_lhs,
        ),
        rule(
            "dot-absorbs-rhs-transpose",
            "(dot_general ?d ?y (transpose ?p ?x))",
            absorb_rhs,
        ),
        rule(
            "transpose-of-dot-swaps-operands",
            "(transpose ?p ?e)",
            swap_operands,
        ),
    ]
}

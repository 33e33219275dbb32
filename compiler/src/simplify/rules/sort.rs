//! Sorting: a sort of a sorted line along the same dimension is the outer sort of the
//! original. Sorts are stable in both directions (ties keep their order, so -0 and +0, or
//! NaNs of different bits, stay as the input had them), so the inner sort changes nothing the
//! outer one keeps: the results are the same bits.

use super::{add_op, leaf_op, pattern, var, Build, Rule};
use crate::simplify::lang::Graph;
use egg::{Id, Rewrite, Subst};
use ferrax_ir::Op;

fn sort_sort(egraph: &mut Graph, subst: &Subst) -> Option<Id> {
    let (
        outer @ Op::Sort { dimension: d, .. },
        Op::Sort {
            dimension: inner, ..
        },
    ) = (
        leaf_op(egraph, subst, var("?p"))?,
        leaf_op(egraph, subst, var("?q"))?,
    )
    else {
        return None;
    };
    (d == inner).then(|| add_op(egraph, &outer, &[subst[var("?x")]]))
}

pub(super) fn rules() -> Vec<Rule> {
    let rule = Rewrite::new(
        "sort-of-sort",
        pattern("(sort ?p (sort ?q ?x))"),
        Build(sort_sort),
    );
    vec![rule.unwrap_or_else(|e| panic!("rule sort-of-sort: {e}"))]
}

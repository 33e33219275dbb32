//! Indexing by values: a dynamic slice whose start indices are constants is a static slice
//! (the starts clamped as the dynamic slice clamps them), which kernels and copies read in
//! place. (A gather or dynamic slice of a splat is that splat: the analysis folds it.)

use super::{add_op, leaf_op, pattern, var, Build, Rule};
use crate::simplify::lang::Graph;
use egg::{Id, Rewrite, Subst};
use ferrax_ir::{Op, MAX_RANK};

/// `dynamic_slice(x, s0, ..)` with constant starts as `slice(x)`.
fn constant_starts(egraph: &mut Graph, subst: &Subst) -> Option<Id> {
    let Op::DynamicSlice { sizes } = leaf_op(egraph, subst, var("?a"))? else {
        return None;
    };
    let x = subst[var("?x")];
    let dims = egraph[x].data.ty.as_ref()?.dims().to_vec();
    let mut start = Vec::with_capacity(sizes.len());
    for (d, &size) in sizes.iter().enumerate() {
        let s = *subst.get(var(&format!("?s{d}")))?;
        let value = egraph[s].data.splat?.to_f64();
        let last = dims.get(d)?.checked_sub(size)?;
        start.push(value.clamp(0.0, last as f64) as usize);
    }
    let limit = start.iter().zip(&sizes).map(|(s, n)| s + n).collect();
    let slice = Op::Slice {
        start,
        limit,
        strides: vec![1; sizes.len()],
    };
    Some(add_op(egraph, &slice, &[x]))
}

pub(super) fn rules() -> Vec<Rule> {
    // One pattern per rank: the starts are operands, one each.
    (1..=MAX_RANK)
        .map(|rank| {
            let starts: Vec<String> = (0..rank).map(|d| format!("?s{d}")).collect();
            let lhs = format!("(dynamic_slice ?a ?x {})", starts.join(" "));
            let name = format!("dynamic-slice-constant-starts-{rank}");
            Rewrite::new(name.clone(), pattern(&lhs), Build(constant_starts))
                .unwrap_or_else(|e| panic!("rule {name}: {e}"))
        })
        .collect()
}

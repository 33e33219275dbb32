//! Layout: chains of transposes, reshapes and broadcasts collapse into one op, and ops that do
//! nothing disappear.

use super::{add_op, leaf_op, pattern, var, Build, Rule};
use crate::simplify::lang::Graph;
use egg::{Id, Rewrite, Subst};
use ferrax_ir::{BinaryOp, CompareOp, Op, UnaryOp};

fn rule(name: &str, lhs: &str, build: fn(&mut Graph, &Subst) -> Option<Id>) -> Rule {
    Rewrite::new(name, pattern(lhs), Build(build)).unwrap_or_else(|e| panic!("rule {name}: {e}"))
}

fn transpose_transpose(egraph: &mut Graph, subst: &Subst) -> Option<Id> {
    let (Op::Transpose { perm: outer }, Op::Transpose { perm: inner }) = (
        leaf_op(egraph, subst, var("?p"))?,
        leaf_op(egraph, subst, var("?q"))?,
    ) else {
        return None;
    };
    let composed: Vec<usize> = outer.iter().map(|&o| inner[o]).collect();
    let x = subst[var("?x")];
    if composed.iter().enumerate().all(|(i, &p)| i == p) {
        return Some(x);
    }
    Some(add_op(egraph, &Op::Transpose { perm: composed }, &[x]))
}

fn reshape_reshape(egraph: &mut Graph, subst: &Subst) -> Option<Id> {
    let outer = leaf_op(egraph, subst, var("?s"))?;
    Some(add_op(egraph, &outer, &[subst[var("?x")]]))
}

/// A reshape, transpose or broadcast whose result has the operand's type and layout.
fn no_op(egraph: &mut Graph, subst: &Subst) -> Option<Id> {
    let x = subst[var("?x")];
    let identity = match leaf_op(egraph, subst, var("?a"))? {
        Op::Reshape { .. } => true,
        Op::Transpose { perm } => perm.iter().enumerate().all(|(i, &p)| i == p),
        Op::BroadcastInDim { dims, .. } => dims.iter().enumerate().all(|(i, &d)| i == d),
        _ => false,
    };
    identity.then_some(x)
}

fn broadcast_broadcast(egraph: &mut Graph, subst: &Subst) -> Option<Id> {
    let (Op::BroadcastInDim { shape, dims: outer }, Op::BroadcastInDim { dims: inner, .. }) = (
        leaf_op(egraph, subst, var("?a"))?,
        leaf_op(egraph, subst, var("?b"))?,
    ) else {
        return None;
    };
    let dims = inner.iter().map(|&d| outer[d]).collect();
    Some(add_op(
        egraph,
        &Op::BroadcastInDim { shape, dims },
        &[subst[var("?x")]],
    ))
}

/// `broadcast_in_dim(reshape(x))` where the reshape only inserts size-1 dimensions is a
/// broadcast of `x` itself.
fn broadcast_of_unit_reshape(egraph: &mut Graph, subst: &Subst) -> Option<Id> {
    let Op::BroadcastInDim { shape, dims } = leaf_op(egraph, subst, var("?a"))? else {
        return None;
    };
    let x = subst[var("?x")];
    let x_dims = egraph[x].data.ty.as_ref()?.dims().to_vec();
    let Op::Reshape { shape: mid } = leaf_op(egraph, subst, var("?r"))? else {
        return None;
    };
    let mut next = 0;
    let mut mapped = Vec::with_capacity(x_dims.len());
    for (j, &size) in mid.dims().iter().enumerate() {
        if next < x_dims.len() && size == x_dims[next] {
            mapped.push(dims[j]);
            next += 1;
        } else if size != 1 {
            return None;
        }
    }
    (next == x_dims.len()).then(|| {
        add_op(
            egraph,
            &Op::BroadcastInDim {
                shape,
                dims: mapped,
            },
            &[x],
        )
    })
}

/// Reshapes move into elementwise ops, where they meet and cancel other reshapes (the
/// keep-dims reshapes around reductions).
fn reshape_into_elementwise() -> Vec<Rule> {
    let binary = BinaryOp::ALL.iter().map(|b| b.name());
    let compare = CompareOp::ALL.iter().map(|c| c.name());
    let mut rules: Vec<Rule> = binary
        .chain(compare)
        .map(|op| {
            let name = format!("reshape-into-{op}");
            let lhs = format!("(reshape ?r ({op} ?x ?y))");
            let rhs = format!("({op} (reshape ?r ?x) (reshape ?r ?y))");
            Rewrite::new(name.as_str(), pattern(&lhs), pattern(&rhs))
                .unwrap_or_else(|e| panic!("rule {name}: {e}"))
        })
        .collect();
    rules.extend(UnaryOp::ALL.iter().map(|u| {
        let op = u.name();
        let name = format!("reshape-into-{op}");
        let lhs = format!("(reshape ?r ({op} ?x))");
        let rhs = format!("({op} (reshape ?r ?x))");
        Rewrite::new(name.as_str(), pattern(&lhs), pattern(&rhs))
            .unwrap_or_else(|e| panic!("rule {name}: {e}"))
    }));
    rules
}

pub fn rules() -> Vec<Rule> {
    let mut rules = reshape_into_elementwise();
    rules.extend(vec![
        Rewrite::new(
            "drop-stop-gradient",
            pattern("(stop_gradient ?x)"),
            pattern("?x"),
        )
        .unwrap_or_else(|e| panic!("rule drop-stop-gradient: {e}")),
        rule(
            "broadcast-of-unit-reshape",
            "(broadcast_in_dim ?a (reshape ?r ?x))",
            broadcast_of_unit_reshape,
        ),
        rule(
            "transpose-of-transpose",
            "(transpose ?p (transpose ?q ?x))",
            transpose_transpose,
        ),
        rule(
            "reshape-of-reshape",
            "(reshape ?s (reshape ?t ?x))",
            reshape_reshape,
        ),
        rule("noop-reshape", "(reshape ?a ?x)", no_op),
        rule("noop-transpose", "(transpose ?a ?x)", no_op),
        rule("noop-broadcast", "(broadcast_in_dim ?a ?x)", no_op),
        rule(
            "broadcast-of-broadcast",
            "(broadcast_in_dim ?a (broadcast_in_dim ?b ?x))",
            broadcast_broadcast,
        ),
    ]);
    rules
}

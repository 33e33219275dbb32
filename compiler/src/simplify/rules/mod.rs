//! Rewrite rules, one table per theme, each rule with a kebab-case name. All are IEEE-safe:
//! no rule changes a result for any input, NaN, infinities and signed zeros included.

mod algebra;
pub mod contract;
mod indexing;
mod layout;
mod sort;

use super::lang::{op_of, Data, Facts, Graph, Node};
use egg::{Applier, Id, Pattern, PatternAst, Rewrite, Subst, Symbol, Var};
use ferrax_ir::{Op, Scalar};

pub type Rule = Rewrite<Node, Facts>;

/// The rule sets, in the order the stages run them.
pub fn stages() -> Vec<(&'static str, Vec<Rule>)> {
    vec![
        (
            "algebra+layout",
            algebra::rules()
                .into_iter()
                .chain(layout::rules())
                .chain(indexing::rules())
                .chain(sort::rules())
                .collect(),
        ),
        ("contract", contract::rules()),
    ]
}

pub(super) fn pattern(text: &str) -> Pattern<Node> {
    text.parse()
        .unwrap_or_else(|e| panic!("rule pattern {text:?}: {e}"))
}

pub(super) fn var(name: &str) -> Var {
    name.parse()
        .unwrap_or_else(|e| panic!("rule variable {name:?}: {e}"))
}

/// A splat constant's value as f64 with its sign bit.
pub(super) fn splat_value(data: &Data) -> Option<(f64, bool)> {
    let s = data.splat?;
    let negative = match s {
        Scalar::F32(x) => x.is_sign_negative(),
        Scalar::F64(x) => x.is_sign_negative(),
        Scalar::F16(x) => x.is_sign_negative(),
        Scalar::BF16(x) => x.is_sign_negative(),
        other => other.to_f64() < 0.0,
    };
    Some((s.to_f64(), negative))
}

/// The op behind an attribute leaf bound to `v`.
pub(super) fn leaf_op(egraph: &Graph, subst: &Subst, v: Var) -> Option<Op> {
    let node = egraph[subst[v]].nodes.first()?;
    egraph.analysis.op_of_leaf(node.key).cloned()
}

/// Adds `op(operands)`, with its attribute leaf when it has attributes.
pub(super) fn add_op(egraph: &mut Graph, op: &Op, operands: &[Id]) -> Id {
    let mut children = Vec::with_capacity(operands.len() + 1);
    let plain = super::lang::plain_op(op.name()).is_some_and(|p| p == *op);
    if !plain {
        let key = egraph.analysis.intern(op);
        children.push(egraph.add(Node {
            key,
            children: Vec::new(),
        }));
    }
    children.extend_from_slice(operands);
    egraph.add(Node {
        key: Symbol::from(op.name()),
        children,
    })
}

/// Unites `new` with `class` if their types agree (a rule never changes a type).
pub(super) fn union_checked(egraph: &mut Graph, class: Id, new: Id) -> Vec<Id> {
    let same = egraph[class].data.ty.is_some() && egraph[class].data.ty == egraph[new].data.ty;
    if same && egraph.union(class, new) {
        vec![new]
    } else {
        Vec::new()
    }
}

/// An applier written as a function from the match to the equivalent class, if any.
pub(super) struct Build(pub fn(&mut Graph, &Subst) -> Option<Id>);

impl Applier<Node, Facts> for Build {
    fn apply_one(
        &self,
        egraph: &mut Graph,
        eclass: Id,
        subst: &Subst,
        _ast: Option<&PatternAst<Node>>,
        _rule: Symbol,
    ) -> Vec<Id> {
        match (self.0)(egraph, subst) {
            Some(new) => union_checked(egraph, eclass, new),
            None => Vec::new(),
        }
    }
}

/// The single op node of a class that holds only `key` nodes, if there is one.
pub(super) fn node_op(egraph: &Graph, class: Id, key: &str) -> Option<(Op, Vec<Id>)> {
    egraph[class]
        .nodes
        .iter()
        .filter(|n| n.key.as_str() == key)
        .find_map(|n| op_of(egraph, n).map(|(op, ids)| (op, ids.to_vec())))
}

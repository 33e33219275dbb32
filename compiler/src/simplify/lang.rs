//! The e-graph language: one node per ferrax op, keyed by the op's name so that rules can be
//! written as patterns. Ops with attributes carry them in a first child, a leaf `op#N` that
//! indexes the analysis' op table; ops without attributes have only their operands.

use egg::{Analysis, DidMerge, EGraph, FromOp, Id, Language, Symbol};
use ferrax_ir::{infer_type, BinaryOp, CompareOp, Literal, Op, Scalar, Shape, TensorType, UnaryOp};
use ferrax_runtime::{eval_op, Array};
use std::collections::HashMap;
use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Node {
    pub key: Symbol,
    pub children: Vec<Id>,
}

impl Language for Node {
    type Discriminant = Symbol;

    fn discriminant(&self) -> Symbol {
        self.key
    }

    fn matches(&self, other: &Self) -> bool {
        self.key == other.key && self.children.len() == other.children.len()
    }

    fn children(&self) -> &[Id] {
        &self.children
    }

    fn children_mut(&mut self) -> &mut [Id] {
        &mut self.children
    }
}

impl FromOp for Node {
    type Error = std::convert::Infallible;

    fn from_op(op: &str, children: Vec<Id>) -> Result<Self, Self::Error> {
        Ok(Node {
            key: Symbol::from(op),
            children,
        })
    }
}

impl fmt::Display for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.key.as_str())
    }
}

/// Ops whose meaning is their name alone (no attributes).
pub fn plain_op(name: &str) -> Option<Op> {
    if let Some(u) = UnaryOp::ALL.into_iter().find(|u| u.name() == name) {
        return Some(Op::Unary(u));
    }
    if let Some(b) = BinaryOp::ALL.into_iter().find(|b| b.name() == name) {
        return Some(Op::Binary(b));
    }
    if let Some(c) = CompareOp::ALL.into_iter().find(|c| c.name() == name) {
        return Some(Op::Compare(c));
    }
    match name {
        "select" => Some(Op::Select),
        "clamp" => Some(Op::Clamp),
        "stop_gradient" => Some(Op::StopGradient),
        _ => None,
    }
}

/// What the analysis knows of an e-class: its type (none for attribute leaves) and, for
/// splat constants, the value.
#[derive(Debug, Clone, PartialEq)]
pub struct Data {
    pub ty: Option<TensorType>,
    pub splat: Option<Scalar>,
}

/// Shape/dtype inference and constant recognition, plus the tables behind leaf keys.
#[derive(Default)]
pub struct Facts {
    pub params: Vec<TensorType>,
    pub ops: Vec<Op>,
    index: HashMap<Op, usize>,
}

impl Facts {
    pub fn new(params: Vec<TensorType>) -> Facts {
        Facts {
            params,
            ..Facts::default()
        }
    }

    /// The leaf key for `op`'s attributes (equal ops share one).
    pub fn intern(&mut self, op: &Op) -> Symbol {
        let n = match self.index.get(op) {
            Some(&n) => n,
            None => {
                self.ops.push(op.clone());
                self.index.insert(op.clone(), self.ops.len() - 1);
                self.ops.len() - 1
            }
        };
        Symbol::from(format!("op#{n}"))
    }

    pub fn op_of_leaf(&self, key: Symbol) -> Option<&Op> {
        let n: usize = key.as_str().strip_prefix("op#")?.parse().ok()?;
        self.ops.get(n)
    }

    pub fn param_of_leaf(&self, key: Symbol) -> Option<&TensorType> {
        let n: usize = key.as_str().strip_prefix("param#")?.parse().ok()?;
        self.params.get(n)
    }
}

pub type Graph = EGraph<Node, Facts>;

/// The splat value of `op` applied to splat operands (constant folding), computed by the
/// reference interpreter on one element so that it is bit-identical to evaluating the op.
fn fold(op: &Op, operands: Option<&[Scalar]>) -> Option<Scalar> {
    match op {
        Op::Constant(lit) if lit.is_splat() => Some(lit.data.get(0)),
        Op::BroadcastInDim { .. }
        | Op::Reshape { .. }
        | Op::Transpose { .. }
        | Op::StopGradient => operands?.first().copied(),
        _ if op.is_elementwise() && !operands?.is_empty() => {
            let arrays: Vec<Array> = operands?
                .iter()
                .map(|&s| Array::full(Shape::scalar(), s))
                .collect();
            let refs: Vec<&Array> = arrays.iter().collect();
            let out = eval_op(op, &refs).ok()?;
            Some(out.elements().get(0))
        }
        _ => None,
    }
}

/// The ferrax op of `node` and its operand classes, if it is an op node.
pub fn op_of<'a>(egraph: &'a Graph, node: &'a Node) -> Option<(Op, &'a [Id])> {
    if let Some(op) = plain_op(node.key.as_str()) {
        return Some((op, &node.children));
    }
    let (&leaf, operands) = node.children.split_first()?;
    let leaf_node = egraph[leaf].nodes.first()?;
    let op = egraph.analysis.op_of_leaf(leaf_node.key)?;
    (op.name() == node.key.as_str()).then(|| (op.clone(), operands))
}

impl Analysis<Node> for Facts {
    type Data = Data;

    fn make(egraph: &mut Graph, enode: &Node) -> Data {
        let none = Data {
            ty: None,
            splat: None,
        };
        if enode.children.is_empty() {
            if let Some(ty) = egraph.analysis.param_of_leaf(enode.key) {
                return Data {
                    ty: Some(ty.clone()),
                    splat: None,
                };
            }
            if plain_op(enode.key.as_str()).is_none() && enode.key.as_str().starts_with("op#") {
                return none;
            }
        }
        let Some((op, operands)) = op_of(egraph, enode) else {
            return none;
        };
        let mut types = Vec::with_capacity(operands.len());
        for &c in operands {
            match &egraph[c].data.ty {
                Some(t) => types.push(t.clone()),
                None => return none,
            }
        }
        let refs: Vec<&TensorType> = types.iter().collect();
        let splats: Option<Vec<Scalar>> = operands.iter().map(|&c| egraph[c].data.splat).collect();
        // Every element of a gather or dynamic slice is an element of its operand.
        let splat = match op {
            Op::Gather(_) | Op::DynamicSlice { .. } => egraph[operands[0]].data.splat,
            _ => fold(&op, splats.as_deref()),
        };
        Data {
            ty: infer_type(&op, &refs).ok(),
            splat,
        }
    }

    /// A class with a known splat value also gets the equivalent `constant` node.
    fn modify(egraph: &mut Graph, id: Id) {
        let data = egraph[id].data.clone();
        let (Some(ty), Some(value)) = (data.ty, data.splat) else {
            return;
        };
        if egraph[id]
            .nodes
            .iter()
            .any(|n| n.key.as_str() == "constant")
        {
            return;
        }
        let op = Op::Constant(Literal::splat(value, ty.shape));
        let key = egraph.analysis.intern(&op);
        let leaf = egraph.add(Node {
            key,
            children: Vec::new(),
        });
        let constant = egraph.add(Node {
            key: Symbol::from("constant"),
            children: vec![leaf],
        });
        egraph.union(id, constant);
    }

    fn merge(&mut self, a: &mut Data, b: Data) -> DidMerge {
        let mut changed = false;
        if a.ty.is_none() && b.ty.is_some() {
            a.ty = b.ty;
            changed = true;
        }
        if a.splat.is_none() && b.splat.is_some() {
            a.splat = b.splat;
            changed = true;
        }
        DidMerge(changed, true)
    }
}

//! Extraction cost: bytes written by each instruction (what moves between kernels once fused)
//! plus arithmetic, with pure re-labelings (reshape) nearly free. Ill-typed nodes have no cost
//! at all, so that extraction never picks them.

use super::lang::{op_of, Graph, Node};
use ferrax_ir::Op;

/// What one operand class adds to a node's cost at most. Costs add up over the program as a
/// tree, so a value used twice counts twice; on a program with much sharing (residual
/// connections) they would otherwise grow exponentially with depth and reach infinity, where
/// every choice ties. Capped, a deep operand still counts as one expensive operand, and the
/// choice between nodes falls to their own costs. The cap stays well inside f64's exact
/// integers so that single bytes still tell costs apart.
pub const OPERAND_CAP: f64 = 1e15;

/// The cost of `node` on its own, without its operands': `None` for an op whose type cannot
/// be inferred (it must never be chosen), zero for parameters and attribute leaves.
pub fn own_cost(egraph: &Graph, node: &Node) -> Option<f64> {
    let Some((op, operands)) = op_of(egraph, node) else {
        return Some(0.0);
    };
    let class = egraph.lookup(node.clone())?;
    let ty = egraph[class].data.ty.as_ref()?;
    let numel = ty.numel() as f64;
    let bytes = numel * ty.dtype.size_bytes() as f64;
    let own = match &op {
        Op::Reshape { .. } | Op::StopGradient => 1.0,
        Op::Constant(lit) if lit.is_splat() => 1.0,
        Op::DotGeneral(d) => {
            let lhs = operands.first().and_then(|&a| egraph[a].data.ty.as_ref());
            let k: f64 = lhs.map_or(1.0, |t| {
                d.lhs_contract
                    .iter()
                    .map(|&i| t.dims().get(i).map_or(1.0, |&n| n as f64))
                    .product()
            });
            bytes + 2.0 * numel * k
        }
        _ => bytes + numel,
    };
    Some(own + 1.0)
}

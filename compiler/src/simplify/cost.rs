//! Extraction cost: bytes written by each instruction (what moves between kernels once fused)
//! plus arithmetic, with pure re-labelings (reshape) nearly free. Ill-typed nodes cost
//! infinity so that extraction never picks them.

use super::lang::{op_of, Graph, Node};
use egg::{CostFunction, Id, Language};
use ferrax_ir::Op;

pub struct Traffic<'a> {
    pub egraph: &'a Graph,
}

impl CostFunction<Node> for Traffic<'_> {
    type Cost = f64;

    fn cost<C>(&mut self, enode: &Node, mut costs: C) -> f64
    where
        C: FnMut(Id) -> f64,
    {
        let children: f64 = enode.children().iter().map(|&c| costs(c)).sum();
        let Some((op, operands)) = op_of(self.egraph, enode) else {
            // Parameters and attribute leaves.
            return children;
        };
        let class = self.egraph.lookup(enode.clone());
        let Some(ty) = class.and_then(|c| self.egraph[c].data.ty.clone()) else {
            return f64::INFINITY;
        };
        let bytes = (ty.numel() * ty.dtype.size_bytes()) as f64;
        let own = match &op {
            Op::Reshape { .. } | Op::StopGradient => 1.0,
            Op::Constant(lit) if lit.is_splat() => 1.0,
            Op::DotGeneral(d) => {
                let a = operands
                    .first()
                    .and_then(|&a| self.egraph[a].data.ty.clone());
                let k: usize =
                    a.map_or(1, |t| d.lhs_contract.iter().map(|&i| t.dims()[i]).product());
                bytes + 2.0 * (ty.numel() * k) as f64
            }
            _ => bytes + ty.numel() as f64,
        };
        own + children + 1.0
    }
}

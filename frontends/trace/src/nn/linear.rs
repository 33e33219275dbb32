//! The dense layer: parameters as a [`Tree`] (`{w, b}`, the bias optional), applied by a plain
//! function, so a model's parameters are a tree of these that `jit`, `grad` and the
//! optimizers take as they are.

use crate::{Result, Tensor, Tree, TreeDef};

/// A dense layer's parameters: `w` is `[in, out]` (JAX's and flax's layout, so `x @ w`), `b`
/// is `[out]` or absent.
#[derive(Clone, Debug)]
pub struct Linear {
    pub w: Tensor,
    pub b: Option<Tensor>,
}

impl Tree for Linear {
    fn flatten(&self, leaves: &mut Vec<Tensor>) -> TreeDef {
        TreeDef::Node(vec![self.w.flatten(leaves), self.b.flatten(leaves)])
    }

    fn unflatten(def: &TreeDef, leaves: &mut dyn Iterator<Item = Tensor>) -> Result<Self> {
        let c = def.children(2)?;
        Ok(Linear {
            w: Tensor::unflatten(&c[0], leaves)?,
            b: Option::unflatten(&c[1], leaves)?,
        })
    }
}

/// `x @ w + b` over the last axis of `x` (any leading axes).
#[track_caller]
pub fn linear(x: &Tensor, params: &Linear) -> Tensor {
    let y = x.matmul(&params.w);
    match &params.b {
        Some(b) => y + b,
        None => y,
    }
}

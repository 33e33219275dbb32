//! The dense layer: parameters as a [`Tree`] (`{w, b}`, the bias optional), applied by a plain
//! function, so a model's parameters are a tree of these that `jit`, `grad` and the
//! optimizers take as they are. [`linear_with`] is the mixed-precision form: f32 master
//! weights, the product at a [`DotPrecision`], the result back in the input's dtype.

use crate::tree::child_key_paths;
use crate::{DotPrecision, Result, Tensor, Tree, TreeDef};

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

    fn key_paths(&self, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
        child_key_paths("w", &self.w, prefix, out);
        child_key_paths("b", &self.b, prefix, out);
    }
}

/// `x @ w + b` over the last axis of `x` (any leading axes).
#[track_caller]
pub fn linear(x: &Tensor, params: &Linear) -> Tensor {
    dense(x, params, None)
}

/// [`linear`] with the product at `precision`, its result converted back to `x`'s dtype
/// before the bias is added: `DotPrecision::new(DType::BF16, DType::BF16)` on f32 `x` and
/// weights is `(x.astype(bf16) @ w.astype(bf16)).astype(f32) + b`, as JAX's mixed-precision
/// models write it; [`DotPrecision::BF16_F32`] skips the product's rounding to bf16.
#[track_caller]
pub fn linear_with(x: &Tensor, params: &Linear, precision: DotPrecision) -> Tensor {
    dense(x, params, Some(precision))
}

#[track_caller]
pub(super) fn dense(x: &Tensor, params: &Linear, precision: Option<DotPrecision>) -> Tensor {
    let y = match precision {
        Some(p) => x.matmul_with(&params.w, p).astype(x.dtype()),
        None => x.matmul(&params.w),
    };
    match &params.b {
        Some(b) => y + b,
        None => y,
    }
}

//! Contraction: `dot_general` as the IR has it, and `matmul` with `jnp.matmul`'s rules
//! (vector operands, broadcast batch dimensions) built on it.

use super::broadcast_shapes;
use crate::tensor::apply;
use crate::Tensor;
use ferrax_ir::{DotDims, Op};
use std::panic::Location;

impl Tensor {
    /// A general contraction (`lax.dot_general`).
    #[track_caller]
    pub fn dot_general(&self, other: &Tensor, dims: DotDims) -> Tensor {
        apply(Op::DotGeneral(dims), &[self, other])
    }

    /// Matrix product with `jnp.matmul` semantics: 1-D operands are vectors, leading
    /// dimensions are batch dimensions and broadcast.
    #[track_caller]
    pub fn matmul(&self, other: &Tensor) -> Tensor {
        let (ra, rb) = (self.ndim(), other.ndim());
        let location = Location::caller();
        let mismatch = || {
            self.fail_at(
                location,
                format!("matmul: cannot multiply {} by {}", self.ty(), other.ty()),
            )
        };
        if ra == 0 || rb == 0 {
            return mismatch();
        }
        let k_a = self.shape()[ra - 1];
        let k_b = if rb == 1 {
            other.shape()[0]
        } else {
            other.shape()[rb - 2]
        };
        if k_a != k_b {
            return mismatch();
        }
        if rb <= 2 {
            // A plain contraction already yields (lhs leading dims, rhs columns).
            let dims = DotDims {
                lhs_contract: vec![ra - 1],
                rhs_contract: vec![0],
                ..DotDims::default()
            };
            return self.dot_general(other, dims);
        }
        let (a, b) = (
            if ra == 1 {
                self.expand_dims(0)
            } else {
                self.clone()
            },
            if rb == 1 {
                other.expand_dims(-1)
            } else {
                other.clone()
            },
        );
        let (ba, bb) = (&a.shape()[..a.ndim() - 2], &b.shape()[..b.ndim() - 2]);
        let Some(batch) = broadcast_shapes(ba, bb) else {
            return mismatch();
        };
        let target = |t: &Tensor| {
            let mut s = batch.clone();
            s.extend_from_slice(&t.shape()[t.ndim() - 2..]);
            s
        };
        let (a, b) = (a.broadcast_to(target(&a)), b.broadcast_to(target(&b)));
        let nb = batch.len();
        let dims = DotDims {
            lhs_batch: (0..nb).collect(),
            rhs_batch: (0..nb).collect(),
            lhs_contract: vec![nb + 1],
            rhs_contract: vec![nb],
        };
        let out = a.dot_general(&b, dims);
        match (ra, rb) {
            (1, _) => out.squeeze([-2]),
            (_, 1) => out.squeeze([-1]),
            _ => out,
        }
    }
}

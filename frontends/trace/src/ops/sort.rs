//! Sorting (`jnp.sort`, `jnp.argsort`, `lax.sort_key_val`): stable, in `jax.lax.sort`'s
//! order (floats with -0 tied to +0 and NaNs last). Sorting values by keys is the keys'
//! stable permutation followed by a `take_along_axis` gather, so one permutation serves any
//! number of operands and differentiates through the gather.

use super::axis_index;
use crate::tensor::apply;
use crate::Tensor;
use ferrax_ir::{Gather, Op};

impl Tensor {
    /// The elements sorted ascending along `axis` (`jnp.sort(x, axis)`): floats as
    /// `jax.lax.sort` orders them, -0 tied with +0 and every NaN after +inf.
    #[track_caller]
    pub fn sort(&self, axis: i64) -> Tensor {
        self.sorted(axis, false)
    }

    /// The elements sorted descending along `axis` (`jnp.sort(x, axis, descending=True)`).
    #[track_caller]
    pub fn sort_descending(&self, axis: i64) -> Tensor {
        self.sorted(axis, true)
    }

    /// The stable permutation (`i32` positions along `axis`) that sorts the elements
    /// ascending (`jnp.argsort(x, axis, stable=True)`): equal elements keep their order.
    #[track_caller]
    pub fn argsort(&self, axis: i64) -> Tensor {
        self.permutation("argsort", axis, false)
    }

    /// The stable permutation that sorts the elements descending, equal elements keeping
    /// their order (`jnp.argsort(x, axis, descending=True, stable=True)`).
    #[track_caller]
    pub fn argsort_descending(&self, axis: i64) -> Tensor {
        self.permutation("argsort", axis, true)
    }

    /// The `k` largest elements along the last axis in descending order, equal ones in index
    /// order, and their `i32` indices (`lax.top_k`). The values are a gather at the indices,
    /// so they differentiate as the elements they are.
    #[track_caller]
    pub fn top_k(&self, k: usize) -> (Tensor, Tensor) {
        let Some(last) = self.ndim().checked_sub(1) else {
            let failed = self.fail(format!("top_k of a scalar {}", self.ty()));
            return (failed.clone(), failed);
        };
        if k > self.shape()[last] {
            let failed = self.fail(format!(
                "top_k: k = {k} exceeds the last dimension of {}",
                self.ty()
            ));
            return (failed.clone(), failed);
        }
        let order = self.argsort_descending(-1);
        let mut limit = self.shape().to_vec();
        limit[last] = k;
        let indices = order.slice(&vec![0; self.ndim()], &limit);
        (self.take_along_axis(&indices, -1), indices)
    }

    #[track_caller]
    fn sorted(&self, axis: i64, descending: bool) -> Tensor {
        match self.sort_axis("sort", axis) {
            Ok(dimension) => apply(
                Op::Sort {
                    dimension,
                    descending,
                },
                &[self],
            ),
            Err(failed) => failed,
        }
    }

    #[track_caller]
    pub(crate) fn permutation(&self, op: &str, axis: i64, descending: bool) -> Tensor {
        match self.sort_axis(op, axis) {
            Ok(dimension) => apply(
                Op::Argsort {
                    dimension,
                    descending,
                },
                &[self],
            ),
            Err(failed) => failed,
        }
    }

    /// `self` rearranged along `dimension` by `perm`, a permutation of its shape.
    #[track_caller]
    pub(crate) fn permuted(&self, perm: &Tensor, dimension: usize) -> Tensor {
        let gather = Gather::along_axis(self.ndim(), dimension);
        apply(Op::Gather(Box::new(gather)), &[self, perm])
    }

    #[track_caller]
    fn sort_axis(&self, op: &str, axis: i64) -> Result<usize, Tensor> {
        match axis_index(axis, self.ndim()) {
            Some(dimension) => Ok(dimension),
            None => Err(self.fail(format!(
                "{op}: axis {axis} is out of range for {}",
                self.ty()
            ))),
        }
    }
}

/// `values` sorted along `axis` by `keys` of the same shape, and the sorted keys
/// (`lax.sort_key_val(keys, values, dimension)`, stable): the stable permutation that sorts
/// the keys, applied to both.
#[track_caller]
pub fn sort_key_val(keys: &Tensor, values: &Tensor, axis: i64) -> (Tensor, Tensor) {
    if keys.shape() != values.shape() {
        let message = format!(
            "sort_key_val: keys {} and values {} must have the same shape",
            keys.ty(),
            values.ty()
        );
        return (keys.fail(message.clone()), values.fail(message));
    }
    let perm = keys.permutation("sort_key_val", axis, false);
    let Some(dimension) = axis_index(axis, keys.ndim()) else {
        return (perm.clone(), perm);
    };
    (keys.sort(axis), values.permuted(&perm, dimension))
}

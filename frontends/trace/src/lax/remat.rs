//! `jax.checkpoint` (`jax.remat`): a function traced into the body of a `remat` call, so that
//! reverse mode stores only what the policy saves and computes the rest again in the backward
//! pass. Inside a `scan` body this is what makes a long loop's gradient cheap in memory: each
//! step stores the body's operands (and the saved products) instead of every intermediate.

use super::region::{emit_call, failed_tree, rebind, specs, trace_region, tree};
use crate::{Tensor, Tree};
use ferrax_ir::{Op, Remat, RematPolicy, TensorType};
use std::panic::Location;

/// `jax.checkpoint(f)` with JAX's default policy (`nothing_saveable`): the same function,
/// whose reverse mode computes `f`'s intermediates again from its inputs instead of storing
/// them. Values, forward mode and gradients are unchanged.
#[track_caller]
pub fn remat<A: Tree, R: Tree>(f: impl Fn(A) -> R) -> impl Fn(A) -> R {
    remat_with(RematPolicy::NothingSaveable, f)
}

/// [`remat`] storing what `policy` saves (`jax.checkpoint(f, policy=...)`), e.g.
/// [`RematPolicy::DotsSaveable`] to keep matrix products' results and compute only the cheap
/// elementwise work again.
#[track_caller]
pub fn remat_with<A: Tree, R: Tree>(policy: RematPolicy, f: impl Fn(A) -> R) -> impl Fn(A) -> R {
    let location = Location::caller();
    move |args: A| remat_at(location, policy, &f, args)
}

fn remat_at<A: Tree, R: Tree>(
    location: &'static Location<'static>,
    policy: RematPolicy,
    f: &dyn Fn(A) -> R,
    args: A,
) -> R {
    let mut leaves = Vec::new();
    let def = args.flatten(&mut leaves);
    let inputs: A = specs(&def, &leaves);
    let region = trace_region("remat", f, &inputs);
    let (out_def, out_types) = (&region.outputs.def, &region.outputs.types);
    let traced = match region.traced {
        Ok(traced) => traced,
        Err(e) => return failed_tree(out_def, out_types, e),
    };
    // The body takes the argument leaves, then the tracers `f` closes over.
    let mut params: Vec<TensorType> = leaves.iter().map(|l| l.ty().clone()).collect();
    let mut operands: Vec<Tensor> = leaves;
    let mut map: Vec<usize> = (0..params.len()).collect();
    for c in &traced.captures {
        map.push(params.len());
        params.push(c.ty().clone());
        operands.push(c.clone());
    }
    let body = match rebind(&traced.func, &params, &map, &[]) {
        Ok(body) => body,
        Err(e) => {
            let error = super::region::error_at(location, format!("remat: {e}"));
            return failed_tree(out_def, out_types, error);
        }
    };
    let op = Op::Remat(Box::new(Remat {
        body,
        policy,
        result: 0,
    }));
    tree(out_def, emit_call(location, &op, &operands, out_types))
}

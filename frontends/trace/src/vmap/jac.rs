//! `jax.jacfwd` and `jax.jacrev`, as JAX defines them: forward mode batched over the standard
//! basis of the input's tangents (one `jvp` per input element, as one batched program), and
//! reverse mode batched over the standard basis of the outputs' cotangents. Each output
//! leaf's Jacobian is shaped `output.shape + input.shape`, as JAX's. `hessian` is `jacfwd` of
//! `grad`. The `_tree` forms take a tree of inputs, raveled into one vector and split back.

use super::batch_error;
use crate::tensor::Inner;
use crate::trace::trace_named;
use crate::transforms::call_func_at;
use crate::{dump, grad, Error, Result, Tensor, Tree};
use ferrax_compiler::{autodiff, batching, dce::eliminate_dead_code};
use ferrax_ir::{DType, Func};
use std::panic::Location;

/// The identity matrix of size `n` in `dtype`, as `[n] + shape` (`n` the elements of
/// `shape`).
fn basis(dtype: DType, n: usize, shape: &[usize]) -> Tensor {
    let rows = Tensor::iota(DType::I32, [n, n], 0);
    let cols = Tensor::iota(DType::I32, [n, n], 1);
    let mut full = vec![n];
    full.extend_from_slice(shape);
    rows.equal(&cols).astype(dtype).reshape(full)
}

/// `func` returning only the outputs `keep`, without the work only the others need.
fn outputs_only(func: &Func, keep: &[usize]) -> Func {
    let mut f = func.clone();
    f.outputs = keep.iter().map(|&k| func.outputs[k]).collect();
    eliminate_dead_code(&f)
}

fn derivative_error(location: &'static Location<'static>, e: autodiff::AutodiffError) -> Error {
    Error::Trace {
        location,
        message: format!("differentiation failed: {e}"),
    }
}

fn check_float(x: &Tensor, what: &str, location: &'static Location<'static>) -> Result<()> {
    if let Some(e) = x.error() {
        return Err(e.clone());
    }
    if !x.dtype().is_float() {
        return Err(Error::Trace {
            location,
            message: format!("{what} needs a float input, this one is {}", x.ty()),
        });
    }
    Ok(())
}

fn first_error(ts: &[Tensor]) -> Result<()> {
    match ts.iter().find_map(|t| t.error()) {
        Some(e) => Err(e.clone()),
        None => Ok(()),
    }
}

/// `jax.jacfwd` of a function of one tensor: for each output leaf, its derivative with
/// respect to every element of the input, shaped `output.shape + input.shape`. Forward mode:
/// suited to functions with fewer inputs than outputs.
#[track_caller]
pub fn jacfwd<O: Tree, F: Fn(Tensor) -> O>(f: F) -> impl Fn(&Tensor) -> Result<O> {
    jacfwd_at(Location::caller(), f)
}

fn jacfwd_at<O: Tree, F: Fn(Tensor) -> O>(
    location: &'static Location<'static>,
    f: F,
) -> impl Fn(&Tensor) -> Result<O> {
    move |x: &Tensor| {
        check_float(x, "jacfwd", location)?;
        let traced = trace_named("f", &f, x)?;
        let jvp = autodiff::jvp(&traced.func).map_err(|e| derivative_error(location, e))?;
        dump::write("jvp", &jvp);
        let n_out = traced.func.outputs.len();
        let tangents: Vec<usize> = (n_out..2 * n_out).collect();
        let jvp = outputs_only(&jvp, &tangents);
        // Parameters: x, the captured tracers, x's tangent, theirs (zeros).
        let n_in = 1 + traced.captures.len();
        let mut in_axes = vec![None; 2 * n_in];
        in_axes[n_in] = Some(0);
        let out_types = traced.func.output_types();
        let out_axes: Vec<Option<usize>> = out_types.iter().map(|t| Some(t.rank())).collect();
        let n = x.numel();
        let batched =
            batching::vmap(&jvp, &in_axes, &out_axes, n).map_err(|e| batch_error(location, e))?;
        dump::write("jacfwd", &batched);
        let mut inputs = vec![x.clone()];
        inputs.extend(traced.captures.iter().cloned());
        inputs.push(basis(x.dtype(), n, x.shape()));
        inputs.extend(
            traced
                .captures
                .iter()
                .map(|c| Tensor::zeros(c.dtype(), c.shape().to_vec())),
        );
        let columns = call_func_at(location, &batched, &inputs);
        let jac: Vec<Tensor> = columns
            .iter()
            .zip(&out_types)
            .map(|(c, t)| {
                let mut shape = t.dims().to_vec();
                shape.extend_from_slice(x.shape());
                c.reshape(shape)
            })
            .collect();
        first_error(&jac)?;
        O::unflatten(&traced.out_def, &mut jac.into_iter())
    }
}

/// `jax.jacrev` of a function of one tensor: the Jacobian as [`jacfwd`] shapes it, by reverse
/// mode (one pullback per output element, as one batched program): suited to functions with
/// fewer outputs than inputs, such as gradients of many parameters.
#[track_caller]
pub fn jacrev<O: Tree, F: Fn(Tensor) -> O>(f: F) -> impl Fn(&Tensor) -> Result<O> {
    jacrev_at(Location::caller(), f)
}

fn jacrev_at<O: Tree, F: Fn(Tensor) -> O>(
    location: &'static Location<'static>,
    f: F,
) -> impl Fn(&Tensor) -> Result<O> {
    move |x: &Tensor| {
        check_float(x, "jacrev", location)?;
        let traced = trace_named("f", &f, x)?;
        let out_types = traced.func.output_types();
        if let Some(t) = out_types.iter().find(|t| !t.dtype.is_float()) {
            return Err(Error::Trace {
                location,
                message: format!("jacrev needs float outputs, this function returns {t}"),
            });
        }
        let vjp = autodiff::vjp(&traced.func).map_err(|e| derivative_error(location, e))?;
        dump::derivatives(&traced.func, &vjp);
        let n_out = out_types.len();
        // Parameters: x, the captured tracers, one cotangent per output; x's cotangent kept.
        let vjp = outputs_only(&vjp, &[n_out]);
        let n_in = 1 + traced.captures.len();
        let mut in_axes = vec![None; n_in];
        in_axes.extend(std::iter::repeat_n(Some(0), n_out));
        let m: usize = out_types.iter().map(|t| t.numel()).sum();
        let batched =
            batching::vmap(&vjp, &in_axes, &[Some(0)], m).map_err(|e| batch_error(location, e))?;
        dump::write("jacrev", &batched);
        let mut inputs = vec![x.clone()];
        inputs.extend(traced.captures.iter().cloned());
        // Output k's cotangents: its columns of the identity of size m.
        let mut offset = 0;
        for t in &out_types {
            let eye = basis(t.dtype, m, &[m]);
            let block = eye.slice(&[0, offset], &[m, offset + t.numel()]);
            let mut shape = vec![m];
            shape.extend_from_slice(t.dims());
            inputs.push(block.reshape(shape));
            offset += t.numel();
        }
        let rows = call_func_at(location, &batched, &inputs);
        let rows = rows.into_iter().next().unwrap_or_else(|| {
            Tensor(Inner::Failed {
                error: std::sync::Arc::new(Error::Trace {
                    location,
                    message: "jacrev: the batched pullback returned nothing".into(),
                }),
                ty: x.ty().clone(),
            })
        });
        let mut offset = 0;
        let mut jac = Vec::with_capacity(n_out);
        for t in &out_types {
            let mut start = vec![0; rows.ndim()];
            let mut limit = rows.shape().to_vec();
            start[0] = offset;
            limit[0] = offset + t.numel();
            let mut shape = t.dims().to_vec();
            shape.extend_from_slice(x.shape());
            jac.push(rows.slice(&start, &limit).reshape(shape));
            offset += t.numel();
        }
        first_error(&jac)?;
        O::unflatten(&traced.out_def, &mut jac.into_iter())
    }
}

/// `jax.hessian` of a scalar function of one tensor: the matrix of second derivatives, shaped
/// `x.shape + x.shape`, as JAX defines it: the forward-mode Jacobian of the gradient (one
/// Hessian-vector product per element of `x`, as one batched program).
#[track_caller]
pub fn hessian<F: Fn(Tensor) -> Tensor>(f: F) -> impl Fn(&Tensor) -> Result<Tensor> {
    jacfwd(grad(f))
}

/// The Jacobian of a function of a tree of inputs (`jax.jacfwd(f)(params)` for a function
/// returning one tensor): the tree, each leaf's block shaped `output.shape + leaf.shape`.
/// The inputs are raveled into one vector ([`crate::ravel_pytree`]), the vector's Jacobian
/// taken by [`jacfwd`], and its columns split back per leaf.
#[track_caller]
pub fn jacfwd_tree<I: Tree, F: Fn(I) -> Tensor>(f: F) -> impl Fn(&I) -> Result<I> {
    let location = Location::caller();
    move |x: &I| {
        let (flat, unravel) = crate::ravel_pytree(x);
        let jac = jacfwd_at(location, |v: Tensor| apply_raveled(&f, &unravel, &v))(&flat)?;
        split_columns(&jac, x)
    }
}

/// [`jacfwd_tree`] by reverse mode ([`jacrev`]), for many inputs and few outputs.
#[track_caller]
pub fn jacrev_tree<I: Tree, F: Fn(I) -> Tensor>(f: F) -> impl Fn(&I) -> Result<I> {
    let location = Location::caller();
    move |x: &I| {
        let (flat, unravel) = crate::ravel_pytree(x);
        let jac = jacrev_at(location, |v: Tensor| apply_raveled(&f, &unravel, &v))(&flat)?;
        split_columns(&jac, x)
    }
}

/// The Hessian of a scalar function of a tree (`jax.hessian(f)(params)`): one tree per input
/// leaf `i` in flattening order, whose leaf `j` holds `∂²f / ∂x_i ∂x_j` shaped `x_i.shape +
/// x_j.shape` (JAX's nested tree, its outer level as a `Vec`).
#[track_caller]
pub fn hessian_tree<I: Tree, F: Fn(I) -> Tensor>(f: F) -> impl Fn(&I) -> Result<Vec<I>> {
    let location = Location::caller();
    move |x: &I| {
        let (flat, unravel) = crate::ravel_pytree(x);
        let h = jacfwd_at(location, grad(|v: Tensor| apply_raveled(&f, &unravel, &v)))(&flat)?;
        let leaves = x.leaves();
        let mut rows = Vec::with_capacity(leaves.len());
        let mut offset = 0;
        for leaf in &leaves {
            let n = leaf.numel();
            let block = h.slice(&[offset, 0], &[offset + n, flat.numel()]);
            let mut shape = leaf.shape().to_vec();
            shape.push(flat.numel());
            rows.push(split_columns(&block.reshape(shape), x)?);
            offset += n;
        }
        Ok(rows)
    }
}

/// `f` of the tree `unravel` makes of `v`; a vector that does not fit gives a failed tensor.
fn apply_raveled<I: Tree>(
    f: &impl Fn(I) -> Tensor,
    unravel: &impl Fn(&Tensor) -> Result<I>,
    v: &Tensor,
) -> Tensor {
    match unravel(v) {
        Ok(tree) => f(tree),
        Err(e) => Tensor(Inner::Failed {
            error: std::sync::Arc::new(e),
            ty: v.ty().clone(),
        }),
    }
}

/// The Jacobian `jac` (`[.., N]`, `N` the raveled inputs) as a tree of `x`'s structure, each
/// leaf's columns shaped `[..] + leaf.shape`, in the Jacobian's dtype.
fn split_columns<I: Tree>(jac: &Tensor, x: &I) -> Result<I> {
    let (leaves, def) = crate::tree_flatten(x);
    let lead = &jac.shape()[..jac.ndim().saturating_sub(1)];
    let mut offset = 0;
    let mut out = Vec::with_capacity(leaves.len());
    for leaf in &leaves {
        let n = leaf.numel();
        let mut start = vec![0; jac.ndim()];
        let mut limit = jac.shape().to_vec();
        start[jac.ndim() - 1] = offset;
        limit[jac.ndim() - 1] = offset + n;
        let mut shape = lead.to_vec();
        shape.extend_from_slice(leaf.shape());
        out.push(jac.slice(&start, &limit).reshape(shape));
        offset += n;
    }
    first_error(&out)?;
    crate::tree_unflatten(&def, out)
}

//! The autodiff API (`jax.grad` and friends). Each transform traces the user function to IR,
//! differentiates the IR with `ferrax_compiler::autodiff`, and replays the derivative program
//! on the actual arguments: eagerly for concrete tensors, or into the enclosing trace for
//! tracers, which is what makes `grad(grad(f))` and `jit(grad(f))` compose.
//!
//! A function may close over tracers of an enclosing trace (`grad(|p| loss(p, &x))` inside
//! `jit`): they are extra primal inputs of the traced program, with zero tangents.

use crate::tensor::{apply_at, record, Inner};
use crate::trace::trace_named;
use crate::{dump, Error, Result, Tensor, Tree, TreeDef};
use ferrax_compiler::autodiff;
use ferrax_ir::Func;
use std::panic::Location;
use std::sync::Arc;

/// Replays `func` on `args`: into the innermost trace among them, or eagerly.
#[track_caller]
fn call_func(func: &Func, args: &[Tensor]) -> Vec<Tensor> {
    call_func_at(Location::caller(), func, args)
}

/// [`call_func`] with the user's source location given.
pub(crate) fn call_func_at(
    location: &'static Location<'static>,
    func: &Func,
    args: &[Tensor],
) -> Vec<Tensor> {
    let ctx = args
        .iter()
        .filter_map(Tensor::trace_ctx)
        .max_by_key(|c| c.serial())
        .cloned();
    let mut values: Vec<Tensor> = args.to_vec();
    for ins in &func.body {
        let operands: Vec<&Tensor> = ins.args.iter().map(|a| &values[a.index()]).collect();
        let failed = operands.iter().find(|o| o.error().is_some());
        let out = match (failed, &ctx) {
            (Some(f), _) => (*f).clone(),
            (None, Some(ctx)) => record(ctx, ins.op.clone(), &operands, location, ins.ty.clone()),
            (None, None) => apply_at(location, ins.op.clone(), &operands),
        };
        values.push(out);
    }
    func.outputs
        .iter()
        .map(|o| values[o.index()].clone())
        .collect()
}

/// A tree shaped like `def` whose every leaf carries `error`.
fn failed_tree<T: Tree>(def: &TreeDef, leaves: &[Tensor], error: Error) -> T {
    let error = Arc::new(error);
    let mut failed = leaves.iter().map(|l| {
        Tensor(Inner::Failed {
            error: error.clone(),
            ty: l.ty().clone(),
        })
    });
    T::unflatten(def, &mut failed)
        .unwrap_or_else(|e| unreachable!("a Tree does not rebuild from its own flattening: {e}"))
}

struct Prepared {
    /// The argument leaves followed by the enclosing-trace tracers `f` closes over: the
    /// primal inputs of `func`.
    primals: Vec<Tensor>,
    /// How many of `primals` are argument leaves.
    num_leaves: usize,
    def: TreeDef,
    func: Func,
    out_def: TreeDef,
}

fn prepare<I: Tree, O: Tree>(f: impl FnOnce(I) -> O, args: &I) -> Result<Prepared> {
    let mut leaves = Vec::new();
    let def = args.flatten(&mut leaves);
    let traced = trace_named("f", f, args)?;
    let num_leaves = leaves.len();
    leaves.extend(traced.captures);
    Ok(Prepared {
        primals: leaves,
        num_leaves,
        def,
        func: traced.func,
        out_def: traced.out_def,
    })
}

fn autodiff_error(location: &'static Location<'static>, e: autodiff::AutodiffError) -> Error {
    Error::Trace {
        location,
        message: format!("differentiation failed: {e}"),
    }
}

/// The value of `f`'s first output (a float scalar), its other outputs, and the gradient of
/// the first with respect to the argument leaves.
fn value_and_grad_impl<I: Tree, A: Tree>(
    f: impl FnOnce(I) -> (Tensor, A),
    args: &I,
    location: &'static Location<'static>,
) -> Result<((Tensor, A), Vec<Tensor>, TreeDef)> {
    let p = prepare(f, args)?;
    let out_ty = p.func.output_types();
    match out_ty.first() {
        Some(t) if t.rank() == 0 && t.dtype.is_float() => {}
        _ => {
            let shown = out_ty
                .first()
                .map_or("nothing".to_string(), |t| t.to_string());
            // As in JAX: a complex loss has no gradient; its derivative (a holomorphic
            // function's f'(z)) is the pullback of 1, which `vjp` gives.
            let hint = match out_ty.first() {
                Some(t) if t.dtype.is_complex() => {
                    " (a complex result has no gradient; `vjp` with a cotangent of 1 gives a holomorphic function's derivative)"
                }
                _ => "",
            };
            return Err(Error::Trace {
                location,
                message: format!(
                    "grad needs a function returning a real float scalar, this one returns {shown}{hint}"
                ),
            });
        }
    }
    let vjp_func = autodiff::vjp(&p.func).map_err(|e| autodiff_error(location, e))?;
    dump::derivatives(&p.func, &vjp_func);
    let n_out = out_ty.len();
    let mut inputs = p.primals;
    inputs.push(Tensor::ones(out_ty[0].dtype, []));
    inputs.extend(
        out_ty[1..]
            .iter()
            .map(|t| Tensor::zeros(t.dtype, t.shape.clone())),
    );
    let mut outs = call_func(&vjp_func, &inputs);
    let mut grads = outs.split_off(n_out);
    grads.truncate(p.num_leaves);
    if let Some(e) = outs.iter().find_map(|t| t.error().cloned()) {
        return Err(e);
    }
    let value = <(Tensor, A)>::unflatten(&p.out_def, &mut outs.into_iter())?;
    Ok((value, grads, p.def))
}

/// Runs [`value_and_grad_impl`] and turns failures into failed tensors.
fn value_and_grad_tree<I: Tree, A: Tree>(
    f: &impl Fn(I) -> (Tensor, A),
    args: I,
    location: &'static Location<'static>,
) -> ((Tensor, A), I) {
    let mut leaves = Vec::new();
    let def = args.flatten(&mut leaves);
    let result = value_and_grad_impl(f, &args, location).and_then(|(value, grads, def)| {
        let g = I::unflatten(&def, &mut grads.into_iter())?;
        Ok((value, g))
    });
    match result {
        Ok(ok) => ok,
        Err(e) => {
            // Running `f` on failed arguments rebuilds the auxiliary outputs' structure; every
            // operation on a failed tensor passes the error on without computing.
            let failed_args: I = failed_tree(&def, &leaves, e.clone());
            let (value, aux) = f(failed_args);
            let value = Tensor(Inner::Failed {
                error: Arc::new(e.clone()),
                ty: value.ty().clone(),
            });
            ((value, aux), failed_tree(&def, &leaves, e))
        }
    }
}

/// `jax.value_and_grad`: the value of a scalar function and its gradient with respect to
/// every leaf of its argument tree (integer leaves get zeros).
#[track_caller]
pub fn value_and_grad<I: Tree, F: Fn(I) -> Tensor>(f: F) -> impl Fn(I) -> (Tensor, I) {
    let location = Location::caller();
    move |args: I| {
        let ((value, ()), g) = value_and_grad_tree(&|x| (f(x), ()), args, location);
        (value, g)
    }
}

/// `jax.value_and_grad(f, has_aux=True)`: `f` returns the scalar to differentiate and
/// auxiliary outputs, which are returned alongside without being differentiated.
#[track_caller]
pub fn value_and_grad_with_aux<I: Tree, A: Tree, F: Fn(I) -> (Tensor, A)>(
    f: F,
) -> impl Fn(I) -> ((Tensor, A), I) {
    let location = Location::caller();
    move |args: I| value_and_grad_tree(&f, args, location)
}

/// `jax.grad`: the gradient of a scalar function with respect to its whole argument tree.
#[track_caller]
pub fn grad<I: Tree, F: Fn(I) -> Tensor>(f: F) -> impl Fn(I) -> I {
    let vg = value_and_grad(f);
    move |args: I| vg(args).1
}

/// `jax.grad(f, has_aux=True)`: the gradient and `f`'s auxiliary outputs.
#[track_caller]
pub fn grad_with_aux<I: Tree, A: Tree, F: Fn(I) -> (Tensor, A)>(f: F) -> impl Fn(I) -> (I, A) {
    let vg = value_and_grad_with_aux(f);
    move |args: I| {
        let ((_, aux), g) = vg(args);
        (g, aux)
    }
}

/// `jax.jvp`: the outputs of `f` at `primals` and their derivative along `tangents`.
#[track_caller]
pub fn jvp<I: Tree, O: Tree>(f: impl FnOnce(I) -> O, primals: &I, tangents: &I) -> Result<(O, O)> {
    let location = Location::caller();
    let p = prepare(f, primals)?;
    let mut t_leaves = Vec::new();
    let t_def = tangents.flatten(&mut t_leaves);
    if t_def != p.def {
        return Err(Error::Tree {
            expected: format!("tangents shaped like the primals {}", p.def),
            found: t_def.to_string(),
        });
    }
    for (pl, tl) in p.primals.iter().zip(&t_leaves) {
        if pl.ty() != tl.ty() {
            return Err(Error::Trace {
                location,
                message: format!("jvp: tangent {} does not match primal {}", tl.ty(), pl.ty()),
            });
        }
    }
    let jvp_func = autodiff::jvp(&p.func).map_err(|e| autodiff_error(location, e))?;
    dump::write("forward", &p.func);
    dump::write("jvp", &jvp_func);
    let captured_tangents: Vec<Tensor> = p.primals[p.num_leaves..]
        .iter()
        .map(|c| Tensor::zeros(c.dtype(), c.shape().to_vec()))
        .collect();
    let mut inputs = p.primals;
    inputs.extend(t_leaves);
    inputs.extend(captured_tangents);
    let mut outs = call_func(&jvp_func, &inputs);
    let tangents_out = outs.split_off(p.func.outputs.len());
    let first_error = outs
        .iter()
        .chain(&tangents_out)
        .find_map(|t| t.error().cloned());
    if let Some(e) = first_error {
        return Err(e);
    }
    let primal = O::unflatten(&p.out_def, &mut outs.into_iter())?;
    let tangent = O::unflatten(&p.out_def, &mut tangents_out.into_iter())?;
    Ok((primal, tangent))
}

/// The pullback returned by [`vjp`]: maps output cotangents to input cotangents.
pub struct Pullback<I, O> {
    primals: Vec<Tensor>,
    num_leaves: usize,
    def: TreeDef,
    out_def: TreeDef,
    vjp_func: Func,
    location: &'static Location<'static>,
    _types: std::marker::PhantomData<fn(O) -> I>,
}

impl<I: Tree, O: Tree> Pullback<I, O> {
    pub fn call(&self, cotangents: &O) -> Result<I> {
        let mut ct = Vec::new();
        let def = cotangents.flatten(&mut ct);
        if def != self.out_def {
            return Err(Error::Tree {
                expected: format!("cotangents shaped like the outputs {}", self.out_def),
                found: def.to_string(),
            });
        }
        let n_out = ct.len();
        for (k, (c, want)) in ct
            .iter()
            .zip(self.vjp_func.params.iter().skip(self.primals.len()))
            .enumerate()
        {
            if c.ty() != want {
                return Err(Error::Trace {
                    location: self.location,
                    message: format!("vjp: cotangent {k} is {} but the output is {want}", c.ty()),
                });
            }
        }
        let mut inputs = self.primals.clone();
        inputs.extend(ct);
        let mut outs = call_func(&self.vjp_func, &inputs);
        let mut grads = outs.split_off(n_out);
        grads.truncate(self.num_leaves);
        if let Some(e) = grads.iter().find_map(|t| t.error().cloned()) {
            return Err(e);
        }
        I::unflatten(&self.def, &mut grads.into_iter())
    }
}

/// `jax.vjp`: the outputs of `f` at `primals` and a pullback for reverse-mode derivatives.
#[track_caller]
pub fn vjp<I: Tree, O: Tree>(f: impl FnOnce(I) -> O, primals: &I) -> Result<(O, Pullback<I, O>)> {
    let location = Location::caller();
    let p = prepare(f, primals)?;
    let vjp_func = autodiff::vjp(&p.func).map_err(|e| autodiff_error(location, e))?;
    dump::derivatives(&p.func, &vjp_func);
    let mut outs = call_func(&p.func, &p.primals);
    if let Some(e) = outs.iter().find_map(|t| t.error().cloned()) {
        return Err(e);
    }
    outs.truncate(p.func.outputs.len());
    let out = O::unflatten(&p.out_def, &mut outs.into_iter())?;
    Ok((
        out,
        Pullback {
            primals: p.primals,
            num_leaves: p.num_leaves,
            def: p.def,
            out_def: p.out_def,
            vjp_func,
            location,
            _types: std::marker::PhantomData,
        },
    ))
}

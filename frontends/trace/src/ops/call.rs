//! `custom_vjp` and `custom_jvp`, the call ops: a function computed by one traced program and
//! differentiated by more of the user's (`jax.custom_vjp`: reverse mode by `fwd` and `bwd`;
//! `jax.custom_jvp`: both modes by one forward-mode rule). The functions are traced here,
//! each on its own, and checked to close over no enclosing tracer before they become one
//! instruction.

use crate::tensor::{apply_at, Inner};
use crate::trace::{trace_named, Traced};
use crate::{Error, Result, Tensor, Tree};
use ferrax_ir::{CustomJvp, CustomVjp, DType, Op, TensorType};
use std::panic::Location;
use std::sync::Arc;

/// `jax.custom_vjp`: a function computed as `f` but differentiated in reverse mode with a
/// rule of the user's: `fwd` returns `f`'s value and residuals, and `bwd` maps the residuals
/// and the output's cotangent to one cotangent per input leaf (the input's structure). The
/// three are traced into one `custom_vjp` instruction, so the rule holds under `grad`, `jit`
/// and higher-order derivatives; forward mode differentiates `f` itself. The functions must
/// not close over tracers of an enclosing trace: pass such values as inputs.
#[track_caller]
pub fn custom_vjp<I: Tree, R: Tree>(
    f: impl Fn(I) -> Tensor,
    fwd: impl Fn(I) -> (Tensor, R),
    bwd: impl Fn(R, Tensor) -> I,
) -> impl Fn(I) -> Tensor {
    custom_vjp_named("custom", f, fwd, bwd)
}

/// [`custom_vjp`] whose three programs are named `name`, `name_fwd` and `name_bwd` in the IR.
#[track_caller]
pub fn custom_vjp_named<I: Tree, R: Tree>(
    name: &'static str,
    f: impl Fn(I) -> Tensor,
    fwd: impl Fn(I) -> (Tensor, R),
    bwd: impl Fn(R, Tensor) -> I,
) -> impl Fn(I) -> Tensor {
    let location = Location::caller();
    move |args: I| {
        custom_vjp_call(name, &f, &fwd, &bwd, &args, location).unwrap_or_else(|e| {
            Tensor(Inner::Failed {
                error: Arc::new(e),
                ty: TensorType::scalar(DType::F32),
            })
        })
    }
}

fn closed_function(
    role: &str,
    traced: Traced,
    location: &'static Location<'static>,
) -> Result<Traced> {
    match traced.captures.first() {
        None => Ok(traced),
        Some(c) => Err(Error::Trace {
            location,
            message: format!(
                "custom derivative: the {role} function closes over a traced {} value; pass it as an input instead",
                c.ty()
            ),
        }),
    }
}

fn custom_vjp_call<I: Tree, R: Tree>(
    name: &str,
    f: &impl Fn(I) -> Tensor,
    fwd: &impl Fn(I) -> (Tensor, R),
    bwd: &impl Fn(R, Tensor) -> I,
    args: &I,
    location: &'static Location<'static>,
) -> Result<Tensor> {
    let mut leaves = Vec::new();
    let def = args.flatten(&mut leaves);
    let primal = closed_function("primal", trace_named(name, f, args)?, location)?;
    let forward = closed_function(
        "fwd",
        trace_named(&format!("{name}_fwd"), fwd, args)?,
        location,
    )?;
    let out_types = forward.func.output_types();
    let res_def = forward.out_def.children(2)?[1].clone();
    let res_specs = out_types[1..]
        .iter()
        .map(|t| Tensor::spec(t.dtype, t.shape.clone()));
    let residuals = R::unflatten(&res_def, &mut res_specs.into_iter())?;
    let cotangent = Tensor::spec(out_types[0].dtype, out_types[0].shape.clone());
    let backward = closed_function(
        "bwd",
        trace_named(
            &format!("{name}_bwd"),
            |(r, g): (R, Tensor)| bwd(r, g),
            &(residuals, cotangent),
        )?,
        location,
    )?;
    if backward.out_def != def {
        return Err(Error::Tree {
            expected: format!("bwd returning cotangents shaped like the inputs {def}"),
            found: backward.out_def.to_string(),
        });
    }
    let op = Op::CustomVjp(Box::new(CustomVjp {
        primal: primal.func,
        fwd: forward.func,
        bwd: backward.func,
    }));
    let operands: Vec<&Tensor> = leaves.iter().collect();
    Ok(apply_at(location, op, &operands))
}

/// `jax.custom_jvp`: a function computed as `f` but differentiated with a forward-mode rule of
/// the user's: `jvp(primals, tangents)` returns `f`'s value and its tangent, which must be
/// linear in the tangents (each tangent has its input's type). Forward mode runs the rule;
/// reverse mode transposes it, as JAX does, so `grad`, `jvp`, `vmap`, `jit` and derivatives of
/// any order all use it. The functions must not close over tracers of an enclosing trace:
/// pass such values as inputs.
#[track_caller]
pub fn custom_jvp<I: Tree>(
    f: impl Fn(I) -> Tensor,
    jvp: impl Fn(I, I) -> (Tensor, Tensor),
) -> impl Fn(I) -> Tensor {
    custom_jvp_named("custom", f, jvp)
}

/// [`custom_jvp`] whose two programs are named `name` and `name_jvp` in the IR.
#[track_caller]
pub fn custom_jvp_named<I: Tree>(
    name: &'static str,
    f: impl Fn(I) -> Tensor,
    jvp: impl Fn(I, I) -> (Tensor, Tensor),
) -> impl Fn(I) -> Tensor {
    let location = Location::caller();
    move |args: I| {
        custom_jvp_call(name, &f, &jvp, &args, location).unwrap_or_else(|e| {
            Tensor(Inner::Failed {
                error: Arc::new(e),
                ty: TensorType::scalar(DType::F32),
            })
        })
    }
}

fn custom_jvp_call<I: Tree>(
    name: &str,
    f: &impl Fn(I) -> Tensor,
    jvp: &impl Fn(I, I) -> (Tensor, Tensor),
    args: &I,
    location: &'static Location<'static>,
) -> Result<Tensor> {
    let mut leaves = Vec::new();
    let def = args.flatten(&mut leaves);
    let primal = closed_function("primal", trace_named(name, f, args)?, location)?;
    let specs = || {
        let specs = leaves
            .iter()
            .map(|l| Tensor::spec(l.dtype(), l.shape().to_vec()));
        I::unflatten(&def, &mut specs.into_iter())
    };
    let rule = closed_function(
        "jvp",
        trace_named(
            &format!("{name}_jvp"),
            |(p, t): (I, I)| jvp(p, t),
            &(specs()?, specs()?),
        )?,
        location,
    )?;
    let result = primal.func.output_types();
    let returned = rule.func.output_types();
    if returned.len() != 2 || returned[..1] != result[..] || returned[1..] != result[..] {
        return Err(Error::Trace {
            location,
            message: format!(
                "custom_jvp: jvp must return the primal result and its tangent, both {}, it \
                 returns {}",
                result
                    .first()
                    .map_or_else(|| "()".to_string(), ToString::to_string),
                returned
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        });
    }
    let op = Op::CustomJvp(Box::new(CustomJvp {
        primal: primal.func,
        jvp: rule.func,
    }));
    let operands: Vec<&Tensor> = leaves.iter().collect();
    Ok(apply_at(location, op, &operands))
}

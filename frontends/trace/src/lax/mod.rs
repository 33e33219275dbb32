//! Structured control flow (`jax.lax`): [`cond`], [`switch`], [`while_loop`], [`fori_loop`]
//! and [`scan`] ([`map`] is a scan without a carry). Each traces the user's closures into the functions of one `while`, `cond` or
//! `scan` instruction, so a loop is compiled once whatever its trip count, and a branch on a
//! traced value is possible. Closures may read tracers of an enclosing trace: they become
//! operands (a loop carries them unchanged). Mistakes (branches returning different structures
//! or types, a body changing a carried type, a predicate that is not a `bool[]`) are errors at
//! the caller's line, surfacing from `trace`/`jit` as other tracing errors do. [`remat`]
//! (`jax.checkpoint`) traces a function into a call whose reverse mode recomputes it.
//! [`associative_scan`] is no loop: `O(log n)` rounds of whole-array calls of its `fn`.
//!
//! The special functions the IR has no op for ([`erf`], [`erfc`], [`erf_inv`]) are here too,
//! as composites of elementwise ops (`special.rs`), and [`sort_key_val`], whose stable
//! permutation and gathers live with the `Tensor` sorting methods.

mod associative;
mod region;
mod remat;
mod scan;
pub(crate) mod special;

pub use crate::ops::sort::sort_key_val;
pub use associative::associative_scan;
pub use ferrax_ir::RematPolicy;
pub use remat::{remat, remat_with};
pub use scan::{map, scan, scan_with, ScanOptions};
pub use special::{erf, erf_inv, erfc};

use crate::{Operand, Tensor, Tree};
use ferrax_ir::{Cond, DType, Op, TensorType, While};
use region::{emit_call, error_at, failed_tree, rebind, show, specs, trace_region, tree};
use std::panic::Location;

/// `jax.lax.cond`: `true_fn(operands)` where the `bool[]` scalar `pred` is true, else
/// `false_fn(operands)`. Both must return the same structure of the same types; only the
/// branch taken runs.
#[track_caller]
pub fn cond<A: Tree, R: Tree>(
    pred: &Tensor,
    true_fn: impl Fn(A) -> R,
    false_fn: impl Fn(A) -> R,
    operands: A,
) -> R {
    let location = Location::caller();
    let (false_fn, true_fn): (&dyn Fn(A) -> R, &dyn Fn(A) -> R) = (&false_fn, &true_fn);
    let scalar_bool = TensorType::scalar(DType::Bool);
    let index = match pred.ty() == &scalar_bool {
        true => Ok(pred.clone()),
        false => Err(format!(
            "cond: the predicate must be a bool[] scalar, it is {}",
            pred.ty()
        )),
    };
    call_branches(location, "cond", index, false_fn, &[true_fn], operands)
}

/// `jax.lax.switch`: `branches[index](operands)`, the integer scalar `index` clamped into
/// range first (as JAX does). Every branch must return the same structure of the same types;
/// an empty list of branches does not compile.
#[track_caller]
pub fn switch<A: Tree, R: Tree, const N: usize>(
    index: &Tensor,
    branches: [&dyn Fn(A) -> R; N],
    operands: A,
) -> R {
    const { assert!(N > 0, "switch needs at least one branch") };
    let location = Location::caller();
    let Some((first, rest)) = branches.split_first() else {
        unreachable!("N > 0 is checked when compiling")
    };
    let last = i32::try_from(N - 1).unwrap_or(i32::MAX);
    let index = match (index.dtype(), index.ndim()) {
        (DType::I32 | DType::I64 | DType::U8, 0) => Ok(index.astype(DType::I32).clip(0, last)),
        _ => Err(format!(
            "switch: the index must be an integer scalar, it is {}",
            index.ty()
        )),
    };
    call_branches(location, "switch", index, *first, rest, operands)
}

/// The name of branch `k` of `what` in errors.
fn branch_name(what: &str, k: usize) -> String {
    match (what, k) {
        ("cond", 0) => "false_fn".into(),
        ("cond", _) => "true_fn".into(),
        _ => format!("branch {k}"),
    }
}

/// The `cond` of `first` and `rest` (branches 0, 1, ...) on `operands`, picked by `index`
/// (or the error that makes the index unusable).
fn call_branches<A: Tree, R: Tree>(
    location: &'static Location<'static>,
    what: &str,
    index: Result<Tensor, String>,
    first: &dyn Fn(A) -> R,
    rest: &[&dyn Fn(A) -> R],
    operands: A,
) -> R {
    let mut leaves = Vec::new();
    let def = operands.flatten(&mut leaves);
    let inputs: A = specs(&def, &leaves);
    let regions: Vec<_> = std::iter::once(first)
        .chain(rest.iter().copied())
        .enumerate()
        .map(|(k, b)| trace_region(&format!("branch{k}"), b, &inputs))
        .collect();
    let out_def = regions[0].outputs.def.clone();
    let out_types = regions[0].outputs.types.clone();
    let (out_def, out_types) = (&out_def, &out_types);
    let fail = |message: String| failed_tree(out_def, out_types, error_at(location, message));
    // A mistake inside a branch first: it makes the branch's output types guesses.
    if let Some(Err(e)) = regions
        .iter()
        .map(|r| r.traced.as_ref())
        .find(Result::is_err)
    {
        return failed_tree(out_def, out_types, e.clone());
    }
    for (k, r) in regions.iter().enumerate().skip(1) {
        let (name, first_name) = (branch_name(what, k), branch_name(what, 0));
        if r.outputs.def != *out_def {
            return fail(format!(
                "{what}: {name} returns {} where {first_name} returns {out_def}",
                r.outputs.def
            ));
        }
        if let Some(j) = (0..out_types.len()).find(|&j| r.outputs.types.get(j) != out_types.get(j))
        {
            return fail(format!(
                "{what}: {name} returns {} for output leaf {j} where {first_name} returns {}",
                show(&r.outputs.types[j..=j]),
                show(&out_types[j..=j])
            ));
        }
    }
    let index = match index {
        Ok(index) => index,
        Err(message) => return fail(message),
    };
    let mut traced = Vec::with_capacity(regions.len());
    for r in regions {
        match r.traced {
            Ok(t) => traced.push(t),
            Err(e) => return failed_tree(out_def, out_types, e),
        }
    }
    // Every branch takes the operand leaves, then what the branches close over, each value
    // once however many branches read it.
    let mut params: Vec<TensorType> = leaves.iter().map(|l| l.ty().clone()).collect();
    let mut operands_all = vec![index];
    operands_all.extend(leaves.iter().cloned());
    let mut captured: Vec<(&Tensor, usize)> = Vec::new();
    let mut maps = Vec::new();
    for t in &traced {
        let mut map: Vec<usize> = (0..leaves.len()).collect();
        for c in &t.captures {
            let k = match captured.iter().find(|(d, _)| d.same_traced(c)) {
                Some(&(_, k)) => k,
                None => {
                    captured.push((c, params.len()));
                    params.push(c.ty().clone());
                    operands_all.push(c.clone());
                    params.len() - 1
                }
            };
            map.push(k);
        }
        maps.push(map);
    }
    let funcs: Result<Vec<_>, _> = traced
        .iter()
        .zip(&maps)
        .map(|(t, map)| rebind(&t.func, &params, map, &[]))
        .collect();
    let funcs = match funcs {
        Ok(f) => f,
        Err(e) => return fail(format!("{what}: {e}")),
    };
    let op = Op::Cond(Box::new(Cond {
        branches: funcs,
        result: 0,
    }));
    tree(out_def, emit_call(location, &op, &operands_all, out_types))
}

/// `jax.lax.while_loop`: `body_fn` applied to the carry while `cond_fn` of it (a `bool[]`
/// scalar) is true; the carry's final value. `body_fn` must return the carry's structure and
/// types. Reverse-mode differentiation through it is an error (use [`fori_loop`] with static
/// bounds, as in JAX); forward mode works.
#[track_caller]
pub fn while_loop<T: Tree>(cond_fn: impl Fn(T) -> Tensor, body_fn: impl Fn(T) -> T, init: T) -> T {
    while_loop_at(Location::caller(), cond_fn, body_fn, init)
}

fn while_loop_at<T: Tree>(
    location: &'static Location<'static>,
    cond_fn: impl Fn(T) -> Tensor,
    body_fn: impl Fn(T) -> T,
    init: T,
) -> T {
    let mut leaves = Vec::new();
    let def = init.flatten(&mut leaves);
    let types: Vec<TensorType> = leaves.iter().map(|l| l.ty().clone()).collect();
    let fail = |message: String| failed_tree(&def, &types, error_at(location, message));
    let cond = trace_region("cond", &cond_fn, &specs::<T>(&def, &leaves));
    let body = trace_region("body", &body_fn, &specs::<T>(&def, &leaves));
    // A mistake inside either function first: it makes that function's output types guesses.
    for r in [&cond, &body] {
        if let Err(e) = &r.traced {
            return failed_tree(&def, &types, e.clone());
        }
    }
    let scalar_bool = TensorType::scalar(DType::Bool);
    if cond.outputs.types != [scalar_bool] {
        return fail(format!(
            "while_loop: cond_fn must return a bool[] scalar, it returns {}",
            show(&cond.outputs.types)
        ));
    }
    if body.outputs.def != def {
        return fail(format!(
            "while_loop: body_fn must return the carry's structure {def}, it returns {}",
            body.outputs.def
        ));
    }
    if let Some(k) = (0..types.len()).find(|&k| body.outputs.types.get(k) != types.get(k)) {
        return fail(format!(
            "while_loop: body_fn changes carried leaf {k} from {} to {}",
            types[k],
            body.outputs
                .types
                .get(k)
                .map_or("nothing".into(), |t| t.to_string())
        ));
    }
    let (cond, body) = match (cond.traced, body.traced) {
        (Ok(c), Ok(b)) => (c, b),
        (Err(e), _) | (_, Err(e)) => return failed_tree(&def, &types, e),
    };
    // The carry, then what the condition and the body close over, carried unchanged.
    let n = leaves.len();
    let mut operands = leaves;
    operands.extend(cond.captures.iter().cloned());
    operands.extend(body.captures.iter().cloned());
    let params: Vec<TensorType> = operands.iter().map(|o| o.ty().clone()).collect();
    let (c1, c2) = (cond.captures.len(), body.captures.len());
    let cond_map: Vec<usize> = (0..n + c1).collect();
    let body_map: Vec<usize> = (0..n).chain(n + c1..n + c1 + c2).collect();
    let passed: Vec<usize> = (n..n + c1 + c2).collect();
    let funcs = rebind(&cond.func, &params, &cond_map, &[])
        .and_then(|c| Ok((c, rebind(&body.func, &params, &body_map, &passed)?)));
    let (cond_f, body_f) = match funcs {
        Ok(f) => f,
        Err(e) => return fail(format!("while_loop: {e}")),
    };
    let op = Op::While(Box::new(While {
        cond: cond_f,
        body: body_f,
        result: 0,
    }));
    tree(&def, emit_call(location, &op, &operands, &types))
}

/// `jax.lax.fori_loop`: `body_fn(i, carry)` for `i` from `lower` up to `upper` (exclusive),
/// integer scalars or Rust integers, as an `i32[]` counter; compiled once whatever the trip
/// count. With both bounds Rust numbers it is a [`scan`] of that many steps and
/// differentiates in both modes, as in JAX; with a traced bound it is a `while` loop, which
/// reverse mode refuses.
#[track_caller]
pub fn fori_loop<'a, 'b, T: Tree>(
    lower: impl Into<Operand<'a>>,
    upper: impl Into<Operand<'b>>,
    body_fn: impl Fn(Tensor, T) -> T,
    init: T,
) -> T {
    fori_loop_at(
        Location::caller(),
        (lower.into(), upper.into()),
        body_fn,
        init,
        None,
    )
}

/// [`fori_loop`] with `unroll` steps per iteration of the compiled loop, as JAX's `unroll`
/// (see [`ScanOptions::unroll`]; `usize::MAX` unrolls every step). As in JAX, only a loop
/// whose bounds are Rust numbers can be unrolled: with a traced bound it is an error.
#[track_caller]
pub fn fori_loop_unrolled<'a, 'b, T: Tree>(
    lower: impl Into<Operand<'a>>,
    upper: impl Into<Operand<'b>>,
    body_fn: impl Fn(Tensor, T) -> T,
    init: T,
    unroll: usize,
) -> T {
    let bounds = (lower.into(), upper.into());
    fori_loop_at(Location::caller(), bounds, body_fn, init, Some(unroll))
}

fn fori_loop_at<T: Tree>(
    location: &'static Location<'static>,
    (lower, upper): (Operand<'_>, Operand<'_>),
    body_fn: impl Fn(Tensor, T) -> T,
    init: T,
    unroll: Option<usize>,
) -> T {
    if let (Operand::Number(lo), Operand::Number(hi)) = (&lower, &upper) {
        let (lo, hi) = (*lo as i32, *hi as i32);
        let length = usize::try_from(i64::from(hi) - i64::from(lo)).unwrap_or(0);
        let options = ScanOptions {
            length: Some(length),
            unroll: unroll.unwrap_or(1),
            ..ScanOptions::default()
        };
        let step = |(i, carry): (Tensor, T), (): ()| {
            let next = body_fn(i.clone(), carry);
            ((i + 1, next), ())
        };
        let ((_, out), ()) = scan::scan_at(location, step, (Tensor::scalar(lo), init), (), options);
        return out;
    }
    let bound = |b: Operand<'_>| match b {
        Operand::Number(v) => Tensor::scalar(v as i32),
        Operand::Borrowed(t) => t.astype(DType::I32),
        Operand::Owned(t) => t.astype(DType::I32),
    };
    let (lo, hi) = (bound(lower), bound(upper));
    let refused = if unroll.is_some() {
        Some(
            "fori_loop: unroll needs bounds known when tracing (Rust numbers), one is traced"
                .to_string(),
        )
    } else {
        [&lo, &hi]
            .into_iter()
            .find(|b| b.ndim() != 0)
            .map(|b| format!("fori_loop: bounds must be scalars, one is {}", b.ty()))
    };
    if let Some(message) = refused {
        let mut leaves = Vec::new();
        let def = init.flatten(&mut leaves);
        let types: Vec<TensorType> = leaves.iter().map(|l| l.ty().clone()).collect();
        return failed_tree(&def, &types, error_at(location, message));
    }
    let (_, _, out) = while_loop_at(
        location,
        |(i, hi, _): (Tensor, Tensor, T)| i.less(&hi),
        |(i, hi, carry): (Tensor, Tensor, T)| {
            let next = body_fn(i.clone(), carry);
            (i + 1, hi, next)
        },
        (lo, hi, init),
    );
    out
}

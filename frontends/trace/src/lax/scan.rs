//! `lax::scan`: a closure over a carry and one slice of each scanned array, traced once into
//! the body of a `scan` instruction; tracers it closes over become the scan's constants.

use super::region::{emit_call, error_at, failed_tree, rebind, specs, trace_region, tree};
use crate::{Tensor, Tree, TreeDef};
use ferrax_ir::{Op, Scan, Shape, TensorType};
use std::panic::Location;

/// How [`scan_with`] scans: `length` steps (needed where `xs` has no leaves, else checked
/// against their leading dimension), in `reverse` order, `unroll` steps per iteration of the
/// compiled loop (JAX's `unroll`: 1 by default; `usize::MAX`, or any number of at least the
/// length, unrolls every step, JAX's `unroll=True`; 0 is an error). Unrolling changes no
/// result, only how much code runs per iteration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScanOptions {
    pub length: Option<usize>,
    pub reverse: bool,
    pub unroll: usize,
}

impl Default for ScanOptions {
    fn default() -> ScanOptions {
        ScanOptions {
            length: None,
            reverse: false,
            unroll: 1,
        }
    }
}

/// `jax.lax.scan`: `f(carry, x)` for each slice `x` of `xs` along its leading dimension, in
/// order, giving the final carry and `f`'s per-step outputs stacked along a new leading
/// dimension. Compiled once whatever the length; differentiable in both modes (reverse mode
/// stores each step's carry).
#[track_caller]
pub fn scan<C: Tree, X: Tree, Y: Tree>(f: impl Fn(C, X) -> (C, Y), init: C, xs: X) -> (C, Y) {
    scan_at(Location::caller(), f, init, xs, ScanOptions::default())
}

/// [`scan`] with a length (for `xs` without leaves) or in reverse (`jax.lax.scan`'s
/// `length` and `reverse`).
#[track_caller]
pub fn scan_with<C: Tree, X: Tree, Y: Tree>(
    f: impl Fn(C, X) -> (C, Y),
    init: C,
    xs: X,
    options: ScanOptions,
) -> (C, Y) {
    scan_at(Location::caller(), f, init, xs, options)
}

/// `ty` with a leading dimension of `length`.
fn stacked(ty: &TensorType, length: usize) -> TensorType {
    let mut dims = vec![length];
    dims.extend_from_slice(ty.dims());
    TensorType::new(ty.dtype, Shape::new(dims))
}

/// The number of steps: the leading dimension every scanned leaf shares, and `length` if
/// given; or why there is none.
fn steps(xs: &[Tensor], length: Option<usize>) -> Result<usize, String> {
    let mut found = length;
    for (k, x) in xs.iter().enumerate() {
        let Some(&n) = x.shape().first() else {
            return Err(format!(
                "scan: xs leaf {k} is a scalar {}: it has no leading dimension to scan",
                x.ty()
            ));
        };
        match found {
            Some(m) if m != n => {
                return Err(format!(
                    "scan: xs leaf {k} ({}) has a leading dimension of {n} where {m} steps \
                     are scanned",
                    x.ty()
                ))
            }
            _ => found = Some(n),
        }
    }
    found.ok_or_else(|| "scan: no xs to scan and no length given".to_string())
}

pub(super) fn scan_at<C: Tree, X: Tree, Y: Tree>(
    location: &'static Location<'static>,
    f: impl Fn(C, X) -> (C, Y),
    init: C,
    xs: X,
    options: ScanOptions,
) -> (C, Y) {
    let (mut c_leaves, mut x_leaves) = (Vec::new(), Vec::new());
    let c_def = init.flatten(&mut c_leaves);
    let x_def = xs.flatten(&mut x_leaves);
    let c_types: Vec<TensorType> = c_leaves.iter().map(|l| l.ty().clone()).collect();
    let length = steps(&x_leaves, options.length);
    let slices: Vec<Tensor> = x_leaves
        .iter()
        .map(|x| Tensor::spec(x.dtype(), x.shape().get(1..).unwrap_or_default().to_vec()))
        .collect();
    let inputs: (C, X) = (specs(&c_def, &c_leaves), specs(&x_def, &slices));
    let body = trace_region("body", |(c, x): (C, X)| f(c, x), &inputs);
    // The outputs' structure: the carry's, then the per-step outputs'.
    let children = body.outputs.def.children(2).map(<[TreeDef]>::to_vec);
    let y_def = match &children {
        Ok(children) => children[1].clone(),
        Err(_) => TreeDef::Node(Vec::new()),
    };
    let n = length.as_ref().map_or(0, |&n| n);
    let y_types: Vec<TensorType> = body
        .outputs
        .types
        .get(c_leaves.len()..)
        .unwrap_or_default()
        .iter()
        .map(|t| stacked(t, n))
        .collect();
    let fail = |e: crate::Error| {
        (
            failed_tree(&c_def, &c_types, e.clone()),
            failed_tree(&y_def, &y_types, e),
        )
    };
    let traced = match body.traced {
        Ok(t) => t,
        Err(e) => return fail(e),
    };
    let length = match length {
        Ok(n) => n,
        Err(message) => return fail(error_at(location, message)),
    };
    if options.unroll == 0 {
        let message = "scan: unroll must be at least 1 (usize::MAX unrolls every step)";
        return fail(error_at(location, message.to_string()));
    }
    let carry_out = children.as_ref().ok().map(|c| &c[0]);
    if carry_out != Some(&c_def) {
        let found = carry_out.map_or_else(|| body.outputs.def.to_string(), |d| d.to_string());
        let message =
            format!("scan: f must return the carry's structure {c_def} first, it returns {found}");
        return fail(error_at(location, message));
    }
    if let Some(k) = (0..c_types.len()).find(|&k| body.outputs.types.get(k) != c_types.get(k)) {
        let message = format!(
            "scan: f changes carried leaf {k} from {} to {}",
            c_types[k],
            body.outputs
                .types
                .get(k)
                .map_or("nothing".into(), |t| t.to_string())
        );
        return fail(error_at(location, message));
    }
    // The scan's operands: what `f` closes over (constants), the carry, the scanned arrays.
    let (nk, nc) = (traced.captures.len(), c_leaves.len());
    let mut operands = traced.captures.clone();
    operands.append(&mut c_leaves);
    operands.extend(x_leaves);
    let mut params: Vec<TensorType> = traced.captures.iter().map(|c| c.ty().clone()).collect();
    params.extend(c_types.iter().cloned());
    params.extend(slices.iter().map(|s| s.ty().clone()));
    let map: Vec<usize> = (nk..params.len()).chain(0..nk).collect();
    let body_f = match rebind(&traced.func, &params, &map, &[]) {
        Ok(f) => f,
        Err(e) => return fail(error_at(location, format!("scan: {e}"))),
    };
    let op = Op::Scan(Box::new(Scan {
        body: body_f,
        consts: nk,
        carry: nc,
        length,
        reverse: options.reverse,
        result: 0,
        // More than the length unrolls no further.
        unroll: options.unroll.min(length.max(1)),
    }));
    let mut types = c_types;
    types.extend(y_types);
    let mut results = emit_call(location, &op, &operands, &types);
    let ys = results.split_off(nc);
    (tree(&c_def, results), tree(&y_def, ys))
}

/// `jax.lax.map`: `f` applied to each slice of `xs` along its leading dimension, the results
/// stacked (a [`scan`] without a carry: one traced body, compiled once).
#[track_caller]
pub fn map<X: Tree, Y: Tree>(f: impl Fn(X) -> Y, xs: X) -> Y {
    scan_at(
        Location::caller(),
        |(), x| ((), f(x)),
        (),
        xs,
        ScanOptions::default(),
    )
    .1
}

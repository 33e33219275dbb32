//! `scan`. Forward mode scans the body's JVP program over constants, carried values and
//! slices with their tangents side by side, one call yielding the primal results and their
//! tangents. Reverse mode (JAX's rule, residuals per step): the
//! body's VJP program is split into a forward and a backward half (`partial.rs`); a forward
//! scan runs the forward half and stacks each step's residuals, then a scan the other way runs
//! the backward half from them and the result's cotangent, carrying the carried values'
//! cotangents and summing the constants'.

use super::{or_zero, Emitter, R};
use crate::autodiff::partial::{split, Param};
use crate::autodiff::{differentiable, jvp as jvp_program, vjp as vjp_program, AutodiffError};
use ferrax_ir::{BinaryOp, Func, FuncBuilder, Op, Scan, Shape, TensorType, ValueId};

/// The operand counts of a scan: constants, carried values, scanned arrays, stacked outputs.
struct Counts {
    k: usize,
    c: usize,
    x: usize,
    y: usize,
}

impl Counts {
    fn of(s: &Scan, operands: usize) -> R<Counts> {
        let fixed = s.consts + s.carry;
        let (x, y) = (
            operands.checked_sub(fixed),
            s.body.outputs.len().checked_sub(s.carry),
        );
        match (x, y) {
            (Some(x), Some(y)) => Ok(Counts {
                k: s.consts,
                c: s.carry,
                x,
                y,
            }),
            _ => Err(AutodiffError::Undefined(ValueId(0))),
        }
    }
}

/// Picks `values[i]` for each of `at`.
fn pick<T: Copy>(values: &[T], at: impl IntoIterator<Item = usize>) -> R<Vec<T>> {
    at.into_iter()
        .map(|i| {
            values
                .get(i)
                .copied()
                .ok_or(AutodiffError::Undefined(ValueId(0)))
        })
        .collect()
}

/// `ty` with a leading dimension of `length`.
fn stacked(ty: &TensorType, length: usize) -> TensorType {
    let mut dims = vec![length];
    dims.extend_from_slice(ty.dims());
    TensorType::new(ty.dtype, Shape::new(dims))
}

/// The JVP scan (yielding result 0) and its operands: the constants, carried values and
/// scanned arrays each followed by their tangents; its body is the body's JVP program.
pub(super) fn jvp_call(
    e: &mut Emitter,
    s: &Scan,
    x: &[ValueId],
    t: &[Option<ValueId>],
) -> R<(Op, Vec<ValueId>)> {
    let n = Counts::of(s, x.len())?;
    // The JVP program takes (k, c, x, tk, tc, tx) and returns (c', y, tc', ty); the new body
    // takes (k, tk, c, tc, x, tx) and returns (c', tc', y, ty).
    let program = jvp_program(&s.body)?;
    let p = &s.body.params;
    let (pk, pc, px) = (&p[..n.k], &p[n.k..n.k + n.c], &p[n.k + n.c..]);
    let mut b = FuncBuilder::new(program.name.clone());
    let params: Vec<ValueId> = [pk, pk, pc, pc, px, px]
        .concat()
        .into_iter()
        .map(|ty| b.param(ty))
        .collect();
    let (k0, c0, x0) = (0, 2 * n.k, 2 * (n.k + n.c));
    let args = pick(
        &params,
        (k0..k0 + n.k)
            .chain(c0..c0 + n.c)
            .chain(x0..x0 + n.x)
            .chain(k0 + n.k..c0)
            .chain(c0 + n.c..x0)
            .chain(x0 + n.x..x0 + 2 * n.x),
    )?;
    let out = b.inline(&program, &args)?;
    let (c, y) = (n.c, n.y);
    let outputs = pick(
        &out,
        (0..c)
            .chain(c + y..2 * c + y)
            .chain(c..c + y)
            .chain(2 * c + y..2 * (c + y)),
    )?;
    let op = Op::Scan(Box::new(Scan {
        body: b.finish(outputs),
        consts: 2 * n.k,
        carry: 2 * n.c,
        length: s.length,
        reverse: s.reverse,
        unroll: s.unroll,
        result: 0,
    }));
    let tangents: Vec<ValueId> = x
        .iter()
        .zip(t)
        .map(|(&xi, &ti)| or_zero(e, ti, xi))
        .collect::<R<_>>()?;
    let mut operands = Vec::with_capacity(2 * x.len());
    for (start, len) in [(0, n.k), (n.k, n.c), (n.k + n.c, n.x)] {
        operands.extend_from_slice(&x[start..start + len]);
        operands.extend_from_slice(&tangents[start..start + len]);
    }
    Ok((op, operands))
}

/// Which results of the JVP scan of [`jvp_call`] are the scan's result `k` and its tangent:
/// the carried values and their tangents come first, then the stacked outputs and theirs.
pub(super) fn jvp_results(s: &Scan, k: usize) -> (usize, usize) {
    let c = s.carry;
    let y = s.body.outputs.len().saturating_sub(c);
    match k < c {
        true => (k, c + k),
        false => (c + k, 2 * c + y + (k - c)),
    }
}

/// The backward scan's body: takes (k, ct_c, acc_k, r, x, ct_y) and returns (ct_c of the
/// step's input, acc_k + the step's ct_k, ct_x), from the backward half of the body's VJP
/// program, which takes (k, x, r, ct_c', ct_y) and returns (ct_k, ct_c, ct_x).
fn backward_body(s: &Scan, n: &Counts, half: &Func, residuals: &[TensorType]) -> R<Func> {
    let p = &s.body.params;
    let (pk, pc, px) = (&p[..n.k], &p[n.k..n.k + n.c], &p[n.k + n.c..]);
    let y_types = s.body.output_types().split_off(n.c);
    let mut b = FuncBuilder::new(format!("{}_backward", s.body.name));
    let params: Vec<ValueId> = [pk, pc, pk, residuals, px, &y_types]
        .concat()
        .into_iter()
        .map(|ty| b.param(ty))
        .collect();
    let nr = residuals.len();
    let (ct0, acc0, r0) = (n.k, n.k + n.c, 2 * n.k + n.c);
    let (x0, y0) = (r0 + nr, r0 + nr + n.x);
    let args = pick(
        &params,
        (0..n.k)
            .chain(x0..x0 + n.x)
            .chain(r0..r0 + nr)
            .chain(ct0..ct0 + n.c)
            .chain(y0..y0 + n.y),
    )?;
    let out = b.inline(half, &args)?;
    let mut outputs = pick(&out, n.k..n.k + n.c)?;
    for (i, ty) in pk.iter().enumerate() {
        let acc = pick(&params, [acc0 + i])?[0];
        outputs.push(match differentiable(ty.dtype) {
            true => b.push(Op::Binary(BinaryOp::Add), &[acc, pick(&out, [i])?[0]])?,
            false => acc,
        });
    }
    outputs.extend(pick(&out, n.k + n.c..n.k + n.c + n.x)?);
    Ok(b.finish(outputs))
}

/// The cotangents of the scan's operands, given its results' (`gs`, by result index, `None`
/// where zero): one forward and one backward scan for all its results.
pub(in crate::autodiff) fn vjp(
    e: &mut Emitter,
    s: &Scan,
    x: &[ValueId],
    gs: &[Option<ValueId>],
) -> R<Vec<Option<ValueId>>> {
    let n = Counts::of(s, x.len())?;
    let program = vjp_program(&s.body)?;
    let classes: Vec<Param> = [
        (Param::Constant, n.k),
        (Param::Stored, n.c),
        (Param::Available, n.x),
        (Param::Cotangent, n.c + n.y),
    ]
    .into_iter()
    .flat_map(|(class, count)| std::iter::repeat_n(class, count))
    .collect();
    let store = |_: &Op, constant_only: bool| !constant_only;
    let halves = split(&program, &classes, n.c + n.y, &store, true)?;
    let residual_types = halves.forward.output_types().split_off(n.c + n.y);
    let forward = Op::Scan(Box::new(Scan {
        body: halves.forward,
        result: 0,
        ..(*s).clone()
    }));
    let residuals: Vec<ValueId> = (0..residual_types.len())
        .map(|i| e.push(forward.with_result(n.c + n.y + i), x))
        .collect::<R<_>>()?;
    let backward = Op::Scan(Box::new(Scan {
        body: backward_body(s, &n, &halves.backward, &residual_types)?,
        consts: n.k,
        carry: n.c + n.k,
        length: s.length,
        reverse: !s.reverse,
        unroll: s.unroll,
        result: 0,
    }));
    let p = &s.body.params;
    let y_types = s.body.output_types().split_off(n.c);
    let mut operands = x[..n.k].to_vec();
    for (i, ty) in p[n.k..n.k + n.c].iter().enumerate() {
        operands.push(match gs.get(i).copied().flatten() {
            Some(g) => g,
            None => e.splat(0.0, ty)?,
        });
    }
    for ty in &p[..n.k] {
        operands.push(e.splat(0.0, ty)?);
    }
    operands.extend(&residuals);
    operands.extend_from_slice(&x[n.k + n.c..]);
    for (j, ty) in y_types.iter().enumerate() {
        operands.push(match gs.get(n.c + j).copied().flatten() {
            Some(g) => g,
            None => e.splat(0.0, &stacked(ty, s.length))?,
        });
    }
    // Results: the carried values' cotangents, the constants', then the scanned arrays'.
    let result_of = |i: usize| match i {
        i if i < n.k => n.c + i,
        i if i < n.k + n.c => i - n.k,
        i => i,
    };
    let mut cts = Vec::with_capacity(x.len());
    for (i, &operand) in x.iter().enumerate() {
        let ct = match differentiable(e.ty(operand)?.dtype) {
            true => Some(e.push(backward.with_result(result_of(i)), &operands)?),
            false => None,
        };
        cts.push(ct);
    }
    Ok(cts)
}

//! `triangular_solve`: `x = M⁻¹·b` (or `b·M⁻¹`) with `M = op(a)` read from one triangle of
//! `a`. Forward mode: `dx = M⁻¹·(db − dM·x)` (or `(db − x·dM)·M⁻¹`). Reverse mode: the
//! cotangent of `b` is `s = M⁻ᵀ·g` (or `g·M⁻ᵀ`), a solve with the transpose flipped; that of
//! `M` is `−s·xᵀ` (or `−xᵀ·s`), taken back through `op` to `a` and kept to the triangle the
//! solve reads (without the diagonal when it is a unit one). Transposes are plain ones, not
//! adjoints: complex cotangents follow JAX's convention (see `autodiff`).

use super::elementwise::conj;
use super::{Emitter, R};
use ferrax_ir::{CompareOp, DType, DotDims, Op, TriangularSolve, ValueId};

/// `p·q` over the last two dimensions (`transpose` each operand first where asked), the
/// leading ones batch dimensions.
fn product(e: &mut Emitter, p: ValueId, q: ValueId, transpose: (bool, bool)) -> R {
    let rank = e.ty(p)?.rank();
    let (row, col) = (rank - 2, rank - 1);
    let dims = DotDims {
        lhs_batch: (0..rank - 2).collect(),
        rhs_batch: (0..rank - 2).collect(),
        lhs_contract: vec![if transpose.0 { row } else { col }],
        rhs_contract: vec![if transpose.1 { col } else { row }],
    };
    e.push(Op::DotGeneral(dims), &[p, q])
}

/// `v` (shaped like `a`) with the entries the solve does not read set to zero.
fn read_part(e: &mut Emitter, s: &TriangularSolve, v: ValueId) -> R {
    let ty = e.ty(v)?;
    let rank = ty.rank();
    let index = |e: &mut Emitter, dim| {
        e.push(
            Op::Iota {
                dtype: DType::I64,
                shape: ty.shape.clone(),
                dim,
            },
            &[],
        )
    };
    let (row, col) = (index(e, rank - 2)?, index(e, rank - 1)?);
    let kept = match (s.lower, s.unit_diagonal) {
        (true, true) => CompareOp::Gt,
        (true, false) => CompareOp::Ge,
        (false, true) => CompareOp::Lt,
        (false, false) => CompareOp::Le,
    };
    let read = e.compare(kept, row, col)?;
    let zero = e.full_like(0.0, v)?;
    e.select(read, v, zero)
}

/// `v` transposed over its last two dimensions.
fn swap_last_two(e: &mut Emitter, v: ValueId) -> R {
    let rank = e.ty(v)?.rank();
    let mut perm: Vec<usize> = (0..rank).collect();
    perm.swap(rank - 2, rank - 1);
    e.transpose(v, perm)
}

/// `op(v)`: conjugated (complex values) and transposed as the solve takes `a`.
fn op_of(e: &mut Emitter, s: &TriangularSolve, v: ValueId) -> R {
    let v = match s.conjugate_a && e.ty(v)?.dtype.is_complex() {
        true => conj(e, v)?,
        false => v,
    };
    match s.transpose_a {
        true => swap_last_two(e, v),
        false => Ok(v),
    }
}

pub(super) fn jvp(
    e: &mut Emitter,
    s: &TriangularSolve,
    x: &[ValueId],
    t: &[Option<ValueId>],
    y: ValueId,
) -> R<Option<ValueId>> {
    let mut rhs = t[1];
    if let Some(ta) = t[0] {
        let read = read_part(e, s, ta)?;
        let dm = op_of(e, s, read)?;
        let change = match s.left_side {
            true => product(e, dm, y, (false, false))?,
            false => product(e, y, dm, (false, false))?,
        };
        rhs = Some(match rhs {
            Some(tb) => e.sub(tb, change)?,
            None => e.neg(change)?,
        });
    }
    match rhs {
        Some(r) => Ok(Some(e.push(Op::TriangularSolve(*s), &[x[0], r])?)),
        None => Ok(None),
    }
}

pub(super) fn vjp(
    e: &mut Emitter,
    s: &TriangularSolve,
    x: &[ValueId],
    y: ValueId,
    g: ValueId,
) -> R<Vec<Option<ValueId>>> {
    let flipped = TriangularSolve {
        transpose_a: !s.transpose_a,
        ..*s
    };
    let ct_b = e.push(Op::TriangularSolve(flipped), &[x[0], g])?;
    let ct_m = match s.left_side {
        true => product(e, ct_b, y, (false, true))?,
        false => product(e, y, ct_b, (true, false))?,
    };
    let ct_m = e.neg(ct_m)?;
    let ct_a = op_of(e, s, ct_m)?;
    Ok(vec![Some(read_part(e, s, ct_a)?), Some(ct_b)])
}

//! Linear algebra.
//!
//! `triangular_solve`: `x = M⁻¹·b` (or `b·M⁻¹`) with `M = op(a)` read from one triangle of
//! `a`. Forward mode: `dx = M⁻¹·(db − dM·x)` (or `(db − x·dM)·M⁻¹`). Reverse mode: the
//! cotangent of `b` is `s = M⁻ᵀ·g` (or `g·M⁻ᵀ`), a solve with the transpose flipped; that of
//! `M` is `−s·xᵀ` (or `−xᵀ·s`), taken back through `op` to `a` and kept to the triangle the
//! solve reads (without the diagonal when it is a unit one). Transposes are plain ones, not
//! adjoints: complex cotangents follow JAX's convention (see `autodiff`).
//!
//! `cholesky`: `l` with `l·lᴴ = H(a)`, where `H` completes `a`'s lower triangle to the
//! Hermitian matrix it stands for (the diagonal's real parts). Forward mode is Murray's rule
//! ("Differentiation of the Cholesky decomposition", 2016), as JAX's:
//! `dl = l·Φ(l⁻¹·H(da)·l⁻ᴴ)`, `Φ` keeping the lower triangle with the diagonal halved. Reverse
//! mode transposes it step by step: `s = l⁻ᵀ·Φ(lᵀ·g)·conj(l)⁻¹` (two triangular solves), then
//! `H`'s transpose (`s + conj(sᵀ)` below the diagonal, the diagonal's real parts).
//!
//! `lu`: `p·a = l·u`. Forward mode is JAX's rule: with `l` completed to a unit lower `m × m`
//! matrix `L` and `u` to an upper `n × n` one `U` (ones on the diagonal past `u`'s rows),
//! `w = L⁻¹·(p·da)·U⁻¹` and `d(lu) = L·tril(w, −1) + triu(w)·U`. Reverse mode transposes it:
//! `c = tril(Lᵀ·g, −1) + triu(g·Uᵀ)`, `da = pᵀ·L⁻ᵀ·c·U⁻ᵀ`. The pivots and the permutation are
//! integers, without derivatives.
//!
//! `qr` (JAX's rule, for `m ≥ n` and the reduced factors, or square matrices): with
//! `D = da·r⁻¹`, `C = qᴴ·D` and the skew-Hermitian `Ω = tril(C, −1) − tril(C, −1)ᴴ` (plus
//! `C`'s imaginary diagonal for complex numbers), `dq = q·(Ω − C) + D` and `dr = (C − Ω)·r`.
//! Reverse mode transposes each step; other shapes are unsupported, as in JAX.
//!
//! `eigh` (JAX's rule): with `M = vᴴ·H(da)·v`, `dw = re(diag(M))` and `dv = v·(F∘M)`,
//! `F_ij = 1/(w_j − w_i)` off the diagonal and 0 on it (infinite for repeated eigenvalues, as
//! in JAX). Reverse mode: `M`'s cotangent is `diag(g_w)` or `F∘(vᵀ·g_v)`, then
//! `conj(v)·ct_M·vᵀ` and `H`'s transpose.
//!
//! `svd` (JAX's rule, for the reduced vectors, or square matrices): with `dS = uᴴ·da·v`,
//! `Σ = diag(s)` and `F_ij = 1/(s_j² − s_i²)` off the diagonal, `ds = re(diag(dS))`,
//! `du = u·(F∘(dS·Σ + Σ·dSᴴ) + ½(dS − dSᴴ)∘I·Σ⁻¹)`, `dv = v·(F∘(Σ·dS + dSᴴ·Σ))`, plus the
//! parts outside the span for `m > n` (`(I − u·uᴴ)·da·v·Σ⁻¹` in `du`) and `n > m`
//! (`(I − v·vᴴ)·daᴴ·u·Σ⁻¹` in `dv`); `dvh = dvᴴ`. Reverse mode transposes each step:
//! `dS`'s cotangent is `diag(g_s)`, `(F∘(H − Hᴴ))·Σ + ½(Z − conj(Z))` (`H = uᵀ·g_u`,
//! `Z = diag(H)·Σ⁻¹`) or `Σ·(F∘(K − Kᴴ))` (`K = vᵀ·g_vhᴴ`), then `conj(u)·ct·vᵀ`.

use super::elementwise::conj;
use super::{AutodiffError, Emitter, R};
use ferrax_ir::{
    BinaryOp, CompareOp, DType, DotDims, EigPart, EighPart, LuPart, Op, Qr, QrPart, Shape, Svd,
    SvdPart, TensorType, TriangularSolve, UnaryOp, ValueId,
};

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

/// Where `row ⋄ col` holds for the positions (`row`, `col`) of the matrices of `v`.
fn positions(e: &mut Emitter, v: ValueId, relation: CompareOp) -> R {
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
    e.compare(relation, row, col)
}

/// `v` where `row ⋄ col`, zero elsewhere.
fn kept(e: &mut Emitter, v: ValueId, relation: CompareOp) -> R {
    let at = positions(e, v, relation)?;
    let zero = e.full_like(0.0, v)?;
    e.select(at, v, zero)
}

/// `v` (shaped like `a`) with the entries the solve does not read set to zero.
fn read_part(e: &mut Emitter, s: &TriangularSolve, v: ValueId) -> R {
    let relation = match (s.lower, s.unit_diagonal) {
        (true, true) => CompareOp::Gt,
        (true, false) => CompareOp::Ge,
        (false, true) => CompareOp::Lt,
        (false, false) => CompareOp::Le,
    };
    kept(e, v, relation)
}

/// The conjugate of complex values; real ones as they are.
fn conj_of(e: &mut Emitter, v: ValueId) -> R {
    match e.ty(v)?.dtype.is_complex() {
        true => conj(e, v),
        false => Ok(v),
    }
}

/// The real parts of complex values (as complex numbers); real ones as they are.
fn real_of(e: &mut Emitter, v: ValueId) -> R {
    if !e.ty(v)?.dtype.is_complex() {
        return Ok(v);
    }
    let re = e.unary(UnaryOp::Real, v)?;
    let zero = e.full_like(0.0, re)?;
    e.binary(BinaryOp::Complex, re, zero)
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
    let v = match s.conjugate_a {
        true => conj_of(e, v)?,
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

/// The solve with `l` (lower) of the given side and `op`.
fn solve_with(e: &mut Emitter, l: ValueId, b: ValueId, left: bool, op: (bool, bool)) -> R {
    let s = TriangularSolve {
        left_side: left,
        lower: true,
        transpose_a: op.0,
        conjugate_a: op.1,
        unit_diagonal: false,
    };
    e.push(Op::TriangularSolve(s), &[l, b])
}

/// `Φ(x)`: the lower triangle, the diagonal halved.
fn lower_half_diagonal(e: &mut Emitter, x: ValueId) -> R {
    let below = positions(e, x, CompareOp::Gt)?;
    let half = e.scale(x, 0.5)?;
    let diagonal = kept(e, half, CompareOp::Eq)?;
    e.select(below, x, diagonal)
}

/// `H(t)`: the Hermitian matrix `t`'s lower triangle stands for (the strict lower triangle,
/// its conjugate transpose, the diagonal's real parts).
fn hermitian(e: &mut Emitter, t: ValueId) -> R {
    let below = kept(e, t, CompareOp::Gt)?;
    let above = swap_last_two(e, below)?;
    let above = conj_of(e, above)?;
    let real = real_of(e, t)?;
    let diagonal = kept(e, real, CompareOp::Eq)?;
    let sides = e.add(below, above)?;
    e.add(sides, diagonal)
}

/// The transpose of `H`: `s + conj(sᵀ)` below the diagonal, the diagonal's real parts, zero
/// above.
fn hermitian_transpose(e: &mut Emitter, s: ValueId) -> R {
    let mirrored = swap_last_two(e, s)?;
    let mirrored = conj_of(e, mirrored)?;
    let both = e.add(s, mirrored)?;
    let below = kept(e, both, CompareOp::Gt)?;
    let real = real_of(e, s)?;
    let diagonal = kept(e, real, CompareOp::Eq)?;
    e.add(below, diagonal)
}

pub(super) fn cholesky_jvp(e: &mut Emitter, t: Option<ValueId>, l: ValueId) -> R<Option<ValueId>> {
    let Some(t) = t else { return Ok(None) };
    let hermitian = hermitian(e, t)?;
    let right = solve_with(e, l, hermitian, false, (true, true))?;
    let inner = solve_with(e, l, right, true, (false, false))?;
    let phi = lower_half_diagonal(e, inner)?;
    Ok(Some(product(e, l, phi, (false, false))?))
}

pub(super) fn cholesky_vjp(e: &mut Emitter, l: ValueId, g: ValueId) -> R {
    let p = product(e, l, g, (true, false))?;
    let x = lower_half_diagonal(e, p)?;
    let left = solve_with(e, l, x, true, (true, false))?;
    let s = solve_with(e, l, left, false, (false, true))?;
    hermitian_transpose(e, s)
}

/// What the LU rules read of the factorization of `a` (`[.., m, n]`): `L` (`m × m`), `U`
/// (`n × n`) and the permutation matrix `p` (`m × m`, `p·a` permutes `a`'s rows).
struct LuFactors {
    l: ValueId,
    u: ValueId,
    p: ValueId,
}

/// `v` (`[.., rows, cols]`) cropped or padded with zeros to `[.., rows', cols']`.
fn resized(e: &mut Emitter, v: ValueId, rows: usize, cols: usize) -> R {
    let ty = e.ty(v)?;
    let rank = ty.rank();
    let dims = ty.dims();
    let mut high = vec![0i64; rank];
    high[rank - 2] = rows as i64 - dims[rank - 2] as i64;
    high[rank - 1] = cols as i64 - dims[rank - 1] as i64;
    if high.iter().all(|&h| h == 0) {
        return Ok(v);
    }
    let zero = e.splat(0.0, &TensorType::new(ty.dtype, Shape::new(Vec::new())))?;
    e.push(
        Op::Pad {
            low: vec![0; rank],
            high,
            interior: vec![0; rank],
        },
        &[v, zero],
    )
}

/// Ones on the diagonal of `v`'s matrices, zeros elsewhere, in `v`'s type.
fn identity_like(e: &mut Emitter, v: ValueId) -> R {
    let one = e.full_like(1.0, v)?;
    kept(e, one, CompareOp::Eq)
}

fn lu_factors(e: &mut Emitter, a: ValueId, packed: ValueId) -> R<LuFactors> {
    let ty = e.ty(a)?;
    let rank = ty.rank();
    let (m, n) = (ty.dims()[rank - 2], ty.dims()[rank - 1]);
    let k = m.min(n);
    // L: the strict lower triangle of the first m columns (zeros past k), and ones.
    let l = resized(e, packed, m, m)?;
    let l = kept(e, l, CompareOp::Gt)?;
    let eye_m = identity_like(e, l)?;
    let l = e.add(l, eye_m)?;
    // U: the upper triangle of the first n rows, and ones on the diagonal past row k.
    let u = resized(e, packed, n, n)?;
    let mut u = kept(e, u, CompareOp::Le)?;
    if k < n {
        let u_ty = e.ty(u)?;
        let rows = e.push(
            Op::Iota {
                dtype: DType::I64,
                shape: u_ty.shape.clone(),
                dim: rank - 2,
            },
            &[],
        )?;
        let first = e.splat(k as f64, &TensorType::new(DType::I64, u_ty.shape.clone()))?;
        let past = e.compare(CompareOp::Ge, rows, first)?;
        let eye_n = identity_like(e, u)?;
        u = e.select(past, eye_n, u)?;
    }
    // p[i, j] = 1 where permutation[i] = j.
    let permutation = e.push(Op::Lu(LuPart::Permutation), &[a])?;
    let mut square = ty.dims()[..rank - 1].to_vec();
    square.push(m);
    let square = Shape::new(square);
    let rows = e.broadcast(permutation, &square, (0..rank - 1).collect())?;
    let cols = e.push(
        Op::Iota {
            dtype: DType::I32,
            shape: square.clone(),
            dim: rank - 1,
        },
        &[],
    )?;
    let at = e.compare(CompareOp::Eq, rows, cols)?;
    let square_ty = TensorType::new(ty.dtype, square);
    let one = e.splat(1.0, &square_ty)?;
    let zero = e.splat(0.0, &square_ty)?;
    let p = e.select(at, one, zero)?;
    Ok(LuFactors { l, u, p })
}

/// A solve with `L` (unit lower) or `U` (upper) on the given side, transposed or not.
fn solve_factor(e: &mut Emitter, f: ValueId, b: ValueId, lower: bool, transpose: bool) -> R {
    let s = TriangularSolve {
        left_side: lower,
        lower,
        transpose_a: transpose,
        conjugate_a: false,
        unit_diagonal: lower,
    };
    e.push(Op::TriangularSolve(s), &[f, b])
}

pub(super) fn lu_jvp(
    e: &mut Emitter,
    part: LuPart,
    a: ValueId,
    t: Option<ValueId>,
    y: ValueId,
) -> R<Option<ValueId>> {
    let (LuPart::Factors, Some(t)) = (part, t) else {
        return Ok(None);
    };
    let LuFactors { l, u, p } = lu_factors(e, a, y)?;
    let x = product(e, p, t, (false, false))?;
    let la = solve_factor(e, l, x, true, false)?;
    let w = solve_factor(e, u, la, false, false)?;
    let below = kept(e, w, CompareOp::Gt)?;
    let upper = kept(e, w, CompareOp::Le)?;
    let l_dot = product(e, l, below, (false, false))?;
    let u_dot = product(e, upper, u, (false, false))?;
    Ok(Some(e.add(l_dot, u_dot)?))
}

pub(super) fn lu_vjp(e: &mut Emitter, a: ValueId, y: ValueId, g: ValueId) -> R {
    let LuFactors { l, u, p } = lu_factors(e, a, y)?;
    let from_l = product(e, l, g, (true, false))?;
    let from_l = kept(e, from_l, CompareOp::Gt)?;
    let from_u = product(e, g, u, (false, true))?;
    let from_u = kept(e, from_u, CompareOp::Le)?;
    let c = e.add(from_l, from_u)?;
    let c = solve_factor(e, u, c, false, true)?;
    let c = solve_factor(e, l, c, true, true)?;
    product(e, p, c, (true, false))
}

/// The reduced factors `q`, `r` of `a`, where QR's rules are defined (`m ≥ n`, and `m = n`
/// for the full ones).
fn qr_factors(e: &mut Emitter, qr: &Qr, a: ValueId) -> R<(ValueId, ValueId)> {
    let ty = e.ty(a)?;
    let rank = ty.rank();
    let (m, n) = (ty.dims()[rank - 2], ty.dims()[rank - 1]);
    if m < n || (qr.full_matrices && m != n) {
        return Err(AutodiffError::Unsupported(format!(
            "the derivative of the QR factorization of {ty} (JAX's needs m >= n, and square \
             matrices for the full factors)"
        )));
    }
    let reduced = |part| {
        Op::Qr(Qr {
            part,
            full_matrices: false,
        })
    };
    Ok((
        e.push(reduced(QrPart::Q), &[a])?,
        e.push(reduced(QrPart::R), &[a])?,
    ))
}

/// `v·r⁻¹` (or `v·r⁻ᵀ`) for `r` upper triangular.
fn right_solve(e: &mut Emitter, r: ValueId, v: ValueId, transpose: bool) -> R {
    let s = TriangularSolve {
        transpose_a: transpose,
        ..TriangularSolve::default()
    };
    e.push(Op::TriangularSolve(s), &[r, v])
}

/// The diagonal of `v`'s imaginary parts (as complex numbers): `I∘(v − re(v))`.
fn imaginary_diagonal(e: &mut Emitter, v: ValueId) -> R {
    let real = real_of(e, v)?;
    let imaginary = e.sub(v, real)?;
    kept(e, imaginary, CompareOp::Eq)
}

pub(super) fn qr_jvp(
    e: &mut Emitter,
    qr: &Qr,
    a: ValueId,
    t: Option<ValueId>,
) -> R<Option<ValueId>> {
    let Some(t) = t else { return Ok(None) };
    let (q, r) = qr_factors(e, qr, a)?;
    let complex = e.ty(a)?.dtype.is_complex();
    let d = right_solve(e, r, t, false)?;
    let q_conj = conj_of(e, q)?;
    let c = product(e, q_conj, d, (true, false))?;
    let l = kept(e, c, CompareOp::Gt)?;
    let l_h = swap_last_two(e, l)?;
    let l_h = conj_of(e, l_h)?;
    let mut omega = e.sub(l, l_h)?;
    if complex {
        let diagonal = imaginary_diagonal(e, c)?;
        omega = e.add(omega, diagonal)?;
    }
    Ok(Some(match qr.part {
        QrPart::Q => {
            let inner = e.sub(omega, c)?;
            let rotated = product(e, q, inner, (false, false))?;
            e.add(rotated, d)?
        }
        QrPart::R => {
            let inner = e.sub(c, omega)?;
            product(e, inner, r, (false, false))?
        }
    }))
}

pub(super) fn qr_vjp(e: &mut Emitter, qr: &Qr, a: ValueId, g: ValueId) -> R {
    let (q, r) = qr_factors(e, qr, a)?;
    let complex = e.ty(a)?.dtype.is_complex();
    // The cotangents of Ω and C, and of D from dq = q·(Ω − C) + D or dr = (C − Ω)·r.
    let (ct_omega, ct_direct) = match qr.part {
        QrPart::Q => {
            let ct_inner = product(e, q, g, (true, false))?;
            (ct_inner, Some(g))
        }
        QrPart::R => {
            let ct_inner = product(e, g, r, (false, true))?;
            (e.neg(ct_inner)?, None)
        }
    };
    let mut ct_c = e.neg(ct_omega)?;
    let mirrored = swap_last_two(e, ct_omega)?;
    let mirrored = conj_of(e, mirrored)?;
    let ct_l = e.sub(ct_omega, mirrored)?;
    let below = kept(e, ct_l, CompareOp::Gt)?;
    ct_c = e.add(ct_c, below)?;
    if complex {
        let diagonal = imaginary_diagonal(e, ct_omega)?;
        ct_c = e.add(ct_c, diagonal)?;
    }
    let q_conj = conj_of(e, q)?;
    let mut ct_d = product(e, q_conj, ct_c, (false, false))?;
    if let Some(direct) = ct_direct {
        ct_d = e.add(ct_d, direct)?;
    }
    right_solve(e, r, ct_d, true)
}

/// `w` and `v` of `a`, and `a`'s type.
fn eigen_factors(e: &mut Emitter, a: ValueId) -> R<(ValueId, ValueId, TensorType)> {
    let ty = e.ty(a)?;
    let w = e.push(Op::Eigh(EighPart::Values), &[a])?;
    let v = e.push(Op::Eigh(EighPart::Vectors), &[a])?;
    Ok((w, v, ty))
}

/// `F` (`F_ij = 1/(w_j − w_i)` off the diagonal, 0 on it) in `ty`'s dtype and shape.
fn eigen_gaps(e: &mut Emitter, w: ValueId, ty: &TensorType) -> R {
    let rank = ty.rank();
    let real = e.ty(w)?.dtype;
    let square = TensorType::new(real, ty.shape.clone());
    let batch: Vec<usize> = (0..rank - 2).collect();
    let along = |e: &mut Emitter, dim: usize| {
        let mut dims = batch.clone();
        dims.push(dim);
        e.broadcast(w, &square.shape, dims)
    };
    let (by_column, by_row) = (along(e, rank - 1)?, along(e, rank - 2)?);
    let gaps = e.sub(by_column, by_row)?;
    let one = e.splat(1.0, &square)?;
    let inverse = e.div(one, gaps)?;
    let zero = e.splat(0.0, &square)?;
    let diagonal = positions(e, inverse, CompareOp::Eq)?;
    let f = e.select(diagonal, zero, inverse)?;
    e.convert(f, ty.dtype)
}

/// `vᴴ·x·v`.
fn in_basis(e: &mut Emitter, v: ValueId, x: ValueId) -> R {
    let v_conj = conj_of(e, v)?;
    let left = product(e, v_conj, x, (true, false))?;
    product(e, left, v, (false, false))
}

pub(super) fn eigh_jvp(
    e: &mut Emitter,
    part: EighPart,
    a: ValueId,
    t: Option<ValueId>,
) -> R<Option<ValueId>> {
    let Some(t) = t else { return Ok(None) };
    let (w, v, ty) = eigen_factors(e, a)?;
    let h = hermitian(e, t)?;
    let m = in_basis(e, v, h)?;
    Ok(Some(match part {
        EighPart::Values => {
            let diagonal = kept(e, m, CompareOp::Eq)?;
            let real = match ty.dtype.is_complex() {
                true => e.unary(UnaryOp::Real, diagonal)?,
                false => diagonal,
            };
            e.reduce(ferrax_ir::ReduceOp::Sum, real, vec![ty.rank() - 1])?
        }
        EighPart::Vectors => {
            let f = eigen_gaps(e, w, &ty)?;
            let scaled = e.mul(f, m)?;
            product(e, v, scaled, (false, false))?
        }
    }))
}

pub(super) fn eigh_vjp(e: &mut Emitter, part: EighPart, a: ValueId, g: ValueId) -> R {
    let (w, v, ty) = eigen_factors(e, a)?;
    let rank = ty.rank();
    let ct_m = match part {
        EighPart::Values => {
            let real = TensorType::new(e.ty(g)?.dtype, ty.shape.clone());
            let mut dims: Vec<usize> = (0..rank - 2).collect();
            dims.push(rank - 1);
            let spread = e.broadcast(g, &real.shape, dims)?;
            let diagonal = kept(e, spread, CompareOp::Eq)?;
            e.convert(diagonal, ty.dtype)?
        }
        EighPart::Vectors => {
            let f = eigen_gaps(e, w, &ty)?;
            let back = product(e, v, g, (true, false))?;
            e.mul(f, back)?
        }
    };
    let v_conj = conj_of(e, v)?;
    let left = product(e, v_conj, ct_m, (false, false))?;
    let s = product(e, left, v, (false, true))?;
    hermitian_transpose(e, s)
}

/// The error for differentiating `geqrf` or `householder_product`, which JAX gives no
/// derivative either (`qr`'s factors have one).
pub(super) fn no_derivative(op: &Op) -> AutodiffError {
    AutodiffError::Unsupported(format!(
        "the derivative of `{}` (JAX defines none; differentiate `qr` instead)",
        op.name()
    ))
}

/// What the eigenvalues' rules read of `eig(a)`: the left and right eigenvectors and
/// `d_i = (vlᴴ·vr)_ii`; the eigenvectors have no derivative (JAX defines none).
fn eig_factors(e: &mut Emitter, part: EigPart, a: ValueId) -> R<(ValueId, ValueId, ValueId)> {
    if part != EigPart::Values {
        return Err(AutodiffError::Unsupported(format!(
            "the derivative of `{}`: JAX defines the eigenvalues' only",
            part.name()
        )));
    }
    let left = e.push(Op::Eig(EigPart::Left), &[a])?;
    let right = e.push(Op::Eig(EigPart::Right), &[a])?;
    let left = conj(e, left)?;
    let both = e.mul(left, right)?;
    let rank = e.ty(a)?.rank();
    let d = e.reduce(ferrax_ir::ReduceOp::Sum, both, vec![rank - 2])?;
    Ok((left, right, d))
}

/// `dw_i = (vlᴴ·da·vr)_ii / (vlᴴ·vr)_ii` (JAX's `eig_jvp_rule`).
pub(super) fn eig_jvp(
    e: &mut Emitter,
    part: EigPart,
    a: ValueId,
    t: Option<ValueId>,
) -> R<Option<ValueId>> {
    let Some(t) = t else { return Ok(None) };
    let (left_conj, right, d) = eig_factors(e, part, a)?;
    let complex = e.ty(right)?.dtype;
    let t = e.convert(t, complex)?;
    let inner = product(e, left_conj, t, (true, false))?;
    let m = product(e, inner, right, (false, false))?;
    let diagonal = kept(e, m, CompareOp::Eq)?;
    let rank = e.ty(a)?.rank();
    let sum = e.reduce(ferrax_ir::ReduceOp::Sum, diagonal, vec![rank - 1])?;
    Ok(Some(e.div(sum, d)?))
}

/// The transpose of [`eig_jvp`]: `conj(vl)·diag(g / d)·vrᵀ`, its real part for real `a`.
pub(super) fn eig_vjp(e: &mut Emitter, part: EigPart, a: ValueId, g: ValueId) -> R {
    let (left_conj, right, d) = eig_factors(e, part, a)?;
    let ty = e.ty(a)?;
    let rank = ty.rank();
    let scaled = e.div(g, d)?;
    let square = e.ty(right)?.shape;
    let mut dims: Vec<usize> = (0..rank - 2).collect();
    dims.push(rank - 1);
    let columns = e.broadcast(scaled, &square, dims)?;
    let weighted = e.mul(left_conj, columns)?;
    let ct = product(e, weighted, right, (false, true))?;
    match ty.dtype.is_complex() {
        true => Ok(ct),
        false => e.unary(UnaryOp::Real, ct),
    }
}

/// What the SVD rules read of the reduced decomposition of `a` (`[.., m, n]`): `s` (`[.., k]`,
/// real), `u` (`m × k`), `v = vhᴴ` (`n × k`), `F` (`F_ij = 1/(s_j² − s_i²)` off the diagonal, 0
/// on it) in `a`'s dtype, and the sizes.
struct SvdFactors {
    s: ValueId,
    u: ValueId,
    v: ValueId,
    f: ValueId,
    dtype: DType,
    m: usize,
    n: usize,
}

fn svd_factors(e: &mut Emitter, svd: &Svd, a: ValueId) -> R<SvdFactors> {
    let ty = e.ty(a)?;
    let rank = ty.rank();
    let (m, n) = (ty.dims()[rank - 2], ty.dims()[rank - 1]);
    if svd.full_matrices && m != n {
        return Err(AutodiffError::Unsupported(format!(
            "the derivative of the full singular vectors of {ty} (JAX's needs the reduced ones, \
             or square matrices)"
        )));
    }
    let reduced = |part| {
        Op::Svd(Svd {
            part,
            full_matrices: false,
        })
    };
    let s = e.push(reduced(SvdPart::Values), &[a])?;
    let u = e.push(reduced(SvdPart::U), &[a])?;
    let vh = e.push(reduced(SvdPart::Vh), &[a])?;
    let v = swap_last_two(e, vh)?;
    let v = conj_of(e, v)?;
    let k = m.min(n);
    let mut square = ty.dims()[..rank - 2].to_vec();
    square.extend([k, k]);
    let squared = e.mul(s, s)?;
    let f = eigen_gaps(e, squared, &TensorType::new(ty.dtype, Shape::new(square)))?;
    Ok(SvdFactors {
        s,
        u,
        v,
        f,
        dtype: ty.dtype,
        m,
        n,
    })
}

/// `x` (`[.., k]`) spread over `[.., rows, cols]` in `dtype`: along the columns (entry `(i, j)`
/// is `x_j`, `cols = k`) or along the rows (`x_i`, `rows = k`).
fn spread(
    e: &mut Emitter,
    x: ValueId,
    rows: usize,
    cols: usize,
    by_column: bool,
    dtype: DType,
) -> R {
    let ty = e.ty(x)?;
    let batch = ty.rank() - 1;
    let mut shape = ty.dims()[..batch].to_vec();
    shape.extend([rows, cols]);
    let mut dims: Vec<usize> = (0..batch).collect();
    dims.push(if by_column { batch + 1 } else { batch });
    let spread = e.broadcast(x, &Shape::new(shape), dims)?;
    e.convert(spread, dtype)
}

/// `1/s`, and 0 where `s` is 0.
fn safe_inverse(e: &mut Emitter, s: ValueId) -> R {
    let zero = e.full_like(0.0, s)?;
    let one = e.full_like(1.0, s)?;
    let is_zero = e.compare(CompareOp::Eq, s, zero)?;
    let safe = e.select(is_zero, one, s)?;
    let inverse = e.div(one, safe)?;
    e.select(is_zero, zero, inverse)
}

/// `xᴴ` over the last two dimensions.
fn adjoint(e: &mut Emitter, x: ValueId) -> R {
    let t = swap_last_two(e, x)?;
    conj_of(e, t)
}

pub(super) fn svd_jvp(
    e: &mut Emitter,
    svd: &Svd,
    a: ValueId,
    t: Option<ValueId>,
) -> R<Option<ValueId>> {
    let Some(t) = t else { return Ok(None) };
    let SvdFactors {
        s,
        u,
        v,
        f,
        dtype,
        m,
        n,
    } = svd_factors(e, svd, a)?;
    let k = m.min(n);
    let u_conj = conj_of(e, u)?;
    let left = product(e, u_conj, t, (true, false))?;
    let ds = product(e, left, v, (false, false))?;
    Ok(Some(match svd.part {
        SvdPart::Values => {
            let diagonal = kept(e, ds, CompareOp::Eq)?;
            let real = match dtype.is_complex() {
                true => e.unary(UnaryOp::Real, diagonal)?,
                false => diagonal,
            };
            let rank = e.ty(real)?.rank();
            e.reduce(ferrax_ir::ReduceOp::Sum, real, vec![rank - 1])?
        }
        SvdPart::U => {
            let columns = spread(e, s, k, k, true, dtype)?;
            let dss = e.mul(ds, columns)?;
            let dss_h = adjoint(e, dss)?;
            let both = e.add(dss, dss_h)?;
            let mut x = e.mul(f, both)?;
            if dtype.is_complex() {
                let ds_h = adjoint(e, ds)?;
                let skew = e.sub(ds, ds_h)?;
                let half = e.scale(skew, 0.5)?;
                let inverse = safe_inverse(e, s)?;
                let inverse = spread(e, inverse, k, k, true, dtype)?;
                let scaled = e.mul(half, inverse)?;
                let diagonal = kept(e, scaled, CompareOp::Eq)?;
                x = e.add(x, diagonal)?;
            }
            let mut du = product(e, u, x, (false, false))?;
            if m > n {
                let dav = product(e, t, v, (false, false))?;
                let inner = product(e, u_conj, dav, (true, false))?;
                let projected = product(e, u, inner, (false, false))?;
                let rest = e.sub(dav, projected)?;
                let columns = spread(e, s, m, k, true, dtype)?;
                let rest = e.div(rest, columns)?;
                du = e.add(du, rest)?;
            }
            du
        }
        SvdPart::Vh => {
            let rows = spread(e, s, k, k, false, dtype)?;
            let sds = e.mul(rows, ds)?;
            let sds_h = adjoint(e, sds)?;
            let both = e.add(sds, sds_h)?;
            let y = e.mul(f, both)?;
            let mut dv = product(e, v, y, (false, false))?;
            if n > m {
                let t_conj = conj_of(e, t)?;
                let dahu = product(e, t_conj, u, (true, false))?;
                let v_conj = conj_of(e, v)?;
                let inner = product(e, v_conj, dahu, (true, false))?;
                let projected = product(e, v, inner, (false, false))?;
                let rest = e.sub(dahu, projected)?;
                let columns = spread(e, s, n, k, true, dtype)?;
                let rest = e.div(rest, columns)?;
                dv = e.add(dv, rest)?;
            }
            adjoint(e, dv)?
        }
    }))
}

pub(super) fn svd_vjp(e: &mut Emitter, svd: &Svd, a: ValueId, g: ValueId) -> R {
    let SvdFactors {
        s,
        u,
        v,
        f,
        dtype,
        m,
        n,
    } = svd_factors(e, svd, a)?;
    let k = m.min(n);
    let u_conj = conj_of(e, u)?;
    // The cotangent of `uᴴ·da·v`, then of `da`.
    let ct_ds = match svd.part {
        SvdPart::Values => {
            let spread = spread(e, g, k, k, true, dtype)?;
            kept(e, spread, CompareOp::Eq)?
        }
        SvdPart::U => {
            let h = product(e, u, g, (true, false))?;
            let h_h = adjoint(e, h)?;
            let skew = e.sub(h, h_h)?;
            let gaps = e.mul(f, skew)?;
            let columns = spread(e, s, k, k, true, dtype)?;
            let mut c = e.mul(gaps, columns)?;
            if dtype.is_complex() {
                let inverse = safe_inverse(e, s)?;
                let inverse = spread(e, inverse, k, k, true, dtype)?;
                let scaled = e.mul(h, inverse)?;
                let z = kept(e, scaled, CompareOp::Eq)?;
                let z_conj = conj_of(e, z)?;
                let imaginary = e.sub(z, z_conj)?;
                let half = e.scale(imaginary, 0.5)?;
                c = e.add(c, half)?;
            }
            c
        }
        SvdPart::Vh => {
            let g_v = adjoint(e, g)?;
            let kk = product(e, v, g_v, (true, false))?;
            let kk_h = adjoint(e, kk)?;
            let skew = e.sub(kk, kk_h)?;
            let gaps = e.mul(f, skew)?;
            let rows = spread(e, s, k, k, false, dtype)?;
            e.mul(rows, gaps)?
        }
    };
    let left = product(e, u_conj, ct_ds, (false, false))?;
    let mut da = product(e, left, v, (false, true))?;
    if svd.part == SvdPart::U && m > n {
        let columns = spread(e, s, m, k, true, dtype)?;
        let scaled = e.div(g, columns)?;
        let inner = product(e, u, scaled, (true, false))?;
        let projected = product(e, u_conj, inner, (false, false))?;
        let rest = e.sub(scaled, projected)?;
        let back = product(e, rest, v, (false, true))?;
        da = e.add(da, back)?;
    }
    if svd.part == SvdPart::Vh && n > m {
        let rows = spread(e, s, k, n, false, dtype)?;
        let scaled = e.div(g, rows)?;
        let v_conj = conj_of(e, v)?;
        let inner = product(e, scaled, v_conj, (false, false))?;
        let projected = product(e, inner, v, (false, true))?;
        let rest = e.sub(scaled, projected)?;
        let back = product(e, u_conj, rest, (false, false))?;
        da = e.add(da, back)?;
    }
    Ok(da)
}

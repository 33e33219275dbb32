//! The custom calls `jax.export` writes for `lax.linalg`'s factorizations and solves on the
//! CPU, where XLA calls LAPACK (and for LU on GPUs), as the IR's ops:
//!
//! - `lu` (so `jnp.linalg.solve`, `inv`, `det`): `lapack_{s,d,c,z}getrf_ffi` (or the older
//!   `lapack_?getrf`, whose last operand is the matrix), `cusolver_getrf_ffi`,
//!   `hipsolver_getrf_ffi`. Each gives the packed factors, LAPACK's pivots counted from 1 and
//!   `info` (0, or the 1-based position of the first zero on `u`'s diagonal): the IR's `lu` and
//!   `lu_pivots` plus one, and `info` computed from the factors. The permutation JAX derives
//!   from the pivots is a `while` loop on the CPU (imported as any loop); the GPUs'
//!   `cu_lu_pivots_to_permutation` call is refused as unsupported.
//! - `cholesky`: `lapack_?potrf_ffi` gives the factor of the triangle `uplo` names (`L` or
//!   `U`) with the other triangle of the input kept, as LAPACK leaves it, and `info`: 0, or 1
//!   for a matrix that is not positive definite (LAPACK gives the order of the first minor that
//!   is not; JAX only compares it with 0). Where it is not, the factor is NaN (the IR's).
//! - `triangular_solve`: `lapack_?trsm_ffi(a, b[, alpha])` solves `op(a)·x = alpha·b` (`side`
//!   `L`) or `x·op(a) = alpha·b`, `op` by `trans_x` (`N`, `T`, or `C` for the adjoint), `a`'s
//!   triangle by `uplo` and a unit diagonal by `diag` `U`.
//!
//! - `svd`: `lapack_?gesdd_ffi(a)` gives `a` overwritten (LAPACK leaves it undefined; here
//!   it is `a`), the singular values, `u`, `vt` and `info`, then workspaces. `mode` `A` asks
//!   for the full vectors, `S` for the reduced ones, `N` for none (`u` and `vt` are then zeros
//!   of their declared types, as LAPACK leaves them unreferenced). `info` is 0, or −4 (LAPACK's
//!   answer to a NaN) for a matrix with a value that is not finite, whose results are NaN.
//!
//! `lapack_qr_eig.rs` imports the calls for QR in LAPACK's compact form and the
//! eigendecompositions.
//!
//! The `mhlo.backend_config` flags are LAPACK's characters as their codes (`uplo = 76 : ui8`
//! is `L`).

use super::{lapack_qr_eig, Importer};
use crate::lex::Tok;
use crate::parse::Operation;
use crate::Error;
use ferrax_ir::{
    BinaryOp, CompareOp, DType, LuPart, Op, ReduceOp, Scalar, Shape, Svd, SvdPart, TensorType,
    TriangularSolve, ValueId,
};

/// Whether `target` is a `getrf` call this module imports.
pub(super) fn is_getrf(target: &str) -> bool {
    matches!(
        target,
        "lapack_sgetrf"
            | "lapack_dgetrf"
            | "lapack_cgetrf"
            | "lapack_zgetrf"
            | "lapack_sgetrf_ffi"
            | "lapack_dgetrf_ffi"
            | "lapack_cgetrf_ffi"
            | "lapack_zgetrf_ffi"
            | "cusolver_getrf_ffi"
            | "hipsolver_getrf_ffi"
    )
}

impl Importer<'_> {
    /// `custom_call @target(..)`: one of the module's, or unsupported naming the target.
    pub(super) fn custom_call(
        &mut self,
        op: &Operation,
        args: &[ValueId],
    ) -> Result<Vec<ValueId>, Error> {
        // The pretty form names the target after `@`, the generic one in `call_target_name`.
        let named = op
            .attr(&["call_target_name"])
            .and_then(|tokens| match tokens.first() {
                Some(Tok::Str(s)) => Some(s.as_str()),
                _ => None,
            });
        let target = op.callee.as_deref().or(named).unwrap_or_default();
        if is_getrf(target) {
            return self.getrf(target, op, args);
        }
        if let Some(call) = lapack_qr_eig::call_of(target) {
            return self.lapack_qr_eig(call, target, op, args);
        }
        match target {
            "shape_assertion" => self.shape_assertion(op, args),
            "lapack_sgesdd_ffi" | "lapack_dgesdd_ffi" | "lapack_cgesdd_ffi"
            | "lapack_zgesdd_ffi" => self.gesdd(target, op, args),
            "lapack_spotrf_ffi" | "lapack_dpotrf_ffi" | "lapack_cpotrf_ffi"
            | "lapack_zpotrf_ffi" => self.potrf(target, op, args),
            "lapack_strsm_ffi" | "lapack_dtrsm_ffi" | "lapack_ctrsm_ffi" | "lapack_ztrsm_ffi" => {
                self.trsm(target, op, args).map(|x| vec![x])
            }
            _ => Err(Error::unsupported(
                op.line,
                format!("custom_call @{target}"),
            )),
        }
    }

    /// `potrf(a)`: the factor of `uplo`'s triangle, the other kept, and `info`.
    fn potrf(
        &mut self,
        target: &str,
        op: &Operation,
        args: &[ValueId],
    ) -> Result<Vec<ValueId>, Error> {
        let line = op.line;
        let &[a] = args else {
            return Err(Error::at(line, format!("{target} takes one matrix")));
        };
        let lower = match flag(op, "uplo") {
            Some(b'L') => true,
            Some(b'U') => false,
            _ => return Err(Error::at(line, format!("{target} needs uplo = L or U"))),
        };
        let ty = self.type_of(a, line)?;
        let rank = ty.rank();
        if rank < 2 {
            return Err(Error::at(line, format!("{target} of {ty}, not a matrix")));
        }
        let batch = Shape::new(ty.dims()[..rank - 2].to_vec());
        let info_ty = TensorType::new(DType::I32, batch.clone());
        if op.result_types != [ty.clone(), info_ty.clone()] {
            return Err(self.wrong_results(target, op, &[&ty, &ty, &info_ty]));
        }
        // The upper factor `u` (`a = uᴴ·u`) is the lower factor of `aᵀ`, transposed.
        let mut perm: Vec<usize> = (0..rank).collect();
        perm.swap(rank - 2, rank - 1);
        let swap = Op::Transpose { perm };
        let factor = if lower {
            self.push(Op::Cholesky, &[a], line)?
        } else {
            let at = self.push(swap.clone(), &[a], line)?;
            let l = self.push(Op::Cholesky, &[at], line)?;
            self.push(swap, &[l], line)?
        };
        let rows = self.iota(&ty.shape, rank - 2, line)?;
        let cols = self.iota(&ty.shape, rank - 1, line)?;
        let relation = if lower { CompareOp::Ge } else { CompareOp::Le };
        let written = self.push(Op::Compare(relation), &[rows, cols], line)?;
        let result = self.push(Op::Select, &[written, factor, a], line)?;
        // Not positive definite: the factor is NaN throughout, its first entry too.
        let mut limit = vec![1; rank];
        limit[..rank - 2].copy_from_slice(&ty.dims()[..rank - 2]);
        let first = Op::Slice {
            start: vec![0; rank],
            limit,
            strides: vec![1; rank],
        };
        let first = self.push(first, &[factor], line)?;
        let first = self.push(
            Op::Reshape {
                shape: batch.clone(),
            },
            &[first],
            line,
        )?;
        let failed = self.push(Op::Compare(CompareOp::Ne), &[first, first], line)?;
        let (one, zero) = (
            self.full(Scalar::I32(1), &batch, line)?,
            self.full(Scalar::I32(0), &batch, line)?,
        );
        let info = self.push(Op::Select, &[failed, one, zero], line)?;
        Ok(vec![result, info])
    }

    /// `trsm(a, b[, alpha])`: the triangular solve of `alpha·b`.
    fn trsm(&mut self, target: &str, op: &Operation, args: &[ValueId]) -> Result<ValueId, Error> {
        let line = op.line;
        let (a, b, alpha) = match *args {
            [a, b] => (a, b, None),
            [a, b, alpha] => (a, b, Some(alpha)),
            _ => {
                return Err(Error::at(
                    line,
                    format!("{target} takes a, b and an optional alpha"),
                ))
            }
        };
        let bad =
            |key: &str, allowed: &str| Error::at(line, format!("{target} needs {key} = {allowed}"));
        let left_side = match flag(op, "side") {
            Some(b'L') => true,
            Some(b'R') => false,
            _ => return Err(bad("side", "L or R")),
        };
        let lower = match flag(op, "uplo") {
            Some(b'L') => true,
            Some(b'U') => false,
            _ => return Err(bad("uplo", "L or U")),
        };
        let (transpose_a, conjugate_a) = match flag(op, "trans_x") {
            Some(b'N') => (false, false),
            Some(b'T') => (true, false),
            Some(b'C') => (true, true),
            _ => return Err(bad("trans_x", "N, T or C")),
        };
        let unit_diagonal = match flag(op, "diag") {
            Some(b'U') => true,
            Some(b'N') => false,
            _ => return Err(bad("diag", "N or U")),
        };
        let rhs = match alpha {
            None => b,
            Some(alpha) => {
                let b_ty = self.type_of(b, line)?;
                let scale = Op::BroadcastInDim {
                    shape: b_ty.shape.clone(),
                    dims: Vec::new(),
                };
                let alpha = self.push(scale, &[alpha], line)?;
                self.push(Op::Binary(BinaryOp::Mul), &[alpha, b], line)?
            }
        };
        let s = TriangularSolve {
            left_side,
            lower,
            transpose_a,
            conjugate_a,
            unit_diagonal,
        };
        let x = self.push(Op::TriangularSolve(s), &[a, rhs], line)?;
        let x_ty = self.type_of(x, line)?;
        if op.result_types != [x_ty.clone()] {
            return Err(self.wrong_results(target, op, &[&x_ty, &x_ty]));
        }
        Ok(x)
    }

    /// The one operand of `target`, a matrix or a batch of them.
    pub(super) fn matrix_operand(
        &self,
        target: &str,
        op: &Operation,
        args: &[ValueId],
    ) -> Result<ValueId, Error> {
        let &[a] = args else {
            return Err(Error::at(op.line, format!("{target} takes one matrix")));
        };
        let ty = self.type_of(a, op.line)?;
        if ty.rank() < 2 {
            return Err(Error::at(
                op.line,
                format!("{target} of {ty}, not a matrix"),
            ));
        }
        Ok(a)
    }

    fn iota(&mut self, shape: &Shape, dim: usize, line: usize) -> Result<ValueId, Error> {
        let op = Op::Iota {
            dtype: DType::I32,
            shape: shape.clone(),
            dim,
        };
        self.push(op, &[], line)
    }

    /// The error for `op`'s declared results where `of` (the operand, then the results) gives
    /// others.
    pub(super) fn wrong_results(&self, target: &str, op: &Operation, of: &[&TensorType]) -> Error {
        let text = |types: &mut dyn Iterator<Item = String>| types.collect::<Vec<_>>().join(", ");
        Error::at(
            op.line,
            format!(
                "{target} of {} gives ({}), not ({})",
                of[0],
                text(&mut of[1..].iter().map(|t| t.to_string())),
                text(&mut op.result_types.iter().map(|t| t.to_string())),
            ),
        )
    }

    fn getrf(
        &mut self,
        target: &str,
        op: &Operation,
        args: &[ValueId],
    ) -> Result<Vec<ValueId>, Error> {
        let line = op.line;
        let a = *args
            .last()
            .ok_or_else(|| Error::at(line, format!("{target} needs a matrix")))?;
        let factors = self.push(Op::Lu(LuPart::Factors), &[a], line)?;
        let pivots = self.push(Op::Lu(LuPart::Pivots), &[a], line)?;
        let (a_ty, pivots_ty) = (self.type_of(a, line)?, self.type_of(pivots, line)?);
        let rank = a_ty.rank();
        let batch = Shape::new(a_ty.dims()[..rank - 2].to_vec());
        let info_ty = TensorType::new(DType::I32, batch.clone());
        if op.result_types != [a_ty.clone(), pivots_ty.clone(), info_ty.clone()] {
            return Err(self.wrong_results(target, op, &[&a_ty, &a_ty, &pivots_ty, &info_ty]));
        }
        let one = self.full(Scalar::I32(1), &pivots_ty.shape, line)?;
        let ipiv = self.push(Op::Binary(BinaryOp::Add), &[pivots, one], line)?;
        let info = self.first_zero_pivot(factors, &pivots_ty.shape, &batch, line)?;
        Ok(vec![factors, ipiv, info])
    }

    fn gesdd(
        &mut self,
        target: &str,
        op: &Operation,
        args: &[ValueId],
    ) -> Result<Vec<ValueId>, Error> {
        let line = op.line;
        let a = self.matrix_operand(target, op, args)?;
        let a_ty = self.type_of(a, line)?;
        let rank = a_ty.rank();
        let full = match flag(op, "mode") {
            Some(b'A') => Some(true),
            Some(b'S') => Some(false),
            Some(b'N') => None,
            other => {
                return Err(Error::unsupported(
                    line,
                    format!("{target} mode {:?}", other.map(char::from)),
                ))
            }
        };
        let svd = |part, full_matrices| {
            Op::Svd(Svd {
                part,
                full_matrices,
            })
        };
        let s = self.push(svd(SvdPart::Values, false), &[a], line)?;
        let s_ty = self.type_of(s, line)?;
        let batch = Shape::new(a_ty.dims()[..rank - 2].to_vec());
        let info_ty = TensorType::new(DType::I32, batch.clone());
        let (u, vt) = match (full, op.result_types.get(2..4)) {
            (Some(full), _) => (
                self.push(svd(SvdPart::U, full), &[a], line)?,
                self.push(svd(SvdPart::Vh, full), &[a], line)?,
            ),
            (None, Some([u_ty, vt_ty]))
                if u_ty.dtype == a_ty.dtype && vt_ty.dtype == a_ty.dtype =>
            {
                (
                    self.full(Scalar::zero(a_ty.dtype), &u_ty.shape, line)?,
                    self.full(Scalar::zero(a_ty.dtype), &vt_ty.shape, line)?,
                )
            }
            (None, _) => return Err(Error::at(line, format!("{target} declares no u and vt"))),
        };
        let (u_ty, vt_ty) = (self.type_of(u, line)?, self.type_of(vt, line)?);
        let expected = [&a_ty, &a_ty, &s_ty, &u_ty, &vt_ty, &info_ty];
        let declared = op.result_types.get(..5);
        if declared.is_none_or(|d| d.iter().zip(&expected[1..]).any(|(d, e)| d != *e)) {
            return Err(self.wrong_results(target, op, &expected));
        }
        // Non-finite input makes every singular value NaN, and so their sum.
        let sum = Op::Reduce {
            op: ReduceOp::Sum,
            axes: vec![rank - 2],
        };
        let sum = self.push(sum, &[s], line)?;
        let infinity = self.full(Scalar::from_f64(s_ty.dtype, f64::INFINITY), &batch, line)?;
        let finite = self.push(Op::Compare(CompareOp::Lt), &[sum, infinity], line)?;
        let zero = self.full(Scalar::I32(0), &batch, line)?;
        let failed = self.full(Scalar::I32(-4), &batch, line)?;
        let info = self.push(Op::Select, &[finite, zero, failed], line)?;
        let mut results = vec![a, s, u, vt, info];
        for ty in &op.result_types[5..] {
            results.push(self.full(Scalar::zero(ty.dtype), &ty.shape, line)?);
        }
        Ok(results)
    }

    /// LAPACK's `info` of `factors` (`[.., m, n]`): the 1-based position of the first zero on
    /// `u`'s diagonal (`diagonal` is `[.., k]`), else 0.
    fn first_zero_pivot(
        &mut self,
        factors: ValueId,
        diagonal: &Shape,
        batch: &Shape,
        line: usize,
    ) -> Result<ValueId, Error> {
        let ty = self.type_of(factors, line)?;
        let rank = ty.rank();
        let k = diagonal.dims()[rank - 2];
        let mut limit = ty.dims().to_vec();
        limit[rank - 2] = k;
        limit[rank - 1] = k;
        let square = Op::Slice {
            start: vec![0; rank],
            limit: limit.clone(),
            strides: vec![1; rank],
        };
        let square = self.push(square, &[factors], line)?;
        let square_shape = Shape::new(limit);
        let rows = self.iota(&square_shape, rank - 2, line)?;
        let cols = self.iota(&square_shape, rank - 1, line)?;
        let on_diagonal = self.push(Op::Compare(CompareOp::Eq), &[rows, cols], line)?;
        let zero = self.full(Scalar::zero(ty.dtype), &square_shape, line)?;
        let kept = self.push(Op::Select, &[on_diagonal, square, zero], line)?;
        let sum = Op::Reduce {
            op: ReduceOp::Sum,
            axes: vec![rank - 1],
        };
        let entries = self.push(sum, &[kept], line)?;
        let zeros = self.full(Scalar::zero(ty.dtype), diagonal, line)?;
        let is_zero = self.push(Op::Compare(CompareOp::Eq), &[entries, zeros], line)?;
        let steps = self.iota(diagonal, rank - 2, line)?;
        let one = self.full(Scalar::I32(1), diagonal, line)?;
        let position = self.push(Op::Binary(BinaryOp::Add), &[steps, one], line)?;
        let past =
            i32::try_from(k + 1).map_err(|_| Error::at(line, format!("getrf of {k} pivots")))?;
        let none = self.full(Scalar::I32(past), diagonal, line)?;
        let candidate = self.push(Op::Select, &[is_zero, position, none], line)?;
        let first = Op::Reduce {
            op: ReduceOp::Min,
            axes: vec![rank - 2],
        };
        let first = self.push(first, &[candidate], line)?;
        let none = self.full(Scalar::I32(past), batch, line)?;
        let found = self.push(Op::Compare(CompareOp::Lt), &[first, none], line)?;
        let zero = self.full(Scalar::I32(0), batch, line)?;
        self.push(Op::Select, &[found, first, zero], line)
    }
}

/// The LAPACK character `key` of `op`'s `mhlo.backend_config` (`{uplo = 76 : ui8, ..}`).
pub(super) fn flag(op: &Operation, key: &str) -> Option<u8> {
    let tokens = op.attr(&["mhlo.backend_config"])?;
    tokens.windows(3).find_map(|w| match w {
        [Tok::Word(k), Tok::Punct('='), Tok::Word(code)] if k == key => code.parse().ok(),
        _ => None,
    })
}

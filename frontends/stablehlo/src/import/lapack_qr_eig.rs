//! The custom calls `jax.export` writes on the CPU for `jnp.linalg.qr` (`geqrf`, then
//! `orgqr`), `jnp.linalg.eigh` and `jnp.linalg.eig`, as the IR's ops:
//!
//! - `lapack_?geqrf_ffi(a)` gives the compact factorization (`geqrf`, `geqrf_taus`); it has no
//!   `info`.
//! - `lapack_{s,d}orgqr_ffi(a, τ)` and `lapack_{c,z}ungqr_ffi` give `householder_product`.
//! - `lapack_{s,d}syevd_ffi(a)` and `lapack_{c,z}heevd_ffi` give the eigenvectors, the
//!   ascending eigenvalues and `info`, then (in older exports) workspaces, read from the
//!   triangle `uplo` names (`L`, or `U`: the lower triangle of `aᴴ`). `mode` `N` asks for no
//!   vectors; LAPACK then leaves the matrix undefined, here it holds them anyway. `info` is 0,
//!   or 1 where the eigenvalues are NaN (a value of `a` that is not finite).
//! - `lapack_?geev_ffi(a)` gives the eigenvalues (real inputs: their real and imaginary parts
//!   apart), the left and right eigenvectors (complex whatever `a`'s type; zeros where
//!   `compute_left` or `compute_right` is `N`, a buffer JAX never reads) and `info`: 0, or −4
//!   (what the call gives for a value that is not finite) where the eigenvalues are NaN.

use super::lapack::flag;
use super::Importer;
use crate::parse::Operation;
use crate::Error;
use ferrax_ir::{
    BinaryOp, CompareOp, EigPart, EighPart, GeqrfPart, Op, ReduceOp, Scalar, Shape, TensorType,
    UnaryOp, ValueId,
};

impl Importer<'_> {
    /// Imports `call`.
    pub(super) fn lapack_qr_eig(
        &mut self,
        call: QrEigCall,
        target: &str,
        op: &Operation,
        args: &[ValueId],
    ) -> Result<Vec<ValueId>, Error> {
        match call {
            QrEigCall::Geqrf => self.geqrf(target, op, args),
            QrEigCall::Orgqr => self.orgqr(target, op, args),
            QrEigCall::Syevd => self.syevd(target, op, args),
            QrEigCall::Geev => self.geev(target, op, args),
        }
    }

    /// `geqrf(a)`: the packed factors and `τ`.
    fn geqrf(
        &mut self,
        target: &str,
        op: &Operation,
        args: &[ValueId],
    ) -> Result<Vec<ValueId>, Error> {
        let line = op.line;
        let a = self.matrix_operand(target, op, args)?;
        let packed = self.push(Op::Geqrf(GeqrfPart::Packed), &[a], line)?;
        let taus = self.push(Op::Geqrf(GeqrfPart::Taus), &[a], line)?;
        self.declared(target, op, &[a, packed, taus])?;
        Ok(vec![packed, taus])
    }

    /// `orgqr(a, τ)` / `ungqr(a, τ)`: the product of the reflections.
    fn orgqr(
        &mut self,
        target: &str,
        op: &Operation,
        args: &[ValueId],
    ) -> Result<Vec<ValueId>, Error> {
        let line = op.line;
        let &[a, taus] = args else {
            return Err(Error::at(line, format!("{target} takes a matrix and τ")));
        };
        let q = self.push(Op::HouseholderProduct, &[a, taus], line)?;
        self.declared(target, op, &[a, q])?;
        Ok(vec![q])
    }

    /// `syevd(a)` / `heevd(a)`: the eigenvectors, the eigenvalues and `info`, then workspaces.
    fn syevd(
        &mut self,
        target: &str,
        op: &Operation,
        args: &[ValueId],
    ) -> Result<Vec<ValueId>, Error> {
        let line = op.line;
        let a = self.matrix_operand(target, op, args)?;
        if !matches!(flag(op, "mode"), Some(b'V' | b'N')) {
            return Err(Error::at(line, format!("{target} needs mode = V or N")));
        }
        let a_ty = self.type_of(a, line)?;
        let rank = a_ty.rank();
        let lower = match flag(op, "uplo") {
            Some(b'L') => a,
            Some(b'U') => {
                let mut perm: Vec<usize> = (0..rank).collect();
                perm.swap(rank - 2, rank - 1);
                let swapped = self.push(Op::Transpose { perm }, &[a], line)?;
                match a_ty.dtype.is_complex() {
                    true => {
                        let re = self.push(Op::Unary(UnaryOp::Real), &[swapped], line)?;
                        let im = self.push(Op::Unary(UnaryOp::Imag), &[swapped], line)?;
                        let minus = self.push(Op::Unary(UnaryOp::Neg), &[im], line)?;
                        self.push(Op::Binary(BinaryOp::Complex), &[re, minus], line)?
                    }
                    false => swapped,
                }
            }
            _ => return Err(Error::at(line, format!("{target} needs uplo = L or U"))),
        };
        let vectors = self.push(Op::Eigh(EighPart::Vectors), &[lower], line)?;
        let values = self.push(Op::Eigh(EighPart::Values), &[lower], line)?;
        let info = self.info_of(values, 1, line)?;
        let mut results = vec![vectors, values, info];
        self.declared(target, op, &[a, vectors, values, info])?;
        for ty in &op.result_types[3..] {
            results.push(self.full(Scalar::zero(ty.dtype), &ty.shape, line)?);
        }
        Ok(results)
    }

    /// `geev(a)`: the eigenvalues (real and imaginary parts apart for real `a`), the left and
    /// right eigenvectors and `info`.
    fn geev(
        &mut self,
        target: &str,
        op: &Operation,
        args: &[ValueId],
    ) -> Result<Vec<ValueId>, Error> {
        let line = op.line;
        let a = self.matrix_operand(target, op, args)?;
        let values = self.push(Op::Eig(EigPart::Values), &[a], line)?;
        let mut vectors = Vec::new();
        for (key, part) in [
            ("compute_left", EigPart::Left),
            ("compute_right", EigPart::Right),
        ] {
            vectors.push(match flag(op, key) {
                Some(b'V') => self.push(Op::Eig(part), &[a], line)?,
                Some(b'N') => {
                    let ty = self.type_of(a, line)?;
                    let complex = ty.dtype.complex_of().unwrap_or(ty.dtype);
                    self.full(Scalar::zero(complex), &ty.shape, line)?
                }
                _ => return Err(Error::at(line, format!("{target} needs {key} = V or N"))),
            });
        }
        let info = self.info_of(values, -4, line)?;
        let mut results = match self.type_of(a, line)?.dtype.is_complex() {
            true => vec![values],
            false => vec![
                self.push(Op::Unary(UnaryOp::Real), &[values], line)?,
                self.push(Op::Unary(UnaryOp::Imag), &[values], line)?,
            ],
        };
        results.extend(vectors);
        results.push(info);
        let mut of = vec![a];
        of.extend(&results);
        self.declared(target, op, &of)?;
        Ok(results)
    }

    /// Checks that `op` declares at least the types of `of`'s results (`of[0]` is the operand
    /// the error names).
    fn declared(&self, target: &str, op: &Operation, of: &[ValueId]) -> Result<(), Error> {
        let types = of
            .iter()
            .map(|&v| self.type_of(v, op.line))
            .collect::<Result<Vec<TensorType>, Error>>()?;
        let results = &types[1..];
        let declared = op.result_types.get(..results.len());
        if declared != Some(results) {
            let refs: Vec<&TensorType> = types.iter().collect();
            return Err(self.wrong_results(target, op, &refs));
        }
        Ok(())
    }

    /// LAPACK's `info` for a decomposition whose `values` (`[.., m]`) are NaN where it failed:
    /// 0, or `failed`.
    fn info_of(&mut self, values: ValueId, failed: i32, line: usize) -> Result<ValueId, Error> {
        let ty = self.type_of(values, line)?;
        let rank = ty.rank();
        let batch = Shape::new(ty.dims()[..rank - 1].to_vec());
        let magnitude = match ty.dtype.is_complex() {
            true => self.push(Op::Unary(UnaryOp::Abs), &[values], line)?,
            false => values,
        };
        let sum = Op::Reduce {
            op: ReduceOp::Sum,
            axes: vec![rank - 1],
        };
        let sum = self.push(sum, &[magnitude], line)?;
        let real = ty.dtype.complex_part().unwrap_or(ty.dtype);
        let infinity = self.full(Scalar::from_f64(real, f64::INFINITY), &batch, line)?;
        let finite = self.push(Op::Compare(CompareOp::Lt), &[sum, infinity], line)?;
        let zero = self.full(Scalar::I32(0), &batch, line)?;
        let failed = self.full(Scalar::I32(failed), &batch, line)?;
        self.push(Op::Select, &[finite, zero, failed], line)
    }
}

/// Whether `target` is a call this module imports, and which.
pub(super) fn call_of(target: &str) -> Option<QrEigCall> {
    let (prefix, rest) = target.split_at_checked(7)?;
    let (kind, name) = match (prefix, rest.split_at_checked(1)?) {
        ("lapack_", (kind @ ("s" | "d" | "c" | "z"), name)) => (kind, name),
        _ => return None,
    };
    let real = matches!(kind, "s" | "d");
    Some(match (name, real) {
        ("geqrf_ffi", _) => QrEigCall::Geqrf,
        ("orgqr_ffi", true) | ("ungqr_ffi", false) => QrEigCall::Orgqr,
        ("syevd_ffi", true) | ("heevd_ffi", false) => QrEigCall::Syevd,
        ("geev_ffi", _) => QrEigCall::Geev,
        _ => return None,
    })
}

/// The calls of this module.
#[derive(Clone, Copy)]
pub(super) enum QrEigCall {
    Geqrf,
    Orgqr,
    Syevd,
    Geev,
}

//! Cholesky factors, LU factors and triangular solves (`lax.linalg`), and what NumPy users
//! build from them (`jnp.linalg.solve`, `inv`, `det`, `slogdet`; `cho_solve` is two
//! triangular solves). Derivatives follow from the factorizations' and the solves' rules.

use crate::tensor::apply;
use crate::Tensor;
use ferrax_ir::{DType, EighPart, LuPart, Op, Qr, QrPart, TriangularSolve};

impl Tensor {
    /// `x` with `op(self)·x = b` (`options.left_side`) or `x·op(self) = b`
    /// (`lax.linalg.triangular_solve(a, b, ...)`): `self` is `[.., m, m]` and only its lower
    /// (`lower`) or upper triangle is read, with ones on the diagonal when `unit_diagonal`;
    /// `op` transposes (`transpose_a`) and conjugates (`conjugate_a`) it. `b` is `[.., m, n]`
    /// on the left side and `[.., n, m]` on the right, with the same leading dimensions and
    /// type (floats or complex numbers). Differentiable in both operands.
    #[track_caller]
    pub fn triangular_solve(&self, b: &Tensor, options: TriangularSolve) -> Tensor {
        apply(Op::TriangularSolve(options), &[self, b])
    }

    /// The lower Cholesky factor `l` of each Hermitian positive-definite matrix of `self`
    /// (`[.., m, m]`, float or complex): `l·lᴴ = self`, zeros above the diagonal
    /// (`jnp.linalg.cholesky`). As JAX does, the matrix is symmetrized first (`(a + aᴴ)/2`), so
    /// gradients reach both triangles alike; a matrix that is not positive definite gives NaN
    /// throughout.
    #[track_caller]
    pub fn cholesky(&self) -> Tensor {
        apply(Op::Cholesky, &[&self.symmetrized()])
    }

    /// The eigenvalues (ascending, `[.., m]`, of the real type) and unit eigenvectors (the
    /// columns of `[.., m, m]`) of each Hermitian (real symmetric) matrix of `self`,
    /// `self = v·diag(w)·vᴴ` (`jnp.linalg.eigh`). As JAX does, the matrix is symmetrized first
    /// (`(a + aᴴ)/2`). Each eigenvector's entry of largest magnitude is real and positive
    /// (eigenvectors are unique only up to such a factor; LAPACK's choice is not specified).
    /// Differentiable; gradients through repeated eigenvalues are infinite or NaN, as in JAX.
    #[track_caller]
    pub fn eigh(&self) -> (Tensor, Tensor) {
        let symmetric = self.symmetrized();
        (
            apply(Op::Eigh(EighPart::Values), &[&symmetric]),
            apply(Op::Eigh(EighPart::Vectors), &[&symmetric]),
        )
    }

    /// `(a + aᴴ)/2` over the last two dimensions.
    #[track_caller]
    fn symmetrized(&self) -> Tensor {
        let rank = self.shape().len();
        let mut perm: Vec<usize> = (0..rank).collect();
        if rank >= 2 {
            perm.swap(rank - 2, rank - 1);
        }
        (self + &self.transpose(perm).conj()) * 0.5
    }

    /// The LU factorization with partial pivoting of each matrix of `self` (`[.., m, n]`,
    /// float or complex), `p·a = l·u` (`lax.linalg.lu`): the packed factors (`l`'s unit lower
    /// triangle below the diagonal, `u` on and above it), the pivots (`i32` `[.., min(m, n)]`,
    /// step `i` swapped rows `i` and `pivots[i]`) and the permutation (`i32` `[.., m]`, row
    /// `i` of `p·a` is row `permutation[i]` of `a`). Differentiable in the factors.
    #[track_caller]
    pub fn lu(&self) -> (Tensor, Tensor, Tensor) {
        (
            self.lu_part(LuPart::Factors),
            self.lu_part(LuPart::Pivots),
            self.lu_part(LuPart::Permutation),
        )
    }

    /// One part of [`Tensor::lu`]: each part is its own instruction, which factors the matrix
    /// when it runs eagerly, so the methods below ask only for the parts they use.
    #[track_caller]
    fn lu_part(&self, part: LuPart) -> Tensor {
        apply(Op::Lu(part), &[self])
    }

    /// The QR factorization of each matrix of `self` (`[.., m, n]`, float or complex),
    /// `self = q·r` (`lax.linalg.qr`): `q` with orthonormal columns, `r` upper triangular, by
    /// Householder reflections with LAPACK's signs (`r`'s diagonal real, of the sign opposite
    /// each column's leading entry). `full_matrices`: `q` is `m × m` and `r` `m × n`
    /// (`jnp.linalg.qr(mode="complete")`); else `m × k` and `k × n`, `k = min(m, n)`
    /// (`mode="reduced"`). Differentiable where JAX's is: `m ≥ n`, and square matrices for
    /// the full factors.
    #[track_caller]
    pub fn qr(&self, full_matrices: bool) -> (Tensor, Tensor) {
        let part = |part| {
            Op::Qr(Qr {
                part,
                full_matrices,
            })
        };
        (
            apply(part(QrPart::Q), &[self]),
            apply(part(QrPart::R), &[self]),
        )
    }

    /// `x` with `self·x = b` for each square matrix of `self` (`jnp.linalg.solve`): `b` is a
    /// vector `[m]` or matrices `[.., m, n]` with `self`'s batch dimensions. By LU
    /// factorization and two triangular solves; a singular matrix gives infinities or NaNs.
    #[track_caller]
    pub fn solve(&self, b: &Tensor) -> Tensor {
        if let Some(failed) = self.square_matrices("solve") {
            return failed;
        }
        if b.ndim() == 1 {
            return self.solve(&b.expand_dims(-1)).squeeze(-1);
        }
        if b.ndim() != self.ndim() {
            return b.fail(format!(
                "solve: b {} must be a vector or have the rank of a {}",
                b.ty(),
                self.ty()
            ));
        }
        let (factors, permutation) = (
            self.lu_part(LuPart::Factors),
            self.lu_part(LuPart::Permutation),
        );
        let permuted = b.take_along_axis(&permutation.expand_dims(-1), -2);
        let lower = TriangularSolve {
            left_side: true,
            lower: true,
            unit_diagonal: true,
            ..TriangularSolve::default()
        };
        let upper = TriangularSolve {
            left_side: true,
            ..TriangularSolve::default()
        };
        let y = factors.triangular_solve(&permuted, lower);
        factors.triangular_solve(&y, upper)
    }

    /// The inverse of each square matrix of `self` (`jnp.linalg.inv`): the solution of
    /// `self·x = I`.
    #[track_caller]
    pub fn inv(&self) -> Tensor {
        if let Some(failed) = self.square_matrices("inv") {
            return failed;
        }
        self.solve(&self.identity())
    }

    /// The determinant of each square matrix of `self` (`jnp.linalg.det`), `[..]`: the
    /// product of `u`'s diagonal, negated for an odd number of row swaps.
    #[track_caller]
    pub fn det(&self) -> Tensor {
        if let Some(failed) = self.square_matrices("det") {
            return failed;
        }
        let (factors, pivots) = (self.lu_part(LuPart::Factors), self.lu_part(LuPart::Pivots));
        self.swap_sign(&pivots) * factors.matrix_diagonal().prod(-1)
    }

    /// The sign (a unit complex number for complex types, 0 for a singular matrix) and the
    /// log of the absolute value of each determinant (`jnp.linalg.slogdet`), `[..]` each;
    /// the log is of the real type (f32 for c64). It does not overflow where `det` would.
    #[track_caller]
    pub fn slogdet(&self) -> (Tensor, Tensor) {
        if let Some(failed) = self.square_matrices("slogdet") {
            return (failed.clone(), failed);
        }
        let (factors, pivots) = (self.lu_part(LuPart::Factors), self.lu_part(LuPart::Pivots));
        let diagonal = factors.matrix_diagonal();
        let sign = self.swap_sign(&pivots) * diagonal.sign().prod(-1);
        (sign, diagonal.abs().log().sum(-1))
    }

    /// `None` when `self` is a batch of square matrices, else a failed tensor saying so.
    #[track_caller]
    fn square_matrices(&self, op: &str) -> Option<Tensor> {
        let dims = self.shape();
        match dims.len() >= 2 && dims[dims.len() - 1] == dims[dims.len() - 2] {
            true => None,
            false => Some(self.fail(format!(
                "{op}: a must be a square matrix or a batch of them, not {}",
                self.ty()
            ))),
        }
    }

    /// Identity matrices shaped like `self` (a batch of square matrices), in its type.
    #[track_caller]
    fn identity(&self) -> Tensor {
        let rank = self.ndim();
        let rows = Tensor::iota(DType::I32, self.shape(), rank - 2);
        let cols = Tensor::iota(DType::I32, self.shape(), rank - 1);
        rows.equal(&cols).astype(self.dtype())
    }

    /// The diagonal of each square matrix of `self`, `[.., m]`.
    #[track_caller]
    pub(crate) fn matrix_diagonal(&self) -> Tensor {
        let rank = self.ndim();
        let rows = Tensor::iota(DType::I32, self.shape(), rank - 2);
        let cols = Tensor::iota(DType::I32, self.shape(), rank - 1);
        rows.equal(&cols).select(self, 0.0).sum(-1)
    }

    /// `(-1)^swaps` in `self`'s type, `[..]`, for LU pivots `[.., k]`.
    #[track_caller]
    fn swap_sign(&self, pivots: &Tensor) -> Tensor {
        let steps = Tensor::iota(DType::I32, pivots.shape(), pivots.ndim() - 1);
        let swaps = pivots.not_equal(&steps).astype(DType::I32).sum(-1);
        (1 - (swaps % 2) * 2).astype(self.dtype())
    }
}

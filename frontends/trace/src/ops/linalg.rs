//! Cholesky, LU, QR (and its compact form), eigen- and singular value decompositions and
//! triangular solves (`lax.linalg`), and what NumPy users build from them (`jnp.linalg.solve`, `inv`, `det`,
//! `slogdet`, `pinv`, `lstsq`, `matrix_rank`, `cond`, the spectral and nuclear norms;
//! `cho_solve` is two triangular solves). Derivatives follow from the decompositions' and the
//! solves' rules.

use crate::tensor::apply;
use crate::Tensor;
use ferrax_ir::{
    DType, EigPart, EighPart, GeqrfPart, LuPart, Op, Qr, QrPart, Svd, SvdPart, TriangularSolve,
};

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

    /// The Householder QR factorization of each matrix of `self` (`[.., m, n]`, float or
    /// complex) in LAPACK's compact form (`lax.linalg.geqrf`): the packed matrix, with `r` on
    /// and above the diagonal and reflection `j`'s vector below it (its leading 1 implied), and
    /// `τ` (`[.., min(m, n)]`). The reflections are those of [`Tensor::qr`];
    /// [`Tensor::householder_product`] multiplies them out. Not differentiable (as in JAX).
    #[track_caller]
    pub fn geqrf(&self) -> (Tensor, Tensor) {
        (
            apply(Op::Geqrf(GeqrfPart::Packed), &[self]),
            apply(Op::Geqrf(GeqrfPart::Taus), &[self]),
        )
    }

    /// The first `n` columns of `H(0)···H(k−1)` (`lax.linalg.householder_product`), where
    /// `self` (`[.., m, n]`, `m ≥ n`) holds the reflections' vectors below its diagonal, as
    /// [`Tensor::geqrf`] packs them, and `taus` (`[.., k]`, `k ≤ n`, `self`'s type) their
    /// factors: reflection `j` is `I − τ_j·v·vᴴ`. Not differentiable (as in JAX).
    #[track_caller]
    pub fn householder_product(&self, taus: &Tensor) -> Tensor {
        apply(Op::HouseholderProduct, &[self, taus])
    }

    /// The eigenvalues (`[.., m]`) and right eigenvectors (the columns of `[.., m, m]`) of each
    /// square matrix of `self` (f32, f64, c64 or c128), `self·v = v·diag(w)`
    /// (`jnp.linalg.eig`), complex of `self`'s precision. The eigenvalues come in the order the
    /// Schur form gives them (not sorted); each eigenvector has unit norm and its entry of
    /// largest magnitude real and positive. The eigenvalues are differentiable
    /// (`dw = diag(vlᴴ·da·v) / diag(vlᴴ·v)`); the eigenvectors are not (as in JAX).
    #[track_caller]
    pub fn eig(&self) -> (Tensor, Tensor) {
        (self.eigvals(), apply(Op::Eig(EigPart::Right), &[self]))
    }

    /// The eigenvalues of each square matrix of `self` (`jnp.linalg.eigvals`), as
    /// [`Tensor::eig`] gives them.
    #[track_caller]
    pub fn eigvals(&self) -> Tensor {
        apply(Op::Eig(EigPart::Values), &[self])
    }

    /// The eigenvalues, left eigenvectors and right eigenvectors of each square matrix of
    /// `self` (`lax.linalg.eig`): `vlᴴ·self = diag(w)·vlᴴ` and `self·vr = vr·diag(w)`, each
    /// eigenvector as [`Tensor::eig`] gives them.
    #[track_caller]
    pub fn eig_left_right(&self) -> (Tensor, Tensor, Tensor) {
        (
            self.eigvals(),
            apply(Op::Eig(EigPart::Left), &[self]),
            apply(Op::Eig(EigPart::Right), &[self]),
        )
    }

    /// The singular value decomposition of each matrix of `self` (`[.., m, n]`, float or
    /// complex), `self = u·diag(s)·vh` (`jnp.linalg.svd`): `u` with orthonormal columns, `s`
    /// (`[.., k]`, `k = min(m, n)`, of the real type) non-negative and descending, `vh` with
    /// orthonormal rows. `full_matrices`: `u` is `m × m` and `vh` `n × n`; else `m × k` and
    /// `k × n`. Each pair of singular vectors is unique up to a common phase: the row of `vh`
    /// has its entry of largest magnitude real and positive (LAPACK's choice is not
    /// specified). One-sided Jacobi rotations in f64 (c128), rounded once. Differentiable where
    /// JAX's is (the reduced vectors, or square matrices); through repeated singular values the
    /// vectors' gradients are infinite or NaN, as in JAX.
    #[track_caller]
    pub fn svd(&self, full_matrices: bool) -> (Tensor, Tensor, Tensor) {
        let part = |part| {
            Op::Svd(Svd {
                part,
                full_matrices,
            })
        };
        (
            apply(part(SvdPart::U), &[self]),
            self.svd_values(),
            apply(part(SvdPart::Vh), &[self]),
        )
    }

    /// The singular values of each matrix of `self`, `[.., min(m, n)]`, descending
    /// (`jnp.linalg.svdvals`, `svd(compute_uv=False)`).
    #[track_caller]
    pub fn svd_values(&self) -> Tensor {
        apply(
            Op::Svd(Svd {
                part: SvdPart::Values,
                full_matrices: false,
            }),
            &[self],
        )
    }

    /// The Moore–Penrose pseudo-inverse of each matrix of `self` (`[.., m, n]` →
    /// `[.., n, m]`, `jnp.linalg.pinv`): `v·diag(1/s)·uᴴ` over the singular values above
    /// `10·max(m, n)·ε` times the largest (JAX's default cutoff), the others dropped.
    #[track_caller]
    pub fn pinv(&self) -> Tensor {
        if let Some(failed) = self.matrices("pinv") {
            return failed;
        }
        let (u, s, vh) = self.svd(false);
        let cutoff = s.max_keepdims(-1) * self.relative_tolerance(10.0);
        let kept = s.greater(&cutoff);
        let safe = kept.select(&s, 1.0);
        let inverse = kept.select(&(1.0 / &safe), 0.0);
        let v = vh.matrix_adjoint();
        let scaled = v * inverse.astype(self.dtype()).expand_dims(-2);
        scaled.matmul(&u.matrix_adjoint())
    }

    /// The least-squares solution of `self·x = b` (`jnp.linalg.lstsq`) for a matrix `self`
    /// (`[m, n]`) and `b` (`[m]` or `[m, k]`): `x` minimizing `‖b − self·x‖`, the one of least
    /// norm where several do, by the SVD without the singular values below `rcond` times the
    /// largest (`None`: `max(m, n)·ε`; negative: `ε`, as JAX). Also returns the residuals (the
    /// squared norm of each column of `b − self·x`, `[1]` for a vector `b`, of the real type:
    /// JAX's default, always computed), the rank (`i32` `[]`) and the singular values.
    #[track_caller]
    pub fn lstsq(&self, b: &Tensor, rcond: Option<f64>) -> (Tensor, Tensor, Tensor, Tensor) {
        let failed = |t: Tensor| (t.clone(), t.clone(), t.clone(), t);
        if self.ndim() != 2 {
            return failed(self.fail(format!("lstsq: a must be a matrix, not {}", self.ty())));
        }
        if b.ndim() == 1 {
            let (x, resid, rank, s) = self.lstsq(&b.expand_dims(-1), rcond);
            return (x.squeeze(-1), resid, rank, s);
        }
        if b.ndim() != 2 || b.shape()[0] != self.shape()[0] {
            return failed(b.fail(format!(
                "lstsq: b {} must be a vector or a matrix with the rows of a {}",
                b.ty(),
                self.ty()
            )));
        }
        let epsilon = self.relative_tolerance(1.0) / self.shape()[0].max(self.shape()[1]) as f64;
        let rcond = match rcond {
            None => self.relative_tolerance(1.0),
            Some(r) if r < 0.0 => epsilon,
            Some(r) => r,
        };
        let (u, s, vh) = self.svd(false);
        let kept = s.greater_equal(&(s.max_keepdims(-1) * rcond));
        let rank = kept.astype(DType::I32).sum(-1);
        let safe = kept.select(&s, 1.0);
        let inverse = kept.select(&(1.0 / &safe), 0.0).astype(self.dtype());
        let projected = u.matrix_adjoint().matmul(b) * inverse.expand_dims(-1);
        let x = vh.matrix_adjoint().matmul(&projected);
        let error = b - &self.matmul(&x);
        let resid = (&error * &error.conj()).real_part().sum(0);
        (x, resid, rank, s)
    }

    /// The real parts of complex values; real values as they are.
    #[track_caller]
    fn real_part(&self) -> Tensor {
        match self.dtype().is_complex() {
            true => self.real(),
            false => self.clone(),
        }
    }

    /// The rank of each matrix of `self` (`jnp.linalg.matrix_rank`), `i32` `[..]`: how many
    /// singular values exceed `max(m, n)·ε` times the largest.
    #[track_caller]
    pub fn matrix_rank(&self) -> Tensor {
        if let Some(failed) = self.matrices("matrix_rank") {
            return failed;
        }
        let s = self.svd_values();
        let tolerance = s.max_keepdims(-1) * self.relative_tolerance(1.0);
        s.greater(&tolerance).astype(DType::I32).sum(-1)
    }

    /// The 2-norm condition number of each matrix of `self` (`jnp.linalg.cond`), `[..]`: the
    /// largest singular value over the smallest.
    #[track_caller]
    pub fn cond(&self) -> Tensor {
        if let Some(failed) = self.matrices("cond") {
            return failed;
        }
        let s = self.svd_values();
        let k = s.shape().last().copied().unwrap_or(0);
        if k == 0 {
            return self.fail(format!("cond: {} has no singular values", self.ty()));
        }
        let rank = s.ndim();
        let first = s.slice_along(rank - 1, 0);
        let last = s.slice_along(rank - 1, k - 1);
        first / last
    }

    /// The spectral norm (the largest singular value, `jnp.linalg.norm(a, ord=2)`) of each
    /// matrix of `self`, `[..]`, of the real type; 0 for an empty matrix.
    #[track_caller]
    pub fn spectral_norm(&self) -> Tensor {
        if let Some(failed) = self.matrices("spectral_norm") {
            return failed;
        }
        let s = self.svd_values();
        match s.shape().last() {
            Some(0) => s.sum(-1),
            _ => s.max(-1),
        }
    }

    /// The nuclear norm (the sum of the singular values, `jnp.linalg.norm(a, ord="nuc")`) of
    /// each matrix of `self`, `[..]`, of the real type.
    #[track_caller]
    pub fn nuclear_norm(&self) -> Tensor {
        if let Some(failed) = self.matrices("nuclear_norm") {
            return failed;
        }
        self.svd_values().sum(-1)
    }

    /// `scale·max(m, n)·ε` of `self`'s real type (NumPy's `finfo(dtype).eps`).
    fn relative_tolerance(&self, scale: f64) -> f64 {
        let dims = self.shape();
        let size = dims[dims.len() - 2].max(dims[dims.len() - 1]) as f64;
        let real = self.dtype().complex_part().unwrap_or(self.dtype());
        let epsilon = match real {
            DType::F64 => f64::EPSILON,
            DType::F16 => 2f64.powi(-10),
            DType::BF16 => 2f64.powi(-7),
            _ => f64::from(f32::EPSILON),
        };
        scale * size * epsilon
    }

    /// Slice `index` of axis `axis`, that axis removed.
    #[track_caller]
    fn slice_along(&self, axis: usize, index: usize) -> Tensor {
        let dims = self.shape();
        let mut start = vec![0; dims.len()];
        let mut limit = dims.to_vec();
        start[axis] = index;
        limit[axis] = index + 1;
        self.slice(&start, &limit).squeeze(axis)
    }

    /// `selfᴴ` over the last two dimensions.
    #[track_caller]
    pub(super) fn matrix_adjoint(&self) -> Tensor {
        let rank = self.ndim();
        let mut perm: Vec<usize> = (0..rank).collect();
        perm.swap(rank - 2, rank - 1);
        self.transpose(perm).conj()
    }

    /// `None` when `self` is a matrix or a batch of them, else a failed tensor saying so.
    #[track_caller]
    pub(super) fn matrices(&self, op: &str) -> Option<Tensor> {
        match self.ndim() >= 2 {
            true => None,
            false => Some(self.fail(format!(
                "{op}: a must be a matrix or a batch of them, not {}",
                self.ty()
            ))),
        }
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
    pub(super) fn square_matrices(&self, op: &str) -> Option<Tensor> {
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
    pub(super) fn identity(&self) -> Tensor {
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

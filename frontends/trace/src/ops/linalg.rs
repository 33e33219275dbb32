//! Cholesky factors and triangular solves (`lax.linalg`): together they solve
//! positive-definite systems (`jax.scipy.linalg.cho_solve`).

use crate::tensor::apply;
use crate::Tensor;
use ferrax_ir::{Op, TriangularSolve};

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
        let rank = self.shape().len();
        let mut perm: Vec<usize> = (0..rank).collect();
        if rank >= 2 {
            perm.swap(rank - 2, rank - 1);
        }
        let symmetric = (self + &self.transpose(perm).conj()) * 0.5;
        apply(Op::Cholesky, &[&symmetric])
    }
}

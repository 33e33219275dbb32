//! Triangular solves (`lax.linalg.triangular_solve`), the building block of solving with a
//! Cholesky or LU factor.

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
}

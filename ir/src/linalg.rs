//! Linear-algebra ops whose attributes are more than a few words.

use serde::{Deserialize, Serialize};

/// `lax.linalg.triangular_solve`: solves `op(a)·x = b` (`left_side`) or `x·op(a) = b` for `x`,
/// where `a` is `[.., m, m]` and only its lower (`lower`) or upper triangle is read, its
/// diagonal taken as ones when `unit_diagonal`; `op` transposes `a` (`transpose_a`) and
/// conjugates it (`conjugate_a`, a no-op on real types; both is the adjoint). `b` is
/// `[.., m, n]` on the left side, `[.., n, m]` on the right, with `a`'s leading (batch)
/// dimensions; the result has `b`'s type. A zero on the diagonal gives infinities and NaNs,
/// as in XLA, not an error.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TriangularSolve {
    pub left_side: bool,
    pub lower: bool,
    pub transpose_a: bool,
    pub conjugate_a: bool,
    pub unit_diagonal: bool,
}

impl TriangularSolve {
    /// Whether the matrix `op(a)` that multiplies `x` is lower triangular.
    pub fn solves_lower(&self) -> bool {
        self.lower != self.transpose_a
    }

    /// Whether position (`row`, `col`) of `a` is read from `a` (rather than taken as 0, or as
    /// 1 on a unit diagonal).
    pub fn reads(&self, row: usize, col: usize) -> bool {
        match (row == col, self.lower) {
            (true, _) => !self.unit_diagonal,
            (false, true) => row > col,
            (false, false) => row < col,
        }
    }
}

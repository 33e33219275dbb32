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

/// What an `lu` instruction yields of the LU factorization with partial pivoting
/// (`lax.linalg.lu`) of `a`, `[.., m, n]`, a float or complex type: `p·a = l·u`, with `l` unit
/// lower triangular (`m × k`, `k = min(m, n)`), `u` upper triangular (`k × n`) and `p` a row
/// permutation. Each step takes the first row whose pivot candidate is largest in magnitude
/// (`|re| + |im|` for complex numbers, as LAPACK's `getrf`); a zero pivot leaves its column
/// unscaled, so a singular matrix factors without error (a zero on `u`'s diagonal).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum LuPart {
    /// `l` below the diagonal and `u` on and above it, packed in `a`'s type and shape.
    Factors,
    /// `i32` `[.., k]`: step `i` swapped row `i` with row `pivots[i]` (LAPACK's `ipiv`, counted
    /// from 0).
    Pivots,
    /// `i32` `[.., m]`: row `i` of `p·a` is row `permutation[i]` of `a`.
    Permutation,
}

impl LuPart {
    pub const ALL: [LuPart; 3] = [LuPart::Factors, LuPart::Pivots, LuPart::Permutation];

    /// The op's name in the text format.
    pub fn name(self) -> &'static str {
        match self {
            LuPart::Factors => "lu",
            LuPart::Pivots => "lu_pivots",
            LuPart::Permutation => "lu_permutation",
        }
    }
}

/// What a `qr` instruction yields of the QR factorization of `a`, `[.., m, n]`, a float or
/// complex type (`lax.linalg.qr`): `a = q·r` with `q`'s columns orthonormal and `r` upper
/// triangular, by Householder reflections as LAPACK's `geqrf` and `orgqr` make them (each
/// reflection maps its column onto `−sign(re(a_jj))·‖column‖`, so `r`'s diagonal is real and
/// of the sign opposite the column's leading entry). With `full_matrices`, `q` is `m × m` and
/// `r` is `m × n`; without, `q` is `m × k` and `r` is `k × n` (`k = min(m, n)`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Qr {
    pub part: QrPart,
    pub full_matrices: bool,
}

/// The factor a `qr` instruction yields.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum QrPart {
    Q,
    R,
}

impl QrPart {
    pub const ALL: [QrPart; 2] = [QrPart::Q, QrPart::R];

    /// The op's name in the text format.
    pub fn name(self) -> &'static str {
        match self {
            QrPart::Q => "qr_q",
            QrPart::R => "qr_r",
        }
    }
}

impl Qr {
    /// The factor's rows and columns for an `m × n` matrix.
    pub fn dims(&self, m: usize, n: usize) -> (usize, usize) {
        let k = m.min(n);
        match (self.part, self.full_matrices) {
            (QrPart::Q, true) => (m, m),
            (QrPart::Q, false) => (m, k),
            (QrPart::R, true) => (m, n),
            (QrPart::R, false) => (k, n),
        }
    }
}

/// What an `svd` instruction yields of the singular value decomposition of `a`, `[.., m, n]`,
/// a float or complex type (`lax.linalg.svd`): `a = u·diag(s)·vh` with `u`'s columns and
/// `vh`'s rows orthonormal and `s` real, non-negative and descending (`k = min(m, n)` of
/// them). With `full_matrices`, `u` is `m × m` and `vh` is `n × n` (their extra columns and
/// rows an orthonormal completion); without, `u` is `m × k` and `vh` is `k × n`. Singular
/// vectors are unique up to a common phase per pair: each row of `vh` has its entry of largest
/// magnitude (the first of equals) real and positive.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Svd {
    pub part: SvdPart,
    /// Only for `u` and `vh` (the singular values do not depend on it).
    pub full_matrices: bool,
}

/// The result an `svd` instruction yields.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum SvdPart {
    /// `u`, `a`'s type.
    U,
    /// `s`, `[.., k]`, of the real type (f32 for c64).
    Values,
    /// `vh`, `a`'s type.
    Vh,
}

impl SvdPart {
    pub const ALL: [SvdPart; 3] = [SvdPart::U, SvdPart::Values, SvdPart::Vh];

    /// The op's name in the text format.
    pub fn name(self) -> &'static str {
        match self {
            SvdPart::U => "svd_u",
            SvdPart::Values => "svd_values",
            SvdPart::Vh => "svd_vh",
        }
    }
}

impl Svd {
    /// The result's trailing dimensions for an `m × n` matrix: `[k]` for the values.
    pub fn dims(&self, m: usize, n: usize) -> Vec<usize> {
        let k = m.min(n);
        match (self.part, self.full_matrices) {
            (SvdPart::Values, _) => vec![k],
            (SvdPart::U, true) => vec![m, m],
            (SvdPart::U, false) => vec![m, k],
            (SvdPart::Vh, true) => vec![n, n],
            (SvdPart::Vh, false) => vec![k, n],
        }
    }
}

/// What an `eigh` instruction yields of the eigendecomposition of each Hermitian (real
/// symmetric) matrix `a`, `[.., m, m]`, read from its lower triangle (the diagonal's real
/// parts): `a = v·diag(w)·vᴴ` (`lax.linalg.eigh`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum EighPart {
    /// `w`, `[.., m]`, ascending, of the real type (f32 for c64).
    Values,
    /// `v`, `[.., m, m]`, `a`'s type: column `i` is a unit eigenvector of `w[i]`, its entry of
    /// largest magnitude (the first of equals) real and positive.
    Vectors,
}

impl EighPart {
    pub const ALL: [EighPart; 2] = [EighPart::Values, EighPart::Vectors];

    /// The op's name in the text format.
    pub fn name(self) -> &'static str {
        match self {
            EighPart::Values => "eigh_values",
            EighPart::Vectors => "eigh_vectors",
        }
    }
}

/// What a `geqrf` instruction yields of the Householder QR factorization of `a`, `[.., m, n]`,
/// a float or complex type (`lax.linalg.geqrf`), in LAPACK's compact form: the reflections
/// `qr` builds `q` and `r` from (see [`Qr`]). Reflection `j` (`k = min(m, n)` of them) is
/// `I − τ_j·v·vᴴ` with `v` 0 above row `j`, 1 at it and the packed matrix's column `j` below
/// it; `q = H(0)···H(k−1)` (`householder_product`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum GeqrfPart {
    /// `a`'s type: `r` on and above the diagonal, the reflections' vectors below it.
    Packed,
    /// `τ`, `[.., k]`, `a`'s type.
    Taus,
}

impl GeqrfPart {
    pub const ALL: [GeqrfPart; 2] = [GeqrfPart::Packed, GeqrfPart::Taus];

    /// The op's name in the text format.
    pub fn name(self) -> &'static str {
        match self {
            GeqrfPart::Packed => "geqrf",
            GeqrfPart::Taus => "geqrf_taus",
        }
    }
}

/// What an `eig` instruction yields of the eigendecomposition of each square matrix `a`,
/// `[.., m, m]`, of f32, f64, c64 or c128 (`lax.linalg.eig`), all of the complex type of `a`'s
/// precision: `a·vr = vr·diag(w)` and `vlᴴ·a = diag(w)·vlᴴ`. The eigenvalues come in the order
/// the Schur form gives them (not sorted); a real matrix's are exactly real or adjacent exact
/// conjugate pairs (the positive imaginary part first), as LAPACK's `dgeev` gives them. Each
/// eigenvector has unit norm and its entry of largest magnitude (the first of equals) real and
/// positive. A matrix with a value that is
/// not finite, or whose iteration does not converge, gives NaN throughout.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum EigPart {
    /// `w`, `[.., m]`.
    Values,
    /// `vl`, `[.., m, m]`: column `i` is a left eigenvector of `w[i]`.
    Left,
    /// `vr`, `[.., m, m]`: column `i` is a right eigenvector of `w[i]`.
    Right,
}

impl EigPart {
    pub const ALL: [EigPart; 3] = [EigPart::Values, EigPart::Left, EigPart::Right];

    /// The op's name in the text format.
    pub fn name(self) -> &'static str {
        match self {
            EigPart::Values => "eig_values",
            EigPart::Left => "eig_left",
            EigPart::Right => "eig_right",
        }
    }
}

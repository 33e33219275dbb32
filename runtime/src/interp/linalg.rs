//! `triangular_solve` by forward or back substitution, one right-hand side at a time,
//! `cholesky` row by row (Cholesky–Banachiewicz), `lu` by Gaussian elimination with partial
//! pivoting (LAPACK's `getf2`), `qr` by Householder reflections (LAPACK's `geqr2`, `larfg`
//! and `org2r`), `eigh` by cyclic Jacobi rotations and `svd` by one-sided ones: real types in
//! f64 and complex ones in c128, each element rounded once at the end (as the interpreter
//! computes everything). `decompose.rs` assembles the decompositions' parts from these.

use super::complex::{narrow, widen};
use super::undefined;
use crate::{Array, RuntimeError};
use ferrax_ir::DType;
use ferrax_ir::{Complex, Elements, Scalar, TriangularSolve};
use std::ops::{Add, Div, Mul, Sub};

pub(super) type C = Complex<f64>;

/// The arithmetic substitution and factorization need, for f64 and c128.
pub(super) trait Field:
    Copy + Add<Output = Self> + Sub<Output = Self> + Mul<Output = Self> + Div<Output = Self>
{
    const ZERO: Self;
    const ONE: Self;
    fn conj(self) -> Self;
    fn real(self) -> f64;
    fn from_real(x: f64) -> Self;
    /// The size a pivot is chosen by: `|x|`, or `|re| + |im|` (LAPACK's `cabs1`).
    fn magnitude(self) -> f64;
    /// `|x|`.
    fn modulus(self) -> f64;
    fn imag(self) -> f64;
}

impl Field for f64 {
    const ZERO: f64 = 0.0;
    const ONE: f64 = 1.0;
    fn conj(self) -> f64 {
        self
    }
    fn real(self) -> f64 {
        self
    }
    fn from_real(x: f64) -> f64 {
        x
    }
    fn magnitude(self) -> f64 {
        self.abs()
    }
    fn modulus(self) -> f64 {
        self.abs()
    }
    fn imag(self) -> f64 {
        0.0
    }
}

impl Field for C {
    const ZERO: C = C::new(0.0, 0.0);
    const ONE: C = C::new(1.0, 0.0);
    fn conj(self) -> C {
        Complex::conj(&self)
    }
    fn real(self) -> f64 {
        self.re
    }
    fn from_real(x: f64) -> C {
        C::new(x, 0.0)
    }
    fn magnitude(self) -> f64 {
        self.re.abs() + self.im.abs()
    }
    fn modulus(self) -> f64 {
        self.norm()
    }
    fn imag(self) -> f64 {
        self.im
    }
}

/// `x` solving `op(a)·x = b` or `x·op(a) = b` for every batch of `a` (`[batches, m, m]`) and
/// `b` (`[batches, m, n]` or `[batches, n, m]`).
fn solve<T: Field>(s: &TriangularSolve, a: &[T], b: &[T], m: usize, n: usize) -> Vec<T> {
    let mut out = vec![T::ZERO; b.len()];
    if m == 0 || n == 0 {
        return out;
    }
    let batches = a.len() / (m * m);
    // The matrix M = op(a) that multiplies x. On the right, x·M = b is Mᵀ·xᵀ = bᵀ, so Mᵀ is
    // used and its triangle flips.
    let left = s.left_side;
    let lower = s.solves_lower() == left;
    let mut matrix = vec![T::ZERO; m * m];
    let mut column = vec![T::ZERO; m];
    for batch in 0..batches {
        let a = &a[batch * m * m..(batch + 1) * m * m];
        for (r, row) in matrix.chunks_mut(m).enumerate() {
            for (c, v) in row.iter_mut().enumerate() {
                let of_m = if left { (r, c) } else { (c, r) };
                let (i, j) = if s.transpose_a {
                    (of_m.1, of_m.0)
                } else {
                    of_m
                };
                let value = match (s.reads(i, j), i == j) {
                    (true, _) => a[i * m + j],
                    (false, true) => T::ONE,
                    (false, false) => T::ZERO,
                };
                *v = if s.conjugate_a { value.conj() } else { value };
            }
        }
        let rhs = &b[batch * m * n..(batch + 1) * m * n];
        let x = &mut out[batch * m * n..(batch + 1) * m * n];
        // Each right-hand side: column k of b (left) or row k (right).
        let at = |i: usize, k: usize| if left { i * n + k } else { k * m + i };
        for k in 0..n {
            for step in 0..m {
                let i = if lower { step } else { m - 1 - step };
                let known = if lower { 0..i } else { i + 1..m };
                let mut acc = rhs[at(i, k)];
                for j in known {
                    acc = acc - matrix[i * m + j] * column[j];
                }
                column[i] = acc / matrix[i * m + i];
            }
            for (i, &v) in column.iter().enumerate() {
                x[at(i, k)] = v;
            }
        }
    }
    out
}

/// The lower Cholesky factor of every `m × m` matrix of `a`, reading its lower triangle: NaN
/// throughout a matrix whose pivots are not all positive (not positive definite, or NaN).
fn factor<T: Field>(a: &[T], m: usize) -> Vec<T> {
    let mut out = vec![T::ZERO; a.len()];
    if m == 0 {
        return out;
    }
    for (a, l) in a.chunks(m * m).zip(out.chunks_mut(m * m)) {
        'rows: for i in 0..m {
            for j in 0..=i {
                let mut s = a[i * m + j];
                for k in 0..j {
                    s = s - l[i * m + k] * l[j * m + k].conj();
                }
                if i != j {
                    l[i * m + j] = s / l[j * m + j];
                    continue;
                }
                let pivot = s.real();
                // Not positive, or NaN.
                if pivot.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) {
                    l.fill(T::from_real(f64::NAN));
                    break 'rows;
                }
                l[i * m + i] = T::from_real(pivot.sqrt());
            }
        }
    }
    out
}

/// Factors every `m × n` matrix of `a` in place (`l` below the diagonal, `u` on and above it)
/// and returns each one's pivot rows, `min(m, n)` per matrix. A step's pivot is the first
/// largest candidate (a NaN is never larger, as in LAPACK); a zero pivot scales nothing.
pub(super) fn factor_lu<T: Field>(a: &mut [T], m: usize, n: usize) -> Vec<usize> {
    let k = m.min(n);
    let mut pivots = Vec::new();
    if k == 0 {
        return pivots;
    }
    for a in a.chunks_mut(m * n) {
        for j in 0..k {
            let mut pivot = j;
            let mut largest = a[j * n + j].magnitude();
            for i in j + 1..m {
                let size = a[i * n + j].magnitude();
                if size > largest {
                    (pivot, largest) = (i, size);
                }
            }
            pivots.push(pivot);
            if pivot != j {
                for c in 0..n {
                    a.swap(j * n + c, pivot * n + c);
                }
            }
            let diagonal = a[j * n + j];
            if largest == 0.0 {
                continue;
            }
            for i in j + 1..m {
                let factor = a[i * n + j] / diagonal;
                a[i * n + j] = factor;
                for c in j + 1..n {
                    a[i * n + c] = a[i * n + c] - factor * a[j * n + c];
                }
            }
        }
    }
    pivots
}

/// The row permutations the pivots of `batches` matrices of `m` rows make (`k` pivots each):
/// row `i` of `p·a` is row `permutation[i]` of `a`.
pub(super) fn permutations(pivots: &[usize], batches: usize, m: usize, k: usize) -> Vec<usize> {
    let mut out = Vec::with_capacity(batches * m);
    for batch in 0..batches {
        let start = out.len();
        out.extend(0..m);
        for (j, &p) in pivots[batch * k..(batch + 1) * k].iter().enumerate() {
            out.swap(start + j, start + p);
        }
    }
    out
}

/// Overwrites the `m × n` matrix `a` with its Householder QR factorization in LAPACK's compact
/// form (`geqr2`) and returns `τ` (`min(m, n)` of them). Reflection `j` is `I − τ·v·vᴴ` with
/// `v_j = 1`, mapping column `j` from the diagonal down onto `β = −sign(re(a_jj))·‖column‖`
/// (`larfg`; none where nothing lies below a real diagonal entry: τ = 0); `β` is left on the
/// diagonal and `v` below it.
pub(super) fn householder<T: Field>(a: &mut [T], m: usize, n: usize) -> Vec<T> {
    let k = m.min(n);
    let mut taus = vec![T::ZERO; k];
    for j in 0..k {
        let alpha = a[j * n + j];
        let below = (j + 1..m).fold(0.0f64, |s, i| s.hypot(a[i * n + j].modulus()));
        if below == 0.0 && alpha.imag() == 0.0 {
            continue;
        }
        let beta = -alpha.modulus().hypot(below).copysign(alpha.real());
        let beta_t = T::from_real(beta);
        taus[j] = (beta_t - alpha) / beta_t;
        let scale = T::ONE / (alpha - beta_t);
        for i in j + 1..m {
            a[i * n + j] = a[i * n + j] * scale;
        }
        a[j * n + j] = beta_t;
        // Hᴴ applied to the columns on the right.
        let below: Vec<T> = (j + 1..m).map(|i| a[i * n + j]).collect();
        reflect(a, n, j + 1..n, j, &below, taus[j].conj());
    }
    taus
}

/// The first `cols` columns (`cols ≤ m`) of `H(0)·H(1)···H(k−1)`, `m × cols`, for the
/// reflections packed below the diagonal of the `m × n` matrix `a` with `τ` `taus` (`k` of
/// them, `k ≤ min(m, n)`): LAPACK's `org2r`, applied to the identity's columns, the last
/// reflection first (reflection `j` leaves the columns before `j` as they are).
pub(super) fn reflections_product<T: Field>(
    a: &[T],
    m: usize,
    n: usize,
    taus: &[T],
    cols: usize,
) -> Vec<T> {
    let mut q = vec![T::ZERO; m * cols];
    for d in 0..m.min(cols) {
        q[d * cols + d] = T::ONE;
    }
    for (j, &tau) in taus.iter().enumerate().rev() {
        let below: Vec<T> = (j + 1..m).map(|i| a[i * n + j]).collect();
        reflect(&mut q, cols, j.min(cols)..cols, j, &below, tau);
    }
    q
}

/// `x ← (I − τ·v·vᴴ)·x` on `columns` of `x` (rows `width` wide), where `v` is 1 at row `j`,
/// `below` under it and 0 above.
fn reflect<T: Field>(
    x: &mut [T],
    width: usize,
    columns: std::ops::Range<usize>,
    j: usize,
    below: &[T],
    tau: T,
) {
    for c in columns {
        let mut dot = x[j * width + c];
        for (i, &v) in below.iter().enumerate() {
            dot = dot + v.conj() * x[(j + 1 + i) * width + c];
        }
        let step = tau * dot;
        x[j * width + c] = x[j * width + c] - step;
        for (i, &v) in below.iter().enumerate() {
            let at = (j + 1 + i) * width + c;
            x[at] = x[at] - v * step;
        }
    }
}

/// Sweeps after which Jacobi's method stops even if some rotation is still due; it converges
/// quadratically, in well under 20 sweeps for any finite matrix.
const MAX_SWEEPS: usize = 60;

/// The eigenvalues (ascending) and unit eigenvectors (columns, each one's entry of largest
/// magnitude made real and positive) of the Hermitian `m × m` matrix `a`'s lower triangle
/// stands for, by cyclic Jacobi rotations: each turns the pair (`p`, `q`) so that `h_pq`
/// becomes 0, first taking `h_pq`'s phase onto row `q`, then the real rotation of the 2 × 2
/// symmetric problem (Numerical Recipes' `jacobi`). NaN throughout for a matrix with a value
/// that is not finite.
pub(super) fn eigen<T: Field>(a: &[T], m: usize) -> (Vec<f64>, Vec<T>) {
    let mut h = vec![T::ZERO; m * m];
    for i in 0..m {
        for j in 0..i {
            h[i * m + j] = a[i * m + j];
            h[j * m + i] = a[i * m + j].conj();
        }
        h[i * m + i] = T::from_real(a[i * m + i].real());
    }
    if h.iter().any(|x| !x.modulus().is_finite()) {
        return (vec![f64::NAN; m], vec![T::from_real(f64::NAN); m * m]);
    }
    let mut v = vec![T::ZERO; m * m];
    for d in 0..m {
        v[d * m + d] = T::ONE;
    }
    // x ← x·J on columns p and q (J = [[jpp, jpq], [jqp, jqq]] in that plane).
    let columns = |x: &mut [T], p: usize, q: usize, j: [T; 4]| {
        for k in 0..m {
            let (a, b) = (x[k * m + p], x[k * m + q]);
            x[k * m + p] = a * j[0] + b * j[2];
            x[k * m + q] = a * j[1] + b * j[3];
        }
    };
    for sweep in 0..MAX_SWEEPS {
        let mut rotated = false;
        for p in 0..m {
            for q in p + 1..m {
                let apq = h[p * m + q];
                let r = apq.modulus();
                let (app, aqq) = (h[p * m + p].real(), h[q * m + q].real());
                let negligible = 100.0 * r;
                if r == 0.0
                    || (sweep > 3
                        && negligible + app.abs() == app.abs()
                        && negligible + aqq.abs() == aqq.abs())
                {
                    h[p * m + q] = T::ZERO;
                    h[q * m + p] = T::ZERO;
                    continue;
                }
                rotated = true;
                let phase = apq.conj() / T::from_real(r);
                let theta = (aqq - app) / (2.0 * r);
                let t = match theta.abs() > 1e150 {
                    true => 0.5 / theta,
                    false => 1f64.copysign(theta) / (theta.abs() + theta.hypot(1.0)),
                };
                let c = 1.0 / t.hypot(1.0);
                let s = t * c;
                let (c_t, s_t) = (T::from_real(c), T::from_real(s));
                let j = [c_t, s_t, T::ZERO - s_t * phase, c_t * phase];
                columns(&mut h, p, q, j);
                // h ← Jᴴ·h on rows p and q.
                for k in 0..m {
                    let (x, y) = (h[p * m + k], h[q * m + k]);
                    h[p * m + k] = j[0].conj() * x + j[2].conj() * y;
                    h[q * m + k] = j[1].conj() * x + j[3].conj() * y;
                }
                h[p * m + q] = T::ZERO;
                h[q * m + p] = T::ZERO;
                h[p * m + p] = T::from_real(h[p * m + p].real());
                h[q * m + q] = T::from_real(h[q * m + q].real());
                columns(&mut v, p, q, j);
            }
        }
        if !rotated {
            break;
        }
    }
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&x, &y| h[x * m + x].real().total_cmp(&h[y * m + y].real()));
    let values = order.iter().map(|&d| h[d * m + d].real()).collect();
    let mut vectors = vec![T::ZERO; m * m];
    for (to, &from) in order.iter().enumerate() {
        let mut largest = 0;
        for k in 1..m {
            if v[k * m + from].modulus() > v[largest * m + from].modulus() {
                largest = k;
            }
        }
        let pivot = v[largest * m + from];
        let unit = pivot.conj() / T::from_real(pivot.modulus());
        for k in 0..m {
            vectors[k * m + to] = v[k * m + from] * unit;
        }
        vectors[largest * m + to] = T::from_real(pivot.modulus());
    }
    (values, vectors)
}

/// `values` (f64) rounded to `dtype`.
pub(super) fn rounded(
    values: &[f64],
    dtype: DType,
    op: &'static str,
) -> Result<Elements, RuntimeError> {
    let scalars: Vec<Scalar> = values.iter().map(|&v| Scalar::from_f64(dtype, v)).collect();
    Elements::from_scalars(dtype, &scalars).ok_or_else(|| undefined(op, dtype))
}

pub(super) fn cholesky(a: &Array) -> Result<Elements, RuntimeError> {
    let m = a.dims().last().copied().unwrap_or(0);
    let dtype = a.dtype();
    Ok(match a.elements() {
        Elements::C64(x) => {
            let x: Vec<C> = x.iter().map(|&z| widen(z)).collect();
            Elements::C64(factor(&x, m).into_iter().map(narrow).collect())
        }
        Elements::C128(x) => Elements::C128(factor(x, m)),
        x if dtype.is_float() => rounded(&factor(&x.to_f64_vec(), m), dtype, "cholesky")?,
        _ => return Err(undefined("cholesky", dtype)),
    })
}

pub(super) fn triangular_solve(
    s: &TriangularSolve,
    a: &Array,
    b: &Array,
) -> Result<Elements, RuntimeError> {
    let rank = a.dims().len();
    let m = a.dims().get(rank.wrapping_sub(1)).copied().unwrap_or(0);
    let n = match s.left_side {
        true => b.dims().last(),
        false => b.dims().get(rank.wrapping_sub(2)),
    }
    .copied()
    .unwrap_or(0);
    let dtype = a.dtype();
    Ok(match (a.elements(), b.elements()) {
        (Elements::C64(x), Elements::C64(y)) => {
            let (x, y): (Vec<C>, Vec<C>) = (
                x.iter().map(|&z| widen(z)).collect(),
                y.iter().map(|&z| widen(z)).collect(),
            );
            Elements::C64(solve(s, &x, &y, m, n).into_iter().map(narrow).collect())
        }
        (Elements::C128(x), Elements::C128(y)) => Elements::C128(solve(s, x, y, m, n)),
        (x, y) if dtype.is_float() && y.dtype() == dtype => rounded(
            &solve(s, &x.to_f64_vec(), &y.to_f64_vec(), m, n),
            dtype,
            "triangular_solve",
        )?,
        _ => return Err(undefined("triangular_solve", dtype)),
    })
}

/// The first `n` columns of the product of the Householder reflections of every matrix of `a`
/// (`[.., m, n]`, `m ≥ n`) with `τ` `taus` (`[.., k]`, `k ≤ n`).
pub(super) fn householder_product(a: &Array, taus: &Array) -> Result<Elements, RuntimeError> {
    let name = "householder_product";
    let dims = a.dims();
    let rank = dims.len();
    let dtype = a.dtype();
    let (m, n, k) = match (rank, taus.dims().last()) {
        (2.., Some(&k)) => (dims[rank - 2], dims[rank - 1], k),
        _ => return Err(undefined(name, dtype)),
    };
    fn each<T: Field>(a: &[T], taus: &[T], m: usize, n: usize, k: usize) -> Vec<T> {
        let batches = a.len().checked_div(m * n).unwrap_or(0);
        (0..batches)
            .flat_map(|b| {
                let taus = &taus[b * k..(b + 1) * k];
                reflections_product(&a[b * m * n..(b + 1) * m * n], m, n, taus, n)
            })
            .collect()
    }
    Ok(match (a.elements(), taus.elements()) {
        (Elements::C64(x), Elements::C64(t)) => {
            let x: Vec<C> = x.iter().map(|&z| widen(z)).collect();
            let t: Vec<C> = t.iter().map(|&z| widen(z)).collect();
            Elements::C64(each(&x, &t, m, n, k).into_iter().map(narrow).collect())
        }
        (Elements::C128(x), Elements::C128(t)) => Elements::C128(each(x, t, m, n, k)),
        (x, t) if dtype.is_float() => {
            let q = each(&x.to_f64_vec(), &t.to_f64_vec(), m, n, k);
            rounded(&q, dtype, name)?
        }
        _ => return Err(undefined(name, dtype)),
    })
}

/// `x`'s columns `p` and `q` (of `cols` columns) ← `x·J` in that plane (`J = [[jpp, jpq],
/// [jqp, jqq]]`).
fn rotate_columns<T: Field>(x: &mut [T], cols: usize, p: usize, q: usize, j: [T; 4]) {
    for row in x.chunks_mut(cols) {
        let (a, b) = (row[p], row[q]);
        row[p] = a * j[0] + b * j[2];
        row[q] = a * j[1] + b * j[3];
    }
}

/// `Σ conj(x_kp)·x_kq` over the rows of `x` (`cols` columns).
fn column_product<T: Field>(x: &[T], cols: usize, p: usize, q: usize) -> T {
    x.chunks(cols)
        .fold(T::ZERO, |acc, row| acc + row[p].conj() * row[q])
}

/// The singular values and vectors of the matrix `a` of `n` columns and at least as many
/// rows, by one-sided Jacobi
/// rotations (Hestenes): columns are rotated pairwise, each pair's phase first, until all are
/// orthogonal; then `a·v = w` with `w`'s column norms the singular values. Returns the values
/// (descending), the unit left vectors as columns (zero where the value is zero) and the right
/// vectors (the columns of a unitary `n × n` matrix), each as a list of columns.
fn hestenes<T: Field>(a: &[T], n: usize) -> (Vec<f64>, Vec<Vec<T>>, Vec<Vec<T>>) {
    if n == 0 {
        return (Vec::new(), Vec::new(), Vec::new());
    }
    let mut w = a.to_vec();
    let mut v = vec![T::ZERO; n * n];
    for d in 0..n {
        v[d * n + d] = T::ONE;
    }
    for _ in 0..MAX_SWEEPS {
        let mut rotated = false;
        for p in 0..n {
            for q in p + 1..n {
                let alpha = column_product(&w, n, p, p).real();
                let beta = column_product(&w, n, q, q).real();
                let gamma = column_product(&w, n, p, q);
                let r = gamma.modulus();
                if r == 0.0 || r <= f64::EPSILON * (alpha * beta).sqrt() {
                    continue;
                }
                rotated = true;
                let phase = gamma.conj() / T::from_real(r);
                let zeta = (beta - alpha) / (2.0 * r);
                let t = match zeta.abs() > 1e150 {
                    true => 0.5 / zeta,
                    false => 1f64.copysign(zeta) / (zeta.abs() + zeta.hypot(1.0)),
                };
                let c = 1.0 / t.hypot(1.0);
                let (c, s) = (T::from_real(c), T::from_real(t * c));
                let j = [c, s, T::ZERO - s * phase, c * phase];
                rotate_columns(&mut w, n, p, q, j);
                rotate_columns(&mut v, n, p, q, j);
            }
        }
        if !rotated {
            break;
        }
    }
    let column = |x: &[T], j: usize| -> Vec<T> { x.chunks(n).map(|row| row[j]).collect() };
    let norms: Vec<f64> = (0..n)
        .map(|j| column_product(&w, n, j, j).real().sqrt())
        .collect();
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&x, &y| norms[y].total_cmp(&norms[x]));
    let values = order.iter().map(|&j| norms[j]).collect();
    let left = order
        .iter()
        .map(|&j| {
            let scale = T::from_real(if norms[j] > 0.0 { 1.0 / norms[j] } else { 0.0 });
            column(&w, j).into_iter().map(|x| x * scale).collect()
        })
        .collect();
    let right = order.iter().map(|&j| column(&v, j)).collect();
    (values, left, right)
}

/// `columns` (orthonormal vectors of length `len`, some of them zero) made an orthonormal set
/// of `count`: the zero ones replaced and new ones added from the orthogonal complement of the
/// others, the last columns of the full `q` of their Householder QR factorization.
fn complete<T: Field>(columns: &mut Vec<Vec<T>>, len: usize, count: usize) {
    let kept: Vec<bool> = columns
        .iter()
        .map(|c| c.iter().any(|x| x.modulus() > 0.0))
        .collect();
    let r = kept.iter().filter(|&&k| k).count();
    if r == count && columns.len() == count {
        return;
    }
    let q = match r {
        0 => {
            let mut identity = vec![T::ZERO; len * len];
            for d in 0..len {
                identity[d * len + d] = T::ONE;
            }
            identity
        }
        _ => {
            let mut b = vec![T::ZERO; len * r];
            for (j, c) in columns
                .iter()
                .zip(&kept)
                .filter(|(_, &k)| k)
                .map(|(c, _)| c)
                .enumerate()
            {
                for (i, &x) in c.iter().enumerate() {
                    b[i * r + j] = x;
                }
            }
            // The full q of b's QR.
            let taus = householder(&mut b, len, r);
            reflections_product(&b, len, r, &taus, len)
        }
    };
    let mut spare = (r..len).map(|j| (0..len).map(|i| q[i * len + j]).collect::<Vec<T>>());
    columns.resize(count, Vec::new());
    for (j, column) in columns.iter_mut().enumerate() {
        if !kept.get(j).copied().unwrap_or(false) {
            *column = spare.next().unwrap_or_else(|| vec![T::ZERO; len]);
        }
    }
}

/// The SVD of the `m × n` matrix `a`: the values, `u` (`m × m` or `m × k`) and `vh` (`n × n` or
/// `k × n`), row-major, the phase of each pair chosen so that the row of `vh` has its entry of
/// largest magnitude real and positive. NaN throughout for a matrix with a value that is not
/// finite.
pub(super) fn singular<T: Field>(
    a: &[T],
    m: usize,
    n: usize,
    full: bool,
) -> (Vec<f64>, Vec<T>, Vec<T>) {
    let k = m.min(n);
    let (u_cols, vh_rows) = if full { (m, n) } else { (k, k) };
    if a.iter().any(|x| !x.modulus().is_finite()) {
        let nan = T::from_real(f64::NAN);
        return (
            vec![f64::NAN; k],
            vec![nan; m * u_cols],
            vec![nan; vh_rows * n],
        );
    }
    let (values, mut left, mut right) = if m >= n {
        hestenes(a, n)
    } else {
        // `aᴴ = u'·Σ·v'ᴴ`, so `a = v'·Σ·u'ᴴ`.
        let mut t = vec![T::ZERO; n * m];
        for i in 0..m {
            for j in 0..n {
                t[j * m + i] = a[i * n + j].conj();
            }
        }
        let (values, left, right) = hestenes(&t, m);
        (values, right, left)
    };
    complete(&mut left, m, k);
    complete(&mut right, n, k);
    for (u, v) in left.iter_mut().zip(right.iter_mut()) {
        let mut largest = 0;
        for i in 1..n {
            if v[i].modulus() > v[largest].modulus() {
                largest = i;
            }
        }
        let pivot = v[largest];
        if pivot.modulus() > 0.0 {
            let unit = pivot.conj() / T::from_real(pivot.modulus());
            for x in u.iter_mut().chain(v.iter_mut()) {
                *x = *x * unit;
            }
            v[largest] = T::from_real(pivot.modulus());
        }
    }
    complete(&mut left, m, u_cols);
    complete(&mut right, n, vh_rows);
    let mut u = vec![T::ZERO; m * u_cols];
    for (j, c) in left.iter().enumerate() {
        for (i, &x) in c.iter().enumerate() {
            u[i * u_cols + j] = x;
        }
    }
    let vh = right
        .iter()
        .flat_map(|r| r.iter().map(|x| x.conj()))
        .collect();
    (values, u, vh)
}

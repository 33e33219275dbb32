//! `triangular_solve` by forward or back substitution, one right-hand side at a time,
//! `cholesky` row by row (Cholesky–Banachiewicz) and `lu` by Gaussian elimination with partial
//! pivoting (LAPACK's `getf2`): real types in f64 and complex ones in c128, each element
//! rounded once at the end (as the interpreter computes everything).

use super::complex::{narrow, widen};
use super::undefined;
use crate::{Array, RuntimeError};
use ferrax_ir::DType;
use ferrax_ir::{Complex, Elements, LuPart, Scalar, TriangularSolve};
use std::ops::{Div, Mul, Sub};

type C = Complex<f64>;

/// The arithmetic substitution and factorization need, for f64 and c128.
trait Field: Copy + Sub<Output = Self> + Mul<Output = Self> + Div<Output = Self> {
    const ZERO: Self;
    const ONE: Self;
    fn conj(self) -> Self;
    fn real(self) -> f64;
    fn from_real(x: f64) -> Self;
    /// The size a pivot is chosen by: `|x|`, or `|re| + |im|` (LAPACK's `cabs1`).
    fn magnitude(self) -> f64;
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
fn factor_lu<T: Field>(a: &mut [T], m: usize, n: usize) -> Vec<usize> {
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
fn permutations(pivots: &[usize], batches: usize, m: usize, k: usize) -> Vec<usize> {
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

/// `values` (f64) rounded to `dtype`.
fn rounded(values: &[f64], dtype: DType, op: &'static str) -> Result<Elements, RuntimeError> {
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

/// Part `part` of the LU factorization of every matrix of `a` (`[.., m, n]`).
pub(super) fn lu(part: LuPart, a: &Array) -> Result<Elements, RuntimeError> {
    let dims = a.dims();
    let rank = dims.len();
    let (m, n) = match rank {
        0 | 1 => return Err(undefined(part.name(), a.dtype())),
        _ => (dims[rank - 2], dims[rank - 1]),
    };
    let dtype = a.dtype();
    let (factors, pivots) = match a.elements() {
        Elements::C64(x) => {
            let mut x: Vec<C> = x.iter().map(|&z| widen(z)).collect();
            let pivots = factor_lu(&mut x, m, n);
            (Elements::C64(x.into_iter().map(narrow).collect()), pivots)
        }
        Elements::C128(x) => {
            let mut x = x.clone();
            let pivots = factor_lu(&mut x, m, n);
            (Elements::C128(x), pivots)
        }
        x if dtype.is_float() => {
            let mut x = x.to_f64_vec();
            let pivots = factor_lu(&mut x, m, n);
            (rounded(&x, dtype, part.name())?, pivots)
        }
        _ => return Err(undefined(part.name(), dtype)),
    };
    let rows = |v: Vec<usize>| Elements::I32(v.into_iter().map(|r| r as i32).collect());
    Ok(match part {
        LuPart::Factors => factors,
        LuPart::Pivots => rows(pivots),
        LuPart::Permutation => {
            let batches = dims[..rank - 2].iter().product();
            rows(permutations(&pivots, batches, m, m.min(n)))
        }
    })
}

//! Every part of one decomposition at once (`lu`, `qr`, `eigh`, `svd`, `geqrf`, `eig`): each
//! part is its own instruction, but one factorization gives them all, so a run that reads
//! several parts of one operand computes it once (`shared.rs`), and one part is the whole
//! decomposition's, picked. Real types compute in f64 and complex ones in c128, each part
//! rounded once to its type.

use super::complex::{narrow, widen};
use super::linalg::{
    eigen, factor_lu, householder, permutations, reflections_product, rounded, singular, Field, C,
};
use super::{eig, undefined};
use crate::{Array, RuntimeError};
use ferrax_ir::{DType, EigPart, EighPart, Elements, GeqrfPart, LuPart, Op, QrPart, SvdPart};

/// One part as the generic code computes it: in the working type `T`, of the real type
/// (singular values, eigenvalues), or row numbers (pivots, permutations; i32).
pub(super) enum Part<T> {
    Typed(Vec<T>),
    Real(Vec<f64>),
    Rows(Vec<usize>),
}

fn rows(v: Vec<usize>) -> Elements {
    Elements::I32(v.into_iter().map(|r| r as i32).collect())
}

/// The parts `reals` (real types, in f64) or `complexes` (complex types, in c128) compute from
/// `a`'s elements, each rounded to its type: `a`'s, or its real type for [`Part::Real`].
fn parts(
    a: &Array,
    name: &'static str,
    reals: impl FnOnce(&[f64]) -> Vec<Part<f64>>,
    complexes: impl FnOnce(&[C]) -> Vec<Part<C>>,
) -> Result<Vec<Elements>, RuntimeError> {
    let dtype = a.dtype();
    match a.elements() {
        Elements::C64(x) => {
            let x: Vec<C> = x.iter().map(|&z| widen(z)).collect();
            complexes(&x)
                .into_iter()
                .map(|p| match p {
                    Part::Typed(v) => Ok(Elements::C64(v.into_iter().map(narrow).collect())),
                    Part::Real(v) => rounded(&v, DType::F32, name),
                    Part::Rows(v) => Ok(rows(v)),
                })
                .collect()
        }
        Elements::C128(x) => Ok(complexes(x)
            .into_iter()
            .map(|p| match p {
                Part::Typed(v) => Elements::C128(v),
                Part::Real(v) => Elements::F64(v),
                Part::Rows(v) => rows(v),
            })
            .collect()),
        x if dtype.is_float() => reals(&x.to_f64_vec())
            .into_iter()
            .map(|p| match p {
                Part::Typed(v) | Part::Real(v) => rounded(&v, dtype, name),
                Part::Rows(v) => Ok(rows(v)),
            })
            .collect(),
        _ => Err(undefined(name, dtype)),
    }
}

/// `a`'s batch count and matrix sizes (`[.., m, n]`).
fn matrices(a: &Array, name: &'static str) -> Result<(usize, usize, usize), RuntimeError> {
    let dims = a.dims();
    match dims.len() {
        0 | 1 => Err(undefined(name, a.dtype())),
        rank => Ok((
            dims[..rank - 2].iter().product(),
            dims[rank - 2],
            dims[rank - 1],
        )),
    }
}

/// LU: the packed factors, the pivots and the permutation.
fn lu<T: Field>(a: &[T], batches: usize, m: usize, n: usize) -> Vec<Part<T>> {
    let mut factors = a.to_vec();
    let pivots = factor_lu(&mut factors, m, n);
    let permutation = permutations(&pivots, batches, m, m.min(n));
    vec![
        Part::Typed(factors),
        Part::Rows(pivots),
        Part::Rows(permutation),
    ]
}

/// QR: `q` and `r`, reduced or full.
fn qr<T: Field>(a: &[T], batches: usize, m: usize, n: usize, full: bool) -> Vec<Part<T>> {
    let k = m.min(n);
    let (q_cols, r_rows) = if full { (m, m) } else { (k, k) };
    let (mut q, mut r) = (Vec::new(), Vec::new());
    for b in 0..batches {
        let mut matrix = a[b * m * n..(b + 1) * m * n].to_vec();
        let taus = householder(&mut matrix, m, n);
        q.extend(reflections_product(&matrix, m, n, &taus, q_cols));
        for row in 0..r_rows {
            for col in 0..n {
                r.push(if row <= col {
                    matrix[row * n + col]
                } else {
                    T::ZERO
                });
            }
        }
    }
    vec![Part::Typed(q), Part::Typed(r)]
}

/// The compact QR: the packed factors and `τ`.
fn geqrf<T: Field>(a: &[T], batches: usize, m: usize, n: usize) -> Vec<Part<T>> {
    let mut packed = a.to_vec();
    let mut taus = Vec::new();
    for matrix in packed.chunks_mut((m * n).max(1)).take(batches) {
        taus.extend(householder(matrix, m, n));
    }
    if m * n == 0 {
        taus.clear();
    }
    vec![Part::Typed(packed), Part::Typed(taus)]
}

/// The Hermitian eigendecomposition: the values and the vectors.
fn eigh<T: Field>(a: &[T], batches: usize, m: usize) -> Vec<Part<T>> {
    let (mut values, mut vectors) = (Vec::new(), Vec::new());
    if m > 0 {
        for matrix in a.chunks(m * m).take(batches) {
            let (w, v) = eigen(matrix, m);
            values.extend(w);
            vectors.extend(v);
        }
    }
    vec![Part::Real(values), Part::Typed(vectors)]
}

/// The SVD: `u`, the values and `vh`, reduced or full.
fn svd<T: Field>(a: &[T], batches: usize, m: usize, n: usize, full: bool) -> Vec<Part<T>> {
    let (mut s, mut u, mut vh) = (Vec::new(), Vec::new(), Vec::new());
    for b in 0..batches {
        let (values, left, right) = singular(&a[b * m * n..(b + 1) * m * n], m, n, full);
        s.extend(values);
        u.extend(left);
        vh.extend(right);
    }
    vec![Part::Typed(u), Part::Real(s), Part::Typed(vh)]
}

/// Where `op` is a part of a decomposition, the part's position among [`all_parts`]'.
pub(crate) fn part_of(op: &Op) -> Option<usize> {
    let at = |found: Option<usize>| found.unwrap_or(0);
    match op {
        Op::Lu(p) => Some(at(LuPart::ALL.iter().position(|x| x == p))),
        Op::Qr(qr) => Some(at(QrPart::ALL.iter().position(|x| *x == qr.part))),
        Op::Eigh(p) => Some(at(EighPart::ALL.iter().position(|x| x == p))),
        Op::Svd(svd) => Some(at(SvdPart::ALL.iter().position(|x| *x == svd.part))),
        Op::Geqrf(p) => Some(at(GeqrfPart::ALL.iter().position(|x| x == p))),
        Op::Eig(p) => Some(at(EigPart::ALL.iter().position(|x| x == p))),
        _ => None,
    }
}

/// Every part of the decomposition of `a` that `key` is a part of (its attributes taken from
/// `key`), in the order of the part enums' `ALL`.
pub(crate) fn all_parts(key: &Op, a: &Array) -> Result<Vec<Elements>, RuntimeError> {
    let name = key.name();
    if let Op::Eig(_) = key {
        return eig::all_parts(a);
    }
    let (batches, m, n) = matrices(a, name)?;
    match key {
        Op::Lu(_) => parts(a, name, |x| lu(x, batches, m, n), |x| lu(x, batches, m, n)),
        Op::Qr(q) => {
            let full = q.full_matrices;
            parts(
                a,
                name,
                |x| qr(x, batches, m, n, full),
                |x| qr(x, batches, m, n, full),
            )
        }
        Op::Eigh(_) => parts(a, name, |x| eigh(x, batches, m), |x| eigh(x, batches, m)),
        Op::Svd(s) => {
            let full = s.full_matrices && s.part != SvdPart::Values;
            parts(
                a,
                name,
                |x| svd(x, batches, m, n, full),
                |x| svd(x, batches, m, n, full),
            )
        }
        Op::Geqrf(_) => parts(
            a,
            name,
            |x| geqrf(x, batches, m, n),
            |x| geqrf(x, batches, m, n),
        ),
        _ => Err(undefined(name, a.dtype())),
    }
}

/// Part `op` of its decomposition of `a`.
pub(super) fn one_part(op: &Op, a: &Array) -> Result<Elements, RuntimeError> {
    let at = part_of(op).ok_or_else(|| undefined(op.name(), a.dtype()))?;
    let mut all = all_parts(op, a)?;
    if at >= all.len() {
        return Err(undefined(op.name(), a.dtype()));
    }
    Ok(all.swap_remove(at))
}

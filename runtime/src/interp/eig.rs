//! `eig`: eigenvalues and eigenvectors of general square matrices (`lax.linalg.eig`), by the
//! steps of LAPACK's `geev`, in c128 and rounded once: balancing (`balance.rs`), reduction to upper
//! Hessenberg form by Householder reflections (`gehrd`), the Schur form `a = z·t·zᴴ` by
//! shifted QR steps on the active window (`lahqr`: complex matrices by Wilkinson's single
//! shift, an exceptional shift after 10 and 20 steps without a deflation; real ones in real
//! arithmetic, `real_schur.rs`, each 2 × 2 block then made triangular by one rotation), then
//! each eigenvector by substitution in the triangular `t` (`trevc`), turned back by `z` and the
//! balancing.
//! A real matrix's conjugate pairs are exact conjugates (the positive imaginary part first),
//! its real eigenvalues and their vectors exactly real, as LAPACK's `dgeev` gives them.

use super::balance::{balance, Balance};
use super::complex::{narrow, widen};
use super::real_schur::real_schur;
use super::undefined;
use crate::{Array, RuntimeError};
use ferrax_ir::{Complex, DType, Elements};

type C = Complex<f64>;

const ZERO: C = C::new(0.0, 0.0);
const ONE: C = C::new(1.0, 0.0);

/// QR steps without a deflation after which the iteration gives up (NaN results); it converges
/// quadratically, in a few steps per eigenvalue for any finite matrix.
const MAX_STEPS: usize = 100;

/// Substitution rescales a vector whose entry grows past this (the vector is normalized at
/// the end, so only its direction matters).
const RESCALE: f64 = 1e150;

/// `x / d` without squaring `d`'s parts (which underflow for tiny `d`, where `Complex`'s
/// division gives NaN).
fn quotient(x: C, d: C) -> C {
    let size = d.norm();
    x * (d.conj() / size) / size
}

/// `|re| + |im|`, the size LAPACK's deflation tests use.
fn cabs1(z: C) -> f64 {
    z.re.abs() + z.im.abs()
}

/// One matrix's eigenvalues and left and right eigenvectors (`m × m`, row-major, a vector per
/// column).
struct Eigen {
    values: Vec<C>,
    left: Vec<C>,
    right: Vec<C>,
}

impl Eigen {
    fn nan(m: usize) -> Eigen {
        let nan = C::new(f64::NAN, f64::NAN);
        Eigen {
            values: vec![nan; m],
            left: vec![nan; m * m],
            right: vec![nan; m * m],
        }
    }
}

/// Reduces `h` (`m × m`) to upper Hessenberg form `zᴴ·h·z` in place and returns `z`.
fn hessenberg(h: &mut [C], m: usize) -> Vec<C> {
    let mut z = vec![ZERO; m * m];
    for d in 0..m {
        z[d * m + d] = ONE;
    }
    for j in 0..m.saturating_sub(2) {
        let alpha = h[(j + 1) * m + j];
        let below = (j + 2..m).fold(0.0f64, |s, i| s.hypot(h[i * m + j].norm()));
        if below == 0.0 && alpha.im == 0.0 {
            continue;
        }
        let beta = C::new(-alpha.norm().hypot(below).copysign(alpha.re), 0.0);
        let tau = quotient(beta - alpha, beta);
        let scale = quotient(ONE, alpha - beta);
        // `v` over rows j + 1.., 1 first.
        let v: Vec<C> = std::iter::once(ONE)
            .chain((j + 2..m).map(|i| h[i * m + j] * scale))
            .collect();
        // h ← Hᴴ·h on rows j + 1.. (H = I − τ·v·vᴴ), columns j + 1..; column j is β·e.
        for c in j + 1..m {
            let dot = v
                .iter()
                .enumerate()
                .fold(ZERO, |s, (i, vi)| s + vi.conj() * h[(j + 1 + i) * m + c]);
            let step = tau.conj() * dot;
            for (i, vi) in v.iter().enumerate() {
                h[(j + 1 + i) * m + c] -= vi * step;
            }
        }
        h[(j + 1) * m + j] = beta;
        for i in j + 2..m {
            h[i * m + j] = ZERO;
        }
        // h ← h·H and z ← z·H on columns j + 1...
        for x in [&mut *h, &mut z[..]] {
            for r in 0..m {
                let row = &mut x[r * m + j + 1..(r + 1) * m];
                let dot = row.iter().zip(&v).fold(ZERO, |s, (x, vi)| s + x * vi);
                let step = tau * dot;
                for (x, vi) in row.iter_mut().zip(&v) {
                    *x -= step * vi.conj();
                }
            }
        }
    }
    z
}

/// `(c, s)`, `c` real, with `[[c, s], [−s̄, c]]·[x, y] = [r, 0]`.
fn givens(x: C, y: C) -> (f64, C) {
    if y == ZERO {
        return (1.0, ZERO);
    }
    if x == ZERO {
        return (0.0, y.conj() / y.norm());
    }
    let norm = x.norm().hypot(y.norm());
    let phase = x / x.norm();
    (x.norm() / norm, phase * y.conj() / norm)
}

/// Turns the Hessenberg `h` into the upper triangular Schur factor `t` in place, accumulating
/// the rotations into `z`; false where it does not converge.
fn schur(h: &mut [C], z: &mut [C], m: usize) -> bool {
    let ulp = f64::EPSILON;
    let norm = h.iter().fold(0.0f64, |s, x| s.max(cabs1(*x)));
    let mut hi = m;
    let mut steps = 0;
    while hi > 1 {
        // The active window is l..hi, where no subdiagonal entry is negligible.
        let mut l = hi - 1;
        while l > 0 {
            let sub = cabs1(h[l * m + l - 1]);
            let mut size = cabs1(h[(l - 1) * m + l - 1]) + cabs1(h[l * m + l]);
            if size == 0.0 {
                size = norm;
            }
            if sub <= ulp * size || sub < f64::MIN_POSITIVE {
                h[l * m + l - 1] = ZERO;
                break;
            }
            l -= 1;
        }
        if l == hi - 1 {
            hi -= 1;
            steps = 0;
            continue;
        }
        steps += 1;
        if steps > MAX_STEPS {
            return false;
        }
        let at = |r: usize, c: usize| h[r * m + c];
        let d = at(hi - 1, hi - 1);
        let shift = if steps % 10 == 0 {
            d + 0.75 * at(hi - 1, hi - 2).re.abs()
        } else {
            // The eigenvalue of the trailing 2 × 2 block nearer its last diagonal entry.
            let t = (at(hi - 2, hi - 2) - d) * 0.5;
            let root = (t * t + at(hi - 2, hi - 1) * at(hi - 1, hi - 2)).sqrt();
            let (near, far) = (t - root, t + root);
            d + if near.norm() <= far.norm() { near } else { far }
        };
        qr_step(h, z, m, l, hi, shift);
    }
    true
}

/// One explicitly shifted QR step on the window `l..hi` of `h`: `h − μ = q·r`, `h ← r·q + μ`,
/// with `q`'s rotations applied across the whole of `h` and `z`.
fn qr_step(h: &mut [C], z: &mut [C], m: usize, l: usize, hi: usize, shift: C) {
    for i in l..hi {
        h[i * m + i] -= shift;
    }
    let mut rotations = Vec::with_capacity(hi - l - 1);
    for k in l..hi - 1 {
        let (c, s) = givens(h[k * m + k], h[(k + 1) * m + k]);
        for col in k..m {
            let (p, q) = (h[k * m + col], h[(k + 1) * m + col]);
            h[k * m + col] = p * c + s * q;
            h[(k + 1) * m + col] = q * c - s.conj() * p;
        }
        h[(k + 1) * m + k] = ZERO;
        rotations.push((c, s));
    }
    for (k, &(c, s)) in (l..hi - 1).zip(&rotations) {
        let rows = (k + 2).min(hi);
        for (x, rows) in [(&mut *h, rows), (&mut *z, m)] {
            for r in 0..rows {
                let (p, q) = (x[r * m + k], x[r * m + k + 1]);
                x[r * m + k] = p * c + s.conj() * q;
                x[r * m + k + 1] = q * c - s * p;
            }
        }
    }
    for i in l..hi {
        h[i * m + i] += shift;
    }
}

/// `x / ‖x‖`, turned so that its entry of largest magnitude (the first of equals) is real and
/// positive.
fn normalized(mut x: Vec<C>) -> Vec<C> {
    let norm = x.iter().fold(0.0f64, |s, v| s.hypot(v.norm()));
    let (mut at, mut largest) = (0, -1.0);
    for (i, v) in x.iter().enumerate() {
        if v.norm() > largest {
            (at, largest) = (i, v.norm());
        }
    }
    let turn = x[at].conj() / (largest * norm);
    for v in &mut x {
        *v *= turn;
    }
    x[at].im = 0.0;
    x
}

/// `z·x` for the `m`-vector `x`.
fn times(z: &[C], x: &[C], m: usize) -> Vec<C> {
    (0..m)
        .map(|r| (0..m).fold(ZERO, |s, c| s + z[r * m + c] * x[c]))
        .collect()
}

/// Divides `x` by its largest entry's modulus where that passed [`RESCALE`].
fn rescale(x: &mut [C], size: f64) {
    if size > RESCALE {
        for v in x {
            *v /= size;
        }
    }
}

/// The eigenvectors of the upper triangular `t` (`trevc`), turned back by `z` and `balanced`
/// (`gebak`) and normalized: right ones solve
/// `(t − λ_k)·x = 0` with `x_k = 1` and zeros below; left ones `(t − λ_k)ᴴ·y = 0` with
/// `y_k = 1` and zeros above. A difference of diagonal entries below `ulp·‖t‖` (repeated
/// eigenvalues) is taken as that size instead.
fn vectors(t: &[C], z: &[C], m: usize, balanced: &Balance) -> (Vec<C>, Vec<C>) {
    let norm = t.iter().fold(0.0f64, |s, x| s.max(cabs1(*x)));
    let small = (f64::EPSILON * norm).max(f64::MIN_POSITIVE);
    let divided = |x: C, d: C| match cabs1(d) < small {
        true => x / small,
        false => quotient(x, d),
    };
    let (mut left, mut right) = (vec![ZERO; m * m], vec![ZERO; m * m]);
    for k in 0..m {
        let lambda = t[k * m + k];
        let mut x = vec![ZERO; m];
        x[k] = ONE;
        for i in (0..k).rev() {
            let sum = (i + 1..=k).fold(ZERO, |s, j| s + t[i * m + j] * x[j]);
            x[i] = divided(-sum, t[i * m + i] - lambda);
            let size = x[i].norm();
            rescale(&mut x[i..=k], size);
        }
        let mut y = vec![ZERO; m];
        y[k] = ONE;
        for i in k + 1..m {
            let sum = (k..i).fold(ZERO, |s, j| s + t[j * m + i].conj() * y[j]);
            y[i] = divided(-sum, (t[i * m + i] - lambda).conj());
            let size = y[i].norm();
            rescale(&mut y[k..=i], size);
        }
        let (x, y) = (
            balanced.right(times(z, &x, m)),
            balanced.left(times(z, &y, m)),
        );
        for (out, v) in [(&mut right, x), (&mut left, y)] {
            for (r, e) in normalized(v).into_iter().enumerate() {
                out[r * m + k] = e;
            }
        }
    }
    (left, right)
}

/// Triangularizes each 2 × 2 block on the diagonal of the real Schur form `t` by a unitary
/// rotation (its first column a unit eigenvector of the block), applied across `t` and to `z`;
/// the block's eigenvalues go on the diagonal, a conjugate pair's with the positive imaginary
/// part first, as exact conjugates. Returns where the pairs start.
fn split_blocks(t: &mut [C], z: &mut [C], m: usize) -> Vec<usize> {
    let mut pairs = Vec::new();
    let mut i = 0;
    while i + 1 < m {
        if t[(i + 1) * m + i] == ZERO {
            i += 1;
            continue;
        }
        let (a, b) = (t[i * m + i].re, t[i * m + i + 1].re);
        let (c, d) = (t[(i + 1) * m + i].re, t[(i + 1) * m + i + 1].re);
        let p = 0.5 * (a - d);
        let disc = p * p + b * c;
        let (first, second) = if disc >= 0.0 {
            let root = p + disc.sqrt().copysign(p);
            let other = if root == 0.0 { d } else { d - b * c / root };
            (C::new(d + root, 0.0), C::new(other, 0.0))
        } else {
            pairs.push(i);
            let pair = C::new(d + p, (-disc).sqrt());
            (pair, pair.conj())
        };
        // A unit eigenvector of the block for `first`: the better of the two its rows give.
        let (u, v) = ([C::new(b, 0.0), first - a], [first - d, C::new(c, 0.0)]);
        let size = |x: &[C; 2]| x[0].norm().hypot(x[1].norm());
        let x = if size(&u) >= size(&v) { u } else { v };
        let n = size(&x);
        let (x0, x1) = (x[0] / n, x[1] / n);
        for col in i..m {
            let (r0, r1) = (t[i * m + col], t[(i + 1) * m + col]);
            t[i * m + col] = x0.conj() * r0 + x1.conj() * r1;
            t[(i + 1) * m + col] = x0 * r1 - x1 * r0;
        }
        for (y, rows) in [(&mut *t, i + 2), (&mut *z, m)] {
            for r in 0..rows {
                let (c0, c1) = (y[r * m + i], y[r * m + i + 1]);
                y[r * m + i] = c0 * x0 + c1 * x1;
                y[r * m + i + 1] = c1 * x0.conj() - c0 * x1.conj();
            }
        }
        t[(i + 1) * m + i] = ZERO;
        t[i * m + i] = first;
        t[(i + 1) * m + i + 1] = second;
        i += 2;
    }
    pairs
}

/// A real matrix's eigenvectors as LAPACK gives them: a conjugate pair's second vectors the
/// conjugates of its first, a real eigenvalue's vectors real (their imaginary parts, rounding
/// errors, dropped).
fn real_structure(vectors: &mut [C], pairs: &[usize], m: usize) {
    let mut k = 0;
    while k < m {
        if pairs.contains(&k) {
            for r in 0..m {
                vectors[r * m + k + 1] = vectors[r * m + k].conj();
            }
            k += 2;
        } else {
            for r in 0..m {
                vectors[r * m + k].im = 0.0;
            }
            k += 1;
        }
    }
}

/// The eigendecomposition of the `m × m` matrix `a` (row-major; `real` where every entry is),
/// NaN throughout for a matrix with a value that is not finite or an iteration that does not
/// converge.
fn decompose(a: &[C], m: usize, real: bool) -> Eigen {
    if a.iter().any(|x| !x.re.is_finite() || !x.im.is_finite()) {
        return Eigen::nan(m);
    }
    let mut t = a.to_vec();
    let balanced = balance(&mut t, m);
    let mut z = hessenberg(&mut t, m);
    let pairs = if real {
        let (mut h, mut q): (Vec<f64>, Vec<f64>) = (
            t.iter().map(|x| x.re).collect(),
            z.iter().map(|x| x.re).collect(),
        );
        if !real_schur(&mut h, &mut q, m) {
            return Eigen::nan(m);
        }
        t = h.into_iter().map(|x| C::new(x, 0.0)).collect();
        z = q.into_iter().map(|x| C::new(x, 0.0)).collect();
        split_blocks(&mut t, &mut z, m)
    } else {
        if !schur(&mut t, &mut z, m) {
            return Eigen::nan(m);
        }
        Vec::new()
    };
    let (mut left, mut right) = vectors(&t, &z, m, &balanced);
    if real {
        real_structure(&mut left, &pairs, m);
        real_structure(&mut right, &pairs, m);
    }
    Eigen {
        values: (0..m).map(|k| t[k * m + k]).collect(),
        left,
        right,
    }
}

/// The eigenvalues, left and right eigenvectors of every matrix of `a` (`[.., m, m]`, f32, f64,
/// c64 or c128), of the complex type of `a`'s precision.
pub(super) fn all_parts(a: &Array) -> Result<Vec<Elements>, RuntimeError> {
    let m = a.dims().last().copied().unwrap_or(0);
    let real = !a.dtype().is_complex();
    let wide: Vec<C> = match a.elements() {
        Elements::C64(x) => x.iter().map(|&z| widen(z)).collect(),
        Elements::C128(x) => x.clone(),
        x if matches!(a.dtype(), DType::F32 | DType::F64) => {
            x.to_f64_vec().into_iter().map(|v| C::new(v, 0.0)).collect()
        }
        _ => return Err(undefined("eig", a.dtype())),
    };
    let (mut values, mut left, mut right) = (Vec::new(), Vec::new(), Vec::new());
    if m > 0 {
        for matrix in wide.chunks(m * m) {
            let eigen = decompose(matrix, m, real);
            values.extend(eigen.values);
            left.extend(eigen.left);
            right.extend(eigen.right);
        }
    }
    let typed = |v: Vec<C>| match a.dtype() {
        DType::F32 | DType::C64 => Elements::C64(v.into_iter().map(narrow).collect()),
        _ => Elements::C128(v),
    };
    Ok(vec![typed(values), typed(left), typed(right)])
}

//! Balancing before `eig`, as LAPACK's `geev` does it (`gebal` with job `B`, and `gebak` for
//! the eigenvectors): a permutation that moves the rows and columns which isolate an eigenvalue
//! to the ends, then a diagonal scaling by powers of 2 of the rest so that each row and column
//! have about the same norm. Both are exact similarity transforms: the eigenvalues do not
//! change, but those of a badly scaled matrix are computed to the accuracy of the balanced
//! one's norm rather than the original's, and the isolated eigenvalues come out in LAPACK's
//! order (JAX's `eig` on the CPU is `geev`).

use ferrax_ir::Complex;

type C = Complex<f64>;

/// The scaling's radix step.
const STEP: f64 = 2.0;
/// A row and column are scaled only where that shrinks their norms' sum below this share.
const FACTOR: f64 = 0.95;
/// f64's safe minimum over its precision (LAPACK's `sfmin1`), and one step above it.
const SMALL: f64 = f64::MIN_POSITIVE / f64::EPSILON;
const SMALL2: f64 = SMALL * STEP;
const LARGE: f64 = 1.0 / SMALL;
const LARGE2: f64 = 1.0 / SMALL2;

/// How a matrix was balanced: `b = d⁻¹·pᵀ·a·p·d`, the scaled window `lo..hi`.
pub(super) struct Balance {
    m: usize,
    lo: usize,
    hi: usize,
    /// The index each position was exchanged with (outside the window).
    exchanged: Vec<usize>,
    /// The diagonal of `d` (ones outside the window).
    scale: Vec<f64>,
}

/// `|re| + |im|`, the size LAPACK's searches for a largest entry use.
fn cabs1(z: C) -> f64 {
    z.re.abs() + z.im.abs()
}

/// Exchanges rows and columns `i` and `j` of the `m × m` matrix `a`.
fn exchange(a: &mut [C], m: usize, i: usize, j: usize) {
    if i == j {
        return;
    }
    for r in 0..m {
        a.swap(r * m + i, r * m + j);
    }
    for c in 0..m {
        a.swap(i * m + c, j * m + c);
    }
}

/// The entry of largest `cabs1` among `entries`, by its modulus (the first of equals).
fn largest(entries: impl Iterator<Item = C>) -> f64 {
    let (mut best, mut size) = (0.0f64, -1.0f64);
    for z in entries {
        if cabs1(z) > size {
            (best, size) = (z.norm(), cabs1(z));
        }
    }
    best
}

/// Balances the `m × m` row-major `a` in place.
pub(super) fn balance(a: &mut [C], m: usize) -> Balance {
    let mut b = Balance {
        m,
        lo: 0,
        hi: m,
        exchanged: (0..m).collect(),
        scale: vec![1.0; m],
    };
    let off = |a: &[C], i: usize, j: usize| i != j && a[i * m + j] != C::new(0.0, 0.0);
    // Rows with no entry off the diagonal in the window's columns go to its end.
    let mut moved = true;
    while moved {
        moved = false;
        for i in (0..b.hi).rev() {
            if (0..b.hi).any(|j| off(a, i, j)) {
                continue;
            }
            let last = b.hi - 1;
            b.exchanged[last] = i;
            exchange(a, m, i, last);
            moved = true;
            if last == 0 {
                b.hi = 0;
                return b;
            }
            b.hi = last;
        }
    }
    // Columns with no entry off the diagonal in the window's rows go to its start.
    let mut moved = true;
    while moved {
        moved = false;
        for j in b.lo..b.hi {
            if (b.lo..b.hi).any(|i| off(a, i, j)) {
                continue;
            }
            b.exchanged[b.lo] = j;
            exchange(a, m, j, b.lo);
            moved = true;
            b.lo += 1;
        }
    }
    let (lo, hi) = (b.lo, b.hi);
    let mut scaled = true;
    while scaled {
        scaled = false;
        for i in lo..hi {
            let mut c = (lo..hi).fold(0.0f64, |s, r| s.hypot(a[r * m + i].norm()));
            let mut r = (lo..hi).fold(0.0f64, |s, k| s.hypot(a[i * m + k].norm()));
            let mut ca = largest((0..hi).map(|k| a[k * m + i]));
            let mut ra = largest((lo..m).map(|k| a[i * m + k]));
            if c == 0.0 || r == 0.0 || !(c + ca + r + ra).is_finite() {
                continue;
            }
            let sum = c + r;
            let mut f = 1.0f64;
            let mut g = r / STEP;
            while c < g && f.max(c).max(ca) < LARGE2 && r.min(g).min(ra) > SMALL2 {
                f *= STEP;
                c *= STEP;
                ca *= STEP;
                r /= STEP;
                g /= STEP;
                ra /= STEP;
            }
            g = c / STEP;
            while g >= r && r.max(ra) < LARGE2 && f.min(c).min(g).min(ca) > SMALL2 {
                f /= STEP;
                c /= STEP;
                g /= STEP;
                ca /= STEP;
                r *= STEP;
                ra *= STEP;
            }
            let s = b.scale[i];
            if c + r >= FACTOR * sum
                || (f < 1.0 && s < 1.0 && f * s <= SMALL)
                || (f > 1.0 && s > 1.0 && s >= LARGE / f)
            {
                continue;
            }
            b.scale[i] = s * f;
            scaled = true;
            for k in lo..m {
                a[i * m + k] /= f;
            }
            for k in 0..hi {
                a[k * m + i] *= f;
            }
        }
    }
    b
}

impl Balance {
    /// A right eigenvector of the balanced matrix turned into one of the original: `p·d·x`.
    pub(super) fn right(&self, x: Vec<C>) -> Vec<C> {
        self.back(x, |v, s| v * s)
    }

    /// A left eigenvector of the balanced matrix turned into one of the original: `p·d⁻¹·y`.
    pub(super) fn left(&self, y: Vec<C>) -> Vec<C> {
        self.back(y, |v, s| v / s)
    }

    /// The scaling by `apply`, then the exchanges undone in LAPACK's order (the window's start
    /// down to 0, then its end up to `m`).
    fn back(&self, mut x: Vec<C>, apply: impl Fn(C, f64) -> C) -> Vec<C> {
        let window = self.lo..self.hi;
        for (v, &s) in x[window.clone()].iter_mut().zip(&self.scale[window]) {
            *v = apply(*v, s);
        }
        for i in (0..self.lo).rev().chain(self.hi..self.m) {
            x.swap(i, self.exchanged[i]);
        }
        x
    }
}

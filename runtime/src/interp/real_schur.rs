//! The real Schur form of a real upper Hessenberg matrix, for `eig` of real matrices: Francis's
//! double-shift QR steps in real arithmetic (EISPACK's `hqr2`, with its exceptional shifts after
//! 10 and 20 steps), so that a conjugate pair of eigenvalues comes out of one 2 × 2 block as
//! exact conjugates and a real eigenvalue exactly real, as LAPACK's `dgeev` gives them.

/// Double-shift steps without a deflation after which the iteration gives up.
const MAX_STEPS: usize = 100;

/// Turns the real upper Hessenberg `h` (`m × m`, row-major) into quasi-triangular form in place
/// (1 × 1 and 2 × 2 blocks on the diagonal, zeros below them), accumulating the reflections
/// into `z`; false where it does not converge.
pub(super) fn real_schur(h: &mut [f64], z: &mut [f64], m: usize) -> bool {
    let norm = h.iter().fold(0.0f64, |s, x| s.max(x.abs()));
    let at = |r: usize, c: usize| r * m + c;
    let mut hi = m;
    let mut steps = 0;
    while hi > 0 {
        // The active window is l..hi, where no subdiagonal entry is negligible.
        let mut l = hi - 1;
        while l > 0 {
            let mut size = h[at(l - 1, l - 1)].abs() + h[at(l, l)].abs();
            if size == 0.0 {
                size = norm;
            }
            let sub = h[at(l, l - 1)].abs();
            if sub <= f64::EPSILON * size || sub < f64::MIN_POSITIVE {
                h[at(l, l - 1)] = 0.0;
                break;
            }
            l -= 1;
        }
        if l + 2 >= hi {
            // A 1 × 1 or 2 × 2 block has split off.
            hi = l;
            steps = 0;
            continue;
        }
        steps += 1;
        if steps > MAX_STEPS {
            return false;
        }
        let n = hi - 1;
        // The shifts are the trailing 2 × 2 block's eigenvalues (their sum x + y and product
        // x·y − w), or exceptional ones.
        let (x, y, w) = if steps % 10 == 0 {
            let s = h[at(n, n - 1)].abs() + h[at(n - 1, n - 2)].abs();
            let x = h[at(n, n)] + 0.75 * s;
            (x, x, -0.4375 * s * s)
        } else {
            let w = h[at(n, n - 1)] * h[at(n - 1, n)];
            (h[at(n, n)], h[at(n - 1, n - 1)], w)
        };
        // Start the step where two consecutive subdiagonal entries are small enough.
        let mut start = n - 2;
        let (mut p, mut q, mut r);
        loop {
            let d = h[at(start, start)];
            let (rx, sy) = (x - d, y - d);
            p = (rx * sy - w) / h[at(start + 1, start)] + h[at(start, start + 1)];
            q = h[at(start + 1, start + 1)] - d - rx - sy;
            r = h[at(start + 2, start + 1)];
            let s = p.abs() + q.abs() + r.abs();
            if s != 0.0 {
                (p, q, r) = (p / s, q / s, r / s);
            }
            if start == l {
                break;
            }
            let u = h[at(start, start - 1)].abs() * (q.abs() + r.abs());
            let v = p.abs()
                * (h[at(start - 1, start - 1)].abs() + d.abs() + h[at(start + 1, start + 1)].abs());
            if u <= f64::EPSILON * v {
                break;
            }
            start -= 1;
        }
        for k in start..n {
            let last = k + 1 == n;
            let mut scale = 1.0;
            if k != start {
                p = h[at(k, k - 1)];
                q = h[at(k + 1, k - 1)];
                r = if last { 0.0 } else { h[at(k + 2, k - 1)] };
                scale = p.abs() + q.abs() + r.abs();
                if scale != 0.0 {
                    (p, q, r) = (p / scale, q / scale, r / scale);
                }
            }
            let s = (p * p + q * q + r * r).sqrt().copysign(p);
            if s == 0.0 {
                continue;
            }
            if k == start {
                if l != start {
                    h[at(k, k - 1)] = -h[at(k, k - 1)];
                }
            } else {
                h[at(k, k - 1)] = -s * scale;
                h[at(k + 1, k - 1)] = 0.0;
                if !last {
                    h[at(k + 2, k - 1)] = 0.0;
                }
            }
            p += s;
            let (vx, vy, vz) = (p / s, q / s, r / s);
            (q, r) = (q / p, r / p);
            // The reflection from the left on rows k..k + 2, then from the right on columns
            // k..k + 2 of h and z.
            for j in k..m {
                let mut dot = h[at(k, j)] + q * h[at(k + 1, j)];
                if !last {
                    dot += r * h[at(k + 2, j)];
                    h[at(k + 2, j)] -= dot * vz;
                }
                h[at(k + 1, j)] -= dot * vy;
                h[at(k, j)] -= dot * vx;
            }
            let rows = n.min(k + 3) + 1;
            for (x, rows) in [(&mut *h, rows), (&mut *z, m)] {
                for i in 0..rows {
                    let mut dot = vx * x[at(i, k)] + vy * x[at(i, k + 1)];
                    if !last {
                        dot += vz * x[at(i, k + 2)];
                        x[at(i, k + 2)] -= dot * r;
                    }
                    x[at(i, k + 1)] -= dot * q;
                    x[at(i, k)] -= dot;
                }
            }
        }
    }
    for i in 0..m {
        for j in 0..(i + 1).saturating_sub(2) {
            h[at(i, j)] = 0.0;
        }
    }
    true
}

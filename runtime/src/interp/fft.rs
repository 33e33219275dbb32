//! Fourier transforms over trailing dimensions, one dimension at a time (they are
//! separable), in c128 whatever the element type, each part rounded once at the end. Lines of
//! a power-of-two length take an iterative radix-2 transform; short lines of other lengths
//! the direct sum; longer ones Bluestein's chirp z-transform, which is three radix-2
//! transforms, so every length is O(n log n). Each twiddle and chirp factor is computed once
//! from its own angle, so that none loses more than a few c128 ulps to accumulated rotations.

use super::complex::{narrow, widen, Part};
use super::undefined;
use crate::{Array, RuntimeError};
use ferrax_ir::{Complex, Elements, FftKind, TensorType};
use std::f64::consts::PI;

type C = Complex<f64>;

/// The twiddles `e^{∓2πi m/n}` for `m < n` (`-` forward, `+` inverse).
fn twiddles(n: usize, inverse: bool) -> Vec<C> {
    let sign = if inverse { 1.0 } else { -1.0 };
    (0..n)
        .map(|m| {
            let angle = sign * 2.0 * PI * m as f64 / n as f64;
            C::new(angle.cos(), angle.sin())
        })
        .collect()
}

/// The unscaled radix-2 transform of `line` (of a power-of-two length) in place, with the
/// twiddles of its length.
fn radix2(line: &mut [C], w: &[C]) {
    let n = line.len();
    if n <= 1 {
        return;
    }
    // Bit-reversed order, then butterflies of doubling span.
    let bits = n.trailing_zeros();
    for i in 0..n {
        let j = i.reverse_bits() >> (usize::BITS - bits);
        if i < j {
            line.swap(i, j);
        }
    }
    let mut span = 1;
    while span < n {
        let step = n / (2 * span);
        for start in (0..n).step_by(2 * span) {
            for k in 0..span {
                let t = line[start + k + span] * w[k * step];
                let u = line[start + k];
                line[start + k] = u + t;
                line[start + k + span] = u - t;
            }
        }
        span *= 2;
    }
}

/// Lines shorter than this that are not powers of two take the direct sum, whose `n²` work is
/// then no more than Bluestein's three transforms of twice the length.
const DIRECT_BELOW: usize = 64;

/// How the lines of one length are transformed, with what it precomputes.
enum Plan {
    /// Radix-2 butterflies, with the length's twiddles.
    Radix2(Vec<C>),
    /// The direct sum, with the length's twiddles.
    Direct(Vec<C>),
    /// Bluestein's chirp z-transform: with `c_m = e^{∓πi m²/n}`, `jk = (j² + k² − (k − j)²)/2`
    /// makes the transform `X_k = c_k·Σ_j (x_j·c_j)·conj(c_{k−j})`, a convolution, computed by
    /// radix-2 transforms of a power-of-two length of at least `2n − 1`.
    Chirp {
        chirp: Vec<C>,
        /// The transform of `conj(c_m)` laid out for a circular convolution.
        filter: Vec<C>,
        forward: Vec<C>,
        inverse: Vec<C>,
    },
}

impl Plan {
    fn new(n: usize, inverse: bool) -> Plan {
        if n.is_power_of_two() {
            return Plan::Radix2(twiddles(n, inverse));
        }
        let padded = (2 * n - 1).checked_next_power_of_two();
        let Some(padded) = padded.filter(|_| n >= DIRECT_BELOW) else {
            return Plan::Direct(twiddles(n, inverse));
        };
        let sign = if inverse { 1.0 } else { -1.0 };
        // Each angle from m² reduced modulo 2n, so that it stays below 2π exactly.
        let chirp: Vec<C> = (0..n as u128)
            .map(|m| {
                let angle = sign * PI * ((m * m) % (2 * n as u128)) as f64 / n as f64;
                C::new(angle.cos(), angle.sin())
            })
            .collect();
        let mut filter = vec![C::new(0.0, 0.0); padded];
        for (m, c) in chirp.iter().enumerate() {
            filter[m] = c.conj();
            if m > 0 {
                filter[padded - m] = c.conj();
            }
        }
        let forward = twiddles(padded, false);
        radix2(&mut filter, &forward);
        Plan::Chirp {
            chirp,
            filter,
            forward,
            inverse: twiddles(padded, true),
        }
    }

    /// The unscaled transform of `line` in place.
    fn apply(&self, line: &mut [C], scratch: &mut Vec<C>) {
        let n = line.len();
        match self {
            Plan::Radix2(w) => radix2(line, w),
            Plan::Direct(w) => {
                scratch.clear();
                scratch.extend((0..n).map(|k| {
                    line.iter()
                        .enumerate()
                        .fold(C::new(0.0, 0.0), |s, (j, &x)| s + x * w[(j * k) % n])
                }));
                line.copy_from_slice(scratch);
            }
            Plan::Chirp {
                chirp,
                filter,
                forward,
                inverse,
            } => {
                let padded = filter.len();
                scratch.clear();
                scratch.extend(line.iter().zip(chirp).map(|(&x, &c)| x * c));
                scratch.resize(padded, C::new(0.0, 0.0));
                radix2(scratch, forward);
                for (v, &f) in scratch.iter_mut().zip(filter) {
                    *v *= f;
                }
                radix2(scratch, inverse);
                let scale = 1.0 / padded as f64;
                for ((x, &y), &c) in line.iter_mut().zip(scratch.iter()).zip(chirp) {
                    *x = y * c * scale;
                }
            }
        }
    }
}

/// `data` (of `dims`) transformed along `axis`, scaled by `1/n` when `inverse`.
fn along(data: &mut [C], dims: &[usize], axis: usize, inverse: bool) {
    let n = dims[axis];
    let inner: usize = dims[axis + 1..].iter().product();
    let outer: usize = dims[..axis].iter().product();
    if n == 0 || inner == 0 || outer == 0 {
        return;
    }
    let plan = Plan::new(n, inverse);
    let scale = if inverse { 1.0 / n as f64 } else { 1.0 };
    let (mut line, mut scratch) = (vec![C::new(0.0, 0.0); n], Vec::with_capacity(n));
    for o in 0..outer {
        for i in 0..inner {
            let at = |k: usize| (o * n + k) * inner + i;
            for (k, v) in line.iter_mut().enumerate() {
                *v = data[at(k)];
            }
            plan.apply(&mut line, &mut scratch);
            for (k, v) in line.iter().enumerate() {
                data[at(k)] = *v * scale;
            }
        }
    }
}

/// `data` of `dims` with its last dimension cut to `keep` (or, where `keep` is larger,
/// extended by `fill(line, k)`).
fn resize_last(data: &[C], dims: &[usize], keep: usize, fill: impl Fn(&[C], usize) -> C) -> Vec<C> {
    let n = dims.last().copied().unwrap_or(1);
    let rows = data.len().checked_div(n).unwrap_or(0);
    let mut out = Vec::with_capacity(rows * keep);
    for r in 0..rows {
        let line = &data[r * n..(r + 1) * n];
        out.extend((0..keep).map(|k| if k < n { line[k] } else { fill(line, k) }));
    }
    out
}

fn transformed(kind: FftKind, lengths: &[usize], values: Vec<C>, x: &TensorType) -> Vec<C> {
    let rank = x.rank();
    let first = rank - lengths.len();
    let mut dims = x.dims().to_vec();
    let mut data = values;
    if dims.contains(&0) {
        return Vec::new();
    }
    match kind {
        FftKind::Fft | FftKind::Ifft => {
            for axis in first..rank {
                along(&mut data, &dims, axis, kind == FftKind::Ifft);
            }
            data
        }
        FftKind::Rfft => {
            for axis in first..rank {
                along(&mut data, &dims, axis, false);
            }
            let half = dims[rank - 1] / 2 + 1;
            resize_last(&data, &dims, half, |_, _| C::new(0.0, 0.0))
        }
        // The leading transforms, then the last one over the Hermitian spectrum the kept
        // frequencies stand for; the real part is the result.
        FftKind::Irfft => {
            for axis in first..rank - 1 {
                along(&mut data, &dims, axis, true);
            }
            let n = lengths[lengths.len() - 1];
            let mut full = resize_last(&data, &dims, n, |line, k| line[n - k].conj());
            dims[rank - 1] = n;
            along(&mut full, &dims, rank - 1, true);
            full.iter().map(|z| C::new(z.re, 0.0)).collect()
        }
    }
}

/// `kind` over the trailing `lengths.len()` dimensions of `x`, giving type `ty`.
pub(super) fn fft(
    kind: FftKind,
    lengths: &[usize],
    x: &Array,
    ty: &TensorType,
) -> Result<Elements, RuntimeError> {
    fn real<T: Part>(v: &[T]) -> Vec<C> {
        v.iter().map(|&r| C::new(r.wide(), 0.0)).collect()
    }
    fn complex<T: Part>(v: &[Complex<T>]) -> Vec<C> {
        v.iter().map(|&z| widen(z)).collect()
    }
    fn finish<T: Part>(kind: FftKind, out: Vec<C>) -> Elements {
        match kind {
            FftKind::Irfft => T::into_elements(out.iter().map(|z| T::narrow(z.re)).collect()),
            FftKind::Fft | FftKind::Ifft | FftKind::Rfft => {
                T::complex_elements(out.into_iter().map(narrow).collect())
            }
        }
    }
    let input = TensorType::new(x.dtype(), x.dims().to_vec());
    let out = match (kind, x.elements()) {
        (FftKind::Rfft, Elements::F32(v)) => {
            finish::<f32>(kind, transformed(kind, lengths, real(v), &input))
        }
        (FftKind::Rfft, Elements::F64(v)) => {
            finish::<f64>(kind, transformed(kind, lengths, real(v), &input))
        }
        (FftKind::Fft | FftKind::Ifft | FftKind::Irfft, Elements::C64(v)) => {
            finish::<f32>(kind, transformed(kind, lengths, complex(v), &input))
        }
        (FftKind::Fft | FftKind::Ifft | FftKind::Irfft, Elements::C128(v)) => {
            finish::<f64>(kind, transformed(kind, lengths, complex(v), &input))
        }
        (_, other) => return Err(undefined(kind.name(), other.dtype())),
    };
    if out.len() != ty.numel() {
        return Err(undefined(kind.name(), x.dtype()));
    }
    Ok(out)
}

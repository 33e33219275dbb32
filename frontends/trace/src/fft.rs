//! `jnp.fft`: transforms along any axes, at a length `n` (the operand cropped or padded with
//! zeros), with NumPy's normalizations, and the frequency helpers. The IR's `fft` op
//! transforms trailing dimensions, so the axes are moved there and back; transposes and
//! pads are ordinary ops, so autodiff and `vmap` need nothing new.

use crate::Tensor;
use ferrax_ir::{DType, FftKind};
use std::panic::Location;

/// Which transform direction is scaled, and by what (`norm`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Norm {
    /// The inverse divided by `n` (`"backward"`, the default).
    #[default]
    Backward,
    /// Both divided by `sqrt(n)` (`"ortho"`).
    Ortho,
    /// The forward transform divided by `n` (`"forward"`).
    Forward,
}

impl Norm {
    /// The factor applied to the IR's transform, whose inverse already divides by `n`.
    fn factor(self, inverse: bool, n: f64) -> f64 {
        match (self, inverse) {
            (Norm::Backward, _) => 1.0,
            (Norm::Ortho, false) => 1.0 / n.sqrt(),
            (Norm::Ortho, true) => n.sqrt(),
            (Norm::Forward, false) => 1.0 / n,
            (Norm::Forward, true) => n,
        }
    }
}

/// A failed tensor of `like`'s type naming the call.
fn fail(like: &Tensor, location: &'static Location<'static>, message: String) -> Tensor {
    Tensor::failed(location, message, like.ty().clone())
}

/// `axes` (negative counting from the end) as distinct dimension indices of `x`.
fn axis_indices(x: &Tensor, axes: &[i64]) -> Option<Vec<usize>> {
    let rank = x.ndim() as i64;
    let mut out: Vec<usize> = Vec::with_capacity(axes.len());
    for &a in axes {
        let a = if a < 0 { a + rank } else { a };
        if !(0..rank).contains(&a) || out.contains(&(a as usize)) {
            return None;
        }
        out.push(a as usize);
    }
    Some(out)
}

/// `x` cropped or padded with zeros at the end of `axis` to `n`.
fn resized(x: &Tensor, axis: usize, n: usize) -> Tensor {
    let size = x.shape()[axis];
    if n < size {
        let mut limit = x.shape().to_vec();
        limit[axis] = n;
        x.slice(&vec![0; x.ndim()], &limit)
    } else if n > size {
        let mut config = vec![(0i64, 0i64, 0usize); x.ndim()];
        config[axis].1 = (n - size) as i64;
        x.pad(&config, 0.0)
    } else {
        x.clone()
    }
}

/// `x` as the complex type a complex transform takes: f64 and c128 as c128, other types c64.
fn complex(x: &Tensor) -> Tensor {
    match x.dtype() {
        DType::C64 | DType::C128 => x.clone(),
        DType::F64 => x.astype(DType::C128),
        _ => x.astype(DType::C64),
    }
}

/// `x` as the real type a real transform takes: f64 as it is, other types f32.
fn real(x: &Tensor) -> Tensor {
    match x.dtype() {
        DType::F64 | DType::F32 => x.clone(),
        _ => x.astype(DType::F32),
    }
}

/// The transform of `kind` over `axes` of `x`, at `lengths` (one per axis; for `Irfft` the
/// last is the real output's length), normalized as `norm` says.
fn transform(
    x: &Tensor,
    kind: FftKind,
    lengths: Option<&[usize]>,
    axes: &[i64],
    norm: Norm,
    location: &'static Location<'static>,
) -> Tensor {
    let Some(axes) = axis_indices(x, axes) else {
        return fail(
            x,
            location,
            format!("fft: axes {axes:?} of {} (distinct, in range)", x.ty()),
        );
    };
    if axes.is_empty() {
        return fail(x, location, "fft: no axes to transform".into());
    }
    if let Some(l) = lengths.filter(|l| l.len() != axes.len()) {
        return fail(
            x,
            location,
            format!("fft: {} lengths for {} axes", l.len(), axes.len()),
        );
    }
    let last = axes.len() - 1;
    let lengths: Vec<usize> = match lengths {
        Some(l) => l.to_vec(),
        None => axes
            .iter()
            .enumerate()
            .map(|(i, &a)| match kind {
                FftKind::Irfft if i == last => 2 * x.shape()[a].saturating_sub(1),
                _ => x.shape()[a],
            })
            .collect(),
    };
    if let Some(i) = lengths.iter().position(|&n| n == 0) {
        return fail(
            x,
            location,
            format!(
                "fft: axis {} of {} would be transformed at length 0",
                axes[i],
                x.ty()
            ),
        );
    }
    let mut y = match kind {
        FftKind::Rfft => real(x),
        FftKind::Fft | FftKind::Ifft | FftKind::Irfft => complex(x),
    };
    for (i, (&axis, &n)) in axes.iter().zip(&lengths).enumerate() {
        let n = match kind {
            FftKind::Irfft if i == last => n / 2 + 1,
            _ => n,
        };
        y = resized(&y, axis, n);
    }
    // The axes go last, in the order given; the rest keep theirs.
    let rank = x.ndim();
    let mut perm: Vec<usize> = (0..rank).filter(|d| !axes.contains(d)).collect();
    perm.extend(&axes);
    let mut inverse = vec![0; rank];
    for (i, &p) in perm.iter().enumerate() {
        inverse[p] = i;
    }
    let mut y = y.transpose(perm.as_slice());
    // The IR's op takes up to three dimensions at once; more are done in groups of three
    // from the last. A real transform's halved axis is in the last group, which is done
    // first for `rfft` (the others transform its complex result) and last for `irfft`.
    let count = lengths.len();
    let lead = rank - count;
    let mut groups: Vec<(usize, usize)> = Vec::new();
    let mut end = count;
    while end > 0 {
        groups.push((end.saturating_sub(3), end));
        end = end.saturating_sub(3);
    }
    if kind == FftKind::Irfft {
        groups.reverse();
    }
    for (start, end) in groups {
        let group = &lengths[start..end];
        let group_kind = match (kind, end == count) {
            (FftKind::Rfft, false) => FftKind::Fft,
            (FftKind::Irfft, false) => FftKind::Ifft,
            _ => kind,
        };
        if end == count {
            y = y.fft(group_kind, group);
            continue;
        }
        let mut p: Vec<usize> = (0..rank)
            .filter(|d| !(lead + start..lead + end).contains(d))
            .collect();
        p.extend(lead + start..lead + end);
        let mut back = vec![0; rank];
        for (i, &q) in p.iter().enumerate() {
            back[q] = i;
        }
        y = y
            .transpose(p.as_slice())
            .fft(group_kind, group)
            .transpose(back.as_slice());
    }
    let n: f64 = lengths.iter().map(|&n| n as f64).product();
    let inverse_kind = matches!(kind, FftKind::Ifft | FftKind::Irfft);
    let factor = norm.factor(inverse_kind, n);
    let y = match factor == 1.0 {
        true => y,
        false => y * factor,
    };
    y.transpose(inverse.as_slice())
}

/// One transform along `axis` at length `n` (the axis' own when `None`).
fn along_axis(
    x: &Tensor,
    kind: FftKind,
    n: Option<usize>,
    axis: i64,
    norm: Norm,
    location: &'static Location<'static>,
) -> Tensor {
    let lengths = n.map(|n| [n]);
    transform(
        x,
        kind,
        lengths.as_ref().map(|l| &l[..]),
        &[axis],
        norm,
        location,
    )
}

/// `jnp.fft.fft(x, n, axis, norm)`: the transform along one axis, `x` cropped or padded to `n`.
#[track_caller]
pub fn fft(x: &Tensor, n: Option<usize>, axis: i64, norm: Norm) -> Tensor {
    along_axis(x, FftKind::Fft, n, axis, norm, Location::caller())
}

/// `jnp.fft.ifft(x, n, axis, norm)`.
#[track_caller]
pub fn ifft(x: &Tensor, n: Option<usize>, axis: i64, norm: Norm) -> Tensor {
    along_axis(x, FftKind::Ifft, n, axis, norm, Location::caller())
}

/// `jnp.fft.rfft(x, n, axis, norm)`: the `n/2 + 1` non-negative frequencies of real values.
#[track_caller]
pub fn rfft(x: &Tensor, n: Option<usize>, axis: i64, norm: Norm) -> Tensor {
    along_axis(x, FftKind::Rfft, n, axis, norm, Location::caller())
}

/// `jnp.fft.irfft(x, n, axis, norm)`: `n` real values (default `2 (m - 1)` for `m`
/// frequencies) from their non-negative frequencies.
#[track_caller]
pub fn irfft(x: &Tensor, n: Option<usize>, axis: i64, norm: Norm) -> Tensor {
    along_axis(x, FftKind::Irfft, n, axis, norm, Location::caller())
}

/// `jnp.fft.fftn(x, s, axes, norm)`: the transform over `axes` (all when `None`), at the
/// lengths `s` where given.
#[track_caller]
pub fn fftn(x: &Tensor, s: Option<&[usize]>, axes: Option<&[i64]>, norm: Norm) -> Tensor {
    n_dimensional(x, FftKind::Fft, s, axes, norm, Location::caller())
}

/// `jnp.fft.ifftn(x, s, axes, norm)`.
#[track_caller]
pub fn ifftn(x: &Tensor, s: Option<&[usize]>, axes: Option<&[i64]>, norm: Norm) -> Tensor {
    n_dimensional(x, FftKind::Ifft, s, axes, norm, Location::caller())
}

/// `jnp.fft.rfftn(x, s, axes, norm)`: the last axis halved.
#[track_caller]
pub fn rfftn(x: &Tensor, s: Option<&[usize]>, axes: Option<&[i64]>, norm: Norm) -> Tensor {
    n_dimensional(x, FftKind::Rfft, s, axes, norm, Location::caller())
}

/// `jnp.fft.irfftn(x, s, axes, norm)`.
#[track_caller]
pub fn irfftn(x: &Tensor, s: Option<&[usize]>, axes: Option<&[i64]>, norm: Norm) -> Tensor {
    n_dimensional(x, FftKind::Irfft, s, axes, norm, Location::caller())
}

/// `jnp.fft.fft2(x)` over the last two axes.
#[track_caller]
pub fn fft2(x: &Tensor, norm: Norm) -> Tensor {
    n_dimensional(
        x,
        FftKind::Fft,
        None,
        Some(&[-2, -1]),
        norm,
        Location::caller(),
    )
}

/// `jnp.fft.ifft2(x)` over the last two axes.
#[track_caller]
pub fn ifft2(x: &Tensor, norm: Norm) -> Tensor {
    n_dimensional(
        x,
        FftKind::Ifft,
        None,
        Some(&[-2, -1]),
        norm,
        Location::caller(),
    )
}

fn n_dimensional(
    x: &Tensor,
    kind: FftKind,
    s: Option<&[usize]>,
    axes: Option<&[i64]>,
    norm: Norm,
    location: &'static Location<'static>,
) -> Tensor {
    // NumPy: `s` without axes names the last `len(s)` axes; neither, all of them.
    let all: Vec<i64>;
    let axes = match (axes, s) {
        (Some(a), _) => a,
        (None, Some(s)) => {
            let rank = x.ndim() as i64;
            all = (rank - s.len() as i64..rank).collect();
            &all
        }
        (None, None) => {
            all = (0..x.ndim() as i64).collect();
            &all
        }
    };
    transform(x, kind, s, axes, norm, location)
}

/// `jnp.fft.fftfreq(n, d)`: the sample frequencies of an `n`-point transform with spacing
/// `d`, `[0, 1, ..., -(n/2), ..., -1] / (d n)`, of `dtype`.
#[track_caller]
pub fn fftfreq(dtype: DType, n: usize, d: f64) -> Tensor {
    let values: Vec<f64> = (0..n)
        .map(|i| {
            let k = match i < n.div_ceil(2) {
                true => i as f64,
                false => i as f64 - n as f64,
            };
            k / (d * n as f64)
        })
        .collect();
    Tensor::from_vec([n], values).astype(dtype)
}

/// `jnp.fft.rfftfreq(n, d)`: the `n/2 + 1` non-negative frequencies, `[0, 1, ..., n/2] / (d n)`.
#[track_caller]
pub fn rfftfreq(dtype: DType, n: usize, d: f64) -> Tensor {
    let values: Vec<f64> = (0..n / 2 + 1).map(|k| k as f64 / (d * n as f64)).collect();
    Tensor::from_vec([n / 2 + 1], values).astype(dtype)
}

/// `jnp.fft.fftshift(x, axes)`: the zero frequency moved to the middle of each axis (all
/// when `None`).
#[track_caller]
pub fn fftshift(x: &Tensor, axes: Option<&[i64]>) -> Tensor {
    shift(x, axes, false, Location::caller())
}

/// `jnp.fft.ifftshift(x, axes)`: [`fftshift`] undone.
#[track_caller]
pub fn ifftshift(x: &Tensor, axes: Option<&[i64]>) -> Tensor {
    shift(x, axes, true, Location::caller())
}

fn shift(
    x: &Tensor,
    axes: Option<&[i64]>,
    inverse: bool,
    location: &'static Location<'static>,
) -> Tensor {
    let all: Vec<i64> = (0..x.ndim() as i64).collect();
    let asked = axes.unwrap_or(&all);
    let Some(axes) = axis_indices(x, asked) else {
        return fail(
            x,
            location,
            format!(
                "fftshift: axes {asked:?} of {} (distinct, in range)",
                x.ty()
            ),
        );
    };
    axes.iter().fold(x.clone(), |y, &a| {
        let n = x.shape()[a] as i64;
        let k = match inverse {
            false => n / 2,
            true => -(n / 2),
        };
        y.roll(k, a as i64)
    })
}

//! Fourier transforms are linear: forward mode transforms the tangent. Their transposes under
//! the pairing `Re(u·v)` (see `autodiff`): the DFT matrix is symmetric, so `fft` and `ifft`
//! are their own transposes; `rfft` is the complex transform of the real input kept to its
//! first `n/2 + 1` frequencies, so its transpose pads the cotangent with zeros, transforms it
//! and keeps the real part; `irfft` reads each frequency but the first (and, for even `n`,
//! the last) twice, as itself and its mirror image, so its transpose is the conjugate of the
//! `rfft` of the cotangent, weighted 1 or 2 per frequency and divided by the transform's size.

use super::elementwise::conj;
use super::{AutodiffError, Emitter, R};
use ferrax_ir::{Elements, FftKind, Literal, Op, Scalar, Shape, TensorType, UnaryOp, ValueId};

pub(super) fn jvp(e: &mut Emitter, op: &Op, t: Option<ValueId>) -> R<Option<ValueId>> {
    match t {
        Some(t) => Ok(Some(e.push(op.clone(), &[t])?)),
        None => Ok(None),
    }
}

pub(super) fn vjp(e: &mut Emitter, kind: FftKind, lengths: &[usize], g: ValueId) -> R {
    let transform = |kind| Op::Fft {
        kind,
        lengths: lengths.to_vec(),
    };
    let g_ty = e.ty(g)?;
    let rank = g_ty.rank();
    let n = lengths.last().copied().unwrap_or(1);
    match kind {
        FftKind::Fft | FftKind::Ifft => e.push(transform(kind), &[g]),
        FftKind::Rfft => {
            let zero = e.splat(0.0, &g_ty.with_shape(Shape::scalar()))?;
            let mut high = vec![0; rank];
            if let (Some(last), Some(&kept)) = (high.last_mut(), g_ty.dims().last()) {
                *last = n as i64 - kept as i64;
            }
            let padded = e.push(
                Op::Pad {
                    low: vec![0; rank],
                    high,
                    interior: vec![0; rank],
                },
                &[g, zero],
            )?;
            let full = e.push(transform(FftKind::Fft), &[padded])?;
            e.unary(UnaryOp::Real, full)
        }
        FftKind::Irfft => {
            let spectrum = e.push(transform(FftKind::Rfft), &[g])?;
            let ty = e.ty(spectrum)?;
            let half = n / 2 + 1;
            let size: usize = lengths.iter().product();
            let weights: Vec<Scalar> = (0..half)
                .map(|k| {
                    let once = k == 0 || (n % 2 == 0 && k == n / 2);
                    let w = if once { 1.0 } else { 2.0 };
                    Scalar::from_f64(ty.dtype, w / size as f64)
                })
                .collect();
            let data = Elements::from_scalars(ty.dtype, &weights).ok_or_else(|| {
                AutodiffError::Unsupported(format!("irfft weights of type {}", ty.dtype))
            })?;
            let literal = Literal {
                ty: TensorType::new(ty.dtype, [half]),
                data,
            };
            let weights = e.push(Op::Constant(literal), &[])?;
            let weights = e.broadcast(weights, &ty.shape, vec![ty.rank() - 1])?;
            let weighted = e.mul(spectrum, weights)?;
            conj(e, weighted)
        }
    }
}

//! Fourier transforms over trailing dimensions (`stablehlo.fft`): one to three of them, of the
//! sizes `lengths` gives; a real transform's last dimension holds the `n/2 + 1`
//! non-negative frequencies of its `n` real values.

use super::{arity, invalid};
use crate::{FftKind, TensorType, TypeError};

/// Most dimensions one transform covers (StableHLO's limit).
const MAX_FFT_RANK: usize = 3;

pub(super) fn fft(
    kind: FftKind,
    lengths: &[usize],
    args: &[&TensorType],
) -> Result<TensorType, TypeError> {
    let op = kind.name();
    let [x] = arity::<1>(op, args)?;
    let count = lengths.len();
    if count == 0 || count > MAX_FFT_RANK || count > x.rank() {
        return Err(invalid(
            op,
            format!("lengths {lengths:?}: 1 to {MAX_FFT_RANK} trailing dimensions of {x}"),
        ));
    }
    if lengths.contains(&0) {
        return Err(invalid(op, format!("lengths {lengths:?} include 0")));
    }
    let lead = x.rank() - count;
    let (last, inner) = (lengths[count - 1], &lengths[..count - 1]);
    let half = last / 2 + 1;
    let trailing = &x.dims()[lead..];
    let (input_last, dtype) = match kind {
        FftKind::Fft | FftKind::Ifft => (last, x.dtype.complex_part().map(|_| x.dtype)),
        FftKind::Rfft => (last, x.dtype.complex_of()),
        FftKind::Irfft => (half, x.dtype.complex_part()),
    };
    let Some(dtype) = dtype else {
        let expected = match kind {
            FftKind::Rfft => "f32 or f64",
            FftKind::Fft | FftKind::Ifft | FftKind::Irfft => "c64 or c128",
        };
        return Err(TypeError::DType {
            op,
            dtype: x.dtype,
            expected,
        });
    };
    if trailing[..count - 1] != *inner || trailing[count - 1] != input_last {
        return Err(invalid(
            op,
            format!("the trailing dimensions of {x} do not fit lengths {lengths:?}"),
        ));
    }
    let mut dims = x.dims().to_vec();
    dims[x.rank() - 1] = match kind {
        FftKind::Fft | FftKind::Ifft | FftKind::Irfft => last,
        FftKind::Rfft => half,
    };
    Ok(TensorType::new(dtype, dims))
}

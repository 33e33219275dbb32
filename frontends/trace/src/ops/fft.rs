//! Fourier transforms (`jnp.fft`): over the trailing dimensions of sizes `lengths`.

use crate::tensor::apply;
use crate::Tensor;
use ferrax_ir::{FftKind, Op};

impl Tensor {
    /// The discrete Fourier transform of `kind` over the trailing `lengths.len()` (1 to 3)
    /// dimensions (`lax.fft`): `Fft` and `Ifft` of complex numbers, `Rfft` of f32 or f64
    /// values (keeping the `n/2 + 1` non-negative frequencies of the last dimension), `Irfft`
    /// back to `lengths`' last size of real values. Computed by the interpreter, in c128.
    #[track_caller]
    pub fn fft(&self, kind: FftKind, lengths: &[usize]) -> Tensor {
        apply(
            Op::Fft {
                kind,
                lengths: lengths.to_vec(),
            },
            &[self],
        )
    }
}

//! Convolutions (`lax.conv_general_dilated`, `lax.conv`). The IR has no convolution op:
//! [`Convolution::lower`] spells one in its ops (im2col: one gather of the padded input's
//! feature rows, and one `dot_general` with the kernel), the same spelling the StableHLO
//! importer uses, so convolutions run on every backend and autodiff and `vmap` handle the ops they are
//! made of.

use crate::tensor::apply_at;
use crate::Tensor;
use ferrax_ir::{ConvDims, ConvPadding, Convolution, LowerError, Op, OpSink};
use std::convert::Infallible;
use std::panic::Location;

/// Records each op of a lowering (a convolution, a bit cast between widths) at the user's
/// call.
pub(super) struct Recorder(pub(super) &'static Location<'static>);

impl OpSink for Recorder {
    type Value = Tensor;
    type Error = Infallible;

    fn emit(&mut self, op: Op, args: &[&Tensor]) -> Result<Tensor, Infallible> {
        Ok(apply_at(self.0, op, args))
    }
}

impl Tensor {
    /// `lax.conv_general_dilated`: this input convolved with `kernel` as `conv` describes
    /// (dimension numbers, strides, padding, input and kernel dilation, feature and batch
    /// groups). Both operands have the same dtype, as the result. Its gradient is that of the
    /// slices and product it is made of.
    #[track_caller]
    pub fn conv_general_dilated(&self, kernel: &Tensor, conv: &Convolution) -> Tensor {
        let location = Location::caller();
        if self.error().is_some() {
            return self.clone();
        }
        if kernel.error().is_some() {
            return kernel.clone();
        }
        let lowered = conv.lower(
            &mut Recorder(location),
            (self, self.ty()),
            (kernel, kernel.ty()),
        );
        match lowered {
            Ok(t) => t,
            Err(LowerError::Invalid(m)) => {
                self.fail_at(location, format!("conv_general_dilated: {m}"))
            }
            Err(LowerError::Sink(never)) => match never {},
        }
    }

    /// `lax.conv`: an input `[N, C, spatial...]` convolved with a kernel `[O, C, spatial...]`
    /// at `strides` (one per spatial dimension) with `padding`.
    #[track_caller]
    pub fn conv(&self, kernel: &Tensor, strides: &[usize], padding: ConvPadding) -> Tensor {
        let spatial = self.ndim().saturating_sub(2);
        let mut conv = Convolution::new(ConvDims::channels_first(spatial));
        conv.strides = strides.to_vec();
        conv.padding = padding;
        self.conv_general_dilated(kernel, &conv)
    }
}

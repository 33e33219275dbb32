//! Pooling (`flax.linen.max_pool`, `avg_pool`): window reductions over the spatial dimensions
//! of `[batch..., spatial..., features]` inputs, one window per spatial dimension, batch and
//! feature dimensions untouched ([`Tensor::reduce_window`]).

use crate::ops::{Padding, Window};
use crate::Tensor;
use ferrax_ir::ReduceOp;

/// The window over all of `x`'s dimensions for a spatial window `window`: ones over the
/// leading batch dimensions and the trailing feature dimension; `None` when `x` has no room
/// for the spatial dimensions and the features.
fn full_window(
    x: &Tensor,
    window: &[usize],
    strides: Option<&[usize]>,
    padding: &Padding,
) -> Option<Window> {
    let batch = x.ndim().checked_sub(window.len() + 1)?;
    let spatial_strides = strides.map_or_else(|| vec![1; window.len()], <[usize]>::to_vec);
    let around = |inner: &[usize]| -> Vec<usize> {
        let mut v = vec![1; batch];
        v.extend_from_slice(inner);
        v.push(1);
        v
    };
    let padding = match padding {
        Padding::Explicit(pairs) => {
            let mut all = vec![(0, 0); batch];
            all.extend_from_slice(pairs);
            all.push((0, 0));
            Padding::Explicit(all)
        }
        other => other.clone(),
    };
    Some(
        Window::new(around(window))
            .strides(around(&spatial_strides))
            .padding(padding),
    )
}

#[track_caller]
fn pool(
    x: &Tensor,
    op: ReduceOp,
    window: &[usize],
    strides: Option<&[usize]>,
    padding: &Padding,
) -> Tensor {
    match full_window(x, window, strides, padding) {
        Some(w) => x.reduce_window(op, &w),
        None => Tensor::failed(
            std::panic::Location::caller(),
            format!(
                "pooling: a window of {} dimensions needs an input of at least {} ([batch..., spatial..., features]), not {}",
                window.len(),
                window.len() + 1,
                x.ty()
            ),
            x.ty().clone(),
        ),
    }
}

/// The largest element of each window (`flax.linen.max_pool`); padding never wins. Strides
/// default to 1; `padding` applies to the spatial dimensions.
#[track_caller]
pub fn max_pool(
    x: &Tensor,
    window: &[usize],
    strides: Option<&[usize]>,
    padding: Padding,
) -> Tensor {
    pool(x, ReduceOp::Max, window, strides, &padding)
}

/// The mean of each window (`flax.linen.avg_pool`): with `count_include_pad`, padding counts
/// as zeros in the mean (flax's default); without, each window is divided by the number of the
/// input's own elements in it.
#[track_caller]
pub fn avg_pool(
    x: &Tensor,
    window: &[usize],
    strides: Option<&[usize]>,
    padding: Padding,
    count_include_pad: bool,
) -> Tensor {
    let sums = pool(x, ReduceOp::Sum, window, strides, &padding);
    if sums.error().is_some() {
        return sums;
    }
    if count_include_pad {
        // The window fits in memory (the sums exist), so its size does not overflow.
        let size = window.iter().try_fold(1usize, |n, &w| n.checked_mul(w));
        return sums / size.unwrap_or(usize::MAX) as f64;
    }
    let ones = Tensor::ones(x.dtype(), x.shape().to_vec());
    let counts = pool(&ones, ReduceOp::Sum, window, strides, &padding);
    sums / counts
}

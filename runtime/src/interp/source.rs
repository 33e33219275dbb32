//! `iota`, the one op without operands that computes its data (`constant` only copies its
//! literal).

use super::elementwise::convert;
use super::movement::gather;
use ferrax_ir::{map_elements, Elements, TensorType};

/// Each element's index along `dim`, converted to the dtype like `convert` would (so large
/// indices round once in f16/bf16). The `size` distinct values are computed once and then
/// broadcast over the dimensions before and after `dim`.
pub(super) fn iota(ty: &TensorType, dim: usize) -> Elements {
    // An empty result has no values to compute, however long `dim` is.
    let size = if ty.numel() == 0 { 0 } else { ty.dims()[dim] };
    let values = convert(&Elements::I64((0..size as i64).collect()), ty.dtype);
    let outer: usize = ty.dims()[..dim].iter().product();
    let inner: usize = ty.dims()[dim + 1..].iter().product();
    map_elements!(&values, v => gather(v, 0, &[outer, size, inner], &[0, 1, 0]))
}

//! Data movement. Broadcast, transpose and slice are one strided gather; pad scatters into a
//! filled output; concatenate copies row blocks.

use crate::Array;
use ferrax_ir::{map_elements, Elements, Shape, TensorType};

/// `out[i] = src[base + Σ_k idx_k(i) * strides[k]]` over the row-major indices of `dims`.
/// Strides may be zero (broadcasting).
pub(super) fn strided_gather<T: Copy>(
    src: &[T],
    base: usize,
    dims: &[usize],
    strides: &[usize],
) -> Vec<T> {
    let n: usize = dims.iter().product();
    let mut out = Vec::with_capacity(n);
    if n == 0 {
        return out;
    }
    let rank = dims.len();
    if rank == 0 {
        out.push(src[base]);
        return out;
    }
    let (inner, inner_stride) = (dims[rank - 1], strides[rank - 1]);
    let mut idx = vec![0usize; rank];
    let mut offset = base;
    loop {
        if inner_stride == 1 {
            out.extend_from_slice(&src[offset..offset + inner]);
        } else {
            out.extend((0..inner).map(|j| src[offset + j * inner_stride]));
        }
        // Advance the outer indices like an odometer.
        let mut k = rank - 1;
        loop {
            if k == 0 {
                return out;
            }
            k -= 1;
            idx[k] += 1;
            offset += strides[k];
            if idx[k] < dims[k] {
                break;
            }
            offset -= strides[k] * dims[k];
            idx[k] = 0;
        }
    }
}

pub(super) fn broadcast_in_dim(x: &Array, ty: &TensorType, dims: &[usize]) -> Elements {
    let in_strides = x.shape().strides();
    let mut strides = vec![0; ty.rank()];
    for (i, &d) in dims.iter().enumerate() {
        if x.dims()[i] != 1 {
            strides[d] = in_strides[i];
        }
    }
    map_elements!(x.elements(), v => strided_gather(v, 0, ty.dims(), &strides))
}

pub(super) fn transpose(x: &Array, ty: &TensorType, perm: &[usize]) -> Elements {
    let in_strides = x.shape().strides();
    let strides: Vec<usize> = perm.iter().map(|&p| in_strides[p]).collect();
    map_elements!(x.elements(), v => strided_gather(v, 0, ty.dims(), &strides))
}

pub(super) fn slice(x: &Array, ty: &TensorType, start: &[usize], steps: &[usize]) -> Elements {
    let in_strides = x.shape().strides();
    let base: usize = start.iter().zip(&in_strides).map(|(s, st)| s * st).sum();
    let strides: Vec<usize> = steps
        .iter()
        .zip(&in_strides)
        .map(|(s, st)| s * st)
        .collect();
    map_elements!(x.elements(), v => strided_gather(v, base, ty.dims(), &strides))
}

fn pad_into<T: Copy>(
    src: &[T],
    value: T,
    in_shape: &Shape,
    out: &TensorType,
    low: &[i64],
    interior: &[usize],
) -> Vec<T> {
    let mut data = vec![value; out.numel()];
    let out_strides = out.shape.strides();
    let rank = in_shape.rank();
    let mut idx = vec![0usize; rank];
    'elements: for &x in src {
        let mut pos = 0usize;
        let mut inside = true;
        for k in 0..rank {
            let p = low[k] + (idx[k] * (interior[k] + 1)) as i64;
            if p < 0 || p >= out.dims()[k] as i64 {
                inside = false;
            } else {
                pos += p as usize * out_strides[k];
            }
        }
        if inside {
            data[pos] = x;
        }
        for k in (0..rank).rev() {
            idx[k] += 1;
            if idx[k] < in_shape.dims()[k] {
                continue 'elements;
            }
            idx[k] = 0;
        }
    }
    data
}

pub(super) fn pad(
    x: &Array,
    value: &Array,
    ty: &TensorType,
    low: &[i64],
    interior: &[usize],
) -> Elements {
    let shape = x.shape();
    match (x.elements(), value.elements()) {
        (Elements::F32(v), Elements::F32(p)) => {
            Elements::F32(pad_into(v, p[0], shape, ty, low, interior))
        }
        (Elements::F64(v), Elements::F64(p)) => {
            Elements::F64(pad_into(v, p[0], shape, ty, low, interior))
        }
        (Elements::F16(v), Elements::F16(p)) => {
            Elements::F16(pad_into(v, p[0], shape, ty, low, interior))
        }
        (Elements::BF16(v), Elements::BF16(p)) => {
            Elements::BF16(pad_into(v, p[0], shape, ty, low, interior))
        }
        (Elements::I32(v), Elements::I32(p)) => {
            Elements::I32(pad_into(v, p[0], shape, ty, low, interior))
        }
        (Elements::I64(v), Elements::I64(p)) => {
            Elements::I64(pad_into(v, p[0], shape, ty, low, interior))
        }
        (Elements::U8(v), Elements::U8(p)) => {
            Elements::U8(pad_into(v, p[0], shape, ty, low, interior))
        }
        (Elements::Bool(v), Elements::Bool(p)) => {
            Elements::Bool(pad_into(v, p[0], shape, ty, low, interior))
        }
        _ => x.elements().clone(),
    }
}

pub(super) fn concatenate(args: &[&Array], ty: &TensorType, axis: usize) -> Elements {
    let outer: usize = ty.dims()[..axis].iter().product();
    let blocks: Vec<usize> = args
        .iter()
        .map(|a| a.dims()[axis..].iter().product())
        .collect();
    let mut out = Elements::zeros(ty.dtype, 0);
    for o in 0..outer {
        for (a, &block) in args.iter().zip(&blocks) {
            append(&mut out, a.elements(), o * block, block);
        }
    }
    out
}

/// Appends `src[start..start + len]` to `dst` (same dtype, by the type rules).
fn append(dst: &mut Elements, src: &Elements, start: usize, len: usize) {
    match (dst, src) {
        (Elements::F32(d), Elements::F32(s)) => d.extend_from_slice(&s[start..start + len]),
        (Elements::F64(d), Elements::F64(s)) => d.extend_from_slice(&s[start..start + len]),
        (Elements::F16(d), Elements::F16(s)) => d.extend_from_slice(&s[start..start + len]),
        (Elements::BF16(d), Elements::BF16(s)) => d.extend_from_slice(&s[start..start + len]),
        (Elements::I32(d), Elements::I32(s)) => d.extend_from_slice(&s[start..start + len]),
        (Elements::I64(d), Elements::I64(s)) => d.extend_from_slice(&s[start..start + len]),
        (Elements::U8(d), Elements::U8(s)) => d.extend_from_slice(&s[start..start + len]),
        (Elements::Bool(d), Elements::Bool(s)) => d.extend_from_slice(&s[start..start + len]),
        _ => {}
    }
}

pub(super) fn iota(ty: &TensorType, dim: usize) -> Elements {
    let stride = ty.shape.strides()[dim];
    let size = ty.dims()[dim];
    let index = |i: usize| (i / stride) % size;
    let n = ty.numel();
    if ty.dtype.is_float() {
        super::from_floats((0..n).map(|i| index(i) as f64).collect(), ty.dtype)
    } else {
        super::from_ints((0..n).map(|i| index(i) as i64).collect(), ty.dtype)
    }
}

//! Tensor data as the file formats store it: little-endian, row-major bytes, one byte a bool.
//! Decoding checks every size against the bytes present before it allocates, and allocates
//! fallibly, so a hostile header cannot panic or exhaust memory.

use super::{CheckpointError, Result};
use ferrax_ir::{Complex, DType, Elements};
use ferrax_runtime::Array;
use half::{bf16, f16};

/// The elements of `array` as little-endian bytes.
pub(super) fn encode(array: &Array) -> Vec<u8> {
    fn bytes<T, const N: usize>(v: &[T], f: impl Fn(&T) -> [u8; N]) -> Vec<u8> {
        v.iter().flat_map(f).collect()
    }
    match array.elements() {
        Elements::F32(v) => bytes(v, |x| x.to_le_bytes()),
        Elements::F64(v) => bytes(v, |x| x.to_le_bytes()),
        Elements::F16(v) => bytes(v, |x| x.to_bits().to_le_bytes()),
        Elements::BF16(v) => bytes(v, |x| x.to_bits().to_le_bytes()),
        Elements::I32(v) => bytes(v, |x| x.to_le_bytes()),
        Elements::I64(v) => bytes(v, |x| x.to_le_bytes()),
        Elements::U32(v) => bytes(v, |x| x.to_le_bytes()),
        Elements::U8(v) => v.clone(),
        Elements::I8(v) => bytes(v, |x| x.to_le_bytes()),
        Elements::I16(v) => bytes(v, |x| x.to_le_bytes()),
        Elements::U16(v) => bytes(v, |x| x.to_le_bytes()),
        Elements::U64(v) => bytes(v, |x| x.to_le_bytes()),
        Elements::Bool(v) => bytes(v, |&x| [u8::from(x)]),
        // The real part, then the imaginary part (NumPy's and safetensors' layout).
        Elements::C64(v) => v
            .iter()
            .flat_map(|z| [z.re.to_le_bytes(), z.im.to_le_bytes()])
            .flatten()
            .collect(),
        Elements::C128(v) => v
            .iter()
            .flat_map(|z| [z.re.to_le_bytes(), z.im.to_le_bytes()])
            .flatten()
            .collect(),
    }
}

/// `numel × size` for a shape read from a file, or an error naming the tensor on overflow.
pub(super) fn byte_len(name: &str, dtype_size: usize, shape: &[usize]) -> Result<usize> {
    shape
        .iter()
        .try_fold(dtype_size, |n, &d| n.checked_mul(d))
        .ok_or_else(|| CheckpointError::Data {
            name: name.into(),
            message: format!("shape {shape:?} overflows the address space"),
        })
}

/// A vector with room for `n` elements, or an error naming the tensor.
fn vec_for<T>(name: &str, n: usize) -> Result<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n)
        .map_err(|_| CheckpointError::TooLarge {
            name: name.into(),
            bytes: (n as u64).saturating_mul(size_of::<T>() as u64),
        })?;
    Ok(v)
}

/// The array of `dtype` and `shape` whose little-endian data is `bytes` (exactly).
pub(super) fn decode(name: &str, dtype: DType, shape: &[usize], bytes: &[u8]) -> Result<Array> {
    let want = byte_len(name, dtype.size_bytes(), shape)?;
    if bytes.len() != want {
        return Err(CheckpointError::Data {
            name: name.into(),
            message: format!(
                "{dtype}{shape:?} needs {want} bytes of data, the file has {}",
                bytes.len()
            ),
        });
    }
    fn read<T, const N: usize>(
        name: &str,
        bytes: &[u8],
        f: impl Fn([u8; N]) -> T,
    ) -> Result<Vec<T>> {
        let mut v = vec_for(name, bytes.len() / N)?;
        // `chunks_exact` yields N-byte slices, so the conversion cannot fail.
        v.extend(
            bytes
                .chunks_exact(N)
                .map(|c| f(c.try_into().unwrap_or([0; N]))),
        );
        Ok(v)
    }
    let elements = match dtype {
        DType::F32 => Elements::F32(read(name, bytes, f32::from_le_bytes)?),
        DType::F64 => Elements::F64(read(name, bytes, f64::from_le_bytes)?),
        DType::F16 => Elements::F16(read(name, bytes, |b| {
            f16::from_bits(u16::from_le_bytes(b))
        })?),
        DType::BF16 => Elements::BF16(read(name, bytes, |b| {
            bf16::from_bits(u16::from_le_bytes(b))
        })?),
        DType::I32 => Elements::I32(read(name, bytes, i32::from_le_bytes)?),
        DType::I64 => Elements::I64(read(name, bytes, i64::from_le_bytes)?),
        DType::U32 => Elements::U32(read(name, bytes, u32::from_le_bytes)?),
        DType::I8 => Elements::I8(read(name, bytes, i8::from_le_bytes)?),
        DType::I16 => Elements::I16(read(name, bytes, i16::from_le_bytes)?),
        DType::U16 => Elements::U16(read(name, bytes, u16::from_le_bytes)?),
        DType::U64 => Elements::U64(read(name, bytes, u64::from_le_bytes)?),
        DType::C64 => Elements::C64(read(name, bytes, |b: [u8; 8]| {
            let (re, im) = b.split_at(4);
            let part = |p: &[u8]| f32::from_le_bytes(p.try_into().unwrap_or([0; 4]));
            Complex::new(part(re), part(im))
        })?),
        DType::C128 => Elements::C128(read(name, bytes, |b: [u8; 16]| {
            let (re, im) = b.split_at(8);
            let part = |p: &[u8]| f64::from_le_bytes(p.try_into().unwrap_or([0; 8]));
            Complex::new(part(re), part(im))
        })?),
        DType::U8 => {
            let mut v = vec_for(name, bytes.len())?;
            v.extend_from_slice(bytes);
            Elements::U8(v)
        }
        DType::Bool => {
            if let Some(b) = bytes.iter().find(|&&b| b > 1) {
                return Err(CheckpointError::Data {
                    name: name.into(),
                    message: format!("a bool element holds the byte {b}, not 0 or 1"),
                });
            }
            Elements::Bool(read(name, bytes, |[b]: [u8; 1]| b == 1)?)
        }
    };
    Array::new(shape.to_vec(), elements).map_err(|e| CheckpointError::Data {
        name: name.into(),
        message: e.to_string(),
    })
}

/// A copy of file data, allocated fallibly.
pub(super) fn copy(name: &str, bytes: &[u8]) -> Result<Vec<u8>> {
    let mut v = vec_for(name, bytes.len())?;
    v.extend_from_slice(bytes);
    Ok(v)
}

/// Reverses the byte order of every `size`-byte element (big-endian files).
pub(super) fn swap_bytes(data: &mut [u8], size: usize) {
    if size > 1 {
        data.chunks_exact_mut(size).for_each(<[u8]>::reverse);
    }
}

/// Column-major (Fortran-order) data of `shape` reordered row-major.
pub(super) fn fortran_to_c(
    name: &str,
    data: &[u8],
    shape: &[usize],
    size: usize,
) -> Result<Vec<u8>> {
    let mut out = copy(name, data)?;
    if data.is_empty() || size == 0 {
        return Ok(out);
    }
    // Row-major strides, in elements; walk the column-major order (first index fastest).
    let mut strides = vec![1usize; shape.len()];
    for k in (0..shape.len().saturating_sub(1)).rev() {
        strides[k] = strides[k + 1].saturating_mul(shape[k + 1]);
    }
    let mut index = vec![0usize; shape.len()];
    for chunk in data.chunks_exact(size) {
        let at: usize = index.iter().zip(&strides).map(|(i, s)| i * s).sum();
        if let Some(dst) = out.get_mut(at * size..(at + 1) * size) {
            dst.copy_from_slice(chunk);
        }
        for (i, &d) in index.iter_mut().zip(shape) {
            *i += 1;
            if *i < d {
                break;
            }
            *i = 0;
        }
    }
    Ok(out)
}

//! Arrays as the bytes they are in device memory: elements little-endian, bools one byte each,
//! complex numbers their real then imaginary parts.

use ferrax_ir::{Complex, DType, Elements, TensorType};
use ferrax_runtime::{Array, RuntimeError};
use half::{bf16, f16};

/// The little-endian bytes of `a`'s elements, bools as one byte each.
pub fn bytes_of(a: &Array) -> Vec<u8> {
    match a.elements() {
        Elements::F32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        Elements::F64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        Elements::I32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        Elements::I64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        Elements::U32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        Elements::U8(v) => v.clone(),
        Elements::I8(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        Elements::I16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        Elements::U16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        Elements::U64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        Elements::Bool(v) => v.iter().map(|&x| u8::from(x)).collect(),
        Elements::F16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        Elements::BF16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        // Complex numbers: the real part, then the imaginary part.
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

/// The array of type `ty` whose elements are `bytes`; an error unless they are as many as
/// `ty` has.
pub fn array_of(bytes: &[u8], ty: &TensorType) -> Result<Array, RuntimeError> {
    fn each<const N: usize, T>(bytes: &[u8], from: fn([u8; N]) -> T) -> Vec<T> {
        bytes.chunks_exact(N).map(|c| from(le(c))).collect()
    }
    if bytes.len() != ty.numel() * ty.dtype.size_bytes() {
        return Err(RuntimeError::DataLength {
            shape: ty.shape.clone(),
            len: bytes.len() / ty.dtype.size_bytes(),
        });
    }
    let elements = match ty.dtype {
        DType::F32 => Elements::F32(each(bytes, f32::from_le_bytes)),
        DType::F64 => Elements::F64(each(bytes, f64::from_le_bytes)),
        DType::I32 => Elements::I32(each(bytes, i32::from_le_bytes)),
        DType::I64 => Elements::I64(each(bytes, i64::from_le_bytes)),
        DType::U32 => Elements::U32(each(bytes, u32::from_le_bytes)),
        DType::U8 => Elements::U8(bytes.to_vec()),
        DType::I8 => Elements::I8(each(bytes, i8::from_le_bytes)),
        DType::I16 => Elements::I16(each(bytes, i16::from_le_bytes)),
        DType::U16 => Elements::U16(each(bytes, u16::from_le_bytes)),
        DType::U64 => Elements::U64(each(bytes, u64::from_le_bytes)),
        DType::Bool => Elements::Bool(bytes.iter().map(|&b| b != 0).collect()),
        DType::F16 => Elements::F16(each(bytes, f16::from_le_bytes)),
        DType::BF16 => Elements::BF16(each(bytes, bf16::from_le_bytes)),
        DType::C64 => Elements::C64(each(bytes, |b: [u8; 8]| {
            Complex::new(f32::from_le_bytes(le(&b)), f32::from_le_bytes(le(&b[4..])))
        })),
        DType::C128 => Elements::C128(each(bytes, |b: [u8; 16]| {
            Complex::new(f64::from_le_bytes(le(&b)), f64::from_le_bytes(le(&b[8..])))
        })),
    };
    Array::new(ty.shape.clone(), elements)
}

/// The first `N` bytes of `bytes`, which has at least `N`.
pub(crate) fn le<const N: usize>(bytes: &[u8]) -> [u8; N] {
    let mut out = [0; N];
    out.copy_from_slice(&bytes[..N]);
    out
}

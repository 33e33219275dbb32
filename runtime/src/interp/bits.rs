//! `bitcast_convert`: each element's bits read as another dtype of the same width. Kept apart
//! from `convert` (elementwise.rs), which converts values, because here nothing is rounded or
//! checked: NaN payloads, -0 and subnormals come through unchanged.

use crate::RuntimeError;
use ferrax_ir::{Complex, DType, Elements, TypeError};
use half::{bf16, f16};

/// Every element's bits, zero-extended to u64.
fn bits(x: &Elements) -> Result<Vec<u64>, RuntimeError> {
    Ok(match x {
        Elements::F32(v) => v.iter().map(|x| x.to_bits() as u64).collect(),
        Elements::F64(v) => v.iter().map(|x| x.to_bits()).collect(),
        Elements::F16(v) => v.iter().map(|x| x.to_bits() as u64).collect(),
        Elements::BF16(v) => v.iter().map(|x| x.to_bits() as u64).collect(),
        Elements::I32(v) => v.iter().map(|&x| x as u32 as u64).collect(),
        Elements::I64(v) => v.iter().map(|&x| x as u64).collect(),
        Elements::U32(v) => v.iter().map(|&x| x as u64).collect(),
        Elements::U8(v) => v.iter().map(|&x| x as u64).collect(),
        Elements::I8(v) => v.iter().map(|&x| x as u8 as u64).collect(),
        Elements::I16(v) => v.iter().map(|&x| x as u16 as u64).collect(),
        Elements::U16(v) => v.iter().map(|&x| x as u64).collect(),
        Elements::U64(v) => v.clone(),
        // As in memory: the real part in the low half.
        Elements::C64(v) => v
            .iter()
            .map(|z| z.re.to_bits() as u64 | (z.im.to_bits() as u64) << 32)
            .collect(),
        Elements::Bool(_) => return Err(unsupported(DType::Bool)),
        Elements::C128(_) => return Err(unsupported(DType::C128)),
    })
}

fn unsupported(dtype: DType) -> RuntimeError {
    RuntimeError::Type(TypeError::DType {
        op: "bitcast_convert",
        dtype,
        expected: "a dtype of at most 64 bits",
    })
}

/// `x`'s elements reinterpreted as `to`; the shape rules have checked the widths agree, so
/// truncating each `u64` to the width keeps every bit.
pub(super) fn bitcast_convert(x: &Elements, to: DType) -> Result<Elements, RuntimeError> {
    let b = bits(x)?;
    Ok(match to {
        DType::F32 => Elements::F32(b.iter().map(|&x| f32::from_bits(x as u32)).collect()),
        DType::F64 => Elements::F64(b.iter().map(|&x| f64::from_bits(x)).collect()),
        DType::F16 => Elements::F16(b.iter().map(|&x| f16::from_bits(x as u16)).collect()),
        DType::BF16 => Elements::BF16(b.iter().map(|&x| bf16::from_bits(x as u16)).collect()),
        DType::I32 => Elements::I32(b.iter().map(|&x| x as u32 as i32).collect()),
        DType::I64 => Elements::I64(b.iter().map(|&x| x as i64).collect()),
        DType::U32 => Elements::U32(b.iter().map(|&x| x as u32).collect()),
        DType::U8 => Elements::U8(b.iter().map(|&x| x as u8).collect()),
        DType::I8 => Elements::I8(b.iter().map(|&x| x as i8).collect()),
        DType::I16 => Elements::I16(b.iter().map(|&x| x as i16).collect()),
        DType::U16 => Elements::U16(b.iter().map(|&x| x as u16).collect()),
        DType::U64 => Elements::U64(b),
        DType::C64 => Elements::C64(
            b.iter()
                .map(|&x| Complex::new(f32::from_bits(x as u32), f32::from_bits((x >> 32) as u32)))
                .collect(),
        ),
        DType::Bool => return Err(unsupported(DType::Bool)),
        DType::C128 => return Err(unsupported(DType::C128)),
    })
}

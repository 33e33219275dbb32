//! `dense<...>` literals: splats, nested lists, per-element hex bit patterns and hex blobs.

use crate::lex::Tok;
use crate::Error;
use ferrax_ir::{Complex, DType, Elements, Literal, Scalar, TensorType};
use half::{bf16, f16};

/// The element of real `dtype` whose bits are `bits`'s low ones; `None` for complex types,
/// whose elements are pairs of these ([`complex`]).
fn from_bits(dtype: DType, bits: u64) -> Option<Scalar> {
    Some(match dtype {
        DType::F32 => Scalar::F32(f32::from_bits(bits as u32)),
        DType::F64 => Scalar::F64(f64::from_bits(bits)),
        DType::F16 => Scalar::F16(f16::from_bits(bits as u16)),
        DType::BF16 => Scalar::BF16(bf16::from_bits(bits as u16)),
        DType::I32 => Scalar::I32(bits as u32 as i32),
        DType::I64 => Scalar::I64(bits as i64),
        DType::U32 => Scalar::U32(bits as u32),
        DType::U8 => Scalar::U8(bits as u8),
        DType::I8 => Scalar::I8(bits as u8 as i8),
        DType::I16 => Scalar::I16(bits as u16 as i16),
        DType::U16 => Scalar::U16(bits as u16),
        DType::U64 => Scalar::U64(bits),
        DType::Bool => Scalar::Bool(bits != 0),
        DType::C64 | DType::C128 => return None,
    })
}

/// The complex element of parts `re` and `im` (scalars of `dtype`'s part type).
fn complex(dtype: DType, re: Scalar, im: Scalar, line: usize) -> Result<Scalar, Error> {
    match (dtype, re, im) {
        (DType::C64, Scalar::F32(re), Scalar::F32(im)) => Ok(Scalar::C64(Complex::new(re, im))),
        (DType::C128, Scalar::F64(re), Scalar::F64(im)) => Ok(Scalar::C128(Complex::new(re, im))),
        _ => Err(Error::at(line, format!("not the parts of a {dtype} value"))),
    }
}

fn scalar(dtype: DType, word: &str, line: usize) -> Result<Scalar, Error> {
    let bad = || Error::at(line, format!("'{word}' is not a {dtype} value"));
    if let Some(hex) = word.strip_prefix("0x").or_else(|| word.strip_prefix("0X")) {
        return u64::from_str_radix(hex, 16)
            .ok()
            .and_then(|b| from_bits(dtype, b))
            .ok_or_else(bad);
    }
    Ok(match dtype {
        DType::Bool => Scalar::Bool(match word {
            "true" | "1" => true,
            "false" | "0" => false,
            _ => return Err(bad()),
        }),
        DType::I32 => Scalar::I32(word.parse().map_err(|_| bad())?),
        DType::I64 => Scalar::I64(word.parse().map_err(|_| bad())?),
        DType::U32 => Scalar::U32(word.parse().map_err(|_| bad())?),
        DType::U8 => Scalar::U8(word.parse().map_err(|_| bad())?),
        DType::I8 => Scalar::I8(word.parse().map_err(|_| bad())?),
        DType::I16 => Scalar::I16(word.parse().map_err(|_| bad())?),
        DType::U16 => Scalar::U16(word.parse().map_err(|_| bad())?),
        DType::U64 => Scalar::U64(word.parse().map_err(|_| bad())?),
        DType::F32 | DType::F64 | DType::F16 | DType::BF16 => {
            Scalar::from_f64(dtype, word.parse::<f64>().map_err(|_| bad())?)
        }
        // Written as pairs of parts (`literal`).
        DType::C64 | DType::C128 => return Err(bad()),
    })
}

/// Little-endian element bytes of a `dense<"0x...">` blob: ASCII hex digits, two per byte,
/// whole elements only.
fn blob(dtype: DType, hex: &str, line: usize) -> Result<Vec<Scalar>, Error> {
    let digits = hex.strip_prefix("0x").unwrap_or(hex).as_bytes();
    if !digits.len().is_multiple_of(2) || !digits.iter().all(u8::is_ascii_hexdigit) {
        return Err(Error::at(
            line,
            "malformed hex constant: expected pairs of hex digits",
        ));
    }
    let nibble = |b: u8| match b {
        b'0'..=b'9' => b - b'0',
        b'a'..=b'f' => b - b'a' + 10,
        _ => b - b'A' + 10,
    };
    let bytes: Vec<u8> = digits
        .chunks_exact(2)
        .map(|p| (nibble(p[0]) << 4) | nibble(p[1]))
        .collect();
    let width = dtype.size_bytes();
    if width == 0 || !bytes.len().is_multiple_of(width) {
        return Err(Error::at(
            line,
            format!(
                "hex constant of {} bytes is not a whole number of {dtype} elements",
                bytes.len()
            ),
        ));
    }
    let bits = |c: &[u8]| c.iter().rev().fold(0u64, |acc, &b| (acc << 8) | b as u64);
    let element = |d: DType, c: &[u8]| {
        from_bits(d, bits(c)).ok_or_else(|| Error::at(line, format!("no {d} value of bits")))
    };
    match dtype.complex_part() {
        // The real part, then the imaginary part.
        Some(part) => bytes
            .chunks_exact(width)
            .map(|c| {
                let (re, im) = c.split_at(width / 2);
                complex(dtype, element(part, re)?, element(part, im)?, line)
            })
            .collect(),
        None => bytes
            .chunks_exact(width)
            .map(|c| element(dtype, c))
            .collect(),
    }
}

/// The literal written by the tokens following `dense` in `words`, of type `ty`.
pub(crate) fn literal(words: &[Tok], ty: &TensorType, line: usize) -> Result<Literal, Error> {
    let start = words
        .iter()
        .position(|t| *t == Tok::Word("dense".into()))
        .ok_or_else(|| Error::at(line, "expected a dense<...> constant"))?;
    let mut values = Vec::new();
    // Complex elements are written `(re,im)`: their parts, paired in order.
    let part = ty.dtype.complex_part();
    let mut parts = Vec::new();
    let mut in_pair = false;
    for t in &words[start + 1..] {
        match t {
            Tok::Punct('>') => break,
            Tok::Punct('(') => in_pair = true,
            Tok::Punct(')') => in_pair = false,
            Tok::Str(hex) => values.extend(blob(ty.dtype, hex, line)?),
            Tok::Word(w) => match part {
                Some(p) if in_pair => parts.push(scalar(p, w, line)?),
                Some(_) => {
                    return Err(Error::at(
                        line,
                        format!("'{w}': complex values are written (re,im)"),
                    ))
                }
                None => values.push(scalar(ty.dtype, w, line)?),
            },
            _ => {}
        }
    }
    if !parts.is_empty() {
        if !parts.len().is_multiple_of(2) {
            return Err(Error::at(line, "complex values are pairs of parts"));
        }
        for pair in parts.chunks_exact(2) {
            values.push(complex(ty.dtype, pair[0], pair[1], line)?);
        }
    }
    let n = ty.numel();
    if values.len() != 1 && values.len() != n {
        return Err(Error::at(
            line,
            format!("{} values for a constant of type {ty}", values.len()),
        ));
    }
    let data = Elements::from_scalars(ty.dtype, &values)
        .ok_or_else(|| Error::at(line, "mixed constant types"))?;
    Ok(Literal {
        ty: ty.clone(),
        data,
    })
}

//! NumPy's `.npy` format (`numpy.save`): a magic string, a Python-dict header giving `descr`,
//! `fortran_order` and `shape`, then the raw data. Written as NumPy writes it (version 1.0,
//! little-endian, header padded to 64 bytes); read in versions 1 to 3, either byte order and
//! either memory order.

use super::{data, read_file, write_file, CheckpointError, Found, Result, Stored};
use crate::Tensor;
use ferrax_ir::DType;
use std::borrow::Cow;
use std::path::Path;

const FORMAT: &str = "npy";
const MAGIC: &[u8] = b"\x93NUMPY";

/// Saves one tensor as a `.npy` file (`numpy.save`).
pub fn save_npy(path: impl AsRef<Path>, tensor: &Tensor) -> Result<()> {
    write_file(path.as_ref(), &npy_to_bytes(tensor)?)
}

/// Loads the array of a `.npy` file (`numpy.load`).
pub fn load_npy(path: impl AsRef<Path>) -> Result<Tensor> {
    npy_from_bytes(&read_file(path.as_ref())?)
}

/// The `.npy` file [`save_npy`] writes, in memory.
pub fn npy_to_bytes(tensor: &Tensor) -> Result<Vec<u8>> {
    let array = tensor.to_array().map_err(|source| CheckpointError::Leaf {
        name: "0".into(),
        source,
    })?;
    let mut out = header(array.dtype(), array.dims());
    out.extend(data::encode(&array));
    Ok(out)
}

/// [`load_npy`] from the bytes of a file.
pub fn npy_from_bytes(bytes: &[u8]) -> Result<Tensor> {
    let name = "0";
    match parse(name, bytes)? {
        Ok(s) => Ok(Tensor::new(data::decode(name, s.dtype, &s.shape, &s.data)?)),
        Err(found) => Err(CheckpointError::Data {
            name: name.into(),
            message: format!("NumPy dtype {found} has no ferrax dtype"),
        }),
    }
}

/// NumPy's `descr` for a dtype; bf16 is `<V2`, as NumPy writes `ml_dtypes.bfloat16`.
fn descr(d: DType) -> &'static str {
    match d {
        DType::F32 => "<f4",
        DType::F64 => "<f8",
        DType::F16 => "<f2",
        DType::BF16 => "<V2",
        DType::I32 => "<i4",
        DType::I64 => "<i8",
        DType::U32 => "<u4",
        DType::U8 => "|u1",
        DType::I8 => "|i1",
        DType::I16 => "<i2",
        DType::U16 => "<u2",
        DType::U64 => "<u8",
        DType::Bool => "|b1",
        DType::C64 => "<c8",
        DType::C128 => "<c16",
    }
}

/// The dtype of a `descr` without its byte-order character, and whether that is big-endian.
fn from_descr(descr: &str) -> Option<(DType, bool)> {
    let (order, code) = descr.split_at_checked(1)?;
    let big = match order {
        "<" | "|" | "=" => false,
        ">" => true,
        _ => return None,
    };
    let dtype = match code {
        "f4" => DType::F32,
        "f8" => DType::F64,
        "f2" => DType::F16,
        "V2" => DType::BF16,
        "i4" => DType::I32,
        "i8" => DType::I64,
        "u4" => DType::U32,
        "u1" => DType::U8,
        "i1" => DType::I8,
        "i2" => DType::I16,
        "u2" => DType::U16,
        "u8" => DType::U64,
        "b1" => DType::Bool,
        "c8" => DType::C64,
        "c16" => DType::C128,
        _ => return None,
    };
    Some((dtype, big))
}

/// Magic, version (1.0 unless the header needs 2.0's longer length), header length and the
/// header dict padded with spaces and a newline so that the data starts at a multiple of 64.
pub(super) fn header(dtype: DType, shape: &[usize]) -> Vec<u8> {
    let dims: String = match shape {
        [d] => format!("{d},"),
        _ => shape
            .iter()
            .map(|d| d.to_string())
            .collect::<Vec<_>>()
            .join(", "),
    };
    let dict = format!(
        "{{'descr': '{}', 'fortran_order': False, 'shape': ({dims}), }}",
        descr(dtype)
    );
    let padded = |prefix: usize| (prefix + dict.len() + 1).next_multiple_of(64) - prefix;
    let mut out = MAGIC.to_vec();
    match u16::try_from(padded(10)) {
        Ok(len) => {
            out.extend([1, 0]);
            out.extend(len.to_le_bytes());
        }
        Err(_) => {
            out.extend([2, 0]);
            out.extend((padded(12) as u32).to_le_bytes());
        }
    }
    out.extend(dict.as_bytes());
    let end = out.len() - dict.len() + if out[6] == 1 { padded(10) } else { padded(12) };
    out.resize(end - 1, b' ');
    out.push(b'\n');
    out
}

/// The dtype, shape and row-major little-endian data of a `.npy` file; `name` names it in
/// errors. A dtype ferrax lacks is `Ok(Err(descr))`.
pub(super) fn parse<'a>(name: &str, bytes: &'a [u8]) -> Result<Found<'a>> {
    let truncated = |what: &str| CheckpointError::Truncated {
        format: FORMAT,
        what: format!("`{name}`: {what}"),
    };
    let bad = |message: String| CheckpointError::Header {
        format: FORMAT,
        message: format!("`{name}`: {message}"),
    };
    if bytes
        .get(..MAGIC.len())
        .ok_or_else(|| truncated("no magic string"))?
        != MAGIC
    {
        return Err(bad("not a .npy file (no magic string)".into()));
    }
    let major = *bytes.get(6).ok_or_else(|| truncated("no version"))?;
    let (len, start) = match major {
        1 => bytes
            .get(8..10)
            .map(|b| (u16::from_le_bytes([b[0], b[1]]) as usize, 10usize)),
        2 | 3 => bytes
            .get(8..12)
            .map(|b| (u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize, 12)),
        v => return Err(bad(format!("unknown format version {v}"))),
    }
    .ok_or_else(|| truncated("no header length"))?;
    let end = start
        .checked_add(len)
        .ok_or_else(|| bad("header length overflows".into()))?;
    let text = bytes
        .get(start..end)
        .ok_or_else(|| truncated("header cut off"))?;
    let text = std::str::from_utf8(text).map_err(|e| bad(format!("header is not text: {e}")))?;
    let dict = parse_dict(text).map_err(|e| bad(format!("{e} in header {:?}", text.trim_end())))?;
    let Some((dtype, big)) = from_descr(&dict.descr) else {
        return Ok(Err(dict.descr));
    };
    let size = dtype.size_bytes();
    let want = data::byte_len(name, size, &dict.shape)?;
    let raw = &bytes[end..];
    if raw.len() < want {
        return Err(truncated(&format!(
            "{dtype}{:?} needs {want} bytes of data, the file has {}",
            dict.shape,
            raw.len()
        )));
    }
    if raw.len() > want {
        return Err(bad(format!("{} bytes after the data", raw.len() - want)));
    }
    let mut data = Cow::Borrowed(raw);
    if big {
        let mut swapped = data::copy(name, raw)?;
        // A complex number's parts are swapped each in place.
        let word = dtype.complex_part().map_or(size, DType::size_bytes);
        data::swap_bytes(&mut swapped, word);
        data = Cow::Owned(swapped);
    }
    if dict.fortran_order {
        data = Cow::Owned(data::fortran_to_c(name, &data, &dict.shape, size)?);
    }
    Ok(Ok(Stored {
        dtype,
        shape: dict.shape,
        data,
    }))
}

struct Dict {
    descr: String,
    fortran_order: bool,
    shape: Vec<usize>,
}

/// The header: a Python dict literal with the keys `descr` (a string), `fortran_order` (a
/// bool) and `shape` (a tuple of ints), as `numpy.lib.format` writes it.
fn parse_dict(text: &str) -> std::result::Result<Dict, String> {
    let mut p = Parser { s: text.trim_end() };
    let (mut descr, mut fortran_order, mut shape) = (None, None, None);
    p.eat('{')?;
    while !p.peek('}') {
        let key = p.string()?;
        p.eat(':')?;
        match key.as_str() {
            "descr" if p.peek('[') => return Err("a structured dtype".into()),
            "descr" => descr = Some(p.string()?),
            "fortran_order" => fortran_order = Some(p.bool()?),
            "shape" => shape = Some(p.tuple()?),
            k => return Err(format!("unknown key {k:?}")),
        }
        if !p.peek('}') {
            p.eat(',')?;
        }
    }
    p.eat('}')?;
    match (descr, fortran_order, shape) {
        (Some(descr), Some(fortran_order), Some(shape)) => Ok(Dict {
            descr,
            fortran_order,
            shape,
        }),
        _ => Err("a missing key".into()),
    }
}

struct Parser<'a> {
    s: &'a str,
}

impl<'a> Parser<'a> {
    fn peek(&mut self, c: char) -> bool {
        self.s = self.s.trim_start();
        self.s.starts_with(c)
    }

    fn eat(&mut self, c: char) -> std::result::Result<(), String> {
        if !self.peek(c) {
            return Err(format!("expected {c:?}"));
        }
        self.s = &self.s[c.len_utf8()..];
        Ok(())
    }

    fn string(&mut self) -> std::result::Result<String, String> {
        let quote = if self.peek('\'') { '\'' } else { '"' };
        self.eat(quote)?;
        let end = self.s.find(quote).ok_or("an unterminated string")?;
        let out = self.s[..end].to_string();
        self.s = &self.s[end + 1..];
        Ok(out)
    }

    fn word(&mut self) -> &'a str {
        self.s = self.s.trim_start();
        let end = self
            .s
            .find(|c: char| !c.is_ascii_alphanumeric())
            .unwrap_or(self.s.len());
        let (w, rest) = self.s.split_at(end);
        self.s = rest;
        w
    }

    fn bool(&mut self) -> std::result::Result<bool, String> {
        match self.word() {
            "True" => Ok(true),
            "False" => Ok(false),
            w => Err(format!("expected True or False, found {w:?}")),
        }
    }

    fn tuple(&mut self) -> std::result::Result<Vec<usize>, String> {
        self.eat('(')?;
        let mut out = Vec::new();
        while !self.peek(')') {
            let w = self.word().trim_end_matches('L');
            out.push(w.parse().map_err(|_| format!("a bad dimension {w:?}"))?);
            if !self.peek(')') {
                self.eat(',')?;
            }
        }
        self.eat(')')?;
        Ok(out)
    }
}

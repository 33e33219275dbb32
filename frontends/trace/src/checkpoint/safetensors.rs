//! safetensors files through the `safetensors` crate, the reference implementation that
//! Hugging Face's Python package wraps, so files match what Python writes and reads.

use super::{
    assemble, assemble_all, data, named_arrays, read_file, write_file, CheckpointError, Found,
    Result, Stored,
};
use crate::{Tensor, Tree};
use ::safetensors::{Dtype, SafeTensorError, SafeTensors, View};
use ferrax_ir::DType;
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::Path;

const FORMAT: &str = "safetensors";

/// Saves every leaf of `tree` to a safetensors file at `path`, named by its path in the tree
/// (replacing the file whole: a crash mid-write leaves the previous one).
pub fn save_safetensors<T: Tree>(path: impl AsRef<Path>, tree: &T) -> Result<()> {
    write_file(path.as_ref(), &safetensors_to_bytes(tree)?)
}

/// Loads a tree shaped like `template` from the safetensors file at `path`: the file must hold
/// exactly the template's tensors, with its dtypes and shapes.
pub fn load_safetensors<T: Tree>(path: impl AsRef<Path>, template: &T) -> Result<T> {
    safetensors_from_bytes(&read_file(path.as_ref())?, template)
}

/// Every tensor of the safetensors file at `path`, by name, without a template.
pub fn read_safetensors(path: impl AsRef<Path>) -> Result<BTreeMap<String, Tensor>> {
    assemble_all(parse(&read_file(path.as_ref())?)?)
}

/// The safetensors file [`save_safetensors`] writes, in memory.
pub fn safetensors_to_bytes<T: Tree>(tree: &T) -> Result<Vec<u8>> {
    let tensors = named_arrays(tree)?
        .into_iter()
        .map(|(name, a)| {
            let dtype = to_dtype(a.dtype()).ok_or_else(|| CheckpointError::Data {
                name: name.clone(),
                message: format!("safetensors has no {} type", a.dtype()),
            })?;
            let view = Leaf {
                dtype,
                shape: a.dims().to_vec(),
                data: data::encode(&a),
            };
            Ok((name, view))
        })
        .collect::<Result<Vec<_>>>()?;
    ::safetensors::serialize(tensors, None).map_err(|e| CheckpointError::Header {
        format: FORMAT,
        message: e.to_string(),
    })
}

/// [`load_safetensors`] from the bytes of a file.
pub fn safetensors_from_bytes<T: Tree>(bytes: &[u8], template: &T) -> Result<T> {
    assemble(template, parse(bytes)?)
}

/// One leaf, as the crate's serializer takes it.
struct Leaf {
    dtype: Dtype,
    shape: Vec<usize>,
    data: Vec<u8>,
}

impl View for Leaf {
    fn dtype(&self) -> Dtype {
        self.dtype
    }
    fn shape(&self) -> &[usize] {
        &self.shape
    }
    fn data(&self) -> Cow<'_, [u8]> {
        Cow::Borrowed(&self.data)
    }
    fn data_len(&self) -> usize {
        self.data.len()
    }
}

/// The file's type of `d`; safetensors has no complex type of f64 parts.
fn to_dtype(d: DType) -> Option<Dtype> {
    Some(match d {
        DType::F32 => Dtype::F32,
        DType::F64 => Dtype::F64,
        DType::F16 => Dtype::F16,
        DType::BF16 => Dtype::BF16,
        DType::I32 => Dtype::I32,
        DType::I64 => Dtype::I64,
        DType::U32 => Dtype::U32,
        DType::U8 => Dtype::U8,
        DType::I8 => Dtype::I8,
        DType::I16 => Dtype::I16,
        DType::U16 => Dtype::U16,
        DType::U64 => Dtype::U64,
        DType::Bool => Dtype::BOOL,
        DType::C64 => Dtype::C64,
        DType::C128 => return None,
    })
}

fn from_dtype(d: Dtype) -> Option<DType> {
    Some(match d {
        Dtype::F32 => DType::F32,
        Dtype::F64 => DType::F64,
        Dtype::F16 => DType::F16,
        Dtype::BF16 => DType::BF16,
        Dtype::I32 => DType::I32,
        Dtype::I64 => DType::I64,
        Dtype::U32 => DType::U32,
        Dtype::U8 => DType::U8,
        Dtype::I8 => DType::I8,
        Dtype::I16 => DType::I16,
        Dtype::U16 => DType::U16,
        Dtype::U64 => DType::U64,
        Dtype::BOOL => DType::Bool,
        Dtype::C64 => DType::C64,
        _ => return None,
    })
}

/// The tensors of a file, validated by the crate (header, offsets covering the data exactly).
fn parse(bytes: &[u8]) -> Result<BTreeMap<String, Found<'_>>> {
    let file = SafeTensors::deserialize(bytes).map_err(|e| explain(bytes, e))?;
    Ok(file
        .iter()
        .map(|(name, view)| {
            let found = match from_dtype(view.dtype()) {
                Some(dtype) => Ok(Stored {
                    dtype,
                    shape: view.shape().to_vec(),
                    data: Cow::Borrowed(view.data()),
                }),
                None => Err(format!("{:?}", view.dtype())),
            };
            (name.to_string(), found)
        })
        .collect())
}

/// The crate's error, as truncation (naming the first tensor whose data is cut off) where the
/// file is shorter than its header says.
fn explain(bytes: &[u8], e: SafeTensorError) -> CheckpointError {
    let header_len = bytes
        .get(..8)
        .and_then(|b| b.try_into().ok())
        .map(u64::from_le_bytes);
    let truncated = |what: String| CheckpointError::Truncated {
        format: FORMAT,
        what,
    };
    match (&e, header_len) {
        (_, None) => truncated(format!(
            "{} bytes, shorter than the 8-byte header length",
            bytes.len()
        )),
        (SafeTensorError::InvalidHeaderLength, Some(n))
            if n > (bytes.len() as u64).saturating_sub(8) =>
        {
            truncated(format!(
                "the header is {n} bytes, the file {} bytes",
                bytes.len()
            ))
        }
        (SafeTensorError::MetadataIncompleteBuffer, Some(n)) => {
            let data_len = (bytes.len() as u64).saturating_sub(8).saturating_sub(n);
            match cut_tensor(bytes, n, data_len) {
                Some((name, end)) => truncated(format!(
                    "tensor `{name}` ends at data byte {end}, the file has {data_len}"
                )),
                None => CheckpointError::Header {
                    format: FORMAT,
                    message: format!("{e} ({data_len} bytes of data)"),
                },
            }
        }
        _ => CheckpointError::Header {
            format: FORMAT,
            message: e.to_string(),
        },
    }
}

/// The first tensor (by end offset) whose data ends past `data_len`.
fn cut_tensor(bytes: &[u8], header_len: u64, data_len: u64) -> Option<(String, u64)> {
    let end = usize::try_from(header_len).ok()?.checked_add(8)?;
    let header: serde_json::Value = serde_json::from_slice(bytes.get(8..end)?).ok()?;
    let mut cut: Vec<(u64, String)> = header
        .as_object()?
        .iter()
        .filter_map(|(name, info)| {
            let end = info.get("data_offsets")?.get(1)?.as_u64()?;
            (end > data_len).then(|| (end, name.clone()))
        })
        .collect();
    cut.sort();
    cut.into_iter().next().map(|(end, name)| (name, end))
}

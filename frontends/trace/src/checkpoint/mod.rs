//! Checkpoints: any [`Tree`] of parameters or optimizer state saved to and loaded from the files
//! the rest of the ecosystem reads, so that training can stop and resume, and weights move
//! between ferrax, NumPy, JAX and PyTorch.
//!
//! - **safetensors** ([`save_safetensors`], [`load_safetensors`]): the model ecosystem's format,
//!   a JSON header and raw little-endian data, read and written through the `safetensors` crate.
//! - **`.npz`** ([`save_npz`], [`load_npz`]): NumPy's zip of `.npy` files (`numpy.savez`),
//!   written stored by hand, or deflated ([`save_npz_compressed`], `numpy.savez_compressed`);
//!   both kinds read.
//! - **`.npy`** ([`save_npy`], [`load_npy`]): one array.
//!
//! Tensors are named by their leaf's key path ([`Tree::key_paths`]) joined with `.`, as JAX's
//! `keystr(path, simple=True, separator=".")` names them: a struct field (derived, or one of
//! this crate's: `Linear`, `AdamState`, ...) is its name, a `BTreeMap` key its key, an element
//! of a `Vec`, tuple or array its position, and `Option` and `Box` add nothing; a tree that is
//! a single tensor is named `0`. So `{"layers": [{"b": .., "w": ..}]}` saves `layers.0.b` and
//! `layers.0.w`, which Python reads as `flatten_dict(params, sep=".")` names, and a derived
//! `Gpt { blocks: Vec<Block { attn: Attention, .. }>, .. }` saves `blocks.0.attn.qkv.w`. Files
//! named by position, as ferrax wrote them before struct fields had names (`0.0.0`), still
//! load: a file holding exactly the template's positional names loads by them.
//!
//! Loading takes a template tree (flax's `restore(target)`): its structure, names, dtypes and
//! shapes say what the file must hold, and any difference (a missing or extra tensor, another
//! dtype or shape, a truncated or malformed file) is a [`CheckpointError`] naming the tensor;
//! nothing read from a file can panic or allocate more than the file holds (a deflated `.npz`
//! member: more than deflate can expand it to). Templates may be data-less ([`Tensor::spec`]).
//!
//! Every dtype ferrax has is supported. NumPy has no bfloat16: `.npy` stores bf16 as `<V2`,
//! which is what NumPy itself writes for an `ml_dtypes.bfloat16` array (read it in Python with
//! `.view(ml_dtypes.bfloat16)`), and a `V2` array reads back as bf16.

mod data;
mod npy;
mod npz;
mod safetensors;

pub use self::safetensors::{
    load_safetensors, read_safetensors, safetensors_from_bytes, safetensors_to_bytes,
    save_safetensors,
};
pub use npy::{load_npy, npy_from_bytes, npy_to_bytes, save_npy};
pub use npz::{
    load_npz, npz_compressed_to_bytes, npz_from_bytes, npz_to_bytes, read_npz, save_npz,
    save_npz_compressed,
};

use crate::tree::positional_key_paths;
use crate::{tree_flatten, tree_leaves, tree_unflatten, Tensor, Tree, TreeDef};
use ferrax_ir::DType;
use ferrax_runtime::Array;
use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::{Path, PathBuf};

pub use crate::error::CheckpointError;

pub type Result<T, E = CheckpointError> = std::result::Result<T, E>;

/// The path of every leaf of `tree`, in flattening order, as checkpoints name them.
pub fn tree_paths<T: Tree>(tree: &T) -> Vec<String> {
    let mut paths = Vec::new();
    tree.key_paths(&mut Vec::new(), &mut paths);
    paths.into_iter().map(join).collect()
}

/// A key path as a name: its keys joined with `.`, the root `0`.
fn join(path: Vec<String>) -> String {
    if path.is_empty() {
        "0".into()
    } else {
        path.join(".")
    }
}

/// The names of `tree`'s leaves, one a leaf (a `Tree` impl whose key paths disagree with its
/// flattening is an error, not a misnamed checkpoint).
fn leaf_names<T: Tree>(tree: &T, leaves: usize) -> Result<Vec<String>> {
    let names = tree_paths(tree);
    if names.len() != leaves {
        return Err(CheckpointError::Tree(crate::Error::Tree {
            expected: format!("a key path for each of {leaves} leaves"),
            found: format!("{} key paths", names.len()),
        }));
    }
    Ok(names)
}

/// Names as checkpoints had them before derived structs' fields were named: every child of a
/// node keyed by its position (an `Option`'s value as `0`).
fn positional_names(def: &TreeDef) -> Vec<String> {
    let mut paths = Vec::new();
    positional_key_paths(def, &mut Vec::new(), &mut paths);
    paths.into_iter().map(join).collect()
}

/// The first path that occurs twice (keys containing `.` can collide with nested ones).
fn check_unique(names: &[String]) -> Result<()> {
    let mut seen = BTreeSet::new();
    match names.iter().find(|n| !seen.insert(n.as_str())) {
        Some(name) => Err(CheckpointError::Duplicate { name: name.clone() }),
        None => Ok(()),
    }
}

/// The leaves of `tree` with data, named by path.
fn named_arrays<T: Tree>(tree: &T) -> Result<Vec<(String, Array)>> {
    let leaves = tree_leaves(tree);
    let names = leaf_names(tree, leaves.len())?;
    check_unique(&names)?;
    names
        .into_iter()
        .zip(leaves)
        .map(|(name, leaf)| match leaf.into_array() {
            Ok(a) => Ok((name, a)),
            Err(source) => Err(CheckpointError::Leaf { name, source }),
        })
        .collect()
}

/// One tensor as a file holds it: little-endian, row-major bytes (converted where the file
/// stores otherwise).
struct Stored<'a> {
    dtype: DType,
    shape: Vec<usize>,
    data: Cow<'a, [u8]>,
}

/// A tensor as read, before checking against a template: its dtype may be one ferrax lacks.
type Found<'a> = std::result::Result<Stored<'a>, String>;

/// Builds a tree like `template` from the tensors of a file, checking names, dtypes and
/// shapes before decoding any data. A file that holds exactly the template's positional names
/// (one written before derived structs' fields had names) loads by those.
fn assemble<T: Tree>(template: &T, mut found: BTreeMap<String, Found<'_>>) -> Result<T> {
    let (leaves, def) = tree_flatten(template);
    let mut names = leaf_names(template, leaves.len())?;
    if names.iter().any(|n| !found.contains_key(n)) {
        let old = positional_names(&def);
        if old.len() == found.len() && old.iter().all(|n| found.contains_key(n)) {
            names = old;
        }
    }
    check_unique(&names)?;
    let mut checked = Vec::with_capacity(names.len());
    for (name, leaf) in names.iter().zip(&leaves) {
        let Some(stored) = found.remove(name) else {
            return Err(CheckpointError::Missing { name: name.clone() });
        };
        let dtype_error = |found: String| CheckpointError::DType {
            name: name.clone(),
            expected: leaf.dtype(),
            found,
        };
        let stored = stored.map_err(dtype_error)?;
        if stored.dtype != leaf.dtype() {
            return Err(dtype_error(stored.dtype.to_string()));
        }
        if stored.shape != leaf.shape() {
            return Err(CheckpointError::Shape {
                name: name.clone(),
                expected: leaf.shape().to_vec(),
                found: stored.shape,
            });
        }
        checked.push((name, stored));
    }
    if let Some(name) = found.into_keys().next() {
        return Err(CheckpointError::Extra { name });
    }
    let tensors = checked
        .into_iter()
        .map(|(name, s)| data::decode(name, s.dtype, &s.shape, &s.data).map(Tensor::new))
        .collect::<Result<Vec<_>>>()?;
    Ok(tree_unflatten(&def, tensors)?)
}

/// Every tensor of a file, as a map from name to tensor (a tree itself); a dtype ferrax lacks
/// is an error naming the tensor.
fn assemble_all(found: BTreeMap<String, Found<'_>>) -> Result<BTreeMap<String, Tensor>> {
    found
        .into_iter()
        .map(|(name, stored)| match stored {
            Ok(s) => {
                let array = data::decode(&name, s.dtype, &s.shape, &s.data)?;
                Ok((name, Tensor::new(array)))
            }
            Err(found) => Err(CheckpointError::Data {
                message: format!("dtype {found} has no ferrax dtype"),
                name,
            }),
        })
        .collect()
}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> CheckpointError + '_ {
    move |source| CheckpointError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The whole file, allocated fallibly.
fn read_file(path: &Path) -> Result<Vec<u8>> {
    let mut file = std::fs::File::open(path).map_err(io_error(path))?;
    let len = file.metadata().map_err(io_error(path))?.len();
    let mut buf = Vec::new();
    usize::try_from(len)
        .ok()
        .and_then(|n| buf.try_reserve_exact(n).ok())
        .ok_or_else(|| CheckpointError::TooLarge {
            name: path.display().to_string(),
            bytes: len,
        })?;
    file.read_to_end(&mut buf).map_err(io_error(path))?;
    Ok(buf)
}

/// Writes `bytes` to a sibling file and renames it over `path`, so that a crash mid-write
/// leaves any previous checkpoint whole.
fn write_file(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut partial = path.as_os_str().to_owned();
    partial.push(".partial");
    let partial = PathBuf::from(partial);
    std::fs::write(&partial, bytes).map_err(io_error(&partial))?;
    std::fs::rename(&partial, path).map_err(io_error(path))
}

//! Kernels' machine code as data: each function's bytes with the relocations the code
//! generator left in them, and the constant tables they read. An image is what an
//! ahead-of-time artifact stores; [`LoadedCode`] maps one into executable memory and resolves
//! its relocations itself (the functions and tables of the image, and the host functions by
//! name), so loading needs no code generator. Only the relocation kinds x86-64
//! code uses without PIC are resolved; an image with another is an error, never a guess.

use crate::host::host_symbol;
use crate::kernel::KernelFn;
use serde::{Deserialize, Serialize};

/// Alignment of each function and table in a loaded image (at least what any of them asks).
const ALIGN: usize = 64;

/// A function's or table's place in an image, by the order it was defined.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Symbol {
    Function(u32),
    Table(u32),
    /// A host function, by its linked name (see [`host_symbol`]).
    Host(u32),
}

/// How a relocation patches the code at its offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RelocKind {
    /// The target's absolute address, 8 bytes.
    Absolute8,
    /// The target's address relative to the patched field, 4 bytes (x86-64 RIP-relative
    /// operands and calls).
    Relative4,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Relocation {
    pub offset: u32,
    pub kind: RelocKind,
    pub target: Symbol,
    pub addend: i64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FunctionCode {
    pub bytes: Vec<u8>,
    pub relocations: Vec<Relocation>,
}

/// The machine code of one executable's kernels.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CodeImage {
    pub functions: Vec<FunctionCode>,
    pub tables: Vec<Vec<u8>>,
    /// Host functions the code calls, by linked name.
    pub hosts: Vec<String>,
    /// Per kernel, the function that runs it (kernels alike share one).
    pub entries: Vec<u32>,
}

/// Why an image could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("the code image is malformed: {0}")]
    Malformed(String),
    #[error("the code image calls host function `{0}`, which this build does not provide")]
    UnknownHost(String),
    #[error("could not map memory for the code: {0}")]
    Map(#[from] std::io::Error),
}

/// An image mapped into executable memory, its relocations resolved; its code is unmapped
/// when this is dropped.
pub struct LoadedCode {
    _map: memmap2::Mmap,
    pub entries: Vec<KernelFn>,
}

impl LoadedCode {
    /// Maps `image`: its functions, then its tables, each at a multiple of [`ALIGN`] in one
    /// mapping (so relative relocations reach), patched, then made read-only and executable.
    pub fn load(image: &CodeImage) -> Result<LoadedCode, LoadError> {
        let malformed = |what: &str| LoadError::Malformed(what.to_string());
        if !cfg!(target_arch = "x86_64") {
            return Err(malformed("its relocations are x86-64's"));
        }
        let hosts = image
            .hosts
            .iter()
            .map(|name| host_symbol(name).ok_or_else(|| LoadError::UnknownHost(name.clone())))
            .collect::<Result<Vec<usize>, _>>()?;
        let mut size = 0usize;
        let mut place = |len: usize| -> Result<usize, LoadError> {
            let at = size;
            size = at
                .checked_add(len)
                .and_then(|end| end.checked_next_multiple_of(ALIGN))
                .ok_or_else(|| malformed("its size overflows"))?;
            Ok(at)
        };
        let functions = image
            .functions
            .iter()
            .map(|f| place(f.bytes.len()))
            .collect::<Result<Vec<_>, _>>()?;
        let tables = image
            .tables
            .iter()
            .map(|t| place(t.len()))
            .collect::<Result<Vec<_>, _>>()?;
        let mut map = memmap2::MmapMut::map_anon(size.max(1))?;
        let base = map.as_ptr() as usize;
        for (f, &at) in image.functions.iter().zip(&functions) {
            map[at..at + f.bytes.len()].copy_from_slice(&f.bytes);
        }
        for (t, &at) in image.tables.iter().zip(&tables) {
            map[at..at + t.len()].copy_from_slice(t);
        }
        for (f, &at) in image.functions.iter().zip(&functions) {
            for r in &f.relocations {
                let target = match r.target {
                    Symbol::Function(k) => functions.get(k as usize).map(|&o| base + o),
                    Symbol::Table(k) => tables.get(k as usize).map(|&o| base + o),
                    Symbol::Host(k) => hosts.get(k as usize).copied(),
                }
                .ok_or_else(|| malformed("a relocation's target is missing"))?;
                let value = (target as i64).wrapping_add(r.addend);
                let field = r.offset as usize;
                let width = match r.kind {
                    RelocKind::Absolute8 => 8,
                    RelocKind::Relative4 => 4,
                };
                if field
                    .checked_add(width)
                    .is_none_or(|end| end > f.bytes.len())
                {
                    return Err(malformed("a relocation lies outside its function"));
                }
                let patch = at + field;
                match r.kind {
                    RelocKind::Absolute8 => {
                        map[patch..patch + 8].copy_from_slice(&value.to_le_bytes());
                    }
                    RelocKind::Relative4 => {
                        let relative = value.wrapping_sub((base + patch) as i64);
                        let relative = i32::try_from(relative)
                            .map_err(|_| malformed("a relative relocation is out of range"))?;
                        map[patch..patch + 4].copy_from_slice(&relative.to_le_bytes());
                    }
                }
            }
        }
        let map = map.make_exec()?;
        let base = map.as_ptr() as usize;
        let entries = image
            .entries
            .iter()
            .map(|&f| {
                let at = functions
                    .get(f as usize)
                    .ok_or_else(|| malformed("a kernel's function is missing"))?;
                let code = (base + at) as *const u8;
                // SAFETY: the image's functions were compiled with the kernel signature; the
                // caller (the artifact loader) has checked the image's integrity and target.
                Ok(unsafe { std::mem::transmute::<*const u8, KernelFn>(code) })
            })
            .collect::<Result<Vec<_>, LoadError>>()?;
        Ok(LoadedCode { _map: map, entries })
    }
}

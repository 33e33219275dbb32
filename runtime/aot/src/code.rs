//! Kernels' code as a run calls it: one entry per kernel, the image the code is (what an
//! artifact stores), and whatever keeps the code mapped: the compiler's JIT module for code
//! just compiled, or the loader's mapping for code read from an image.

use crate::image::{CodeImage, LoadError, LoadedCode};
use crate::kernel::KernelFn;
use std::any::Any;

pub struct Code {
    pub(crate) entries: Vec<KernelFn>,
    pub(crate) image: CodeImage,
    /// Dropped after `entries` are last called (with the executable that owns this).
    _owner: Box<dyn Any + Send + Sync>,
}

impl Code {
    /// Code whose `entries` point into memory `owner` keeps mapped until it is dropped.
    ///
    /// # Safety
    ///
    /// Each entry must be a function with [`KernelFn`]'s signature compiled for the kernel of
    /// its index, whose code stays executable while `owner` lives, and `image` must be that
    /// code as data.
    pub unsafe fn new(
        entries: Vec<KernelFn>,
        image: CodeImage,
        owner: Box<dyn Any + Send + Sync>,
    ) -> Code {
        Code {
            entries,
            image,
            _owner: owner,
        }
    }

    /// `image`'s code, mapped and linked with no code generation.
    pub fn load(image: CodeImage) -> Result<Code, LoadError> {
        let loaded = LoadedCode::load(&image)?;
        Ok(Code {
            entries: loaded.entries.clone(),
            image,
            _owner: Box::new(loaded),
        })
    }

    /// Kernel `k`'s entry point.
    pub fn entry(&self, k: usize) -> Option<KernelFn> {
        self.entries.get(k).copied()
    }

    /// The code as data.
    pub fn image(&self) -> &CodeImage {
        &self.image
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

//! Global memory and the checks on every access to it: an access must lie in one buffer and,
//! from a kernel, be aligned to its size.

use crate::EmulatorError;
use std::ops::Range;

/// Where global buffers start: address 0 is never valid.
const GLOBAL_BASE: u64 = 0x1_0000;

/// Global memory: buffers placed one after another, 256-byte aligned as `cuMemAlloc`'s.
#[derive(Debug, Default)]
pub struct Memory {
    bytes: Vec<u8>,
    /// Every buffer's start (offset in `bytes`) and length, ordered by start.
    buffers: Vec<(usize, usize)>,
}

impl Memory {
    /// A new buffer holding `data`; returns its address.
    pub fn alloc(&mut self, data: &[u8]) -> u64 {
        let start = self.bytes.len().div_ceil(256) * 256 + 256;
        self.bytes.resize(start, 0xAB);
        self.bytes.extend_from_slice(data);
        self.buffers.push((start, data.len()));
        GLOBAL_BASE + start as u64
    }

    /// Bytes of all the buffers allocated so far.
    pub fn allocated(&self) -> usize {
        self.buffers.iter().map(|&(_, len)| len).sum()
    }

    /// Copies `data` to `address`, as the host copies to the device.
    pub fn write(&mut self, address: u64, data: &[u8]) -> Result<(), EmulatorError> {
        let range = self.host_range(address, data.len())?;
        self.bytes[range].copy_from_slice(data);
        Ok(())
    }

    /// The `len` bytes at `address`, as the host copies them back.
    pub fn read(&self, address: u64, len: usize) -> Result<&[u8], EmulatorError> {
        Ok(&self.bytes[self.host_range(address, len)?])
    }

    /// The `len` bytes at `address` that the kernel instruction `line` reads or writes.
    ///
    /// # Panics
    /// Unless one buffer holds them all: a kernel bug (the hardware would fault, or silently
    /// touch another buffer).
    #[allow(
        clippy::panic,
        reason = "a kernel's bad access is what the emulator reports"
    )]
    pub(crate) fn slice(&mut self, address: u64, len: usize, line: &str) -> &mut [u8] {
        let Some(range) = self.within_buffer(address, len) else {
            panic!("{len} bytes at {address:#x} outside every buffer: {line}")
        };
        &mut self.bytes[range]
    }

    fn host_range(&self, address: u64, len: usize) -> Result<Range<usize>, EmulatorError> {
        self.within_buffer(address, len)
            .ok_or(EmulatorError::Outside { address, len })
    }

    /// Where `len` bytes at `address` are in `bytes`, if one buffer holds them all.
    fn within_buffer(&self, address: u64, len: usize) -> Option<Range<usize>> {
        let at = usize::try_from(address.checked_sub(GLOBAL_BASE)?).ok()?;
        let end = at.checked_add(len)?;
        let i = self.buffers.partition_point(|&(start, _)| start <= at);
        let &(start, bytes) = self.buffers.get(i.checked_sub(1)?)?;
        (end <= start + bytes).then_some(at..end)
    }
}

/// Checks that a load or store of `bytes` (a scalar or a whole vector) at `address` is aligned
/// to its size.
///
/// # Panics
/// Where it is not: the hardware faults ("misaligned address").
pub(crate) fn check_aligned(address: u64, bytes: usize, line: &str) {
    assert!(
        address.is_multiple_of(bytes as u64),
        "{bytes}-byte access at {address:#x} misaligned: {line}"
    );
}

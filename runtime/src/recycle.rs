//! Recycling of large host buffers. A fresh allocation of many megabytes comes from the
//! operating system as untouched pages, and the first write to each 4 KiB page faults while the
//! kernel zeroes it: for a large result of an elementwise program that costs about as much as
//! the computation itself.
//! So the buffer of a large array dropped by its last holder is kept here, and executables take
//! their results from here before allocating. A few buffers of each size are kept, up to
//! [`LIMIT_BYTES`] in all; the rest are freed as usual.

use ferrax_ir::{DType, Elements};
use std::collections::HashMap;
use std::sync::Mutex;

/// Buffers smaller than this are left to the allocator, which reuses them cheaply.
pub const MIN_BYTES: usize = 1 << 20;
/// The most bytes kept at once.
pub const LIMIT_BYTES: usize = 1 << 30;
/// The most buffers kept of one dtype and length.
const PER_SIZE: usize = 4;

struct Pool {
    buffers: HashMap<(DType, usize), Vec<Elements>>,
    bytes: usize,
}

static POOL: Mutex<Option<Pool>> = Mutex::new(None);

fn bytes_of(e: &Elements) -> usize {
    e.len() * e.dtype().size_bytes()
}

/// Keeps `buffer` for a later [`take`] if it is large and there is room; else frees it.
pub fn give(buffer: Elements) {
    let bytes = bytes_of(&buffer);
    if bytes < MIN_BYTES {
        return;
    }
    let mut guard = POOL.lock().unwrap_or_else(|e| e.into_inner());
    let pool = guard.get_or_insert_with(|| Pool {
        buffers: HashMap::new(),
        bytes: 0,
    });
    let kept = pool
        .buffers
        .entry((buffer.dtype(), buffer.len()))
        .or_default();
    if kept.len() < PER_SIZE && pool.bytes + bytes <= LIMIT_BYTES {
        kept.push(buffer);
        pool.bytes += bytes;
    }
}

/// A kept buffer of `len` elements of `dtype`, with stale contents, if there is one.
pub fn take(dtype: DType, len: usize) -> Option<Elements> {
    let mut guard = POOL.lock().unwrap_or_else(|e| e.into_inner());
    let pool = guard.as_mut()?;
    let buffer = pool.buffers.get_mut(&(dtype, len))?.pop()?;
    pool.bytes -= bytes_of(&buffer);
    Some(buffer)
}

/// Bytes kept now.
pub fn kept_bytes() -> usize {
    POOL.lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .map_or(0, |p| p.bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_buffers_are_kept_and_small_ones_are_not() {
        // Lengths no other test uses, as the pool is shared by the whole process.
        let large = MIN_BYTES / 4 + 13;
        let buffer = Elements::F32(vec![1.0; large]);
        let ptr = match &buffer {
            Elements::F32(v) => v.as_ptr(),
            _ => unreachable!(),
        };
        give(buffer);
        assert!(kept_bytes() >= large * 4);
        match take(DType::F32, large) {
            Some(Elements::F32(v)) => assert_eq!(v.as_ptr(), ptr),
            _ => panic!("the buffer was not kept"),
        }
        assert!(take(DType::F32, large).is_none());
        give(Elements::F32(vec![1.0; 17]));
        assert!(take(DType::F32, 17).is_none());
    }

    #[test]
    fn at_most_a_few_of_each_size() {
        let len = MIN_BYTES / 8 + 29;
        for _ in 0..PER_SIZE + 2 {
            give(Elements::F64(vec![0.0; len]));
        }
        let mut taken = 0;
        while take(DType::F64, len).is_some() {
            taken += 1;
        }
        assert_eq!(taken, PER_SIZE);
    }
}

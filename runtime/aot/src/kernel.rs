//! What running a compiled kernel needs to know of it: its buffers in parameter order
//! ([`KernelSig`], which also generates the compiled function's parameter list, so the two
//! cannot disagree), the elements or rows it runs over, and where a launch may cut it into
//! parts. The kernel's body is the compiler's and stays there.

use ferrax_ir::{DType, ReduceOp, ValueId};
use serde::{Deserialize, Serialize};

/// A compiled kernel's entry point: `(argument block, start, end)` runs elements (or rows)
/// `start..end`.
pub type KernelFn = unsafe extern "C" fn(*const *mut u8, i64, i64);

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Role {
    Input,
    Output,
    /// One row of working memory per thread (a row kernel's value kept from one pass to a
    /// later one); the launch provides it.
    Scratch,
    /// A column reduction's partial results, `Access::Inner(cols)`: the launch gives each part
    /// of the element range its own, set to the reduction's identity, and combines them in
    /// part order into the value.
    Partial(ReduceOp),
}

/// Which element of a buffer iteration `i` reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Access {
    /// Element `i`.
    Each,
    /// Element 0, for every `i` (a scalar broadcast).
    Scalar,
    /// Element `i / n` (a broadcast over trailing dimensions).
    Outer(usize),
    /// Element `i % n` (a broadcast over leading dimensions).
    Inner(usize),
    /// Element `clamp(r, 0, rows - 1) * n + i % n`, where `r` is element `i / n` of integer
    /// buffer `index` (read with `Outer(n)`): rows of `n` elements picked by indices (a row
    /// gather, such as an embedding lookup).
    Gather { index: usize, n: usize, rows: usize },
    /// Stored only where `start <= i % row < start + len`, at `(i / row) * len + i % row -
    /// start`: a window of the last axis (a slice of every row of `row` elements), which a
    /// kernel stores as it computes the whole rows.
    Window {
        row: usize,
        start: usize,
        len: usize,
    },
}

/// One buffer of a kernel.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Buffer {
    pub role: Role,
    pub dtype: DType,
    pub access: Access,
    /// The program value the buffer holds.
    pub value: ValueId,
}

/// A kernel's buffers, in parameter order.
#[derive(Clone, Debug, PartialEq, Default, Serialize, Deserialize)]
pub struct KernelSig {
    pub buffers: Vec<Buffer>,
}

impl KernelSig {
    /// The argument block for a launch: one pointer per buffer, in parameter order, taken from
    /// `pointer_of(buffer index, buffer)`. The compiled kernel reads its parameters from it.
    pub fn pack(&self, mut pointer_of: impl FnMut(usize, &Buffer) -> *mut u8) -> Vec<*mut u8> {
        self.buffers
            .iter()
            .enumerate()
            .map(|(i, b)| pointer_of(i, b))
            .collect()
    }
}

/// A compiled kernel as its launches see it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KernelLaunch {
    pub name: String,
    /// Elements the kernel runs over (`rows * cols` for a row kernel).
    pub len: usize,
    pub sig: KernelSig,
    /// `(rows, cols)` of a row kernel, whose entry runs rows; `None` for one flat loop.
    pub rows: Option<(usize, usize)>,
    /// A flat kernel's parts start at multiples of this many elements (its vector loop's
    /// step, or its chunk where it runs by chunks).
    pub step: usize,
}

//! Static shapes and tensor types.

use crate::DType;
use serde::{Deserialize, Serialize};
use std::fmt;

/// The highest rank a tensor may have.
pub const MAX_RANK: usize = 8;

/// The most bytes one array may take (Rust's bound on one allocation). A type within it has
/// an element count, strides and byte offsets that cannot overflow: the bound holds even with
/// every zero dimension counted as one, so a shape such as `[0, 2^40, 2^40]` is refused too.
pub const MAX_BYTES: usize = isize::MAX as usize;

/// A static shape: the size of every dimension, outermost first (row-major).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct Shape(pub Vec<usize>);

impl Shape {
    pub fn new(dims: impl Into<Vec<usize>>) -> Shape {
        Shape(dims.into())
    }

    pub fn scalar() -> Shape {
        Shape(Vec::new())
    }

    pub fn rank(&self) -> usize {
        self.0.len()
    }

    pub fn dims(&self) -> &[usize] {
        &self.0
    }

    pub fn numel(&self) -> usize {
        self.0.iter().product()
    }

    /// Row-major strides in elements.
    pub fn strides(&self) -> Vec<usize> {
        let mut strides = vec![1; self.rank()];
        for i in (0..self.rank().saturating_sub(1)).rev() {
            strides[i] = strides[i + 1] * self.0[i + 1];
        }
        strides
    }
}

impl From<&[usize]> for Shape {
    fn from(dims: &[usize]) -> Shape {
        Shape(dims.to_vec())
    }
}

impl From<Vec<usize>> for Shape {
    fn from(dims: Vec<usize>) -> Shape {
        Shape(dims)
    }
}

impl<const N: usize> From<[usize; N]> for Shape {
    fn from(dims: [usize; N]) -> Shape {
        Shape(dims.to_vec())
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{d}")?;
        }
        f.write_str("]")
    }
}

/// The type of an SSA value: element type and static shape, printed `f32[2,3]`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TensorType {
    pub dtype: DType,
    pub shape: Shape,
}

impl TensorType {
    pub fn new(dtype: DType, shape: impl Into<Shape>) -> TensorType {
        TensorType {
            dtype,
            shape: shape.into(),
        }
    }

    pub fn scalar(dtype: DType) -> TensorType {
        TensorType::new(dtype, Shape::scalar())
    }

    pub fn rank(&self) -> usize {
        self.shape.rank()
    }

    pub fn dims(&self) -> &[usize] {
        self.shape.dims()
    }

    pub fn numel(&self) -> usize {
        self.shape.numel()
    }

    /// The bytes the type's elements take, or `None` past [`MAX_BYTES`] (see there).
    pub fn checked_bytes(&self) -> Option<usize> {
        let mut bound = self.dtype.size_bytes();
        for &d in self.dims() {
            bound = bound.checked_mul(d.max(1)).filter(|&b| b <= MAX_BYTES)?;
        }
        Some(self.numel() * self.dtype.size_bytes())
    }

    pub fn with_dtype(&self, dtype: DType) -> TensorType {
        TensorType::new(dtype, self.shape.clone())
    }

    pub fn with_shape(&self, shape: impl Into<Shape>) -> TensorType {
        TensorType::new(self.dtype, shape)
    }
}

impl fmt::Display for TensorType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.dtype, self.shape)
    }
}

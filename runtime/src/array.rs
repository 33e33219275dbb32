//! `Array`: concrete tensor data. Host memory only for now; a device tag joins it with the
//! GPU backend.

use crate::RuntimeError;
use ferrax_ir::{DType, Element, Elements, Literal, Scalar, Shape, TensorType};
use std::fmt;
use std::sync::Arc;

/// An immutable, cheaply clonable tensor value: a type and one element per position.
#[derive(Clone, PartialEq)]
pub struct Array {
    ty: TensorType,
    data: Arc<Elements>,
}

/// The last holder of a large array hands its buffer to [`crate::recycle`].
impl Drop for Array {
    fn drop(&mut self) {
        if let Some(data) = Arc::get_mut(&mut self.data) {
            if data.len() * data.dtype().size_bytes() >= crate::recycle::MIN_BYTES {
                crate::recycle::give(std::mem::replace(data, Elements::F32(Vec::new())));
            }
        }
    }
}

impl Array {
    /// An array of `shape` holding `data` row-major; the length must match.
    pub fn new(shape: impl Into<Shape>, data: Elements) -> Result<Array, RuntimeError> {
        let shape = shape.into();
        if shape.numel() != data.len() {
            return Err(RuntimeError::DataLength {
                shape,
                len: data.len(),
            });
        }
        Ok(Array {
            ty: TensorType::new(data.dtype(), shape),
            data: Arc::new(data),
        })
    }

    /// The same elements (shared) under `shape`, which must hold as many.
    pub fn reshaped(&self, shape: Shape) -> Result<Array, RuntimeError> {
        if shape.numel() != self.data.len() {
            return Err(RuntimeError::DataLength {
                shape,
                len: self.data.len(),
            });
        }
        Ok(Array {
            ty: TensorType::new(self.ty.dtype, shape),
            data: Arc::clone(&self.data),
        })
    }

    pub fn from_vec<T: Element>(
        shape: impl Into<Shape>,
        data: Vec<T>,
    ) -> Result<Array, RuntimeError> {
        Array::new(shape, T::into_elements(data))
    }

    pub fn from_slice<T: Element>(
        shape: impl Into<Shape>,
        data: &[T],
    ) -> Result<Array, RuntimeError> {
        Array::from_vec(shape, data.to_vec())
    }

    pub fn scalar<T: Element>(value: T) -> Array {
        Array::full(Shape::scalar(), value.into_scalar())
    }

    /// `value` at every position of `shape`.
    pub fn full(shape: impl Into<Shape>, value: Scalar) -> Array {
        let shape = shape.into();
        let data = Elements::splat(value, shape.numel());
        Array {
            ty: TensorType::new(value.dtype(), shape),
            data: Arc::new(data),
        }
    }

    pub fn zeros(dtype: DType, shape: impl Into<Shape>) -> Array {
        Array::full(shape, Scalar::zero(dtype))
    }

    pub fn from_literal(lit: &Literal) -> Array {
        Array {
            ty: lit.ty.clone(),
            data: Arc::new(lit.to_dense()),
        }
    }

    pub fn to_literal(&self) -> Literal {
        Literal {
            ty: self.ty.clone(),
            data: (*self.data).clone(),
        }
    }

    pub fn ty(&self) -> &TensorType {
        &self.ty
    }

    pub fn shape(&self) -> &Shape {
        &self.ty.shape
    }

    pub fn dims(&self) -> &[usize] {
        self.ty.dims()
    }

    pub fn dtype(&self) -> DType {
        self.ty.dtype
    }

    pub fn numel(&self) -> usize {
        self.ty.numel()
    }

    pub fn elements(&self) -> &Elements {
        &self.data
    }

    /// The data itself when this is its only holder (so it can be reused), else the array.
    pub fn into_elements(mut self) -> Result<Elements, Array> {
        match Arc::get_mut(&mut self.data) {
            Some(data) => Ok(std::mem::replace(data, Elements::F32(Vec::new()))),
            None => Err(self),
        }
    }

    /// The elements as a slice of `T`, or an error naming both dtypes.
    pub fn as_slice<T: Element>(&self) -> Result<&[T], RuntimeError> {
        T::slice_of(&self.data).ok_or(RuntimeError::DType {
            expected: T::DTYPE,
            got: self.dtype(),
        })
    }

    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>, RuntimeError> {
        self.as_slice().map(<[T]>::to_vec)
    }

    /// The single element of a one-element array.
    pub fn item<T: Element>(&self) -> Result<T, RuntimeError> {
        match self.as_slice::<T>()? {
            [x] => Ok(*x),
            _ => Err(RuntimeError::NotScalar {
                ty: self.ty.clone(),
            }),
        }
    }

    /// Every element widened to f64, for comparisons in tests and tools.
    pub fn to_f64_vec(&self) -> Vec<f64> {
        self.data.to_f64_vec()
    }
}

impl fmt::Debug for Array {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Array({} {})", self.ty, self.data)
    }
}

impl fmt::Display for Array {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.ty, self.data)
    }
}

impl<T: Element> From<Vec<T>> for Array {
    fn from(v: Vec<T>) -> Array {
        let shape = Shape::new([v.len()]);
        Array {
            ty: TensorType::new(T::DTYPE, shape),
            data: Arc::new(T::into_elements(v)),
        }
    }
}

#[cfg(feature = "ndarray")]
impl<T: Element, D: ndarray::Dimension> From<ndarray::Array<T, D>> for Array {
    fn from(a: ndarray::Array<T, D>) -> Array {
        let shape = Shape::new(a.shape().to_vec());
        let data: Vec<T> = a.iter().copied().collect();
        Array {
            ty: TensorType::new(T::DTYPE, shape),
            data: Arc::new(T::into_elements(data)),
        }
    }
}

#[cfg(feature = "ndarray")]
impl Array {
    /// The array as an `ndarray::ArrayD`.
    pub fn to_ndarray<T: Element>(&self) -> Result<ndarray::ArrayD<T>, RuntimeError> {
        let v = self.to_vec::<T>()?;
        ndarray::ArrayD::from_shape_vec(self.dims().to_vec(), v).map_err(|_| {
            RuntimeError::DataLength {
                shape: self.shape().clone(),
                len: self.numel(),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn construction_checks_length_and_dtype() {
        let a = Array::from_vec([2, 3], vec![1i32, 2, 3, 4, 5, 6]).unwrap();
        assert_eq!(a.dims(), &[2, 3]);
        assert_eq!(a.dtype(), DType::I32);
        assert_eq!(a.to_vec::<i32>().unwrap(), vec![1, 2, 3, 4, 5, 6]);
        assert_eq!(
            a.to_vec::<f32>().unwrap_err().to_string(),
            "expected f32 data, the array holds i32"
        );
        let err = Array::from_vec([2, 2], vec![1.0f32; 3]).unwrap_err();
        assert_eq!(err.to_string(), "3 elements cannot fill shape [2,2]");
        assert_eq!(Array::scalar(2.5f64).item::<f64>().unwrap(), 2.5);
        assert!(a.item::<i32>().is_err());
    }

    #[cfg(feature = "ndarray")]
    #[test]
    fn ndarray_round_trip() {
        let nd = ndarray::Array2::from_shape_fn((2, 3), |(i, j)| (i * 3 + j) as f32);
        let a = Array::from(nd.clone());
        assert_eq!(a.dims(), &[2, 3]);
        assert_eq!(
            a.to_vec::<f32>().unwrap(),
            vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
        );
        assert_eq!(a.to_ndarray::<f32>().unwrap(), nd.into_dyn());
    }
}

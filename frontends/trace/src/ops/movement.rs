//! Data movement: `broadcast_in_dim` (`broadcast_to`), `reshape` (with `expand_dims` and
//! `squeeze`), `transpose`, `slice`, `pad` and `concatenate`. The methods take NumPy's
//! conventions (`-1` sizes, negative axes, trailing-aligned broadcasting) and spell out the
//! IR's explicit attributes; a movement that changes nothing records nothing.

use super::source::number_like;
use super::{axis_index, Axes, ShapeArg};
use crate::tensor::{apply, apply_at};
use crate::Tensor;
use ferrax_ir::{DType, Op, Shape};
use std::borrow::Borrow;
use std::panic::Location;

fn shape_text(dtype: DType, dims: &[usize]) -> String {
    format!("{dtype}{}", Shape::new(dims.to_vec()))
}

impl Tensor {
    /// Broadcasts to `shape` with NumPy rules (`jnp.broadcast_to`).
    #[track_caller]
    pub fn broadcast_to(&self, shape: impl ShapeArg) -> Tensor {
        let sizes = shape.to_sizes();
        if sizes.iter().any(|&s| s < 0) {
            return self.fail(format!("broadcast_to: negative size in {sizes:?}"));
        }
        let target: Vec<usize> = sizes.iter().map(|&s| s as usize).collect();
        self.broadcast_to_at(Location::caller(), &target)
    }

    pub(super) fn broadcast_to_at(
        &self,
        location: &'static Location<'static>,
        target: &[usize],
    ) -> Tensor {
        let (r, n) = (self.ndim(), target.len());
        let fits =
            n >= r && (0..r).all(|i| self.shape()[i] == 1 || self.shape()[i] == target[n - r + i]);
        if !fits {
            let message = format!(
                "broadcast_to: cannot broadcast {} to {}",
                self.ty(),
                shape_text(self.dtype(), target)
            );
            return self.fail_at(location, message);
        }
        if self.shape() == target {
            return self.clone();
        }
        let op = Op::BroadcastInDim {
            shape: Shape::new(target.to_vec()),
            dims: (n - r..n).collect(),
        };
        apply_at(location, op, &[self])
    }

    /// Reshapes to `shape`; one size may be `-1` and is inferred.
    #[track_caller]
    pub fn reshape(&self, shape: impl ShapeArg) -> Tensor {
        let sizes = shape.to_sizes();
        // The product of the given sizes; `None` past `i64::MAX` (no tensor has that many).
        let known = sizes
            .iter()
            .filter(|&&s| s >= 0)
            .try_fold(1i64, |p, &s| p.checked_mul(s));
        let holes = sizes.iter().filter(|&&s| s == -1).count();
        let bad = match known {
            None => true,
            Some(known) => {
                sizes.iter().any(|&s| s < -1)
                    || holes > 1
                    || (holes == 1 && (known == 0 || self.numel() as i64 % known != 0))
            }
        };
        if bad {
            return self.fail(format!(
                "reshape: cannot reshape {} to {sizes:?}",
                self.ty()
            ));
        }
        let dims: Vec<usize> = sizes
            .iter()
            .map(|&s| {
                if s == -1 {
                    self.numel() / known.unwrap_or(1) as usize
                } else {
                    s as usize
                }
            })
            .collect();
        if dims == self.shape() {
            return self.clone();
        }
        apply(
            Op::Reshape {
                shape: Shape::new(dims),
            },
            &[self],
        )
    }

    /// Permutes dimensions: result dimension `i` is dimension `perm[i]`.
    #[track_caller]
    pub fn transpose(&self, perm: impl ShapeArg) -> Tensor {
        let perm = perm.to_sizes();
        let mut idx = Vec::with_capacity(perm.len());
        for &p in &perm {
            match axis_index(p, self.ndim()) {
                Some(i) if !idx.contains(&i) => idx.push(i),
                _ => {
                    return self.fail(format!(
                        "transpose: {perm:?} is not a permutation of the dimensions of {}",
                        self.ty()
                    ))
                }
            }
        }
        if idx.len() != self.ndim() {
            return self.fail(format!(
                "transpose: {perm:?} is not a permutation of the dimensions of {}",
                self.ty()
            ));
        }
        if idx.iter().enumerate().all(|(i, &p)| i == p) {
            return self.clone();
        }
        apply(Op::Transpose { perm: idx }, &[self])
    }

    /// The elements in reverse order along each of `axes` (`jnp.flip`, `lax.rev`; negative
    /// axes count from the end).
    #[track_caller]
    pub fn flip(&self, axes: impl ShapeArg) -> Tensor {
        let given = axes.to_sizes();
        let mut idx = Vec::with_capacity(given.len());
        for &a in &given {
            let why = match axis_index(a, self.ndim()) {
                Some(i) if !idx.contains(&i) => {
                    idx.push(i);
                    continue;
                }
                Some(_) => "appears twice in",
                None => "is not an axis of",
            };
            return self.fail(format!("flip: axis {a} of {given:?} {why} {}", self.ty()));
        }
        // Reversing an axis of one element (or none) changes nothing.
        idx.retain(|&i| self.shape()[i] > 1);
        if idx.is_empty() {
            return self.clone();
        }
        idx.sort_unstable();
        apply(Op::Reverse { axes: idx }, &[self])
    }

    /// All dimensions reversed (NumPy's `.T`).
    #[track_caller]
    pub fn t(&self) -> Tensor {
        let perm: Vec<usize> = (0..self.ndim()).rev().collect();
        self.transpose(perm)
    }

    /// Inserts a dimension of size 1 at `axis` (`-1` appends).
    #[track_caller]
    pub fn expand_dims(&self, axis: i64) -> Tensor {
        let Some(a) = axis_index(axis, self.ndim() + 1) else {
            return self.fail(format!(
                "expand_dims: axis {axis} is out of range for {}",
                self.ty()
            ));
        };
        let mut dims = self.shape().to_vec();
        dims.insert(a, 1);
        self.reshape(dims)
    }

    /// Removes the given dimensions, which must have size 1.
    #[track_caller]
    pub fn squeeze(&self, axes: impl Into<Axes>) -> Tensor {
        let axes = match axes.into() {
            Axes::All => (0..self.ndim()).filter(|&i| self.shape()[i] == 1).collect(),
            list => match self.axes("squeeze", list) {
                Ok(a) => a,
                Err(e) => return e,
            },
        };
        if let Some(&a) = axes.iter().find(|&&a| self.shape()[a] != 1) {
            return self.fail(format!(
                "squeeze: dimension {a} of {} has size {}, not 1",
                self.ty(),
                self.shape()[a]
            ));
        }
        let dims: Vec<usize> = (0..self.ndim())
            .filter(|i| !axes.contains(i))
            .map(|i| self.shape()[i])
            .collect();
        self.reshape(dims)
    }

    /// `self[start[0]..limit[0], start[1]..limit[1], ...]`.
    #[track_caller]
    pub fn slice(&self, start: &[usize], limit: &[usize]) -> Tensor {
        self.slice_strided(start, limit, &vec![1; start.len()])
    }

    /// A strided slice (`lax.slice`).
    #[track_caller]
    pub fn slice_strided(&self, start: &[usize], limit: &[usize], strides: &[usize]) -> Tensor {
        let op = Op::Slice {
            start: start.to_vec(),
            limit: limit.to_vec(),
            strides: strides.to_vec(),
        };
        apply(op, &[self])
    }

    /// Pads each dimension with `(low, high, interior)` copies of `value` (`lax.pad`);
    /// negative `low`/`high` crop.
    #[track_caller]
    pub fn pad(&self, config: &[(i64, i64, usize)], value: f64) -> Tensor {
        let v = number_like(value, self);
        let op = Op::Pad {
            low: config.iter().map(|c| c.0).collect(),
            high: config.iter().map(|c| c.1).collect(),
            interior: config.iter().map(|c| c.2).collect(),
        };
        apply(op, &[self, &v])
    }

    /// Joins tensors along `axis` (`jnp.concatenate`).
    #[track_caller]
    pub fn concatenate(tensors: &[impl Borrow<Tensor>], axis: i64) -> Tensor {
        let args: Vec<&Tensor> = tensors.iter().map(Borrow::borrow).collect();
        let Some(first) = args.first() else {
            return Tensor::failed(
                Location::caller(),
                "concatenate: needs at least one tensor".into(),
                ferrax_ir::TensorType::scalar(DType::F32),
            );
        };
        let Some(a) = axis_index(axis, first.ndim()) else {
            return first.fail(format!(
                "concatenate: axis {axis} is out of range for {}",
                first.ty()
            ));
        };
        apply(Op::Concatenate { axis: a }, &args)
    }
}

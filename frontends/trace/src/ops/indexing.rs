//! Indexing by traced values, named as `jax.numpy` names it: `take`, `take_along_axis`,
//! `x.at(i).set/add/mul/min/max(v)` and `.get()`, `dynamic_slice` and
//! `dynamic_update_slice`, `one_hot`, `argmax`/`argmin`. Each builds one `gather`, `scatter`
//! or dynamic slice with the dimension numbers spelled out.
//!
//! Out-of-range indices follow JAX: negative indices count from the end (for signed index
//! dtypes); `take` reads the fill value and `at(..).get()` and dynamic slices clamp to the
//! nearest valid position; writes (`at(..).set/add/...`) drop updates whose position is
//! outside the array. [`IndexMode`] chooses otherwise, as JAX's `mode=` does.

use super::axis_index;
use crate::tensor::apply;
use crate::Tensor;
use ferrax_ir::{CompareOp, DType, Gather, Op, ReduceOp, Scatter, ScatterCombine, Shape};

impl Tensor {
    /// `indices` with negative entries counted from the end of a dimension of `size`
    /// (JAX's index normalisation); unsigned indices are left as they are.
    #[track_caller]
    pub(crate) fn normalized_index(&self, size: usize) -> Tensor {
        if !self.dtype().is_signed_int() {
            return self.clone();
        }
        let negative = self.compare(CompareOp::Lt, 0);
        let wrapped = self + size as f64;
        negative.select(&wrapped, self)
    }

    #[track_caller]
    fn check_indices(&self, op: &str, indices: &Tensor) -> Option<Tensor> {
        if !indices.dtype().is_int() {
            return Some(self.fail(format!(
                "{op}: indices must have an integer dtype, got {}",
                indices.ty()
            )));
        }
        None
    }

    /// Elements of `self` at `indices` along `axis` (`jnp.take`): the result has `self`'s
    /// shape with dimension `axis` replaced by `indices`' shape. As in `jnp.take`, indices out
    /// of range read the fill value ([`IndexMode::FillOrDrop`]); `take_with` takes a mode.
    #[track_caller]
    pub fn take(&self, indices: &Tensor, axis: i64) -> Tensor {
        self.take_with(indices, axis, IndexMode::FillOrDrop)
    }

    /// [`Tensor::take`] with out-of-range indices treated as `mode` says.
    #[track_caller]
    pub fn take_with(&self, indices: &Tensor, axis: i64, mode: IndexMode) -> Tensor {
        if let Some(failed) = self.check_indices("take", indices) {
            return failed;
        }
        let Some(axis) = axis_index(axis, self.ndim()) else {
            return self.fail(format!(
                "take: axis {axis} is out of range for {}",
                self.ty()
            ));
        };
        let size = self.shape()[axis];
        let indices = indices.normalized_index(size);
        let (rank, k) = (self.ndim(), indices.ndim());
        let mut slice_sizes = self.shape().to_vec();
        slice_sizes[axis] = 1;
        let gather = Gather {
            offset_dims: (0..axis).chain(axis + k..rank - 1 + k).collect(),
            collapsed_slice_dims: vec![axis],
            operand_batching_dims: Vec::new(),
            start_indices_batching_dims: Vec::new(),
            start_index_map: vec![axis],
            index_vector_dim: k,
            slice_sizes,
            indices_are_sorted: false,
        };
        let gathered = apply(Op::Gather(Box::new(gather)), &[self, &indices]);
        match mode {
            // The gather clamps.
            IndexMode::PromiseInBounds | IndexMode::Clip => gathered,
            IndexMode::FillOrDrop => {
                let inside = in_range(&indices, size)
                    .broadcast_in_dim_at(gathered.shape(), (axis..axis + k).collect());
                let fill = Tensor::fill_value(self.dtype(), gathered.shape());
                inside.select(&gathered, &fill)
            }
        }
    }

    /// The value JAX reads out of range in `fill` mode: NaN for floats, the lowest signed
    /// integer, the highest unsigned one, `true`.
    #[track_caller]
    fn fill_value(dtype: DType, shape: &[usize]) -> Tensor {
        let value = match dtype {
            // Complex numbers: NaN real parts.
            DType::F32 | DType::F64 | DType::F16 | DType::BF16 | DType::C64 | DType::C128 => {
                f64::NAN
            }
            DType::I32 => f64::from(i32::MIN),
            DType::I64 => i64::MIN as f64,
            DType::U32 => f64::from(u32::MAX),
            DType::U8 => f64::from(u8::MAX),
            DType::I8 => f64::from(i8::MIN),
            DType::I16 => f64::from(i16::MIN),
            DType::U16 => f64::from(u16::MAX),
            // Saturates to u64::MAX on the way back.
            DType::U64 => u64::MAX as f64,
            DType::Bool => 1.0,
        };
        Tensor::full(dtype, Shape::new(shape.to_vec()), value)
    }

    /// `self` broadcast to `shape`, its dimension `k` becoming dimension `dims[k]`.
    #[track_caller]
    fn broadcast_in_dim_at(&self, shape: &[usize], dims: Vec<usize>) -> Tensor {
        if self.shape() == shape {
            return self.clone();
        }
        apply(
            Op::BroadcastInDim {
                shape: Shape::new(shape.to_vec()),
                dims,
            },
            &[self],
        )
    }

    /// Elements of `self` picked along `axis` by `indices` of the same rank
    /// (`jnp.take_along_axis`): `out[.., i, ..] = self[.., indices[.., i, ..], ..]`. The
    /// other dimensions of `indices` broadcast against `self`'s.
    #[track_caller]
    pub fn take_along_axis(&self, indices: &Tensor, axis: i64) -> Tensor {
        if let Some(failed) = self.check_indices("take_along_axis", indices) {
            return failed;
        }
        let Some(axis) = axis_index(axis, self.ndim()) else {
            return self.fail(format!(
                "take_along_axis: axis {axis} is out of range for {}",
                self.ty()
            ));
        };
        if indices.ndim() != self.ndim() {
            return self.fail(format!(
                "take_along_axis: indices {} must have the rank of {}",
                indices.ty(),
                self.ty()
            ));
        }
        let rank = self.ndim();
        let others: Vec<usize> = (0..rank).filter(|&d| d != axis).collect();
        // Broadcast the other dimensions against each other, so both sides are batched.
        let mut x_dims = self.shape().to_vec();
        let mut i_dims = indices.shape().to_vec();
        for &d in &others {
            let (a, b) = (x_dims[d], i_dims[d]);
            let n = match (a, b) {
                _ if a == b => a,
                (1, n) | (n, 1) => n,
                _ => {
                    return self.fail(format!(
                        "take_along_axis: indices {} and {} do not broadcast along dimension {d}",
                        indices.ty(),
                        self.ty()
                    ))
                }
            };
            x_dims[d] = n;
            i_dims[d] = n;
        }
        let x = self.broadcast_to(x_dims.as_slice());
        let indices = indices
            .broadcast_to(i_dims.as_slice())
            .normalized_index(self.shape()[axis]);
        let gather = Gather {
            offset_dims: Vec::new(),
            collapsed_slice_dims: vec![axis],
            operand_batching_dims: others.clone(),
            start_indices_batching_dims: others,
            start_index_map: vec![axis],
            index_vector_dim: rank,
            slice_sizes: vec![1; rank],
            indices_are_sorted: false,
        };
        apply(Op::Gather(Box::new(gather)), &[&x, &indices])
    }

    /// Indexed access along the leading axis (`x.at[i]`): `.get()` reads, `.set(v)`,
    /// `.add(v)`, `.mul(v)`, `.min(v)` and `.max(v)` return updated copies.
    pub fn at<'a>(&'a self, indices: &'a Tensor) -> At<'a> {
        At {
            x: self,
            indices,
            mode: IndexMode::PromiseInBounds,
        }
    }

    /// The slice of `sizes` starting at traced scalar `starts`, one per dimension
    /// (`lax.dynamic_slice`). Starts clamp so the slice lies inside `self`; negative starts
    /// count from the end.
    #[track_caller]
    pub fn dynamic_slice(&self, starts: &[&Tensor], sizes: &[usize]) -> Tensor {
        let starts = match self.dynamic_starts("dynamic_slice", starts) {
            Ok(s) => s,
            Err(failed) => return failed,
        };
        let mut args = vec![self];
        args.extend(starts.iter());
        apply(
            Op::DynamicSlice {
                sizes: sizes.to_vec(),
            },
            &args,
        )
    }

    /// `self` with `update` written at traced scalar `starts` (`lax.dynamic_update_slice`),
    /// clamped as in [`Tensor::dynamic_slice`].
    #[track_caller]
    pub fn dynamic_update_slice(&self, update: &Tensor, starts: &[&Tensor]) -> Tensor {
        let starts = match self.dynamic_starts("dynamic_update_slice", starts) {
            Ok(s) => s,
            Err(failed) => return failed,
        };
        let mut args = vec![self, update];
        args.extend(starts.iter());
        apply(Op::DynamicUpdateSlice, &args)
    }

    /// Start indices of a dynamic slice: integer scalars of one dtype, negative ones
    /// counted from the end.
    #[track_caller]
    fn dynamic_starts(&self, op: &str, starts: &[&Tensor]) -> Result<Vec<Tensor>, Tensor> {
        if starts.len() != self.ndim() {
            return Err(self.fail(format!(
                "{op}: {} start indices for {}, which has {} dimensions",
                starts.len(),
                self.ty(),
                self.ndim()
            )));
        }
        // One dtype for all (the IR's rule): theirs if they agree, else i64, which holds every
        // start of every other integer type but u64's above 2^63.
        let first = starts.first().map_or(DType::I32, |s| s.dtype());
        let dtype = if starts.iter().all(|s| s.dtype() == first) {
            first
        } else {
            DType::I64
        };
        let mut out = Vec::with_capacity(starts.len());
        for (s, &size) in starts.iter().zip(self.shape()) {
            if !s.dtype().is_int() || s.ndim() != 0 {
                return Err(self.fail(format!(
                    "{op}: start indices must be integer scalars, got {}",
                    s.ty()
                )));
            }
            out.push(s.astype(dtype).normalized_index(size));
        }
        Ok(out)
    }

    /// `out[.., j] = (self[..] == j)` for `j` in `0..classes`, as `dtype` (`jax.nn.one_hot`);
    /// indices outside `0..classes` give a row of zeros.
    #[track_caller]
    pub fn one_hot(&self, classes: usize, dtype: DType) -> Tensor {
        if !self.dtype().is_int() {
            return self.fail(format!(
                "one_hot: labels must have an integer dtype, got {}",
                self.ty()
            ));
        }
        let mut dims = self.shape().to_vec();
        dims.push(classes);
        let classes = Tensor::iota(self.dtype(), Shape::new(dims.clone()), dims.len() - 1);
        let labels = self.expand_dims(-1).broadcast_to(dims.as_slice());
        labels.compare(CompareOp::Eq, &classes).astype(dtype)
    }

    /// The index of the largest element along `axis` (`jnp.argmax`), as i32: the first one
    /// on ties, and the first NaN if there is one.
    #[track_caller]
    pub fn argmax(&self, axis: i64) -> Tensor {
        self.arg_extremum("argmax", ReduceOp::Max, axis)
    }

    /// The index of the smallest element along `axis` (`jnp.argmin`), as i32.
    #[track_caller]
    pub fn argmin(&self, axis: i64) -> Tensor {
        self.arg_extremum("argmin", ReduceOp::Min, axis)
    }

    #[track_caller]
    fn arg_extremum(&self, op: &str, reduce: ReduceOp, axis: i64) -> Tensor {
        let Some(a) = axis_index(axis, self.ndim()) else {
            return self.fail(format!(
                "{op}: axis {axis} is out of range for {}",
                self.ty()
            ));
        };
        let n = self.shape()[a];
        if n == 0 {
            return self.fail(format!(
                "{op}: dimension {a} of {} is empty, so it has no extremum",
                self.ty()
            ));
        }
        let extremum = apply(
            Op::Reduce {
                op: reduce,
                axes: vec![a],
            },
            &[self],
        )
        .expand_dims(a as i64)
        .broadcast_to(self.shape());
        let mut hit = self.compare(CompareOp::Eq, &extremum);
        if self.dtype().is_float() {
            // A NaN is the extremum (the reduction propagates it); NaN != NaN finds it.
            hit = hit.logical_or(self.compare(CompareOp::Ne, self));
        }
        let positions = Tensor::iota(DType::I32, Shape::new(self.shape().to_vec()), a);
        let past_end = Tensor::full(DType::I32, Shape::new(self.shape().to_vec()), n as f64);
        let candidates = hit.select(&positions, &past_end);
        apply(
            Op::Reduce {
                op: ReduceOp::Min,
                axes: vec![a],
            },
            &[&candidates],
        )
    }
}

/// How indexing treats an index outside its dimension, once negative indices are counted from
/// the end (JAX's `mode=`, `GatherScatterMode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IndexMode {
    /// Reads clamp to the nearest row and writes are dropped: what the IR's gather and scatter
    /// do, and JAX's default for `x[i]` and `x.at[i].op(v)`.
    PromiseInBounds,
    /// Indices clamp, for writes too.
    Clip,
    /// Reads give the fill value (NaN, the lowest signed or highest unsigned integer,
    /// `true`); writes are dropped. `jnp.take`'s default.
    FillOrDrop,
}

/// `in_range[..] = 0 <= indices[..] < size`.
#[track_caller]
fn in_range(indices: &Tensor, size: usize) -> Tensor {
    let above = indices.compare(CompareOp::Ge, 0);
    let below = indices.compare(CompareOp::Lt, size as f64);
    above.logical_and(below)
}

/// `x.at(i)`: positions along `x`'s leading axis named by integer tensor `i`. The updated
/// values `v` broadcast to `i`'s shape followed by `x`'s trailing dimensions.
pub struct At<'a> {
    x: &'a Tensor,
    indices: &'a Tensor,
    mode: IndexMode,
}

impl At<'_> {
    /// The same positions with out-of-range indices treated as `mode` says (`mode=` of
    /// JAX's `.at[i]` methods).
    pub fn mode(self, mode: IndexMode) -> Self {
        At { mode, ..self }
    }

    /// `x[i]`: `take` along the leading axis, out-of-range indices clamped unless the mode is
    /// [`IndexMode::FillOrDrop`].
    #[track_caller]
    pub fn get(&self) -> Tensor {
        self.x.take_with(self.indices, 0, self.mode)
    }

    /// `x.at[i].set(v)`; with repeated indices the last update (in row-major order) wins.
    #[track_caller]
    pub fn set<'b>(&self, v: impl Into<super::Operand<'b>>) -> Tensor {
        self.scatter(ScatterCombine::Replace, v)
    }

    /// `x.at[i].add(v)`; repeated indices accumulate.
    #[track_caller]
    pub fn add<'b>(&self, v: impl Into<super::Operand<'b>>) -> Tensor {
        self.scatter(ScatterCombine::Add, v)
    }

    #[track_caller]
    pub fn mul<'b>(&self, v: impl Into<super::Operand<'b>>) -> Tensor {
        self.scatter(ScatterCombine::Mul, v)
    }

    #[track_caller]
    pub fn min<'b>(&self, v: impl Into<super::Operand<'b>>) -> Tensor {
        self.scatter(ScatterCombine::Min, v)
    }

    #[track_caller]
    pub fn max<'b>(&self, v: impl Into<super::Operand<'b>>) -> Tensor {
        self.scatter(ScatterCombine::Max, v)
    }

    #[track_caller]
    fn scatter<'b>(&self, combine: ScatterCombine, v: impl Into<super::Operand<'b>>) -> Tensor {
        let x = self.x;
        let op = combine.name();
        if let Some(failed) = x.check_indices(op, self.indices) {
            return failed;
        }
        if x.ndim() == 0 {
            return x.fail(format!("{op}: cannot index the scalar {}", x.ty()));
        }
        let size = x.shape()[0];
        let mut indices = self.indices.normalized_index(size);
        if self.mode == IndexMode::Clip {
            indices = indices.clip(0, (size as i32).saturating_sub(1));
        }
        let k = indices.ndim();
        let mut dims = indices.shape().to_vec();
        dims.extend_from_slice(&x.shape()[1..]);
        let updates = v.into().resolve(x);
        if updates.dtype() != x.dtype() {
            return x.fail(format!(
                "{op}: updates {} must have the dtype of {}",
                updates.ty(),
                x.ty()
            ));
        }
        let updates = updates.broadcast_to(dims.as_slice());
        let scatter = Scatter {
            combine,
            update_window_dims: (k..k + x.ndim() - 1).collect(),
            inserted_window_dims: vec![0],
            input_batching_dims: Vec::new(),
            scatter_indices_batching_dims: Vec::new(),
            scatter_dims_to_operand_dims: vec![0],
            index_vector_dim: k,
            indices_are_sorted: false,
            unique_indices: false,
        };
        apply(Op::Scatter(Box::new(scatter)), &[x, &indices, &updates])
    }
}

//! `Tensor` methods, named after `jax.numpy`. Each lowers to primitive IR ops through
//! `apply`, adding NumPy broadcasting, negative axes and Rust scalars on top of the IR's
//! strict rules. Every method is `#[track_caller]` so errors point at the user's call.

use crate::tensor::{apply, apply_at, Inner};
use crate::Tensor;
use ferrax_ir::{
    BinaryOp, CompareOp, DType, DotDims, Literal, Op, ReduceOp, Scalar, Shape, UnaryOp,
};
use ferrax_runtime::Array;
use std::borrow::Borrow;
use std::ops::RangeFull;
use std::panic::Location;

/// The other operand of a binary method: a tensor or a Rust number. Numbers take the
/// tensor's dtype, like Python scalars in JAX.
pub enum Operand<'a> {
    Borrowed(&'a Tensor),
    Owned(Tensor),
    Number(f64),
}

impl<'a> From<&'a Tensor> for Operand<'a> {
    fn from(t: &'a Tensor) -> Self {
        Operand::Borrowed(t)
    }
}

impl From<Tensor> for Operand<'_> {
    fn from(t: Tensor) -> Self {
        Operand::Owned(t)
    }
}

macro_rules! operand_from_number {
    ($($t:ty),*) => {$(
        impl From<$t> for Operand<'_> {
            fn from(x: $t) -> Self {
                Operand::Number(x as f64)
            }
        }
    )*};
}
operand_from_number!(f64, i32);

impl Operand<'_> {
    /// The operand as a tensor; a number becomes a scalar of `like`'s dtype.
    #[track_caller]
    fn resolve(self, like: &Tensor) -> Tensor {
        match self {
            Operand::Borrowed(t) => t.clone(),
            Operand::Owned(t) => t,
            Operand::Number(x) => number_like(x, like),
        }
    }
}

#[track_caller]
fn number_like(x: f64, like: &Tensor) -> Tensor {
    let dtype = like.dtype();
    let representable = dtype.is_float()
        || (dtype.is_bool() && (x == 0.0 || x == 1.0))
        || (dtype.is_int() && x.fract() == 0.0 && Scalar::from_f64(dtype, x).to_f64() == x);
    if representable {
        Tensor::new(Array::full(Shape::scalar(), Scalar::from_f64(dtype, x)))
    } else {
        Tensor::failed(
            Location::caller(),
            format!("the number {x} cannot be combined with {} without changing its value; convert with astype first", like.ty()),
            like.ty().clone(),
        )
    }
}

/// Axes to reduce over: one axis, a list (negative counts from the end), or `..` for all.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Axes {
    All,
    List(Vec<i64>),
}

impl From<RangeFull> for Axes {
    fn from(_: RangeFull) -> Axes {
        Axes::All
    }
}

impl From<i32> for Axes {
    fn from(a: i32) -> Axes {
        Axes::List(vec![a as i64])
    }
}

impl From<usize> for Axes {
    fn from(a: usize) -> Axes {
        Axes::List(vec![a as i64])
    }
}

impl<const N: usize> From<[i32; N]> for Axes {
    fn from(a: [i32; N]) -> Axes {
        Axes::List(a.iter().map(|&x| x as i64).collect())
    }
}

impl From<&[i32]> for Axes {
    fn from(a: &[i32]) -> Axes {
        Axes::List(a.iter().map(|&x| x as i64).collect())
    }
}

impl From<Vec<usize>> for Axes {
    fn from(a: Vec<usize>) -> Axes {
        Axes::List(a.iter().map(|&x| x as i64).collect())
    }
}

/// A shape argument: sizes, where one entry of `reshape`'s may be `-1` (inferred).
pub trait ShapeArg {
    fn to_sizes(&self) -> Vec<i64>;
}

impl<const N: usize> ShapeArg for [i32; N] {
    fn to_sizes(&self) -> Vec<i64> {
        self.iter().map(|&x| x as i64).collect()
    }
}

impl ShapeArg for &[i32] {
    fn to_sizes(&self) -> Vec<i64> {
        self.iter().map(|&x| x as i64).collect()
    }
}

impl<const N: usize> ShapeArg for [usize; N] {
    fn to_sizes(&self) -> Vec<i64> {
        self.iter().map(|&x| x as i64).collect()
    }
}

impl ShapeArg for &[usize] {
    fn to_sizes(&self) -> Vec<i64> {
        self.iter().map(|&x| x as i64).collect()
    }
}

impl ShapeArg for Vec<usize> {
    fn to_sizes(&self) -> Vec<i64> {
        self.iter().map(|&x| x as i64).collect()
    }
}

fn shape_text(dtype: DType, dims: &[usize]) -> String {
    format!("{dtype}{}", Shape::new(dims.to_vec()))
}

/// The NumPy broadcast of two shapes.
fn broadcast_shapes(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let rank = a.len().max(b.len());
    (0..rank)
        .map(|i| {
            let da = if i + a.len() >= rank {
                a[i + a.len() - rank]
            } else {
                1
            };
            let db = if i + b.len() >= rank {
                b[i + b.len() - rank]
            } else {
                1
            };
            match (da, db) {
                _ if da == db => Some(da),
                (1, _) => Some(db),
                (_, 1) => Some(da),
                _ => None,
            }
        })
        .collect()
}

/// Normalizes a possibly negative axis.
fn axis_index(axis: i64, rank: usize) -> Option<usize> {
    let a = if axis < 0 { axis + rank as i64 } else { axis };
    (0..rank as i64).contains(&a).then_some(a as usize)
}

impl Tensor {
    #[track_caller]
    fn fail(&self, message: String) -> Tensor {
        self.fail_at(Location::caller(), message)
    }

    /// For use inside closures, which do not pass on `#[track_caller]` locations.
    fn fail_at(&self, location: &'static Location<'static>, message: String) -> Tensor {
        Tensor::failed(location, message, self.ty().clone())
    }

    /// Broadcasts every operand to their common shape; the first failure is returned as `Err`.
    #[track_caller]
    fn broadcast_together(op: &str, args: &[&Tensor]) -> Result<Vec<Tensor>, Tensor> {
        let location = Location::caller();
        if let Some(f) = args.iter().find(|a| a.error().is_some()) {
            return Err((*f).clone());
        }
        let mut out: Vec<usize> = Vec::new();
        for (i, a) in args.iter().enumerate() {
            out = broadcast_shapes(&out, a.shape()).ok_or_else(|| {
                let prev = args[..i]
                    .iter()
                    .find(|p| broadcast_shapes(p.shape(), a.shape()).is_none())
                    .unwrap_or(&args[0]);
                let message = format!(
                    "{op}: shapes {} and {} cannot be broadcast together",
                    prev.ty(),
                    a.ty()
                );
                a.fail_at(location, message)
            })?;
        }
        let ctx = args
            .iter()
            .filter_map(|a| a.trace_ctx())
            .max_by_key(|c| c.serial())
            .cloned();
        Ok(args
            .iter()
            .map(|a| {
                if a.shape() == out.as_slice() {
                    return (*a).clone();
                }
                match (&a.0, &ctx) {
                    (Inner::Concrete(arr), Some(ctx)) if arr.numel() == 1 => {
                        let lit = Literal::splat(arr.elements().get(0), out.clone());
                        ctx.push(Op::Constant(lit), &[], location, a.ty().clone())
                    }
                    _ => a.broadcast_to_at(location, &out),
                }
            })
            .collect())
    }

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

    fn broadcast_to_at(&self, location: &'static Location<'static>, target: &[usize]) -> Tensor {
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

    #[track_caller]
    fn unary(&self, u: UnaryOp) -> Tensor {
        apply(Op::Unary(u), &[self])
    }

    /// A binary op with broadcasting; both operands must share a dtype.
    #[track_caller]
    pub(crate) fn binary(&self, b: BinaryOp, other: &Tensor) -> Tensor {
        self.elementwise2(Op::Binary(b), other)
    }

    #[track_caller]
    fn elementwise2(&self, op: Op, other: &Tensor) -> Tensor {
        if self.dtype() != other.dtype() && self.error().is_none() && other.error().is_none() {
            return self.fail(format!(
                "{}: cannot combine {} with {} (their dtypes differ; convert one with astype)",
                op.name(),
                self.ty(),
                other.ty()
            ));
        }
        match Tensor::broadcast_together(op.name(), &[self, other]) {
            Ok(v) => apply(op, &[&v[0], &v[1]]),
            Err(f) => f,
        }
    }

    #[track_caller]
    pub(crate) fn binary_number(&self, b: BinaryOp, x: f64, number_first: bool) -> Tensor {
        let n = number_like(x, self);
        if number_first {
            n.binary(b, self)
        } else {
            self.binary(b, &n)
        }
    }

    #[track_caller]
    fn compare<'a>(&self, c: CompareOp, other: impl Into<Operand<'a>>) -> Tensor {
        let other = other.into().resolve(self);
        self.elementwise2(Op::Compare(c), &other)
    }
}

macro_rules! unary_methods {
    ($($(#[$doc:meta])* $name:ident => $op:ident),* $(,)?) => {
        impl Tensor {$(
            $(#[$doc])*
            #[track_caller]
            pub fn $name(&self) -> Tensor {
                self.unary(UnaryOp::$op)
            }
        )*}
    };
}

unary_methods! {
    abs => Abs,
    sign => Sign,
    floor => Floor,
    ceil => Ceil,
    /// Rounds half away from zero (`lax.round`).
    round => Round,
    /// Rounds half to even (`jnp.round`).
    round_even => RoundEven,
    exp => Exp,
    expm1 => Expm1,
    log => Log,
    log1p => Log1p,
    sqrt => Sqrt,
    rsqrt => Rsqrt,
    tanh => Tanh,
    /// `1 / (1 + exp(-x))`.
    sigmoid => Logistic,
    sin => Sin,
    cos => Cos,
    /// Logical not on bools, bitwise not on integers.
    logical_not => Not,
}

macro_rules! binary_methods {
    ($($(#[$doc:meta])* $name:ident => $op:ident),* $(,)?) => {
        impl Tensor {$(
            $(#[$doc])*
            #[track_caller]
            pub fn $name<'a>(&self, other: impl Into<Operand<'a>>) -> Tensor {
                let other = other.into().resolve(self);
                self.binary(BinaryOp::$op, &other)
            }
        )*}
    };
}

binary_methods! {
    /// Elementwise maximum; NaN propagates.
    maximum => Max,
    /// Elementwise minimum; NaN propagates.
    minimum => Min,
    pow => Pow,
    /// Remainder with the sign of the dividend (`jnp.fmod`, `lax.rem`).
    fmod => Rem,
    logical_and => And,
    logical_or => Or,
    logical_xor => Xor,
}

macro_rules! compare_methods {
    ($($name:ident => $op:ident),* $(,)?) => {
        impl Tensor {$(
            #[track_caller]
            pub fn $name<'a>(&self, other: impl Into<Operand<'a>>) -> Tensor {
                self.compare(CompareOp::$op, other)
            }
        )*}
    };
}

compare_methods! {
    equal => Eq,
    not_equal => Ne,
    less => Lt,
    less_equal => Le,
    greater => Gt,
    greater_equal => Ge,
}

impl Tensor {
    #[track_caller]
    pub fn square(&self) -> Tensor {
        self.binary(BinaryOp::Mul, self)
    }

    /// `self ? on_true : on_false` elementwise, with broadcasting (`jnp.where`).
    #[track_caller]
    pub fn select<'a, 'b>(
        &self,
        on_true: impl Into<Operand<'a>>,
        on_false: impl Into<Operand<'b>>,
    ) -> Tensor {
        let (t, f) = match (on_true.into(), on_false.into()) {
            (Operand::Number(a), Operand::Number(b)) => {
                let t = Tensor::scalar(a as f32);
                let f = number_like(b, &t);
                (t, f)
            }
            (Operand::Number(a), f) => {
                let f = f.resolve(self);
                (number_like(a, &f), f)
            }
            (t, f) => {
                let t = t.resolve(self);
                let f = f.resolve(&t);
                (t, f)
            }
        };
        if self.dtype() != DType::Bool {
            return self.fail(format!(
                "select: the condition must be bool, got {}",
                self.ty()
            ));
        }
        if t.dtype() != f.dtype() {
            return self.fail(format!(
                "select: branches {} and {} have different dtypes",
                t.ty(),
                f.ty()
            ));
        }
        match Tensor::broadcast_together("select", &[self, &t, &f]) {
            Ok(v) => apply(Op::Select, &[&v[0], &v[1], &v[2]]),
            Err(e) => e,
        }
    }

    /// Limits every element to `[lo, hi]` (`jnp.clip`).
    #[track_caller]
    pub fn clip<'a, 'b>(&self, lo: impl Into<Operand<'a>>, hi: impl Into<Operand<'b>>) -> Tensor {
        let (lo, hi) = (lo.into().resolve(self), hi.into().resolve(self));
        match Tensor::broadcast_together("clip", &[&lo, self, &hi]) {
            Ok(v) => apply(Op::Clamp, &[&v[0], &v[1], &v[2]]),
            Err(e) => e,
        }
    }

    /// Converts to `dtype` (`x.astype`); floats to integers truncate toward zero.
    #[track_caller]
    pub fn astype(&self, dtype: DType) -> Tensor {
        if self.dtype() == dtype {
            return self.clone();
        }
        apply(Op::Convert { to: dtype }, &[self])
    }

    /// The identity, with a zero derivative.
    #[track_caller]
    pub fn stop_gradient(&self) -> Tensor {
        apply(Op::StopGradient, &[self])
    }

    #[track_caller]
    fn axes(&self, op: &str, axes: Axes) -> Result<Vec<usize>, Tensor> {
        let list = match axes {
            Axes::All => return Ok((0..self.ndim()).collect()),
            Axes::List(l) => l,
        };
        let mut out = Vec::with_capacity(list.len());
        for a in list {
            let Some(i) = axis_index(a, self.ndim()) else {
                return Err(self.fail(format!("{op}: axis {a} is out of range for {}", self.ty())));
            };
            if out.contains(&i) {
                return Err(self.fail(format!("{op}: axis {a} is given twice")));
            }
            out.push(i);
        }
        out.sort_unstable();
        Ok(out)
    }

    #[track_caller]
    fn reduce(&self, r: ReduceOp, axes: Axes, keepdims: bool) -> Tensor {
        let axes = match self.axes(r.name(), axes) {
            Ok(a) => a,
            Err(e) => return e,
        };
        let reduced = apply(
            Op::Reduce {
                op: r,
                axes: axes.clone(),
            },
            &[self],
        );
        if !keepdims {
            return reduced;
        }
        let kept: Vec<usize> = (0..self.ndim())
            .map(|i| {
                if axes.contains(&i) {
                    1
                } else {
                    self.shape()[i]
                }
            })
            .collect();
        reduced.reshape(kept)
    }

    /// Sum over `axes` (`..` for all).
    #[track_caller]
    pub fn sum(&self, axes: impl Into<Axes>) -> Tensor {
        self.reduce(ReduceOp::Sum, axes.into(), false)
    }

    #[track_caller]
    pub fn sum_keepdims(&self, axes: impl Into<Axes>) -> Tensor {
        self.reduce(ReduceOp::Sum, axes.into(), true)
    }

    #[track_caller]
    pub fn prod(&self, axes: impl Into<Axes>) -> Tensor {
        self.reduce(ReduceOp::Prod, axes.into(), false)
    }

    #[track_caller]
    pub fn max(&self, axes: impl Into<Axes>) -> Tensor {
        self.reduce(ReduceOp::Max, axes.into(), false)
    }

    #[track_caller]
    pub fn max_keepdims(&self, axes: impl Into<Axes>) -> Tensor {
        self.reduce(ReduceOp::Max, axes.into(), true)
    }

    #[track_caller]
    pub fn min(&self, axes: impl Into<Axes>) -> Tensor {
        self.reduce(ReduceOp::Min, axes.into(), false)
    }

    #[track_caller]
    fn mean_impl(&self, axes: Axes, keepdims: bool) -> Tensor {
        let idx = match self.axes("mean", axes) {
            Ok(a) => a,
            Err(e) => return e,
        };
        let count: usize = idx.iter().map(|&i| self.shape()[i]).product();
        let sum = self.reduce(ReduceOp::Sum, Axes::from(idx), keepdims);
        sum.binary_number(BinaryOp::Div, count as f64, false)
    }

    /// Mean over `axes` (`..` for all), in the tensor's dtype.
    #[track_caller]
    pub fn mean(&self, axes: impl Into<Axes>) -> Tensor {
        self.mean_impl(axes.into(), false)
    }

    #[track_caller]
    pub fn mean_keepdims(&self, axes: impl Into<Axes>) -> Tensor {
        self.mean_impl(axes.into(), true)
    }

    /// Reshapes to `shape`; one size may be `-1` and is inferred.
    #[track_caller]
    pub fn reshape(&self, shape: impl ShapeArg) -> Tensor {
        let sizes = shape.to_sizes();
        let known: i64 = sizes.iter().filter(|&&s| s >= 0).product();
        let holes = sizes.iter().filter(|&&s| s == -1).count();
        let bad = sizes.iter().any(|&s| s < -1)
            || holes > 1
            || (holes == 1 && (known == 0 || self.numel() as i64 % known != 0));
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
                    self.numel() / known as usize
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

    /// A general contraction (`lax.dot_general`).
    #[track_caller]
    pub fn dot_general(&self, other: &Tensor, dims: DotDims) -> Tensor {
        apply(Op::DotGeneral(dims), &[self, other])
    }

    /// Matrix product with `jnp.matmul` semantics: 1-D operands are vectors, leading
    /// dimensions are batch dimensions and broadcast.
    #[track_caller]
    pub fn matmul(&self, other: &Tensor) -> Tensor {
        let (ra, rb) = (self.ndim(), other.ndim());
        let location = Location::caller();
        let mismatch = || {
            self.fail_at(
                location,
                format!("matmul: cannot multiply {} by {}", self.ty(), other.ty()),
            )
        };
        if ra == 0 || rb == 0 {
            return mismatch();
        }
        let k_a = self.shape()[ra - 1];
        let k_b = if rb == 1 {
            other.shape()[0]
        } else {
            other.shape()[rb - 2]
        };
        if k_a != k_b {
            return mismatch();
        }
        if rb <= 2 {
            // A plain contraction already yields (lhs leading dims, rhs columns).
            let dims = DotDims {
                lhs_contract: vec![ra - 1],
                rhs_contract: vec![0],
                ..DotDims::default()
            };
            return self.dot_general(other, dims);
        }
        let (a, b) = (
            if ra == 1 {
                self.expand_dims(0)
            } else {
                self.clone()
            },
            if rb == 1 {
                other.expand_dims(-1)
            } else {
                other.clone()
            },
        );
        let (ba, bb) = (&a.shape()[..a.ndim() - 2], &b.shape()[..b.ndim() - 2]);
        let Some(batch) = broadcast_shapes(ba, bb) else {
            return mismatch();
        };
        let target = |t: &Tensor| {
            let mut s = batch.clone();
            s.extend_from_slice(&t.shape()[t.ndim() - 2..]);
            s
        };
        let (a, b) = (a.broadcast_to(target(&a)), b.broadcast_to(target(&b)));
        let nb = batch.len();
        let dims = DotDims {
            lhs_batch: (0..nb).collect(),
            rhs_batch: (0..nb).collect(),
            lhs_contract: vec![nb + 1],
            rhs_contract: vec![nb],
        };
        let out = a.dot_general(&b, dims);
        match (ra, rb) {
            (1, _) => out.squeeze([-2]),
            (_, 1) => out.squeeze([-1]),
            _ => out,
        }
    }
}

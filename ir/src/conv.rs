//! Convolutions (`lax.conv_general_dilated`, StableHLO's `convolution`). The IR has no
//! convolution op: a convolution is spelled in its own ops, once here for every frontend,
//! so that every backend computes it and autodiff and `vmap` need no rules of their own.
//!
//! The spelling is im2col: the input, moved to `[batch, feature, spatial...]`, is padded (its
//! dilation as interior padding), sliced once per kernel position with the window's strides,
//! the slices stacked, and the stack contracted with the kernel over (position, feature) by one
//! `dot_general` (feature or batch groups as its batch dimension), then moved to the output's
//! layout. One contraction keeps the matrix product large; the stack costs memory in the
//! kernel's size, which [`MAX_WINDOW_ELEMENTS`] bounds.

use crate::{infer_type, DType, DotDims, Literal, Op, Scalar, Shape, TensorType, TypeError};
use crate::{same_padding, WindowGeometry, MAX_WINDOW_ELEMENTS};

/// Which dimension holds what, for the input (`lhs`), the kernel (`rhs`) and the output, as
/// `lax.ConvDimensionNumbers` names them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConvDims {
    pub lhs_batch: usize,
    pub lhs_feature: usize,
    pub lhs_spatial: Vec<usize>,
    pub rhs_out_feature: usize,
    pub rhs_in_feature: usize,
    pub rhs_spatial: Vec<usize>,
    pub out_batch: usize,
    pub out_feature: usize,
    pub out_spatial: Vec<usize>,
}

impl ConvDims {
    /// `lax`'s default for `spatial` spatial dimensions: `NC...`, `OI...`, `NC...`.
    pub fn channels_first(spatial: usize) -> ConvDims {
        let s: Vec<usize> = (2..2 + spatial).collect();
        ConvDims {
            lhs_batch: 0,
            lhs_feature: 1,
            lhs_spatial: s.clone(),
            rhs_out_feature: 0,
            rhs_in_feature: 1,
            rhs_spatial: s.clone(),
            out_batch: 0,
            out_feature: 1,
            out_spatial: s,
        }
    }

    /// The dimensions from `lax`'s layout strings, such as `("NHWC", "HWIO", "NHWC")`: `N`
    /// and `C` (input, output), `O` and `I` (kernel), any other letters spatial, matched in
    /// the kernel's order.
    pub fn from_layouts(lhs: &str, rhs: &str, out: &str) -> Result<ConvDims, String> {
        // A layout's two named dimensions, and its spatial ones as (position, letter).
        type Parsed = (usize, usize, Vec<(usize, char)>);
        let parse = |s: &str, a: char, b: char| -> Result<Parsed, String> {
            let find = |c: char| {
                let mut at = s.chars().enumerate().filter(|&(_, x)| x == c);
                match (at.next(), at.next()) {
                    (Some((i, _)), None) => Ok(i),
                    _ => Err(format!("layout {s:?} needs one {c:?}")),
                }
            };
            let spatial = s.chars().enumerate().filter(|&(_, c)| c != a && c != b);
            Ok((find(a)?, find(b)?, spatial.collect()))
        };
        let (lb, lf, ls) = parse(lhs, 'N', 'C')?;
        let (ro, ri, rs) = parse(rhs, 'O', 'I')?;
        let (ob, of, os) = parse(out, 'N', 'C')?;
        if ls.len() != rs.len() || os.len() != rs.len() {
            return Err(format!(
                "layouts {lhs:?}, {rhs:?} and {out:?} have different numbers of spatial dimensions"
            ));
        }
        // Spatial dimensions pair up by letter, in the kernel's order.
        let place = |layout: &[(usize, char)], name: &str| -> Result<Vec<usize>, String> {
            rs.iter()
                .map(|&(_, c)| {
                    let mut found = layout.iter().filter(|&&(_, x)| x == c);
                    match (found.next(), found.next()) {
                        (Some(&(i, _)), None) => Ok(i),
                        _ => Err(format!(
                            "spatial dimension {c:?} of kernel layout {rhs:?} must appear once in {name} layout"
                        )),
                    }
                })
                .collect()
        };
        Ok(ConvDims {
            lhs_batch: lb,
            lhs_feature: lf,
            lhs_spatial: place(&ls, "the input")?,
            rhs_out_feature: ro,
            rhs_in_feature: ri,
            rhs_spatial: rs.iter().map(|&(i, _)| i).collect(),
            out_batch: ob,
            out_feature: of,
            out_spatial: place(&os, "the output")?,
        })
    }

    fn spatial(&self) -> usize {
        self.rhs_spatial.len()
    }

    /// Each of the three layouts is a permutation of its rank.
    fn check(&self) -> Result<(), String> {
        let d = self.spatial();
        let layouts = [
            ("input", self.lhs_batch, self.lhs_feature, &self.lhs_spatial),
            (
                "kernel",
                self.rhs_out_feature,
                self.rhs_in_feature,
                &self.rhs_spatial,
            ),
            (
                "output",
                self.out_batch,
                self.out_feature,
                &self.out_spatial,
            ),
        ];
        for (name, a, b, spatial) in layouts {
            let mut seen = vec![false; d + 2];
            let all = [a, b].into_iter().chain(spatial.iter().copied());
            if spatial.len() != d {
                return Err(format!(
                    "the {name} has {} spatial dimensions, the kernel {d}",
                    spatial.len()
                ));
            }
            for i in all {
                match seen.get_mut(i) {
                    Some(s) if !*s => *s = true,
                    _ => {
                        return Err(format!(
                            "the {name}'s dimension numbers are not a permutation of 0..{}",
                            d + 2
                        ))
                    }
                }
            }
        }
        Ok(())
    }
}

/// How a convolution's input is padded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConvPadding {
    /// None.
    Valid,
    /// `lax`'s "SAME": `ceil(n / stride)` outputs per dimension of the (dilated) input.
    Same,
    /// `(low, high)` per spatial dimension; negative amounts crop.
    Explicit(Vec<(i64, i64)>),
}

/// A convolution's parameters, as `lax.conv_general_dilated` takes them. Empty strides and
/// dilations mean ones.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Convolution {
    pub dims: ConvDims,
    pub strides: Vec<usize>,
    pub padding: ConvPadding,
    pub lhs_dilation: Vec<usize>,
    pub rhs_dilation: Vec<usize>,
    pub feature_groups: usize,
    pub batch_groups: usize,
}

/// Where a lowered convolution's ops go: the tracing frontend's recorder, the importer's
/// function builder.
pub trait OpSink {
    type Value;
    type Error;
    fn emit(&mut self, op: Op, args: &[&Self::Value]) -> Result<Self::Value, Self::Error>;
}

/// Why a convolution could not be lowered: its parameters do not fit its operands, or the
/// sink refused an op.
#[derive(Debug)]
pub enum ConvError<E> {
    Invalid(String),
    Sink(E),
}

/// Sizes the convolution decided from its operands, in `[batch, feature, spatial...]` terms.
struct Plan {
    dtype: DType,
    batch: usize,
    in_features: usize,
    out_features: usize,
    kernel: Vec<usize>,
    padding: Vec<(i64, i64)>,
    window: WindowGeometry,
    strides: Vec<usize>,
    lhs_dilation: Vec<usize>,
}

impl Convolution {
    /// A convolution in `dims`'s layouts with unit strides and dilations, no padding and no
    /// groups.
    pub fn new(dims: ConvDims) -> Convolution {
        Convolution {
            dims,
            strides: Vec::new(),
            padding: ConvPadding::Valid,
            lhs_dilation: Vec::new(),
            rhs_dilation: Vec::new(),
            feature_groups: 1,
            batch_groups: 1,
        }
    }

    /// The result's type, or a message naming what does not fit.
    pub fn output_type(&self, lhs: &TensorType, rhs: &TensorType) -> Result<TensorType, String> {
        let plan = self.plan(lhs, rhs)?;
        Ok(TensorType::new(plan.dtype, self.out_shape(&plan)))
    }

    fn ones_or(&self, v: &[usize], what: &str) -> Result<Vec<usize>, String> {
        let d = self.dims.spatial();
        match v.len() {
            0 => Ok(vec![1; d]),
            n if n == d => {
                if v.contains(&0) {
                    Err(format!("{what} {v:?} must be positive"))
                } else {
                    Ok(v.to_vec())
                }
            }
            n => Err(format!(
                "{what} {v:?} has {n} entries for {d} spatial dimensions"
            )),
        }
    }

    fn plan(&self, lhs: &TensorType, rhs: &TensorType) -> Result<Plan, String> {
        self.dims.check()?;
        let d = self.dims.spatial();
        let dims = &self.dims;
        if lhs.rank() != d + 2 || rhs.rank() != d + 2 {
            return Err(format!(
                "input {lhs} and kernel {rhs} must both have rank {} ({d} spatial dimensions)",
                d + 2
            ));
        }
        if lhs.dtype != rhs.dtype {
            return Err(format!(
                "input {lhs} and kernel {rhs} have different element types"
            ));
        }
        if !lhs.dtype.is_numeric() {
            return Err(format!("input {lhs} must have a numeric element type"));
        }
        let strides = self.ones_or(&self.strides, "strides")?;
        let lhs_dilation = self.ones_or(&self.lhs_dilation, "input dilation")?;
        let rhs_dilation = self.ones_or(&self.rhs_dilation, "kernel dilation")?;
        let (fg, bg) = (self.feature_groups, self.batch_groups);
        if fg == 0 || bg == 0 || (fg > 1 && bg > 1) {
            return Err(format!(
                "feature_group_count {fg} and batch_group_count {bg} must be positive, at most one above 1"
            ));
        }
        let (l, r) = (lhs.dims(), rhs.dims());
        let (batch, in_features) = (l[dims.lhs_batch], l[dims.lhs_feature]);
        let (out_features, kernel_in) = (r[dims.rhs_out_feature], r[dims.rhs_in_feature]);
        if in_features != kernel_in.saturating_mul(fg) {
            return Err(format!(
                "input {lhs} has {in_features} features (dimension {}) where kernel {rhs} takes {kernel_in} in each of {fg} groups (dimension {})",
                dims.lhs_feature, dims.rhs_in_feature
            ));
        }
        if out_features % fg != 0 || out_features % bg != 0 {
            return Err(format!(
                "kernel {rhs}'s {out_features} output features (dimension {}) do not divide into {} groups",
                dims.rhs_out_feature,
                fg.max(bg)
            ));
        }
        if batch % bg != 0 {
            return Err(format!(
                "input {lhs}'s batch of {batch} (dimension {}) does not divide into {bg} batch groups",
                dims.lhs_batch
            ));
        }
        let spatial: Vec<usize> = dims.lhs_spatial.iter().map(|&i| l[i]).collect();
        let kernel: Vec<usize> = dims.rhs_spatial.iter().map(|&i| r[i]).collect();
        let dilated: Vec<usize> = spatial
            .iter()
            .zip(&lhs_dilation)
            .map(|(&n, &ld)| {
                n.checked_sub(1)
                    .map_or(Some(0), |m| m.checked_mul(ld)?.checked_add(1))
            })
            .collect::<Option<_>>()
            .ok_or_else(|| format!("input {lhs} dilated by {lhs_dilation:?} overflows"))?;
        let padding = match &self.padding {
            ConvPadding::Valid => vec![(0, 0); d],
            // As lax: a dilated input (a transposed convolution) needs its padding spelled out.
            ConvPadding::Same if lhs_dilation.iter().any(|&ld| ld != 1) => {
                return Err(format!(
                    "\"SAME\" padding with input dilation {lhs_dilation:?} (a transposed convolution) is not defined; give the padding explicitly"
                ))
            }
            ConvPadding::Same => same_padding(&dilated, &kernel, &strides, &rhs_dilation),
            ConvPadding::Explicit(p) if p.len() == d => p.clone(),
            ConvPadding::Explicit(p) => {
                return Err(format!(
                    "padding {p:?} has {} entries for {d} spatial dimensions",
                    p.len()
                ))
            }
        };
        let padded: Vec<usize> = dilated
            .iter()
            .zip(&padding)
            .map(|(&n, &(lo, hi))| {
                let size = i128::try_from(n).ok()? + i128::from(lo) + i128::from(hi);
                usize::try_from(size).ok()
            })
            .collect::<Option<_>>()
            .ok_or_else(|| {
                format!("padding {padding:?} crops input {lhs} (dilated {dilated:?}) below nothing")
            })?;
        // A kernel with an empty spatial dimension has no positions: the result is zeros.
        let window_dims: Vec<usize> = kernel.iter().map(|&k| k.max(1)).collect();
        let positions = kernel.iter().try_fold(1usize, |n, &k| n.checked_mul(k));
        if positions.is_none_or(|n| n > MAX_WINDOW_ELEMENTS) {
            return Err(format!(
                "kernel {rhs} has more than {MAX_WINDOW_ELEMENTS} spatial positions"
            ));
        }
        let mut window = WindowGeometry::new(&padded, &window_dims, &strides, &rhs_dilation)?;
        // XLA's size for an empty kernel dimension (`StridedBound`): every stride of the padded
        // input, none of an empty one.
        for ((out, &k), (&p, &s)) in window
            .out
            .iter_mut()
            .zip(&kernel)
            .zip(padded.iter().zip(&strides))
        {
            if k == 0 {
                *out = if p == 0 { 0 } else { (p / s).saturating_add(1) };
            }
        }
        // The result, and the stack of strided slices it is computed from, must be addressable.
        let windows = window.out.iter().try_fold(1usize, |n, &d| n.checked_mul(d));
        let bytes = |rows: usize, per: usize| {
            windows?
                .checked_mul(rows)?
                .checked_mul(per)?
                .checked_mul(lhs.dtype.size_bytes())
        };
        let result = bytes(batch / bg, out_features);
        let stack = bytes(batch, in_features).and_then(|b| b.checked_mul(positions?));
        if [result, stack]
            .iter()
            .any(|b| b.is_none_or(|b| b > crate::MAX_BYTES))
        {
            return Err(format!(
                "the result of convolving {lhs} by {rhs} ({:?} windows per spatial dimension) is too large to address",
                window.out
            ));
        }
        Ok(Plan {
            dtype: lhs.dtype,
            batch,
            in_features,
            out_features,
            kernel,
            padding,
            window,
            strides,
            lhs_dilation,
        })
    }

    /// The output's shape in its own layout.
    fn out_shape(&self, plan: &Plan) -> Shape {
        let mut out = vec![0; self.dims.spatial() + 2];
        out[self.dims.out_batch] = plan.batch / self.batch_groups;
        out[self.dims.out_feature] = plan.out_features;
        for (&i, &n) in self.dims.out_spatial.iter().zip(&plan.window.out) {
            out[i] = n;
        }
        Shape::new(out)
    }

    /// Emits the convolution of `lhs` (of type `lhs_ty`) by `rhs` into `sink` (module docs).
    pub fn lower<S: OpSink>(
        &self,
        sink: &mut S,
        (lhs, lhs_ty): (&S::Value, &TensorType),
        (rhs, rhs_ty): (&S::Value, &TensorType),
    ) -> Result<S::Value, ConvError<S::Error>> {
        let plan = self.plan(lhs_ty, rhs_ty).map_err(ConvError::Invalid)?;
        let mut b = Builder { sink };
        let zero = b.emit(Op::Constant(Literal::scalar(Scalar::zero(plan.dtype))), &[])?;
        let out_shape = self.out_shape(&plan);
        let (groups_f, groups_b) = (self.feature_groups, self.batch_groups);
        let positions: usize = plan.kernel.iter().product();
        if out_shape.dims().contains(&0) || positions == 0 || plan.in_features == 0 {
            // Nothing to add up: zeros (and a result with no elements).
            let zeros = Op::BroadcastInDim {
                shape: out_shape,
                dims: Vec::new(),
            };
            return finish(b.emit(zeros, &[&zero])?);
        }
        let dims = &self.dims;
        let d = dims.spatial();
        // The input as [N, C, S...], padded and dilated.
        let lhs_perm: Vec<usize> = [dims.lhs_batch, dims.lhs_feature]
            .into_iter()
            .chain(dims.lhs_spatial.iter().copied())
            .collect();
        let x = b.transpose((lhs.into(), lhs_ty.clone()), lhs_perm)?;
        let interior: Vec<usize> = [0, 0]
            .into_iter()
            .chain(plan.lhs_dilation.iter().map(|&ld| ld - 1))
            .collect();
        let (low, high): (Vec<i64>, Vec<i64>) = [(0, 0), (0, 0)]
            .into_iter()
            .chain(plan.padding.iter().copied())
            .unzip();
        let x = if interior.iter().all(|&i| i == 0) && low.iter().chain(&high).all(|&p| p == 0) {
            x
        } else {
            let pad = Op::Pad {
                low,
                high,
                interior,
            };
            b.emit(pad, &[&x, &zero])?
        };
        // One strided slice per kernel position, each [1, N, C, O...], stacked.
        let (n, c) = (plan.batch, plan.in_features);
        let out_spatial = plan.window.out.clone();
        let mut slices = Vec::with_capacity(positions);
        for (start, limit) in plan.window.positions() {
            let slice = Op::Slice {
                start: [0, 0].into_iter().chain(start).collect(),
                limit: [n, c].into_iter().chain(limit).collect(),
                strides: [1, 1].into_iter().chain(plan.strides.clone()).collect(),
            };
            let s = b.emit(slice, &[&x])?;
            let shape: Vec<usize> = [1, n, c].into_iter().chain(out_spatial.clone()).collect();
            slices.push(b.reshape(s, shape)?);
        }
        let stack = if slices.len() == 1 {
            slices
                .pop()
                .ok_or_else(|| ConvError::Invalid("no kernel position".into()))?
        } else {
            let refs: Vec<&Typed<S::Value>> = slices.iter().collect();
            b.emit(Op::Concatenate { axis: 0 }, &refs)?
        };
        // The kernel as [O, I, P] (P the positions, row-major as the slices).
        let rhs_perm: Vec<usize> = [dims.rhs_out_feature, dims.rhs_in_feature]
            .into_iter()
            .chain(dims.rhs_spatial.iter().copied())
            .collect();
        let w = b.transpose((rhs.into(), rhs_ty.clone()), rhs_perm)?;
        let (o, i) = (plan.out_features, plan.in_features / groups_f);
        // Groups split the features (or the batch) group-major and become the product's
        // batch dimension: the stack [P, N, C, O...] becomes [P, N, G, I, O...] (or [P, G,
        // N/G, C, O...]), the kernel [G, O/G, I, P]; the product [G, N', O..., O/G] moves to
        // [N', O..., G, O/G]. Without groups, the product of [P, N, C, O...] and [O, C, P] is
        // [N, O..., O] as it comes.
        let groups = groups_f.max(groups_b);
        let (stack_shape, w_shape, dot): (Vec<usize>, Vec<usize>, DotDims) = if groups > 1 {
            let split: [usize; 3] = if groups_f > 1 {
                [n, groups_f, i]
            } else {
                [groups_b, n / groups_b, c]
            };
            let grouped = DotDims {
                lhs_batch: vec![if groups_f > 1 { 2 } else { 1 }],
                rhs_batch: vec![0],
                lhs_contract: vec![0, 3],
                rhs_contract: vec![3, 2],
            };
            (
                [positions]
                    .into_iter()
                    .chain(split)
                    .chain(out_spatial.clone())
                    .collect(),
                vec![groups, o / groups, i, positions],
                grouped,
            )
        } else {
            let plain = DotDims {
                lhs_batch: vec![],
                rhs_batch: vec![],
                lhs_contract: vec![0, 2],
                rhs_contract: vec![2, 1],
            };
            (
                [positions, n, c]
                    .into_iter()
                    .chain(out_spatial.clone())
                    .collect(),
                vec![o, i, positions],
                plain,
            )
        };
        let stack = b.reshape(stack, stack_shape)?;
        let w = b.reshape(w, w_shape)?;
        let prod = b.emit(Op::DotGeneral(dot), &[&stack, &w])?;
        let prod = if groups > 1 {
            let perm: Vec<usize> = (1..d + 2).chain([0, d + 2]).collect();
            b.transpose(prod, perm)?
        } else {
            prod
        };
        let merged: Vec<usize> = [n / groups_b]
            .into_iter()
            .chain(out_spatial)
            .chain([o])
            .collect();
        let prod = b.reshape(prod, merged)?;
        // [N, O..., F] to the output's layout.
        let mut out_perm = vec![0; d + 2];
        out_perm[dims.out_batch] = 0;
        out_perm[dims.out_feature] = d + 1;
        for (j, &at) in dims.out_spatial.iter().enumerate() {
            out_perm[at] = j + 1;
        }
        finish(b.transpose(prod, out_perm)?)
    }
}

/// The value a lowering ends with, which it always emitted itself (the product is new).
fn finish<V, E>((arg, _): Typed<'_, V>) -> Result<V, ConvError<E>> {
    match arg {
        Arg::Owned(v) => Ok(v),
        Arg::Borrowed(_) => Err(ConvError::Invalid(
            "a convolution must compute a new value".into(),
        )),
    }
}

/// An operand of the lowering: one of the caller's values or one it emitted.
enum Arg<'a, V> {
    Borrowed(&'a V),
    Owned(V),
}

impl<'a, V> From<&'a V> for Arg<'a, V> {
    fn from(v: &'a V) -> Self {
        Arg::Borrowed(v)
    }
}

impl<V> Arg<'_, V> {
    fn get(&self) -> &V {
        match self {
            Arg::Borrowed(v) => v,
            Arg::Owned(v) => v,
        }
    }
}

/// The sink with each value's type alongside, checked by [`infer_type`] before it is emitted.
struct Builder<'s, S> {
    sink: &'s mut S,
}

type Typed<'a, V> = (Arg<'a, V>, TensorType);

impl<S: OpSink> Builder<'_, S> {
    /// `op` of typed operands, its result typed and owned.
    fn emit<'a>(
        &mut self,
        op: Op,
        args: &[&Typed<'_, S::Value>],
    ) -> Result<Typed<'a, S::Value>, ConvError<S::Error>> {
        let types: Vec<&TensorType> = args.iter().map(|a| &a.1).collect();
        let ty =
            infer_type(&op, &types).map_err(|e: TypeError| ConvError::Invalid(e.to_string()))?;
        let values: Vec<&S::Value> = args.iter().map(|a| a.0.get()).collect();
        let v = self.sink.emit(op, &values).map_err(ConvError::Sink)?;
        Ok((Arg::Owned(v), ty))
    }

    /// `x` transposed by `perm`, or `x` itself for the identity.
    fn transpose<'a>(
        &mut self,
        x: Typed<'a, S::Value>,
        perm: Vec<usize>,
    ) -> Result<Typed<'a, S::Value>, ConvError<S::Error>> {
        if perm.iter().enumerate().all(|(i, &p)| i == p) {
            return Ok(x);
        }
        self.emit(Op::Transpose { perm }, &[&x])
    }

    /// `x` reshaped to `shape`, or `x` itself if it has that shape.
    fn reshape<'a>(
        &mut self,
        x: Typed<'a, S::Value>,
        shape: Vec<usize>,
    ) -> Result<Typed<'a, S::Value>, ConvError<S::Error>> {
        if x.1.dims() == shape.as_slice() {
            return Ok(x);
        }
        self.emit(
            Op::Reshape {
                shape: shape.into(),
            },
            &[&x],
        )
    }
}

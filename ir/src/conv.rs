//! Convolutions (`lax.conv_general_dilated`, StableHLO's `convolution`). The IR has no
//! convolution op: a convolution is spelled in its own ops, once here for every frontend,
//! so that every backend computes it and autodiff and `vmap` need no rules of their own.
//!
//! The spelling is im2col: the input, moved channels-last (`[batch, spatial..., feature]`), is
//! padded (its dilation as interior padding) and read as a table of feature rows; one gather
//! by indices computed from iotas copies the row each (example, output position, kernel
//! position) reads, which makes the patches matrix `[N·outputs, positions·C]` in the layout a
//! matrix product takes as it is; one `dot_general` with the kernel (feature or batch groups as
//! its batch dimension) follows, then the move to the output's layout. Backends copy the rows
//! with their row-gather kernels and the product runs as one large GEMM; the gather's gradient
//! is the scatter-add of col2im. The patches cost memory in the kernel's size, which
//! [`MAX_WINDOW_ELEMENTS`] bounds.

use crate::lower::{finish, Builder, LowerError, OpSink, Typed};
use crate::{same_padding, WindowGeometry, MAX_WINDOW_ELEMENTS};
use crate::{DType, DotDims, Literal, Op, Scalar, Shape, TensorType};

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
    ) -> Result<S::Value, LowerError<S::Error>> {
        let plan = self.plan(lhs_ty, rhs_ty).map_err(LowerError::Invalid)?;
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
        let (n, c) = (plan.batch, plan.in_features);
        // The input channels-last, [N, S..., C], padded and dilated: a table of rows of C.
        let lhs_perm: Vec<usize> = [dims.lhs_batch]
            .into_iter()
            .chain(dims.lhs_spatial.iter().copied())
            .chain([dims.lhs_feature])
            .collect();
        let x = b.transpose((lhs.into(), lhs_ty.clone()), lhs_perm)?;
        let interior: Vec<usize> = [0]
            .into_iter()
            .chain(plan.lhs_dilation.iter().map(|&ld| ld - 1))
            .chain([0])
            .collect();
        let (low, high): (Vec<i64>, Vec<i64>) = [(0, 0)]
            .into_iter()
            .chain(plan.padding.iter().copied())
            .chain([(0, 0)])
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
        let padded = &plan.window.padded;
        let rows = padded
            .iter()
            .try_fold(n, |r, &p| r.checked_mul(p))
            .ok_or_else(|| LowerError::Invalid(format!("padded input {padded:?} overflows")))?;
        let table = b.reshape(x, vec![rows, c])?;
        // The row each (example, output position, kernel position) reads, from iotas:
        // `n·ΠP + Σⱼ (oⱼ·strideⱼ + kⱼ·dilationⱼ)·(row stride of spatial dimension j)`.
        let out_spatial = plan.window.out.clone();
        let index_shape: Vec<usize> = [n]
            .into_iter()
            .chain(out_spatial.iter().copied())
            .chain(plan.kernel.iter().copied())
            .collect();
        let index_dtype = if i32::try_from(rows).is_ok() {
            DType::I32
        } else {
            DType::I64
        };
        let mut row_stride = vec![1usize; d];
        for j in (0..d.saturating_sub(1)).rev() {
            row_stride[j] = row_stride[j + 1] * padded[j + 1];
        }
        let batch_stride = row_stride.first().map_or(1, |&s| s * padded[0]);
        let mut terms = vec![(0, batch_stride)];
        // Saturating: a factor past the table's rows belongs to a dimension of one position
        // (the only window that fits), whose term is skipped below.
        for (j, &stride) in row_stride.iter().enumerate() {
            terms.push((1 + j, plan.strides[j].saturating_mul(stride)));
            terms.push((1 + d + j, plan.window.dilations[j].saturating_mul(stride)));
        }
        let mut index: Option<Typed<S::Value>> = None;
        for (dim, factor) in terms {
            if index_shape[dim] == 1 {
                continue;
            }
            let iota = Op::Iota {
                dtype: index_dtype,
                shape: Shape::new(index_shape.clone()),
                dim,
            };
            let mut term = b.emit(iota, &[])?;
            if factor != 1 {
                let f = Scalar::from_f64(index_dtype, factor as f64);
                let f = b.emit(
                    Op::Constant(Literal::splat(f, Shape::new(index_shape.clone()))),
                    &[],
                )?;
                term = b.emit(Op::Binary(crate::BinaryOp::Mul), &[&term, &f])?;
            }
            index = Some(match index {
                None => term,
                Some(sum) => b.emit(Op::Binary(crate::BinaryOp::Add), &[&sum, &term])?,
            });
        }
        let index = match index {
            Some(index) => index,
            None => b.emit(
                Op::Constant(Literal::splat(
                    Scalar::zero(index_dtype),
                    Shape::new(index_shape.clone()),
                )),
                &[],
            )?,
        };
        // The im2col matrix: one row of C per (example, output position, kernel position).
        let k = index_shape.len();
        let gather = crate::Gather {
            offset_dims: vec![k],
            collapsed_slice_dims: vec![0],
            operand_batching_dims: Vec::new(),
            start_indices_batching_dims: Vec::new(),
            start_index_map: vec![0],
            index_vector_dim: k,
            slice_sizes: vec![1, c],
            indices_are_sorted: false,
        };
        let patches = b.emit(Op::Gather(Box::new(gather)), &[&table, &index])?;
        // The kernel as [P, I, O] (P the kernel positions, row-major as the indices).
        let rhs_perm: Vec<usize> = dims
            .rhs_spatial
            .iter()
            .copied()
            .chain([dims.rhs_in_feature, dims.rhs_out_feature])
            .collect();
        let w = b.transpose((rhs.into(), rhs_ty.clone()), rhs_perm)?;
        let (o, i) = (plan.out_features, c / groups_f);
        let windows: usize = out_spatial.iter().product();
        // One product of the patches [N·Ô, P·C] and the kernel [P·I, O]; groups split the
        // features (or the batch) group-major and become its batch dimension: patches
        // [N·Ô, P, G, I] (or [G, N/G·Ô, P·C]) and kernel [P, I, G, O/G] (or [P·C, G, O/G]).
        let groups = groups_f.max(groups_b);
        let (patch_shape, w_shape, dot) = if groups_f > 1 {
            (
                vec![n * windows, positions, groups_f, i],
                vec![positions, i, groups_f, o / groups_f],
                DotDims {
                    lhs_batch: vec![2],
                    rhs_batch: vec![2],
                    lhs_contract: vec![1, 3],
                    rhs_contract: vec![0, 1],
                },
            )
        } else if groups_b > 1 {
            (
                vec![groups_b, n / groups_b * windows, positions * c],
                vec![positions * c, groups_b, o / groups_b],
                DotDims {
                    lhs_batch: vec![0],
                    rhs_batch: vec![1],
                    lhs_contract: vec![2],
                    rhs_contract: vec![0],
                },
            )
        } else {
            (
                vec![n * windows, positions * c],
                vec![positions * c, o],
                DotDims {
                    lhs_batch: Vec::new(),
                    rhs_batch: Vec::new(),
                    lhs_contract: vec![1],
                    rhs_contract: vec![0],
                },
            )
        };
        let patches = b.reshape(patches, patch_shape)?;
        let w = b.reshape(w, w_shape)?;
        let prod = b.emit(Op::DotGeneral(dot), &[&patches, &w])?;
        // Grouped products come out [G, N'·Ô, O/G]: moved to [N'·Ô, G, O/G].
        let prod = if groups > 1 {
            b.transpose(prod, vec![1, 0, 2])?
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

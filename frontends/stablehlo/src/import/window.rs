//! `stablehlo.reduce_window` and `stablehlo.select_and_scatter` (pooling, and the cumulative
//! sums, products and extrema JAX writes with them) spelled in the IR's own ops: the operand
//! padded (its base dilation as interior padding), then one strided slice per window position,
//! combined in the window's row-major order after the initial value, as XLA's reference
//! evaluator visits them (`ferrax_ir::WindowGeometry`). The IR needs no window op of its own,
//! every backend computes these with the ops it has, and autodiff differentiates them; the
//! cost is one slice per window position, so windows are bounded.

use super::attrs::ints;
use super::names::direction;
use super::reduce::{applied_op, combiner, region_op};
use super::Importer;
use crate::lex::Tok;
use crate::parse::Operation;
use crate::Error;
use ferrax_compiler::batching::vmap;
use ferrax_ir::{
    BinaryOp, CompareOp, Literal, Op, Scalar, Shape, TensorType, UnaryOp, ValueId, WindowGeometry,
    MAX_WINDOW_ELEMENTS,
};

/// The geometry of `op`'s window over an operand padded to `padded`: an unsupported window
/// beyond [`MAX_WINDOW_ELEMENTS`] positions, an error for one that does not fit.
fn geometry(op: &Operation, rank: usize, padded: &[usize]) -> Result<WindowGeometry, Error> {
    let line = op.line;
    let dims = sizes(
        op,
        op.attr(&["window_dimensions"])
            .ok_or_else(|| Error::at(line, format!("{} needs window_dimensions", op.name)))?,
        rank,
    )?;
    let positions = dims.iter().try_fold(1usize, |n, &d| n.checked_mul(d));
    if positions.is_none_or(|n| n > MAX_WINDOW_ELEMENTS) {
        return Err(Error::unsupported(
            line,
            format!(
                "{} window {dims:?} (more than {MAX_WINDOW_ELEMENTS} positions)",
                op.name
            ),
        ));
    }
    let strides = optional(op, "window_strides", rank)?;
    let dilations = optional(op, "window_dilations", rank)?;
    WindowGeometry::new(padded, &dims, &strides, &dilations)
        .map_err(|e| Error::at(line, format!("{}: {e}", op.name)))
}

/// `key`'s sizes, or ones where the op leaves it out.
fn optional(op: &Operation, key: &str, rank: usize) -> Result<Vec<usize>, Error> {
    match op.attr(&[key]) {
        Some(tokens) => sizes(op, tokens, rank),
        None => Ok(vec![1; rank]),
    }
}

/// The integers of an attribute, `n` copies of the one value of a splat (`dense<1> :
/// tensor<4xi64>`, as MLIR prints a dense attribute whose values are all equal).
pub(super) fn splatted(tokens: &[Tok], n: usize) -> Vec<i64> {
    let values = ints(tokens);
    let dense = tokens.iter().any(|t| *t == Tok::Word("dense".into()));
    match values.as_slice() {
        [one] if dense => vec![*one; n],
        _ => values,
    }
}

/// An attribute's `rank` sizes (array or dense, splats included); negative ones are errors.
fn sizes(op: &Operation, tokens: &[Tok], rank: usize) -> Result<Vec<usize>, Error> {
    splatted(tokens, rank)
        .into_iter()
        .map(|v| {
            usize::try_from(v)
                .map_err(|_| Error::at(op.line, format!("{}: negative size {v}", op.name)))
        })
        .collect()
}

/// `op`'s `padding` (`[[low, high], ...]`), zeros where it has none.
fn padding(op: &Operation, rank: usize) -> Result<(Vec<i64>, Vec<i64>), Error> {
    let flat = op
        .attr(&["padding"])
        .map_or_else(|| vec![0; 2 * rank], |t| splatted(t, 2 * rank));
    if flat.len() != 2 * rank {
        return Err(Error::at(
            op.line,
            format!("{}: padding needs {rank} [low, high] pairs", op.name),
        ));
    }
    Ok(flat.chunks(2).map(|p| (p[0], p[1])).unzip())
}

impl Importer<'_> {
    fn splat(&mut self, value: ValueId, shape: &[usize], line: usize) -> Result<ValueId, Error> {
        self.push(
            Op::BroadcastInDim {
                shape: Shape::new(shape.to_vec()),
                dims: Vec::new(),
            },
            &[value],
            line,
        )
    }

    fn scalar(&mut self, value: Scalar, line: usize) -> Result<ValueId, Error> {
        self.push(Op::Constant(Literal::scalar(value)), &[], line)
    }

    /// Window position `k` as an i32 tensor of `shape` (positions are at most 4,096).
    fn position(&mut self, k: usize, shape: &[usize], line: usize) -> Result<ValueId, Error> {
        let k = self.scalar(Scalar::I32(k as i32), line)?;
        self.splat(k, shape, line)
    }

    /// The strided slice of `x` at window position `(start, limit)`.
    fn window_slice(
        &mut self,
        x: ValueId,
        w: &WindowGeometry,
        (start, limit): (Vec<usize>, Vec<usize>),
        line: usize,
    ) -> Result<ValueId, Error> {
        let strides = w.strides.clone();
        self.push(
            Op::Slice {
                start,
                limit,
                strides,
            },
            &[x],
            line,
        )
    }

    /// `reduce_window` of any number of operands (with as many initial values) and any body
    /// reading only its arguments: each operand padded with its initial value, then one
    /// strided slice per window position combined into the accumulators, which start as the
    /// initial values. A body of one combining op is that elementwise op; any other is
    /// imported as a function of scalars, batched over the result's elements (`vmap`) and
    /// inlined once per position.
    pub(super) fn reduce_window(
        &mut self,
        op: &Operation,
        args: &[ValueId],
        depth: usize,
    ) -> Result<Vec<ValueId>, Error> {
        let line = op.line;
        let k = args.len() / 2;
        if k == 0 || !args.len().is_multiple_of(2) {
            return Err(Error::at(
                line,
                "reduce_window needs operands and as many initial values",
            ));
        }
        let (operands, inits) = args.split_at(k);
        let types = operands
            .iter()
            .map(|&v| self.type_of(v, line))
            .collect::<Result<Vec<_>, _>>()?;
        let rank = types[0].rank();
        if types.iter().any(|t| t.dims() != types[0].dims()) {
            return Err(Error::at(
                line,
                "reduce_window: operands of different shapes",
            ));
        }
        let (low, high) = padding(op, rank)?;
        let base = optional(op, "base_dilations", rank)?;
        if base.len() != rank || base.contains(&0) {
            return Err(Error::at(
                line,
                format!("reduce_window: base dilations {base:?}"),
            ));
        }
        let mut padded = Vec::with_capacity(k);
        for (&x, &init) in operands.iter().zip(inits) {
            padded.push(self.push(
                Op::Pad {
                    low: low.clone(),
                    high: high.clone(),
                    interior: base.iter().map(|b| b - 1).collect(),
                },
                &[x, init],
                line,
            )?);
        }
        let w = geometry(op, rank, self.type_of(padded[0], line)?.dims())?;
        let out = |t: &TensorType| t.with_shape(w.out.clone());
        if let Some(t) = op
            .result_types
            .iter()
            .find(|t| !self.refining.conforms(t, &out(t)))
        {
            return Err(Error::at(
                line,
                format!("reduce_window gives {:?}, the result type is {t}", w.out),
            ));
        }
        let mut acc = inits
            .iter()
            .map(|&init| self.splat(init, &w.out, line))
            .collect::<Result<Vec<_>, _>>()?;
        if w.is_empty() {
            return Ok(acc);
        }
        let simple = match (applied_op(op).ok(), k) {
            (Some(body), 1) => combiner(&body, types[0].dtype).map(|(_, b)| b),
            _ => None,
        };
        if let Some(combine) = simple {
            for slice in w.positions() {
                let part = self.window_slice(padded[0], &w, slice, line)?;
                acc[0] = self.push(Op::Binary(combine), &[acc[0], part], line)?;
            }
            return Ok(acc);
        }
        let body = self.combining_body(op, &types, depth)?;
        let n: usize = w.out.iter().product();
        let batched = vmap(&body, &vec![Some(0); 2 * k], &vec![Some(0); k], n)
            .map_err(|e| Error::at(line, format!("reduce_window body: {e}")))?;
        let flat = |s: &mut Self, v: ValueId, shape: &[usize]| {
            s.push(
                Op::Reshape {
                    shape: Shape::new(shape.to_vec()),
                },
                &[v],
                line,
            )
        };
        let mut running = acc
            .iter()
            .map(|&a| flat(self, a, &[n]))
            .collect::<Result<Vec<_>, _>>()?;
        for slice in w.positions() {
            let mut args = running.clone();
            for &p in &padded {
                let part = self.window_slice(p, &w, slice.clone(), line)?;
                args.push(flat(self, part, &[n])?);
            }
            running = self
                .b
                .inline(&batched, &args)
                .map_err(|e| Error::at(line, e.to_string()))?;
        }
        running.into_iter().map(|v| flat(self, v, &w.out)).collect()
    }

    /// `select_and_scatter` whose select region is one comparison of its two arguments and
    /// whose scatter region is one combining op: each window picks the position its
    /// comparison keeps (the first maximum for `GE`, as XLA visits the window in row-major
    /// order, skipping padding), and the source element of that window is combined into the
    /// result there, which starts as the initial value everywhere.
    pub(super) fn select_and_scatter(
        &mut self,
        op: &Operation,
        args: &[ValueId],
        ty: &TensorType,
    ) -> Result<ValueId, Error> {
        let line = op.line;
        let [x, source, init] = args else {
            return Err(Error::at(line, "select_and_scatter needs three operands"));
        };
        let xt = self.type_of(*x, line)?;
        let keep = select_comparison(op)?;
        let scatter = op
            .regions
            .get(1)
            .ok_or_else(|| Error::at(line, "select_and_scatter needs a scatter region"))?;
        let body = region_op(scatter).ok_or_else(|| {
            Error::unsupported(
                line,
                "select_and_scatter with a scatter region other than one op",
            )
        })?;
        let (reduce_op, combine) = combiner(&body, xt.dtype).ok_or_else(|| {
            Error::unsupported(line, format!("select_and_scatter with scatter {body}"))
        })?;
        let rank = xt.rank();
        let (low, high) = padding(op, rank)?;
        if low.iter().chain(&high).any(|&p| p < 0) {
            return Err(Error::at(line, "select_and_scatter: negative padding"));
        }
        let zeros = vec![0; rank];
        let pad = |low: &[i64], high: &[i64]| Op::Pad {
            low: low.to_vec(),
            high: high.to_vec(),
            interior: zeros.clone(),
        };
        // Padding is never selected (its positions are marked invalid), so its value is moot.
        let filler = self.scalar(Scalar::zero(xt.dtype), line)?;
        let padded = self.push(pad(&low, &high), &[*x, filler], line)?;
        let w = geometry(op, rank, self.type_of(padded, line)?.dims())?;
        let st = self.type_of(*source, line)?;
        if w.out != st.dims() || ty.dims() != xt.dims() {
            return Err(Error::at(
                line,
                format!(
                    "select_and_scatter: windows {:?} for a source {st} and a result {ty}",
                    w.out
                ),
            ));
        }
        let mut result = self.splat(*init, &w.padded, line)?;
        if st.numel() > 0 {
            let yes = self.scalar(Scalar::Bool(true), line)?;
            let no = self.scalar(Scalar::Bool(false), line)?;
            let ones = self.splat(yes, xt.dims(), line)?;
            let valid = self.push(pad(&low, &high), &[ones, no], line)?;
            let slices = w.positions();
            // Visit the window in order: a valid element replaces the kept one where nothing
            // is kept yet or the comparison does not keep the current one. Each window
            // remembers the position it chose (-1 for none), so one mask at a time is live.
            let mut chosen = self.scalar(Scalar::I32(-1), line)?;
            chosen = self.splat(chosen, &w.out, line)?;
            let mut kept: Option<(ValueId, ValueId)> = None;
            for (k, slice) in slices.iter().enumerate() {
                let e = self.window_slice(padded, &w, slice.clone(), line)?;
                let v = self.window_slice(valid, &w, slice.clone(), line)?;
                let take = match kept {
                    None => v,
                    Some((have, current)) => {
                        let stays = self.push(Op::Compare(keep), &[current, e], line)?;
                        let replaced = self.push(Op::Unary(UnaryOp::Not), &[stays], line)?;
                        let empty = self.push(Op::Unary(UnaryOp::Not), &[have], line)?;
                        let wanted =
                            self.push(Op::Binary(BinaryOp::Or), &[empty, replaced], line)?;
                        self.push(Op::Binary(BinaryOp::And), &[v, wanted], line)?
                    }
                };
                kept = Some(match kept {
                    None => (v, e),
                    Some((have, current)) => (
                        self.push(Op::Binary(BinaryOp::Or), &[have, v], line)?,
                        self.push(Op::Select, &[take, e, current], line)?,
                    ),
                });
                let position = self.position(k, &w.out, line)?;
                chosen = self.push(Op::Select, &[take, position, chosen], line)?;
            }
            // Each window's source goes to the position it chose. Positions in reverse: of
            // the windows choosing one element, a later window reaches it from an earlier
            // position, so this adds their sources in the windows' order, as XLA does.
            let identity = self.scalar(reduce_op.identity(xt.dtype), line)?;
            let nothing = self.splat(identity, &w.out, line)?;
            for (k, (start, limit)) in slices.into_iter().enumerate().rev() {
                let position = self.position(k, &w.out, line)?;
                let here = self.push(Op::Compare(CompareOp::Eq), &[chosen, position], line)?;
                let part = self.push(Op::Select, &[here, *source, nothing], line)?;
                // Back to the padded operand's positions: the inverse of the strided slice.
                let spread = self.push(
                    Op::Pad {
                        low: start.iter().map(|&s| s as i64).collect(),
                        high: (0..rank).map(|d| (w.padded[d] - limit[d]) as i64).collect(),
                        interior: w.strides.iter().map(|s| s - 1).collect(),
                    },
                    &[part, identity],
                    line,
                )?;
                result = self.push(Op::Binary(combine), &[result, spread], line)?;
            }
        }
        let start: Vec<usize> = low.iter().map(|&l| l as usize).collect();
        let limit = (0..rank).map(|d| start[d] + xt.dims()[d]).collect();
        self.push(
            Op::Slice {
                start,
                limit,
                strides: vec![1; rank],
            },
            &[result],
            line,
        )
    }
}

/// The comparison under which the select region keeps its first argument (the element kept
/// so far) over its second (the next one): `GE` keeps the first maximum.
fn select_comparison(op: &Operation) -> Result<CompareOp, Error> {
    let line = op.line;
    let refuse = || {
        Error::unsupported(
            line,
            "select_and_scatter with a select region other than one comparison of its arguments",
        )
    };
    let region = op.regions.first().ok_or_else(refuse)?;
    let ([compare, ret], [(a, _), (b, _)]) = (region.ops.as_slice(), region.args.as_slice()) else {
        return Err(refuse());
    };
    if compare.name != "stablehlo.compare"
        || !matches!(ret.name.as_str(), "stablehlo.return" | "return")
        || ret.operands != compare.results
    {
        return Err(refuse());
    }
    let dir = direction(&compare.words)
        .or_else(|| compare.attr(&["comparison_direction"]).and_then(direction))
        .ok_or_else(refuse)?;
    match compare.operands.as_slice() {
        [x, y] if x == a && y == b => Ok(dir),
        [x, y] if x == b && y == a => Ok(match dir {
            CompareOp::Lt => CompareOp::Gt,
            CompareOp::Le => CompareOp::Ge,
            CompareOp::Gt => CompareOp::Lt,
            CompareOp::Ge => CompareOp::Le,
            CompareOp::Eq | CompareOp::Ne => dir,
        }),
        _ => Err(refuse()),
    }
}

//! `stablehlo.reduce` over several operands (JAX's `argmax` and `argmin` reduce values and
//! their indices together) with any body: the body becomes a function of scalars, batched
//! (`vmap`) and inlined once per level of a pairwise tree over the reduced elements. Each
//! operand's reduced dimensions are moved last and flattened, its initial value put first,
//! and each level combines neighbours (`2i` with `2i + 1`; an odd last one waits for the next
//! level), so the initial value is combined once and an element only ever meets later ones
//! from the left: bodies that are associative, as StableHLO requires, give the sequential
//! result.

use super::control::free_names;
use super::Importer;
use crate::parse::Operation;
use crate::Error;
use ferrax_compiler::batching::vmap;
use ferrax_ir::{Func, Op, Shape, TensorType, ValueId};

impl Importer<'_> {
    /// The body region of a reduction of `operands` (a `reduce` or `reduce_window`) as a
    /// function of scalars taking the accumulators, then the elements, and returning the new
    /// accumulators; a body that reads values from outside it is unsupported.
    pub(super) fn combining_body(
        &mut self,
        op: &Operation,
        operands: &[TensorType],
        depth: usize,
    ) -> Result<Func, Error> {
        let line = op.line;
        let k = operands.len();
        let region = op
            .regions
            .first()
            .ok_or_else(|| Error::at(line, format!("{} needs a body", op.name)))?;
        if region.args.len() != 2 * k {
            return Err(Error::at(
                line,
                format!(
                    "{} of {k} operands with a body of {} arguments",
                    op.name,
                    region.args.len()
                ),
            ));
        }
        if !free_names(&[region], &[]).is_empty() {
            return Err(Error::unsupported(
                line,
                format!("{} whose body reads values from outside it", op.name),
            ));
        }
        let params: Vec<(String, TensorType)> = region
            .args
            .iter()
            .zip(operands.iter().chain(operands))
            .map(|((name, _), t)| (name.clone(), TensorType::new(t.dtype, Shape::scalar())))
            .collect();
        let body = self.region_func("body", region, &params, None, depth)?;
        if body.outputs.len() != k {
            return Err(Error::at(
                line,
                format!(
                    "{} body returns {} values, not {k}",
                    op.name,
                    body.outputs.len()
                ),
            ));
        }
        Ok(body)
    }

    pub(super) fn variadic_reduce(
        &mut self,
        op: &Operation,
        args: &[ValueId],
        depth: usize,
    ) -> Result<Vec<ValueId>, Error> {
        let line = op.line;
        let k = args.len() / 2;
        if !args.len().is_multiple_of(2) {
            return Err(Error::at(
                line,
                format!(
                    "reduce of {} values: operands and as many initial values",
                    args.len()
                ),
            ));
        }
        let (operands, inits) = args.split_at(k);
        let types = operands
            .iter()
            .map(|&v| self.type_of(v, line))
            .collect::<Result<Vec<_>, _>>()?;
        let dims = types[0].dims().to_vec();
        if types.iter().any(|t| t.dims() != dims) {
            return Err(Error::at(line, "reduce: operands of different shapes"));
        }
        let mut axes = super::attrs::usizes(op.attr(&["dimensions"]).unwrap_or(&[]), line)?;
        axes.sort_unstable();
        axes.dedup();
        if axes.iter().any(|&a| a >= dims.len()) {
            return Err(Error::at(
                line,
                format!("reduce: dimensions {axes:?} of {dims:?}"),
            ));
        }
        let kept: Vec<usize> = (0..dims.len()).filter(|d| !axes.contains(d)).collect();
        let rows: usize = kept.iter().map(|&d| dims[d]).product();
        let count: usize = axes.iter().map(|&d| dims[d]).product();
        let body = self.combining_body(op, &types, depth)?;
        // Each operand as [rows, 1 + count]: its initial value, then the reduced elements.
        let perm: Vec<usize> = kept.iter().chain(&axes).copied().collect();
        let mut columns = Vec::with_capacity(k);
        for (&x, &init) in operands.iter().zip(inits) {
            let moved = self.push(Op::Transpose { perm: perm.clone() }, &[x], line)?;
            let flat = self.push(
                Op::Reshape {
                    shape: Shape::new(vec![rows, count]),
                },
                &[moved],
                line,
            )?;
            let first = self.push(
                Op::BroadcastInDim {
                    shape: Shape::new(vec![rows, 1]),
                    dims: Vec::new(),
                },
                &[init],
                line,
            )?;
            columns.push(self.push(Op::Concatenate { axis: 1 }, &[first, flat], line)?);
        }
        let mut n = count + 1;
        while n > 1 {
            let half = n / 2;
            let size = rows * half;
            let mut sides = Vec::with_capacity(2 * k);
            for offset in [0, 1] {
                for &c in &columns {
                    let side = self.push(
                        Op::Slice {
                            start: vec![0, offset],
                            limit: vec![rows, 2 * half],
                            strides: vec![1, 2],
                        },
                        &[c],
                        line,
                    )?;
                    sides.push(self.push(
                        Op::Reshape {
                            shape: Shape::new(vec![size]),
                        },
                        &[side],
                        line,
                    )?);
                }
            }
            let batched = vmap(&body, &vec![Some(0); 2 * k], &vec![Some(0); k], size)
                .map_err(|e| Error::at(line, format!("reduce body: {e}")))?;
            let combined = self
                .b
                .inline(&batched, &sides)
                .map_err(|e| Error::at(line, e.to_string()))?;
            let mut next = Vec::with_capacity(k);
            for (v, &c) in combined.into_iter().zip(&columns) {
                let pairs = self.push(
                    Op::Reshape {
                        shape: Shape::new(vec![rows, half]),
                    },
                    &[v],
                    line,
                )?;
                next.push(if n % 2 == 1 {
                    let last = self.push(
                        Op::Slice {
                            start: vec![0, n - 1],
                            limit: vec![rows, n],
                            strides: vec![1, 1],
                        },
                        &[c],
                        line,
                    )?;
                    self.push(Op::Concatenate { axis: 1 }, &[pairs, last], line)?
                } else {
                    pairs
                });
            }
            columns = next;
            n = n.div_ceil(2);
        }
        let shape = Shape::new(kept.iter().map(|&d| dims[d]).collect::<Vec<_>>());
        columns
            .into_iter()
            .map(|c| {
                self.push(
                    Op::Reshape {
                        shape: shape.clone(),
                    },
                    &[c],
                    line,
                )
            })
            .collect()
    }
}

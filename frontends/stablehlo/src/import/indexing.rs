//! `gather`, `dynamic_gather`, `scatter`, `dynamic_slice` and `dynamic_update_slice`. The
//! dimension numbers are read from their `#stablehlo.gather<...>`/`#stablehlo.scatter<...>`
//! attributes; a scatter's update region must return the update (replace) or combine the two
//! region arguments with one add/multiply/maximum/minimum (or/and on booleans).

use super::attrs::{ints, nested_list, usizes};
use super::Importer;
use crate::lex::Tok;
use crate::parse::Operation;
use crate::types::MAX_SLICE_SIZES;
use crate::Error;
use ferrax_ir::{DType, Gather, Op, Scatter, ScatterCombine, TensorType, ValueId};

/// `key = N` inside an attribute's tokens; MLIR leaves out a value equal to its default.
fn nested_int(tokens: &[Tok], key: &str) -> Option<usize> {
    let k = tokens.iter().position(|t| *t == Tok::Word(key.into()))?;
    match tokens.get(k + 2) {
        Some(Tok::Word(w)) => w.parse().ok(),
        _ => None,
    }
}

fn dims(tokens: &[Tok], key: &str) -> Vec<usize> {
    nested_list(tokens, key)
        .into_iter()
        .filter_map(|v| usize::try_from(v).ok())
        .collect()
}

/// A `true`/`false` attribute, false when absent.
fn flag(op: &Operation, key: &str) -> bool {
    op.attr(&[key])
        .is_some_and(|t| t.first() == Some(&Tok::Word("true".into())))
}

impl Importer<'_> {
    pub(super) fn gather(
        &mut self,
        op: &Operation,
        args: &[ValueId],
        ty: &TensorType,
    ) -> Result<ValueId, Error> {
        let line = op.line;
        let numbers = op
            .attr(&["dimension_numbers"])
            .ok_or_else(|| Error::at(line, "gather needs dimension_numbers"))?;
        let (operands, slice_sizes) = match (op.name.ends_with("dynamic_gather"), args) {
            (false, [x, i]) => {
                let sizes = op
                    .attr(&["slice_sizes"])
                    .ok_or_else(|| Error::at(line, "gather needs slice_sizes"))?;
                ([*x, *i], usizes(sizes, line)?)
            }
            // The slice sizes are an operand; with static shapes it is a constant.
            (true, [x, i, sizes]) => {
                let known = self.known(*sizes).ok_or_else(|| {
                    Error::unsupported(
                        line,
                        "dynamic_gather with slice sizes computed from tensor values".to_string(),
                    )
                })?;
                let n = known.len();
                if n > MAX_SLICE_SIZES {
                    return Err(Error::at(
                        line,
                        format!("{n} slice sizes (at most {MAX_SLICE_SIZES})"),
                    ));
                }
                let values = known
                    .iter()
                    .map(|&v| {
                        usize::try_from(v)
                            .map_err(|_| Error::at(line, format!("negative slice size {v}")))
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                ([*x, *i], values)
            }
            _ => return Err(Error::at(line, format!("{} expects its operands", op.name))),
        };
        let gather = Gather {
            offset_dims: dims(numbers, "offset_dims"),
            collapsed_slice_dims: dims(numbers, "collapsed_slice_dims"),
            operand_batching_dims: dims(numbers, "operand_batching_dims"),
            start_indices_batching_dims: dims(numbers, "start_indices_batching_dims"),
            start_index_map: dims(numbers, "start_index_map"),
            index_vector_dim: nested_int(numbers, "index_vector_dim").unwrap_or(0),
            slice_sizes,
            indices_are_sorted: flag(op, "indices_are_sorted"),
        };
        let v = self.push(Op::Gather(Box::new(gather)), &operands, line)?;
        self.expect_type(v, ty, line)
    }

    pub(super) fn scatter(
        &mut self,
        op: &Operation,
        args: &[ValueId],
        ty: &TensorType,
    ) -> Result<ValueId, Error> {
        let line = op.line;
        let [operand, indices, updates] = args else {
            return Err(Error::unsupported(
                line,
                "scatter of several operands".to_string(),
            ));
        };
        let numbers = op
            .attr(&["scatter_dimension_numbers"])
            .ok_or_else(|| Error::at(line, "scatter needs scatter_dimension_numbers"))?;
        let scatter = Scatter {
            combine: update_combine(op, ty.dtype)?,
            update_window_dims: dims(numbers, "update_window_dims"),
            inserted_window_dims: dims(numbers, "inserted_window_dims"),
            input_batching_dims: dims(numbers, "input_batching_dims"),
            scatter_indices_batching_dims: dims(numbers, "scatter_indices_batching_dims"),
            scatter_dims_to_operand_dims: dims(numbers, "scatter_dims_to_operand_dims"),
            index_vector_dim: nested_int(numbers, "index_vector_dim").unwrap_or(0),
            indices_are_sorted: flag(op, "indices_are_sorted"),
            unique_indices: flag(op, "unique_indices"),
        };
        let v = self.push(
            Op::Scatter(Box::new(scatter)),
            &[*operand, *indices, *updates],
            line,
        )?;
        self.expect_type(v, ty, line)
    }

    pub(super) fn dynamic_slice(
        &mut self,
        op: &Operation,
        args: &[ValueId],
        ty: &TensorType,
    ) -> Result<ValueId, Error> {
        let line = op.line;
        let sizes = match op.attr(&["sizes", "slice_sizes"]) {
            Some(t) => ints(t)
                .into_iter()
                .map(|v| {
                    usize::try_from(v).map_err(|_| Error::at(line, format!("negative size {v}")))
                })
                .collect::<Result<Vec<_>, _>>()?,
            None => ty.dims().to_vec(),
        };
        let v = self.push(Op::DynamicSlice { sizes }, args, line)?;
        self.expect_type(v, ty, line)
    }

    /// The declared result type must be the one the op has (any size where it is dynamic).
    fn expect_type(&self, v: ValueId, ty: &TensorType, line: usize) -> Result<ValueId, Error> {
        match self.b.value_type(v) {
            Some(t) if self.refining.conforms(ty, t) => Ok(v),
            Some(t) => Err(Error::at(
                line,
                format!("the result is {t}, but the program declares {ty}"),
            )),
            None => Err(Error::at(line, "an undefined result")),
        }
    }
}

/// The combiner a scatter's update region computes: `return %update` replaces; one
/// add/multiply/maximum/minimum of the two arguments, returned, combines.
fn update_combine(op: &Operation, dtype: DType) -> Result<ScatterCombine, Error> {
    let line = op.line;
    let unsupported = || {
        Error::unsupported(
            line,
            "scatter with an update region other than replace, add, multiply, maximum or minimum"
                .to_string(),
        )
    };
    let region = op
        .regions
        .first()
        .ok_or_else(|| Error::at(line, "scatter needs an update region"))?;
    let [(current, _), (update, _)] = region.args.as_slice() else {
        return Err(unsupported());
    };
    let is_return = |o: &Operation| matches!(o.name.as_str(), "stablehlo.return" | "return");
    match region.ops.as_slice() {
        [ret] if is_return(ret) && ret.operands.as_slice() == [update.clone()] => {
            Ok(ScatterCombine::Replace)
        }
        [combine, ret]
            if is_return(ret)
                && combine
                    .results
                    .first()
                    .is_some_and(|r| ret.operands == [r.clone()])
                && combine.operands.len() == 2
                && combine.operands.contains(current)
                && combine.operands.contains(update) =>
        {
            let short = combine
                .name
                .strip_prefix("stablehlo.")
                .unwrap_or(&combine.name);
            let bool_ = dtype == DType::Bool;
            Ok(match (short, bool_) {
                ("add", _) => ScatterCombine::Add,
                ("multiply", _) => ScatterCombine::Mul,
                ("maximum", _) => ScatterCombine::Max,
                ("minimum", _) => ScatterCombine::Min,
                ("or", true) => ScatterCombine::Max,
                ("and", true) => ScatterCombine::Min,
                _ => return Err(unsupported()),
            })
        }
        _ => Err(unsupported()),
    }
}

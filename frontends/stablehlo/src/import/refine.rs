//! Shape refinement. A shape-polymorphic program (`jax.export` with symbolic dimensions)
//! writes `?` for the sizes that vary, computes them at run time (`get_dimension_size` and
//! integer arithmetic), and passes them to `dynamic_*` ops as shape operands. As StableHLO's
//! `refine-shapes` pass does before XLA compiles such a program, the importer specializes it
//! to one call's shapes: the sizes become known numbers (`known`), each `dynamic_*` op becomes
//! its static form, and every other op's `?` sizes follow from its operands' types.

use super::attrs::usizes;
use super::known::to_literal;
use super::names::{binary, unary};
use super::Importer;
use crate::lex::Tok;
use crate::parse::Operation;
use crate::types::{check_size, Dynamic};
use crate::Error;
use ferrax_ir::{DType, Op, TensorType, ValueId};

/// Words holding `values`, as an attribute written `[a, b, ..]` reads.
fn words(values: &[i64]) -> Vec<Tok> {
    values.iter().map(|v| Tok::Word(v.to_string())).collect()
}

/// `op` renamed `name`, reading `operands` of its own, with `result` as its only result type.
fn static_form(op: &Operation, name: &str, operands: &[usize], result: TensorType) -> Operation {
    let mut new = op.clone();
    new.name = format!("stablehlo.{name}");
    new.operands = operands
        .iter()
        .filter_map(|&k| op.operands.get(k).cloned())
        .collect();
    new.operand_types = operands
        .iter()
        .filter_map(|&k| op.operand_types.get(k).cloned())
        .collect();
    new.operand_quant = operands.iter().map(|_| None).collect();
    new.result_types = vec![result];
    new.result_dynamic = vec![Dynamic::default()];
    new
}

impl Importer<'_> {
    /// The known value of the shape operand `v` of `op`: a data-dependent shape (one computed
    /// from a tensor's values rather than its dimensions) is unsupported.
    fn shape_operand(&self, op: &Operation, v: ValueId, what: &str) -> Result<Vec<i64>, Error> {
        self.known(v).map(<[i64]>::to_vec).ok_or_else(|| {
            Error::unsupported(
                op.line,
                format!(
                    "{} whose {what} is computed from tensor values (a data-dependent shape)",
                    op.name
                ),
            )
        })
    }

    /// The shape operand `v` of `op` as sizes.
    fn sizes_operand(&self, op: &Operation, v: ValueId, what: &str) -> Result<Vec<usize>, Error> {
        self.shape_operand(op, v, what)?
            .into_iter()
            .map(|d| {
                usize::try_from(d).map_err(|_| {
                    Error::at(op.line, format!("{} has the negative {what} {d}", op.name))
                })
            })
            .collect()
    }

    /// `op` in a form with static result types, and its operands: a `dynamic_*` op with a known
    /// shape operand becomes its static op; another op with dynamic result sizes has them from
    /// its operands' types. `None` when `op` is static already.
    pub(super) fn refine(
        &mut self,
        short: &str,
        op: &Operation,
        args: &[ValueId],
    ) -> Result<Option<(Operation, Vec<ValueId>)>, Error> {
        let line = op.line;
        let declared = op.result_types.first();
        let dtype = declared.map_or(DType::F32, |t| t.dtype);
        let result = |dims: Vec<usize>| TensorType::new(dtype, dims);
        let refined = match (short, args) {
            ("dynamic_broadcast_in_dim", &[x, shape]) => {
                let dims = self.sizes_operand(op, shape, "output shape")?;
                (
                    static_form(op, "broadcast_in_dim", &[0], result(dims)),
                    vec![x],
                )
            }
            ("dynamic_iota", &[shape]) => {
                let dims = self.sizes_operand(op, shape, "output shape")?;
                (static_form(op, "iota", &[], result(dims)), vec![])
            }
            ("dynamic_reshape", &[x, shape]) => {
                let dims = self.sizes_operand(op, shape, "output shape")?;
                (static_form(op, "reshape", &[0], result(dims)), vec![x])
            }
            ("real_dynamic_slice", &[x, start, limit, strides]) => {
                let start = self.sizes_operand(op, start, "start")?;
                let limit = self.sizes_operand(op, limit, "limit")?;
                let strides = self.sizes_operand(op, strides, "strides")?;
                let dims = start
                    .iter()
                    .zip(&limit)
                    .zip(&strides)
                    .map(|((&s, &l), &st)| match st {
                        0 => None,
                        _ => Some(l.saturating_sub(s).div_ceil(st)),
                    })
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| Error::at(line, "real_dynamic_slice with a zero stride"))?;
                let mut new = static_form(op, "slice", &[0], result(dims));
                let as_words =
                    |v: &[usize]| words(&v.iter().map(|&d| d as i64).collect::<Vec<_>>());
                new.words.clear();
                new.attrs = vec![
                    ("start_indices".into(), as_words(&start)),
                    ("limit_indices".into(), as_words(&limit)),
                    ("strides".into(), as_words(&strides)),
                ];
                (new, vec![x])
            }
            ("dynamic_pad", &[x, value, low, high, interior]) => {
                let low = self.shape_operand(op, low, "low padding")?;
                let high = self.shape_operand(op, high, "high padding")?;
                let interior = self.sizes_operand(op, interior, "interior padding")?;
                let xt = self.type_of(x, line)?;
                let dims = xt
                    .dims()
                    .iter()
                    .zip(low.iter().zip(&high))
                    .zip(&interior)
                    .map(|((&d, (&l, &h)), &i)| {
                        let stretched = (d as i128 - 1).max(0) * i as i128;
                        usize::try_from(d as i128 + l as i128 + h as i128 + stretched).ok()
                    })
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| {
                        Error::at(line, format!("dynamic_pad of {xt} has a negative size"))
                    })?;
                let mut new = static_form(op, "pad", &[0, 1], result(dims));
                let interior: Vec<i64> = interior.iter().map(|&i| i as i64).collect();
                new.attrs = vec![
                    ("edge_padding_low".into(), words(&low)),
                    ("edge_padding_high".into(), words(&high)),
                    ("interior_padding".into(), words(&interior)),
                ];
                (new, vec![x, value])
            }
            ("dynamic_conv", &[lhs, rhs, padding]) => {
                let padding = self.shape_operand(op, padding, "padding")?;
                let mut new = static_form(op, "convolution", &[0, 1], result(Vec::new()));
                new.result_types = op.result_types.clone();
                new.result_dynamic = op.result_dynamic.clone();
                new.attrs.retain(|(k, _)| k != "padding");
                new.attrs.push(("padding".into(), words(&padding)));
                (new, vec![lhs, rhs])
            }
            _ if op.dynamic_results().is_static() => return Ok(None),
            _ => (op.clone(), args.to_vec()),
        };
        let (mut new, args) = refined;
        let new_short = new
            .name
            .strip_prefix("stablehlo.")
            .unwrap_or(&new.name)
            .to_string();
        if !new.dynamic_results().is_static() {
            if let Some(dims) = self.result_dims(&new_short, &new, &args)? {
                for (ty, d) in new.result_types.iter_mut().zip(dims) {
                    *ty = ty.with_shape(d);
                }
                for d in &mut new.result_dynamic {
                    *d = Dynamic::default();
                }
            }
        }
        for ((ty, written), declared) in new
            .result_types
            .iter()
            .zip(&op.result_dynamic)
            .zip(&op.result_types)
        {
            if !written.conforms(declared, ty) {
                return Err(Error::at(
                    line,
                    format!(
                        "{} gives {ty} where the program declares {}",
                        op.name,
                        written.show(declared)
                    ),
                ));
            }
            check_size(ty)
                .map_err(|e| Error::at(line, format!("the {} result {ty} {e}", op.name)))?;
        }
        Ok(Some((new, args)))
    }

    /// The dimensions of each result of `op`, which has dynamic ones, from its operands' types:
    /// `None` for ops whose result the IR's own shape rules give (their mapping reads only the
    /// declared element type), checked against the declaration once imported.
    fn result_dims(
        &self,
        short: &str,
        op: &Operation,
        args: &[ValueId],
    ) -> Result<Option<Vec<Vec<usize>>>, Error> {
        let line = op.line;
        let types = args
            .iter()
            .map(|&a| self.type_of(a, line))
            .collect::<Result<Vec<_>, _>>()?;
        let dims_of = |k: usize| -> Result<Vec<usize>, Error> {
            types
                .get(k)
                .map(|t| t.dims().to_vec())
                .ok_or_else(|| Error::at(line, format!("{} lacks operand {k}", op.name)))
        };
        let attr = |keys: &[&str]| -> Result<Vec<usize>, Error> {
            usizes(
                op.attr(keys)
                    .ok_or_else(|| Error::at(line, format!("{} needs {}", op.name, keys[0])))?,
                line,
            )
        };
        let n = op.result_types.len();
        let arg_dtype = types.first().map_or(DType::F32, |t| t.dtype);
        let elementwise = unary(short).is_some()
            || binary(short, arg_dtype).is_some()
            || matches!(
                short,
                "compare"
                    | "select"
                    | "clamp"
                    | "convert"
                    | "complex"
                    | "is_finite"
                    | "popcnt"
                    | "reduce_precision"
                    | "chlo.next_after"
            )
            || (short == "bitcast_convert"
                && op.result_types.first().map(|t| t.dtype.size_bytes())
                    == Some(arg_dtype.size_bytes()));
        let one = |d: Vec<usize>| Ok(Some(vec![d]));
        if elementwise {
            let widest = types
                .iter()
                .max_by_key(|t| t.rank())
                .map(|t| t.dims().to_vec());
            return one(widest.unwrap_or_default());
        }
        match short {
            "broadcast_in_dim" => {
                let dims = attr(&["dims", "broadcast_dimensions"])?;
                let x = dims_of(0)?;
                let mut out = op.result_types[0].dims().to_vec();
                for (&d, &size) in dims.iter().zip(&x) {
                    if let Some(o) = out.get_mut(d) {
                        if op.result_dynamic[0].contains(d) {
                            *o = size;
                        }
                    }
                }
                one(out)
            }
            "transpose" => {
                let perm = attr(&["dims", "permutation"])?;
                let x = dims_of(0)?;
                let out = perm
                    .iter()
                    .map(|&p| x.get(p).copied())
                    .collect::<Option<Vec<_>>>();
                one(out.ok_or_else(|| Error::at(line, "transpose's permutation is out of range"))?)
            }
            "concatenate" => {
                let axis = attr(&["dim", "dimension"])?.first().copied().unwrap_or(0);
                let mut out = dims_of(0)?;
                let total = types
                    .iter()
                    .try_fold(0usize, |acc, t| acc.checked_add(*t.dims().get(axis)?));
                match (out.get_mut(axis), total) {
                    (Some(o), Some(t)) => *o = t,
                    _ => {
                        return Err(Error::at(
                            line,
                            "concatenate's axis or size is out of range",
                        ))
                    }
                }
                one(out)
            }
            "reverse" | "sort" | "dynamic_update_slice" | "cholesky" | "scatter" => {
                (0..n).map(dims_of).collect::<Result<Vec<_>, _>>().map(Some)
            }
            "select_and_scatter" => one(dims_of(0)?),
            "triangular_solve" => one(dims_of(1)?),
            "reduce" => {
                let axes = attr(&["dimensions"])?;
                let x = dims_of(0)?;
                let out: Vec<usize> = x
                    .iter()
                    .enumerate()
                    .filter(|(k, _)| !axes.contains(k))
                    .map(|(_, &d)| d)
                    .collect();
                Ok(Some(vec![out; n]))
            }
            _ => Ok(None),
        }
    }

    /// `get_dimension_size`: the size, known, as an `i32` constant.
    pub(super) fn dimension_size(
        &mut self,
        op: &Operation,
        args: &[ValueId],
    ) -> Result<ValueId, Error> {
        let line = op.line;
        let &[x] = args else {
            return Err(Error::at(line, "get_dimension_size takes one operand"));
        };
        let dim = usizes(
            op.attr(&["dim", "dimension"])
                .ok_or_else(|| Error::at(line, "get_dimension_size needs a dimension"))?,
            line,
        )?
        .first()
        .copied()
        .unwrap_or(0);
        let xt = self.type_of(x, line)?;
        let size = xt
            .dims()
            .get(dim)
            .and_then(|&d| i64::try_from(d).ok())
            .ok_or_else(|| Error::at(line, format!("{xt} has no dimension {dim}")))?;
        let lit = to_literal(&TensorType::scalar(DType::I32), &[size])
            .ok_or_else(|| Error::at(line, format!("dimension size {size} exceeds i32")))?;
        let v = self.push(Op::Constant(lit.clone()), &[], line)?;
        self.constants.insert(v, lit);
        Ok(v)
    }

    /// `custom_call @shape_assertion(pred, values...)`: `jax.export`'s check that the shapes of
    /// a call satisfy the program's constraints, made here while importing, with its message
    /// (`{0}`, `{1}`, ... are the values after the predicate).
    pub(super) fn shape_assertion(
        &mut self,
        op: &Operation,
        args: &[ValueId],
    ) -> Result<Vec<ValueId>, Error> {
        let line = op.line;
        let (&pred, values) = args
            .split_first()
            .ok_or_else(|| Error::at(line, "shape_assertion needs a predicate"))?;
        let holds = match self.known(pred) {
            Some([p]) => *p != 0,
            _ => {
                return Err(Error::unsupported(
                    line,
                    "shape_assertion of a value computed from tensor values",
                ))
            }
        };
        if holds {
            return Ok(Vec::new());
        }
        let mut message = match op.attr(&["error_message"]) {
            Some([Tok::Str(s)]) => s.clone(),
            _ => "shape assertion failed".to_string(),
        };
        for (k, &v) in values.iter().enumerate() {
            if let Some([value]) = self.known(v) {
                message = message.replace(&format!("{{{k}}}"), &value.to_string());
            }
        }
        Err(Error::at(line, message))
    }
}

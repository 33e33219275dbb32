//! One StableHLO op to the ferrax ops it is: most map one to one, reading their attributes
//! in either syntax; `dot_general` converts mixed-precision operands first.

use super::attrs::{ints, nested_list, pair, usizes};
use super::names::{binary, direction, unary};
use super::Importer;
use crate::dense::literal;
use crate::lex::Tok;
use crate::parse::Operation;
use crate::Error;
use ferrax_ir::{DotDims, Op, TensorType, ValueId};

impl Importer<'_> {
    fn result_type(&self, op: &Operation) -> Result<TensorType, Error> {
        op.result_types
            .first()
            .cloned()
            .ok_or_else(|| Error::at(op.line, format!("{} needs a result type", op.name)))
    }

    /// One StableHLO op with one result.
    pub(super) fn simple(
        &mut self,
        short: &str,
        op: &Operation,
        args: &[ValueId],
    ) -> Result<ValueId, Error> {
        let line = op.line;
        let ty = self.result_type(op)?;
        let arg_dtype = args
            .first()
            .and_then(|&a| self.b.value_type(a))
            .map_or(ty.dtype, |t| t.dtype);
        if let Some(u) = unary(short) {
            return self.push(Op::Unary(u), args, line);
        }
        if let Some(b) = binary(short, arg_dtype) {
            return self.push(Op::Binary(b), args, line);
        }
        let attr = |keys: &[&str]| -> Result<&[Tok], Error> {
            op.attr(keys).ok_or_else(|| {
                Error::at(line, format!("{} needs the attribute {}", op.name, keys[0]))
            })
        };
        let new = match short {
            "constant" => {
                let lit = literal(&op.words, &ty, line)?;
                let v = self.push(Op::Constant(lit.clone()), &[], line)?;
                self.constants.insert(v, lit);
                return Ok(v);
            }
            "compare" => {
                let dir = direction(&op.words)
                    .or_else(|| op.attr(&["comparison_direction"]).and_then(direction))
                    .ok_or_else(|| Error::at(line, "compare needs a direction"))?;
                Op::Compare(dir)
            }
            "select" => Op::Select,
            "clamp" => Op::Clamp,
            "convert" => Op::Convert { to: ty.dtype },
            "broadcast_in_dim" => Op::BroadcastInDim {
                shape: ty.shape.clone(),
                dims: usizes(attr(&["dims", "broadcast_dimensions"])?, line)?,
            },
            "reshape" => Op::Reshape {
                shape: ty.shape.clone(),
            },
            "transpose" => Op::Transpose {
                perm: usizes(attr(&["dims", "permutation"])?, line)?,
            },
            "concatenate" => Op::Concatenate {
                axis: usizes(attr(&["dim", "dimension"])?, line)?
                    .first()
                    .copied()
                    .unwrap_or(0),
            },
            "iota" => Op::Iota {
                dtype: ty.dtype,
                shape: ty.shape.clone(),
                dim: usizes(attr(&["dim", "iota_dimension"])?, line)?
                    .first()
                    .copied()
                    .unwrap_or(0),
            },
            "pad" => Op::Pad {
                low: ints(attr(&["low", "edge_padding_low"])?),
                high: ints(attr(&["high", "edge_padding_high"])?),
                interior: usizes(attr(&["interior", "interior_padding"])?, line)?,
            },
            "slice" => Self::slice(op)?,
            "dot_general" => return self.dot_general(op, args, &ty),
            "reduce" => return self.reduce(op, args, &ty),
            "gather" | "dynamic_gather" => return self.gather(op, args, &ty),
            "scatter" => return self.scatter(op, args, &ty),
            "dynamic_slice" => return self.dynamic_slice(op, args, &ty),
            "dynamic_update_slice" => Op::DynamicUpdateSlice,
            other => return Err(Error::unsupported(line, format!("op stablehlo.{other}"))),
        };
        self.push(new, args, line)
    }

    fn slice(op: &Operation) -> Result<Op, Error> {
        let line = op.line;
        if let Some(start) = op.attr(&["start_indices"]) {
            let limit = op
                .attr(&["limit_indices"])
                .ok_or_else(|| Error::at(line, "slice needs limit_indices"))?;
            let rank = usizes(start, line)?.len();
            let strides = match op.attr(&["strides"]) {
                Some(s) => usizes(s, line)?,
                None => vec![1; rank],
            };
            return Ok(Op::Slice {
                start: usizes(start, line)?,
                limit: usizes(limit, line)?,
                strides,
            });
        }
        // Pretty form: `[a:b, c:d:s]`.
        let (mut start, mut limit, mut strides) = (Vec::new(), Vec::new(), Vec::new());
        let mut current: Vec<usize> = Vec::new();
        let mut flush = |cur: &mut Vec<usize>| {
            if !cur.is_empty() {
                start.push(cur[0]);
                limit.push(cur.get(1).copied().unwrap_or(cur[0] + 1));
                strides.push(cur.get(2).copied().unwrap_or(1));
                cur.clear();
            }
        };
        for t in &op.words {
            match t {
                Tok::Word(w) => current.push(
                    w.parse()
                        .map_err(|_| Error::at(line, format!("bad slice bound {w}")))?,
                ),
                Tok::Punct(',') | Tok::Punct(']') => flush(&mut current),
                _ => {}
            }
        }
        flush(&mut current);
        Ok(Op::Slice {
            start,
            limit,
            strides,
        })
    }

    fn dot_general(
        &mut self,
        op: &Operation,
        args: &[ValueId],
        ty: &TensorType,
    ) -> Result<ValueId, Error> {
        let line = op.line;
        let dims = if let Some(numbers) = op.attr(&["dot_dimension_numbers"]) {
            let get = |k| {
                nested_list(numbers, k)
                    .into_iter()
                    .map(|v| v as usize)
                    .collect()
            };
            DotDims {
                lhs_batch: get("lhs_batching_dimensions"),
                rhs_batch: get("rhs_batching_dimensions"),
                lhs_contract: get("lhs_contracting_dimensions"),
                rhs_contract: get("rhs_contracting_dimensions"),
            }
        } else {
            let (lhs_batch, rhs_batch) = match op.attr(&["batching_dims"]) {
                Some(t) => pair(t, line)?,
                None => (Vec::new(), Vec::new()),
            };
            let (lhs_contract, rhs_contract) = match op.attr(&["contracting_dims"]) {
                Some(t) => pair(t, line)?,
                None => (Vec::new(), Vec::new()),
            };
            DotDims {
                lhs_batch,
                rhs_batch,
                lhs_contract,
                rhs_contract,
            }
        };
        // Mixed precision: compute in the result type.
        let mut operands = Vec::with_capacity(2);
        for &a in args {
            let dtype = self.b.value_type(a).map(|t| t.dtype);
            operands.push(if dtype == Some(ty.dtype) {
                a
            } else {
                self.push(Op::Convert { to: ty.dtype }, &[a], line)?
            });
        }
        self.push(Op::DotGeneral(dims), &operands, line)
    }
}

//! One StableHLO op to the ferrax ops it is: most map one to one, reading their attributes
//! in either syntax; `dot_general` converts mixed-precision operands first.

use super::attrs::{ints, nested_list, pair, usizes};
use super::conv::Sink;
use super::names::{binary, direction, unary};
use super::Importer;
use crate::dense::literal;
use crate::lex::Tok;
use crate::parse::Operation;
use crate::Error;
use ferrax_ir::{
    lower_bitcast, DotDims, FftKind, LowerError, Op, Scalar, TensorType, TriangularSolve, ValueId,
};

impl Importer<'_> {
    /// `stablehlo.bitcast_convert` between widths to the declared `result`, spelled by
    /// `lower_bitcast`.
    fn bitcast_between_widths(
        &mut self,
        args: &[ValueId],
        result: &TensorType,
        line: usize,
    ) -> Result<ValueId, Error> {
        let &[x] = args else {
            return Err(Error::at(line, "bitcast_convert takes one operand"));
        };
        let ty = self
            .b
            .value_type(x)
            .cloned()
            .ok_or_else(|| Error::at(line, "bitcast_convert of an unknown value"))?;
        let mut sink = Sink {
            importer: self,
            line,
        };
        let v = lower_bitcast(&mut sink, (&x, &ty), result.dtype).map_err(|e| match e {
            LowerError::Invalid(m) => Error::at(line, m),
            LowerError::Sink(e) => e,
        })?;
        match self.b.value_type(v) {
            Some(t) if self.refining.conforms(result, t) => Ok(v),
            got => Err(Error::at(
                line,
                format!(
                    "bitcast_convert from {ty} gives {}, not the declared {result}",
                    got.map_or("nothing".into(), |t| t.to_string())
                ),
            )),
        }
    }

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
        // The real part of a real number is itself, its imaginary part zero.
        match (short, args) {
            ("real", &[x]) if !arg_dtype.is_complex() => return Ok(x),
            ("imag", &[_]) if !arg_dtype.is_complex() => {
                return self.full(Scalar::zero(arg_dtype), &ty.shape, line)
            }
            _ => {}
        }
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
            // A cast between widths changes the shape, which the IR's `bitcast_convert` does
            // not: `lower_bitcast` spells it in other ops.
            "bitcast_convert" => {
                if arg_dtype.size_bytes() != ty.dtype.size_bytes() {
                    return self.bitcast_between_widths(args, &ty, line);
                }
                Op::BitcastConvert { to: ty.dtype }
            }
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
            "reverse" => Op::Reverse {
                axes: usizes(attr(&["dims", "dimensions"])?, line)?,
            },
            "concatenate" => {
                let axis = usizes(attr(&["dim", "dimension"])?, line)?
                    .first()
                    .copied()
                    .unwrap_or(0);
                let total = args.iter().try_fold(0usize, |acc, &a| {
                    let d = self.b.value_type(a).and_then(|t| t.dims().get(axis));
                    acc.checked_add(d.copied().unwrap_or(0))
                });
                if total.is_none() {
                    return Err(Error::at(line, "the concatenation's size overflows"));
                }
                Op::Concatenate { axis }
            }
            "iota" => Op::Iota {
                dtype: ty.dtype,
                shape: ty.shape.clone(),
                dim: usizes(attr(&["dim", "iota_dimension"])?, line)?
                    .first()
                    .copied()
                    .unwrap_or(0),
            },
            "pad" => {
                let (low, high) = (
                    ints(attr(&["low", "edge_padding_low"])?),
                    ints(attr(&["high", "edge_padding_high"])?),
                );
                let interior = usizes(attr(&["interior", "interior_padding"])?, line)?;
                let x = args.first().and_then(|&a| self.b.value_type(a));
                if let Some(x) = x.filter(|x| !pad_fits(x.dims(), &low, &high, &interior)) {
                    return Err(Error::at(line, format!("padding {x} overflows its size")));
                }
                Op::Pad {
                    low,
                    high,
                    interior,
                }
            }
            "slice" => Self::slice(op)?,
            "fft" => {
                let kind = attr(&["type", "fft_type"])?
                    .iter()
                    .find_map(|t| match t {
                        Tok::Word(w) => FftKind::ALL
                            .into_iter()
                            .find(|k| k.name().eq_ignore_ascii_case(w)),
                        _ => None,
                    })
                    .ok_or_else(|| Error::at(line, "fft needs a type (FFT, IFFT, RFFT, IRFFT)"))?;
                Op::Fft {
                    kind,
                    lengths: usizes(attr(&["length", "fft_length"])?, line)?,
                }
            }
            // The upper factor `u` (`a = uᴴ·u`, from `a`'s upper triangle) is the lower factor
            // of `aᵀ`, transposed.
            "cholesky" => {
                let lower = match op.attr(&["lower"]) {
                    None => false,
                    Some(tokens) => flag(tokens, "lower", line)?,
                };
                if lower {
                    Op::Cholesky
                } else {
                    let rank = ty.rank();
                    let mut perm: Vec<usize> = (0..rank).collect();
                    if rank >= 2 {
                        perm.swap(rank - 2, rank - 1);
                    }
                    let swap = Op::Transpose { perm };
                    let at = self.push(swap.clone(), args, line)?;
                    let factor = self.push(Op::Cholesky, &[at], line)?;
                    return self.push(swap, &[factor], line);
                }
            }
            "triangular_solve" => {
                let flag = |key: &str| flag(attr(&[key])?, key, line);
                let (transpose_a, conjugate_a) = attr(&["transpose_a"])?
                    .iter()
                    .find_map(|t| match t {
                        Tok::Word(w) if w == "NO_TRANSPOSE" => Some((false, false)),
                        Tok::Word(w) if w == "TRANSPOSE" => Some((true, false)),
                        Tok::Word(w) if w == "ADJOINT" => Some((true, true)),
                        _ => None,
                    })
                    .ok_or_else(|| {
                        Error::at(
                            line,
                            "transpose_a must be NO_TRANSPOSE, TRANSPOSE or ADJOINT",
                        )
                    })?;
                Op::TriangularSolve(TriangularSolve {
                    left_side: flag("left_side")?,
                    lower: flag("lower")?,
                    transpose_a,
                    conjugate_a,
                    unit_diagonal: flag("unit_diagonal")?,
                })
            }
            "dot_general" => return self.dot_general(op, args, &ty),
            "convolution" => return self.convolution(op, args, &ty),
            "reduce" => return self.reduce(op, args, &ty),
            "is_finite" | "popcnt" | "reduce_precision" | "chlo.next_after" => {
                return self.composite(short, op, args)
            }
            "select_and_scatter" => return self.select_and_scatter(op, args, &ty),
            "gather" | "dynamic_gather" => return self.gather(op, args, &ty),
            "scatter" => return self.scatter(op, args, &ty),
            "dynamic_slice" => return self.dynamic_slice(op, args, &ty),
            "dynamic_update_slice" => Op::DynamicUpdateSlice,
            _ if short == op.name => return Err(Error::unsupported(line, format!("op {short}"))),
            other => return Err(Error::unsupported(line, format!("op stablehlo.{other}"))),
        };
        self.push(new, args, line)
    }

    pub(super) fn slice(op: &Operation) -> Result<Op, Error> {
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
                let s: usize = cur[0];
                let end = match cur.get(1) {
                    Some(&l) => Some(l),
                    None => s.checked_add(1),
                };
                start.push(s);
                limit.push(end);
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
        let limit = limit
            .into_iter()
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| Error::at(line, "slice bound too large"))?;
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
                    .map(|v| {
                        usize::try_from(v)
                            .map_err(|_| Error::at(line, format!("negative dimension {v} in {k}")))
                    })
                    .collect::<Result<Vec<_>, _>>()
            };
            DotDims {
                lhs_batch: get("lhs_batching_dimensions")?,
                rhs_batch: get("rhs_batching_dimensions")?,
                lhs_contract: get("lhs_contracting_dimensions")?,
                rhs_contract: get("rhs_contracting_dimensions")?,
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

/// Whether padding `dims` by `low`, `high` and `interior` gives sizes that fit an `i64` at
/// every step of computing them (as the IR computes them).
fn pad_fits(dims: &[usize], low: &[i64], high: &[i64], interior: &[usize]) -> bool {
    let fits = |v: i128| i64::try_from(v).is_ok();
    dims.iter()
        .zip(low.iter().zip(high))
        .zip(interior)
        .all(|((&d, (&l, &h)), &i)| {
            let (d, l, h, i) = (d as i128, l as i128, h as i128, i as i128);
            let stretch = (d - 1).max(0) * i;
            fits(d) && fits(l + h) && fits(l + h + d) && fits(stretch) && fits(l + h + d + stretch)
        })
}

/// The boolean attribute `key`, written `true` or `false`.
fn flag(tokens: &[Tok], key: &str, line: usize) -> Result<bool, Error> {
    match tokens {
        [Tok::Word(w)] if w == "true" => Ok(true),
        [Tok::Word(w)] if w == "false" => Ok(false),
        _ => Err(Error::at(line, format!("{key} must be true or false"))),
    }
}

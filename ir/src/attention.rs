//! Dot-product attention as one op family (`jax.nn.dot_product_attention`'s layout and
//! causal mask): a fused kernel computes it without the `T x S` score matrix in memory, and
//! its reverse mode recomputes the scores from the row log-sum-exps instead of keeping the
//! softmax (flash attention). The meaning of every part is its [`Attention::decompose`]ition
//! into plain ops, which the interpreter runs, backends without a kernel compile, and forward
//! mode differentiates.
//!
//! Queries are `[B, T, H, D]`, keys and values `[B, S, H, D]` (batch, positions, heads, head
//! features), all of one float dtype; scores are `q . k` over `D` with no scaling (scale the
//! queries first); `causal` keeps query `i`'s keys `j <= i`. The row log-sum-exps are
//! `[B, H, T]`. The gradient parts take `(q, k, v, out, lse, d_out, d_lse)`: the forward
//! values, and the cotangents of the output and of the log-sum-exps. `out` and `lse` must be
//! what the forward parts compute from the same operands: a kernel recomputes the softmax
//! from `lse`, the plain-op spelling from the scores (so that, spelled out next to the
//! forward pass, it shares the forward pass's softmax).
//!
//! Under a precision `h`, queries, keys and values may be of dtype `h` itself (half
//! operands): the products read nothing else of them, so a kernel reads half the bytes. The
//! softmax, the output, `out`, `d_out` and the log-sum-exps are then f32, and the three
//! gradients of dtype `h`: each is a product rounded to `h`, so its values do not change.

use crate::{
    BinaryOp, CompareOp, DType, DotDims, Func, FuncBuilder, Literal, Op, ReduceOp, Scalar,
    TensorType, TypeError, UnaryOp, ValueId,
};
use serde::{Deserialize, Serialize};

/// What an attention instruction computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum AttentionPart {
    /// `softmax(q k^T) v`, `[B, T, H, D]`.
    Output,
    /// The log-sum-exp of each row of scores, `[B, H, T]`.
    LogSumExp,
    /// The queries' cotangent.
    QueryGrad,
    /// The keys' cotangent.
    KeyGrad,
    /// The values' cotangent.
    ValueGrad,
}

impl AttentionPart {
    pub const ALL: [AttentionPart; 5] = [
        AttentionPart::Output,
        AttentionPart::LogSumExp,
        AttentionPart::QueryGrad,
        AttentionPart::KeyGrad,
        AttentionPart::ValueGrad,
    ];

    /// The op's name in the text format.
    pub fn name(self) -> &'static str {
        match self {
            AttentionPart::Output => "attention",
            AttentionPart::LogSumExp => "attention_lse",
            AttentionPart::QueryGrad => "attention_dq",
            AttentionPart::KeyGrad => "attention_dk",
            AttentionPart::ValueGrad => "attention_dv",
        }
    }

    /// Operands: `(q, k, v)` for the forward parts, with `(out, lse, d_out, d_lse)` after them
    /// for the gradients.
    pub fn arity(self) -> usize {
        match self {
            AttentionPart::Output | AttentionPart::LogSumExp => 3,
            AttentionPart::QueryGrad | AttentionPart::KeyGrad | AttentionPart::ValueGrad => 7,
        }
    }
}

/// One part of dot-product attention, causal or not, its products at a precision.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Attention {
    pub part: AttentionPart,
    pub causal: bool,
    /// A half type (f16 or bf16) that every product's operands and result are rounded to, each
    /// summed in f32 (`DotPrecision::new(h, h)`): mixed precision, the softmax in the
    /// operands' dtype (f32 for half operands). `None`: products in the operands' dtype.
    pub precision: Option<DType>,
}

/// The sizes attention's operands agree on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttentionDims {
    pub batch: usize,
    pub queries: usize,
    pub keys: usize,
    pub heads: usize,
    pub features: usize,
    /// The softmax's dtype: that of the output, `out`, `d_out` and the log-sum-exps.
    pub dtype: DType,
    /// The dtype of queries, keys and values (and of their gradients): `dtype`, or the
    /// precision's half type.
    pub operands: DType,
}

impl Attention {
    pub fn new(part: AttentionPart, causal: bool) -> Attention {
        Attention {
            part,
            causal,
            precision: None,
        }
    }

    /// This part with its products at `precision`.
    pub fn with_precision(self, precision: Option<DType>) -> Attention {
        Attention { precision, ..self }
    }

    pub fn name(self) -> &'static str {
        self.part.name()
    }

    /// The sizes of operands of types `args`, or why they do not fit together.
    pub fn dims(self, args: &[&TensorType]) -> Result<AttentionDims, TypeError> {
        let op = self.name();
        let invalid = |message: String| TypeError::Invalid { op, message };
        if args.len() != self.part.arity() {
            return Err(TypeError::Arity {
                op,
                expected: self.part.arity().to_string(),
                got: args.len(),
            });
        }
        let (q, k, v) = (args[0], args[1], args[2]);
        if !q.dtype.is_float() {
            return Err(TypeError::DType {
                op,
                dtype: q.dtype,
                expected: "a float",
            });
        }
        let &[batch, queries, heads, features] = q.dims() else {
            return Err(invalid(format!(
                "queries {q} must be [batch, positions, heads, features]"
            )));
        };
        let &[kb, keys, kh, kd] = k.dims() else {
            return Err(invalid(format!(
                "keys {k} must be [batch, positions, heads, features]"
            )));
        };
        if k.dtype != q.dtype || (kb, kh, kd) != (batch, heads, features) {
            return Err(invalid(format!(
                "keys {k} do not fit queries {q}: batch, heads, features and dtype must agree"
            )));
        }
        // Half operands compute the softmax in f32.
        let mut dtype = q.dtype;
        if let Some(h) = self.precision {
            let wider = matches!(q.dtype, DType::F32 | DType::F64);
            if !matches!(h, DType::F16 | DType::BF16) || !(wider || q.dtype == h) {
                return Err(invalid(format!(
                    "products at {h} for {} operands: the precision must be a half type \
                     narrower than the operands, or theirs",
                    q.dtype
                )));
            }
            if q.dtype == h {
                dtype = DType::F32;
            }
        }
        if v != k {
            return Err(TypeError::Mismatch {
                op,
                lhs: k.clone(),
                rhs: v.clone(),
            });
        }
        let dims = AttentionDims {
            batch,
            queries,
            keys,
            heads,
            features,
            dtype,
            operands: q.dtype,
        };
        if self.part.arity() == 7 {
            let rows = dims.rows();
            let out = dims.output();
            for (i, name, want) in [
                (3, "out", &out),
                (4, "lse", &rows),
                (5, "d_out", &out),
                (6, "d_lse", &rows),
            ] {
                if args[i] != want {
                    return Err(invalid(format!("{name} is {}, expected {want}", args[i])));
                }
            }
        }
        Ok(dims)
    }

    /// The result type for operands of types `args`.
    pub fn result_type(self, args: &[&TensorType]) -> Result<TensorType, TypeError> {
        let dims = self.dims(args)?;
        Ok(match self.part {
            AttentionPart::Output => dims.output(),
            AttentionPart::QueryGrad => args[0].clone(),
            AttentionPart::LogSumExp => dims.rows(),
            AttentionPart::KeyGrad => args[1].clone(),
            AttentionPart::ValueGrad => args[2].clone(),
        })
    }

    /// This part spelled in plain ops, as a function of operands of types `args`: its meaning.
    pub fn decompose(self, args: &[&TensorType]) -> Result<Func, TypeError> {
        let d = self.dims(args)?;
        let mut b = FuncBuilder::new(self.name());
        let params: Vec<ValueId> = args.iter().map(|t| b.param((*t).clone())).collect();
        let (q, k, v) = (params[0], params[1], params[2]);
        let scores_shape = vec![d.batch, d.heads, d.queries, d.keys];
        let scores_ty = TensorType::new(d.dtype, scores_shape.clone());
        let splat = |b: &mut FuncBuilder, value: f64, ty: &TensorType| {
            let value = Scalar::from_f64(ty.dtype, value);
            b.push(Op::Constant(Literal::splat(value, ty.shape.clone())), &[])
        };
        // Rows `[B, H, T]` spread over the scores' last dimension.
        let spread = |b: &mut FuncBuilder, rows: ValueId| {
            b.push(
                Op::BroadcastInDim {
                    shape: scores_ty.shape.clone(),
                    dims: vec![0, 1, 2],
                },
                &[rows],
            )
        };
        // `[B, H, X, D]` back to `[B, X, H, D]`.
        let heads_second = |b: &mut FuncBuilder, x: ValueId| {
            b.push(
                Op::Transpose {
                    perm: vec![0, 2, 1, 3],
                },
                &[x],
            )
        };
        let dot = |lhs_batch: [usize; 2], lhs_contract: usize, rhs_contract: usize| {
            Op::DotGeneral(DotDims {
                lhs_batch: lhs_batch.to_vec(),
                rhs_batch: vec![0, 2],
                lhs_contract: vec![lhs_contract],
                rhs_contract: vec![rhs_contract],
            })
        };
        // A product, its operands and result rounded to the precision where there is one
        // (half operands are already), its result widened to the softmax's dtype where
        // `widen` says.
        let precision = self.precision;
        let half = d.operands != d.dtype;
        let product = |b: &mut FuncBuilder, dot: Op, operands: [(ValueId, bool); 2], widen| {
            let Some(h) = precision else {
                return b.push(dot, &[operands[0].0, operands[1].0]);
            };
            let mut rounded = [operands[0].0; 2];
            for (r, (x, is_half)) in rounded.iter_mut().zip(operands) {
                *r = match is_half {
                    true => x,
                    false => b.push(Op::Convert { to: h }, &[x])?,
                };
            }
            let result = b.push(dot, &rounded)?;
            match widen {
                true => b.push(Op::Convert { to: d.dtype }, &[result]),
                false => Ok(result),
            }
        };
        let (q, k, v) = ((q, half), (k, half), (v, half));
        let sum_rows = Op::Reduce {
            op: ReduceOp::Sum,
            axes: vec![3],
        };

        let mut scores = product(&mut b, dot([0, 2], 3, 3), [q, k], true)?;
        if self.causal {
            let index = match d.queries.max(d.keys) <= i32::MAX as usize {
                true => DType::I32,
                false => DType::I64,
            };
            let iota = |b: &mut FuncBuilder, dim| {
                b.push(
                    Op::Iota {
                        dtype: index,
                        shape: vec![d.queries, d.keys].into(),
                        dim,
                    },
                    &[],
                )
            };
            let (row, col) = (iota(&mut b, 0)?, iota(&mut b, 1)?);
            let keep = b.push(Op::Compare(CompareOp::Ge), &[row, col])?;
            let keep = b.push(
                Op::BroadcastInDim {
                    shape: scores_shape.clone().into(),
                    dims: vec![2, 3],
                },
                &[keep],
            )?;
            let masked = splat(&mut b, f64::NEG_INFINITY, &scores_ty)?;
            scores = b.push(Op::Select, &[keep, scores, masked])?;
        }
        // The softmax's pieces: each row's maximum, the shifted exponentials and their sum.
        let max = b.push(
            Op::Reduce {
                op: ReduceOp::Max,
                axes: vec![3],
            },
            &[scores],
        )?;
        let spread_max = spread(&mut b, max)?;
        let shifted = b.push(Op::Binary(BinaryOp::Sub), &[scores, spread_max])?;
        let exp = b.push(Op::Unary(UnaryOp::Exp), &[shifted])?;
        let total = b.push(sum_rows.clone(), &[exp])?;
        let spread_total = spread(&mut b, total)?;
        // The gradient parts spell the weights as the output does, so that where a program
        // has both, the simplifier computes them once (a kernel recomputes them from `lse`).
        let weights = b.push(Op::Binary(BinaryOp::Div), &[exp, spread_total])?;
        let out = match self.part {
            AttentionPart::Output => {
                let mixed = product(&mut b, dot([0, 1], 3, 1), [(weights, false), v], true)?;
                heads_second(&mut b, mixed)?
            }
            AttentionPart::LogSumExp => {
                let log = b.push(Op::Unary(UnaryOp::Log), &[total])?;
                b.push(Op::Binary(BinaryOp::Add), &[max, log])?
            }
            AttentionPart::ValueGrad => {
                let d_out = (params[5], false);
                let dv = product(&mut b, dot([0, 1], 2, 1), [(weights, false), d_out], !half)?;
                heads_second(&mut b, dv)?
            }
            AttentionPart::QueryGrad | AttentionPart::KeyGrad => {
                let (out, d_out, d_lse) = (params[3], params[5], params[6]);
                // d scores = weights * (d_out . v - rowsum(d_out * out) + d_lse).
                let d_weights = product(&mut b, dot([0, 2], 3, 3), [(d_out, false), v], true)?;
                let weighted = b.push(Op::Binary(BinaryOp::Mul), &[d_out, out])?;
                let delta = b.push(sum_rows, &[weighted])?;
                let delta = b.push(
                    Op::Transpose {
                        perm: vec![0, 2, 1],
                    },
                    &[delta],
                )?;
                let delta = b.push(Op::Binary(BinaryOp::Sub), &[delta, d_lse])?;
                let spread_delta = spread(&mut b, delta)?;
                let centred = b.push(Op::Binary(BinaryOp::Sub), &[d_weights, spread_delta])?;
                let d_scores = b.push(Op::Binary(BinaryOp::Mul), &[weights, centred])?;
                // dq = d scores . k over the keys; dk = d scores . q over the queries.
                let d_scores = (d_scores, false);
                let grad = if self.part == AttentionPart::QueryGrad {
                    product(&mut b, dot([0, 1], 3, 1), [d_scores, k], !half)?
                } else {
                    product(&mut b, dot([0, 1], 2, 1), [d_scores, q], !half)?
                };
                heads_second(&mut b, grad)?
            }
        };
        Ok(b.finish(vec![out]))
    }
}

impl AttentionDims {
    /// The type of one value per row of scores, `[B, H, T]`: the log-sum-exps.
    pub fn rows(&self) -> TensorType {
        TensorType::new(self.dtype, vec![self.batch, self.heads, self.queries])
    }

    /// The output's type, `[B, T, H, D]` in the softmax's dtype (also `out`'s and `d_out`'s).
    pub fn output(&self) -> TensorType {
        let shape = vec![self.batch, self.queries, self.heads, self.features];
        TensorType::new(self.dtype, shape)
    }
}

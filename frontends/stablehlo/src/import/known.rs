//! Values the importer knows while it imports: the small integer tensors a shape-polymorphic
//! program computes its shapes from (dimension sizes, their sums and products, concatenated
//! into the shape operand of a `dynamic_*` op). Shape refinement needs them as numbers, as
//! StableHLO's own refinement pass folds them; the program still computes them too, and the
//! simplifier folds those instructions away.

use super::names::direction;
use super::Importer;
use crate::parse::Operation;
use ferrax_ir::{CompareOp, DType, Literal, Scalar, TensorType, ValueId};

/// Most elements a known value may have: shapes have at most eight.
const MAX_KNOWN: usize = 64;

/// `x`'s value as an integer, if it is an integer or a boolean that `i64` holds.
fn integer(x: Scalar) -> Option<i64> {
    Some(match x {
        Scalar::I32(v) => v.into(),
        Scalar::I64(v) => v,
        Scalar::U32(v) => v.into(),
        Scalar::U8(v) => v.into(),
        Scalar::I8(v) => v.into(),
        Scalar::I16(v) => v.into(),
        Scalar::U16(v) => v.into(),
        Scalar::U64(v) => i64::try_from(v).ok()?,
        Scalar::Bool(v) => v.into(),
        Scalar::F32(_)
        | Scalar::F64(_)
        | Scalar::F16(_)
        | Scalar::BF16(_)
        | Scalar::C64(_)
        | Scalar::C128(_) => return None,
    })
}

/// `v` as a value of `dtype` (integers wrap to its width, as the ops compute them).
fn wrap(v: i64, dtype: DType) -> Option<i64> {
    Some(match dtype {
        DType::I64 => v,
        DType::I32 => i64::from(v as i32),
        DType::U32 => i64::from(v as u32),
        DType::I16 => i64::from(v as i16),
        DType::U16 => i64::from(v as u16),
        DType::I8 => i64::from(v as i8),
        DType::U8 => i64::from(v as u8),
        DType::U64 => (v >= 0).then_some(v)?,
        DType::Bool => i64::from(v != 0),
        DType::F32 | DType::F64 | DType::F16 | DType::BF16 | DType::C64 | DType::C128 => {
            return None
        }
    })
}

/// The literal's elements, if it is a small integer or boolean tensor.
pub(super) fn literal_values(lit: &Literal) -> Option<Vec<i64>> {
    if lit.ty.numel() > MAX_KNOWN {
        return None;
    }
    let dense = lit.to_dense();
    (0..dense.len()).map(|i| integer(dense.get(i))).collect()
}

/// The literal of `ty` holding `values`.
pub(super) fn to_literal(ty: &TensorType, values: &[i64]) -> Option<Literal> {
    let scalars = values
        .iter()
        .map(|&v| {
            Some(match ty.dtype {
                DType::I64 => Scalar::I64(v),
                DType::I32 => Scalar::I32(i32::try_from(v).ok()?),
                DType::U32 => Scalar::U32(u32::try_from(v).ok()?),
                DType::I16 => Scalar::I16(i16::try_from(v).ok()?),
                DType::U16 => Scalar::U16(u16::try_from(v).ok()?),
                DType::I8 => Scalar::I8(i8::try_from(v).ok()?),
                DType::U8 => Scalar::U8(u8::try_from(v).ok()?),
                DType::U64 => Scalar::U64(u64::try_from(v).ok()?),
                DType::Bool => Scalar::Bool(v != 0),
                DType::F32 | DType::F64 | DType::F16 | DType::BF16 | DType::C64 | DType::C128 => {
                    return None
                }
            })
        })
        .collect::<Option<Vec<_>>>()?;
    Some(Literal {
        ty: ty.clone(),
        data: ferrax_ir::Elements::from_scalars(ty.dtype, &scalars)?,
    })
}

/// The row-major multi-index of element `flat` of `dims`.
fn unflatten(mut flat: usize, dims: &[usize]) -> Vec<usize> {
    let mut index = vec![0; dims.len()];
    for (k, &d) in dims.iter().enumerate().rev() {
        if d > 0 {
            index[k] = flat % d;
            flat /= d;
        }
    }
    index
}

/// The flat position of `index` in `dims`, row-major.
fn flatten(index: &[usize], dims: &[usize]) -> usize {
    index.iter().zip(dims).fold(0, |acc, (&i, &d)| acc * d + i)
}

/// The value of an elementwise op's operand at element `i` (a scalar operand broadcasts, as
/// `select`'s predicate and `clamp`'s bounds may).
fn at(values: &[i64], i: usize) -> Option<i64> {
    match values {
        [v] => Some(*v),
        _ => values.get(i).copied(),
    }
}

impl Importer<'_> {
    /// The known value of `v`, if any.
    pub(super) fn known(&self, v: ValueId) -> Option<&[i64]> {
        self.known.get(&v).map(Vec::as_slice)
    }

    /// Records `result`'s value when `op` computes it from known `args`.
    pub(super) fn fold_known(
        &mut self,
        short: &str,
        op: &Operation,
        args: &[ValueId],
        result: ValueId,
    ) {
        let Some(out) = self.b.value_type(result).cloned() else {
            return;
        };
        if out.numel() > MAX_KNOWN {
            return;
        }
        // Ops the importer maps to constants (`constant`, `get_dimension_size`).
        let value = if let Some(lit) = self.constants.get(&result) {
            literal_values(lit)
        } else {
            let inputs: Option<Vec<(TensorType, Vec<i64>)>> = args
                .iter()
                .map(|&a| Some((self.b.value_type(a)?.clone(), self.known(a)?.to_vec())))
                .collect();
            inputs.and_then(|inputs| fold(short, op, &inputs, &out))
        };
        if let Some(v) = value {
            self.known.insert(result, v);
        }
    }
}

/// What `op` computes from the known `inputs`, as values of `out`.
fn fold(
    short: &str,
    op: &Operation,
    inputs: &[(TensorType, Vec<i64>)],
    out: &TensorType,
) -> Option<Vec<i64>> {
    let n = out.numel();
    let values: Vec<i64> = match (short, inputs) {
        ("convert" | "reshape", [(_, x)]) => x.clone(),
        ("broadcast_in_dim", [(t, x)]) => {
            let dims = super::attrs::usizes(op.attr(&["dims", "broadcast_dimensions"])?, 0).ok()?;
            (0..n)
                .map(|i| {
                    let index = unflatten(i, out.dims());
                    let from: Vec<usize> = dims
                        .iter()
                        .zip(t.dims())
                        .map(|(&d, &size)| if size == 1 { 0 } else { index[d] })
                        .collect();
                    x.get(flatten(&from, t.dims())).copied()
                })
                .collect::<Option<_>>()?
        }
        ("concatenate", _) => {
            let axis = *super::attrs::usizes(op.attr(&["dim", "dimension"])?, 0)
                .ok()?
                .first()?;
            let outer: usize = out.dims().get(..axis)?.iter().product();
            let mut values = Vec::with_capacity(n);
            for o in 0..outer {
                for (t, x) in inputs {
                    let block: usize = t.dims().get(axis..)?.iter().product();
                    values.extend_from_slice(x.get(o * block..(o + 1) * block)?);
                }
            }
            values
        }
        ("slice", [(t, x)]) => {
            let Ok(ferrax_ir::Op::Slice { start, strides, .. }) = Importer::slice(op) else {
                return None;
            };
            (0..n)
                .map(|i| {
                    let index = unflatten(i, out.dims());
                    let from: Vec<usize> = index
                        .iter()
                        .zip(start.iter().zip(&strides))
                        .map(|(&k, (&s, &st))| s + k * st)
                        .collect();
                    x.get(flatten(&from, t.dims())).copied()
                })
                .collect::<Option<_>>()?
        }
        ("negate", [(_, x)]) => x.iter().map(|v| v.checked_neg()).collect::<Option<_>>()?,
        ("abs", [(_, x)]) => x.iter().map(|v| v.checked_abs()).collect::<Option<_>>()?,
        ("sign", [(_, x)]) => x.iter().map(|v| v.signum()).collect(),
        ("not", [(t, x)]) if t.dtype == DType::Bool => x.iter().map(|&v| 1 - v).collect(),
        ("not", [(_, x)]) => x.iter().map(|v| !v).collect(),
        ("select", [(_, p), (_, a), (_, b)]) => (0..n)
            .map(|i| Some(if at(p, i)? != 0 { at(a, i)? } else { at(b, i)? }))
            .collect::<Option<_>>()?,
        ("clamp", [(_, lo), (_, x), (_, hi)]) => (0..n)
            .map(|i| Some(at(x, i)?.max(at(lo, i)?).min(at(hi, i)?)))
            .collect::<Option<_>>()?,
        ("compare", [(_, a), (_, b)]) => {
            let dir = direction(&op.words)
                .or_else(|| op.attr(&["comparison_direction"]).and_then(direction))?;
            (0..n)
                .map(|i| {
                    let (x, y) = (at(a, i)?, at(b, i)?);
                    Some(i64::from(match dir {
                        CompareOp::Eq => x == y,
                        CompareOp::Ne => x != y,
                        CompareOp::Lt => x < y,
                        CompareOp::Le => x <= y,
                        CompareOp::Gt => x > y,
                        CompareOp::Ge => x >= y,
                    }))
                })
                .collect::<Option<_>>()?
        }
        (_, [(_, a), (_, b)]) => {
            let f: fn(i64, i64) -> Option<i64> = match short {
                "add" => i64::checked_add,
                "subtract" => i64::checked_sub,
                "multiply" => i64::checked_mul,
                "divide" => i64::checked_div,
                "remainder" => i64::checked_rem,
                "maximum" => |x, y| Some(x.max(y)),
                "minimum" => |x, y| Some(x.min(y)),
                "and" => |x, y| Some(x & y),
                "or" => |x, y| Some(x | y),
                "xor" => |x, y| Some(x ^ y),
                _ => return None,
            };
            (0..n)
                .map(|i| f(at(a, i)?, at(b, i)?))
                .collect::<Option<_>>()?
        }
        _ => return None,
    };
    if values.len() != n {
        return None;
    }
    values.into_iter().map(|v| wrap(v, out.dtype)).collect()
}

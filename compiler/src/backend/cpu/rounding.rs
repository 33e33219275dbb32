//! A half-precision product's rounding, done by its gemm step. A bf16 or f16 `dot_general`
//! runs as an f32 product whose result is rounded once to the half type and widened back
//! (`widen`); where that product feeds only another product, nothing elementwise is there for
//! the two converts to fuse into, and they would be a kernel of their own, a pass over the
//! result that costs about what the product does at attention's sizes. The gemm step rounds
//! its result in place instead, with the interpreter's rounding, so the values are the same.

use super::PARALLEL_THRESHOLD;
use ferrax_ir::{bf16_from_f64, f16_from_f64, DType, Elements, Func, Op, ValueId};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

/// A product step's rounding: its f32 result rounded to `dtype` is `output`, of type `dtype`,
/// or where `widened`, of f32 again.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Rounding {
    pub dtype: DType,
    pub output: ValueId,
    pub widened: bool,
}

/// How many times each value is read (by instructions, or as a program output).
pub(super) fn uses(func: &Func) -> Vec<usize> {
    let mut uses = vec![0; func.num_values()];
    for v in func
        .body
        .iter()
        .flat_map(|ins| &ins.args)
        .chain(&func.outputs)
    {
        if let Some(n) = uses.get_mut(v.index()) {
            *n += 1;
        }
    }
    uses
}

/// The rounding instructions `start..end` do of product `dot`'s result, if they are exactly
/// an f32 → bf16/f16 conversion of it, or that and back to f32, and no other instruction
/// reads the product (or the half value, where it is widened back).
pub(super) fn plan_rounding(
    func: &Func,
    uses: &[usize],
    dot: usize,
    (start, end): (usize, usize),
) -> Option<Rounding> {
    let instrs = func.body.get(start..end)?;
    let narrow = instrs.first()?;
    let product = func.instr_value(dot);
    let half = func.instr_value(start);
    let dtype = match narrow.op {
        Op::Convert {
            to: to @ (DType::BF16 | DType::F16),
        } => to,
        _ => return None,
    };
    let widened = match instrs {
        [_] => false,
        [_, wide] => {
            let back = wide.args == [half] && matches!(wide.op, Op::Convert { to: DType::F32 });
            if !back || uses.get(half.index()) != Some(&1) {
                return None;
            }
            true
        }
        _ => return None,
    };
    let only_reader = narrow.args == [product]
        && func.body[dot].ty.dtype == DType::F32
        && uses.get(product.index()) == Some(&1);
    only_reader.then(|| Rounding {
        dtype,
        output: func.instr_value(end - 1),
        widened,
    })
}

/// `out` (f32) rounded as `r` says: to its half type, and back to f32 where widened; on every
/// core when large.
pub(super) fn round(out: Elements, r: Rounding) -> Elements {
    let Elements::F32(mut values) = out else {
        return out;
    };
    let large = values.len() >= PARALLEL_THRESHOLD;
    match (r.dtype, r.widened) {
        (DType::BF16, false) if large => Elements::BF16(
            values
                .par_iter()
                .map(|&x| bf16_from_f64(f64::from(x)))
                .collect(),
        ),
        (DType::BF16, false) => Elements::BF16(
            values
                .iter()
                .map(|&x| bf16_from_f64(f64::from(x)))
                .collect(),
        ),
        (DType::F16, false) if large => Elements::F16(
            values
                .par_iter()
                .map(|&x| f16_from_f64(f64::from(x)))
                .collect(),
        ),
        (DType::F16, false) => {
            Elements::F16(values.iter().map(|&x| f16_from_f64(f64::from(x))).collect())
        }
        (dtype, _) => {
            let round = |x: &mut f32| {
                let wide = f64::from(*x);
                *x = match dtype {
                    DType::BF16 => bf16_from_f64(wide).to_f32(),
                    DType::F16 => f16_from_f64(wide).to_f32(),
                    // Never planned (`plan_rounding`): f32 rounds to itself.
                    DType::F32 | DType::F64 | DType::I32 | DType::I64 | DType::U8 | DType::Bool => {
                        *x
                    }
                };
            };
            if large {
                values
                    .par_chunks_mut(1 << 14)
                    .for_each(|c| c.iter_mut().for_each(round));
            } else {
                values.iter_mut().for_each(round);
            }
            Elements::F32(values)
        }
    }
}

//! A half-precision product's rounding, done by its gemm step. A bf16 or f16 `dot_general`
//! runs as an f32 product whose result is rounded once to the half type and widened back
//! (`widen`); where that product feeds only another product, nothing elementwise is there for
//! the two converts to fuse into, and they would be a kernel of their own, a pass over the
//! result that costs about what the product does at attention's sizes. The gemm step rounds
//! its result in place instead, with the interpreter's rounding, so the values are the same.

pub(super) use ferrax_aot_runtime::Rounding;
use ferrax_ir::{DType, Func, Op};

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

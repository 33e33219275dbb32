//! Half-precision matrix products on f32 `gemm`. `gemm` multiplies f32 and f64 (its f16
//! kernels convert every packed tile and have no bf16 form), and the interpreter's loop is an
//! order of magnitude slower, so before fusion each f16 or bf16 `dot_general` is rewritten as
//! `convert(dot_general(convert(a), convert(b)))`: the operands widened to f32, an f32 product,
//! the result rounded once to the half type (to nearest even, NaN kept: the kernels' half
//! conversions are the `half` crate's, bit for bit).
//!
//! This is exact up to the accumulation: a product of two f16 (11-bit significand) or bf16
//! (8-bit) values fits f32's 24 bits, so the f32 product sums the exact products in f32, as
//! XLA's CPU backend does. The interpreter sums them in f64 and rounds once, so the two agree
//! to within one unit in the last place of the half type, plus f32's accumulation error
//! relative to the sum of the products' magnitudes.
//!
//! Rewriting the program, rather than converting inside the GEMM step, lets fusion put the
//! conversions into the kernels that already produce the operands and read the result: in a
//! mixed-precision model, an activation's rounding to bf16 and its widening back join the
//! layer norm's row kernel, and the result's rounding joins the epilogue that adds the bias.
//! A half product then costs the f32 product and a few instructions per element, with no
//! passes of its own over memory. A value feeding several half products is widened once, and
//! an operand that only moves elements (transposes, reshapes, slices, broadcasts: attention's
//! heads split from its bf16 projection) is widened at its source, the movement replayed in
//! f32: a conversion there joins the kernel that makes the source, where one after the
//! interpreter's transpose would be a pass of its own. The half chain it replaces is dropped.

use crate::dce::eliminate_dead_code;
use ferrax_ir::{DType, Func, Instr, Op, ValueId};
use std::collections::HashMap;

/// The f32 type a half product computes in, or `None` for a dtype `gemm` takes as it is
/// (f32, f64) or that the interpreter keeps (integers).
fn widened(dtype: DType) -> Option<DType> {
    match dtype {
        DType::F16 | DType::BF16 => Some(DType::F32),
        DType::F32
        | DType::F64
        | DType::I32
        | DType::I64
        | DType::U32
        | DType::U8
        | DType::I8
        | DType::I16
        | DType::U16
        | DType::U64
        | DType::Bool
        | DType::C64
        | DType::C128 => None,
    }
}

/// Whether `op` only moves its one operand's elements, so that it commutes with a conversion.
fn moves(op: &Op) -> bool {
    matches!(
        op,
        Op::Transpose { .. } | Op::Reshape { .. } | Op::Slice { .. } | Op::BroadcastInDim { .. }
    )
}

/// The half type whose values f32 value `v` holds where it is a widening of a half value,
/// moved.
fn widening_of(func: &Func, v: ValueId) -> Option<DType> {
    let n = func.params.len();
    let mut at = v;
    loop {
        let d = func.body.get(at.index().checked_sub(n)?)?;
        match d.op {
            Op::Convert { to: DType::F32 } => {
                let from = func.value_type(*d.args.first()?)?.dtype;
                return widened(from).map(|_| from);
            }
            ref op if moves(op) => at = *d.args.first()?,
            _ => return None,
        }
    }
}

/// Whether `v` is f32 holding bf16 values (a widening of a bf16 value, moved): a product of
/// two such operands may run on a bf16 kernel.
pub(super) fn holds_bf16(func: &Func, v: ValueId) -> bool {
    widening_of(func, v) == Some(DType::BF16)
}

/// Where `v` rounds to a half type an f32 value whose elements are already of that type (an
/// f32 widening of a half value, moved), that f32 value: rounding it again changes nothing
/// (a NaN stays a NaN), so a product's operand is the value itself, with no pass to round it.
fn already_half(func: &Func, v: ValueId) -> Option<ValueId> {
    let rounding = func.body.get(v.index().checked_sub(func.params.len())?)?;
    let Op::Convert { to: half } = rounding.op else {
        return None;
    };
    widened(half)?;
    let wide = *rounding.args.first()?;
    (widening_of(func, wide) == Some(half)).then_some(wide)
}

/// `func` with its half-precision `dot_general`s computed in f32 (see the module doc); `func`
/// itself where it has none.
pub(super) fn widen_half_products(func: &Func) -> Func {
    let is_half_product =
        |ins: &Instr| matches!(ins.op, Op::DotGeneral(_)) && widened(ins.ty.dtype).is_some();
    if !func.body.iter().any(is_half_product) {
        return func.clone();
    }
    let n = func.params.len();
    let mut body: Vec<Instr> = Vec::with_capacity(func.body.len());
    // Old value -> new value; parameters keep their numbers.
    let mut renumber: Vec<ValueId> = (0..n).map(|p| ValueId(p as u32)).collect();
    // Old value -> its f32 widening (new), made once however many products read it.
    let mut wide: HashMap<ValueId, ValueId> = HashMap::new();
    let value = |body: &Vec<Instr>| ValueId((n + body.len()) as u32);
    for ins in &func.body {
        let (Op::DotGeneral(dims), Some(to)) = (&ins.op, widened(ins.ty.dtype)) else {
            renumber.push(value(&body));
            body.push(Instr {
                op: ins.op.clone(),
                args: ins.args.iter().map(|a| renumber[a.index()]).collect(),
                ty: ins.ty.clone(),
            });
            continue;
        };
        let mut operands = Vec::with_capacity(2);
        for &a in &ins.args {
            // The operand's chain of movements back to its source, outermost first.
            let mut chain = vec![a];
            while let Some(i) = chain[chain.len() - 1].index().checked_sub(n) {
                let def = &func.body[i];
                if wide.contains_key(&chain[chain.len() - 1]) || !moves(&def.op) {
                    break;
                }
                chain.push(def.args[0]);
            }
            // A source that rounds an f32 value already of the half type's values (a half
            // product's result, widened and moved) widens to that value itself.
            if let Some(&source) = chain.last() {
                if let Some(exact) = already_half(func, source) {
                    wide.entry(source).or_insert(renumber[exact.index()]);
                }
            }
            // Widen the source, then replay the movements in f32, innermost first.
            let mut w = None;
            for &old in chain.iter().rev() {
                if let Some(&known) = wide.get(&old) {
                    w = Some(known);
                    continue;
                }
                let made = value(&body);
                body.push(match (w, old.index().checked_sub(n)) {
                    (Some(inner), Some(i)) => Instr {
                        op: func.body[i].op.clone(),
                        args: vec![inner],
                        ty: func.body[i].ty.with_dtype(to),
                    },
                    (None, Some(i)) => Instr {
                        op: Op::Convert { to },
                        args: vec![renumber[old.index()]],
                        ty: func.body[i].ty.with_dtype(to),
                    },
                    (_, None) => Instr {
                        op: Op::Convert { to },
                        args: vec![old],
                        ty: func.params[old.index()].with_dtype(to),
                    },
                });
                wide.insert(old, made);
                w = Some(made);
            }
            operands.extend(w);
        }
        let product = value(&body);
        body.push(Instr {
            op: Op::DotGeneral(dims.clone()),
            args: operands,
            ty: ins.ty.with_dtype(to),
        });
        renumber.push(value(&body));
        body.push(Instr {
            op: Op::Convert { to: ins.ty.dtype },
            args: vec![product],
            ty: ins.ty.clone(),
        });
    }
    eliminate_dead_code(&Func {
        name: func.name.clone(),
        params: func.params.clone(),
        outputs: func.outputs.iter().map(|o| renumber[o.index()]).collect(),
        body,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrax_ir::{parse_func, verify};

    /// Each instruction as `op:dtype`.
    fn ops(func: &Func) -> Vec<String> {
        func.body
            .iter()
            .map(|i| format!("{}:{}", i.op.name(), i.ty.dtype.name()))
            .collect()
    }

    /// A bf16 product becomes an f32 one between conversions; an operand read twice is
    /// widened once, and the program still verifies.
    #[test]
    fn half_products_compute_in_f32() {
        let text = "func @main(%0: bf16[2,3], %1: bf16[3,3]) -> (bf16[2,3], bf16[2,3]) {
  %2 = dot_general %0, %1, contract=[1]x[0] : bf16[2,3]
  %3 = dot_general %2, %1, contract=[1]x[0] : bf16[2,3]
  return %2, %3
}";
        let func = parse_func(text).unwrap_or_else(|e| panic!("{e}"));
        let wide = widen_half_products(&func);
        verify(&wide).unwrap_or_else(|e| panic!("{e}"));
        let ops = ops(&wide);
        let expected = [
            "convert:f32",
            "convert:f32",
            "dot_general:f32",
            "convert:bf16",
            "convert:f32",
            "dot_general:f32",
            "convert:bf16",
        ];
        assert_eq!(ops, expected);
        assert_eq!(wide.outputs, [ValueId(5), ValueId(8)]);
    }

    /// An operand that only moves elements is widened at its source and moved in f32; the
    /// half transpose it replaces is gone.
    #[test]
    fn movements_are_replayed_in_f32() {
        let text = "func @main(%0: f16[3,2], %1: f16[3,4]) -> (f16[2,4]) {
  %2 = transpose %0, perm=[1,0] : f16[2,3]
  %3 = dot_general %2, %1, contract=[1]x[0] : f16[2,4]
  return %3
}";
        let func = parse_func(text).unwrap_or_else(|e| panic!("{e}"));
        let wide = widen_half_products(&func);
        verify(&wide).unwrap_or_else(|e| panic!("{e}"));
        let ops = ops(&wide);
        let expected = [
            "convert:f32",
            "transpose:f32",
            "convert:f32",
            "dot_general:f32",
            "convert:f16",
        ];
        assert_eq!(ops, expected);
    }

    #[test]
    fn programs_without_half_products_are_unchanged() {
        let text = "func @main(%0: f32[2,3], %1: f32[3,3]) -> (f32[2,3]) {
  %2 = dot_general %0, %1, contract=[1]x[0] : f32[2,3]
  return %2
}";
        let func = parse_func(text).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(widen_half_products(&func), func);
    }
}

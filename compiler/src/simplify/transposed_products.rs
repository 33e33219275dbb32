//! After extraction: a transpose that only moves a product's rhs free dimensions before its
//! lhs ones becomes the product of the swapped operands, with no pass over memory of its own.
//! The e-graph holds that form (`transpose-of-dot-swaps-operands`), but in a deep program the
//! extraction's costs are capped per operand (`cost.rs`), so a transpose of one capped
//! product no longer looks dearer than a product of two capped operands, and the transpose
//! stays (a GPT's weight gradients, one per dense layer).

use super::rules::contract::swapped_operands;
use crate::dce::eliminate_dead_code;
use ferrax_ir::{Func, Instr, Op};

/// `func` with each transpose of a product it alone reads, where the transpose only swaps the
/// operands' free dimensions, computed as the swapped product.
pub fn swap_transposed_products(func: &Func) -> Func {
    let n = func.params.len();
    let mut reads = vec![0usize; func.num_values()];
    for ins in &func.body {
        for a in &ins.args {
            reads[a.index()] += 1;
        }
    }
    for o in &func.outputs {
        reads[o.index()] += 1;
    }
    let mut body = func.body.clone();
    let mut changed = false;
    for ins in &mut body {
        let (Op::Transpose { perm }, [product]) = (&ins.op, ins.args.as_slice()) else {
            continue;
        };
        let Some(def) = product
            .index()
            .checked_sub(n)
            .and_then(|i| func.body.get(i))
        else {
            continue;
        };
        let (Op::DotGeneral(d), [a, b]) = (&def.op, def.args.as_slice()) else {
            continue;
        };
        let (Some(lhs), Some(rhs)) = (func.value_type(*a), func.value_type(*b)) else {
            continue;
        };
        if reads[product.index()] != 1 {
            continue;
        }
        if let Some(dims) = swapped_operands(d, lhs.rank(), rhs.rank(), perm) {
            *ins = Instr {
                op: Op::DotGeneral(dims),
                args: vec![*b, *a],
                ty: ins.ty.clone(),
            };
            changed = true;
        }
    }
    if !changed {
        return func.clone();
    }
    eliminate_dead_code(&Func {
        name: func.name.clone(),
        params: func.params.clone(),
        outputs: func.outputs.clone(),
        body,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrax_ir::{parse_func, verify};

    fn swapped(text: &str) -> String {
        let func = parse_func(text).unwrap_or_else(|e| panic!("{e}"));
        let out = swap_transposed_products(&func);
        verify(&out).unwrap_or_else(|e| panic!("{e}"));
        out.to_string()
    }

    /// A weight gradient's transpose becomes the swapped product; batch dimensions stay first.
    #[test]
    fn transposes_of_products_become_swapped_products() {
        let out = swapped(
            "func @main(%0: f32[8,6,5], %1: f32[8,6,3], %2: f32[2,4,7], %3: f32[2,7,9]) -> (f32[3,5], f32[2,9,4]) {
  %4 = dot_general %0, %1, contract=[0,1]x[0,1] : f32[5,3]
  %5 = transpose %4, perm=[1,0] : f32[3,5]
  %6 = dot_general %2, %3, batch=[0]x[0], contract=[2]x[1] : f32[2,4,9]
  %7 = transpose %6, perm=[0,2,1] : f32[2,9,4]
  return %5, %7
}",
        );
        assert!(!out.contains("transpose"), "{out}");
        assert!(
            out.contains("dot_general %1, %0, contract=[0,1]x[0,1] : f32[3,5]"),
            "{out}"
        );
        assert!(
            out.contains("dot_general %3, %2, batch=[0]x[0], contract=[1]x[2] : f32[2,9,4]"),
            "{out}"
        );
    }

    /// A product read elsewhere too, or a transpose that does not swap the free dimensions,
    /// stays as it is.
    #[test]
    fn other_transposes_stay() {
        let shared = "func @main(%0: f32[4,6], %1: f32[6,3]) -> (f32[3,4], f32[4,3]) {
  %2 = dot_general %0, %1, contract=[1]x[0] : f32[4,3]
  %3 = transpose %2, perm=[1,0] : f32[3,4]
  return %3, %2
}";
        assert!(swapped(shared).contains("transpose"));
        let batch_moved = "func @main(%0: f32[2,4,7], %1: f32[2,7,9]) -> (f32[4,2,9]) {
  %2 = dot_general %0, %1, batch=[0]x[0], contract=[2]x[1] : f32[2,4,9]
  %3 = transpose %2, perm=[1,0,2] : f32[4,2,9]
  return %3
}";
        assert!(swapped(batch_moved).contains("transpose"));
    }
}

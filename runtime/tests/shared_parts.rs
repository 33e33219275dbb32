//! `SharedParts`: the parts of one decomposition of one operand that a program reads are
//! computed once, at the first of them, and equal the parts each op computes alone; a part
//! read alone, parts of other operands, and an SVD's vectors in the other form are left to
//! their own instructions.
#![allow(clippy::unwrap_used)]

use ferrax_ir::{parse_func, Element};
use ferrax_runtime::{eval_op, interpret, Array, SharedParts};

fn matrix(rows: usize, cols: usize, seed: u64) -> Array {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let values: Vec<f64> = (0..rows * cols)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 11) as f64 / (1u64 << 53) as f64 - 0.5
        })
        .collect();
    Array::new([rows, cols], f64::into_elements(values)).unwrap()
}

/// Which instructions of `src` on `args` `SharedParts` answers (the others are `None`), each
/// answer checked against the op's own value.
fn answered(src: &str, args: &[Array]) -> Vec<bool> {
    let func = parse_func(src).unwrap();
    let mut values: Vec<Array> = args.to_vec();
    let mut shared = SharedParts::default();
    let mut answered = Vec::new();
    for (i, ins) in func.body.iter().enumerate() {
        let operands: Vec<&Array> = ins.args.iter().map(|a| &values[a.index()]).collect();
        let own = eval_op(&ins.op, &operands).unwrap();
        let got = shared.value(&func, i, &operands).unwrap();
        if let Some(part) = &got {
            assert_eq!(part, &own, "instruction {i} of\n{src}");
        }
        answered.push(got.is_some());
        values.push(own);
    }
    assert_eq!(interpret(&func, args).unwrap().len(), func.outputs.len());
    answered
}

#[test]
fn parts_of_one_decomposition_are_shared() {
    let a = matrix(4, 3, 1);
    let b = matrix(4, 3, 2);
    // All three SVD parts of %0, one of %1: the first three shared, the last alone.
    let svd = "func @f(%0: f64[4,3], %1: f64[4,3]) -> (f64[4,3], f64[3], f64[3,3], f64[3]) {
  %2 = svd_u %0 : f64[4,3]
  %3 = svd_values %0 : f64[3]
  %4 = svd_vh %0 : f64[3,3]
  %5 = svd_values %1 : f64[3]
  return %2, %3, %4, %5
}";
    assert_eq!(answered(svd, &[a.clone(), b]), [true, true, true, false]);
    // The values go with the full vectors; the reduced vh is its own decomposition.
    let mixed = "func @f(%0: f64[4,3]) -> (f64[3], f64[4,4], f64[3,3]) {
  %1 = svd_values %0 : f64[3]
  %2 = svd_u %0, full_matrices=1 : f64[4,4]
  %3 = svd_vh %0 : f64[3,3]
  return %1, %2, %3
}";
    assert_eq!(
        answered(mixed, std::slice::from_ref(&a)),
        [true, true, false]
    );
    // QR, LU, eigh, eig and geqrf; full and reduced QR factors apart.
    let square = matrix(3, 3, 3);
    let others = "func @f(%0: f64[3,3]) -> (f64[3,3], f64[3,3], f64[3,3], i32[3], i32[3], f64[3], f64[3,3], c128[3], c128[3,3], f64[3,3], f64[3], f64[3,3]) {
  %1 = qr_q %0 : f64[3,3]
  %2 = qr_r %0 : f64[3,3]
  %3 = lu %0 : f64[3,3]
  %4 = lu_pivots %0 : i32[3]
  %5 = lu_permutation %0 : i32[3]
  %6 = eigh_values %0 : f64[3]
  %7 = eigh_vectors %0 : f64[3,3]
  %8 = eig_values %0 : c128[3]
  %9 = eig_right %0 : c128[3,3]
  %10 = geqrf %0 : f64[3,3]
  %11 = geqrf_taus %0 : f64[3]
  %12 = qr_q %0, full_matrices=1 : f64[3,3]
  return %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12
}";
    assert_eq!(
        answered(others, &[square]),
        [true, true, true, true, true, true, true, true, true, true, true, false]
    );
}

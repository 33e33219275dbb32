//! Calls `tests/fuzz_api.rs` found aborting, overflowing, recursing without end or running
//! for ever: each is now an error naming what is wrong, or a result.
#![allow(clippy::unwrap_used)]

use ferrax::ir::parse_func;
use ferrax::runtime::interpret;
use ferrax::{trace, Array, ConvPadding, DType, PadMode, Tensor};

fn error_of(t: &Tensor) -> String {
    match t.to_array() {
        Ok(a) => panic!("expected an error, got an array of type {}", a.ty()),
        Err(e) => e.to_string(),
    }
}

fn vector(n: usize) -> Tensor {
    Tensor::from_vec([n], (0..n).map(|i| i as f32).collect::<Vec<_>>())
}

/// Counts past what memory holds are errors, not aborts on a failed allocation.
#[test]
fn huge_counts_are_errors() {
    let x = vector(4);
    // Used to ask for a vector of `usize::MAX` failed pieces.
    let pieces = x.split(usize::MAX, 0);
    assert_eq!(pieces.len(), 1);
    assert!(error_of(&pieces[0]).contains("equal sections"));
    let empty = Tensor::from_vec([0], Vec::<f32>::new());
    let pieces = empty.split(1 << 62, 0);
    assert!(error_of(&pieces[0]).contains("do not fit in memory"));
    // Used to index every padded position on the host, 2^62 of them.
    let e = error_of(&x.pad_with(&[(1 << 62, 0)], PadMode::Edge));
    assert!(e.contains("too large"), "{e}");
    // `bins + 1` overflowed.
    let (counts, edges) = x.histogram(usize::MAX, None, None, false);
    assert!(error_of(&counts).contains("too many"));
    assert!(error_of(&edges).contains("too many"));
}

/// A size past `i64::MAX` is too large, not `-1` (an inferred size) or a negative one.
#[test]
fn sizes_past_i64_are_too_large() {
    let x = vector(4);
    let e = error_of(&x.reshape([usize::MAX]));
    assert!(e.contains("f32[9223372036854775807]"), "{e}");
    // The product of the sizes overflowed an i64.
    let e = error_of(&x.reshape([1usize << 62, 1 << 62]));
    assert!(e.contains("cannot reshape"), "{e}");
    assert!(error_of(&x.broadcast_to([usize::MAX])).contains("f32["));
}

#[test]
fn tensordot_over_more_axes_than_there_are() {
    let (a, b) = (vector(3), vector(3));
    let e = error_of(&a.tensordot_n(&b, usize::MAX));
    assert!(e.contains("tensordot: 18446744073709551615 axes"), "{e}");
}

/// Functions that trace one op per element of an axis walked a failed tensor's guessed
/// length; the complex `is_inf` of a failed tensor recursed without end (its `real` part was
/// the failed complex tensor itself).
#[test]
fn failed_tensors_end_quickly() {
    let failed = vector(4).broadcast_to([3]);
    assert!(error_of(&failed.diff(usize::MAX, 0)).contains("broadcast_to"));
    assert!(error_of(&failed.polyval(&vector(2))).contains("broadcast_to"));
    let complex = Tensor::zeros(DType::C64, [2]).reshape([3]);
    for t in [complex.is_inf(), complex.is_nan(), complex.is_finite()] {
        assert!(error_of(&t).contains("reshape"));
    }
    // The failed value carries the type its op gives.
    assert_eq!(complex.real().dtype(), DType::F32);
    let func = trace(
        |x: Tensor| x.reshape([5]).real().is_inf(),
        &Tensor::spec(DType::C64, [2]),
    );
    assert!(func.unwrap_err().to_string().contains("reshape"));
}

/// Padding by `i64::MIN` below and `i64::MAX` above (one element: the sum is 0), and a strided
/// slice whose stride is past the operand's end along an axis it takes one element of.
#[test]
fn extreme_pads_and_strides_interpret() {
    let func = parse_func(
        "func @f(%0: f32[1], %1: f32[1,2]) -> (f32[0], f32[1,1]) {
  %2 = constant 0.0 : f32[]
  %3 = pad %0, %2, low=[-9223372036854775808], high=[9223372036854775807], interior=[3] : f32[0]
  %4 = slice %1, start=[0, 1], limit=[1, 2], strides=[9223372036854775807, 1] : f32[1,1]
  return %3, %4
}",
    )
    .unwrap();
    let args = [
        Array::from_vec([1], vec![1.0f32]).unwrap(),
        Array::from_vec([1, 2], vec![1.0f32, 2.0]).unwrap(),
    ];
    let out = interpret(&func, &args).unwrap();
    assert_eq!(out[0].numel(), 0);
    assert_eq!(out[1].to_vec::<f32>().unwrap(), [2.0]);
}

/// A stride past the input's end along a spatial axis of one output position: the one window
/// at the start (the lowering's index arithmetic overflowed).
#[test]
fn convolution_strides_past_the_end() {
    let x = Tensor::from_vec([1, 1, 3], vec![1.0f32, 2.0, 3.0]);
    let k = Tensor::from_vec([1, 1, 1], vec![2.0f32]);
    let y = x.conv(&k, &[usize::MAX], ConvPadding::Valid);
    assert_eq!(y.to_vec::<f32>().unwrap(), [2.0]);
    let f = |(x, k): (Tensor, Tensor)| x.conv(&k, &[1 << 62], ConvPadding::Valid);
    let y = ferrax::jit(f).call((x.clone(), k.clone())).unwrap();
    assert_eq!(y.to_vec::<f32>().unwrap(), [2.0]);
}

//! Sizes past what a machine or an integer can hold come back as `Err`s that name the type:
//! element counts and byte sizes are checked where a type is made, and memory the system
//! refuses is an error, not an abort.
#![allow(clippy::unwrap_used)]

use ferrax::{jit, DType, Tensor};

fn message(t: &Tensor) -> String {
    match t.to_array() {
        Ok(a) => panic!("expected an error, got an array of type {}", a.ty()),
        Err(e) => e.to_string(),
    }
}

#[test]
fn an_element_count_that_overflows_is_an_error() {
    let huge = Tensor::zeros(DType::F32, [1 << 32, 1 << 32]);
    let m = message(&huge);
    assert!(m.contains("f32[4294967296,4294967296]"), "{m}");
    assert!(message(&huge.sum(..)).contains("4294967296"));
    // Zero elements, but dimensions whose product overflows: refused too, since strides and
    // offsets over them would overflow.
    let empty = Tensor::zeros(DType::F32, [0, 1 << 32, 1 << 32]);
    assert!(message(&empty).contains("bytes"), "{}", message(&empty));
}

#[test]
fn memory_the_system_refuses_is_an_error() {
    // 4 TiB.
    let m = message(&Tensor::zeros(DType::F32, [1 << 40]));
    assert!(
        m.contains("out of memory") && m.contains("f32[1099511627776]"),
        "{m}"
    );
    // No elements, but its sum over the empty axis has 2^40.
    let x = Tensor::zeros(DType::F32, [0, 1 << 40]);
    assert_eq!(x.to_array().unwrap().numel(), 0);
    assert!(message(&x.sum(0)).contains("out of memory"));
    // An iota with no elements, however long its axis.
    let iota = Tensor::iota(DType::F32, [0, 1 << 40], 1)
        .to_array()
        .unwrap();
    assert_eq!(iota.numel(), 0);
}

#[test]
fn a_jitted_product_too_large_for_memory_is_an_error() {
    let n = 1 << 20;
    let (a, b) = (
        Tensor::zeros(DType::F32, [n, 1]),
        Tensor::zeros(DType::F32, [1, n]),
    );
    let product = |(a, b): (Tensor, Tensor)| a.matmul(&b);
    let err = jit(product).call((a.clone(), b.clone())).err().unwrap();
    assert!(err.to_string().contains("out of memory"), "{err}");
    assert!(message(&a.matmul(&b)).contains("out of memory"));
}

//! Sorting: `sort`/`argsort` values in `jax.lax.sort`'s order (NaN, -0, ties, stability,
//! empty dimensions), compiled for the CPU as interpreted, under `vmap`, differentiated
//! against finite differences, in the text format, and bad axes as errors; `top_k`.
#![allow(clippy::unwrap_used)]

use ferrax::ir::{parse_func, print_func};
use ferrax::{grad, jit, lax, trace, vmap, DType, Tensor};

fn f32s(t: &Tensor) -> Vec<f32> {
    t.to_vec::<f32>().unwrap()
}

fn i32s(t: &Tensor) -> Vec<i32> {
    t.to_vec::<i32>().unwrap()
}

#[test]
fn floats_sort_as_lax_does_with_nans_last_and_zeros_tied() {
    let nan = f32::NAN;
    let x = Tensor::from_vec(
        [8],
        vec![
            3.0f32,
            -nan,
            0.0,
            f32::NEG_INFINITY,
            -0.0,
            nan,
            -1.0,
            f32::INFINITY,
        ],
    );
    let sorted = f32s(&x.sort(0));
    assert_eq!(&sorted[..3], &[f32::NEG_INFINITY, -1.0, 0.0]);
    // -0 ties with +0, so the stable sort keeps their order: +0 first, then -0.
    assert!(sorted[2].is_sign_positive() && sorted[3] == 0.0 && sorted[3].is_sign_negative());
    assert_eq!(&sorted[4..6], &[3.0, f32::INFINITY]);
    assert!(sorted[6].is_nan() && sorted[7].is_nan());
    // Every NaN ties with the others: -NaN (index 1) stays before NaN (index 5).
    assert_eq!(i32s(&x.argsort(0)), vec![3, 6, 2, 4, 0, 7, 1, 5]);
    assert_eq!(i32s(&x.argsort_descending(0)), vec![1, 5, 7, 0, 2, 4, 6, 3]);
    let down = f32s(&x.sort_descending(0));
    assert!(down[0].is_nan() && down[1].is_nan() && down[7] == f32::NEG_INFINITY);
}

#[test]
fn argsort_is_stable_and_sorts_any_dimension() {
    let x = Tensor::from_vec([2, 4], vec![2i32, 1, 2, 1, 5, 5, 4, 5]);
    assert_eq!(i32s(&x.argsort(1)), vec![1, 3, 0, 2, 2, 0, 1, 3]);
    assert_eq!(i32s(&x.argsort_descending(1)), vec![0, 2, 1, 3, 0, 1, 3, 2]);
    assert_eq!(i32s(&x.argsort(0)), vec![0, 0, 0, 0, 1, 1, 1, 1]);
    assert_eq!(i32s(&x.sort(-1)), vec![1, 1, 2, 2, 4, 5, 5, 5]);
    let u = Tensor::from_vec([3], vec![u32::MAX, 0, 7]);
    assert_eq!(u.sort(0).to_vec::<u32>().unwrap(), vec![0, 7, u32::MAX]);
    let b = Tensor::from_vec([3], vec![true, false, true]);
    assert_eq!(i32s(&b.argsort(0)), vec![1, 0, 2]);
    let empty = Tensor::zeros(DType::F32, [3, 0]);
    assert_eq!(empty.sort(1).shape(), &[3, 0]);
    assert_eq!(empty.argsort(0).shape(), &[3, 0]);
    let (k, v) = lax::sort_key_val(&x, &x.astype(DType::F32), 1);
    assert_eq!(i32s(&k), vec![1, 1, 2, 2, 4, 5, 5, 5]);
    assert_eq!(f32s(&v), vec![1.0, 1.0, 2.0, 2.0, 4.0, 5.0, 5.0, 5.0]);
}

#[test]
fn compiled_sorts_equal_interpreted_ones() {
    let f = |(x, k): (Tensor, Tensor)| {
        let (_, by_keys) = lax::sort_key_val(&k, &x, 0);
        (x.sort(1), x.argsort_descending(0), by_keys)
    };
    let x = Tensor::from_vec(
        [4, 3],
        vec![
            0.5f32,
            -0.0,
            f32::NAN,
            2.0,
            0.0,
            -3.0,
            1.0,
            1.0,
            7.0,
            -1.0,
            2.0,
            0.25,
        ],
    );
    let k = Tensor::from_vec([4, 3], vec![1i32, 2, 1, 1, 2, 2, 0, 1, 1, 0, 0, 2]);
    let eager = f((x.clone(), k.clone()));
    let compiled = jit(f).call((x, k)).unwrap();
    let bits = |t: &Tensor| f32s(t).iter().map(|v| v.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&eager.0), bits(&compiled.0));
    assert_eq!(i32s(&eager.1), i32s(&compiled.1));
    assert_eq!(bits(&eager.2), bits(&compiled.2));
}

#[test]
fn vmap_sorts_each_example() {
    let x = Tensor::from_vec([2, 3, 2], (0..12).map(|i| ((i * 7) % 5) as f32).collect());
    for axis in [0i64, 1] {
        let batched = vmap(move |x: Tensor| (x.sort(axis), x.argsort(axis)))(x.clone());
        for b in 0..2 {
            let example = x.slice(&[b, 0, 0], &[b + 1, 3, 2]).squeeze(0);
            let want = (example.sort(axis), example.argsort(axis));
            let got0 = batched.0.slice(&[b, 0, 0], &[b + 1, 3, 2]).squeeze(0);
            let got1 = batched.1.slice(&[b, 0, 0], &[b + 1, 3, 2]).squeeze(0);
            assert_eq!(f32s(&got0), f32s(&want.0), "axis {axis} example {b}");
            assert_eq!(i32s(&got1), i32s(&want.1), "axis {axis} example {b}");
        }
    }
}

#[test]
fn gradients_of_sort_match_finite_differences() {
    let weights = Tensor::from_vec([2, 3], vec![1.0f64, 2.0, 3.0, -1.0, 0.5, 4.0]);
    let w = weights.clone();
    let loss = move |x: Tensor| (x.sort_descending(1) * &w).sum(..);
    let x = vec![0.3f64, -1.2, 2.5, 0.7, 0.1, -0.4];
    let g = grad(&loss)(Tensor::from_vec([2, 3], x.clone()))
        .to_vec::<f64>()
        .unwrap();
    let eps = 1e-6;
    for i in 0..x.len() {
        let at = |d: f64| {
            let mut y = x.clone();
            y[i] += d;
            loss(Tensor::from_vec([2, 3], y)).to_vec::<f64>().unwrap()[0]
        };
        let fd = (at(eps) - at(-eps)) / (2.0 * eps);
        assert!((g[i] - fd).abs() < 1e-6, "element {i}: {} vs {fd}", g[i]);
    }
}

#[test]
fn sorts_round_trip_through_text_and_bad_axes_are_errors() {
    let func = trace(
        |x: Tensor| (x.sort_descending(0), x.argsort(1)),
        &Tensor::spec(DType::F32, [2, 3]),
    )
    .unwrap();
    let text = print_func(&func);
    assert!(
        text.contains("sort %0, dimension=0, descending=1 : f32[2,3]"),
        "{text}"
    );
    assert!(
        text.contains("argsort %0, dimension=1 : i32[2,3]"),
        "{text}"
    );
    assert_eq!(parse_func(&text).unwrap(), func);
    let bad =
        "func @f(%0: f32[2]) -> (f32[2]) {\n  %1 = sort %0, dimension=1 : f32[2]\n  return %1\n}\n";
    let e = parse_func(bad).unwrap_err().to_string();
    assert!(e.contains("sort: axis 1 is out of range"), "{e}");
    let e = Tensor::zeros(DType::F32, [2])
        .argsort(2)
        .to_array()
        .unwrap_err()
        .to_string();
    assert!(e.contains("argsort: axis 2 is out of range"), "{e}");
}

#[test]
fn a_sort_of_a_sort_simplifies_to_one_with_the_same_bits() {
    use ferrax::compiler::simplify::simplify;
    use ferrax::runtime::interpret;
    let func = trace(
        |x: Tensor| (x.sort_descending(1).sort(1), x.sort(0).sort(1)),
        &Tensor::spec(DType::F32, [2, 4]),
    )
    .unwrap();
    let (simple, report) = simplify(&func).unwrap();
    assert!(report.applied.contains_key("sort-of-sort"), "{report}");
    let sorts = |f: &ferrax::ir::Func| f.body.iter().filter(|i| i.op.name() == "sort").count();
    assert_eq!((sorts(&func), sorts(&simple)), (4, 3), "{simple}");
    let x = ferrax::Array::from_vec(
        [2, 4],
        vec![0.0f32, -0.0, f32::NAN, -f32::NAN, 1.0, -0.0, 0.0, -1.0],
    )
    .unwrap();
    let bits = |a: &[ferrax::Array]| {
        a.iter()
            .flat_map(|a| a.to_vec::<f32>().unwrap())
            .map(f32::to_bits)
            .collect::<Vec<_>>()
    };
    let before = interpret(&func, std::slice::from_ref(&x)).unwrap();
    let after = interpret(&simple, &[x]).unwrap();
    assert_eq!(bits(&before), bits(&after));
}

/// `top_k` as `lax.top_k`: the largest first along the last axis, ties in index order, with
/// i32 indices; eagerly as under jit; its gradient lands on the chosen elements; `k` beyond
/// the axis is an error naming it.
#[test]
fn top_k_takes_the_largest_first() {
    let x = Tensor::from_vec(
        [2, 5],
        vec![3.0f32, 9.0, 3.0, -1.0, 9.0, 0.0, 1.0, 2.0, 3.0, 4.0],
    );
    let (values, indices) = x.top_k(3);
    assert_eq!(f32s(&values), vec![9.0, 9.0, 3.0, 4.0, 3.0, 2.0]);
    assert_eq!(indices.to_vec::<i32>().unwrap(), vec![1, 4, 0, 4, 3, 2]);
    let jitted = jit(|x: Tensor| x.top_k(3)).call(x.clone()).unwrap();
    assert_eq!(f32s(&jitted.0), f32s(&values));
    assert_eq!(jitted.1.to_vec::<i32>().unwrap(), vec![1, 4, 0, 4, 3, 2]);
    let g = grad(|x: Tensor| x.top_k(2).0.sum(..))(x.clone());
    assert_eq!(
        f32s(&g),
        vec![0.0, 1.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 1.0]
    );
    let (none, _) = x.top_k(0);
    assert_eq!(none.shape(), [2, 0]);
    let e = x.top_k(6).0.to_array().unwrap_err().to_string();
    assert!(e.contains("k = 6 exceeds the last dimension"), "{e}");
}

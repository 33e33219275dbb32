//! Batching as an IR transformation, against its definition: for every program of the corpus
//! (which uses every op), the gradient programs and random fusion programs, and for batch axes
//! chosen at random per parameter (unbatched, leading, trailing, in between), the batched
//! program on stacked inputs gives, example by example, what the program gives on each
//! example's inputs (both on the interpreter).
#![allow(clippy::unwrap_used)]

mod common;

use common::fusion::{random_fusion_program, Mix};
use common::{assert_close, corpus, gradient_programs, inputs, Gen};
use ferrax::compiler::batching::vmap;
use ferrax::ir::{Op, Shape};
use ferrax::runtime::{eval_op, interpret};
use ferrax::{lax, trace, Array, DType, Func, Tensor};

fn spec(dtype: DType, shape: &[usize]) -> Tensor {
    Tensor::spec(dtype, shape.to_vec())
}

/// Programs with control flow (the corpus has none): loops whose trip count depends on the
/// example or not, branches picked per example or not, a scan over constants, a carry and
/// scanned arrays.
fn control_programs() -> Vec<(&'static str, Func)> {
    let f32s = |shape: &[usize]| spec(DType::F32, shape);
    let halve = |(x, n): (Tensor, Tensor)| (x * 0.5, n + 1);
    vec![
        (
            "while_until_small",
            trace(
                |(x, limit): (Tensor, Tensor)| {
                    let more = |(x, n): (Tensor, Tensor)| x.sum(..).greater(&limit) & n.less(6);
                    lax::while_loop(more, halve, (x, Tensor::scalar(0i32)))
                },
                &(f32s(&[3]), f32s(&[])),
            )
            .unwrap(),
        ),
        (
            "while_counted",
            trace(
                |(x, w): (Tensor, Tensor)| {
                    let more = |(_, n): (Tensor, Tensor)| n.less(3);
                    let step = |(x, n): (Tensor, Tensor)| ((x.sin() + &w), n + 1);
                    lax::while_loop(more, step, (x, Tensor::scalar(0i32)))
                },
                &(f32s(&[2, 3]), f32s(&[2, 3])),
            )
            .unwrap(),
        ),
        (
            "cond",
            trace(
                |(p, x, y): (Tensor, Tensor, Tensor)| {
                    lax::cond(
                        &p,
                        |(x, y): (Tensor, Tensor)| x * y,
                        |(x, _)| x.exp(),
                        (x, y),
                    )
                },
                &(spec(DType::Bool, &[]), f32s(&[3]), f32s(&[3])),
            )
            .unwrap(),
        ),
        (
            "switch",
            trace(
                |(k, x): (Tensor, Tensor)| {
                    let a = |x: Tensor| -x;
                    let b = |x: Tensor| x.tanh();
                    let c = |x: Tensor| &x * &x;
                    lax::switch(&k, [&a, &b, &c], x)
                },
                &(spec(DType::I32, &[]), f32s(&[2, 2])),
            )
            .unwrap(),
        ),
        (
            "scan",
            trace(
                |(w, h, xs): (Tensor, Tensor, Tensor)| {
                    let cell = |h: Tensor, x: Tensor| {
                        let h = ((&h * &w) + x).tanh();
                        (h.clone(), h.sum(..))
                    };
                    lax::scan(cell, h, xs)
                },
                &(f32s(&[3]), f32s(&[3]), f32s(&[4, 3])),
            )
            .unwrap(),
        ),
    ]
}

/// Example `b` of `x`, whose batch dimension is `axis`.
fn example(x: &Array, axis: usize, b: usize) -> Array {
    let dims = x.shape().dims().to_vec();
    let mut start = vec![0; dims.len()];
    let mut limit = dims.clone();
    start[axis] = b;
    limit[axis] = b + 1;
    let strides = vec![1; dims.len()];
    let sliced = eval_op(
        &Op::Slice {
            start,
            limit,
            strides,
        },
        &[x],
    )
    .unwrap();
    let mut shape = dims;
    shape.remove(axis);
    eval_op(
        &Op::Reshape {
            shape: Shape::new(shape),
        },
        &[&sliced],
    )
    .unwrap()
}

/// Checks `vmap(func)` with `in_axes` and every output at `out_axis` (clamped to its rank)
/// against `func` example by example.
fn check(name: &str, func: &Func, in_axes: &[Option<usize>], out_axis: usize, size: usize) {
    let out_axes: Vec<Option<usize>> = func
        .output_types()
        .iter()
        .map(|t| Some(out_axis.min(t.rank())))
        .collect();
    let batched = vmap(func, in_axes, &out_axes, size)
        .unwrap_or_else(|e| panic!("{name} {in_axes:?}: {e}\n{func}"));
    let args = inputs(&batched, 7);
    let got = interpret(&batched, &args).unwrap_or_else(|e| panic!("{name}: {e}\n{batched}"));
    for b in 0..size {
        let one: Vec<Array> = args
            .iter()
            .zip(in_axes)
            .map(|(a, axis)| match axis {
                Some(axis) => example(a, *axis, b),
                None => a.clone(),
            })
            .collect();
        let want = interpret(func, &one).unwrap();
        for (k, (g, w)) in got.iter().zip(&want).enumerate() {
            let what = format!("{name} {in_axes:?}, example {b}, output {k}");
            let axis = out_axes[k].unwrap_or(0);
            assert_close(&example(g, axis, b), w, 1e-5, &what);
        }
    }
}

/// Batch axes for `func`'s parameters: all leading, or random (unbatched, or any axis), with
/// at least one batched.
fn random_axes(func: &Func, g: &mut Gen) -> Vec<Option<usize>> {
    loop {
        let axes: Vec<Option<usize>> = func
            .params
            .iter()
            .map(|t| match g.below(3) {
                0 => None,
                _ => Some(g.below(t.rank() + 1)),
            })
            .collect();
        if axes.iter().any(Option::is_some) || func.params.is_empty() {
            return axes;
        }
    }
}

#[test]
fn every_corpus_program_batches_as_its_examples_stacked() {
    let mut g = Gen(0x5eed);
    let mut seen = std::collections::BTreeSet::new();
    for (name, func) in corpus()
        .into_iter()
        .chain(gradient_programs())
        .chain(control_programs())
    {
        if func.params.is_empty() {
            continue;
        }
        seen.extend(func.body.iter().map(|ins| ins.op.name()));
        check(name, &func, &vec![Some(0); func.params.len()], 0, 3);
        for _ in 0..3 {
            let axes = random_axes(&func, &mut g);
            let out_axis = g.below(3);
            check(name, &func, &axes, out_axis, 2);
        }
    }
    for op in [
        "dot_general",
        "bitcast_convert",
        "shift_right_logical",
        "gather",
        "scatter_add",
        "dynamic_slice",
        "dynamic_update_slice",
        "pad",
        "concatenate",
        "custom_vjp",
        "while",
        "cond",
        "scan",
    ] {
        assert!(seen.contains(op), "no batched program uses {op}: {seen:?}");
    }
}

#[test]
fn random_programs_batch_as_their_examples_stacked() {
    let mut g = Gen(0xba7c);
    for seed in 1..=40 {
        let text = random_fusion_program(seed, "f32", (3, 4), Mix::default());
        let func = ferrax::ir::parse_func(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let axes = random_axes(&func, &mut g);
        check(&format!("seed {seed}"), &func, &axes, g.below(3), 3);
    }
}

#[test]
fn an_unbatched_operand_is_not_broadcast() {
    let func: Func = "func @f(%0: f32[4,3], %1: f32[3,2], %2: f32[2]) -> (f32[4,2]) {
      %3 = dot_general %0, %1, contract=[1]x[0] : f32[4,2]
      %4 = broadcast_in_dim %2, dims=[1] : f32[4,2]
      %5 = add %3, %4 : f32[4,2]
      return %5
    }"
    .parse()
    .unwrap();
    let batched = vmap(&func, &[Some(0), None, None], &[Some(0)], 5).unwrap();
    let text = batched.to_string();
    // The weights stay f32[3,2]: the examples are more rows of one product.
    assert!(
        text.contains("dot_general %0, %1, contract=[2]x[0] : f32[5,4,2]"),
        "{text}"
    );
    assert_eq!(text.matches("dot_general").count(), 1, "{text}");
}

#[test]
fn bad_axes_are_errors() {
    let func: Func = "func @f(%0: f32[3]) -> (f32[3]) {
      %1 = exp %0 : f32[3]
      return %1
    }"
    .parse()
    .unwrap();
    let err = vmap(&func, &[Some(0), None], &[Some(0)], 2).unwrap_err();
    assert!(err.to_string().contains("2 in_axes"), "{err}");
    let err = vmap(&func, &[Some(2)], &[Some(0)], 2).unwrap_err();
    assert!(err.to_string().contains("axis 2 is out of range"), "{err}");
    let err = vmap(&func, &[Some(0)], &[None], 2).unwrap_err();
    assert!(err.to_string().contains("out_axes is None"), "{err}");
    let err = vmap(&func, &[Some(0)], &[Some(3)], 2).unwrap_err();
    assert!(err.to_string().contains("out of range"), "{err}");
}

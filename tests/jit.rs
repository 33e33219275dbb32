#![allow(clippy::unwrap_used)]

//! `jit` through the reference interpreter: results, the shape-keyed cache, pytrees.

mod common;

use common::{mlp_forward, Layer, Mlp};
use ferrax::{grad, jit, DType, Static, Tensor, Tree};

fn vec_f32(t: &Tensor) -> Vec<f32> {
    t.to_vec::<f32>().unwrap()
}

#[test]
fn jit_runs_and_caches_by_signature() {
    let f = jit(|(x, y): (Tensor, Tensor)| (&x * &y + 1.0).sum(..));
    let a = Tensor::from_vec([3], vec![1.0f32, 2.0, 3.0]);
    let b = Tensor::from_vec([3], vec![4.0f32, 5.0, 6.0]);
    assert_eq!(
        vec_f32(&f.call((a.clone(), b.clone())).unwrap()),
        vec![35.0]
    );
    assert_eq!(
        vec_f32(&f.call((b.clone(), a.clone())).unwrap()),
        vec![35.0]
    );
    assert_eq!(f.trace_count(), 1, "same signature must hit the cache");
    assert_eq!(
        f.last_cache_miss().as_deref(),
        Some("first call: nothing compiled yet")
    );
    let c = Tensor::from_vec([2], vec![1.0f32, 1.0]);
    assert_eq!(vec_f32(&f.call((c.clone(), c)).unwrap()), vec![4.0]);
    assert_eq!(f.trace_count(), 2, "a new shape traces again");
    assert_eq!(
        f.last_cache_miss().as_deref(),
        Some("leaf 0: f32[3] -> f32[2]; leaf 1: f32[3] -> f32[2]")
    );
    let d = Tensor::from_vec([3], vec![1.0f64, 2.0, 3.0]);
    assert!(
        f.call((d.clone(), a))
            .unwrap_err()
            .to_string()
            .contains("f64"),
        "mixed dtypes are an error"
    );
    assert_eq!(
        f.last_cache_miss().as_deref(),
        Some("leaf 0: f32[3] -> f64[3]"),
        "explained against the closest signature"
    );
    assert_eq!(
        f.call((d.clone(), d)).unwrap().to_vec::<f64>().unwrap(),
        vec![17.0]
    );
    assert_eq!(f.trace_count(), 3, "a new dtype traces again");
}

#[test]
fn jit_with_struct_parameters() {
    let params = Mlp {
        layers: vec![
            Layer {
                w: Tensor::from_vec([2, 2], vec![1.0f32, -1.0, 2.0, 0.5]),
                b: Tensor::from_vec([2], vec![0.5f32, -4.0]),
            },
            Layer {
                w: Tensor::from_vec([2, 1], vec![1.0f32, 2.0]),
                b: Tensor::from_vec([1], vec![0.25f32]),
            },
        ],
    };
    let x = Tensor::from_vec([2, 2], vec![1.0f32, 2.0, -1.0, 3.0]);
    // Row 0: [1,2]@W1 = [5, 0] + b = [5.5, -4] -> relu [5.5, 0] -> 5.5 + 0.25 = 5.75.
    // Row 1: [-1,3]@W1 = [5, 2.5] + b = [5.5, -1.5] -> relu [5.5, 0] -> 5.75.
    let f = jit(|(p, x): (Mlp, Tensor)| mlp_forward(&p, &x));
    let out = f.call((params.clone(), x.clone())).unwrap();
    assert_eq!(out.shape(), &[2, 1]);
    assert_eq!(vec_f32(&out), vec![5.75, 5.75]);
    // Eager evaluation gives the same answer.
    assert_eq!(vec_f32(&mlp_forward(&params, &x)), vec![5.75, 5.75]);
}

#[test]
fn trees_round_trip_through_jit() {
    #[derive(Tree, Clone)]
    struct Pair(Tensor, Option<Tensor>);
    let f = jit(|(p, v): (Pair, Vec<Tensor>)| {
        let extra = p.1.clone().map(|t| t * 2.0);
        (Pair(&p.0 + &v[0], extra), [v[1].clone(), v[0].clone()])
    });
    let one = Tensor::from_vec([1], vec![1.0f32]);
    let two = Tensor::from_vec([1], vec![2.0f32]);
    let (pair, swapped) = f
        .call((
            Pair(one.clone(), Some(two.clone())),
            vec![two.clone(), one.clone()],
        ))
        .unwrap();
    assert_eq!(vec_f32(&pair.0), vec![3.0]);
    assert_eq!(vec_f32(pair.1.as_ref().unwrap()), vec![4.0]);
    assert_eq!(vec_f32(&swapped[0]), vec![1.0]);
    assert_eq!(vec_f32(&swapped[1]), vec![2.0]);
    let (pair, _) = f.call((Pair(one.clone(), None), vec![two, one])).unwrap();
    assert!(pair.1.is_none());
    assert_eq!(f.trace_count(), 2, "Some/None are different structures");
}

/// Static values (JAX's `static_argnums`) reach the function as they are and key the cache:
/// a new value compiles again, which the cache-miss explanation names; the same value hits.
#[test]
fn static_arguments_key_the_cache() {
    #[derive(Clone, Debug, PartialEq, Eq, Hash)]
    enum Activation {
        Relu,
        Square,
    }
    #[derive(Tree, Clone)]
    struct Layer {
        w: Tensor,
        activation: Static<Activation>,
    }
    let f = jit(|(layer, x, times): (Layer, Tensor, Static<usize>)| {
        let h = &x * &layer.w;
        let h = match layer.activation.0 {
            Activation::Relu => h.maximum(Tensor::scalar(0.0f32)),
            Activation::Square => h.square(),
        };
        (0..times.0).fold(h, |y, _| y * 2.0)
    });
    let x = Tensor::from_vec([2], vec![-1.0f32, 3.0]);
    let layer = |activation| Layer {
        w: Tensor::from_vec([2], vec![1.0f32, 1.0]),
        activation: Static(activation),
    };
    let run = |a: Activation, times: usize| {
        vec_f32(&f.call((layer(a), x.clone(), Static(times))).unwrap())
    };
    assert_eq!(run(Activation::Relu, 1), vec![0.0, 6.0]);
    assert_eq!(run(Activation::Relu, 3), vec![0.0, 24.0]);
    assert_eq!(
        f.last_cache_miss().as_deref(),
        Some("input structure ((*, static Relu), *, static 1) -> ((*, static Relu), *, static 3)")
    );
    assert_eq!(run(Activation::Square, 1), vec![2.0, 18.0]);
    assert_eq!(f.trace_count(), 3);
    assert_eq!(run(Activation::Relu, 3), vec![0.0, 24.0]);
    assert_eq!(
        f.trace_count(),
        3,
        "a static value seen before hits the cache"
    );
    // Gradients pass static values through to the result's structure.
    let g = grad(|(x, k): (Tensor, Static<i32>)| (&x * k.0 as f64).sum(..))((x.clone(), Static(5)));
    assert_eq!(vec_f32(&g.0), vec![5.0, 5.0]);
    assert_eq!(g.1, Static(5));
}

/// Fast math is opt-in per function: its PTX takes the approximate instructions, the
/// default's none, and on the CPU the result is the same either way.
#[test]
fn fast_math_is_opt_in_and_changes_only_gpu_code() {
    let f = |x: Tensor| x.exp().sin();
    let spec = Tensor::spec(DType::F32, [4096]);
    let accurate = jit(f).lower(&spec).unwrap().ptx().unwrap();
    let fast = jit(f).fast_math().lower(&spec).unwrap().ptx().unwrap();
    assert!(!accurate.contains(".approx"));
    assert!(fast.contains("ex2.approx.f32") && fast.contains("sin.approx.f32"));
    let x = Tensor::from_vec([3], vec![0.5f32, -1.0, 2.0]);
    assert_eq!(
        vec_f32(&jit(f).fast_math().call(x.clone()).unwrap()),
        vec_f32(&jit(f).call(x).unwrap())
    );
}

#[test]
fn lower_gives_every_stage_and_compile_an_executable() {
    let f = jit(|x: Tensor| (x.exp() * 1.0).sum(..)).named("total");
    let lowered = f.lower(&Tensor::spec(DType::F32, [1024, 1024])).unwrap();
    assert_eq!(f.trace_count(), 1);
    assert!(lowered.traced().to_string().contains("mul"), "as traced");
    assert!(lowered.simplify_report().contains("stopped"));
    let kernels = lowered.kernels().join("\n");
    assert!(
        kernels.contains("kernel @total_k0") && kernels.contains("f32x4"),
        "{kernels}"
    );
    assert!(lowered.ptx().unwrap().contains(".visible .entry total_k0("));
    let memory = lowered.memory().unwrap();
    assert_eq!(memory.inputs, 4 << 20);
    assert!(memory.peak <= memory.unplanned);
    let fused = lowered.fused().unwrap();
    assert!(fused.contains("  // row kernel @total_k0\n"), "{fused}");
    let ir = lowered.simplified();
    insta::assert_snapshot!(ir.to_string(), @r"
    func @total(%0: f32[1024,1024]) -> (f32[]) {
      %1 = exp %0 : f32[1024,1024]
      %2 = reduce_sum %1, axes=[0,1] : f32[]
      return %2
    }
    ");
    // The compiled executable runs without tracing again, and only on its own signature.
    let compiled = lowered.compile();
    let ones = Tensor::from_vec([1024, 1024], vec![0.0f32; 1024 * 1024]);
    assert_eq!(vec_f32(&compiled.call(ones).unwrap()), vec![1048576.0]);
    assert_eq!(f.trace_count(), 1);
    let err = compiled
        .call(Tensor::from_vec([2], vec![0.0f32; 2]))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("f32[1024,1024]") && err.contains("f32[2]"),
        "{err}"
    );
}

#[test]
fn nested_jit_is_inlined() {
    let inner = jit(|x: Tensor| x.exp());
    let outer = jit(|x: Tensor| {
        inner
            .call(x)
            .map(|e| e.sum(..))
            .unwrap_or_else(|_| Tensor::scalar(0.0f32))
    });
    let lowered = outer.lower(&Tensor::spec(DType::F32, [3])).unwrap();
    let ir = lowered.simplified();
    assert_eq!(ir.body.len(), 2, "{ir}");
    assert_eq!(inner.trace_count(), 0);
}

#[test]
fn constants_captured_from_the_environment() {
    let scale = Tensor::from_vec([3], vec![1.0f32, 10.0, 100.0]);
    let f = jit(|x: Tensor| &x * &scale);
    let out = f
        .call(Tensor::from_vec(
            [2, 3],
            vec![1.0f32, 1.0, 1.0, 2.0, 2.0, 2.0],
        ))
        .unwrap();
    assert_eq!(vec_f32(&out), vec![1.0, 10.0, 100.0, 2.0, 20.0, 200.0]);
}

#[test]
fn broadcasts_that_only_add_unit_dimensions_fuse_with_their_operand() {
    // The broadcast reads its operand element for element, computed in the same kernel.
    let f = jit(|x: Tensor| (&x * 2.0).broadcast_to([1, 2, 2]) + 1.0);
    let x = Tensor::from_vec([2, 2], vec![1.0f32, 2.0, 3.0, 4.0]);
    assert_eq!(vec_f32(&f.call(x).unwrap()), vec![3.0, 5.0, 7.0, 9.0]);
}

//! w12 (workloads.md): one SGD step (lr 0.01) of a small CNN on 32 images of 32 × 32 × 3,
//! NHWC: conv3x3 64, ReLU, conv3x3 64, ReLU, 2 × 2 max pool, conv3x3 128, ReLU, global mean
//! pool, dense 10, mean cross-entropy on the integer labels `i % 10`; SAME padding, He init;
//! as `jax_reference.py`'s `cnn_loss` (its compile time too, `w12_compile_cnn_step`).

use crate::{emit, normal, timed, Args};
use ferrax::{
    grad, jit, nn, ConvDims, ConvPadding, Convolution, DType, Padding, Result, Tensor, Tree,
};
use std::time::Instant;

#[derive(Tree, Clone)]
struct Cnn {
    c1: Tensor,
    c2: Tensor,
    c3: Tensor,
    w: Tensor,
    b: Tensor,
}

fn init() -> Cnn {
    let he = |shape: &[usize], seed: u64| {
        let fan_in: usize = shape[..shape.len() - 1].iter().product();
        normal(shape, seed) * (2.0 / fan_in as f64).sqrt()
    };
    Cnn {
        c1: he(&[3, 3, 3, 64], 41),
        c2: he(&[3, 3, 64, 64], 42),
        c3: he(&[3, 3, 64, 128], 43),
        w: he(&[128, 10], 44),
        b: Tensor::zeros(DType::F32, [10]),
    }
}

fn loss((p, x, y): (Cnn, Tensor, Tensor)) -> Tensor {
    // NHWC input and output, HWIO kernel.
    let nhwc = ConvDims {
        lhs_batch: 0,
        lhs_feature: 3,
        lhs_spatial: vec![1, 2],
        rhs_out_feature: 3,
        rhs_in_feature: 2,
        rhs_spatial: vec![0, 1],
        out_batch: 0,
        out_feature: 3,
        out_spatial: vec![1, 2],
    };
    let same = Convolution {
        padding: ConvPadding::Same,
        ..Convolution::new(nhwc)
    };
    let conv = |x: &Tensor, k: &Tensor| nn::relu(&x.conv_general_dilated(k, &same));
    let x = conv(&x, &p.c1);
    let x = nn::max_pool(&conv(&x, &p.c2), &[2, 2], Some(&[2, 2]), Padding::Valid);
    let x = conv(&x, &p.c3).mean([1, 2]);
    nn::softmax_cross_entropy_with_integer_labels(&(x.matmul(&p.w) + &p.b), &y).mean(..)
}

fn step((p, x, y): (Cnn, Tensor, Tensor)) -> Cnn {
    let g = grad(loss)((p.clone(), x, y)).0;
    Cnn {
        c1: &p.c1 - &(g.c1 * 0.01),
        c2: &p.c2 - &(g.c2 * 0.01),
        c3: &p.c3 - &(g.c3 * 0.01),
        w: &p.w - &(g.w * 0.01),
        b: &p.b - &(g.b * 0.01),
    }
}

pub fn rows(args: &Args) -> Result<()> {
    let p = init();
    let x = normal(&[32, 32, 32, 3], 45);
    let y = Tensor::from_vec([32], (0..32).map(|i| i % 10).collect::<Vec<i32>>());
    if args.want("w12_compile_cnn_step") {
        let start = Instant::now();
        jit(step).lower(&(p.clone(), x.clone(), y.clone()))?;
        let t = start.elapsed().as_secs_f64();
        emit("w12_compile_cnn_step", (t, t), None, None);
    }
    if args.want("w12_cnn_step") {
        let f = jit(step);
        let t = timed(args.reps, || {
            f.call((p.clone(), x.clone(), y.clone())).map(drop)
        })?;
        let flops = 6.0
            * 32.0
            * (32.0 * 32.0 * 9.0 * (3.0 * 64.0 + 64.0 * 64.0) + 16.0 * 16.0 * 9.0 * 64.0 * 128.0);
        emit("w12_cnn_step", t, None, Some(flops));
    }
    Ok(())
}

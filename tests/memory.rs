//! The CPU memory plan of a training step: the w9 GPT's step (`benches/src/gpt.rs`) peaks
//! within what its backward pass must keep, and parameters and optimizer state given by value
//! are updated in place.

// The benchmark's model; the test uses its step.
#[allow(dead_code)]
#[path = "../benches/src/gpt.rs"]
mod gpt;

use ferrax::optim::GradientTransformation;
use ferrax::{jit, Tensor, Tree};
use gpt::Config;

const F32: usize = 4;

/// Bytes of every leaf of `tree`.
fn bytes<T: Tree>(tree: &T) -> usize {
    let mut leaves = Vec::new();
    tree.flatten(&mut leaves);
    leaves.iter().map(|l| l.numel() * F32).sum()
}

/// The address of every f32 leaf's buffer, with its shape.
fn addresses<T: Tree>(tree: &T) -> Vec<(usize, Vec<usize>)> {
    let mut leaves = Vec::new();
    tree.flatten(&mut leaves);
    leaves
        .iter()
        .filter_map(|l| {
            let a = l.to_array().expect("data");
            Some((
                a.as_slice::<f32>().ok()?.as_ptr() as usize,
                l.shape().to_vec(),
            ))
        })
        .collect()
}

/// The w9 step's plan peaks below its inputs, one gradient per parameter and what the
/// backward pass keeps of each layer: the MLP's hidden values before and after GELU, a dozen
/// width-D values, four attention matrices per head; and the logits three times. Keeping
/// every elementwise intermediate of the forward pass (GELU's six per layer) took more.
#[test]
fn the_w9_step_peaks_within_what_its_backward_pass_keeps() {
    let (c, opt) = (Config::W9, gpt::optimizer(3e-4));
    let params = gpt::init(&c, &ferrax::random::key(0));
    let state = opt.init(&params);
    let tokens = Tensor::spec(ferrax::DType::I32, [c.batch, c.time]);
    let args = (params, state, tokens.clone(), tokens);
    let step = jit(gpt::train_step(c, opt));
    let memory = step
        .lower(&args)
        .expect("compiled")
        .memory()
        .expect("a plan");
    let (bt, d) = (c.batch * c.time, c.width);
    let per_layer = bt * (2 * 4 * d + 12 * d) + 4 * c.batch * c.heads * c.time * c.time;
    let bound = bytes(&args) + bytes(&args.0) + (c.layers * per_layer + 3 * bt * c.vocab) * F32;
    assert_eq!(memory.inputs, bytes(&args));
    assert!(memory.peak <= bound, "{memory:?}: over {bound} B");
}

/// Given by value, an optimizer's parameters and moments are written over their own buffers
/// (the update kernels read each element before they write it), step after step; held by
/// the caller, they are left as they were.
#[test]
fn donated_parameters_and_moments_are_updated_in_place() {
    let step = jit(|(p, m, g): (Vec<Tensor>, Vec<Tensor>, Vec<Tensor>)| {
        let m: Vec<Tensor> = m.iter().zip(&g).map(|(m, g)| m * 0.9 + g * 0.1).collect();
        let p: Vec<Tensor> = p.iter().zip(&m).map(|(p, m)| p - m * 0.01).collect();
        (p, m)
    });
    let leaves = |x: f32| -> Vec<Tensor> {
        [[64, 32], [64, 32], [32, 96], [96, 1]]
            .iter()
            .map(|&s| Tensor::from_vec(s, vec![x; s[0] * s[1]]))
            .collect()
    };
    let (mut p, mut m, g) = (leaves(1.0), leaves(0.0), leaves(2.0));
    for _ in 0..3 {
        let before = [addresses(&p), addresses(&m)].concat();
        (p, m) = step.call((p, m, g.clone())).expect("a step");
        assert_eq!([addresses(&p), addresses(&m)].concat(), before);
    }
    let held = p.clone();
    let (q, _) = step.call((p.clone(), m, g)).expect("a step");
    assert_ne!(addresses(&q), addresses(&held));
    assert_eq!(
        held[0].to_vec::<f32>().expect("data"),
        p[0].to_vec::<f32>().expect("data")
    );
}

/// With its products in bf16, the w9 step keeps little more than in f32: the values its
/// backward pass reads of GELU (such as `1 - tanh²`) are computed again there from the hidden
/// values it keeps anyway, as in f32, though each product's result is rounded on its way in.
/// What it may keep besides is a rounded copy of each weight matrix for the backward pass's
/// products (before, it also kept GELU's values: 195 MB against 166.5), and of each layer's
/// attention operands and softmax weights, which its attention's backward products read
/// (165 MB against 145 since attention is one op whose backward shares the forward softmax).
#[test]
fn the_bf16_step_keeps_no_more_than_the_f32_step_and_its_rounded_weights() {
    let (c, opt) = (Config::W9, gpt::optimizer(3e-4));
    let params = gpt::init(&c, &ferrax::random::key(0));
    let state = opt.init(&params);
    let mut leaves = Vec::new();
    params.flatten(&mut leaves);
    let matrices: usize = leaves
        .iter()
        .filter(|l| l.ndim() == 2)
        .map(|l| l.numel() * F32)
        .sum();
    let tokens = Tensor::spec(ferrax::DType::I32, [c.batch, c.time]);
    let args = (params, state, tokens.clone(), tokens);
    let bf16 = ferrax::DotPrecision::new(ferrax::DType::BF16, ferrax::DType::BF16);
    let f32_peak = jit(gpt::train_step(c, opt))
        .lower(&args)
        .expect("compiled")
        .memory()
        .expect("a plan")
        .peak;
    let bf16_step = gpt::train_step_with(c, gpt::optimizer(3e-4), bf16);
    let bf16_peak = jit(bf16_step)
        .lower(&args)
        .expect("compiled")
        .memory()
        .expect("a plan")
        .peak;
    const BF16: usize = 2;
    let (bt, d) = (c.batch * c.time, c.width);
    let attention = c.layers * (3 * bt * d + c.batch * c.heads * c.time * c.time) * BF16;
    assert!(
        bf16_peak <= f32_peak + matrices + attention,
        "bf16 {bf16_peak} B, f32 {f32_peak} B, weight matrices {matrices} B, rounded \
         attention operands and weights {attention} B"
    );
}

/// A kernel's output computed from no input it could write over (here from a broadcast
/// scalar) does not take a donated parameter's buffer ahead of that parameter's own update,
/// which lands in place as it does alone.
#[test]
fn an_output_of_no_donated_input_leaves_the_parameters_buffer_to_its_update() {
    let step = jit(|(s, p): (Tensor, Tensor)| {
        let filled = s.broadcast_to([256, 64]) * 2.0;
        (filled, &p - 0.5)
    });
    let mut p = Tensor::from_vec([256, 64], vec![1.0f32; 256 * 64]);
    for _ in 0..2 {
        let before = addresses(&p);
        let (filled, next) = step
            .call((Tensor::from_vec(Vec::<usize>::new(), vec![3.0f32]), p))
            .expect("a step");
        assert_eq!(addresses(&next), before, "the update in place");
        assert_eq!(filled.to_vec::<f32>().expect("data")[0], 6.0);
        p = next;
    }
    assert_eq!(p.to_vec::<f32>().expect("data")[0], 0.0);
}

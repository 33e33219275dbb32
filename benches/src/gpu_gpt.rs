//! The GPT rows on the GPU: w9 (the CPU's size, f32) and w10 (GPT-2 124M, T 1024, batch 8,
//! bf16 products summed in f32, as `jax_reference.py`'s `gpt_step(c10, jnp.bfloat16)`), each
//! with its compile time (trace to loaded) as a row of its own, and w9's GPU artifact's load
//! time (`w9_artifact_load`).

use crate::{emit_as, gpt, gpu_case, gpu_compile, uniform_indices, Args, Gpu};
use ferrax::optim::GradientTransformation;
use ferrax::{DType, DotPrecision, Result};
use std::time::Instant;

pub fn rows(args: &Args, gpu: &Gpu) -> Result<()> {
    let cases = [
        (
            "w9_gpt_step",
            "w9_compile_gpt_step_gpu",
            Some("w9_artifact_load"),
            gpt::Config::W9,
            None,
        ),
        (
            "w10_gpt2_124m_step",
            "w10_compile_gpt2_124m_step",
            None,
            gpt::Config::W10,
            Some(DotPrecision::new(DType::BF16, DType::BF16)),
        ),
    ];
    for (row, compile_row, artifact_row, c, precision) in cases {
        let artifact_row = artifact_row.filter(|r| args.want(r));
        if !args.want(row) && artifact_row.is_none() {
            continue;
        }
        let opt = gpt::optimizer(3e-4);
        let params = gpt::init(&c, &ferrax::random::key(0));
        let state = opt.init(&params);
        let idx = uniform_indices(&[c.batch, c.time], c.vocab, 12);
        let tgt = uniform_indices(&[c.batch, c.time], c.vocab, 13);
        let xs = (params, state, idx, tgt);
        let step = match precision {
            Some(p) => {
                Box::new(gpt::train_step_with(c, opt, p)) as Box<dyn Fn(_) -> _ + Send + Sync>
            }
            None => Box::new(gpt::train_step(c, opt)),
        };
        if let Some(name) = artifact_row {
            crate::compile::gpu_artifact_load(gpu, name, &step, &xs, args.reps)?;
        }
        if !args.want(row) {
            continue;
        }
        let start = Instant::now();
        gpu_compile(gpu, &step, &xs)?;
        let t = start.elapsed().as_secs_f64();
        emit_as(gpu.imp, compile_row, (t, t), None, None);
        gpu_case(gpu, args.reps, row, &step, xs, (None, Some(c.flops())))?;
    }
    Ok(())
}

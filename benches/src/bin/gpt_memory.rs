//! Peak memory of the w9 GPT step with its parameters and optimizer state donated: the memory
//! plan's figures, the process's peak resident set (`VmHWM`) over a few steps, and whether the
//! donated buffers were updated in place. `jax_memory.py` measures JAX's the same way.
//!
//! `cargo run --release -p ferrax-bench --bin gpt_memory -- [steps]` (with `LIVE=1`, it also
//! lists the values live at the plan's peak).

#[path = "../gpt.rs"]
#[allow(
    dead_code,
    reason = "the benchmark's model; only the step is used here"
)]
mod gpt;

use ferrax::optim::GradientTransformation;
use ferrax::{jit, Result, Tree};

/// A line of `/proc/self/status` in bytes (`VmRSS`, `VmHWM`); 0 where there is none.
fn status_bytes(key: &str) -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches(" kB").parse::<usize>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// The address of every leaf's buffer.
fn addresses<T: Tree>(tree: &T) -> Vec<usize> {
    let mut leaves = Vec::new();
    tree.flatten(&mut leaves);
    leaves
        .iter()
        .map(|l| {
            l.to_array().map_or(0, |a| {
                a.as_slice::<f32>().map_or(0, |s| s.as_ptr() as usize)
            })
        })
        .collect()
}

/// A hash of every leaf's bits (FNV-1a), to tell whether two runs computed the same values.
fn checksum<T: Tree>(tree: &T) -> u64 {
    let mut leaves = Vec::new();
    tree.flatten(&mut leaves);
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for l in &leaves {
        for x in l.to_vec::<f32>().unwrap_or_default() {
            h = (h ^ u64::from(x.to_bits())).wrapping_mul(0x100_0000_01b3);
        }
    }
    h
}

fn mb(bytes: usize) -> f64 {
    bytes as f64 / 1e6
}

fn main() -> Result<()> {
    let steps: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let (c, opt) = (gpt::Config::W9, gpt::optimizer(3e-4));
    let mut params = gpt::init(&c, &ferrax::random::key(0));
    let mut state = opt.init(&params);
    let corpus = gpt::corpus(c.vocab, 4096);
    let rss_args = status_bytes("VmRSS");
    let step = jit(gpt::train_step(c, opt));
    let (idx, tgt) = gpt::batch(&c, &corpus, 0);
    let lowered = step.lower(&(params.clone(), state.clone(), idx, tgt))?;
    let compiled = lowered.compile();
    // VmHWM starts again from here (Linux's clear_refs), as jax_memory.py's does.
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    let rss_compiled = status_bytes("VmRSS");
    if let Some(m) = lowered.memory() {
        println!(
            "plan: inputs {:.1} MB, outputs {:.1} MB, peak {:.1} MB, unplanned {:.1} MB",
            mb(m.inputs),
            mb(m.outputs),
            mb(m.peak),
            mb(m.unplanned)
        );
    }
    if std::env::var_os("LIVE").is_some() {
        print!("{}", lowered.live_at_peak().unwrap_or_default());
    }
    let mut in_place = 0;
    for s in 0..steps {
        let (idx, tgt) = gpt::batch(&c, &corpus, s);
        let before = [addresses(&params), addresses(&state)].concat();
        let (loss, p, st) = compiled.call((params, state, idx, tgt))?;
        let after = [addresses(&p), addresses(&st)].concat();
        in_place = before.iter().zip(&after).filter(|(a, b)| a == b).count();
        println!(
            "step {s}: loss {:.4}, leaves in place {in_place}/{}, rss {:.1} MB, hwm {:.1} MB",
            loss.to_vec::<f32>()?[0],
            after.len(),
            mb(status_bytes("VmRSS")),
            mb(status_bytes("VmHWM"))
        );
        (params, state) = (p, st);
    }
    println!(
        "checksum of parameters and state: {:016x}",
        checksum(&params) ^ checksum(&state).rotate_left(1)
    );
    let hwm = status_bytes("VmHWM");
    println!(
        "rss after args {:.1} MB, after compile {:.1} MB, peak {:.1} MB: steps added {:.1} MB; {in_place} leaves in place",
        mb(rss_args),
        mb(rss_compiled),
        mb(hwm),
        mb(hwm.saturating_sub(rss_compiled))
    );
    Ok(())
}

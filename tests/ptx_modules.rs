//! A GPU plan's PTX split into modules of about `MODULE_BYTES` each, which a CUDA device
//! compiles on several threads at once: together they hold the one module's entries, in
//! order, and a program of several modules runs as the interpreter on a CUDA device where
//! there is one (`FERRAX_REQUIRE_GPU=1` makes its absence a failure), else on the emulated GPU.
#![allow(clippy::unwrap_used)]

mod common;

#[allow(dead_code)]
#[path = "../benches/src/gpt.rs"]
mod gpt;

use common::{assert_close, inputs};
use ferrax::compiler::backend::gpu::{GpuOptions, GpuPlan, GpuProgram};
use ferrax::compiler::backend::ptx::{MathMode, PtxTarget, MODULE_BYTES};
use ferrax::compiler::simplify::simplify;
use ferrax::optim::GradientTransformation;
use ferrax::runtime::{interpret, CudaDevice};
use ferrax::{jit, DType, Tensor};
use ferrax_ptx_emu::Emulator;

/// The module's text after its header.
fn entries(module: &str) -> &str {
    let at = module.find(".address_size 64\n").unwrap() + ".address_size 64\n".len();
    &module[at..]
}

#[test]
fn modules_hold_the_programs_entries_in_order() {
    let mut programs = common::corpus();
    programs.extend(common::gradient_programs());
    programs.extend(common::benchmark_programs());
    // A training step of a GPT of two small layers: over 64 KiB of PTX.
    let c = gpt::Config {
        vocab: 16,
        time: 8,
        width: 16,
        heads: 2,
        layers: 2,
        batch: 2,
    };
    let opt = gpt::optimizer(3e-4);
    let params = gpt::init(&c, &ferrax::random::key(0));
    let state = opt.init(&params);
    let idx = Tensor::zeros(DType::I32, [c.batch, c.time]);
    let step = jit(gpt::train_step(c, opt));
    let lowered = step.lower(&(params, state, idx.clone(), idx)).unwrap();
    programs.push(("gpt_step", lowered.simplified().clone()));
    let mut split = Vec::new();
    for (name, func) in &programs {
        let (simple, _) = simplify(func).unwrap();
        let plan = GpuPlan::new(&simple, PtxTarget::Sm90, MathMode::Accurate).unwrap();
        let joined: String = plan.modules.iter().map(|(m, _)| entries(m)).collect();
        assert_eq!(joined, entries(&plan.ptx), "{name}");
        let declared: usize = plan.modules.iter().map(|(_, n)| n).sum();
        assert_eq!(declared, plan.ptx.matches(".entry ").count(), "{name}");
        for (k, (module, n)) in plan.modules.iter().enumerate() {
            assert_eq!(module.matches(".entry ").count(), *n, "{name}");
            // A module of several entries stays within the size (its entries' separating
            // newlines aside), and would pass it with the next module's entries.
            let size = entries(module).len();
            assert!(*n == 1 || size <= MODULE_BYTES + n, "{name}: {size} bytes");
            if let Some((next, _)) = plan.modules.get(k + 1) {
                assert!(size + entries(next).len() > MODULE_BYTES, "{name}");
            }
        }
        if plan.modules.len() > 1 {
            split.push((name, simple));
        }
    }
    let names: Vec<&str> = split.iter().map(|(n, _)| **n).collect();
    assert!(names.contains(&"gpt_step"), "of several modules: {names:?}");
    // On a CUDA device too, where there is one: there the modules load on several threads.
    let device = CudaDevice::new(0).ok();
    assert!(
        device.is_some() || std::env::var_os("FERRAX_REQUIRE_GPU").is_none(),
        "FERRAX_REQUIRE_GPU is set but there is no CUDA device"
    );
    for (name, simple) in &split {
        let args = inputs(simple, 7);
        let want = interpret(simple, &args).unwrap();
        let got = match &device {
            Some(dev) => GpuProgram::compile(simple, dev, GpuOptions::HIGHEST)
                .unwrap()
                .run(&args),
            None => GpuProgram::compile(simple, &Emulator::default(), GpuOptions::HIGHEST)
                .unwrap()
                .run(&args),
        };
        for (g, w) in got.unwrap().iter().zip(&want) {
            assert_close(g, w, 2e-5, name);
        }
    }
}

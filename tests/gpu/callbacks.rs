//! Host callbacks on the GPU: a program's `debug::callback`s (in a device loop too) and
//! `pure_callback`s run as host steps between its kernels, in the order traced, with their
//! operands copied from the device.

use super::{device, Emulator};
use ferrax::compiler::backend::gpu::{GpuMachine, GpuOptions, GpuProgram};
use ferrax::runtime::interpret;
use ferrax::{debug, lax, pure_callback, trace, Array, DType, Tensor, VmapMethod};
use std::sync::{Arc, Mutex};

/// `x ↦ x³` elementwise on f32 arrays, computed on the host.
fn cube(values: &[Array]) -> Result<Array, String> {
    let x = values[0].as_slice::<f32>().map_err(|e| e.to_string())?;
    let cubed: Vec<f32> = x.iter().map(|v| v * v * v).collect();
    Array::from_vec(values[0].shape().clone(), cubed).map_err(|e| e.to_string())
}

/// `exp`, then a callback on it, a 3-step loop calling back with its index, and a host cube of
/// the loop's result: the log the callbacks leave, and the program.
fn program() -> (Arc<Mutex<Vec<String>>>, ferrax::ir::Func) {
    let log = Arc::new(Mutex::new(Vec::new()));
    let record = |label: &'static str, args: &[&Tensor]| {
        let log = log.clone();
        debug::callback(
            move |values| {
                let text = debug::format("{}", values).unwrap();
                log.lock().unwrap().push(format!("{label} {text}"));
            },
            args,
        )
        .unwrap();
    };
    let func = trace(
        |x: Tensor| {
            let y = x.exp();
            record("y", &[&y]);
            let looped = lax::fori_loop(
                0,
                3,
                |i, acc: Tensor| {
                    record("i", &[&i]);
                    acc + 1.0
                },
                y,
            );
            pure_callback(
                cube,
                looped.ty().clone(),
                &[&looped],
                VmapMethod::Sequential,
            ) * 2.0
        },
        &Tensor::spec(DType::F32, [2]),
    )
    .unwrap();
    (log, func)
}

fn callbacks_run_in_order_on<M: GpuMachine + Clone>(gpu: &M) {
    let (log, func) = program();
    let input = [Array::from_vec([2], vec![0.0f32, 1.0]).unwrap()];
    let want = interpret(&func, &input).unwrap();
    let interpreted = std::mem::take(&mut *log.lock().unwrap());
    assert_eq!(interpreted, ["y [1.0, 2.7182817]", "i 0", "i 1", "i 2"]);
    let exe = GpuProgram::compile(&func, gpu, GpuOptions::HIGHEST).unwrap();
    for run in 0..2 {
        let got = exe.run(&input).unwrap();
        let values = got[0].as_slice::<f32>().unwrap();
        let expected = want[0].as_slice::<f32>().unwrap();
        for (g, w) in values.iter().zip(expected) {
            assert!(
                (g - w).abs() <= 1e-5 * w.abs(),
                "run {run}: {g} against {w}"
            );
        }
        assert_eq!(*log.lock().unwrap(), interpreted, "run {run}");
        log.lock().unwrap().clear();
    }
}

#[test]
fn host_callbacks_run_between_the_devices_kernels_in_order() {
    if let Some(dev) = device() {
        callbacks_run_in_order_on(&dev);
    }
    callbacks_run_in_order_on(&Emulator::default());
}

//! Programs `tests/fuzz_runtime/` found the backends mishandling (issue #26): each must now
//! compile for the CPU and the emulated GPU and compute the interpreter's results.
#![allow(clippy::unwrap_used)]

mod common;

use ferrax::compiler::backend::gpu::{GpuOptions, GpuProgram};
use ferrax::compiler::backend::CpuExecutable;
use ferrax::compiler::simplify::simplify;
use ferrax::ir::parse_func;
use ferrax::runtime::interpret;
use ferrax_ptx_emu::Emulator;

/// `text` simplified and run on both backends, each against the interpreter.
fn agrees_on_both_backends(text: &str) {
    let func = parse_func(text).unwrap();
    let args = common::inputs(&func, 3);
    let want = interpret(&func, &args).unwrap();
    for simple in [func.clone(), simplify(&func).unwrap().0] {
        let cpu = CpuExecutable::compile(&simple).unwrap_or_else(|e| panic!("CPU: {e}\n{text}"));
        assert_eq!(cpu.run(&args).unwrap(), want, "CPU\n{text}");
        let emulator = Emulator::default();
        let gpu = GpuProgram::compile(&simple, &emulator, GpuOptions::HIGHEST)
            .unwrap_or_else(|e| panic!("GPU: {e}\n{text}"));
        assert_eq!(gpu.run(&args).unwrap(), want, "GPU\n{text}");
    }
}

/// A row reduction over no rows: its result and the elements both have no elements, so the
/// row kernel took the reduction's consumers as elements and could not be lowered ("could not
/// lower instructions 0..7 to a kernel", both backends). Fusion makes no row kernel of no rows.
#[test]
fn row_reduction_over_no_rows() {
    agrees_on_both_backends(
        "func @main(%0: f32[0,17], %1: f32[17]) -> (f32[0,17]) {
  %2 = broadcast_in_dim %1, dims=[1] : f32[0,17]
  %3 = sub %0, %2 : f32[0,17]
  %4 = mul %3, %3 : f32[0,17]
  %5 = reduce_sum %4, axes=[1] : f32[0]
  %6 = reshape %5 : f32[0,1]
  %7 = broadcast_in_dim %6, dims=[0,1] : f32[0,17]
  %8 = mul %3, %7 : f32[0,17]
  return %8
}",
    );
}

/// Layer norm of no rows (the fuzzer's input, from the benchmark workload with its rows set
/// to 0).
#[test]
fn layer_norm_of_no_rows() {
    agrees_on_both_backends(
        "func @main(%0: f32[0,17], %1: f32[17], %2: f32[17]) -> (f32[0,17]) {
  %3 = reduce_sum %0, axes=[1] : f32[0]
  %4 = reshape %3 : f32[0,1]
  %5 = constant 1024.0 : f32[0,1]
  %6 = div %4, %5 : f32[0,1]
  %7 = broadcast_in_dim %6, dims=[0,1] : f32[0,17]
  %8 = sub %0, %7 : f32[0,17]
  %9 = mul %8, %8 : f32[0,17]
  %10 = reduce_sum %9, axes=[1] : f32[0]
  %11 = reshape %10 : f32[0,1]
  %12 = constant 1024.0 : f32[0,1]
  %13 = div %11, %12 : f32[0,1]
  %14 = constant 1e-5 : f32[0,1]
  %15 = add %14, %13 : f32[0,1]
  %16 = rsqrt %15 : f32[0,1]
  %17 = broadcast_in_dim %16, dims=[0,1] : f32[0,17]
  %18 = mul %8, %17 : f32[0,17]
  %19 = broadcast_in_dim %1, dims=[1] : f32[0,17]
  %20 = mul %18, %19 : f32[0,17]
  %21 = broadcast_in_dim %2, dims=[1] : f32[0,17]
  %22 = add %20, %21 : f32[0,17]
  return %22
}",
    );
}

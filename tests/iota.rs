//! Iotas fused into kernels: each element's index along an axis computed from the kernel's
//! element index, on the CPU (as whole vectors where a vector's lanes are one index or
//! consecutive ones, else as scalars) and in PTX kernels (in the emulator), bit for bit the
//! interpreter's. A PRNG draw is a hash of an iota, so this is what keeps it one kernel.
#![allow(clippy::unwrap_used, clippy::panic)]

use ferrax::compiler::backend::gpu::{GpuOptions, GpuProgram};
use ferrax::compiler::backend::CpuExecutable;
use ferrax::ir::{parse_func, Elements};
use ferrax::runtime::interpret;
use ferrax::{Array, Func};
use ferrax_ptx_emu::Emulator;

/// `x + iota * 3` for `x` of `dtype[dims]`, the iota along `dim`.
fn program(dtype: &str, dims: &[usize], dim: usize) -> Func {
    let shape = dims
        .iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join(",");
    let ty = format!("{dtype}[{shape}]");
    parse_func(&format!(
        "func @f(%0: {ty}) -> ({ty}) {{\n  %1 = iota dim={dim} : {ty}\n  %2 = constant 3 : {ty}\n  %3 = mul %1, %2 : {ty}\n  %4 = add %0, %3 : {ty}\n  return %4\n}}"
    ))
    .unwrap()
}

fn input(dtype: &str, dims: &[usize]) -> Array {
    let n: usize = dims.iter().product();
    let data = match dtype {
        "u32" => Elements::U32(
            (0..n as u32)
                .map(|i| i.wrapping_mul(2_654_435_761))
                .collect(),
        ),
        _ => Elements::I32((0..n as i32).map(|i| i.wrapping_mul(-7)).collect()),
    };
    Array::new(dims.to_vec(), data).unwrap()
}

#[test]
fn fused_iotas_are_the_interpreters_on_the_cpu_and_the_gpu() {
    let cases: &[(&[usize], usize)] = &[
        (&[1027], 0),    // the flat index itself, with a scalar tail
        (&[6, 8], 1),    // consecutive lanes within rows of whole vectors
        (&[6, 8], 0),    // one index per vector (stride of whole vectors)
        (&[2, 3, 8], 1), // divided and wrapped, one index per vector
        (&[5, 3], 0),    // lanes that cross rows: scalar code
        (&[5, 3], 1),
        (&[4, 6, 2], 2), // a unit stride whose runs wrap inside a vector: scalar code
        (&[0, 4], 1),    // no elements
    ];
    for dtype in ["u32", "i32"] {
        for &(dims, dim) in cases {
            let func = program(dtype, dims, dim);
            let inputs = [input(dtype, dims)];
            let want = interpret(&func, &inputs).unwrap();
            let exe = CpuExecutable::compile(&func).unwrap();
            assert!(
                !exe.fused().contains("interpreter"),
                "the iota is fused:\n{}",
                exe.fused()
            );
            let got = exe.run(&inputs).unwrap();
            assert_eq!(
                got[0].elements(),
                want[0].elements(),
                "CPU {dtype} {dims:?} {dim}"
            );
            let gpu =
                GpuProgram::compile(&func, &Emulator::default(), GpuOptions::HIGHEST).unwrap();
            assert_eq!(gpu.host_steps(), 0, "{func}");
            let got = gpu.run(&inputs).unwrap();
            assert_eq!(
                got[0].elements(),
                want[0].elements(),
                "GPU {dtype} {dims:?} {dim}"
            );
        }
    }
}

#[test]
fn iotas_of_other_types_stay_with_the_interpreter() {
    // f32 iotas (and i64, u8) are not kernel values; the program still runs.
    let func = parse_func(
        "func @f(%0: f32[8]) -> (f32[8]) {\n  %1 = iota dim=0 : f32[8]\n  %2 = add %0, %1 : f32[8]\n  return %2\n}",
    )
    .unwrap();
    let x = Array::new([8], Elements::F32(vec![0.5; 8])).unwrap();
    let exe = CpuExecutable::compile(&func).unwrap();
    let got = exe.run(std::slice::from_ref(&x)).unwrap();
    assert_eq!(
        got[0].elements(),
        interpret(&func, &[x]).unwrap()[0].elements()
    );
}

//! Every kernel operation on every element type, on the CPU backend and the GPU plan, against
//! the backend's support table: what the table computes (natively or expanded) must be in a
//! kernel and give the interpreter's results (exactly where native, within the expansions'
//! bound where expanded); what it leaves to the host must be a host step. So a new op or dtype
//! that a backend lacks is an explicit host step, never a kernel that fails to compile, a
//! silent fallback or a wrong result.
#![allow(clippy::unwrap_used, clippy::panic)]

use ferrax::compiler::backend::gpu::{GpuOptions, GpuPlan, GpuProgram};
use ferrax::compiler::backend::ptx::{self, MathMode, PtxTarget};
use ferrax::compiler::backend::{cpu, CpuExecutable};
use ferrax::compiler::target::{KernelOp, Support, Target};
use ferrax::ir::{ulp_distance, Complex, Elements, FuncBuilder, Op};
use ferrax::runtime::interpret;
use ferrax::{Array, DType, Func, TensorType};
use ferrax_ptx_emu::Emulator;

/// Elements per operand: not a multiple of a vector, so SIMD loops have a tail.
const LEN: usize = 37;

/// Values of `dtype` covering signs, zeros, fractions, large magnitudes, infinities and NaN
/// (floats), and the extremes (integers); `shift` rotates them so operands differ.
fn values(dtype: DType, shift: usize) -> Array {
    let floats = [
        -2.5, -1.0, -0.0, 0.0, 0.5, 1.0, 3.75, 100.0, 1e-3, -7.25, 0.3, 2.0, -0.5, 1e4, 40.0,
    ];
    let special = [f64::NAN, f64::INFINITY, f64::NEG_INFINITY];
    let ints: [i64; 10] = [-7, -1, 0, 1, 2, 5, 3, -2, 100, 9];
    let pick = |i: usize| (i * 7 + shift) % LEN;
    let data = match dtype {
        DType::F32 | DType::F64 | DType::F16 | DType::BF16 => {
            let all: Vec<f64> = floats.iter().chain(&special).copied().collect();
            let v: Vec<f64> = (0..LEN).map(|i| all[pick(i) % all.len()]).collect();
            match dtype {
                DType::F32 => Elements::F32(v.iter().map(|&x| x as f32).collect()),
                DType::F64 => Elements::F64(v),
                DType::F16 => Elements::F16(v.iter().map(|&x| half::f16::from_f64(x)).collect()),
                _ => Elements::BF16(v.iter().map(|&x| half::bf16::from_f64(x)).collect()),
            }
        }
        DType::I32 => {
            let mut v: Vec<i32> = (0..LEN)
                .map(|i| ints[pick(i) % ints.len()] as i32)
                .collect();
            v[shift % LEN] = i32::MIN;
            v[(shift + 3) % LEN] = i32::MAX;
            Elements::I32(v)
        }
        DType::I64 => {
            let mut v: Vec<i64> = (0..LEN).map(|i| ints[pick(i) % ints.len()]).collect();
            v[shift % LEN] = i64::MIN;
            v[(shift + 3) % LEN] = i64::MAX;
            Elements::I64(v)
        }
        // Shift amounts either side of the width, and the values whose order differs signed.
        DType::U32 => {
            let words = [
                0,
                1,
                31,
                32,
                33,
                7,
                0x8000_0000,
                u32::MAX,
                100,
                0x7fff_ffff,
                2,
                9,
            ];
            Elements::U32((0..LEN).map(|i| words[pick(i) % words.len()]).collect())
        }
        DType::U8 => Elements::U8((0..LEN).map(|i| (pick(i) * 37 % 256) as u8).collect()),
        // The small integers, shift amounts either side of the width, and the extremes.
        DType::I8 => {
            let mut v: Vec<i8> = (0..LEN).map(|i| ints[pick(i) % ints.len()] as i8).collect();
            v[shift % LEN] = i8::MIN;
            v[(shift + 3) % LEN] = i8::MAX;
            v[(shift + 5) % LEN] = 8;
            Elements::I8(v)
        }
        DType::I16 => {
            let mut v: Vec<i16> = (0..LEN)
                .map(|i| ints[pick(i) % ints.len()] as i16)
                .collect();
            v[shift % LEN] = i16::MIN;
            v[(shift + 3) % LEN] = i16::MAX;
            v[(shift + 5) % LEN] = 16;
            Elements::I16(v)
        }
        DType::U16 => {
            let words = [0, 1, 15, 16, 17, 7, 0x8000, u16::MAX, 100, 0x7fff, 2, 9];
            Elements::U16((0..LEN).map(|i| words[pick(i) % words.len()]).collect())
        }
        DType::U64 => {
            let words = [
                0,
                1,
                63,
                64,
                65,
                7,
                1 << 63,
                u64::MAX,
                100,
                i64::MAX as u64,
                2,
                9,
            ];
            Elements::U64((0..LEN).map(|i| words[pick(i) % words.len()]).collect())
        }
        // Pairs of the float values, the parts offset so that they differ.
        DType::C64 | DType::C128 => {
            let all: Vec<f64> = floats.iter().chain(&special).copied().collect();
            let part = |i: usize, k: usize| all[(pick(i) + k) % all.len()];
            let z = |i: usize| (part(i, 0), part(i, 5));
            match dtype {
                DType::C64 => Elements::C64(
                    (0..LEN)
                        .map(|i| Complex::new(z(i).0 as f32, z(i).1 as f32))
                        .collect(),
                ),
                _ => Elements::C128((0..LEN).map(|i| Complex::new(z(i).0, z(i).1)).collect()),
            }
        }
        DType::Bool => Elements::Bool((0..LEN).map(|i| pick(i) % 3 == 0).collect()),
    };
    Array::new([LEN], data).unwrap()
}

/// A program of one `op` on `dtype` (and its inputs), or `None` where the IR does not define
/// it (the verifier's shape and dtype rules).
fn program(op: KernelOp, dtype: DType) -> Option<(Func, Vec<Array>)> {
    let ty = |d: DType| TensorType::new(d, [LEN]);
    let mut b = FuncBuilder::new("op");
    let (ir_op, operands): (Op, Vec<DType>) = match op {
        KernelOp::Unary(u) => (Op::Unary(u), vec![dtype]),
        KernelOp::Binary(o) => (Op::Binary(o), vec![dtype, dtype]),
        KernelOp::Compare(c) => (Op::Compare(c), vec![dtype, dtype]),
        KernelOp::Select => (Op::Select, vec![DType::Bool, dtype, dtype]),
        KernelOp::Clamp => (Op::Clamp, vec![dtype, dtype, dtype]),
        KernelOp::Convert(to) => (Op::Convert { to }, vec![dtype]),
        KernelOp::Bitcast(to) => (Op::BitcastConvert { to }, vec![dtype]),
        // Elements picked by i32 indices, out-of-range ones (the extremes) clamped.
        KernelOp::RowGather => (
            Op::Gather(Box::new(ferrax::ir::Gather {
                offset_dims: vec![],
                collapsed_slice_dims: vec![0],
                operand_batching_dims: vec![],
                start_indices_batching_dims: vec![],
                start_index_map: vec![0],
                index_vector_dim: 1,
                slice_sizes: vec![1],
                indices_are_sorted: false,
            })),
            vec![dtype, DType::I32],
        ),
        KernelOp::Iota => (
            Op::Iota {
                dtype,
                shape: [LEN].into(),
                dim: 0,
            },
            vec![],
        ),
        // Held values, reductions and windows are walked by their own tests.
        KernelOp::Hold | KernelOp::RowReduce(_) | KernelOp::ColumnReduce(_) | KernelOp::Window => {
            return None
        }
    };
    let params: Vec<_> = operands.iter().map(|&d| b.param(ty(d))).collect();
    let y = b.push(ir_op, &params).ok()?;
    let inputs = operands
        .iter()
        .enumerate()
        .map(|(k, &d)| values(d, 5 * k))
        .collect();
    Some((b.finish(vec![y]), inputs))
}

/// The largest distance in ULPs of the result type between `a` and `b` (NaNs equal), or
/// `u64::MAX` where integers or bools differ.
fn distance(a: &Array, b: &Array) -> u64 {
    assert_eq!(a.ty(), b.ty());
    let (x, y) = (a.elements(), b.elements());
    (0..x.len())
        .map(|i| match (x.get(i), y.get(i)) {
            (p, q) if p.dtype().is_float() => {
                let same_zero = p.to_f64() == 0.0 && q.to_f64() == 0.0;
                let sign = p.to_f64().is_sign_negative() != q.to_f64().is_sign_negative();
                if same_zero && sign {
                    u64::MAX
                } else {
                    ulp_distance(p, q)
                }
            }
            (p, q) if p == q => 0,
            _ => u64::MAX,
        })
        .max()
        .unwrap_or(0)
}

/// The bound a kernel's result is held to: native operations are the interpreter's bits;
/// expansions are within 3 ULP in f32, 4 in f64 (`kernel::math`, `compiler/tests/math_ulp.rs`),
/// a rounding of that to a half type within 1, and exact elsewhere (halves' arithmetic,
/// compares of bools as logic, conversions spelled out bit for bit).
fn bound(op: KernelOp, dtype: DType, support: Support) -> u64 {
    let transcendental = matches!(
        op,
        KernelOp::Unary(
            ferrax::ir::UnaryOp::Exp
                | ferrax::ir::UnaryOp::Expm1
                | ferrax::ir::UnaryOp::Log
                | ferrax::ir::UnaryOp::Log1p
                | ferrax::ir::UnaryOp::Rsqrt
                | ferrax::ir::UnaryOp::Tanh
                | ferrax::ir::UnaryOp::Logistic
                | ferrax::ir::UnaryOp::Sin
                | ferrax::ir::UnaryOp::Cos
        ) | KernelOp::Binary(ferrax::ir::BinaryOp::Pow)
    );
    // f64 pow is exp(y·log x) in plain f64, whose error grows with |y·log x|: 31 ULP at the
    // largest powers sampled here (the GPU's expansion; the CPU calls the host's pow).
    if op == KernelOp::Binary(ferrax::ir::BinaryOp::Pow) && dtype == DType::F64 {
        return if support == Support::Expand { 64 } else { 0 };
    }
    match (support, transcendental, dtype) {
        (Support::Expand, true, DType::F16 | DType::BF16) => 1,
        (Support::Expand, true, DType::F64) => 4,
        (Support::Expand, true, _) => 3,
        _ => 0,
    }
}

#[test]
fn every_op_on_every_dtype_runs_as_the_cpu_table_says() {
    let target: Target = cpu::support::TARGET;
    let (mut kernels, mut host, mut undefined) = (0, 0, 0);
    for op in KernelOp::all() {
        for dtype in DType::ALL {
            let Some((func, inputs)) = program(op, dtype) else {
                undefined += 1;
                continue;
            };
            let what = format!("{op:?} on {dtype}");
            let support = target.support(op, dtype);
            let exe = CpuExecutable::compile(&func).unwrap_or_else(|e| panic!("{what}: {e}"));
            let in_kernel = exe.kernels().count() == 1;
            assert_eq!(
                in_kernel,
                support != Support::Host,
                "{what}: the table says {support:?}, fused:\n{}",
                exe.fused()
            );
            if in_kernel {
                kernels += 1;
            } else {
                host += 1;
            }
            let expected = interpret(&func, &inputs).unwrap();
            let actual = exe.run(&inputs).unwrap_or_else(|e| panic!("{what}: {e}"));
            let d = distance(&actual[0], &expected[0]);
            assert!(
                d <= bound(op, dtype, support),
                "{what} ({support:?}): {d} ULP from the interpreter\n{:?}\n{:?}",
                actual[0].elements(),
                expected[0].elements()
            );
        }
    }
    // The walk covers both sides of the table.
    assert!(
        kernels > 150 && host > 20,
        "{kernels} in kernels, {host} on the host"
    );
    assert!(undefined > 0);
}

#[test]
fn every_op_on_every_dtype_is_planned_as_the_gpu_table_says() {
    for mode in [MathMode::Accurate, MathMode::Fast] {
        let target = ptx::support::target(mode);
        for op in KernelOp::all() {
            for dtype in DType::ALL {
                let Some((func, _)) = program(op, dtype) else {
                    continue;
                };
                let what = format!("{op:?} on {dtype} ({mode:?})");
                let plan = GpuPlan::new(&func, PtxTarget::Sm80, mode)
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
                let on_host = plan.host_ops().contains(&func.body[0].op.name());
                let fused = target.support(op, dtype) != Support::Host;
                // An unfused gather is the GPU's gather step, an unfused iota a constant.
                let own_step = matches!(op, KernelOp::RowGather | KernelOp::Iota);
                assert_eq!(
                    on_host,
                    !fused && !own_step,
                    "{what}: the table says {:?}",
                    target.support(op, dtype)
                );
                assert_eq!(plan.kernels.len(), usize::from(fused), "{what}");
            }
        }
    }
}

/// The accurate GPU plans of the walk above, run on the emulated GPU (the executor a CUDA
/// device runs, on the PTX emulator) against the interpreter.
#[test]
fn every_op_on_every_dtype_runs_on_the_emulated_gpu_as_the_table_says() {
    let target = ptx::support::target(MathMode::Accurate);
    let gpu = Emulator::default();
    let mut kernels = 0;
    for op in KernelOp::all() {
        for dtype in DType::ALL {
            let Some((func, inputs)) = program(op, dtype) else {
                continue;
            };
            let what = format!("{op:?} on {dtype}");
            let support = target.support(op, dtype);
            let exe = GpuProgram::compile(&func, &gpu, GpuOptions::HIGHEST)
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            // A gather the table keeps out of kernels is the GPU's gather step instead, an
            // iota a constant.
            let own_step = matches!(op, KernelOp::RowGather | KernelOp::Iota);
            assert_eq!(
                exe.host_steps(),
                usize::from(support == Support::Host && !own_step),
                "{what}"
            );
            kernels += usize::from(support != Support::Host);
            let expected = interpret(&func, &inputs).unwrap();
            let actual = exe.run(&inputs).unwrap_or_else(|e| panic!("{what}: {e}"));
            let d = distance(&actual[0], &expected[0]);
            assert!(
                d <= bound(op, dtype, support),
                "{what} ({support:?}): {d} ULP from the interpreter\n{:?}\n{:?}",
                actual[0].elements(),
                expected[0].elements()
            );
        }
    }
    assert!(kernels > 200, "{kernels} in kernels");
}

/// Small integers (`i % 11 - 5`, bools every third), whose sums every float type holds
/// exactly, so reductions in any order agree with the interpreter's.
fn ramp(dtype: DType, shape: [usize; 2]) -> Array {
    let n = shape[0] * shape[1];
    let v: Vec<i64> = (0..n as i64).map(|i| i % 11 - 5).collect();
    let data = match dtype {
        DType::F32 => Elements::F32(v.iter().map(|&x| x as f32).collect()),
        DType::F64 => Elements::F64(v.iter().map(|&x| x as f64).collect()),
        DType::F16 => Elements::F16(v.iter().map(|&x| half::f16::from_f64(x as f64)).collect()),
        DType::BF16 => Elements::BF16(v.iter().map(|&x| half::bf16::from_f64(x as f64)).collect()),
        DType::I32 => Elements::I32(v.iter().map(|&x| x as i32).collect()),
        DType::I64 => Elements::I64(v),
        DType::U32 => Elements::U32(v.iter().map(|&x| x as u32).collect()),
        DType::U8 => Elements::U8(v.iter().map(|&x| (x + 5) as u8).collect()),
        DType::I8 => Elements::I8(v.iter().map(|&x| x as i8).collect()),
        DType::I16 => Elements::I16(v.iter().map(|&x| x as i16).collect()),
        DType::U16 => Elements::U16(v.iter().map(|&x| (x + 5) as u16).collect()),
        DType::U64 => Elements::U64(v.iter().map(|&x| (x + 5) as u64).collect()),
        DType::Bool => Elements::Bool(v.iter().map(|&x| x % 3 == 0).collect()),
        DType::C64 => Elements::C64(
            v.iter()
                .map(|&x| Complex::new(x as f32, -x as f32))
                .collect(),
        ),
        DType::C128 => Elements::C128(
            v.iter()
                .map(|&x| Complex::new(x as f64, -x as f64))
                .collect(),
        ),
    };
    Array::new(shape, data).unwrap()
}

/// Reductions over trailing axes become row kernels and over leading axes parts of flat
/// kernels exactly where the CPU table computes them.
#[test]
fn reductions_fuse_as_the_cpu_table_says() {
    let target = cpu::support::TARGET;
    for op in ferrax::ir::ReduceOp::ALL {
        for dtype in DType::ALL {
            for (axis, kind) in [
                (1, KernelOp::RowReduce(op)),
                (0, KernelOp::ColumnReduce(op)),
            ] {
                let mut b = FuncBuilder::new("reduce");
                let x = b.param(TensorType::new(dtype, [3, LEN]));
                // A producer, so a column reduction has a flat kernel to join.
                let Ok(y) = b.push(Op::Unary(ferrax::ir::UnaryOp::Neg), &[x]) else {
                    continue;
                };
                let Ok(r) = b.push(
                    Op::Reduce {
                        op,
                        axes: vec![axis],
                    },
                    &[y],
                ) else {
                    continue;
                };
                let func = b.finish(vec![r]);
                let what = format!("{kind:?} on {dtype}");
                let exe = CpuExecutable::compile(&func).unwrap_or_else(|e| panic!("{what}: {e}"));
                let reduced_in_kernel = exe
                    .fused()
                    .lines()
                    .skip_while(|l| !l.contains("kernel @"))
                    .take_while(|l| !l.contains("// interpreter"))
                    .any(|l| l.contains(op.name()));
                let computes = target.computes(kind, dtype)
                    && target.computes(KernelOp::Unary(ferrax::ir::UnaryOp::Neg), dtype);
                assert_eq!(reduced_in_kernel, computes, "{what}:\n{}", exe.fused());
                let inputs = [ramp(dtype, [3, LEN])];
                let expected = interpret(&func, &inputs).unwrap();
                let actual = exe.run(&inputs).unwrap();
                assert_eq!(distance(&actual[0], &expected[0]), 0, "{what}");
            }
        }
    }
}

//! Small kernels the emulator runs with PTX's semantics: shuffles across a warp, the special
//! registers of a grid, conversions saturating and rounding as the hardware's do.
#![allow(clippy::unwrap_used)]

use ferrax_ptx_emu::{launch, Memory, Module};

/// `body` as the only entry `name` of a module for sm_80, with `params` u64 parameters
/// `{name}_param_{i}`.
fn module(name: &str, params: usize, body: &str) -> Module {
    let params: Vec<String> = (0..params)
        .map(|i| format!("\t.param .u64 {name}_param_{i}"))
        .collect();
    Module::parse(&format!(
        ".version 7.0\n.target sm_80\n.address_size 64\n.visible .entry {name}(\n{}\n)\n{{\n{body}\n}}\n",
        params.join(",\n")
    ))
    .unwrap()
}

fn u32s(bytes: &[u8]) -> Vec<u32> {
    bytes
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// Each lane adds its index across the warp by butterfly shuffles, then stores the sum, its
/// block's index and the block size: every lane of every block holds the whole sum.
#[test]
fn butterfly_shuffles_sum_a_warp() {
    let body = "\
	.reg .b32 %r<12>;
	.reg .b64 %rd<5>;
	mov.u32 %r1, %tid.x;
	shfl.sync.bfly.b32 %r2, %r1, 16, 31, -1;
	add.s32 %r3, %r1, %r2;
	shfl.sync.bfly.b32 %r4, %r3, 8, 31, -1;
	add.s32 %r5, %r3, %r4;
	shfl.sync.bfly.b32 %r6, %r5, 4, 31, -1;
	add.s32 %r7, %r5, %r6;
	shfl.sync.bfly.b32 %r8, %r7, 2, 31, -1;
	add.s32 %r9, %r7, %r8;
	shfl.sync.bfly.b32 %r10, %r9, 1, 31, -1;
	add.s32 %r11, %r9, %r10;
	mov.u32 %r2, %ctaid.x;
	mad.lo.s32 %r3, %r2, 32, %r1;
	mul.wide.u32 %rd1, %r3, 12;
	ld.param.u64 %rd2, [warp_param_0];
	add.s64 %rd3, %rd2, %rd1;
	st.global.b32 [%rd3], %r11;
	st.global.b32 [%rd3+4], %r2;
	mov.u32 %r4, %ntid.x;
	st.global.b32 [%rd3+8], %r4;
	ret;";
    let module = module("warp", 1, body);
    let mut memory = Memory::default();
    let out = memory.alloc(&[0; 2 * 32 * 12]);
    launch(module.entry("warp").unwrap(), 2, 32, &[out], &mut memory).unwrap();
    let got = u32s(memory.read(out, 2 * 32 * 12).unwrap());
    for (t, v) in got.chunks_exact(3).enumerate() {
        assert_eq!(v, [496, t as u32 / 32, 32], "thread {t}");
    }
}

/// A kernel converting each thread's f32 with `cvt`, `mode` and `to` as given.
fn convert_f32(cvt: &str, inputs: &[f32]) -> Vec<u32> {
    let body = format!(
        "\
	.reg .b32 %r<3>;
	.reg .f32 %f<2>;
	.reg .b64 %rd<6>;
	mov.u32 %r1, %tid.x;
	mul.wide.u32 %rd1, %r1, 4;
	ld.param.u64 %rd2, [cvt_param_0];
	add.s64 %rd3, %rd2, %rd1;
	ld.global.f32 %f1, [%rd3];
	{cvt} %r2, %f1;
	ld.param.u64 %rd4, [cvt_param_1];
	add.s64 %rd5, %rd4, %rd1;
	st.global.b32 [%rd5], %r2;
	ret;"
    );
    let module = module("cvt", 2, &body);
    let mut memory = Memory::default();
    let bytes: Vec<u8> = inputs.iter().flat_map(|x| x.to_le_bytes()).collect();
    let input = memory.alloc(&bytes);
    let output = memory.alloc(&vec![0; bytes.len()]);
    let threads = inputs.len() as u32;
    let entry = module.entry("cvt").unwrap();
    launch(entry, 1, threads, &[input, output], &mut memory).unwrap();
    u32s(memory.read(output, bytes.len()).unwrap())
}

/// Float to integer conversions round by their mode and saturate, NaN going to 0.
#[test]
fn float_to_integer_conversions_saturate() {
    let inputs = [1.5, -2.5, 2.5, f32::NAN, 3e10, -3e10, f32::INFINITY];
    let truncated = convert_f32("cvt.rzi.s32.f32", &inputs);
    let want = [1, -2, 2, 0, i32::MAX, i32::MIN, i32::MAX];
    assert_eq!(truncated, want.map(|x| x as u32));
    let nearest = convert_f32("cvt.rni.s32.f32", &inputs);
    let want = [2, -2, 2, 0, i32::MAX, i32::MIN, i32::MAX];
    assert_eq!(nearest, want.map(|x| x as u32));
    let unsigned = convert_f32("cvt.rmi.u32.f32", &inputs);
    assert_eq!(unsigned, [1, 0, 2, 0, u32::MAX, 0, u32::MAX]);
}

/// `cvt.rn.f16.f64` rounds once, to the nearest f16: a value just past a tie goes up, where
/// rounding through f32 would have made it the tie and rounded to even.
#[test]
fn f64_to_f16_conversions_round_once() {
    let body = "\
	.reg .b16 %h<2>;
	.reg .f64 %fd<2>;
	.reg .b64 %rd<3>;
	ld.param.u64 %rd1, [half_param_0];
	ld.global.f64 %fd1, [%rd1];
	cvt.rn.f16.f64 %h1, %fd1;
	ld.param.u64 %rd2, [half_param_1];
	st.global.b16 [%rd2], %h1;
	ret;";
    let module = module("half", 2, body);
    let tie = 1.0 + 2f64.powi(-11);
    for (x, want) in [
        (tie, half::f16::ONE),
        (
            tie + 2f64.powi(-40),
            half::f16::from_f64(1.0 + 2f64.powi(-10)),
        ),
        (65520.0, half::f16::INFINITY),
        (65519.0, half::f16::MAX),
    ] {
        let mut memory = Memory::default();
        let input = memory.alloc(&x.to_le_bytes());
        let output = memory.alloc(&[0; 2]);
        let entry = module.entry("half").unwrap();
        launch(entry, 1, 1, &[input, output], &mut memory).unwrap();
        let got = half::f16::from_le_bytes(memory.read(output, 2).unwrap().try_into().unwrap());
        assert_eq!(got.to_bits(), want.to_bits(), "{x}");
    }
}

/// Every thread of two blocks adds its index, and takes the minimum and maximum of it, into the
/// same words with `red`: each reduction lands, whatever the threads' order.
#[test]
fn reductions_into_global_memory_combine_every_thread() {
    let body = "\
	.reg .b32 %r<4>;
	.reg .b64 %rd<5>;
	.reg .f32 %f<2>;
	mov.u32 %r1, %tid.x;
	mov.u32 %r2, %ctaid.x;
	mad.lo.s32 %r3, %r2, 32, %r1;
	ld.param.u64 %rd1, [red_param_0];
	cvta.to.global.u64 %rd1, %rd1;
	red.global.add.s32 [%rd1], %r3;
	red.global.min.s32 [%rd1+4], %r3;
	red.global.max.s32 [%rd1+8], %r3;
	cvt.rn.f32.u32 %f1, %r3;
	red.global.add.f32 [%rd1+12], %f1;
	cvt.u64.u32 %rd2, %r3;
	red.global.add.u64 [%rd1+16], %rd2;
	ret;";
    let module = module("red", 1, body);
    let mut memory = Memory::default();
    let start: Vec<u8> = [5i32, 7, -3, 0]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .chain(10u64.to_le_bytes())
        .collect();
    let out = memory.alloc(&start);
    launch(module.entry("red").unwrap(), 2, 32, &[out], &mut memory).unwrap();
    let got = memory.read(out, 24).unwrap();
    let word = |k: usize| i32::from_le_bytes(got[4 * k..4 * k + 4].try_into().unwrap());
    assert_eq!(word(0), 5 + (0..64).sum::<i32>());
    assert_eq!(word(1), 0);
    assert_eq!(word(2), 63);
    assert_eq!(f32::from_le_bytes(got[12..16].try_into().unwrap()), 2016.0);
    assert_eq!(
        u64::from_le_bytes(got[16..24].try_into().unwrap()),
        10 + 2016
    );
}

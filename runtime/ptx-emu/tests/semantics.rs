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

/// The lanes of a warp each hold their fragments of a 16x16 bf16 `A`, a 16x8 bf16 `B` and a
/// 16x8 f32 `C`, laid out as the PTX ISA's tables for `mma.m16n8k16` say (written here element
/// by element, independently of the emulator's register-pair loops); the warp's `mma.sync`
/// leaves each lane its fragment of `A·B + C`.
#[test]
fn tensor_core_products_follow_the_fragment_layouts() {
    let body = "\
	.reg .b32 %r<12>;
	.reg .f32 %f<9>;
	.reg .b64 %rd<5>;
	mov.u32 %r1, %tid.x;
	mul.wide.u32 %rd1, %r1, 48;
	ld.param.u64 %rd2, [mma_param_0];
	add.s64 %rd3, %rd2, %rd1;
	ld.global.v4.b32 {%r2, %r3, %r4, %r5}, [%rd3];
	ld.global.v2.b32 {%r6, %r7}, [%rd3+16];
	ld.global.v2.f32 {%f1, %f2}, [%rd3+24];
	ld.global.v2.f32 {%f3, %f4}, [%rd3+32];
	mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%f5, %f6, %f7, %f8}, {%r2, %r3, %r4, %r5}, {%r6, %r7}, {%f1, %f2, %f3, %f4};
	mul.wide.u32 %rd1, %r1, 16;
	ld.param.u64 %rd2, [mma_param_1];
	add.s64 %rd4, %rd2, %rd1;
	st.global.v4.f32 [%rd4], {%f5, %f6, %f7, %f8};
	ret;";
    // Small integers and halves: exact in bf16, and every sum exact in f32.
    let a = |r: usize, c: usize| ((r * 16 + c) % 7) as f32 - 3.0;
    let b = |r: usize, c: usize| ((r * 8 + c) % 5) as f32 * 0.5 - 1.0;
    let c = |r: usize, col: usize| (r * 8 + col) as f32;
    let bf16 = |x: f32| (x.to_bits() >> 16) as u16;
    let mut lanes = Vec::new();
    for lane in 0..32 {
        let (group, in_group) = (lane >> 2, lane % 4);
        // a_i: row groupID for 0 <= i < 2 or 4 <= i < 6, else groupID + 8; column
        // threadID_in_group * 2 + (i & 1), plus 8 for i >= 4.
        let a_elements: Vec<u16> = (0..8)
            .map(|i| {
                let row = if i < 2 || (4..6).contains(&i) {
                    group
                } else {
                    group + 8
                };
                let col = in_group * 2 + (i & 1) + if i >= 4 { 8 } else { 0 };
                bf16(a(row, col))
            })
            .collect();
        // b_i: row threadID_in_group * 2 + (i & 1), plus 8 for i >= 2; column groupID.
        let b_elements: Vec<u16> = (0..4)
            .map(|i| {
                let row = in_group * 2 + (i & 1) + if i >= 2 { 8 } else { 0 };
                bf16(b(row, group))
            })
            .collect();
        // c_i: row groupID for i < 2, else groupID + 8; column threadID_in_group * 2 + (i & 1).
        let c_elements: Vec<f32> = (0..4)
            .map(|i| c(group + if i < 2 { 0 } else { 8 }, in_group * 2 + (i & 1)))
            .collect();
        // Each register holds two elements, the lower-numbered in its low half.
        for pair in a_elements.chunks(2).chain(b_elements.chunks(2)) {
            let word = u32::from(pair[0]) | (u32::from(pair[1]) << 16);
            lanes.extend_from_slice(&word.to_le_bytes());
        }
        for x in c_elements {
            lanes.extend_from_slice(&x.to_le_bytes());
        }
        // Padding, so that each lane's first load is aligned to its 16 bytes.
        lanes.extend_from_slice(&[0; 8]);
    }
    let module = module("mma", 2, body);
    let mut memory = Memory::default();
    let input = memory.alloc(&lanes);
    let output = memory.alloc(&[0; 32 * 16]);
    launch(
        module.entry("mma").unwrap(),
        1,
        32,
        &[input, output],
        &mut memory,
    )
    .unwrap();
    let got = memory.read(output, 32 * 16).unwrap();
    for lane in 0..32 {
        let (group, in_group) = (lane >> 2, lane % 4);
        for i in 0..4 {
            let row = group + if i < 2 { 0 } else { 8 };
            let col = in_group * 2 + (i & 1);
            let want = (0..16).fold(c(row, col), |s, k| s + a(row, k) * b(k, col));
            let at = 16 * lane + 4 * i;
            let d = f32::from_le_bytes(got[at..at + 4].try_into().unwrap());
            assert_eq!(d, want, "lane {lane}, d{i} (row {row}, column {col})");
        }
    }
}

/// `cvt.rn.bf16x2.f32` rounds two f32 to bf16 to nearest (ties to even) and packs them, the
/// first operand's in the upper half.
#[test]
fn packing_conversions_round_two_floats_into_one_register() {
    let body = "\
	.reg .b32 %r<3>;
	.reg .f32 %f<5>;
	.reg .b64 %rd<2>;
	mov.f32 %f1, 0f3F808000;
	mov.f32 %f2, 0f3F818000;
	mov.f32 %f3, 0fC0490FDB;
	mov.f32 %f4, 0f7F800000;
	cvt.rn.bf16x2.f32 %r1, %f1, %f2;
	cvt.rn.bf16x2.f32 %r2, %f3, %f4;
	ld.param.u64 %rd1, [pack_param_0];
	st.global.v2.b32 [%rd1], {%r1, %r2};
	ret;";
    let module = module("pack", 1, body);
    let mut memory = Memory::default();
    let out = memory.alloc(&[0; 8]);
    launch(module.entry("pack").unwrap(), 1, 1, &[out], &mut memory).unwrap();
    let got = u32s(memory.read(out, 8).unwrap());
    // 1 + 2^-8 ties down to 1 (0x3F80), 1 + 3 * 2^-8 up to 1 + 2^-6 (0x3F82); -pi to
    // 0xC049; infinity stays 0x7F80.
    assert_eq!(got, [0x3F80_3F82, 0xC049_7F80]);
}

/// `max.f32` and `min.f32` compare as floats: negative values, infinities, a NaN operand
/// giving the other, +0 the greater zero.
#[test]
fn float_maxima_and_minima_compare_floats() {
    let body = "\
	.reg .f32 %f<13>;
	.reg .b64 %rd<2>;
	mov.f32 %f1, 0fC0000000;
	mov.f32 %f2, 0fBF800000;
	mov.f32 %f3, 0fFF800000;
	mov.f32 %f4, 0f7FC00000;
	mov.f32 %f5, 0f80000000;
	mov.f32 %f6, 0f00000000;
	max.f32 %f7, %f1, %f2;
	min.f32 %f8, %f1, %f2;
	max.f32 %f9, %f3, %f1;
	max.f32 %f10, %f4, %f1;
	max.f32 %f11, %f5, %f6;
	min.f32 %f12, %f6, %f5;
	ld.param.u64 %rd1, [minmax_param_0];
	st.global.v4.f32 [%rd1], {%f7, %f8, %f9, %f10};
	st.global.v2.f32 [%rd1+16], {%f11, %f12};
	ret;";
    let module = module("minmax", 1, body);
    let mut memory = Memory::default();
    let out = memory.alloc(&[0; 24]);
    launch(module.entry("minmax").unwrap(), 1, 1, &[out], &mut memory).unwrap();
    let got = u32s(memory.read(out, 24).unwrap());
    let f = |x: f32| x.to_bits();
    assert_eq!(got, [f(-1.0), f(-2.0), f(-2.0), f(-2.0), f(0.0), f(-0.0)]);
}

/// Parameters read through their address, as a launch's loop over repeated kernels reads each
/// one's buffers: 8 bytes a parameter, in order, from the first's address; a read beyond the
/// last parameter is a bug of the kernel's.
#[test]
fn parameters_read_through_their_addresses() {
    let body = "\
	.reg .b32 %r<3>;
	.reg .b64 %rd<6>;
	mov.u64 %rd1, params_param_0;
	ld.param.u64 %rd2, [%rd1+16];
	ld.param.u64 %rd3, [params_param_1+8];
	mov.u32 %r1, 7;
	st.global.b32 [%rd2], %r1;
	mov.u32 %r2, 9;
	st.global.b32 [%rd3], %r2;
	ld.param.u64 %rd4, [%rd1+24];
	ret;";
    let module = module("params", 3, body);
    let mut memory = Memory::default();
    let buffers: Vec<u64> = (0..3).map(|_| memory.alloc(&[0; 4])).collect();
    let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        launch(module.entry("params").unwrap(), 1, 1, &buffers, &mut memory)
    }));
    let message = run.err().and_then(|e| e.downcast::<String>().ok()).unwrap();
    assert!(message.contains("outside the parameters"), "{message}");
    // Both stores went to the third parameter's buffer, the later last.
    assert_eq!(u32s(memory.read(buffers[2], 4).unwrap()), [9]);
    for b in &buffers[..2] {
        assert_eq!(u32s(memory.read(*b, 4).unwrap()), [0]);
    }
}

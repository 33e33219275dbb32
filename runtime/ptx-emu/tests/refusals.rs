//! The emulator refuses what the hardware would fault on, not load, not launch, or order
//! either way, so that kernels it runs would run on a GPU: probe kernels, each showing one
//! refusal next to the same kernel run as it may be.
#![allow(clippy::unwrap_used)]

use ferrax_ptx_emu::{launch, EmulatorError, Memory, Module};

/// What goes wrong running `f`: the error it returns or the message it panics with.
fn complaint(f: impl FnOnce() -> Result<(), EmulatorError>) -> Option<String> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(Ok(())) => None,
        Ok(Err(e)) => Some(e.to_string()),
        Err(panic) => Some(
            panic
                .downcast_ref::<String>()
                .cloned()
                .unwrap_or_else(|| format!("{:?}", panic.downcast_ref::<&str>())),
        ),
    }
}

/// `body` as the only entry `name` of a module for sm_80, with `params` u64 parameters
/// `{name}_param_{i}` and the given directives (`.maxntid`, register declarations).
fn module(name: &str, params: usize, body: &str) -> String {
    let params: Vec<String> = (0..params)
        .map(|i| format!("\t.param .u64 {name}_param_{i}"))
        .collect();
    format!(
        ".version 7.0\n.target sm_80\n.address_size 64\n.visible .entry {name}(\n{}\n)\n{{\n{body}\n}}\n",
        params.join(",\n")
    )
}

/// A kernel copying 16 bytes a thread, from `offset` bytes into its input, under `.maxntid 64`.
fn probe_module(offset: u64) -> Module {
    Module::parse(&module(
        "probe",
        2,
        &format!(
            "\
.maxntid 64, 1, 1
	.reg .b32 %r<2>;
	.reg .b64 %rd<6>;
	.reg .f32 %f<5>;
	ld.param.u64 %rd1, [probe_param_0];
	ld.param.u64 %rd2, [probe_param_1];
	mov.u32 %r1, %tid.x;
	mul.wide.u32 %rd3, %r1, 16;
	add.s64 %rd4, %rd1, %rd3;
	add.s64 %rd4, %rd4, {offset};
	ld.global.nc.v4.f32 {{%f1, %f2, %f3, %f4}}, [%rd4];
	add.s64 %rd5, %rd2, %rd3;
	st.global.v4.f32 [%rd5], {{%f1, %f2, %f3, %f4}};
	ret;"
        ),
    ))
    .unwrap()
}

/// Runs the probe over `threads` threads, `offset` bytes into an input of `input_bytes`;
/// returns the emulator's complaint, if any.
fn probe(threads: u32, offset: u64, input_bytes: usize) -> Option<String> {
    let module = probe_module(offset);
    let mut memory = Memory::default();
    let input = memory.alloc(&vec![1; input_bytes]);
    let output = memory.alloc(&vec![0; 16 * threads as usize]);
    complaint(|| {
        launch(
            module.entry("probe")?,
            1,
            threads,
            &[input, output],
            &mut memory,
        )
    })
}

#[test]
fn the_probe_runs_where_it_may() {
    assert_eq!(probe(64, 0, 16 * 64), None);
}

/// A vector access not aligned to its size faults ("misaligned address").
#[test]
fn misaligned_vector_accesses_are_refused() {
    let misaligned = probe(4, 8, 16 * 64).unwrap();
    assert!(misaligned.contains("misaligned"), "{misaligned}");
}

/// An access past its buffer is refused, even one that stays in the emulator's memory (in the
/// padding after it or the next buffer).
#[test]
fn accesses_past_a_buffer_are_refused() {
    let past_the_end = probe(64, 16, 16 * 64).unwrap();
    assert!(
        past_the_end.contains("outside every buffer"),
        "{past_the_end}"
    );
}

/// A block larger than the entry's `.maxntid` does not launch.
#[test]
fn blocks_beyond_maxntid_do_not_launch() {
    let too_many = probe(128, 0, 16 * 128).unwrap();
    assert!(too_many.contains("more than 64"), "{too_many}");
}

/// A block of other than the entry's `.reqntid` threads does not launch; one of them does.
#[test]
fn blocks_other_than_reqntid_do_not_launch() {
    let text = module(
        "exact",
        0,
        "\
.reqntid 64, 1, 1
	ret;",
    );
    let module = Module::parse(&text).unwrap();
    let entry = module.entry("exact").unwrap();
    let mut memory = Memory::default();
    for block in [32, 96] {
        let refused = launch(entry, 1, block, &[], &mut memory).unwrap_err();
        assert!(
            refused.to_string().contains("not the 64 required"),
            "{refused}"
        );
    }
    launch(entry, 1, 64, &[], &mut memory).unwrap();
}

/// Neither does an empty grid or block, nor a launch with the wrong parameter count.
#[test]
fn empty_launches_and_missing_parameters_are_refused() {
    let module = probe_module(0);
    let mut memory = Memory::default();
    let input = memory.alloc(&[0; 16]);
    let entry = module.entry("probe").unwrap();
    for (grid, block) in [(0, 1), (1, 0)] {
        let refused = launch(entry, grid, block, &[input, input], &mut memory).unwrap_err();
        assert!(matches!(refused, EmulatorError::Launch(_)), "{refused}");
    }
    let refused = launch(entry, 1, 1, &[input], &mut memory).unwrap_err();
    assert!(refused.to_string().contains("1 parameters"), "{refused}");
}

/// More than 48 KiB of static shared memory does not launch.
#[test]
fn more_than_48_kib_of_shared_memory_does_not_launch() {
    let ptx = module("big", 0, "\t.shared .align 8 .b8 big_slots[49152];\n\tret;");
    let module = Module::parse(&ptx).unwrap();
    let refused = launch(
        module.entry("big").unwrap(),
        1,
        1,
        &[],
        &mut Memory::default(),
    );
    assert!(
        refused
            .unwrap_err()
            .to_string()
            .contains("bytes of shared memory"),
        "{ptx}"
    );
}

/// A kernel of two warps, each thread storing its index to shared memory and then reading
/// the slot of the thread 32 on (in the other warp), with or without a barrier between.
fn shared_exchange(barrier: bool) -> Option<String> {
    let sync = if barrier { "bar.sync 0;" } else { "" };
    let module = Module::parse(&module(
        "exchange",
        1,
        &format!(
            "\
.maxntid 64, 1, 1
	.reg .b32 %r<8>;
	.reg .b64 %rd<4>;
	.shared .align 8 .b8 exchange_slots[256];
	mov.u32 %r1, %tid.x;
	mov.u32 %r2, exchange_slots;
	shl.b32 %r3, %r1, 2;
	add.s32 %r4, %r2, %r3;
	st.shared.b32 [%r4], %r1;
	{sync}
	xor.b32 %r5, %r3, 128;
	add.s32 %r6, %r2, %r5;
	ld.shared.b32 %r7, [%r6];
	ld.param.u64 %rd1, [exchange_param_0];
	mul.wide.u32 %rd2, %r1, 4;
	add.s64 %rd3, %rd1, %rd2;
	st.global.b32 [%rd3], %r7;
	ret;"
        ),
    ))
    .unwrap();
    let mut memory = Memory::default();
    let output = memory.alloc(&[0; 256]);
    complaint(|| launch(module.entry("exchange")?, 1, 64, &[output], &mut memory))
}

/// Shared memory another warp wrote, read with no barrier between: a race the hardware may
/// order either way, whichever order the emulator happened to run the warps in.
#[test]
fn shared_memory_races_are_refused() {
    assert_eq!(shared_exchange(true), None);
    let race = shared_exchange(false).unwrap();
    assert!(race.contains("shared memory race"), "{race}");
}

/// ptxas refuses a register the entry does not declare; so does loading in the emulator.
#[test]
fn undeclared_registers_are_refused() {
    let declared = "\t.reg .b32 %r<2>;\n\tmov.u32 %r1, %tid.x;\n\tret;";
    assert!(Module::parse(&module("regs", 0, declared)).is_ok());
    // %r<2> declares %r0 and %r1 only.
    let beyond = "\t.reg .b32 %r<2>;\n\tmov.u32 %r2, %tid.x;\n\tret;";
    let refused = Module::parse(&module("regs", 0, beyond)).unwrap_err();
    assert_eq!(
        refused,
        EmulatorError::Undeclared {
            entry: "regs".into(),
            register: "%r2".into()
        }
    );
    let unknown = "\t.reg .b32 %r<2>;\n\tmov.f32 %f1, 0f3F800000;\n\tret;";
    let refused = Module::parse(&module("regs", 0, unknown)).unwrap_err();
    assert!(
        refused.to_string().contains("%f1 not declared"),
        "{refused}"
    );
}

#[test]
fn missing_entries_are_refused() {
    let module = probe_module(0);
    assert_eq!(
        module.entry("absent").unwrap_err(),
        EmulatorError::NoEntry("absent".into())
    );
}

/// Reading a register no instruction has written.
#[test]
fn registers_read_before_written_are_refused() {
    let body = "\
	.reg .b32 %r<3>;
	.reg .b64 %rd<4>;
	ld.param.u64 %rd1, [unwritten_param_0];
	mul.wide.u32 %rd2, %r1, 4;
	add.s64 %rd3, %rd1, %rd2;
	st.global.b32 [%rd3], %r2;
	ret;";
    let module = Module::parse(&module("unwritten", 1, body)).unwrap();
    let mut memory = Memory::default();
    let output = memory.alloc(&[0; 4]);
    let refused =
        complaint(|| launch(module.entry("unwritten")?, 1, 1, &[output], &mut memory)).unwrap();
    assert!(
        refused.contains("register read before written"),
        "{refused}"
    );
}

/// Threads of a block waiting at different barriers never go on.
#[test]
fn threads_at_different_barriers_are_refused() {
    let body = "\
	.reg .pred %p<2>;
	.reg .b32 %r<2>;
	mov.u32 %r1, %tid.x;
	setp.lt.u32 %p1, %r1, 32;
	@%p1 bra $L__first;
	bar.sync 0;
	ret;
$L__first:
	bar.sync 0;
	ret;";
    let module = Module::parse(&module("barriers", 0, body)).unwrap();
    let mut memory = Memory::default();
    let entry = module.entry("barriers").unwrap();
    // One warp: every thread at the first barrier.
    assert_eq!(complaint(|| launch(entry, 1, 32, &[], &mut memory)), None);
    let refused = complaint(|| launch(entry, 1, 64, &[], &mut memory)).unwrap();
    assert!(refused.contains("different synchronizations"), "{refused}");
}

/// A shuffle needs every lane of the warp.
#[test]
fn shuffles_with_exited_lanes_are_refused() {
    let body = "\
	.reg .pred %p<2>;
	.reg .b32 %r<3>;
	mov.u32 %r1, %tid.x;
	setp.ge.u32 %p1, %r1, 16;
	@%p1 ret;
	shfl.sync.bfly.b32 %r2, %r1, 1, 31, -1;
	ret;";
    let module = Module::parse(&module("lanes", 0, body)).unwrap();
    let mut memory = Memory::default();
    let refused = complaint(|| launch(module.entry("lanes")?, 1, 32, &[], &mut memory)).unwrap();
    assert!(
        refused.contains("warp instruction with exited lanes"),
        "{refused}"
    );
}

/// Host copies, like kernels' accesses, stay within one buffer.
#[test]
fn host_copies_outside_every_buffer_are_refused() {
    let mut memory = Memory::default();
    let a = memory.alloc(&[1, 2, 3, 4]);
    let b = memory.alloc(&[5, 6]);
    assert_eq!(memory.read(a, 4).unwrap(), &[1, 2, 3, 4]);
    memory.write(b, &[7, 8]).unwrap();
    assert_eq!(memory.read(b, 2).unwrap(), &[7, 8]);
    assert_eq!(
        memory.read(a, 5).unwrap_err(),
        EmulatorError::Outside { address: a, len: 5 }
    );
    assert!(memory.write(b + 1, &[0, 0]).is_err());
    assert!(memory.read(0, 1).is_err());
}

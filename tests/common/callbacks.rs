//! What the host-callback tests share: running a program on every backend, and its printed
//! form with the process's callback ids masked.

use ferrax::compiler::backend::gpu::{GpuOptions, GpuProgram};
use ferrax::compiler::backend::CpuExecutable;
use ferrax::{Array, Func};

/// Runs `func` on `input` in the interpreter, on the CPU and on the emulated GPU, each of the
/// latter two giving the interpreter's results, calling `after(backend)` after each run (to
/// check what the callbacks saw); the interpreter's results.
pub fn run_on_every_backend(
    func: &Func,
    input: &[Array],
    mut after: impl FnMut(&str),
) -> Vec<Array> {
    let out = ferrax::runtime::interpret(func, input).unwrap();
    after("interpreter");
    let cpu = CpuExecutable::compile(func).unwrap();
    assert_eq!(cpu.run(input).unwrap(), out, "CPU");
    after("CPU");
    let emulator = ferrax_ptx_emu::Emulator::default();
    let gpu = GpuProgram::compile(func, &emulator, GpuOptions::HIGHEST).unwrap();
    assert_eq!(gpu.run(input).unwrap(), out, "emulated GPU");
    after("emulated GPU");
    out
}

/// `func`'s text, which must parse back to it, with every `callback=<id>` shown as
/// `callback=N`: ids depend on what else this process registered first.
pub fn masked_text(func: &Func) -> String {
    let text = func.to_string();
    assert_eq!(ferrax::ir::parse_func(&text).unwrap(), *func);
    let mut shown = String::new();
    for (k, part) in text.split("callback=").enumerate() {
        if k > 0 {
            shown.push_str("callback=N");
        }
        shown.push_str(part.trim_start_matches(|c: char| c.is_ascii_digit()));
    }
    shown
}

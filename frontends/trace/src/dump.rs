//! `FERRAX_DUMP=dir`: every program ferrax traces or derives is written to `dir`, one file per
//! stage, so a user can see what was traced and how it was differentiated.

use ferrax_compiler::backend::gpu::GpuOptions;
use ferrax_compiler::backend::ptx::PtxTarget;
use ferrax_compiler::pipeline::{self, Executable};
use ferrax_ir::{print_func, Func};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

static COUNTER: AtomicUsize = AtomicUsize::new(0);

fn dump_dir() -> Option<PathBuf> {
    std::env::var_os("FERRAX_DUMP").map(PathBuf::from)
}

/// Writes `func` as `NNNN-<name>.<stage>.ir`.
pub(crate) fn write(stage: &str, func: &Func) {
    if dump_dir().is_some() {
        write_text(&format!("{stage}.ir"), &func.name, &print_func(func));
    }
}

/// Writes `text` as `NNNN-<name>.<suffix>`. Dumping is a diagnostic: a failure to write is
/// reported on stderr and does not affect the computation.
pub(crate) fn write_text(suffix: &str, name: &str, text: &str) {
    let Some(dir) = dump_dir() else { return };
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let path = dir.join(format!("{n:04}-{name}.{suffix}"));
    let result = std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&path, text));
    if let Err(e) = result {
        eprintln!(
            "ferrax: FERRAX_DUMP could not write {}: {e}",
            path.display()
        );
    }
}

/// The stages of a reverse-mode derivative: the traced function, its forward-mode (linearized)
/// program and the reverse-mode (transposed) program that is run.
pub(crate) fn derivatives(forward: &Func, vjp: &Func) {
    if dump_dir().is_none() {
        return;
    }
    write("forward", forward);
    if let Ok(jvp) = ferrax_compiler::autodiff::jvp(forward) {
        write("linearized", &jvp);
    }
    write("transposed", vjp);
}

/// The stages of a compiled program: the simplified program and the simplifier's report, the
/// fused program, its kernels (with the CPU memory plan's figures) and its PTX: the module a
/// GPU program loaded, or for a CPU program the one the GPU backend renders for it (sm_80),
/// fused for the GPU.
pub(crate) fn compiled(
    simplified: &Func,
    report: &str,
    executable: &Executable,
    options: GpuOptions,
) {
    if dump_dir().is_none() {
        return;
    }
    let name = &simplified.name;
    write("simplified", simplified);
    write_text("simplify.txt", name, report);
    if let Some(fused) = executable.fused() {
        write_text("fused.txt", name, fused);
    }
    let mut listing = Vec::new();
    if let Some(m) = executable.memory() {
        listing.push(format!(
            "// memory: inputs {} B, outputs {} B, peak {} B (without the plan: {} B)",
            m.inputs, m.outputs, m.peak, m.unplanned
        ));
    }
    listing.extend(executable.kernels());
    write_text("kernels.txt", name, &listing.join("\n"));
    let ptx = match executable.ptx() {
        Some(ptx) => ptx.to_string(),
        None => pipeline::render_ptx(simplified, PtxTarget::Sm80, options)
            .unwrap_or_else(|e| format!("// {e}\n")),
    };
    write_text("ptx", name, &ptx);
}

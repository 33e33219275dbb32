//! `FERRAX_DUMP=dir`: every program ferrax traces or derives is written to `dir`, one file per
//! stage, so a user can see what was traced and how it was differentiated.

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

/// The PTX the GPU backend renders for `kernels` (sm_80), next to their CPU forms.
pub(crate) fn ptx(name: &str, kernels: &[ferrax_compiler::kernel::Kernel]) {
    if dump_dir().is_none() {
        return;
    }
    use ferrax_compiler::backend::ptx::{render_module, PtxTarget};
    match render_module(kernels, &[], &[], PtxTarget::Sm80) {
        Ok(text) => write_text("ptx", name, &text),
        Err(e) => write_text("ptx", name, &format!("// {e}\n")),
    }
}

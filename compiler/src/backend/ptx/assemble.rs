//! PTX assembled ahead of time: `ptxas` (CUDA's assembler) turns a module into a cubin, machine
//! code for one GPU architecture that a device loads with no compilation by its driver. Used
//! for GPU artifacts where `ptxas` is at hand when they are made; elsewhere artifacts hold PTX
//! alone and the driver compiles it when they load.

use super::{PtxError, PtxTarget};
use ferrax_runtime::parallel::map_on_cores;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The `ptxas` to use: `FERRAX_PTXAS` (a path, or `off` for none), else the first `ptxas` on
/// `PATH`.
pub fn ptxas() -> Option<PathBuf> {
    match std::env::var_os("FERRAX_PTXAS") {
        Some(v) if v == "off" => None,
        Some(path) => Some(PathBuf::from(path)),
        None => std::env::var_os("PATH").and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|dir| dir.join("ptxas"))
                .find(|p| p.is_file())
        }),
    }
}

/// A new directory at `dir` that only this user can enter; an error if `dir` exists.
fn private_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

/// `ptx` assembled for `target` by the assembler `ptxas`: the cubin's bytes.
pub fn assemble(ptxas: &Path, ptx: &str, target: PtxTarget) -> Result<Vec<u8>, PtxError> {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let failed = |what: String| PtxError::Assembler {
        ptxas: ptxas.display().to_string(),
        what,
    };
    // A directory of its own, made afresh (nobody else's files or links in it).
    let dir = std::env::temp_dir().join(format!(
        "ferrax-ptxas-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    private_dir(&dir).map_err(|e| failed(format!("making {}: {e}", dir.display())))?;
    let (input, output) = (dir.join("module.ptx"), dir.join("module.cubin"));
    let result = std::fs::write(&input, ptx)
        .map_err(|e| failed(format!("writing {}: {e}", input.display())))
        .and_then(|()| {
            Command::new(ptxas)
                .arg(format!("-arch={}", target.arch()))
                .arg("-o")
                .arg(&output)
                .arg(&input)
                .output()
                .map_err(|e| failed(e.to_string()))
        })
        .and_then(|out| match out.status.success() {
            true => std::fs::read(&output).map_err(|e| failed(e.to_string())),
            false => Err(failed(String::from_utf8_lossy(&out.stderr).into_owned())),
        });
    let _ = std::fs::remove_dir_all(&dir);
    result
}

/// Each of `modules` assembled by `ptxas` for `target` ([`assemble`]), in order: as many at
/// once as the host has cores, each module its own `ptxas` process.
pub fn assemble_all(
    ptxas: &Path,
    modules: &[&str],
    target: PtxTarget,
) -> Result<Vec<Vec<u8>>, PtxError> {
    let assembled = map_on_cores(modules, |ptx| assemble(ptxas, ptx, target));
    assembled
        .into_iter()
        .map(|result| {
            result.unwrap_or_else(|| {
                Err(PtxError::Assembler {
                    ptxas: ptxas.display().to_string(),
                    what: "an assembling thread stopped".into(),
                })
            })
        })
        .collect()
}

//! The persistent compile cache: `jit`'s CPU programs are kept across processes as artifacts
//! (see `ferrax_compiler::backend::cpu::artifact`), so a program compiled once loads in later
//! runs without simplifying or generating code.
//!
//! Where: `$FERRAX_CACHE_DIR`, else `$XDG_CACHE_HOME/ferrax`, else `$HOME/.cache/ferrax`;
//! `Jit::cache_dir` overrides it for one function, and `FERRAX_CACHE_DIR=off` (or
//! `Jit::no_persistent_cache`) turns it off. An entry is keyed by the SHA-256 of the traced
//! program's text (its instructions and input types), the compiler's version and source
//! fingerprint (a build from changed sources misses), the artifact format, the CPU's features
//! and the options; it holds the artifact, and beside it what `Lowered` shows (the simplified
//! program, the simplifier's report, the kernels' Cranelift IR), so a hit looks exactly like a
//! compilation. A program with host callbacks (`debug`, `pure_callback`) is never cached: it names functions
//! of this process.
//!
//! Safety across processes: an entry is written to a temporary file and renamed into place,
//! so readers see a whole entry or none. An entry that fails any check (truncated, corrupted,
//! another format or CPU) is reported on stderr, ignored and replaced. The cache is bounded
//! (`$FERRAX_CACHE_MAX_BYTES`, 1 GiB by default): after each write the least recently used
//! entries are removed until it fits. `FERRAX_LOG=cache` reports every hit and miss.
//!
//! An entry is code: the cache directory must be writable by its user alone, as JAX's is.

use crate::error::{Error, Result};
use ferrax_compiler::backend::cpu::FORMAT_VERSION;
use ferrax_compiler::backend::{CpuExecutable, CpuTarget};
use ferrax_compiler::pipeline::{self, Backend, Compiled, Executable};
use ferrax_ir::Func;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

const DEFAULT_MAX_BYTES: u64 = 1 << 30;

/// Where a function's programs are cached.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CacheDir {
    /// The environment's choice (see the module docs).
    Default,
    At(PathBuf),
    Off,
}

impl CacheDir {
    fn path(&self) -> Option<PathBuf> {
        match self {
            CacheDir::At(p) => Some(p.clone()),
            CacheDir::Off => None,
            CacheDir::Default => match std::env::var_os("FERRAX_CACHE_DIR") {
                Some(d) if d == "off" || d.is_empty() => None,
                Some(d) => Some(PathBuf::from(d)),
                None => std::env::var_os("XDG_CACHE_HOME")
                    .map(PathBuf::from)
                    .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache")))
                    .map(|d| d.join("ferrax")),
            },
        }
    }
}

/// What an entry keeps beside its artifact.
#[derive(Serialize, Deserialize)]
struct Views {
    simplified: Func,
    report: String,
    clif: Vec<String>,
}

fn logging() -> bool {
    std::env::var("FERRAX_LOG").is_ok_and(|l| l.split(',').any(|p| p == "cache"))
}

/// `func` simplified and compiled for `backend`, from the cache in `dir` where it holds it
/// (then with `true`), else compiled and stored there. Only CPU programs are cached; a cache
/// that cannot be read or written costs a compilation, never an error.
pub(crate) fn compile(
    func: &Func,
    backend: &Backend,
    dir: &CacheDir,
    options: &str,
) -> Result<(Compiled, bool)> {
    // A program with host callbacks names functions of this process.
    let dir = match (backend, dir.path()) {
        (Backend::Cpu, Some(dir)) if !func.calls_host() => dir,
        _ => return Ok((pipeline::compile(func, backend)?, false)),
    };
    let key = key(func, options);
    let path = dir.join(format!("{key}.fxc"));
    if let Ok(bytes) = std::fs::read(&path) {
        match load(&bytes) {
            Ok(hit) => {
                if logging() {
                    eprintln!("ferrax: persistent cache hit: {}", path.display());
                }
                // Marks the entry used, for eviction.
                if let Ok(file) = std::fs::File::options().append(true).open(&path) {
                    let _ = file.set_modified(std::time::SystemTime::now());
                }
                return Ok((hit, true));
            }
            Err(e) => eprintln!(
                "ferrax: ignoring persistent cache entry {}: {e}",
                path.display()
            ),
        }
    } else if logging() {
        eprintln!("ferrax: persistent cache miss: {}", path.display());
    }
    let compiled = pipeline::compile(func, backend)?;
    if let Executable::Cpu(exe) = &compiled.executable {
        let stored = entry(exe, &compiled).and_then(|bytes| store(&dir, &path, &bytes));
        if let Err(e) = stored {
            eprintln!(
                "ferrax: could not write persistent cache entry {}: {e}",
                path.display()
            );
        }
    }
    Ok((compiled, false))
}

/// The key of `func` compiled with `options` by this compiler for this CPU.
fn key(func: &Func, options: &str) -> String {
    let target = CpuTarget::host();
    let mut h = Sha256::new();
    for part in [
        env!("CARGO_PKG_VERSION"),
        ferrax_compiler::SOURCE_FINGERPRINT,
        &FORMAT_VERSION.to_string(),
        &target.arch,
        &target.features.join(","),
        options,
        &func.to_string(),
    ] {
        h.update((part.len() as u64).to_le_bytes());
        h.update(part.as_bytes());
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// An entry's bytes: the artifact, with the views in its metadata.
fn entry(exe: &CpuExecutable, compiled: &Compiled) -> Result<Vec<u8>> {
    let views = Views {
        simplified: compiled.simplified.clone(),
        report: compiled.simplify_report.clone(),
        clif: exe.clif().to_vec(),
    };
    let mut metadata = Vec::new();
    ciborium::into_writer(&views, &mut metadata).map_err(|e| Error::Artifact(e.to_string()))?;
    exe.to_artifact_with(&metadata)
        .map_err(|e| Error::Artifact(e.to_string()))
}

/// The compiled program an entry holds.
fn load(bytes: &[u8]) -> std::result::Result<Compiled, String> {
    let (mut exe, info) =
        CpuExecutable::from_artifact_with_info(bytes).map_err(|e| e.to_string())?;
    let views: Views =
        ciborium::from_reader(info.metadata.as_slice()).map_err(|e| format!("its views: {e}"))?;
    exe.set_clif(views.clif);
    Ok(Compiled {
        simplified: views.simplified,
        simplify_report: views.report,
        executable: Executable::Cpu(Box::new(exe)),
    })
}

/// Writes `bytes` to `path` through a temporary file renamed into place, then evicts the least
/// recently used entries past the cache's bound.
fn store(dir: &Path, path: &Path, bytes: &[u8]) -> Result<()> {
    static SERIAL: AtomicU64 = AtomicU64::new(0);
    let io = |e: std::io::Error| Error::Artifact(e.to_string());
    std::fs::create_dir_all(dir).map_err(io)?;
    let serial = SERIAL.fetch_add(1, Ordering::Relaxed);
    let temporary = dir.join(format!(".tmp-{}-{serial}", std::process::id()));
    std::fs::write(&temporary, bytes).map_err(io)?;
    if let Err(e) = std::fs::rename(&temporary, path) {
        let _ = std::fs::remove_file(&temporary);
        return Err(io(e));
    }
    evict(dir);
    Ok(())
}

/// Removes the least recently used entries until the cache fits its bound.
fn evict(dir: &Path) {
    let bound = std::env::var("FERRAX_CACHE_MAX_BYTES")
        .ok()
        .and_then(|b| b.parse().ok())
        .unwrap_or(DEFAULT_MAX_BYTES);
    let Ok(listing) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<(std::time::SystemTime, u64, PathBuf)> = listing
        .filter_map(|e| {
            let e = e.ok()?;
            let path = e.path();
            if path.extension()? != "fxc" {
                return None;
            }
            let meta = e.metadata().ok()?;
            Some((meta.modified().ok()?, meta.len(), path))
        })
        .collect();
    let mut total: u64 = entries.iter().map(|e| e.1).sum();
    entries.sort();
    for (_, len, path) in entries {
        if total <= bound {
            break;
        }
        if std::fs::remove_file(&path).is_ok() {
            total = total.saturating_sub(len);
        }
    }
}

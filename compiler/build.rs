//! A fingerprint of the sources that decide what compiled code is (this crate's, the IR's and
//! the runtime's, whose interpreter folds constants), for the persistent compile cache's key:
//! a compiler built from other sources, at the same version, does not load entries another
//! build wrote. FNV-1a over the files' paths and bytes, in path order.

use std::path::PathBuf;

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let roots = [
        manifest.join("src"),
        manifest.join("../ir/src"),
        manifest.join("../runtime/src"),
    ];
    let mut files = Vec::new();
    for root in roots.iter().filter(|r| r.is_dir()) {
        println!("cargo:rerun-if-changed={}", root.display());
        let mut pending = vec![root.clone()];
        while let Some(dir) = pending.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let path = entry.path();
                if path.is_dir() {
                    pending.push(path);
                } else {
                    files.push(path);
                }
            }
        }
    }
    files.sort();
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut feed = |bytes: &[u8]| {
        for &b in bytes {
            hash = (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    };
    for file in &files {
        let relative = file.strip_prefix(&manifest).unwrap_or(file);
        feed(relative.to_string_lossy().as_bytes());
        feed(&std::fs::read(file).unwrap_or_default());
    }
    println!("cargo:rustc-env=FERRAX_SOURCE_FINGERPRINT={hash:016x}");
}

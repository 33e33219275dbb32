//! The workspace's modules depend one way. Within each crate, the top-level modules (and the
//! compiler's backends one by one) form no cycle; in the compiler, dependencies run
//! ir → target → kernel → fuse → backends → pipeline (the IR→IR passes beside kernel), so a
//! generic pass never names a backend and a backend's limits reach fusion only through its
//! `Target`. Read from the sources: `crate::` paths and a backend's `super::` paths.
#![allow(clippy::unwrap_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const CRATES: [&str; 7] = [
    "ir/src",
    "runtime/src",
    "runtime/aot/src",
    "compiler/src",
    "frontends/trace/src",
    "frontends/stablehlo/src",
    "runtime/ptx-emu/src",
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The unit a path inside a crate belongs to: its top-level module, and for the compiler's
/// backends `backend/<name>`.
fn unit(parts: &[&str]) -> Option<String> {
    let first = parts.first()?.trim_end_matches(".rs");
    if matches!(first, "lib" | "main") {
        return None;
    }
    match (first, parts.get(1)) {
        ("backend", Some(second)) if *second != "mod.rs" => {
            Some(format!("backend/{}", second.trim_end_matches(".rs")))
        }
        _ => Some(first.to_string()),
    }
}

/// The crate root's re-exports (`pub use module::{A, b};`): each name and its module, so a path
/// through the root (`crate::Tensor`) counts as a use of the module that defines it.
fn reexports(src: &Path) -> BTreeMap<String, String> {
    let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap_or_default();
    let mut names = BTreeMap::new();
    for item in lib.split("pub use ").skip(1) {
        let item = &item[..item.find(';').unwrap_or(item.len())];
        let Some((module, rest)) = item.split_once("::") else {
            continue;
        };
        let listed = rest.trim_start_matches('{').trim_end_matches('}');
        for name in listed.split(',') {
            let name = name.split("::").last().unwrap_or("").trim();
            if !name.is_empty() {
                names.insert(name.to_string(), module.trim().to_string());
            }
        }
    }
    names
}

/// Each unit of the crate at `src` and the units its code names.
fn dependencies(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let roots = reexports(src);
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut deps: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in files {
        let relative = file
            .strip_prefix(src)
            .unwrap()
            .to_string_lossy()
            .to_string();
        let parts: Vec<&str> = relative.split('/').collect();
        let Some(from) = unit(&parts) else { continue };
        let text = std::fs::read_to_string(&file).unwrap();
        let mut names = BTreeSet::new();
        for (prefix, base) in [("crate::", Vec::new()), ("super::", parts[..1].to_vec())] {
            // `super::` only crosses units from a backend's own root (`backend/<name>/mod.rs`).
            if prefix == "super::" && !(parts.len() == 3 && parts[2] == "mod.rs") {
                continue;
            }
            for (at, _) in text.match_indices(prefix) {
                let path: String = text[at + prefix.len()..]
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                    .collect();
                let mut segments: Vec<&str> = base.clone();
                segments.extend(path.split("::").filter(|s| !s.is_empty()));
                if prefix == "crate::" {
                    if let Some(module) = segments.first().and_then(|s| roots.get(*s)) {
                        segments[0] = module;
                    }
                }
                if let Some(to) = unit(&segments) {
                    names.insert(to);
                }
            }
        }
        names.remove(&from);
        deps.entry(from).or_default().extend(names);
    }
    deps
}

/// A cycle among the units, if there is one.
fn cycle(deps: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        u: &str,
        deps: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        match state.get(u) {
            Some(2) => return None,
            Some(1) => {
                let start = stack.iter().position(|s| s == u).unwrap_or(0);
                let mut c = stack[start..].to_vec();
                c.push(u.to_string());
                return Some(c);
            }
            _ => {}
        }
        state.insert(u.to_string(), 1);
        stack.push(u.to_string());
        for v in deps.get(u).into_iter().flatten() {
            if let Some(c) = visit(v, deps, state, stack) {
                return Some(c);
            }
        }
        stack.pop();
        state.insert(u.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    deps.keys()
        .find_map(|u| visit(u, deps, &mut state, &mut Vec::new()))
}

#[test]
fn no_module_cycle_in_any_crate() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for src in CRATES {
        let deps = dependencies(&root.join(src));
        assert!(deps.len() > 1, "{src}: no modules found");
        if let Some(c) = cycle(&deps) {
            panic!("{src}: module cycle {}", c.join(" -> "));
        }
    }
}

#[test]
fn compiler_layers_depend_downward() {
    let rank = |u: &str| match u {
        "target" | "dce" => 0,
        "kernel" | "autodiff" | "batching" | "simplify" | "unroll" | "expand_attention" => 1,
        "fuse" => 2,
        "remat" => 3,
        u if u.starts_with("backend") => 4,
        "pipeline" => 5,
        other => panic!("the compiler's module {other} has no layer here: give it one"),
    };
    let deps = dependencies(&Path::new(env!("CARGO_MANIFEST_DIR")).join("compiler/src"));
    for (from, tos) in &deps {
        for to in tos {
            assert!(
                rank(to) < rank(from) || (from.starts_with("backend") && rank(to) == rank(from)),
                "compiler: {from} depends on {to}, a layer above or beside it"
            );
        }
    }
    // The generic passes name no backend.
    for pass in ["fuse", "kernel", "target"] {
        assert!(
            deps.get(pass)
                .is_none_or(|d| !d.iter().any(|t| t.starts_with("backend"))),
            "{pass} names a backend"
        );
    }
}

#[test]
fn the_reader_sees_a_cycle() {
    let mut deps = BTreeMap::new();
    deps.insert("a".to_string(), BTreeSet::from(["b".to_string()]));
    deps.insert("b".to_string(), BTreeSet::from(["a".to_string()]));
    assert_eq!(cycle(&deps).unwrap(), ["a", "b", "a"]);
    deps.insert("b".to_string(), BTreeSet::new());
    assert!(cycle(&deps).is_none());
}

/// The artifact runtime needs no compiler: neither Cranelift, egg, petgraph nor the IR's text
/// parser is in its dependency tree (`cargo tree`, from the lock file), so a program that only
/// runs artifacts ships without them.
#[test]
fn the_artifact_runtime_needs_no_compiler() {
    let tree = std::process::Command::new(env!("CARGO"))
        .args(["tree", "--offline", "--locked", "-p", "ferrax-aot-runtime"])
        .args(["-e", "normal,features", "--prefix", "none"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert!(
        tree.status.success(),
        "{}",
        String::from_utf8_lossy(&tree.stderr)
    );
    let tree = String::from_utf8(tree.stdout).unwrap();
    assert!(tree.contains("ferrax-ir"), "{tree}");
    for compiler in [
        "cranelift",
        "egg v",
        "petgraph",
        "ferrax-compiler",
        "ferrax-ir feature \"text\"",
    ] {
        assert!(!tree.contains(compiler), "{compiler} in:\n{tree}");
    }
}

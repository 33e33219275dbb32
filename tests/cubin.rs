//! GPU artifacts with machine code: where `ptxas` is at hand (`FERRAX_PTXAS`, else `PATH`),
//! each module is assembled into a cubin stored beside its PTX. A stand-in assembler (a shell
//! script) checks what is stored and that a machine that loads PTX alone (the emulator) falls
//! back to the PTX with the same results; a failing assembler is an error naming it. The real
//! assembler and a device loading its cubins are `tests/gpu.rs`'s.
//! One test: it sets `FERRAX_PTXAS`, which the whole process reads.
#![allow(clippy::unwrap_used)]

mod common;

use common::fusion::float_bits;
use ferrax::aot_runtime::gpu::{GpuProgram as Loaded, GpuTarget};
use ferrax::compiler::backend::gpu::{compile_artifact, GpuOptions, GpuProgram};
use ferrax::compiler::backend::inspect_artifact;
use ferrax::compiler::backend::ptx::PtxTarget;
use ferrax::compiler::simplify::simplify;
use ferrax::{lax, DType, Tensor};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// An executable shell script at `path`.
fn script(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn artifacts_store_what_ptxas_assembles_and_fall_back_to_ptx() {
    let f = |(x, w): (Tensor, Tensor)| {
        let y = lax::fori_loop(0, 3, |_, y: Tensor| (y.matmul(&w) * 0.5).tanh() + &y, x);
        (y.sum(0), y.exp())
    };
    let specs = (
        Tensor::spec(DType::F32, [4, 8]),
        Tensor::spec(DType::F32, [8, 8]),
    );
    let (func, _) = simplify(&ferrax::trace(f, &specs).unwrap()).unwrap();
    let dir = std::env::temp_dir().join(format!("ferrax-cubin-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // `ptxas -arch=sm_XX -o OUT IN`: OUT is a marker, the architecture and IN's text.
    let fake = dir.join("ptxas");
    script(
        &fake,
        "#!/bin/sh\n[ \"$2\" = -o ] || exit 2\n{ printf 'CUBIN %s\\n' \"$1\"; cat \"$4\"; } > \"$3\"\n",
    );
    std::env::set_var("FERRAX_PTXAS", &fake);
    let options = GpuOptions::HIGHEST;
    let bytes = compile_artifact(&func, PtxTarget::Sm80, options, (&[], &[])).unwrap();
    let info = inspect_artifact(&bytes).unwrap();
    assert_eq!(info.cubins, Some(GpuTarget { major: 8, minor: 0 }));
    // Each cubin: the marker, then its module's PTX (which starts with a comment).
    let marker: &[u8] = b"CUBIN -arch=sm_80\n//";
    let cubins = bytes.windows(marker.len()).filter(|w| *w == marker).count();
    assert!(
        cubins >= 2,
        "{cubins} cubins: the program's and its loop's regions'"
    );

    let emulator = ferrax_ptx_emu::Emulator::default();
    let (loaded, _) = Loaded::from_artifact(&bytes, &emulator).unwrap();
    assert!(!loaded.loaded_machine_code(), "the emulator runs PTX only");
    let compiled = GpuProgram::compile(&func, &emulator, options).unwrap();
    let args = common::inputs(&func, 4);
    let (got, want) = (loaded.run(&args).unwrap(), compiled.run(&args).unwrap());
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(float_bits(g), float_bits(w));
    }

    script(
        &fake,
        "#!/bin/sh\necho 'ptxas fatal: unsupported' >&2\nexit 1\n",
    );
    let e = compile_artifact(&func, PtxTarget::Sm90, options, (&[], &[]))
        .err()
        .unwrap();
    assert!(
        e.to_string().contains("could not assemble") && e.to_string().contains("unsupported"),
        "{e}"
    );

    std::env::set_var("FERRAX_PTXAS", "off");
    let bytes = compile_artifact(&func, PtxTarget::Sm80, options, (&[], &[])).unwrap();
    assert_eq!(inspect_artifact(&bytes).unwrap().cubins, None);
    std::fs::remove_dir_all(&dir).unwrap();
}

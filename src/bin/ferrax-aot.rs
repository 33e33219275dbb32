//! `ferrax-aot`: ahead-of-time artifacts from the command line. A program exported from JAX
//! (`jax.export`, then its StableHLO text) or written in ferrax's IR text is compiled once
//! here, and its artifact runs from Rust (`ferrax::compiler::backend::CpuExecutable`, or
//! `ferrax::aot_runtime::gpu::GpuProgram` for a GPU artifact) or from this tool, with neither
//! Python nor XLA.
//!
//! ```text
//! ferrax-aot compile PROGRAM.mlir|PROGRAM.fx [--target cpu|sm_80|sm_90] [--param P]... -o STEP.fxa
//! ferrax-aot compile PROGRAM... [--target cpu|sm_80|sm_90] [--param P]... -o DIRECTORY
//! ferrax-aot inspect STEP.fxa
//! ferrax-aot run STEP.fxa [INPUT.npy ...] [-o OUTPUT_DIR]
//! ```
//!
//! `cpu` (the default) compiles for this machine's CPU; `sm_80` and `sm_90` plan for a GPU of
//! that architecture (or a later one) with no GPU needed, and store its PTX (and its cubins,
//! where `ptxas` is at hand: `FERRAX_PTXAS`, else `PATH`). Several programs compile in
//! parallel, each to `DIRECTORY/NAME.fxa` (`NAME` its file's stem). `run` reads one `.npy` per
//! input, checks them against the signature, and writes
//! `output_K.npy` per output into the output directory (default: the current one).
//!
//! A shape-polymorphic export (`tensor<?x4xf32>`) is compiled for one shape: `--param` once
//! per parameter of its `@main`, in order, gives the parameter's shape (`8x4`; `scalar` for
//! rank 0) or, written `=8`, the value of a dimension argument (`tensor<i64>`), which the
//! artifact then does not take.

use ferrax::aot_runtime::gpu::GpuProgram;
use ferrax::aot_runtime::ArtifactTarget;
use ferrax::compiler::backend::gpu::{compile_artifact, GpuOptions};
use ferrax::compiler::backend::ptx::PtxTarget;
use ferrax::compiler::backend::{inspect_artifact, CpuExecutable};
use ferrax::compiler::simplify::simplify;
use ferrax::compiler::unroll::unroll_scans;
use ferrax::ir::{Literal, Scalar};
use ferrax::runtime::cuda::CudaDevice;
use ferrax::stablehlo::Specialize;
use ferrax::{checkpoint, Array, Tensor};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

type Failure = Box<dyn std::error::Error>;

const USAGE: &str = "usage:
  ferrax-aot compile PROGRAM.mlir|PROGRAM.fx [--target cpu|sm_80|sm_90] [--param P]... -o STEP.fxa
  ferrax-aot compile PROGRAM... [--target cpu|sm_80|sm_90] [--param P]... -o DIRECTORY
  ferrax-aot inspect STEP.fxa
  ferrax-aot run STEP.fxa [INPUT.npy ...] [-o OUTPUT_DIR]";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match command(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ferrax-aot: {e}");
            ExitCode::FAILURE
        }
    }
}

/// A command line: its positional arguments, and each flag's name and value.
struct Parsed<'a> {
    positional: Vec<&'a str>,
    flags: Vec<(&'static str, &'a str)>,
}

/// The positional arguments and the value of each `--flag VALUE` (`-o` is `--output`).
fn parse(args: &[String]) -> Result<Parsed<'_>, Failure> {
    let (mut positional, mut flags) = (Vec::new(), Vec::new());
    let mut rest = args.iter();
    while let Some(a) = rest.next() {
        let flag = match a.as_str() {
            "-o" | "--output" => "output",
            "--target" => "target",
            "--param" => "param",
            other if other.starts_with('-') => return Err(format!("unknown option {other}").into()),
            other => {
                positional.push(other);
                continue;
            }
        };
        let value = rest.next().ok_or_else(|| format!("{a} needs a value"))?;
        flags.push((flag, value.as_str()));
    }
    Ok(Parsed { positional, flags })
}

fn flag<'a>(flags: &[(&'static str, &'a str)], name: &str) -> Option<&'a str> {
    flags.iter().rev().find(|f| f.0 == name).map(|f| f.1)
}

fn command(args: &[String]) -> Result<(), Failure> {
    let Parsed { positional, flags } = parse(args)?;
    match positional.as_slice() {
        ["compile", programs @ ..] if !programs.is_empty() => {
            let out = flag(&flags, "output").ok_or("compile needs -o STEP.fxa (or DIRECTORY)")?;
            let target = match flag(&flags, "target").unwrap_or("cpu") {
                "cpu" => None,
                "sm_80" => Some(PtxTarget::Sm80),
                "sm_90" => Some(PtxTarget::Sm90),
                other => return Err(format!("target {other}: expected cpu, sm_80 or sm_90").into()),
            };
            let params = flags
                .iter()
                .filter(|f| f.0 == "param")
                .map(|f| specialization(f.1))
                .collect::<Result<Vec<_>, _>>()?;
            compile(programs, target, &params, Path::new(out))
        }
        ["inspect", artifact] => inspect(Path::new(artifact)),
        ["run", artifact, inputs @ ..] => {
            let dir = PathBuf::from(flag(&flags, "output").unwrap_or("."));
            run(Path::new(artifact), inputs, &dir)
        }
        _ => Err(USAGE.into()),
    }
}

/// A `--param` value: a shape (`8x4`, `scalar`) or a dimension argument's value (`=8`).
fn specialization(text: &str) -> Result<Specialize, Failure> {
    let bad =
        || format!("--param {text}: expected a shape such as 8x4, scalar, or a value such as =8");
    if let Some(value) = text.strip_prefix('=') {
        let v: i64 = value.parse().map_err(|_| bad())?;
        return Ok(Specialize::Value(Literal::scalar(Scalar::I64(v))));
    }
    if text == "scalar" {
        return Ok(Specialize::Shape(Vec::new()));
    }
    let dims = text
        .split('x')
        .map(|d| d.parse::<usize>())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| bad())?;
    Ok(Specialize::Shape(dims))
}

/// The artifact of the program in file `program` (StableHLO text, or ferrax IR text) for the
/// CPU or GPU `target`, its parameters specialized by `params` (where it has dynamic shapes),
/// and how many kernels it has.
fn compile_file(
    program: &Path,
    target: Option<PtxTarget>,
    params: &[Specialize],
) -> Result<(Vec<u8>, usize), Failure> {
    let text =
        std::fs::read_to_string(program).map_err(|e| format!("{}: {e}", program.display()))?;
    let func = if text.trim_start().starts_with("func @") {
        if !params.is_empty() {
            return Err("--param applies to StableHLO programs".into());
        }
        ferrax::ir::parse_func(&text)?
    } else {
        ferrax::stablehlo::load_specialized(&text, params)?
    };
    // As `jit` does: scans with `unroll` unrolled, then simplified.
    let (simple, _) = simplify(&unroll_scans(&func)?)?;
    match target {
        None => {
            let exe = CpuExecutable::compile(&simple)?;
            Ok((exe.to_artifact()?, exe.kernels().count()))
        }
        Some(target) => {
            let bytes = compile_artifact(&simple, target, GpuOptions::default(), (&[], &[]))?;
            let kernels = inspect_artifact(&bytes)?.kernels.len();
            Ok((bytes, kernels))
        }
    }
}

/// Compiles one program to the file `out`, or several, in parallel, into the directory `out`.
fn compile(
    programs: &[&str],
    target: Option<PtxTarget>,
    params: &[Specialize],
    out: &Path,
) -> Result<(), Failure> {
    let written: Vec<(PathBuf, Vec<u8>, usize)> = match programs {
        [one] => {
            let (bytes, kernels) = compile_file(Path::new(one), target, params)?;
            vec![(out.to_path_buf(), bytes, kernels)]
        }
        many => {
            std::fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
            let mut batch = ferrax::Batch::new();
            for (k, program) in many.iter().enumerate() {
                let program = PathBuf::from(program);
                let stem = program.file_stem().map_or_else(
                    || format!("program_{k}"),
                    |s| s.to_string_lossy().into_owned(),
                );
                let params = params.to_vec();
                batch = batch.add(stem, move || {
                    let failed =
                        |e: Failure| ferrax::Error::Artifact(format!("{}: {e}", program.display()));
                    compile_file(&program, target, &params)
                        .map(|(bytes, _)| bytes)
                        .map_err(failed)
                });
            }
            batch
                .compile()?
                .into_iter()
                .map(|(name, bytes)| {
                    let kernels = inspect_artifact(&bytes).map_or(0, |i| i.kernels.len());
                    (out.join(format!("{name}.fxa")), bytes, kernels)
                })
                .collect()
        }
    };
    for (path, bytes, kernels) in written {
        std::fs::write(&path, &bytes).map_err(|e| format!("{}: {e}", path.display()))?;
        println!(
            "{}: {} bytes, {kernels} kernels",
            path.display(),
            bytes.len()
        );
    }
    Ok(())
}

fn read(path: &Path) -> Result<Vec<u8>, Failure> {
    Ok(std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?)
}

fn inspect(path: &Path) -> Result<(), Failure> {
    let info = inspect_artifact(&read(path)?)?;
    let types = |t: &[ferrax::TensorType]| {
        t.iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    };
    println!("format {} (ferrax {})", info.format, info.compiler);
    println!("target {}", info.target);
    if let ferrax::aot_runtime::ArtifactTarget::Gpu(_) = info.target {
        match info.cubins {
            Some(arch) => println!("machine code: cubins for {arch} (ptxas)"),
            None => println!("machine code: none (the driver compiles the PTX when it loads)"),
        }
    }
    println!("inputs ({})", types(&info.inputs));
    println!("outputs ({})", types(&info.outputs));
    println!(
        "{} kernels, {} bytes of code and tables",
        info.kernels.len(),
        info.code_bytes
    );
    let m = info.memory;
    println!(
        "memory plan: peak {} bytes of live values (inputs {}, outputs {})",
        m.peak, m.inputs, m.outputs
    );
    println!("{}", info.fused);
    Ok(())
}

/// Runs artifact `path` on `inputs`: a CPU artifact here, a GPU one on the first CUDA device.
fn run(path: &Path, inputs: &[&str], dir: &Path) -> Result<(), Failure> {
    let bytes = read(path)?;
    let args = inputs
        .iter()
        .map(|p| Ok(checkpoint::load_npy(p)?.to_array()?))
        .collect::<Result<Vec<Array>, Failure>>()?;
    let outputs = match inspect_artifact(&bytes)?.target {
        ArtifactTarget::Cpu(_) => CpuExecutable::from_artifact(&bytes)?.run(&args)?,
        ArtifactTarget::Gpu(_) => {
            let device = CudaDevice::new(0)?;
            let (program, _) = GpuProgram::from_artifact(&bytes, &device)?;
            program.run(&args)?
        }
    };
    for (k, out) in outputs.into_iter().enumerate() {
        let file = dir.join(format!("output_{k}.npy"));
        checkpoint::save_npy(&file, &Tensor::new(out))?;
        println!("{}", file.display());
    }
    Ok(())
}

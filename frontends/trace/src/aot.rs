//! Ahead-of-time artifacts of jitted functions: `Lowered::export` writes a program's
//! executable (a CPU program's machine code, a GPU program's plan and PTX; `export_gpu` plans
//! one for a GPU architecture with no GPU at hand), with its input and output tree structures,
//! to bytes; [`Artifact::load`] reads
//! them back and runs them with `jit`'s calling convention (the same
//! `Tree`s in and out) without tracing, simplifying or generating code. Results are the
//! compiled program's, bit for bit, on a machine with the CPU features it was compiled for.
//!
//! An artifact is code: load only artifacts you built or trust (its hash detects corruption,
//! not a forger). See `ferrax_compiler::backend::cpu::artifact` for the checks loading makes.

use crate::error::{Error, Result};
use crate::tensor::Tensor;
use crate::tree::{Tree, TreeDef};
use ferrax_aot_runtime::gpu::{GpuMachine, GpuProgram};
use ferrax_aot_runtime::{ArtifactInfo, Signature, Structure};
use ferrax_compiler::backend::CpuExecutable;
use ferrax_ir::TensorType;
use std::marker::PhantomData;

fn artifact_error(e: impl std::fmt::Display) -> Error {
    Error::Artifact(e.to_string())
}

/// `def` as an artifact stores it, or an error for a static value (Rust values of any type,
/// baked into the program when it was traced), iteratively: trees can be deep.
fn structure(def: &TreeDef) -> Result<Structure> {
    enum Work<'a> {
        Visit(&'a TreeDef),
        Node(usize),
        Dict(Vec<String>),
    }
    let mut work = vec![Work::Visit(def)];
    let mut done: Vec<Structure> = Vec::new();
    while let Some(w) = work.pop() {
        match w {
            Work::Visit(TreeDef::Leaf) => done.push(Structure::Leaf),
            Work::Visit(TreeDef::None) => done.push(Structure::None),
            Work::Visit(TreeDef::Static(_)) => {
                return Err(artifact_error(
                    "an exported function's inputs and outputs cannot hold static values",
                ))
            }
            Work::Visit(TreeDef::Node(children)) => {
                work.push(Work::Node(children.len()));
                work.extend(children.iter().rev().map(Work::Visit));
            }
            Work::Visit(TreeDef::Dict(entries)) => {
                work.push(Work::Dict(entries.iter().map(|e| e.0.clone()).collect()));
                work.extend(entries.iter().rev().map(|e| Work::Visit(&e.1)));
            }
            Work::Node(n) => {
                let children = done.split_off(done.len() - n);
                done.push(Structure::Node(children));
            }
            Work::Dict(keys) => {
                let children = done.split_off(done.len() - keys.len());
                done.push(Structure::Dict(keys.into_iter().zip(children).collect()));
            }
        }
    }
    done.pop()
        .ok_or_else(|| artifact_error("an empty tree structure"))
}

/// The [`TreeDef`] `s` stores (iteratively).
fn tree_def(s: Structure) -> TreeDef {
    enum Work {
        Visit(Structure),
        Node(usize),
        Dict(Vec<String>),
    }
    let mut work = vec![Work::Visit(s)];
    let mut done: Vec<TreeDef> = Vec::new();
    while let Some(w) = work.pop() {
        match w {
            Work::Visit(Structure::Leaf) => done.push(TreeDef::Leaf),
            Work::Visit(Structure::None) => done.push(TreeDef::None),
            Work::Visit(Structure::Node(children)) => {
                work.push(Work::Node(children.len()));
                work.extend(children.into_iter().rev().map(Work::Visit));
            }
            Work::Visit(Structure::Dict(entries)) => {
                let (keys, children): (Vec<String>, Vec<Structure>) = entries.into_iter().unzip();
                work.push(Work::Dict(keys));
                work.extend(children.into_iter().rev().map(Work::Visit));
            }
            Work::Node(n) => {
                let children = done.split_off(done.len().saturating_sub(n));
                done.push(TreeDef::Node(children));
            }
            Work::Dict(keys) => {
                let children = done.split_off(done.len().saturating_sub(keys.len()));
                done.push(TreeDef::Dict(keys.into_iter().zip(children).collect()));
            }
        }
    }
    done.pop().unwrap_or(TreeDef::None)
}

/// The artifact of `exe`, whose inputs and outputs have these structures.
pub(crate) fn export(exe: &CpuExecutable, inputs: &TreeDef, outputs: &TreeDef) -> Result<Vec<u8>> {
    exe.to_artifact_with(&signature(inputs, outputs)?)
        .map_err(artifact_error)
}

/// The metadata an exported function's artifact stores: its input and output trees'
/// structures.
pub(crate) fn signature(inputs: &TreeDef, outputs: &TreeDef) -> Result<Vec<u8>> {
    let signature = Signature {
        inputs: structure(inputs)?,
        outputs: structure(outputs)?,
    };
    signature.encode().map_err(artifact_error)
}

/// A function loaded from an artifact: called as the jitted function it was exported from.
/// (`ferrax_aot_runtime::Artifact` runs the same artifacts without the compiler, on leaves.)
pub struct Artifact<I, O> {
    loaded: ferrax_aot_runtime::Artifact,
    inputs: TreeDef,
    types: Vec<TensorType>,
    outputs: TreeDef,
    _types: PhantomData<fn(I) -> O>,
}

impl<I: Tree, O: Tree> Artifact<I, O> {
    /// The function artifact `bytes` holds, after every check loading makes: a CPU
    /// artifact's on this CPU, a GPU artifact's on the first CUDA device.
    pub fn load(bytes: &[u8]) -> Result<Artifact<I, O>> {
        Artifact::of(ferrax_aot_runtime::Artifact::load(bytes).map_err(artifact_error)?)
    }

    /// The function GPU artifact `bytes` holds, loaded on `machine` (a CUDA device, or the
    /// PTX emulator).
    pub fn load_on<M>(bytes: &[u8], machine: &M) -> Result<Artifact<I, O>>
    where
        M: GpuMachine + Clone + 'static,
        GpuProgram<M>: Send + Sync,
    {
        let loaded = ferrax_aot_runtime::Artifact::load_on(bytes, machine);
        Artifact::of(loaded.map_err(artifact_error)?)
    }

    fn of(loaded: ferrax_aot_runtime::Artifact) -> Result<Artifact<I, O>> {
        let signature = loaded.signature().clone();
        Ok(Artifact {
            inputs: tree_def(signature.inputs),
            types: loaded.info().inputs.clone(),
            outputs: tree_def(signature.outputs),
            loaded,
            _types: PhantomData,
        })
    }

    /// Runs on inputs of the structure and types it was compiled for; others are an error
    /// naming both.
    pub fn call(&self, args: I) -> Result<O> {
        let mut leaves = Vec::new();
        let structure = args.flatten(&mut leaves);
        let types: Vec<TensorType> = leaves.iter().map(|l| l.ty().clone()).collect();
        if structure != self.inputs || types != self.types {
            let describe = |s: &TreeDef, t: &[TensorType]| {
                let t: Vec<String> = t.iter().map(ToString::to_string).collect();
                format!("{s} of {}", t.join(", "))
            };
            return Err(Error::Tree {
                expected: format!(
                    "inputs like the exported ones ({})",
                    describe(&self.inputs, &self.types)
                ),
                found: describe(&structure, &types),
            });
        }
        drop(args);
        let arrays = leaves
            .into_iter()
            .map(Tensor::into_array)
            .collect::<Result<Vec<_>>>()?;
        let outputs = self.loaded.call(arrays).map_err(artifact_error)?;
        O::unflatten(&self.outputs, &mut outputs.into_iter().map(Tensor::new))
    }

    /// What the artifact holds: signature, target, kernels, memory plan and fused program.
    pub fn info(&self) -> &ArtifactInfo {
        self.loaded.info()
    }
}

/// One entry of a [`Batch`]: traces, compiles and exports its function.
type Export = Box<dyn FnOnce() -> Result<Vec<u8>> + Send>;

/// Functions compiled ahead of time together (a training step, its evaluation, ...): each
/// entry a name and a closure that traces, compiles and exports one function, usually
/// `jit(f).lower(&specs)?.export()` (with its specs made inside the closure, as tracing is
/// per thread). [`Batch::compile`] runs the entries in parallel over the cores.
#[derive(Default)]
pub struct Batch {
    entries: Vec<(String, Export)>,
}

impl Batch {
    pub fn new() -> Batch {
        Batch::default()
    }

    /// Adds entry `name`, exported by `export`.
    pub fn add(
        mut self,
        name: impl Into<String>,
        export: impl FnOnce() -> Result<Vec<u8>> + Send + 'static,
    ) -> Batch {
        self.entries.push((name.into(), Box::new(export)));
        self
    }

    /// Each entry's name and artifact, in the order added, compiled in parallel; the first
    /// entry that fails is an error naming it.
    pub fn compile(self) -> Result<Vec<(String, Vec<u8>)>> {
        use rayon::prelude::*;
        self.entries
            .into_par_iter()
            .map(|(name, export)| match export() {
                Ok(bytes) => Ok((name, bytes)),
                Err(e) => Err(artifact_error(format!("entry {name}: {e}"))),
            })
            .collect()
    }

    /// [`Batch::compile`], each artifact written to `dir` as `NAME.fxa`; returns the paths.
    pub fn write_to(self, dir: impl AsRef<std::path::Path>) -> Result<Vec<std::path::PathBuf>> {
        let dir = dir.as_ref();
        self.compile()?
            .into_iter()
            .map(|(name, bytes)| {
                let path = dir.join(format!("{name}.fxa"));
                std::fs::write(&path, bytes)
                    .map_err(|e| artifact_error(format!("{}: {e}", path.display())))?;
                Ok(path)
            })
            .collect()
    }
}

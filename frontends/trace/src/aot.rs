//! Ahead-of-time artifacts of jitted functions: `Lowered::export` writes a CPU program's
//! executable, with its input and output tree structures, to bytes; [`Artifact::load`] reads
//! them back and runs them with `jit`'s calling convention (the same
//! `Tree`s in and out) without tracing, simplifying or generating code. Results are the
//! compiled program's, bit for bit, on a machine with the CPU features it was compiled for.
//!
//! An artifact is code: load only artifacts you built or trust (its hash detects corruption,
//! not a forger). See `ferrax_compiler::backend::cpu::artifact` for the checks loading makes.

use crate::error::{Error, Result};
use crate::tensor::Tensor;
use crate::tree::{Tree, TreeDef};
use ferrax_compiler::backend::{ArtifactInfo, CpuExecutable};
use ferrax_ir::TensorType;
use serde::{Deserialize, Serialize};
use std::marker::PhantomData;

/// A tree structure as an artifact stores it: a [`TreeDef`] without static values (which are
/// Rust values of any type, baked into the program when it was traced).
#[derive(Serialize, Deserialize)]
enum Structure {
    Leaf,
    None,
    Node(Vec<Structure>),
    Dict(Vec<(String, Structure)>),
}

/// What an artifact stores beside its executable: its trees' structures.
#[derive(Serialize, Deserialize)]
struct Trees {
    inputs: Structure,
    outputs: Structure,
}

fn artifact_error(e: impl std::fmt::Display) -> Error {
    Error::Artifact(e.to_string())
}

/// `def` as stored, or an error for a static value (iteratively: trees can be deep).
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
    let trees = Trees {
        inputs: structure(inputs)?,
        outputs: structure(outputs)?,
    };
    let metadata = serde_json::to_vec(&trees).map_err(artifact_error)?;
    exe.to_artifact_with(&metadata).map_err(artifact_error)
}

/// A function loaded from an artifact: called as the jitted function it was exported from.
pub struct Artifact<I, O> {
    exe: CpuExecutable,
    inputs: TreeDef,
    types: Vec<TensorType>,
    outputs: TreeDef,
    info: ArtifactInfo,
    _types: PhantomData<fn(I) -> O>,
}

impl<I: Tree, O: Tree> Artifact<I, O> {
    /// The function artifact `bytes` holds, after every check loading makes.
    pub fn load(bytes: &[u8]) -> Result<Artifact<I, O>> {
        let (exe, info) = CpuExecutable::from_artifact_with_info(bytes).map_err(artifact_error)?;
        let trees: Trees = serde_json::from_slice(&info.metadata)
            .map_err(|e| artifact_error(format!("its tree structures: {e}")))?;
        Ok(Artifact {
            exe,
            inputs: tree_def(trees.inputs),
            types: info.inputs.clone(),
            outputs: tree_def(trees.outputs),
            info,
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
        let outputs = self.exe.run_donated(arrays)?;
        O::unflatten(&self.outputs, &mut outputs.into_iter().map(Tensor::new))
    }

    /// What the artifact holds: signature, target, kernels, memory plan and fused program.
    pub fn info(&self) -> &ArtifactInfo {
        &self.info
    }
}

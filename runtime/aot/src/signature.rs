//! The calling convention an exported function keeps (on the CPU or a GPU): its inputs and outputs are trees (JAX's
//! pytrees) whose leaves are arrays, passed flat in the tree's order. An artifact exported by
//! `ferrax` stores both trees' structures; [`Artifact`] checks every call against them and
//! names each leaf by its path (`0.hidden.w`, `1`, ...) in errors and listings.

use crate::container::{read, ArtifactInfo, Contents};
use crate::error::ArtifactError;
use crate::executable::Executable;
use crate::gpu::{GpuProgram, GpuRunError};
use ferrax_ir::TensorType;
use ferrax_runtime::cuda::CudaDevice;
use ferrax_runtime::machine::GpuMachine;
use ferrax_runtime::Array;
use serde::{Deserialize, Serialize};

/// A tree's structure with its leaves taken out.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Structure {
    Leaf,
    /// An absent optional value.
    None,
    /// A struct, tuple, array or vector with these children, in order.
    Node(Vec<Structure>),
    /// A map with string keys, in key order.
    Dict(Vec<(String, Structure)>),
}

impl Structure {
    /// The path of each leaf, in order: children by index, map entries by key, joined by dots
    /// (iteratively: trees can be deep).
    pub fn leaf_paths(&self) -> Vec<String> {
        let mut paths = Vec::new();
        let mut work = vec![(self, String::new())];
        while let Some((s, path)) = work.pop() {
            let join = |part: &str| match path.is_empty() {
                true => part.to_string(),
                false => format!("{path}.{part}"),
            };
            match s {
                Structure::Leaf => paths.push(path),
                Structure::None => {}
                Structure::Node(children) => work.extend(
                    children
                        .iter()
                        .enumerate()
                        .rev()
                        .map(|(k, c)| (c, join(&k.to_string()))),
                ),
                Structure::Dict(entries) => {
                    work.extend(entries.iter().rev().map(|(k, c)| (c, join(k))));
                }
            }
        }
        paths
    }
}

/// The trees of an exported function: what `ferrax` stores as an artifact's metadata.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Signature {
    pub inputs: Structure,
    pub outputs: Structure,
}

impl Signature {
    /// The metadata bytes an artifact stores (CBOR).
    pub fn encode(&self) -> Result<Vec<u8>, ArtifactError> {
        let mut bytes = Vec::new();
        ciborium::into_writer(self, &mut bytes)
            .map_err(|e| ArtifactError::Malformed(e.to_string()))?;
        Ok(bytes)
    }

    pub fn decode(bytes: &[u8]) -> Result<Signature, ArtifactError> {
        ciborium::from_reader(bytes)
            .map_err(|e| ArtifactError::Malformed(format!("its tree structures: {e}")))
    }
}

/// A GPU program loaded on some machine, as [`Artifact`] runs it.
trait GpuRun: Send + Sync {
    fn run(&self, args: &[Array]) -> Result<Vec<Array>, GpuRunError>;
}

impl<M: GpuMachine> GpuRun for GpuProgram<M>
where
    GpuProgram<M>: Send + Sync,
{
    fn run(&self, args: &[Array]) -> Result<Vec<Array>, GpuRunError> {
        GpuProgram::run(self, args)
    }
}

/// What an artifact runs: a CPU executable, or a GPU program loaded on a device.
enum Program {
    Cpu(Box<Executable>),
    Gpu(Box<dyn GpuRun>),
}

/// A function exported by `ferrax` (`Lowered::export`), loaded with no compiler: called with
/// its input leaves in order, it returns its output leaves in order.
pub struct Artifact {
    program: Program,
    info: ArtifactInfo,
    signature: Signature,
    input_paths: Vec<String>,
    output_paths: Vec<String>,
}

impl Artifact {
    /// The function artifact `bytes` holds, after every check loading makes: a CPU
    /// artifact's on this CPU, a GPU artifact's on the first CUDA device.
    pub fn load(bytes: &[u8]) -> Result<Artifact, ArtifactError> {
        let sections = read(bytes)?;
        match sections.plan.contents {
            Contents::Cpu { .. } => {
                let (exe, info) = Executable::from_sections(sections)?;
                Artifact::of(Program::Cpu(Box::new(exe)), info)
            }
            Contents::Gpu(_) => {
                let device =
                    CudaDevice::new(0).map_err(|e| ArtifactError::GpuLoad(e.to_string()))?;
                let (program, info) = GpuProgram::from_sections(sections, &device)?;
                Artifact::of(Program::Gpu(Box::new(program)), info)
            }
        }
    }

    /// The function GPU artifact `bytes` holds, loaded on `machine` (a CUDA device, or an
    /// emulator), after every check loading makes.
    pub fn load_on<M>(bytes: &[u8], machine: &M) -> Result<Artifact, ArtifactError>
    where
        M: GpuMachine + Clone + 'static,
        GpuProgram<M>: Send + Sync,
    {
        let (program, info) = GpuProgram::from_artifact(bytes, machine)?;
        Artifact::of(Program::Gpu(Box::new(program)), info)
    }

    fn of(program: Program, info: ArtifactInfo) -> Result<Artifact, ArtifactError> {
        let signature = Signature::decode(&info.metadata)?;
        let input_paths = signature.inputs.leaf_paths();
        let output_paths = signature.outputs.leaf_paths();
        if input_paths.len() != info.inputs.len() || output_paths.len() != info.outputs.len() {
            return Err(ArtifactError::Malformed(
                "its tree structures do not match its program's inputs and outputs".into(),
            ));
        }
        Ok(Artifact {
            program,
            info,
            signature,
            input_paths,
            output_paths,
        })
    }

    /// Runs on `inputs`, the input tree's leaves in order (given by value: a buffer nothing
    /// else holds is donated and may hold an output). A missing, extra or mistyped leaf is an
    /// error naming it.
    pub fn call(&self, inputs: Vec<Array>) -> Result<Vec<Array>, ArtifactError> {
        if inputs.len() != self.info.inputs.len() {
            return Err(ArtifactError::Inputs(format!(
                "{} leaves given, {} expected ({})",
                inputs.len(),
                self.info.inputs.len(),
                self.input_paths.join(", ")
            )));
        }
        for ((leaf, want), path) in inputs.iter().zip(&self.info.inputs).zip(&self.input_paths) {
            if leaf.ty() != want {
                return Err(ArtifactError::Inputs(format!(
                    "leaf {path} is {}, expected {want}",
                    leaf.ty()
                )));
            }
        }
        match &self.program {
            Program::Cpu(exe) => Ok(exe.run_donated(inputs)?),
            Program::Gpu(program) => program
                .run(&inputs)
                .map_err(|e| ArtifactError::GpuRun(e.to_string())),
        }
    }

    pub fn signature(&self) -> &Signature {
        &self.signature
    }

    /// Each input leaf's path and type, in calling order.
    pub fn inputs(&self) -> impl Iterator<Item = (&str, &TensorType)> {
        self.input_paths
            .iter()
            .map(String::as_str)
            .zip(&self.info.inputs)
    }

    /// Each output leaf's path and type, in order.
    pub fn outputs(&self) -> impl Iterator<Item = (&str, &TensorType)> {
        self.output_paths
            .iter()
            .map(String::as_str)
            .zip(&self.info.outputs)
    }

    /// What the artifact holds: signature, target, kernels, memory plan and fused program.
    pub fn info(&self) -> &ArtifactInfo {
        &self.info
    }

    /// The CPU executable of a CPU artifact.
    pub fn executable(&self) -> Option<&Executable> {
        match &self.program {
            Program::Cpu(exe) => Some(exe),
            Program::Gpu(_) => None,
        }
    }
}

//! Programs exported from JAX (`jax.export`'s StableHLO text), called from Rust with arrays.
//! Each is compiled once per signature of its arguments, as `jit` caches by shape, so a
//! shape-polymorphic export (`tensor<?x4xf32>`) serves every batch size it is called with: the
//! first call of a shape specializes the program to it (`stablehlo::load_specialized`) and
//! compiles it, later calls of that shape run the executable.

use crate::compiler::pipeline::{compile, Backend, Executable, PipelineError};
use crate::ir::{Literal, Scalar};
use crate::stablehlo::{self, Parameter, Specialize};
use crate::{Array, DType, TensorType};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Why an exported program could not be loaded or called.
#[derive(Debug, thiserror::Error)]
pub enum ExportedError {
    #[error(transparent)]
    Load(#[from] stablehlo::Error),
    #[error(transparent)]
    Compile(#[from] PipelineError),
    /// Arguments that do not fit the program's parameters.
    #[error("{0}")]
    Arguments(String),
}

/// What a call's executable is chosen by: each argument's type, and the values of the
/// dimension arguments.
type Signature = (Vec<TensorType>, Vec<i64>);

/// A StableHLO program and its executables, one per argument signature it was called with.
pub struct Exported {
    text: String,
    parameters: Vec<Parameter>,
    /// How many leading parameters are dimension arguments (see [`Exported::new`]).
    dimension_arguments: usize,
    backend: Backend,
    compiled: Mutex<HashMap<Signature, Arc<Executable>>>,
}

impl Exported {
    /// The program `text`, to run on the CPU. Its parameters are read now; it compiles at its
    /// first call. A shape-polymorphic program's leading `tensor<i64>` parameters, where it has
    /// any, are its dimension arguments (the calling convention before `jax.export` computed
    /// them in `@main`): their values fix sizes, so each value compiles its own executable.
    pub fn new(text: &str) -> Result<Exported, ExportedError> {
        Exported::on(text, Backend::Cpu)
    }

    /// [`Exported::new`] on `backend`.
    pub fn on(text: &str, backend: Backend) -> Result<Exported, ExportedError> {
        let parameters = stablehlo::parameters(text)?;
        let dynamic = parameters
            .iter()
            .any(|p| p.dims.iter().any(Option::is_none));
        let dimension_arguments = match dynamic {
            true => parameters
                .iter()
                .take_while(|p| p.dtype == DType::I64 && p.dims.is_empty())
                .count(),
            false => 0,
        };
        Ok(Exported {
            text: text.to_string(),
            parameters,
            dimension_arguments,
            backend,
            compiled: Mutex::new(HashMap::new()),
        })
    }

    /// The program's parameters, as its text declares them.
    pub fn parameters(&self) -> &[Parameter] {
        &self.parameters
    }

    /// How many executables the calls so far have compiled (one per signature).
    pub fn compiled_signatures(&self) -> usize {
        self.compiled.lock().map_or(0, |c| c.len())
    }

    /// The program's results for `args`, one per parameter (dimension arguments as `i64`
    /// scalars), compiling it for their signature at the first call with it.
    pub fn call(&self, args: &[Array]) -> Result<Vec<Array>, ExportedError> {
        if args.len() != self.parameters.len() {
            return Err(ExportedError::Arguments(format!(
                "the program takes {} arguments, called with {}",
                self.parameters.len(),
                args.len()
            )));
        }
        let mut values = Vec::with_capacity(self.dimension_arguments);
        for (p, a) in self.parameters.iter().zip(args) {
            let fits = a.dtype() == p.dtype
                && a.dims().len() == p.dims.len()
                && a.dims()
                    .iter()
                    .zip(&p.dims)
                    .all(|(&d, w)| w.is_none_or(|w| w == d));
            if !fits {
                return Err(ExportedError::Arguments(format!(
                    "argument %{} is {}, where the program takes {}",
                    p.name,
                    a.ty(),
                    p
                )));
            }
        }
        for a in &args[..self.dimension_arguments] {
            values.push(
                a.item::<i64>()
                    .map_err(|e| ExportedError::Arguments(e.to_string()))?,
            );
        }
        let arrays = &args[self.dimension_arguments..];
        let signature = (arrays.iter().map(|a| a.ty().clone()).collect(), values);
        let known = self
            .compiled
            .lock()
            .ok()
            .and_then(|c| c.get(&signature).cloned());
        let compiled = match known {
            Some(c) => c,
            None => {
                let compiled = Arc::new(self.compile(&signature)?);
                if let Ok(mut cache) = self.compiled.lock() {
                    cache.insert(signature, compiled.clone());
                }
                compiled
            }
        };
        Ok(compiled.run(arrays.to_vec())?)
    }

    /// The program specialized to `signature` and compiled.
    fn compile(&self, (types, values): &Signature) -> Result<Executable, ExportedError> {
        let static_program = self
            .parameters
            .iter()
            .all(|p| p.dims.iter().all(Option::is_some));
        let func = match static_program {
            true => stablehlo::load(&self.text)?,
            false => {
                let specs: Vec<Specialize> = values
                    .iter()
                    .map(|&v| Specialize::Value(Literal::scalar(Scalar::I64(v))))
                    .chain(types.iter().map(|t| Specialize::Shape(t.dims().to_vec())))
                    .collect();
                stablehlo::load_specialized(&self.text, &specs)?
            }
        };
        Ok(compile(&func, &self.backend)?.executable)
    }
}

//! StableHLO import: JAX users export a jitted function as StableHLO text
//! (`jax.jit(f).lower(...).as_text()`), and ferrax runs it, with every downstream pass
//! (autodiff included) applying to it as to traced programs.
//!
//! The parser reads the MLIR text subset StableHLO programs use: `module`, `func.func`,
//! `func.call`/`call` (inlined), `return`, the pretty and the generic (`"stablehlo.op"(...)`)
//! op forms with regions, and every `dense<...>` constant form. Ops map one to one onto the
//! ferrax IR; anything else is an [`Error::Unsupported`] naming the op and its line.
//!
//! Shape-polymorphic programs (`jax.export` with symbolic dimensions, `tensor<?x4xf32>`) are
//! specialized to the shapes of a call when loaded ([`load_specialized`]), as JAX refines
//! them before XLA compiles them: ferrax compiles and caches one executable per shape.

mod dense;
mod import;
mod lex;
mod parse;
mod types;

pub use import::{Check, CheckKind, Expected, Program};

use ferrax_ir::{DType, Func, Literal};

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("line {line}: {message}")]
    Syntax { line: usize, message: String },
    #[error("line {line}: unsupported {what}")]
    Unsupported { line: usize, what: String },
}

impl Error {
    pub(crate) fn at(line: usize, message: impl Into<String>) -> Error {
        Error::Syntax {
            line,
            message: message.into(),
        }
    }

    pub(crate) fn unsupported(line: usize, what: impl Into<String>) -> Error {
        Error::Unsupported {
            line,
            what: what.into(),
        }
    }
}

/// Imports the program's entry point (`@main`, or its only public function) as a ferrax
/// function returning what the entry returns. A program whose parameters have dynamic
/// shapes needs [`load_specialized`].
pub fn load(text: &str) -> Result<Func, Error> {
    load_specialized(text, &[])
}

/// How [`load_specialized`] fixes one parameter of the entry point.
#[derive(Clone, Debug, PartialEq)]
pub enum Specialize {
    /// The parameter stays one, of these dimensions (its static ones as written).
    Shape(Vec<usize>),
    /// The parameter is this value, known when loading, and becomes a constant: the
    /// dimension arguments (`tensor<i64>`) that shape-polymorphic exports before `jax.export`
    /// passed ahead of the arrays.
    Value(Literal),
}

/// `load` of a program specialized to the shapes of one call: `specialize` has one entry per
/// parameter of the entry point (none for a program without dynamic shapes). The function's
/// parameters are those specialized with [`Specialize::Shape`], in order. Sizes the program
/// computes from the shapes are folded; a shape computed from tensor values is unsupported,
/// and a failed `shape_assertion` (`jax.export`'s check of the shapes) is an error with its
/// message.
pub fn load_specialized(text: &str, specialize: &[Specialize]) -> Result<Func, Error> {
    let funcs = parse::parse_module(text)?;
    let entry = entry(&funcs)?;
    let program =
        import::Importer::new(&funcs, &entry.name, &[]).import_specialized(entry, specialize)?;
    let mut func = program.func;
    func.outputs.truncate(program.returned);
    Ok(ferrax_compiler::dce::eliminate_dead_code(&func))
}

/// A parameter of a program's entry point as the text declares it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Parameter {
    pub name: String,
    pub dtype: DType,
    /// Each dimension's size; `None` where it is dynamic (`?`).
    pub dims: Vec<Option<usize>>,
}

impl std::fmt::Display for Parameter {
    /// The parameter's type in the IR's notation, `?` for a dynamic size (`f32[?,3]`).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let dims: Vec<String> = self
            .dims
            .iter()
            .map(|d| d.map_or("?".to_string(), |d| d.to_string()))
            .collect();
        write!(f, "{}[{}]", self.dtype, dims.join(","))
    }
}

/// The parameters of the program's entry point (`@main`, or its only public function): what a
/// call must give, and for a shape-polymorphic program which sizes vary.
pub fn parameters(text: &str) -> Result<Vec<Parameter>, Error> {
    let funcs = parse::parse_module(text)?;
    let entry = entry(&funcs)?;
    Ok(entry
        .params
        .iter()
        .zip(&entry.param_dynamic)
        .map(|((name, ty), dynamic)| Parameter {
            name: name.clone(),
            dtype: ty.dtype,
            dims: ty
                .dims()
                .iter()
                .enumerate()
                .map(|(k, &d)| (!dynamic.contains(k)).then_some(d))
                .collect(),
        })
        .collect())
}

/// `@main`, or the only public function.
fn entry(funcs: &[parse::MFunc]) -> Result<&parse::MFunc, Error> {
    funcs
        .iter()
        .find(|f| f.name == "main")
        .or_else(|| {
            let mut public = funcs.iter().filter(|f| f.public);
            public.next().filter(|_| public.next().is_none())
        })
        .ok_or_else(|| Error::at(1, "no @main and no single public function to import"))
}

/// A conformance test: an entry point whose external inputs (`@inputs()`, `@samples()`) are
/// separate programs, so that their values reach the test as runtime arguments.
#[derive(Clone, Debug)]
pub struct TestCase {
    pub name: String,
    /// Programs without parameters computing the test's arguments, in parameter order.
    pub inputs: Vec<Func>,
    pub program: Program,
}

/// Functions whose results are a test's inputs rather than part of its computation.
const INPUT_FUNCTIONS: [&str; 2] = ["inputs", "samples"];

/// The tests of a conformance file: `@main` of each `// -----`-separated part, or, without
/// one, every public function without parameters.
pub fn test_cases(text: &str) -> Result<Vec<TestCase>, Error> {
    let mut cases = Vec::new();
    let mut line_offset = 0;
    for part in text.split("\n// -----") {
        let shift = |e: Error| match e {
            Error::Syntax { line, message } => Error::Syntax {
                line: line + line_offset,
                message,
            },
            Error::Unsupported { line, what } => Error::Unsupported {
                line: line + line_offset,
                what,
            },
        };
        let funcs = parse::parse_module(part).map_err(shift)?;
        let entries: Vec<&parse::MFunc> = match funcs.iter().find(|f| f.name == "main") {
            Some(main) => vec![main],
            None => funcs
                .iter()
                .filter(|f| f.public && f.params.is_empty())
                .collect(),
        };
        for entry in entries {
            let mut inputs = Vec::new();
            for op in &entry.body {
                let callee = op.callee.as_deref().filter(|c| INPUT_FUNCTIONS.contains(c));
                if let (Some(c), "call" | "func.call") = (callee, op.name.as_str()) {
                    let f = funcs.iter().find(|f| f.name == c).ok_or_else(|| {
                        shift(Error::at(op.line, format!("call of unknown function @{c}")))
                    })?;
                    inputs.push(
                        import::Importer::new(&funcs, c, &[])
                            .import(f)
                            .map_err(shift)?
                            .func,
                    );
                }
            }
            let program = import::Importer::new(&funcs, &entry.name, &INPUT_FUNCTIONS)
                .import(entry)
                .map_err(shift)?;
            cases.push(TestCase {
                name: entry.name.clone(),
                inputs,
                program,
            });
        }
        line_offset += part.lines().count();
    }
    Ok(cases)
}

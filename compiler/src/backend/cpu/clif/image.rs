//! Recording kernels' machine code as data ([`CodeImage`]) as the JIT module defines it: each
//! function's bytes with the relocations Cranelift left in them, and the constant tables they
//! read. Only the relocation kinds x86-64 code uses without PIC are recorded (the loader
//! resolves exactly those); another is an error.

use super::{err, CodegenError};
use cranelift_codegen::binemit::Reloc;
use cranelift_codegen::ir::{ExternalName, UserExternalName};
use cranelift_codegen::{Context, FinalizedRelocTarget};
use ferrax_aot_runtime::image::{CodeImage, FunctionCode, RelocKind, Relocation, Symbol};
use std::collections::HashMap;

/// Records the image of a JIT module's definitions: module function and data identifiers
/// (`FuncId`, `DataId` as `u32`) to image symbols.
#[derive(Default)]
pub(super) struct Recorder {
    pub(super) image: CodeImage,
    functions: HashMap<u32, u32>,
    tables: HashMap<u32, u32>,
    imports: HashMap<u32, u32>,
}

impl Recorder {
    /// Notes that module function `id` is host function `name`.
    pub(super) fn import(&mut self, id: u32, name: &str) {
        let at = self.image.hosts.len() as u32;
        self.image.hosts.push(name.to_string());
        self.imports.insert(id, at);
    }

    /// Records module function `id`, just defined from `ctx`.
    pub(super) fn function(&mut self, id: u32, ctx: &Context) -> Result<(), CodegenError> {
        let code = ctx
            .compiled_code()
            .ok_or_else(|| err("a defined function has no compiled code"))?;
        let at = self.image.functions.len() as u32;
        let relocations = code
            .buffer
            .relocs()
            .iter()
            .map(|r| {
                let target = match &r.target {
                    FinalizedRelocTarget::Func(_) => Ok(Symbol::Function(at)),
                    FinalizedRelocTarget::ExternalName(ExternalName::User(name)) => {
                        let UserExternalName { namespace, index } =
                            ctx.func.params.user_named_funcs()[*name].clone();
                        self.symbol(namespace, index)
                    }
                    FinalizedRelocTarget::ExternalName(other) => {
                        Err(err(format!("a relocation to {other:?}")))
                    }
                }?;
                let addend = match &r.target {
                    FinalizedRelocTarget::Func(offset) => r.addend + i64::from(*offset),
                    FinalizedRelocTarget::ExternalName(_) => r.addend,
                };
                let kind = match r.kind {
                    Reloc::Abs8 => RelocKind::Absolute8,
                    Reloc::X86PCRel4 | Reloc::X86CallPCRel4 => RelocKind::Relative4,
                    other => return Err(err(format!("relocation kind {other}"))),
                };
                Ok(Relocation {
                    offset: r.offset,
                    kind,
                    target,
                    addend,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        self.image.functions.push(FunctionCode {
            bytes: code.code_buffer().to_vec(),
            relocations,
        });
        self.functions.insert(id, at);
        Ok(())
    }

    /// Records module data object `id` with contents `bytes`.
    pub(super) fn table(&mut self, id: u32, bytes: &[u8]) {
        let at = self.image.tables.len() as u32;
        self.image.tables.push(bytes.to_vec());
        self.tables.insert(id, at);
    }

    /// The image symbol of module function (`namespace` 0) or data object (1) `index`.
    fn symbol(&self, namespace: u32, index: u32) -> Result<Symbol, CodegenError> {
        let find = |map: &HashMap<u32, u32>| map.get(&index).copied();
        let found = match namespace {
            0 => find(&self.functions)
                .map(Symbol::Function)
                .or_else(|| find(&self.imports).map(Symbol::Host)),
            1 => find(&self.tables).map(Symbol::Table),
            _ => None,
        };
        found.ok_or_else(|| {
            err(format!(
                "relocation to undefined symbol {namespace}:{index}"
            ))
        })
    }

    /// Notes that kernel entries run module function `id` (already recorded).
    pub(super) fn entry(&mut self, id: u32) -> Result<(), CodegenError> {
        match self.symbol(0, id)? {
            Symbol::Function(f) => {
                self.image.entries.push(f);
                Ok(())
            }
            other => Err(err(format!("kernel entry {other:?} is not a function"))),
        }
    }
}

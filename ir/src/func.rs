//! Functions in SSA form. Values are numbered densely: parameters first, then one value per
//! instruction in order, so a function's numbering is canonical by construction.

use crate::{infer_type, Op, TensorType, TypeError};
use serde::{Deserialize, Serialize};
use std::fmt;

/// An SSA value: a parameter (`0..params.len()`) or the result of an instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ValueId(pub u32);

impl ValueId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for ValueId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "%{}", self.0)
    }
}

/// One instruction: `op` applied to `args`, producing one value of type `ty`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Instr {
    pub op: Op,
    pub args: Vec<ValueId>,
    pub ty: TensorType,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Func {
    pub name: String,
    pub params: Vec<TensorType>,
    pub body: Vec<Instr>,
    pub outputs: Vec<ValueId>,
}

impl Func {
    pub fn num_values(&self) -> usize {
        self.params.len() + self.body.len()
    }

    /// The type of `v`, or `None` if `v` is not a value of this function.
    pub fn value_type(&self, v: ValueId) -> Option<&TensorType> {
        let i = v.index();
        if i < self.params.len() {
            self.params.get(i)
        } else {
            self.body.get(i - self.params.len()).map(|ins| &ins.ty)
        }
    }

    /// The value defined by instruction `i` of the body.
    pub fn instr_value(&self, i: usize) -> ValueId {
        ValueId((self.params.len() + i) as u32)
    }

    pub fn output_types(&self) -> Vec<TensorType> {
        self.outputs
            .iter()
            .filter_map(|&v| self.value_type(v).cloned())
            .collect()
    }
}

/// Builds a [`Func`] one instruction at a time, inferring each result type.
#[derive(Clone, Debug)]
pub struct FuncBuilder {
    func: Func,
}

impl FuncBuilder {
    pub fn new(name: impl Into<String>) -> FuncBuilder {
        FuncBuilder {
            func: Func {
                name: name.into(),
                params: Vec::new(),
                body: Vec::new(),
                outputs: Vec::new(),
            },
        }
    }

    /// Adds a parameter. All parameters must come before the first instruction.
    pub fn param(&mut self, ty: TensorType) -> ValueId {
        assert!(
            self.func.body.is_empty(),
            "parameters must be added before instructions"
        );
        self.func.params.push(ty);
        ValueId(self.func.params.len() as u32 - 1)
    }

    pub fn value_type(&self, v: ValueId) -> Option<&TensorType> {
        self.func.value_type(v)
    }

    /// The instruction that defines `v`, if an instruction does (not a parameter).
    pub fn instr(&self, v: ValueId) -> Option<&Instr> {
        self.func
            .body
            .get(v.index().checked_sub(self.func.params.len())?)
    }

    /// Appends `op(args)` and returns its value, or the type error that makes it invalid.
    pub fn push(&mut self, op: Op, args: &[ValueId]) -> Result<ValueId, TypeError> {
        let mut types = Vec::with_capacity(args.len());
        for &a in args {
            let ty = self.func.value_type(a).ok_or_else(|| TypeError::Invalid {
                op: op.name(),
                message: format!("operand {a} is not defined"),
            })?;
            types.push(ty);
        }
        let ty = infer_type(&op, &types)?;
        self.func.body.push(Instr {
            op,
            args: args.to_vec(),
            ty,
        });
        Ok(self.func.instr_value(self.func.body.len() - 1))
    }

    /// Appends `func`'s instructions on `args` (one per parameter) and returns its outputs.
    pub fn inline(&mut self, func: &Func, args: &[ValueId]) -> Result<Vec<ValueId>, TypeError> {
        let undefined = |v: ValueId| TypeError::Invalid {
            op: "call",
            message: format!("{v} of the inlined function {} is not defined", func.name),
        };
        let mut values: Vec<ValueId> = args.to_vec();
        for ins in &func.body {
            let operands = ins
                .args
                .iter()
                .map(|a| values.get(a.index()).copied().ok_or_else(|| undefined(*a)))
                .collect::<Result<Vec<_>, _>>()?;
            values.push(self.push(ins.op.clone(), &operands)?);
        }
        func.outputs
            .iter()
            .map(|o| values.get(o.index()).copied().ok_or_else(|| undefined(*o)))
            .collect()
    }

    pub fn finish(mut self, outputs: Vec<ValueId>) -> Func {
        self.func.outputs = outputs;
        self.func
    }
}

//! What the control-flow functions share: tracing a user closure into a region (a function
//! of the carried or operand leaves, then of the enclosing-trace tracers it closes over),
//! rebinding a region's parameters to the call's operands, and emitting the call (one
//! instruction per result, or one interpreter call on concrete operands).

use crate::tensor::{apply_at, Inner};
use crate::trace::{trace_with_outputs, Outputs, Traced};
use crate::{Error, Tensor, Tree, TreeDef};
use ferrax_ir::{Func, FuncBuilder, Op, TensorType, TypeError, ValueId};
use ferrax_runtime::eval_call;
use std::panic::Location;
use std::sync::Arc;

/// A closure traced on the types of some leaves.
pub(super) struct Region {
    pub outputs: Outputs,
    pub traced: Result<Traced, Error>,
}

/// Data-less leaves of `leaves`' types, in `def`'s structure: what a region is traced on.
pub(super) fn specs<T: Tree>(def: &TreeDef, leaves: &[Tensor]) -> T {
    let mut specs = leaves
        .iter()
        .map(|l| Tensor::spec(l.dtype(), l.shape().to_vec()));
    T::unflatten(def, &mut specs)
        .unwrap_or_else(|e| unreachable!("a Tree does not rebuild from its own flattening: {e}"))
}

/// `f` traced on `inputs` as the function `name`.
pub(super) fn trace_region<I: Tree, O: Tree>(
    name: &str,
    f: impl FnOnce(I) -> O,
    inputs: &I,
) -> Region {
    match trace_with_outputs(name, f, inputs) {
        Ok((outputs, traced)) => Region { outputs, traced },
        Err(e) => Region {
            outputs: Outputs {
                def: TreeDef::Leaf,
                types: Vec::new(),
            },
            traced: Err(e),
        },
    }
}

/// A tree shaped like `def`, of leaves of `types`, each carrying `error`.
pub(super) fn failed_tree<T: Tree>(def: &TreeDef, types: &[TensorType], error: Error) -> T {
    tree(def, failed_leaves(types, error))
}

/// `leaves` in `def`'s structure, which they were flattened from (or made for).
pub(super) fn tree<T: Tree>(def: &TreeDef, leaves: Vec<Tensor>) -> T {
    T::unflatten(def, &mut leaves.into_iter())
        .unwrap_or_else(|e| unreachable!("a Tree does not rebuild from its own flattening: {e}"))
}

/// An error at the user's `location`.
pub(super) fn error_at(location: &'static Location<'static>, message: String) -> Error {
    Error::Trace { location, message }
}

/// `(a, b)`: types as errors show them.
pub(super) fn show(types: &[TensorType]) -> String {
    let parts: Vec<String> = types.iter().map(|t| t.to_string()).collect();
    format!("({})", parts.join(", "))
}

/// `func` as a function of `params`: its parameter `i` is `params[map[i]]`; after its own
/// outputs it returns the parameters `passed` unchanged.
pub(super) fn rebind(
    func: &Func,
    params: &[TensorType],
    map: &[usize],
    passed: &[usize],
) -> Result<Func, TypeError> {
    let mut b = FuncBuilder::new(func.name.clone());
    let all: Vec<ValueId> = params.iter().map(|t| b.param(t.clone())).collect();
    let mut values: Vec<ValueId> = map.iter().map(|&i| all[i]).collect();
    for ins in &func.body {
        let args: Vec<ValueId> = ins.args.iter().map(|a| values[a.index()]).collect();
        values.push(b.push(ins.op.clone(), &args)?);
    }
    let mut outputs: Vec<ValueId> = func.outputs.iter().map(|o| values[o.index()]).collect();
    outputs.extend(passed.iter().map(|&i| all[i]));
    Ok(b.finish(outputs))
}

/// The results (of `types`) of the call `op` (yielding result 0) on `operands`: one
/// instruction per result in a trace, one run of the interpreter on concrete data.
pub(super) fn emit_call(
    location: &'static Location<'static>,
    op: &Op,
    operands: &[Tensor],
    types: &[TensorType],
) -> Vec<Tensor> {
    if let Some(e) = operands.iter().find_map(|o| o.error()) {
        return failed_leaves(types, e.clone());
    }
    let concrete: Option<Vec<_>> = operands
        .iter()
        .map(|o| match &o.0 {
            Inner::Concrete(a) => Some(a),
            _ => None,
        })
        .collect();
    if let Some(arrays) = concrete {
        return match eval_call(op, &arrays) {
            // A loop's results past the carry are the values it closed over.
            Ok(out) if out.len() >= types.len() => {
                out.into_iter().take(types.len()).map(Tensor::new).collect()
            }
            Ok(out) => failed_leaves(
                types,
                error_at(location, format!("the call gave {} results", out.len())),
            ),
            Err(e) => failed_leaves(types, error_at(location, e.to_string())),
        };
    }
    // Concrete operands (an eager counter's initial 0, say) become constants once, here: lifted
    // by each result's instruction they would be distinct values, making the instructions
    // distinct calls, each running the loop.
    let lifted: Vec<Tensor> = operands
        .iter()
        .map(|o| match &o.0 {
            Inner::Concrete(a) => apply_at(location, Op::Constant(a.to_literal()), &[]),
            _ => o.clone(),
        })
        .collect();
    let refs: Vec<&Tensor> = lifted.iter().collect();
    (0..types.len())
        .map(|k| apply_at(location, op.with_result(k), &refs))
        .collect()
}

/// Leaves of `types`, each carrying `error`.
fn failed_leaves(types: &[TensorType], error: Error) -> Vec<Tensor> {
    let error = Arc::new(error);
    types
        .iter()
        .map(|ty| {
            Tensor(Inner::Failed {
                error: error.clone(),
                ty: ty.clone(),
            })
        })
        .collect()
}

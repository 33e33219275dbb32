//! Attention spelled in plain ops for backends without an attention kernel: each attention
//! instruction (in the functions the program holds too) is replaced by its decomposition
//! ([`ferrax_ir::Attention::decompose`]). The pipeline does this before simplifying, so the
//! parts of one attention (the output and the log-sum-exps; the three gradients) share their
//! scores, softmax and products once the simplifier merges what they compute alike.

use ferrax_ir::{Attention, Func, FuncBuilder, Op, TensorType, TypeError, ValueId};

/// Whether `func`, or a function it holds, has an attention instruction.
pub fn has_attention(func: &Func) -> bool {
    func.body.iter().any(|ins| {
        matches!(ins.op, Op::Attention(_)) || ins.op.regions().iter().any(|(_, f)| has_attention(f))
    })
}

/// `func` with every attention instruction replaced by its decomposition; `func` itself
/// where there is none.
pub fn expand_attention(func: &Func) -> Result<Func, TypeError> {
    expand_attention_except(func, &|_, _| false)
}

/// `func` with every attention instruction replaced by its decomposition but those `kept`
/// says a backend computes as they are (given the part and its operand types).
pub fn expand_attention_except(
    func: &Func,
    kept: &dyn Fn(&Attention, &[&TensorType]) -> bool,
) -> Result<Func, TypeError> {
    if !has_attention(func) {
        return Ok(func.clone());
    }
    let mut b = FuncBuilder::new(func.name.clone());
    let mut values: Vec<ValueId> = func.params.iter().map(|t| b.param(t.clone())).collect();
    for ins in &func.body {
        let args: Vec<ValueId> = ins.args.iter().map(|a| values[a.index()]).collect();
        let v = match &ins.op {
            Op::Attention(a) => {
                let types: Vec<&TensorType> = ins
                    .args
                    .iter()
                    .filter_map(|&x| func.value_type(x))
                    .collect();
                if kept(a, &types) {
                    b.push(ins.op.clone(), &args)?
                } else {
                    let decomposition = a.decompose(&types)?;
                    let out = b.inline(&decomposition, &args)?;
                    out.first().copied().ok_or_else(|| TypeError::Invalid {
                        op: a.name(),
                        message: "its decomposition has no result".into(),
                    })?
                }
            }
            op => b.push(op.map_regions(|f| expand_attention_except(f, kept))?, &args)?,
        };
        values.push(v);
    }
    let outputs = func.outputs.iter().map(|o| values[o.index()]).collect();
    Ok(b.finish(outputs))
}

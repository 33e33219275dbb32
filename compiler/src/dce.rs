//! Dead-code elimination: drops instructions no output depends on and renumbers densely.
//! Derivative programs copy the whole primal computation; this removes what they don't use.

use ferrax_ir::{Func, Instr, ValueId};

pub fn eliminate_dead_code(func: &Func) -> Func {
    let n = func.params.len();
    let mut live = vec![false; func.num_values()];
    for o in &func.outputs {
        live[o.index()] = true;
    }
    for (i, ins) in func.body.iter().enumerate().rev() {
        if live[n + i] {
            for a in &ins.args {
                live[a.index()] = true;
            }
        }
    }
    let mut renumber: Vec<Option<ValueId>> = (0..n).map(|p| Some(ValueId(p as u32))).collect();
    let mut body = Vec::new();
    for (i, ins) in func.body.iter().enumerate() {
        if live[n + i] {
            let args = ins
                .args
                .iter()
                .filter_map(|a| renumber[a.index()])
                .collect();
            body.push(Instr {
                op: ins.op.clone(),
                args,
                ty: ins.ty.clone(),
            });
            renumber.push(Some(ValueId((n + body.len() - 1) as u32)));
        } else {
            renumber.push(None);
        }
    }
    Func {
        name: func.name.clone(),
        params: func.params.clone(),
        outputs: func
            .outputs
            .iter()
            .filter_map(|o| renumber[o.index()])
            .collect(),
        body,
    }
}

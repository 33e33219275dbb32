//! Equality saturation (`egg`): the program goes into an e-graph, staged rule sets add
//! equivalent forms within node, iteration and time limits, and the cheapest program under a
//! cost model of memory traffic and arithmetic comes back out. The result is verified, and a
//! [`Report`] records why each stage stopped and which rules fired.
//!
//! It runs after differentiation: `custom_vjp` calls are replaced by their primal programs and
//! `stop_gradient` is dropped, since only values matter from here on.

mod cost;
mod lang;
mod rules;

use egg::{Extractor, Id, Runner, Symbol};
use ferrax_ir::{verify, Func, FuncBuilder, Op, ValueId, VerifyError};
use lang::{op_of, Facts, Graph, Node};
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::time::Duration;

/// Bounds on one stage of rewriting.
#[derive(Clone, Debug)]
pub struct Limits {
    pub nodes: usize,
    pub iterations: usize,
    pub time: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            nodes: 50_000,
            iterations: 16,
            time: Duration::from_millis(200),
        }
    }
}

/// What simplification did, for `FERRAX_DUMP` and tests.
#[derive(Clone, Debug, Default)]
pub struct Report {
    pub instructions_before: usize,
    pub instructions_after: usize,
    /// Per stage: its name and why it stopped.
    pub stages: Vec<(String, String)>,
    /// How often each rule fired.
    pub applied: BTreeMap<String, usize>,
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "instructions: {} -> {}",
            self.instructions_before, self.instructions_after
        )?;
        for (stage, stop) in &self.stages {
            writeln!(f, "stage {stage}: stopped: {stop}")?;
        }
        for (rule, n) in &self.applied {
            writeln!(f, "rule {rule}: {n}")?;
        }
        Ok(())
    }
}

#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum SimplifyError {
    #[error("the simplified program does not verify: {0}")]
    Verify(#[from] VerifyError),
    #[error("extraction found no well-typed program for value {0}")]
    Extraction(ValueId),
}

/// Simplifies `func` with the default limits.
pub fn simplify(func: &Func) -> Result<(Func, Report), SimplifyError> {
    simplify_with(func, &Limits::default())
}

pub fn simplify_with(func: &Func, limits: &Limits) -> Result<(Func, Report), SimplifyError> {
    verify(func)?;
    let func = &inline_custom_vjp(func);
    let (mut egraph, roots) = to_egraph(func);
    let mut report = Report {
        // Counted after custom_vjp calls are inlined: what enters the e-graph.
        instructions_before: func.body.len(),
        ..Report::default()
    };
    for (stage, rules) in rules::stages() {
        let runner = Runner::default()
            .with_egraph(egraph)
            .with_node_limit(limits.nodes)
            .with_iter_limit(limits.iterations)
            .with_time_limit(limits.time)
            .run(&rules);
        let stop = runner
            .stop_reason
            .as_ref()
            .map_or_else(|| "not run".to_string(), |r| format!("{r:?}"));
        report.stages.push((stage.to_string(), stop));
        for it in &runner.iterations {
            for (rule, n) in &it.applied {
                *report.applied.entry(rule.to_string()).or_default() += n;
            }
        }
        egraph = runner.egraph;
    }
    let simplified = extract(func, &egraph, &roots)?;
    verify(&simplified)?;
    report.instructions_after = simplified.body.len();
    Ok((simplified, report))
}

/// `func` with every `custom_vjp` replaced by its primal program: the simplifier runs after
/// differentiation, when only the values matter.
fn inline_custom_vjp(func: &Func) -> Func {
    let mut b = FuncBuilder::new(func.name.clone());
    let mut values: Vec<ValueId> = func.params.iter().map(|p| b.param(p.clone())).collect();
    for ins in &func.body {
        let args: Vec<ValueId> = ins.args.iter().map(|a| values[a.index()]).collect();
        let out = match &ins.op {
            Op::CustomVjp(c) => inline_call(&mut b, &inline_custom_vjp(&c.primal), &args),
            op => b.push(op.clone(), &args).ok(),
        };
        match out {
            Some(v) => values.push(v),
            None => return func.clone(),
        }
    }
    b.finish(func.outputs.iter().map(|o| values[o.index()]).collect())
}

/// Emits `callee` on `args` and returns its single output.
fn inline_call(b: &mut FuncBuilder, callee: &Func, args: &[ValueId]) -> Option<ValueId> {
    let mut values = args.to_vec();
    for ins in &callee.body {
        let operands: Vec<ValueId> = ins.args.iter().map(|a| values[a.index()]).collect();
        values.push(b.push(ins.op.clone(), &operands).ok()?);
    }
    callee.outputs.first().map(|o| values[o.index()])
}

/// The e-graph of `func` and the class of each of its outputs.
fn to_egraph(func: &Func) -> (Graph, Vec<Id>) {
    let mut egraph = Graph::new(Facts::new(func.params.clone()));
    let mut classes: Vec<Id> = (0..func.params.len())
        .map(|k| {
            egraph.add(Node {
                key: Symbol::from(format!("param#{k}")),
                children: Vec::new(),
            })
        })
        .collect();
    for ins in &func.body {
        let operands: Vec<Id> = ins.args.iter().map(|a| classes[a.index()]).collect();
        classes.push(rules::add_op(&mut egraph, &ins.op, &operands));
    }
    egraph.rebuild();
    let roots = func.outputs.iter().map(|o| classes[o.index()]).collect();
    (egraph, roots)
}

fn extract(func: &Func, egraph: &Graph, roots: &[Id]) -> Result<Func, SimplifyError> {
    let extractor = Extractor::new(egraph, cost::Traffic { egraph });
    let mut b = FuncBuilder::new(func.name.clone());
    for p in &func.params {
        b.param(p.clone());
    }
    let mut memo: HashMap<Id, ValueId> = HashMap::new();
    let mut outputs = Vec::with_capacity(roots.len());
    for (k, &root) in roots.iter().enumerate() {
        let v = emit(egraph, &extractor, &mut b, &mut memo, egraph.find(root))
            .ok_or(SimplifyError::Extraction(func.outputs[k]))?;
        outputs.push(v);
    }
    Ok(b.finish(outputs))
}

/// Emits the best program for `class` (operands first), sharing classes already emitted.
fn emit(
    egraph: &Graph,
    extractor: &Extractor<cost::Traffic, Node, Facts>,
    b: &mut FuncBuilder,
    memo: &mut HashMap<Id, ValueId>,
    class: Id,
) -> Option<ValueId> {
    if let Some(&v) = memo.get(&class) {
        return Some(v);
    }
    let node = extractor.find_best_node(class).clone();
    let v = if let Some(k) = node.key.as_str().strip_prefix("param#") {
        ValueId(k.parse().ok()?)
    } else {
        let (op, operands) = op_of(egraph, &node)?;
        let mut args = Vec::with_capacity(operands.len());
        for &c in operands {
            args.push(emit(egraph, extractor, b, memo, egraph.find(c))?);
        }
        b.push(op, &args).ok()?
    };
    memo.insert(class, v);
    Some(v)
}

//! Equality saturation (`egg`): the program goes into an e-graph, staged rule sets add
//! equivalent forms within node, iteration and time limits, and the cheapest program under a
//! cost model of memory traffic and arithmetic comes back out. The result is verified, and a
//! [`Report`] records why each stage stopped and which rules fired.
//!
//! Every phase is linear in program size: programs longer than [`Limits::region`] are
//! simplified region by region ([`regions`]), and extraction settles each class once
//! ([`extract`]). Node and iteration limits decide where rewriting stops; the time limit only
//! guards against a runaway rule set, so results do not depend on the machine's load.
//!
//! It runs after differentiation: `custom_vjp` calls are replaced by their primal programs and
//! `stop_gradient` is dropped, since only values matter from here on. The functions of control
//! flow are simplified on their own first ([`nested`]).

mod cost;
mod extract;
mod hoist;
mod lang;
mod nested;
mod regions;
mod rules;
mod transposed_products;

use egg::{Id, Runner, Symbol};
use ferrax_ir::{verify, Func, FuncBuilder, Op, ValueId, VerifyError};
use lang::{Facts, Graph, Node};
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::time::Duration;

/// Bounds on one stage of rewriting of one region.
#[derive(Clone, Debug)]
pub struct Limits {
    pub nodes: usize,
    pub iterations: usize,
    /// A guard only: the node and iteration limits are meant to stop rewriting first.
    pub time: Duration,
    /// The most instructions one e-graph takes; longer programs are cut into regions.
    pub region: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            nodes: 50_000,
            iterations: 16,
            time: Duration::from_secs(5),
            region: 2048,
        }
    }
}

/// What simplification did, for `FERRAX_DUMP` and tests.
#[derive(Clone, Debug, Default)]
pub struct Report {
    pub instructions_before: usize,
    pub instructions_after: usize,
    /// Per stage: its name and why it stopped (with how many regions stopped so, where the
    /// program was cut into several).
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
    let func = &inline_calls(func);
    let mut report = Report {
        // Counted after custom_vjp and remat calls are inlined: what enters the e-graph.
        instructions_before: func.body.len(),
        ..Report::default()
    };
    let func = &nested::fold_constant_conds(func);
    let func = &nested::prune_scan_outputs(func);
    let func = &nested::simplify_regions(func, limits, &mut report)?;
    let func = &hoist::hoist_loop_invariants(func);
    let stages = rules::stages();
    let simplified = if func.body.len() <= limits.region {
        let (simplified, stops) = simplify_region(func, &stages, limits, &mut report)?;
        report.stages = stops;
        simplified
    } else {
        simplify_regions(func, &stages, limits, &mut report)?
    };
    let simplified = transposed_products::swap_transposed_products(&simplified);
    verify(&simplified)?;
    report.instructions_after = simplified.body.len();
    Ok((simplified, report))
}

/// `func` simplified region by region, the regions' programs joined in order.
fn simplify_regions(
    func: &Func,
    stages: &[(&str, Vec<rules::Rule>)],
    limits: &Limits,
    report: &mut Report,
) -> Result<Func, SimplifyError> {
    let mut b = FuncBuilder::new(func.name.clone());
    // Both programs number their parameters first, in the same order.
    let mut values: HashMap<ValueId, ValueId> = HashMap::new();
    for p in &func.params {
        let v = b.param(p.clone());
        values.insert(v, v);
    }
    let mut stops: BTreeMap<(usize, String), usize> = BTreeMap::new();
    for region in regions::regions(func, limits.region) {
        let (simplified, region_stops) = simplify_region(&region.func, stages, limits, report)?;
        for (k, (_, stop)) in region_stops.into_iter().enumerate() {
            *stops.entry((k, stop)).or_default() += 1;
        }
        let broken =
            || SimplifyError::Extraction(region.outputs.first().copied().unwrap_or(ValueId(0)));
        let mut local: Vec<ValueId> = region
            .inputs
            .iter()
            .map(|v| values.get(v).copied())
            .collect::<Option<_>>()
            .ok_or_else(broken)?;
        for ins in &simplified.body {
            let args: Vec<ValueId> = ins.args.iter().map(|a| local[a.index()]).collect();
            local.push(b.push(ins.op.clone(), &args).map_err(|_| broken())?);
        }
        if simplified.outputs.len() != region.outputs.len() {
            return Err(broken());
        }
        for (o, v) in simplified.outputs.iter().zip(&region.outputs) {
            values.insert(*v, local[o.index()]);
        }
    }
    let names: Vec<&str> = stages.iter().map(|(name, _)| *name).collect();
    report.stages = stops
        .into_iter()
        .map(|((k, stop), n)| {
            let name = names.get(k).copied().unwrap_or("?").to_string();
            (name, format!("{stop} (in {n} regions)"))
        })
        .collect();
    let outputs = func
        .outputs
        .iter()
        .map(|o| values.get(o).copied().ok_or(SimplifyError::Extraction(*o)))
        .collect::<Result<_, _>>()?;
    Ok(b.finish(outputs))
}

/// `func` through every stage of rewriting in one e-graph, and why each stage stopped.
fn simplify_region(
    func: &Func,
    stages: &[(&str, Vec<rules::Rule>)],
    limits: &Limits,
    report: &mut Report,
) -> Result<(Func, Vec<(String, String)>), SimplifyError> {
    let (mut egraph, roots) = to_egraph(func);
    let mut stops = Vec::new();
    for (stage, rules) in stages {
        let runner = Runner::default()
            .with_egraph(egraph)
            .with_node_limit(limits.nodes)
            .with_iter_limit(limits.iterations)
            .with_time_limit(limits.time)
            .run(rules);
        let stop = runner
            .stop_reason
            .as_ref()
            .map_or_else(|| "not run".to_string(), |r| format!("{r:?}"));
        stops.push((stage.to_string(), stop));
        for it in &runner.iterations {
            for (rule, n) in &it.applied {
                *report.applied.entry(rule.to_string()).or_default() += n;
            }
        }
        egraph = runner.egraph;
    }
    Ok((extract(func, &egraph, &roots)?, stops))
}

/// `func` with every `custom_vjp` and `custom_jvp` replaced by its primal program and every `remat` by its
/// body: the simplifier runs after differentiation, when only the values matter (a `remat`'s
/// backward call is in another region than its forward values where recomputing them saves
/// memory: a scan's backward body).
fn inline_calls(func: &Func) -> Func {
    let mut b = FuncBuilder::new(func.name.clone());
    let mut values: Vec<ValueId> = func.params.iter().map(|p| b.param(p.clone())).collect();
    for ins in &func.body {
        let args: Vec<ValueId> = ins.args.iter().map(|a| values[a.index()]).collect();
        let out = match &ins.op {
            Op::CustomVjp(c) => inline_call(&mut b, &inline_calls(&c.primal), &args, 0),
            Op::CustomJvp(c) => inline_call(&mut b, &inline_calls(&c.primal), &args, 0),
            Op::Remat(r) => inline_call(&mut b, &inline_calls(&r.body), &args, r.result),
            op => b.push(op.clone(), &args).ok(),
        };
        match out {
            Some(v) => values.push(v),
            None => return func.clone(),
        }
    }
    b.finish(func.outputs.iter().map(|o| values[o.index()]).collect())
}

/// Emits `callee` on `args` and returns its output `k`.
fn inline_call(b: &mut FuncBuilder, callee: &Func, args: &[ValueId], k: usize) -> Option<ValueId> {
    let mut values = args.to_vec();
    for ins in &callee.body {
        let operands: Vec<ValueId> = ins.args.iter().map(|a| values[a.index()]).collect();
        values.push(b.push(ins.op.clone(), &operands).ok()?);
    }
    callee.outputs.get(k).map(|o| values[o.index()])
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
    let choices = extract::Choices::new(egraph);
    let mut b = FuncBuilder::new(func.name.clone());
    for p in &func.params {
        b.param(p.clone());
    }
    let mut emitted = HashMap::new();
    let mut outputs = Vec::with_capacity(roots.len());
    for (k, &root) in roots.iter().enumerate() {
        let v = choices
            .emit(&mut b, &mut emitted, root)
            .ok_or(SimplifyError::Extraction(func.outputs[k]))?;
        outputs.push(v);
    }
    Ok(b.finish(outputs))
}

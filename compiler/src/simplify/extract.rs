//! Extraction: the cheapest program the e-graph holds, in time O(E log E) in its nodes.
//!
//! egg's `Extractor` sweeps every class until no cost changes, which takes as many sweeps as
//! the program is deep: quadratic on a long chain. Here costs are settled in increasing order
//! (Knuth's generalisation of Dijkstra's algorithm to the e-graph's hypergraph): a class is
//! final when it leaves the queue, and a node is costed once, when the last of its operand
//! classes becomes final. Classes reachable only through cycles get no cost and are never
//! chosen. The program is then written out operands first with an explicit stack, so that no
//! depth of the program reaches the call stack.

use super::cost::{own_cost, OPERAND_CAP};
use super::lang::{op_of, Graph, Node};
use egg::{Id, Language};
use ferrax_ir::{FuncBuilder, ValueId};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

/// The node chosen for each class that has a well-typed, acyclic program.
pub struct Choices<'g> {
    egraph: &'g Graph,
    best: HashMap<Id, &'g Node>,
}

impl<'g> Choices<'g> {
    pub fn new(egraph: &'g Graph) -> Choices<'g> {
        let mut classes: Vec<Id> = egraph.classes().map(|c| c.id).collect();
        classes.sort_unstable();
        let slot: HashMap<Id, usize> = classes.iter().enumerate().map(|(k, &c)| (c, k)).collect();
        // For each class, the nodes reading it, one entry per distinct operand class of a node;
        // for each node, how many of its distinct operand classes are not final yet.
        let mut readers: Vec<Vec<(usize, usize)>> = vec![Vec::new(); classes.len()];
        let mut waiting: Vec<Vec<usize>> = Vec::with_capacity(classes.len());
        let mut ready = Vec::new();
        for (k, &c) in classes.iter().enumerate() {
            let nodes = &egraph[c].nodes;
            let mut counts = Vec::with_capacity(nodes.len());
            for (n, node) in nodes.iter().enumerate() {
                let mut operands: Vec<usize> = node
                    .children()
                    .iter()
                    .map(|&o| slot[&egraph.find(o)])
                    .collect();
                operands.sort_unstable();
                operands.dedup();
                for &o in &operands {
                    readers[o].push((k, n));
                }
                if operands.is_empty() {
                    ready.push((k, n));
                }
                counts.push(operands.len());
            }
            waiting.push(counts);
        }
        let mut cost: Vec<Option<(f64, usize)>> = vec![None; classes.len()];
        let mut done = vec![false; classes.len()];
        let mut queue = BinaryHeap::new();
        let offer = |k: usize, n: usize, cost: &mut Vec<Option<(f64, usize)>>| {
            let node = &egraph[classes[k]].nodes[n];
            let own = own_cost(egraph, node)?;
            let operands: f64 = node
                .children()
                .iter()
                .map(|&o| cost[slot[&egraph.find(o)]].map_or(f64::INFINITY, |(c, _)| c))
                .map(|c| c.min(OPERAND_CAP))
                .sum();
            let total = own + operands;
            let better = cost[k].is_none_or(|(c, _)| total < c);
            better.then(|| {
                cost[k] = Some((total, n));
                // Non-negative floats order as their bits do.
                Reverse((total.to_bits(), k))
            })
        };
        for (k, n) in ready {
            if let Some(entry) = offer(k, n, &mut cost) {
                queue.push(entry);
            }
        }
        while let Some(Reverse((bits, k))) = queue.pop() {
            let current = cost[k].map(|(c, _)| c.to_bits());
            if done[k] || current != Some(bits) {
                continue;
            }
            done[k] = true;
            for &(reader, n) in &readers[k] {
                waiting[reader][n] -= 1;
                if waiting[reader][n] == 0 && !done[reader] {
                    if let Some(entry) = offer(reader, n, &mut cost) {
                        queue.push(entry);
                    }
                }
            }
        }
        let best = classes
            .iter()
            .zip(&cost)
            .filter_map(|(&c, chosen)| chosen.map(|(_, n)| (c, &egraph[c].nodes[n])))
            .collect();
        Choices { egraph, best }
    }

    /// Emits the chosen program for `root` into `b`, operands first, sharing every class
    /// already emitted (in `emitted`); `None` if some class on the way has no program.
    pub fn emit(
        &self,
        b: &mut FuncBuilder,
        emitted: &mut HashMap<Id, ValueId>,
        root: Id,
    ) -> Option<ValueId> {
        let root = self.egraph.find(root);
        // (class, whether its operands are already emitted)
        let mut stack = vec![(root, false)];
        while let Some((class, operands_done)) = stack.pop() {
            if emitted.contains_key(&class) {
                continue;
            }
            let node = *self.best.get(&class)?;
            if let Some(k) = node.key.as_str().strip_prefix("param#") {
                emitted.insert(class, ValueId(k.parse().ok()?));
                continue;
            }
            let (op, operands) = op_of(self.egraph, node)?;
            if operands_done {
                let args = operands
                    .iter()
                    .map(|&o| emitted.get(&self.egraph.find(o)).copied())
                    .collect::<Option<Vec<ValueId>>>()?;
                emitted.insert(class, b.push(op, &args).ok()?);
            } else {
                stack.push((class, true));
                for &o in operands.iter().rev() {
                    let o = self.egraph.find(o);
                    if !emitted.contains_key(&o) {
                        stack.push((o, false));
                    }
                }
            }
        }
        emitted.get(&root).copied()
    }
}

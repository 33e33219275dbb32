//! A GPU program's plan as data: its steps, each launch's entry and parameters, its PTX
//! modules and the memory plan. The compiler makes one without a device; an artifact stores
//! one; [`GpuProgram`](super::GpuProgram) loads one on a machine and runs it.

use crate::gemm::Gemm;
use crate::memory::MemoryReport;
use ferrax_ir::{Func, TensorType, ValueId};
use serde::{Deserialize, Serialize};
use std::fmt::{self, Write};

/// The GPU architecture an artifact's PTX was rendered for: it loads on devices of this
/// compute capability or a later one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuTarget {
    pub major: u32,
    pub minor: u32,
}

impl GpuTarget {
    /// Whether a device of compute capability `major.minor` runs this target's PTX.
    pub fn runs_on(self, (major, minor): (i32, i32)) -> bool {
        let device = (i64::from(major), i64::from(minor));
        device >= (i64::from(self.major), i64::from(self.minor))
    }
}

impl fmt::Display for GpuTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sm_{}{}", self.major, self.minor)
    }
}

/// Threads per block of elementwise, copy, gather, scatter and integer-product launches.
pub const BLOCK: u32 = 256;

/// What runs one step of a GPU program.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum GpuStep {
    /// Kernel launch `l`.
    Launch(usize),
    /// A `dot_general` on cuBLAS, or for integers by integer product `int`, its operands
    /// first copied into matrix layout by the copies given.
    Gemm {
        index: usize,
        gemm: Gemm,
        lhs_copy: Option<usize>,
        rhs_copy: Option<usize>,
        int: Option<usize>,
    },
    /// Reduction launch `launch` computing instructions `instrs`, one per part.
    Reduce { launch: usize, instrs: Vec<usize> },
    /// Instruction `index`, a reduction in two launches: `partial` into a buffer of type
    /// `partials`, then `total` of those.
    SplitReduce {
        index: usize,
        partial: usize,
        total: usize,
        partials: TensorType,
    },
    /// Instruction and the strided copies that write its result, each with the operand it
    /// reads, in order.
    Copies(usize, Vec<(usize, usize)>),
    /// Instruction `index`, a scatter by the launches of scatter `kernels`.
    Scatter { index: usize, kernels: usize },
    /// Instruction `index`, a gather by gather launch `kernel`.
    Gather { index: usize, kernel: usize },
    /// The forward attention instructions `members` (its output and/or its log-sum-exps, the
    /// same operands), computed together by attention launch `launch`.
    Attention { members: Vec<usize>, launch: usize },
    /// A reshape: the result shares the operand's buffer.
    View(usize),
    /// A constant (or an iota), copied to the device once, when the program is loaded.
    Constant(usize),
    /// An instruction run on the host.
    Host(usize),
    /// The instructions of one control-flow call (one per result, the same operands), which
    /// run the call once by the regions of the plan's call `call`.
    Call { members: Vec<usize>, call: usize },
}

/// A parameter of a kernel launch: the address of a value it reads, or of its result, with
/// the value's type as the kernel was compiled for it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Param {
    Input(ValueId, TensorType),
    Output(ValueId, TensorType),
    /// The partial results of a column reduction whose result is `value`: a buffer of type
    /// `partials` the launch writes, which the reduction launches `totals` then fold in turn,
    /// each into a buffer of its type, the last `value`'s.
    Partial {
        value: ValueId,
        partials: TensorType,
        totals: Vec<(usize, TensorType)>,
    },
}

/// One launch of fused kernels: its entry, its parameters in order, and its shape (`threads`
/// in blocks of `block`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KernelLaunchSpec {
    pub name: String,
    pub params: Vec<Param>,
    pub threads: usize,
    pub block: u32,
}

/// A launch of `blocks` blocks of `block` threads, each block a unit of the kernel's work
/// (no grid-stride loop): its entry and its parameters in order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BlocksLaunchSpec {
    pub name: String,
    pub params: Vec<Param>,
    pub blocks: usize,
    pub block: u32,
}

/// One reduction launch: a reduction alone takes up to 32 blocks a multiprocessor (each
/// striding over its share); reductions launched together take one block per unit of work.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReduceLaunchSpec {
    pub name: String,
    /// Per part, in parameter order, the type it reads and the type it writes.
    pub parts: Vec<(TensorType, TensorType)>,
    pub block: u32,
    pub blocks: usize,
    pub alone: bool,
}

impl ReduceLaunchSpec {
    /// Blocks to launch on a device of `multiprocessors`.
    pub fn grid(&self, multiprocessors: u32) -> u32 {
        if self.alone {
            self.blocks.clamp(1, multiprocessors as usize * 32) as u32
        } else {
            self.blocks as u32
        }
    }
}

/// A strided copy: the type it reads, the type of the array it writes (all or part of), and
/// the operands whose scalars give dynamic starts.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CopySpec {
    pub name: String,
    pub input: TensorType,
    pub output: TensorType,
    /// Elements copied.
    pub len: usize,
    /// The instruction's operands read as start indices (with their types), in parameter
    /// order.
    pub starts: Vec<(usize, TensorType)>,
}

/// A launch over `len` elements of entry `name` (a gather, or an integer product's results),
/// and the types of its parameters (operands, then result).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ElementsSpec {
    pub name: String,
    pub len: usize,
    pub types: Vec<TensorType>,
}

/// A scatter's entries (in launch order) and what each launch covers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScatterSpec {
    pub entries: Vec<String>,
    pub launches: ScatterLaunches,
}

/// How a scatter's launches run, by the form its kernels take.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum ScatterLaunches {
    /// Whole rows, combined by atomics: the operand copied (`len` elements), then
    /// `update_elements` combined.
    Atomic { len: usize, update_elements: usize },
    /// Whole rows ranked by row: `updates` ranked in blocks of `rank_block`, each of `rows`
    /// rows' bounds found, then the `len` result elements computed.
    Sorted {
        updates: usize,
        rows: usize,
        len: usize,
        rank_block: u32,
    },
    /// Update elements ranked by result element: `updates` of them, `operand_len` results.
    Elements { updates: usize, operand_len: usize },
}

/// A `scan`'s operand counts and its steps.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScanShape {
    pub consts: usize,
    pub carry: usize,
    pub length: usize,
    pub reverse: bool,
}

/// How a control-flow call runs its regions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CallKind {
    /// Regions: the condition, then the body.
    While,
    /// Regions: the branches.
    Cond,
    /// Region: the body.
    Scan(ScanShape),
    /// Region: the body.
    Remat,
}

/// The regions of a control-flow call, planned.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct GpuCallPlan {
    pub kind: CallKind,
    pub regions: Vec<GpuRunPlan>,
}

/// What a GPU run does: the program as scheduled, its steps and their launches, the PTX
/// modules that define every entry, and when each value is let go of.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct GpuRunPlan {
    pub func: Func,
    pub steps: Vec<GpuStep>,
    /// Per step, the values let go of after it.
    pub releases: Vec<Vec<ValueId>>,
    pub memory: MemoryReport,
    pub launches: Vec<KernelLaunchSpec>,
    pub reduce_launches: Vec<ReduceLaunchSpec>,
    pub copies: Vec<CopySpec>,
    pub int_gemms: Vec<ElementsSpec>,
    pub scatters: Vec<ScatterSpec>,
    pub gathers: Vec<ElementsSpec>,
    pub attentions: Vec<BlocksLaunchSpec>,
    /// PTX modules, in order, each with how many entries it defines: together the entries of
    /// [`GpuRunPlan::defined_entries`], in that order.
    pub modules: Vec<(String, usize)>,
    /// Per control-flow call, its regions' plans.
    pub calls: Vec<GpuCallPlan>,
    /// The modules as machine code, where `ptxas` assembled them.
    pub cubins: Option<Cubins>,
}

/// A plan's modules assembled by `ptxas` for one architecture: they load with no compilation
/// on a device of that major version and the same or a later minor one.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cubins {
    pub arch: GpuTarget,
    /// One per module, in module order.
    pub modules: Vec<Vec<u8>>,
}

impl Cubins {
    /// Whether a device of compute capability `major.minor` runs this machine code.
    pub fn run_on(&self, (major, minor): (i32, i32)) -> bool {
        i64::from(major) == i64::from(self.arch.major)
            && i64::from(minor) >= i64::from(self.arch.minor)
    }
}

impl GpuRunPlan {
    /// Every entry the plan launches, in module order: kernel launches, reductions, copies,
    /// integer products, scatters' entries, gathers, attention kernels.
    pub fn entry_names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self.launches.iter().map(|l| l.name.as_str()).collect();
        names.extend(self.reduce_launches.iter().map(|r| r.name.as_str()));
        names.extend(self.copies.iter().map(|c| c.name.as_str()));
        names.extend(self.int_gemms.iter().map(|g| g.name.as_str()));
        names.extend(
            self.scatters
                .iter()
                .flat_map(|s| s.entries.iter().map(String::as_str)),
        );
        names.extend(self.gathers.iter().map(|g| g.name.as_str()));
        names.extend(self.attentions.iter().map(|a| a.name.as_str()));
        names
    }

    /// The entries the modules define: [`GpuRunPlan::entry_names`] each once, in the order of
    /// its first launch (launches of identical entries share one, which the compiler emits
    /// once).
    pub fn defined_entries(&self) -> Vec<&str> {
        let mut seen = std::collections::HashSet::new();
        let mut names = self.entry_names();
        names.retain(|n| seen.insert(*n));
        names
    }

    /// One line per step: what runs it, and the values it defines.
    pub fn describe_steps(&self) -> String {
        let func = &self.func;
        let instr = |i: usize| match func.body.get(i) {
            Some(ins) => format!("%{} = {}", func.instr_value(i).0, ins.op.name()),
            None => format!("instruction {i}"),
        };
        let named = |names: Option<&str>| names.unwrap_or("?").to_string();
        let mut out = String::new();
        for (n, step) in self.steps.iter().enumerate() {
            let line = match step {
                GpuStep::Launch(l) => {
                    let launch = self.launches.get(*l);
                    let outputs = launch.map_or(0, |l| {
                        l.params
                            .iter()
                            .filter(|p| matches!(p, Param::Output(..) | Param::Partial { .. }))
                            .count()
                    });
                    let name = named(launch.map(|l| l.name.as_str()));
                    format!("kernel {name} ({outputs} results)")
                }
                GpuStep::Gemm { index, int, .. } => match int {
                    Some(k) => {
                        let name = named(self.int_gemms.get(*k).map(|g| g.name.as_str()));
                        format!("{} by kernel {name}", instr(*index))
                    }
                    None => format!("{} on cuBLAS", instr(*index)),
                },
                GpuStep::Reduce { launch, instrs } => {
                    let name = named(self.reduce_launches.get(*launch).map(|r| r.name.as_str()));
                    let parts: Vec<String> = instrs.iter().map(|&i| instr(i)).collect();
                    format!("{} by reduction {name}", parts.join(", "))
                }
                GpuStep::SplitReduce { index, .. } => {
                    format!("{} by two reduction launches", instr(*index))
                }
                GpuStep::Copies(i, parts) => format!("{} by {} copies", instr(*i), parts.len()),
                GpuStep::Scatter { index, .. } => format!("{} by scatter kernels", instr(*index)),
                GpuStep::Gather { index, .. } => format!("{} by a gather kernel", instr(*index)),
                GpuStep::Attention { members, launch } => {
                    let parts: Vec<String> = members.iter().map(|&i| instr(i)).collect();
                    let name = named(self.attentions.get(*launch).map(|a| a.name.as_str()));
                    format!("{} by attention kernel {name}", parts.join(", "))
                }
                GpuStep::View(i) => format!("{} as a view", instr(*i)),
                GpuStep::Constant(i) => format!("{} loaded once", instr(*i)),
                GpuStep::Host(i) => format!("{} on the host", instr(*i)),
                GpuStep::Call { members, .. } => {
                    let first = members.first().map_or_else(String::new, |&i| instr(i));
                    format!(
                        "{first} ({} results) by its regions' programs",
                        members.len()
                    )
                }
            };
            let _ = writeln!(out, "{n}: {line}");
        }
        out
    }
}

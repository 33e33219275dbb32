//! PTX text from kernel IR: a pure renderer (no CUDA needed to build or test it), so every
//! kernel can be snapshotted and assembled with `ptxas` anywhere.
//!
//! Legalization comes first ([`legalize()`]): transcendentals are expanded into primitives
//! (`kernel::math`, 3 ULP for f32, so no `.approx` instruction is emitted unless fast math is
//! asked for, [`MathMode::Fast`]), then every instruction is checked against what the renderer
//! supports ([`support`]), and the index width is chosen (32-bit while the element count
//! allows, since 64-bit division is slow on the GPU).
//!
//! Each flat kernel is one grid-stride loop over its elements (several independent ones
//! launched together are their loops in turn, see [`Launch`]), branch-free but for the rare
//! path of sin and cos arguments beyond the short reduction
//! ([`KOp::Beyond`](crate::kernel::KOp::Beyond)); row kernels are rendered by [`rows`].
//! Constants (each once) and scalar inputs are loaded before the loop; inputs use the read-only
//! (`.nc`) path; float arithmetic uses the `.rn` forms so that `ptxas` never contracts a
//! multiply and an add into an fma on its own: the kernel IR already contracts the products
//! whose only use is a sum ([`crate::kernel::contract`]), so the GPU computes exactly what the
//! CPU backend does.
//!
//! The parts: `legalize` (kernels as the renderer takes them), `emit` (registers and text of an
//! entry), `select` and `sequences` (the instructions of each operation), `loops` (flat
//! kernels' grid-stride loops and their launches), [`rows`], [`reduce`], [`copy`] and
//! [`matmul`] (the other kinds of entry).

pub mod assemble;
pub mod attention;
pub mod attention_grad;
pub mod attention_grad_mma;
pub mod attention_mma;
pub mod columns;
pub mod copy;
pub mod distinct;
pub mod element_scatter;
mod emit;
pub mod gather;
mod legalize;
mod loops;
pub mod matmul;
pub mod reduce;
pub mod rows;
pub mod scatter;
mod select;
mod sequences;
pub mod support;

use crate::kernel::Kernel;
use copy::{render_copy, CopyKernel};
use gather::GatherKernel;
pub use legalize::{legal_kernel, legalize};
use loops::render_entry;
pub use loops::Launch;

/// A scatter's entries: rows ranked by row ([`ScatterKernels`]), or update elements ranked by
/// result element ([`ElementScatter`]).
#[derive(Clone, Debug, PartialEq)]
pub enum Scatters {
    Rows(ScatterKernels),
    Elements(ElementScatter),
}

impl Scatters {
    /// The entries' names, in the order a run launches them.
    pub fn entry_names(&self) -> Vec<String> {
        match self {
            Scatters::Rows(k) => k.entry_names(),
            Scatters::Elements(k) => k.entry_names().to_vec(),
        }
    }
}
use element_scatter::ElementScatter;
use matmul::{render_int_gemm, IntGemmKernel};
use reduce::{render_reduce_launch, ReduceKernel, ReduceLaunch};
use scatter::ScatterKernels;

/// The GPU architecture a module is rendered for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PtxTarget {
    /// Ampere and later (the baseline).
    Sm80,
    /// Hopper.
    Sm90,
}

impl PtxTarget {
    pub const ALL: [PtxTarget; 2] = [PtxTarget::Sm80, PtxTarget::Sm90];

    /// The best target a device of compute capability `major.minor` runs.
    pub fn for_compute_capability(major: i32, _minor: i32) -> PtxTarget {
        if major >= 9 {
            PtxTarget::Sm90
        } else {
            PtxTarget::Sm80
        }
    }

    pub fn arch(self) -> &'static str {
        match self {
            PtxTarget::Sm80 => "sm_80",
            PtxTarget::Sm90 => "sm_90",
        }
    }

    /// The lowest PTX ISA version that has the target: CUDA 11.0+ drivers load 7.0, CUDA 11.8+
    /// load 7.8, CUDA 12 and 13 load both.
    fn isa(self) -> &'static str {
        match self {
            PtxTarget::Sm80 => "7.0",
            PtxTarget::Sm90 => "7.8",
        }
    }
}

/// How f32 transcendentals, square roots and quotients are computed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum MathMode {
    /// Expanded into primitives (`kernel::math`), each within 3 ULP; quotients and square
    /// roots correctly rounded, as on the CPU.
    #[default]
    Accurate,
    /// Opt-in (CUDA's `--use_fast_math`): f32 exp, log, sin, cos and rsqrt by the hardware's
    /// approximate instructions (`ex2`, `lg2`, `sin`, `cos`, `rsqrt.approx`), square roots by
    /// `sqrt.approx` and quotients by `div.full`: one or two instructions each instead of ten
    /// to thirty, at the errors CUDA documents for the same instructions (exp 2 + ⌊1.2·|x|⌋
    /// ULP; log and sin 2^-21.41 absolute on [0.5, 2] and [-π, π], cos 2^-21.19 on [-π, π],
    /// log 3 ULP elsewhere, sin/cos worse beyond; rsqrt and quotients 2 ULP, square roots 1).
    /// Logistic and GELU's `1 + tanh(u)` take the approximate exp; tanh otherwise, expm1,
    /// log1p, pow and f64 keep their accurate expansions.
    Fast,
}

#[derive(Debug, thiserror::Error)]
pub enum PtxError {
    #[error("kernel {kernel}: {what} is not supported by the PTX renderer")]
    Unsupported { kernel: String, what: String },
    #[error("{ptxas} could not assemble a module: {what}")]
    Assembler { ptxas: String, what: String },
}

impl PtxError {
    /// `what` of `kernel` is not something the renderer takes.
    fn unsupported(kernel: &Kernel, what: impl Into<String>) -> PtxError {
        PtxError::Unsupported {
            kernel: kernel.name.clone(),
            what: what.into(),
        }
    }
}

/// One PTX module holding `kernels` (each its own entry, named after it), `reductions` and
/// `copies`, with accurate math.
pub fn render_module(
    kernels: &[Kernel],
    reductions: &[ReduceKernel],
    copies: &[CopyKernel],
    target: PtxTarget,
) -> Result<String, PtxError> {
    render_launches(
        kernels,
        &Launch::each(kernels),
        (reductions, &ReduceLaunch::each(reductions)),
        (copies, &[], &[], &[]),
        target,
        MathMode::Accurate,
    )
}

/// One PTX module holding an entry per launch of `kernels`, then one per launch of `reductions`,
/// then `copies` and integer products.
pub fn render_launches(
    kernels: &[Kernel],
    launches: &[Launch],
    reductions: (&[ReduceKernel], &[ReduceLaunch]),
    (copies, int_gemms, scatters, gathers): (
        &[CopyKernel],
        &[IntGemmKernel],
        &[Scatters],
        &[GatherKernel],
    ),
    target: PtxTarget,
    mode: MathMode,
) -> Result<String, PtxError> {
    let legal = kernels
        .iter()
        .map(|k| legalize(k, mode))
        .collect::<Result<Vec<_>, _>>()?;
    render_legal_launches(
        &legal,
        launches,
        reductions,
        (copies, int_gemms, scatters, gathers),
        target,
        mode,
    )
}

/// [`render_launches`] of kernels already legalized (for `mode`).
pub fn render_legal_launches(
    legal: &[Kernel],
    launches: &[Launch],
    reductions: (&[ReduceKernel], &[ReduceLaunch]),
    others: (
        &[CopyKernel],
        &[IntGemmKernel],
        &[Scatters],
        &[GatherKernel],
    ),
    target: PtxTarget,
    mode: MathMode,
) -> Result<String, PtxError> {
    let pieces = render_pieces(legal, launches, reductions, others, mode)?;
    Ok(module_text(target, &pieces))
}

/// The entries of [`render_legal_launches`]'s module, each rendered with how many entry
/// points it defines (a scatter's pieces define several), in the module's order.
pub fn render_pieces(
    legal: &[Kernel],
    launches: &[Launch],
    (reductions, reduce_launches): (&[ReduceKernel], &[ReduceLaunch]),
    (copies, int_gemms, scatters, gathers): (
        &[CopyKernel],
        &[IntGemmKernel],
        &[Scatters],
        &[GatherKernel],
    ),
    mode: MathMode,
) -> Result<Vec<(String, usize)>, PtxError> {
    let mut pieces = Vec::new();
    for launch in launches {
        let legal: Vec<&Kernel> = launch.kernels.iter().map(|&k| &legal[k]).collect();
        pieces.push(match legal.as_slice() {
            [one] => render_alone(&launch.name, one, mode)?,
            _ => render_entry(&launch.name, &legal, mode)?,
        });
    }
    for launch in reduce_launches {
        pieces.push(render_reduce_launch(launch, reductions));
    }
    pieces.extend(copies.iter().map(render_copy));
    pieces.extend(int_gemms.iter().map(render_int_gemm));
    let mut pieces: Vec<(String, usize)> = pieces.into_iter().map(|p| (p, 1)).collect();
    for k in scatters {
        let text = match k {
            Scatters::Rows(k) => scatter::render_scatter(k),
            Scatters::Elements(k) => element_scatter::render_element_scatter(k),
        };
        pieces.push((text, k.entry_names().len()));
    }
    pieces.extend(gathers.iter().map(|g| (gather::render_gather(g), 1)));
    Ok(pieces)
}

/// The entry `name` of legalized `kernel` launched alone: a row kernel's, a column kernel's
/// ([`columns`]) or a flat one's.
fn render_alone(name: &str, kernel: &Kernel, mode: MathMode) -> Result<String, PtxError> {
    if kernel.rows.is_some() {
        rows::render_row_entry(name, kernel, mode)
    } else if columns::ColumnSplit::of(kernel).is_some() {
        columns::render_column_entry(name, kernel, mode)
    } else {
        render_entry(name, &[kernel], mode)
    }
}

/// A module of `pieces` (see [`render_pieces`]) for `target`.
pub fn module_text(target: PtxTarget, pieces: &[(String, usize)]) -> String {
    let mut out = format!(
        "//\n// Generated by ferrax\n//\n\n.version {}\n.target {}\n.address_size 64\n",
        target.isa(),
        target.arch()
    );
    for (piece, _) in pieces {
        out.push('\n');
        out.push_str(piece);
    }
    out
}

/// PTX per module a device loads: the driver compiles a module on one thread, so a large
/// program's entries go into several, which a CUDA device compiles at once.
pub const MODULE_BYTES: usize = 1 << 16;

/// `pieces` (entries, each with its entry points) as modules of consecutive pieces, with each
/// module's entry points: each module as many pieces as stay within [`MODULE_BYTES`], or one
/// piece larger than that alone, so that the largest module, which the others wait for, is no
/// larger than it need be.
pub fn split_modules(target: PtxTarget, pieces: &[(String, usize)]) -> Vec<(String, usize)> {
    let module = |part: &[(String, usize)]| {
        let entries = part.iter().map(|(_, n)| n).sum();
        (module_text(target, part), entries)
    };
    let mut modules = Vec::new();
    let (mut start, mut bytes) = (0, 0);
    for (i, (piece, _)) in pieces.iter().enumerate() {
        if i > start && bytes + piece.len() > MODULE_BYTES {
            modules.push(module(&pieces[start..i]));
            (start, bytes) = (i, 0);
        }
        bytes += piece.len();
    }
    if start < pieces.len() {
        modules.push(module(&pieces[start..]));
    }
    modules
}

/// A kernel's PTX entry name: its name with anything PTX does not allow replaced.
pub fn entry_name(kernel: &Kernel) -> String {
    symbol(&kernel.name)
}

/// `name` with anything a PTX identifier does not allow replaced.
pub fn symbol(name: &str) -> String {
    let mut name: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    if name.starts_with(|c: char| c.is_ascii_digit()) || name.is_empty() {
        name.insert(0, '_');
    }
    name
}

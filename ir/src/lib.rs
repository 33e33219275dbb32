//! ferrax's intermediate representation: a typed SSA IR over static-shaped tensors.
//!
//! Every pass reads and writes [`Func`]. Types follow from ops ([`infer_type`], one rule per
//! op, grouped by family under `ops/`), the [`verify`]er checks that they do, and the text
//! format ([`print_func`] / [`parse_func`]) round-trips exactly.

mod attention;
mod bitcast;
mod control;
mod conv;
mod dtype;
mod error;
mod float_serde;
mod func;
mod indexing;
mod linalg;
mod literal;
mod lower;
mod op;
mod ops;
#[cfg(feature = "text")]
mod parse;
mod print;
mod shape;
mod threefry;
mod verify;
mod window;

pub use attention::{Attention, AttentionDims, AttentionPart};
pub use bitcast::lower_bitcast;
pub use control::{Cond, Remat, RematPolicy, Scan, While};
pub use conv::{ConvDims, ConvPadding, Convolution};
pub use dtype::DType;
pub use error::TypeError;
pub use func::{Func, FuncBuilder, Instr, ValueId};
pub use indexing::{Gather, IndexMap, Scatter, ScatterCombine, StartReader};
pub use linalg::{EigPart, EighPart, GeqrfPart, LuPart, Qr, QrPart, Svd, SvdPart, TriangularSolve};
pub use literal::{
    bf16_from_f64, f16_from_f64, ulp_distance, Complex, Element, Elements, Literal, Scalar,
};
pub use lower::{LowerError, OpSink};
pub use op::{
    BinaryOp, CompareOp, CustomJvp, CustomVjp, DotDims, FftKind, IoCallback, Op, PureCallback,
    ReduceOp, UnaryOp,
};
pub use ops::infer_type;
#[cfg(feature = "text")]
pub use parse::{parse_func, ParseError};
pub use print::{print_func, scalar_text};
pub use shape::{Shape, TensorType, MAX_BYTES, MAX_RANK};
pub use threefry::{threefry2x32, Schedule as ThreefrySchedule, Words};
pub use verify::{verify, VerifyError};
pub use window::{same_padding, WindowGeometry, MAX_WINDOW_ELEMENTS};

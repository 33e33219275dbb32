//! From an op's name, attributes and declared type to the [`Op`]: the name picks the op,
//! the type supplies what the text does not repeat (a constant's element type, a reshape's
//! shape), and constants' values are read in their element type.

use super::attrs::Attrs;
use super::cursor::{PResult, Parser};
use crate::{
    bf16_from_f64, f16_from_f64, Attention, AttentionPart, BinaryOp, CompareOp, Cond, CustomJvp,
    CustomVjp, DType, DotDims, EigPart, EighPart, Elements, FftKind, Gather, GeqrfPart, IoCallback,
    Literal, LuPart, Op, PureCallback, Qr, QrPart, ReduceOp, Remat, RematPolicy, Scalar, Scan,
    Scatter, ScatterCombine, Svd, SvdPart, TensorType, TriangularSolve, UnaryOp, While,
};
use half::{bf16, f16};
use num_complex::Complex;

/// A constant's values as written: one word to splat or a list, starting at token `at`.
pub(super) struct ConstantText {
    pub(super) words: Vec<String>,
    pub(super) splat: bool,
    pub(super) at: usize,
}

pub(super) fn build_op(
    p: &Parser,
    name: &str,
    mut attrs: Attrs,
    literal: Option<ConstantText>,
    ty: &TensorType,
) -> PResult<Op> {
    let at = attrs.op_pos;
    let op = if let Some(u) = UnaryOp::ALL.into_iter().find(|u| u.name() == name) {
        Op::Unary(u)
    } else if let Some(b) = BinaryOp::ALL.into_iter().find(|b| b.name() == name) {
        Op::Binary(b)
    } else if let Some(c) = CompareOp::ALL.into_iter().find(|c| c.name() == name) {
        Op::Compare(c)
    } else if let Some(policy) = RematPolicy::ALL.into_iter().find(|r| r.op_name() == name) {
        Op::Remat(Box::new(Remat {
            policy,
            result: attrs.int(p, "result")?,
            body: attrs.func(p, "body")?,
        }))
    } else if let Some(c) = ScatterCombine::ALL.into_iter().find(|c| c.name() == name) {
        Op::Scatter(Box::new(scatter(p, &mut attrs, c)?))
    } else if let Some(part) = AttentionPart::ALL.into_iter().find(|a| a.name() == name) {
        Op::Attention(
            Attention::new(part, attrs.flag(p, "causal")?)
                .with_precision(attrs.dtype_or_none(p, "precision")?),
        )
    } else if let Some(part) = LuPart::ALL.into_iter().find(|l| l.name() == name) {
        Op::Lu(part)
    } else if let Some(part) = QrPart::ALL.into_iter().find(|q| q.name() == name) {
        Op::Qr(Qr {
            part,
            full_matrices: attrs.flag(p, "full_matrices")?,
        })
    } else if let Some(part) = EighPart::ALL.into_iter().find(|e| e.name() == name) {
        Op::Eigh(part)
    } else if let Some(part) = SvdPart::ALL.into_iter().find(|s| s.name() == name) {
        Op::Svd(Svd {
            part,
            full_matrices: attrs.flag(p, "full_matrices")?,
        })
    } else if let Some(part) = GeqrfPart::ALL.into_iter().find(|g| g.name() == name) {
        Op::Geqrf(part)
    } else if let Some(part) = EigPart::ALL.into_iter().find(|e| e.name() == name) {
        Op::Eig(part)
    } else if let Some(kind) = FftKind::ALL.into_iter().find(|k| k.name() == name) {
        Op::Fft {
            kind,
            lengths: attrs.list(p, "lengths", None)?,
        }
    } else if let Some(r) = ReduceOp::ALL.into_iter().find(|r| r.name() == name) {
        Op::Reduce {
            op: r,
            axes: attrs.list(p, "axes", None)?,
        }
    } else {
        match name {
            "constant" => {
                let Some(text) = literal else {
                    return Err(p.error_at(at, "constant needs a value"));
                };
                constant(p, &text, ty)?
            }
            "iota" => Op::Iota {
                dtype: ty.dtype,
                shape: ty.shape.clone(),
                dim: attrs.int(p, "dim")?,
            },
            "select" => Op::Select,
            "clamp" => Op::Clamp,
            "convert" => Op::Convert { to: ty.dtype },
            "bitcast_convert" => Op::BitcastConvert { to: ty.dtype },
            "broadcast_in_dim" => Op::BroadcastInDim {
                shape: ty.shape.clone(),
                dims: attrs.list(p, "dims", None)?,
            },
            "reshape" => Op::Reshape {
                shape: ty.shape.clone(),
            },
            "transpose" => Op::Transpose {
                perm: attrs.list(p, "perm", None)?,
            },
            "reverse" => Op::Reverse {
                axes: attrs.list(p, "axes", None)?,
            },
            "dot_general" => {
                let (lhs_batch, rhs_batch) = attrs.pair(p, "batch")?;
                let (lhs_contract, rhs_contract) = attrs.pair(p, "contract")?;
                Op::DotGeneral(DotDims {
                    lhs_batch,
                    rhs_batch,
                    lhs_contract,
                    rhs_contract,
                })
            }
            "slice" => {
                let ones = vec![1; ty.rank()];
                Op::Slice {
                    start: attrs.list(p, "start", None)?,
                    limit: attrs.list(p, "limit", None)?,
                    strides: attrs.list(p, "strides", Some(ones))?,
                }
            }
            "pad" => {
                let zeros = vec![0; ty.rank()];
                Op::Pad {
                    low: attrs.ilist(p, "low", None)?,
                    high: attrs.ilist(p, "high", None)?,
                    interior: attrs.list(p, "interior", Some(zeros))?,
                }
            }
            "concatenate" => Op::Concatenate {
                axis: attrs.int(p, "axis")?,
            },
            "gather" => Op::Gather(Box::new(gather(p, &mut attrs)?)),
            "dynamic_slice" => Op::DynamicSlice {
                sizes: ty.dims().to_vec(),
            },
            "dynamic_update_slice" => Op::DynamicUpdateSlice,
            "stop_gradient" => Op::StopGradient,
            "add_dependency" => Op::AddDependency,
            "debug_callback" => Op::DebugCallback {
                callback: attrs.int(p, "callback")? as u64,
            },
            "pure_callback" => Op::PureCallback(Box::new(PureCallback {
                callback: attrs.int(p, "callback")? as u64,
                result: ty.clone(),
                expand_dims: attrs.flag(p, "expand_dims")?,
            })),
            "io_callback" => Op::IoCallback(Box::new(IoCallback {
                callback: attrs.int(p, "callback")? as u64,
                result: ty.clone(),
                ordered: attrs.flag(p, "ordered")?,
            })),
            "cholesky" => Op::Cholesky,
            "householder_product" => Op::HouseholderProduct,
            "triangular_solve" => Op::TriangularSolve(TriangularSolve {
                left_side: attrs.flag(p, "left_side")?,
                lower: attrs.flag(p, "lower")?,
                transpose_a: attrs.flag(p, "transpose_a")?,
                conjugate_a: attrs.flag(p, "conjugate_a")?,
                unit_diagonal: attrs.flag(p, "unit_diagonal")?,
            }),
            "sort" => Op::Sort {
                dimension: attrs.int(p, "dimension")?,
                descending: attrs.flag(p, "descending")?,
            },
            "argsort" => Op::Argsort {
                dimension: attrs.int(p, "dimension")?,
                descending: attrs.flag(p, "descending")?,
            },
            "custom_vjp" => Op::CustomVjp(Box::new(CustomVjp {
                primal: attrs.func(p, "primal")?,
                fwd: attrs.func(p, "fwd")?,
                bwd: attrs.func(p, "bwd")?,
            })),
            "custom_jvp" => Op::CustomJvp(Box::new(CustomJvp {
                primal: attrs.func(p, "primal")?,
                jvp: attrs.func(p, "jvp")?,
            })),
            "while" => Op::While(Box::new(While {
                result: attrs.int(p, "result")?,
                cond: attrs.func(p, "cond")?,
                body: attrs.func(p, "body")?,
            })),
            "scan" => Op::Scan(Box::new(Scan {
                consts: attrs.int_or(p, "consts", 0)?,
                carry: attrs.int(p, "carry")?,
                length: attrs.int(p, "length")?,
                reverse: attrs.flag(p, "reverse")?,
                unroll: attrs.int_or(p, "unroll", 1)?,
                result: attrs.int(p, "result")?,
                body: attrs.func(p, "body")?,
            })),
            "cond" => Op::Cond(Box::new(Cond {
                result: attrs.int(p, "result")?,
                branches: attrs.funcs(p, "branches")?,
            })),
            _ => return Err(p.error_at(at, format!("unknown op '{name}'"))),
        }
    };
    attrs.finish(p)?;
    Ok(op)
}

fn gather(p: &Parser, attrs: &mut Attrs) -> PResult<Gather> {
    let none = || Some(Vec::new());
    Ok(Gather {
        offset_dims: attrs.list(p, "offset_dims", none())?,
        collapsed_slice_dims: attrs.list(p, "collapsed_slice_dims", none())?,
        operand_batching_dims: attrs.list(p, "operand_batching_dims", none())?,
        start_indices_batching_dims: attrs.list(p, "start_indices_batching_dims", none())?,
        start_index_map: attrs.list(p, "start_index_map", None)?,
        index_vector_dim: attrs.int(p, "index_vector_dim")?,
        slice_sizes: attrs.list(p, "slice_sizes", None)?,
        indices_are_sorted: attrs.flag(p, "indices_are_sorted")?,
    })
}

fn scatter(p: &Parser, attrs: &mut Attrs, combine: ScatterCombine) -> PResult<Scatter> {
    let none = || Some(Vec::new());
    Ok(Scatter {
        combine,
        update_window_dims: attrs.list(p, "update_window_dims", none())?,
        inserted_window_dims: attrs.list(p, "inserted_window_dims", none())?,
        input_batching_dims: attrs.list(p, "input_batching_dims", none())?,
        scatter_indices_batching_dims: attrs.list(p, "scatter_indices_batching_dims", none())?,
        scatter_dims_to_operand_dims: attrs.list(p, "scatter_dims_to_operand_dims", None)?,
        index_vector_dim: attrs.int(p, "index_vector_dim")?,
        indices_are_sorted: attrs.flag(p, "indices_are_sorted")?,
        unique_indices: attrs.flag(p, "unique_indices")?,
    })
}

/// A constant of type `ty` with the values `text`: one per element, or one to splat.
fn constant(p: &Parser, text: &ConstantText, ty: &TensorType) -> PResult<Op> {
    let scalars = text
        .words
        .iter()
        .map(|w| {
            parse_scalar(ty.dtype, w).ok_or_else(|| {
                p.error_at(text.at, format!("'{w}' is not a valid {} value", ty.dtype))
            })
        })
        .collect::<PResult<Vec<_>>>()?;
    if !text.splat && scalars.len() != ty.numel() {
        return Err(p.error_at(
            text.at,
            format!("{} values for a constant of type {ty}", scalars.len()),
        ));
    }
    let data = Elements::from_scalars(ty.dtype, &scalars)
        .ok_or_else(|| p.error_at(text.at, "mixed constant types"))?;
    Ok(Op::Constant(Literal {
        ty: ty.clone(),
        data,
    }))
}

/// One value of `dtype`: decimal, or a float's bits in hexadecimal (`0x7fc00000`), which
/// the printer writes where decimal would not round-trip (NaN payloads).
fn parse_scalar(dtype: DType, w: &str) -> Option<Scalar> {
    if let Some(part) = dtype.complex_part() {
        return parse_complex(dtype, part, w);
    }
    if let Some(hex) = w.strip_prefix("0x").filter(|_| dtype.is_float()) {
        let bits = u64::from_str_radix(hex, 16).ok()?;
        return Some(match dtype {
            DType::F32 => Scalar::F32(f32::from_bits(u32::try_from(bits).ok()?)),
            DType::F64 => Scalar::F64(f64::from_bits(bits)),
            DType::F16 => Scalar::F16(f16::from_bits(u16::try_from(bits).ok()?)),
            _ => Scalar::BF16(bf16::from_bits(u16::try_from(bits).ok()?)),
        });
    }
    Some(match dtype {
        DType::F32 => Scalar::F32(w.parse().ok()?),
        DType::F64 => Scalar::F64(w.parse().ok()?),
        DType::F16 => Scalar::F16(f16_from_f64(w.parse().ok()?)),
        DType::BF16 => Scalar::BF16(bf16_from_f64(w.parse().ok()?)),
        DType::I32 => Scalar::I32(w.parse().ok()?),
        DType::I64 => Scalar::I64(w.parse().ok()?),
        DType::U32 => Scalar::U32(w.parse().ok()?),
        DType::U8 => Scalar::U8(w.parse().ok()?),
        DType::I8 => Scalar::I8(w.parse().ok()?),
        DType::I16 => Scalar::I16(w.parse().ok()?),
        DType::U16 => Scalar::U16(w.parse().ok()?),
        DType::U64 => Scalar::U64(w.parse().ok()?),
        DType::Bool => Scalar::Bool(w.parse().ok()?),
        DType::C64 | DType::C128 => return parse_complex(dtype, DType::F32, w),
    })
}

/// A complex value written `re+imi` or `re-imi`, each part as a float of type `part`: split at
/// the last sign after which both halves parse (an exponent's sign does not split).
fn parse_complex(dtype: DType, part: DType, w: &str) -> Option<Scalar> {
    let body = w.strip_suffix('i')?;
    let signs = body
        .char_indices()
        .filter(|&(k, c)| k > 0 && (c == '+' || c == '-'))
        .map(|(k, _)| k);
    let (re, im) = signs.collect::<Vec<_>>().into_iter().rev().find_map(|k| {
        let re = parse_scalar(part, &body[..k])?;
        let im = parse_scalar(part, body[k..].strip_prefix('+').unwrap_or(&body[k..]))?;
        Some((re, im))
    })?;
    Some(match (dtype, re, im) {
        (DType::C64, Scalar::F32(re), Scalar::F32(im)) => Scalar::C64(Complex::new(re, im)),
        (DType::C128, Scalar::F64(re), Scalar::F64(im)) => Scalar::C128(Complex::new(re, im)),
        _ => return None,
    })
}

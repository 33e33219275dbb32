//! `stablehlo.convolution`, spelled in the IR's ops by `ferrax_ir::Convolution::lower` (the
//! lowering the tracing frontend's `conv_general_dilated` shares). Both syntaxes are read: the
//! pretty `dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window = {stride = [..],
//! pad = [[..]], lhs_dilate = [..], rhs_dilate = [..], reverse = [..]}` and the generic
//! `dimension_numbers = #stablehlo.conv<...>` with `window_strides`, `padding`,
//! `lhs_dilation`, `rhs_dilation` and `window_reversal`. Operands of another element type than
//! the result are converted to it first, as for `dot_general`.

use super::attrs::ints;
use super::window::splatted;
use super::Importer;
use crate::lex::Tok;
use crate::parse::Operation;
use crate::Error;
use ferrax_ir::{ConvDims, ConvPadding, Convolution, LowerError, Op, OpSink, TensorType, ValueId};

/// Emits a lowered op's ops into the importer at the op's line.
pub(super) struct Sink<'i, 'p> {
    pub(super) importer: &'i mut Importer<'p>,
    pub(super) line: usize,
}

impl OpSink for Sink<'_, '_> {
    type Value = ValueId;
    type Error = Error;

    fn emit(&mut self, op: Op, args: &[&ValueId]) -> Result<ValueId, Error> {
        let args: Vec<ValueId> = args.iter().map(|&&a| a).collect();
        self.importer.push(op, &args, self.line)
    }
}

/// The tokens of the bracketed list after `key =` inside `tokens`, brackets included.
fn list_after<'t>(tokens: &'t [Tok], key: &str) -> Option<&'t [Tok]> {
    let at = tokens.iter().position(|t| *t == Tok::Word(key.into()))?;
    bracketed(&tokens[at + 1..]).map(|(group, _)| group)
}

/// The first bracketed group of `tokens` (nested brackets included) and what follows it.
fn bracketed(tokens: &[Tok]) -> Option<(&[Tok], &[Tok])> {
    let open = tokens.iter().position(|t| *t == Tok::Punct('['))?;
    let mut depth = 0usize;
    for (k, t) in tokens.iter().enumerate().skip(open) {
        match t {
            Tok::Punct('[') => depth += 1,
            Tok::Punct(']') => {
                depth -= 1;
                if depth == 0 {
                    return Some((&tokens[open..=k], &tokens[k + 1..]));
                }
            }
            _ => {}
        }
    }
    None
}

/// The integer after `key =` in `tokens` (the raw `#stablehlo.conv<raw ...>` form).
fn int_after(tokens: &[Tok], key: &str) -> Option<i64> {
    let at = tokens.iter().position(|t| *t == Tok::Word(key.into()))?;
    ints(tokens.get(at + 1..at + 3)?).first().copied()
}

/// One layout `[b, 0, 1, f]` as its two named dimensions and its spatial ones in order.
fn layout(
    group: &[Tok],
    names: [&str; 2],
    line: usize,
) -> Result<(usize, usize, Vec<usize>), Error> {
    let entries: Vec<&str> = group
        .iter()
        .filter_map(|t| match t {
            Tok::Word(w) => Some(w.as_str()),
            _ => None,
        })
        .collect();
    let bad = || {
        Error::at(
            line,
            format!("convolution layout {entries:?} must name {} and {} once and number its spatial dimensions from 0", names[0], names[1]),
        )
    };
    let find = |name: &str| {
        let mut at = entries.iter().enumerate().filter(|(_, e)| **e == name);
        match (at.next(), at.next()) {
            (Some((i, _)), None) => Ok(i),
            _ => Err(bad()),
        }
    };
    let (a, b) = (find(names[0])?, find(names[1])?);
    let mut spatial = vec![usize::MAX; entries.len().saturating_sub(2)];
    for (i, e) in entries.iter().enumerate() {
        if i == a || i == b {
            continue;
        }
        let k: usize = e.parse().map_err(|_| bad())?;
        match spatial.get_mut(k) {
            Some(slot) if *slot == usize::MAX => *slot = i,
            _ => return Err(bad()),
        }
    }
    Ok((a, b, spatial))
}

/// The dimension numbers in either syntax.
fn dimension_numbers(op: &Operation) -> Result<ConvDims, Error> {
    let line = op.line;
    let tokens = op
        .attr(&["dim_numbers", "dimension_numbers"])
        .ok_or_else(|| Error::at(line, "convolution needs dimension numbers"))?;
    if tokens.iter().any(|t| *t == Tok::Word("raw".into())) {
        let get = |key: &str| {
            int_after(tokens, key)
                .and_then(|v| usize::try_from(v).ok())
                .ok_or_else(|| Error::at(line, format!("convolution needs {key}")))
        };
        let list = |key: &str| -> Result<Vec<usize>, Error> {
            let group = list_after(tokens, key)
                .ok_or_else(|| Error::at(line, format!("convolution needs {key}")))?;
            super::attrs::usizes(group, line)
        };
        return Ok(ConvDims {
            lhs_batch: get("input_batch_dimension")?,
            lhs_feature: get("input_feature_dimension")?,
            lhs_spatial: list("input_spatial_dimensions")?,
            rhs_out_feature: get("kernel_output_feature_dimension")?,
            rhs_in_feature: get("kernel_input_feature_dimension")?,
            rhs_spatial: list("kernel_spatial_dimensions")?,
            out_batch: get("output_batch_dimension")?,
            out_feature: get("output_feature_dimension")?,
            out_spatial: list("output_spatial_dimensions")?,
        });
    }
    let missing = || {
        Error::at(
            line,
            "convolution dimension numbers must read [..]x[..]->[..]",
        )
    };
    let (lhs, rest) = bracketed(tokens).ok_or_else(missing)?;
    let (rhs, rest) = bracketed(rest).ok_or_else(missing)?;
    let (out, _) = bracketed(rest).ok_or_else(missing)?;
    let (lhs_batch, lhs_feature, lhs_spatial) = layout(lhs, ["b", "f"], line)?;
    let (rhs_in_feature, rhs_out_feature, rhs_spatial) = layout(rhs, ["i", "o"], line)?;
    let (out_batch, out_feature, out_spatial) = layout(out, ["b", "f"], line)?;
    Ok(ConvDims {
        lhs_batch,
        lhs_feature,
        lhs_spatial,
        rhs_out_feature,
        rhs_in_feature,
        rhs_spatial,
        out_batch,
        out_feature,
        out_spatial,
    })
}

/// A window attribute's tokens: the pretty `window = {key = [..]}` entry, else the generic
/// attribute of its own. A splat (`dense<1>`) gives `n` copies.
fn window_ints(op: &Operation, pretty: &str, generic: &str, n: usize) -> Option<Vec<i64>> {
    let tokens = match op.attr(&["window"]).and_then(|w| list_after(w, pretty)) {
        Some(group) => group,
        None => op.attr(&[generic])?,
    };
    Some(splatted(tokens, n))
}

fn positive(op: &Operation, values: Option<Vec<i64>>, what: &str) -> Result<Vec<usize>, Error> {
    values
        .unwrap_or_default()
        .into_iter()
        .map(|v| {
            usize::try_from(v)
                .map_err(|_| Error::at(op.line, format!("convolution {what} {v} is negative")))
        })
        .collect()
}

/// Which kernel dimensions `window_reversal` (or the pretty `reverse`) flips; a splat
/// (`dense<true> : tensor<2xi1>`) flips all `n`.
fn reversal(op: &Operation, n: usize) -> Vec<bool> {
    let tokens = match op.attr(&["window"]).and_then(|w| list_after(w, "reverse")) {
        Some(group) => group,
        None => match op.attr(&["window_reversal"]) {
            Some(t) => t,
            None => return Vec::new(),
        },
    };
    let flags: Vec<bool> = tokens
        .iter()
        .filter_map(|t| match t {
            Tok::Word(w) if w == "true" || w == "1" => Some(true),
            Tok::Word(w) if w == "false" || w == "0" => Some(false),
            _ => None,
        })
        .collect();
    let dense = tokens.iter().any(|t| *t == Tok::Word("dense".into()));
    match flags.as_slice() {
        [one] if dense => vec![*one; n],
        _ => flags,
    }
}

fn group_count(op: &Operation, key: &str) -> Result<usize, Error> {
    match op.attr(&[key]) {
        None => Ok(1),
        Some(t) => match ints(t).as_slice() {
            [v] => usize::try_from(*v)
                .map_err(|_| Error::at(op.line, format!("convolution {key} {v} is negative"))),
            _ => Err(Error::at(
                op.line,
                format!("convolution {key} must be one integer"),
            )),
        },
    }
}

impl Importer<'_> {
    pub(super) fn convolution(
        &mut self,
        op: &Operation,
        args: &[ValueId],
        ty: &TensorType,
    ) -> Result<ValueId, Error> {
        let line = op.line;
        let &[lhs, rhs] = args else {
            return Err(Error::at(line, "convolution takes two operands"));
        };
        let dims = dimension_numbers(op)?;
        let d = dims.rhs_spatial.len();
        let mut conv = Convolution::new(dims);
        conv.strides = positive(op, window_ints(op, "stride", "window_strides", d), "stride")?;
        conv.lhs_dilation = positive(
            op,
            window_ints(op, "lhs_dilate", "lhs_dilation", d),
            "input dilation",
        )?;
        conv.rhs_dilation = positive(
            op,
            window_ints(op, "rhs_dilate", "rhs_dilation", d),
            "kernel dilation",
        )?;
        if let Some(flat) = window_ints(op, "pad", "padding", 2 * d) {
            if flat.len() != 2 * d {
                return Err(Error::at(
                    line,
                    format!("convolution padding needs {d} [low, high] pairs"),
                ));
            }
            conv.padding = ConvPadding::Explicit(flat.chunks(2).map(|p| (p[0], p[1])).collect());
        }
        conv.feature_groups = group_count(op, "feature_group_count")?;
        conv.batch_groups = group_count(op, "batch_group_count")?;
        // Mixed precision (`preferred_element_type`): both operands in the result's type.
        let mut typed = Vec::with_capacity(2);
        for a in [lhs, rhs] {
            let a_ty = self
                .b
                .value_type(a)
                .cloned()
                .ok_or_else(|| Error::at(line, "convolution operand has no type"))?;
            typed.push(if a_ty.dtype == ty.dtype {
                (a, a_ty)
            } else {
                let converted = self.push(Op::Convert { to: ty.dtype }, &[a], line)?;
                (converted, a_ty.with_dtype(ty.dtype))
            });
        }
        // A reversed window is the kernel flipped along those spatial dimensions.
        let flips: Vec<usize> = reversal(op, d)
            .iter()
            .zip(&conv.dims.rhs_spatial)
            .filter(|(flip, _)| **flip)
            .map(|(_, &axis)| axis)
            .collect();
        if !flips.is_empty() {
            typed[1].0 = self.push(Op::Reverse { axes: flips }, &[typed[1].0], line)?;
        }
        let mut sink = Sink {
            importer: self,
            line,
        };
        let out = conv
            .lower(
                &mut sink,
                (&typed[0].0, &typed[0].1),
                (&typed[1].0, &typed[1].1),
            )
            .map_err(|e| match e {
                LowerError::Invalid(m) => Error::at(line, format!("convolution: {m}")),
                LowerError::Sink(e) => e,
            })?;
        match self.b.value_type(out) {
            Some(got) if !self.refining.conforms(ty, got) => Err(Error::at(
                line,
                format!("convolution computes {got} where the program declares {ty}"),
            )),
            _ => Ok(out),
        }
    }
}

//! Tensor types as the text writes them (`tensor<2x3xf32>`), and the limits on what a text
//! may ask for. Every size read from the text is checked here before anything is allocated
//! or multiplied, so that a hostile or corrupt file is an error rather than an overflow, an
//! allocation failure or a stack overflow.

use crate::lex::Tok;
use crate::Error;
use ferrax_ir::{DType, TensorType, MAX_RANK};

/// Most results one operation may declare (`%0:N`).
pub(crate) const MAX_RESULTS: usize = 65_536;
/// Most result names a whole text may declare.
pub(crate) const MAX_TOTAL_RESULTS: usize = 1 << 20;
/// Deepest nesting of regions (an op's region holding an op with a region, ...). The parser
/// recurses once per level, so this bounds its stack.
pub(crate) const MAX_NESTING: usize = 64;
/// Most operations an import may walk, counting each inlined call's body every time.
pub(crate) const MAX_INLINED_OPS: usize = 1_000_000;
/// Most elements the slice sizes of a `dynamic_gather` may have.
pub(crate) const MAX_SLICE_SIZES: usize = 64;

pub(crate) fn element_type(name: &str) -> Option<DType> {
    Some(match name {
        "f32" => DType::F32,
        "f64" => DType::F64,
        "f16" => DType::F16,
        "bf16" => DType::BF16,
        "i32" => DType::I32,
        "i64" => DType::I64,
        "ui32" => DType::U32,
        "ui8" => DType::U8,
        "i8" => DType::I8,
        "i16" => DType::I16,
        "ui16" => DType::U16,
        "ui64" => DType::U64,
        "i1" => DType::Bool,
        _ => return None,
    })
}

/// The text of `toks` as written (for messages).
pub(crate) fn text(toks: &[Tok]) -> String {
    let mut s = String::new();
    for t in toks {
        match t {
            Tok::Value(v) => s.push_str(&format!("%{v}")),
            Tok::Symbol(v) => s.push_str(&format!("@{v}")),
            Tok::Block(v) => s.push_str(&format!("^{v}")),
            Tok::Str(v) => s.push_str(&format!("{v:?}")),
            Tok::Word(w) => s.push_str(w),
            Tok::Punct(c) => s.push(*c),
            Tok::Arrow => s.push_str("->"),
            Tok::Eof => {}
        }
    }
    s
}

/// The type written `tensor<toks>`: a shape and an element type ferrax has, of a size that
/// fits in memory's address range. A quantized element type (`!quant.uniform<...>`) gives its
/// storage type and its [`Quant`].
pub(crate) fn tensor_type(toks: &[Tok], line: usize) -> Result<Written, Error> {
    let spec = text(toks);
    let (merged, dynamic) = dynamic_dims(toks, line, &spec)?;
    let toks = merged.as_slice();
    let quantized = toks
        .iter()
        .position(|t| matches!(t, Tok::Word(w) if w == QUANT_UNIFORM));
    let mut complex = None;
    let (word, quant) = match (quantized, toks) {
        // `tensor<!quant.uniform<...>>` or `tensor<2x3x!quant.uniform<...>>`.
        (Some(0), _) => ("", Some(quant_type(&toks[1..], line, &spec)?)),
        (Some(1), [Tok::Word(w), ..]) if w.ends_with('x') => {
            (w.as_str(), Some(quant_type(&toks[2..], line, &spec)?))
        }
        // `tensor<2x3xcomplex<f32>>`: the shape's word ends in `complex`.
        (None, [Tok::Word(w), Tok::Punct('<'), Tok::Word(part), Tok::Punct('>')])
            if w == "complex" || w.ends_with("xcomplex") =>
        {
            let dtype = element_type(part)
                .and_then(DType::complex_of)
                .ok_or_else(|| Error::unsupported(line, format!("element type complex<{part}>")))?;
            complex = Some(dtype);
            (w.strip_suffix("complex").unwrap_or_default(), None)
        }
        (None, [Tok::Word(word)]) => (word.as_str(), None),
        _ => {
            let dialect_type = |t: &Tok| matches!(t, Tok::Word(w) if w.starts_with('!'));
            let what = if toks.contains(&Tok::Punct('?')) {
                "dynamic shape"
            } else if toks.contains(&Tok::Punct('*')) {
                "unranked shape"
            } else if toks.iter().any(dialect_type) || toks.contains(&Tok::Punct('<')) {
                "element type"
            } else {
                "tensor encoding"
            };
            return Err(Error::unsupported(
                line,
                format!("{what} in tensor<{spec}>"),
            ));
        }
    };
    let mut parts: Vec<&str> = if word.is_empty() {
        vec![""]
    } else {
        word.split('x').collect()
    };
    let elem = parts.pop().unwrap_or_default();
    if parts.len() > MAX_RANK {
        return Err(Error::unsupported(
            line,
            format!(
                "rank {} (at most {MAX_RANK}) of tensor<{spec}>",
                parts.len()
            ),
        ));
    }
    let dims = parts
        .iter()
        .map(|d| {
            d.parse::<usize>().map_err(|_| {
                if !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()) {
                    Error::at(
                        line,
                        format!("dimension {d} of tensor<{spec}> is too large"),
                    )
                } else {
                    Error::unsupported(line, format!("dimension '{d}' in tensor<{spec}>"))
                }
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let dtype = match (&quant, complex) {
        (Some(q), _) => q.storage,
        (None, Some(c)) => c,
        (None, None) => element_type(elem)
            .ok_or_else(|| Error::unsupported(line, format!("element type {elem}")))?,
    };
    if let Some(axis) = quant.as_ref().and_then(|q| q.axis) {
        let size = dims.get(axis).copied();
        let count = quant.as_ref().map_or(0, |q| q.scales.len());
        if size != Some(count) {
            return Err(Error::at(
                line,
                format!("tensor<{spec}> has {count} scales for its axis {axis}, of size {size:?}"),
            ));
        }
    }
    let ty = TensorType::new(dtype, dims);
    check_size(&ty).map_err(|e| Error::at(line, format!("tensor<{spec}> {e}")))?;
    Ok(Written { ty, quant, dynamic })
}

/// A tensor type as the text writes it.
#[derive(Clone, Debug)]
pub(crate) struct Written {
    /// The type, each dynamic dimension of size 1 until refinement gives it its size.
    pub ty: TensorType,
    pub quant: Option<Quant>,
    pub dynamic: Dynamic,
}

/// Which dimensions of a type are dynamic (`?`), one bit each (a type has at most
/// [`MAX_RANK`] = 8 dimensions).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Dynamic(u8);

impl Dynamic {
    pub fn is_static(self) -> bool {
        self.0 == 0
    }

    pub fn contains(self, dim: usize) -> bool {
        dim < MAX_RANK && self.0 & (1 << dim) != 0
    }

    pub fn union(self, other: Dynamic) -> Dynamic {
        Dynamic(self.0 | other.0)
    }

    /// Whether `got` is the type `declared` declares: its element type and rank, and its
    /// static sizes (a dynamic dimension may have any size).
    pub fn conforms(self, declared: &TensorType, got: &TensorType) -> bool {
        got.dtype == declared.dtype
            && got.rank() == declared.rank()
            && got
                .dims()
                .iter()
                .zip(declared.dims())
                .enumerate()
                .all(|(k, (g, d))| g == d || self.contains(k))
    }

    /// `ty` as the text writes it, `?` for its dynamic dimensions.
    pub fn show(self, ty: &TensorType) -> String {
        let mut s = String::from("tensor<");
        for (k, d) in ty.dims().iter().enumerate() {
            if self.contains(k) {
                s.push('?');
            } else {
                s.push_str(&d.to_string());
            }
            s.push('x');
        }
        s.push_str(&format!("{}>", ty.dtype));
        s
    }
}

/// `toks` with each `?` dimension written as 1 (merged into the words beside it, as a static
/// shape is one word), and which dimensions were `?`.
fn dynamic_dims(toks: &[Tok], line: usize, spec: &str) -> Result<(Vec<Tok>, Dynamic), Error> {
    if !toks.contains(&Tok::Punct('?')) {
        return Ok((toks.to_vec(), Dynamic::default()));
    }
    let mut out: Vec<Tok> = Vec::with_capacity(toks.len());
    let mut mask = 0u8;
    // Whether the last word of `out` holds a `?` (so that the next `x..` word joins it).
    let mut joining = false;
    for t in toks {
        match (t, out.last_mut()) {
            (Tok::Punct('?'), Some(Tok::Word(w))) if w.ends_with('x') => {
                let dim = w.matches('x').count();
                if dim >= MAX_RANK {
                    return Err(Error::unsupported(
                        line,
                        format!("rank above {MAX_RANK} of tensor<{spec}>"),
                    ));
                }
                mask |= 1 << dim;
                w.push('1');
                joining = true;
            }
            (Tok::Punct('?'), None) => {
                mask |= 1;
                out.push(Tok::Word("1".into()));
                joining = true;
            }
            (Tok::Word(next), Some(Tok::Word(w))) if joining && next.starts_with('x') => {
                w.push_str(next);
            }
            (Tok::Punct('?'), _) => {
                return Err(Error::unsupported(
                    line,
                    format!("dynamic shape in tensor<{spec}>"),
                ))
            }
            _ => {
                joining = false;
                out.push(t.clone());
            }
        }
    }
    Ok((out, Dynamic(mask)))
}

const QUANT_UNIFORM: &str = "!quant.uniform";

/// A uniform quantized element type (`!quant.uniform<i8:f32, 0.5:-3>`, or per axis
/// `!quant.uniform<i8:f32:1, {0.5:-3, 0.25}>`): integers `q` of the storage type stand for
/// `(q - zero_point) * scale` in the expressed float type.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Quant {
    pub storage: DType,
    /// The storage values a quantization may produce (the whole type unless the text narrows it,
    /// `i8<-127:127>`).
    pub storage_min: i64,
    pub storage_max: i64,
    pub expressed: DType,
    /// `None`: one scale and zero point for the whole tensor; `Some(d)`: one per index of
    /// dimension `d`.
    pub axis: Option<usize>,
    pub scales: Vec<f64>,
    pub zero_points: Vec<i64>,
}

/// Most scales a per-axis quantized type may list.
const MAX_SCALES: usize = 1 << 20;

/// The quantized type whose parameters are `toks` (`<i8:f32, 0.5:-3>`), after `!quant.uniform`.
fn quant_type(toks: &[Tok], line: usize, spec: &str) -> Result<Quant, Error> {
    let bad = |why: &str| Error::at(line, format!("quantized type in tensor<{spec}>: {why}"));
    let mut it = toks.iter().peekable();
    let punct = |it: &mut std::iter::Peekable<std::slice::Iter<Tok>>, c: char| {
        if it.next() == Some(&Tok::Punct(c)) {
            Ok(())
        } else {
            Err(bad(&format!("expected '{c}'")))
        }
    };
    let word = |it: &mut std::iter::Peekable<std::slice::Iter<Tok>>| match it.next() {
        Some(Tok::Word(w)) => Ok(w.clone()),
        _ => Err(bad("expected a word")),
    };
    let int = |w: &str| {
        w.parse::<i64>()
            .map_err(|_| bad(&format!("'{w}' is not an integer")))
    };
    punct(&mut it, '<')?;
    let storage_name = word(&mut it)?;
    let (storage, lowest, highest) = match storage_name.as_str() {
        "i8" => (DType::I8, i8::MIN.into(), i8::MAX.into()),
        "i16" => (DType::I16, i16::MIN.into(), i16::MAX.into()),
        "i32" => (DType::I32, i32::MIN.into(), i32::MAX.into()),
        "u8" => (DType::U8, 0, u8::MAX.into()),
        "u16" => (DType::U16, 0, u16::MAX.into()),
        other => {
            return Err(Error::unsupported(
                line,
                format!("quantized storage type {other} in tensor<{spec}>"),
            ))
        }
    };
    let (mut storage_min, mut storage_max) = (lowest, highest);
    if it.peek() == Some(&&Tok::Punct('<')) {
        it.next();
        storage_min = int(&word(&mut it)?)?;
        punct(&mut it, ':')?;
        storage_max = int(&word(&mut it)?)?;
        punct(&mut it, '>')?;
        if storage_min < lowest || storage_max > highest || storage_min >= storage_max {
            return Err(bad(&format!(
                "storage range {storage_min}..{storage_max} outside {storage_name}"
            )));
        }
    }
    punct(&mut it, ':')?;
    let expressed_name = word(&mut it)?;
    let expressed = element_type(&expressed_name)
        .filter(|d| d.is_float())
        .ok_or_else(|| {
            bad(&format!(
                "expressed type {expressed_name} is not a float type"
            ))
        })?;
    let mut axis = None;
    if it.peek() == Some(&&Tok::Punct(':')) {
        it.next();
        let w = word(&mut it)?;
        axis = Some(
            w.parse::<usize>()
                .map_err(|_| bad(&format!("'{w}' is not an axis")))?,
        );
    }
    punct(&mut it, ',')?;
    let mut scales = Vec::new();
    let mut zero_points = Vec::new();
    let mut parameter = |it: &mut std::iter::Peekable<std::slice::Iter<Tok>>| -> Result<(), Error> {
        let w = word(it)?;
        let scale = w
            .parse::<f64>()
            .ok()
            .filter(|s| s.is_finite() && *s > 0.0)
            .ok_or_else(|| bad(&format!("scale '{w}' is not a positive finite number")))?;
        let zero_point = if it.peek() == Some(&&Tok::Punct(':')) {
            it.next();
            int(&word(it)?)?
        } else {
            0
        };
        if zero_point < storage_min || zero_point > storage_max {
            return Err(bad(&format!(
                "zero point {zero_point} outside the storage range {storage_min}..{storage_max}"
            )));
        }
        if scales.len() == MAX_SCALES {
            return Err(bad(&format!("more than {MAX_SCALES} scales")));
        }
        scales.push(scale);
        zero_points.push(zero_point);
        Ok(())
    };
    if axis.is_some() {
        punct(&mut it, '{')?;
        loop {
            parameter(&mut it)?;
            match it.next() {
                Some(Tok::Punct(',')) => {}
                Some(Tok::Punct('}')) => break,
                _ => return Err(bad("expected ',' or '}' between scales")),
            }
        }
    } else {
        parameter(&mut it)?;
    }
    punct(&mut it, '>')?;
    if it.next().is_some() {
        return Err(bad("unexpected text after the parameters"));
    }
    Ok(Quant {
        storage,
        storage_min,
        storage_max,
        expressed,
        axis,
        scales,
        zero_points,
    })
}

/// `Ok` when `ty`'s element count and byte size (counting empty dimensions as 1, as strides
/// do) fit in an `isize`; otherwise what is wrong.
pub(crate) fn check_size(ty: &TensorType) -> Result<(), String> {
    let count = ty
        .dims()
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d));
    let bytes = ty
        .dims()
        .iter()
        .try_fold(ty.dtype.size_bytes(), |acc, &d| acc.checked_mul(d.max(1)));
    match (count, bytes) {
        (Some(_), Some(b)) if isize::try_from(b).is_ok() => Ok(()),
        _ => Err("has too many elements to address".to_string()),
    }
}

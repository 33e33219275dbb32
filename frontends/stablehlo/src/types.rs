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
/// fits in memory's address range.
pub(crate) fn tensor_type(toks: &[Tok], line: usize) -> Result<TensorType, Error> {
    let spec = text(toks);
    let [Tok::Word(word)] = toks else {
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
    };
    let mut parts: Vec<&str> = word.split('x').collect();
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
    let dtype = element_type(elem)
        .ok_or_else(|| Error::unsupported(line, format!("element type {elem}")))?;
    let ty = TensorType::new(dtype, dims);
    check_size(&ty).map_err(|e| Error::at(line, format!("tensor<{spec}> {e}")))?;
    Ok(ty)
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

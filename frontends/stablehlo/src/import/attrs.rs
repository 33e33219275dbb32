//! Reading an op's attribute tokens as integers and lists of dimensions, in the forms both
//! the pretty (`dims = [0, 1]`, `[0] x [1]`) and the generic (`#stablehlo.dot<...>`) syntax
//! write them.

use crate::lex::Tok;
use crate::Error;

/// The integers among `tokens`, in order.
pub(super) fn ints(tokens: &[Tok]) -> Vec<i64> {
    tokens
        .iter()
        .filter_map(|t| match t {
            Tok::Word(w) => w.parse().ok(),
            _ => None,
        })
        .collect()
}

/// The integers among `tokens` as indices; a negative one is an error at `line`.
pub(super) fn usizes(tokens: &[Tok], line: usize) -> Result<Vec<usize>, Error> {
    ints(tokens)
        .into_iter()
        .map(|v| usize::try_from(v).map_err(|_| Error::at(line, format!("negative index {v}"))))
        .collect()
}

/// `[a] x [b]` as two lists.
pub(super) fn pair(tokens: &[Tok], line: usize) -> Result<(Vec<usize>, Vec<usize>), Error> {
    match tokens.iter().position(|t| *t == Tok::Word("x".into())) {
        Some(k) => Ok((usizes(&tokens[..k], line)?, usizes(&tokens[k + 1..], line)?)),
        None => Err(Error::at(
            line,
            "expected dimensions of the form [..] x [..]",
        )),
    }
}

/// `key = [..]` inside an attribute's tokens (`#stablehlo.dot<...>` style).
pub(super) fn nested_list(tokens: &[Tok], key: &str) -> Vec<i64> {
    let Some(k) = tokens.iter().position(|t| *t == Tok::Word(key.into())) else {
        return Vec::new();
    };
    let rest = &tokens[k + 1..];
    let end = rest
        .iter()
        .position(|t| *t == Tok::Punct(']'))
        .unwrap_or(rest.len());
    ints(&rest[..end])
}

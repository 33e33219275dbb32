//! Parser for the text format written by [`crate::print_func`]. Value names may be any
//! `%identifier`; they are renumbered densely, so printing a parsed function is canonical.
//!
//! The text is lexed first (`lex`); the grammar (`func`) reads through a token cursor
//! (`cursor`), collects each op's attributes (`attrs`) and builds the op from its name,
//! attributes and declared type (`op`). Every error names a line and column.

mod attrs;
mod cursor;
mod func;
mod lex;
mod op;

use crate::{Func, Shape};
use cursor::Parser;
use lex::Tok;

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("line {line}, column {col}: {message}")]
pub struct ParseError {
    pub line: usize,
    pub col: usize,
    pub message: String,
}

/// Parses one function in the text format.
pub fn parse_func(src: &str) -> Result<Func, ParseError> {
    let mut p = Parser::new(lex::lex(src)?);
    let func = func::parse_one(&mut p)?;
    if *p.peek() != Tok::Eof {
        return Err(p.error(format!("expected end of input, found {}", p.peek())));
    }
    Ok(func)
}

impl std::str::FromStr for Func {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Func, ParseError> {
        parse_func(s)
    }
}

impl Shape {
    /// Parses `[2,3]`-style dimension lists (used by tests and tools).
    pub fn parse(s: &str) -> Option<Shape> {
        let inner = s.trim().strip_prefix('[')?.strip_suffix(']')?;
        if inner.trim().is_empty() {
            return Some(Shape::scalar());
        }
        inner
            .split(',')
            .map(|d| d.trim().parse().ok())
            .collect::<Option<Vec<usize>>>()
            .map(Shape)
    }
}

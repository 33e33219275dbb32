//! The parser's position in the token stream and the small pieces of grammar every rule uses
//! (punctuation, words, integers and their lists, tensor types, a constant's raw values), so
//! that each error is reported at the token that caused it. Tensor types are bounded here, as
//! they are read, so no rule downstream sees a rank or size that could overflow.

use super::lex::Tok;
use super::ParseError;
use crate::{DType, TensorType, MAX_BYTES, MAX_RANK};

pub(super) type PResult<T> = Result<T, ParseError>;

pub(super) struct Parser {
    toks: Vec<(Tok, usize, usize)>,
    pub(super) pos: usize,
    /// How many functions are open: the top-level one and the nested ones around the
    /// parser's position.
    pub(super) depth: usize,
}

impl Parser {
    /// A parser at the first of `toks`, which end with [`Tok::Eof`].
    pub(super) fn new(toks: Vec<(Tok, usize, usize)>) -> Parser {
        Parser {
            toks,
            pos: 0,
            depth: 0,
        }
    }

    pub(super) fn peek(&self) -> &Tok {
        &self.toks[self.pos].0
    }

    /// The token after the next one (the last, `Eof`, at the end).
    pub(super) fn peek_second(&self) -> &Tok {
        &self.toks[(self.pos + 1).min(self.toks.len() - 1)].0
    }

    pub(super) fn error_at(&self, pos: usize, message: impl Into<String>) -> ParseError {
        let (_, line, col) = self.toks[pos.min(self.toks.len() - 1)];
        ParseError {
            line,
            col,
            message: message.into(),
        }
    }

    pub(super) fn error(&self, message: impl Into<String>) -> ParseError {
        self.error_at(self.pos, message)
    }

    pub(super) fn next(&mut self) -> Tok {
        let t = self.toks[self.pos].0.clone();
        if self.pos + 1 < self.toks.len() {
            self.pos += 1;
        }
        t
    }

    pub(super) fn eat(&mut self, c: char) -> bool {
        if *self.peek() == Tok::Punct(c) {
            self.next();
            true
        } else {
            false
        }
    }

    pub(super) fn expect(&mut self, c: char) -> PResult<()> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(self.error(format!("expected '{c}', found {}", self.peek())))
        }
    }

    pub(super) fn word(&mut self, what: &str) -> PResult<String> {
        let at = self.pos;
        match self.next() {
            Tok::Word(w) => Ok(w),
            t => Err(self.error_at(at, format!("expected {what}, found {t}"))),
        }
    }

    pub(super) fn keyword(&mut self, kw: &str) -> PResult<()> {
        let at = self.pos;
        match self.next() {
            Tok::Word(w) if w == kw => Ok(()),
            t => Err(self.error_at(at, format!("expected '{kw}', found {t}"))),
        }
    }

    pub(super) fn int(&mut self) -> PResult<i64> {
        let at = self.pos;
        let w = self.word("an integer")?;
        w.parse()
            .map_err(|_| self.error_at(at, format!("expected an integer, found '{w}'")))
    }

    pub(super) fn int_list(&mut self) -> PResult<Vec<i64>> {
        self.expect('[')?;
        let mut out = Vec::new();
        if self.eat(']') {
            return Ok(out);
        }
        loop {
            out.push(self.int()?);
            if self.eat(']') {
                return Ok(out);
            }
            self.expect(',')?;
        }
    }

    /// A tensor type of rank at most [`MAX_RANK`] whose elements fit in [`MAX_BYTES`].
    pub(super) fn tensor_type(&mut self) -> PResult<TensorType> {
        let at = self.pos;
        self.bounded_type("type", at)
    }

    /// A tensor type as [`Parser::tensor_type`] reads it; a type out of bounds is an error
    /// at token `at` that calls it `role`.
    pub(super) fn bounded_type(&mut self, role: &str, at: usize) -> PResult<TensorType> {
        let name_at = self.pos;
        let name = self.word("a type")?;
        let dtype = DType::from_name(&name)
            .ok_or_else(|| self.error_at(name_at, format!("unknown element type '{name}'")))?;
        let dims_at = self.pos;
        let dims = self.int_list()?;
        let dims = dims
            .into_iter()
            .map(|d| {
                usize::try_from(d).map_err(|_| self.error_at(dims_at, "negative dimension size"))
            })
            .collect::<PResult<Vec<_>>>()?;
        let ty = TensorType::new(dtype, dims);
        if ty.rank() > MAX_RANK {
            return Err(self.error_at(at, format!("{role} {ty} exceeds rank {MAX_RANK}")));
        }
        if ty.checked_bytes().is_none() {
            return Err(self.error_at(at, format!("{role} {ty} takes more than {MAX_BYTES} bytes")));
        }
        Ok(ty)
    }

    pub(super) fn value_name(&mut self) -> PResult<String> {
        let at = self.pos;
        match self.next() {
            Tok::Value(v) => Ok(v),
            t => Err(self.error_at(at, format!("expected a value, found {t}"))),
        }
    }

    /// A literal's raw words: one scalar or a bracketed list.
    pub(super) fn literal_words(&mut self) -> PResult<(Vec<String>, bool)> {
        if !self.eat('[') {
            return Ok((vec![self.word("a constant value")?], true));
        }
        let mut out = Vec::new();
        if self.eat(']') {
            return Ok((out, false));
        }
        loop {
            out.push(self.word("a constant value")?);
            if self.eat(']') {
                return Ok((out, false));
            }
            self.expect(',')?;
        }
    }
}

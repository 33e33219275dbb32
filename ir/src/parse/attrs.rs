//! An instruction's `key=value` attributes: read as written, then taken by the op that
//! needs them, so that a missing, mistyped, repeated or unknown attribute is an error at
//! its own position.

use super::cursor::{PResult, Parser};
use super::func::parse_one;
use super::lex::Tok;
use crate::{DType, Func};
use std::collections::HashMap;

/// An attribute value: `3`, `[1,2]`, `[1]x[0]`, a dtype's name, a nested `func` or a list of
/// them.
pub(super) enum AttrValue {
    Int(i64),
    DType(DType),
    List(Vec<i64>),
    Pair(Vec<i64>, Vec<i64>),
    Func(Box<Func>),
    Funcs(Vec<Func>),
}

impl Parser {
    /// One attribute's value. A `func` value is a whole nested function, so the grammar of
    /// attributes and that of functions call each other.
    pub(super) fn attr_value(&mut self) -> PResult<AttrValue> {
        if *self.peek() == Tok::Word("func".into()) {
            return Ok(AttrValue::Func(Box::new(parse_one(self)?)));
        }
        if let Tok::Word(w) = self.peek() {
            if let Some(d) = DType::from_name(w) {
                self.next();
                return Ok(AttrValue::DType(d));
            }
        }
        if *self.peek() != Tok::Punct('[') {
            return Ok(AttrValue::Int(self.int()?));
        }
        if *self.peek_second() == Tok::Word("func".into()) {
            self.next();
            let mut funcs = vec![parse_one(self)?];
            while self.eat(',') {
                funcs.push(parse_one(self)?);
            }
            self.expect(']')?;
            return Ok(AttrValue::Funcs(funcs));
        }
        let first = self.int_list()?;
        if *self.peek() == Tok::Word("x".into()) {
            self.next();
            let second = self.int_list()?;
            return Ok(AttrValue::Pair(first, second));
        }
        Ok(AttrValue::List(first))
    }
}

/// The attributes of the op at token `op_pos`, each with the position of its key.
pub(super) struct Attrs {
    map: HashMap<String, (AttrValue, usize)>,
    pub(super) op_pos: usize,
}

impl Attrs {
    pub(super) fn new(op_pos: usize) -> Attrs {
        Attrs {
            map: HashMap::new(),
            op_pos,
        }
    }

    /// Records `key=value`, written at token `at`.
    pub(super) fn add(
        &mut self,
        p: &Parser,
        key: String,
        value: AttrValue,
        at: usize,
    ) -> PResult<()> {
        match self.map.insert(key.clone(), (value, at)) {
            Some(_) => Err(p.error_at(at, format!("attribute '{key}' is given twice"))),
            None => Ok(()),
        }
    }

    fn take(&mut self, p: &Parser, key: &str) -> PResult<(AttrValue, usize)> {
        self.map
            .remove(key)
            .ok_or_else(|| p.error_at(self.op_pos, format!("missing attribute '{key}'")))
    }

    fn usize_of(p: &Parser, v: i64, at: usize) -> PResult<usize> {
        usize::try_from(v)
            .map_err(|_| p.error_at(at, format!("expected a non-negative integer, got {v}")))
    }

    pub(super) fn int(&mut self, p: &Parser, key: &str) -> PResult<usize> {
        match self.take(p, key)? {
            (AttrValue::Int(v), at) => Self::usize_of(p, v, at),
            (_, at) => Err(p.error_at(at, format!("attribute '{key}' expects an integer"))),
        }
    }

    /// An integer that may be left out for `default`.
    pub(super) fn int_or(&mut self, p: &Parser, key: &str, default: usize) -> PResult<usize> {
        match self.map.contains_key(key) {
            true => self.int(p, key),
            false => Ok(default),
        }
    }

    /// A dtype written by its name, absent for `None`.
    pub(super) fn dtype_or_none(&mut self, p: &Parser, key: &str) -> PResult<Option<DType>> {
        match self.map.remove(key) {
            None => Ok(None),
            Some((AttrValue::DType(d), _)) => Ok(Some(d)),
            Some((_, at)) => Err(p.error_at(at, format!("attribute '{key}' expects a dtype"))),
        }
    }

    /// A flag written `key=1`, absent when false.
    pub(super) fn flag(&mut self, p: &Parser, key: &str) -> PResult<bool> {
        match self.map.remove(key) {
            None => Ok(false),
            Some((AttrValue::Int(v @ (0 | 1)), _)) => Ok(v == 1),
            Some((_, at)) => Err(p.error_at(at, format!("attribute '{key}' expects 0 or 1"))),
        }
    }

    pub(super) fn ilist(
        &mut self,
        p: &Parser,
        key: &str,
        default: Option<Vec<i64>>,
    ) -> PResult<Vec<i64>> {
        match (self.map.remove(key), default) {
            (Some((AttrValue::List(v), _)), _) => Ok(v),
            (Some((_, at)), _) => Err(p.error_at(at, format!("attribute '{key}' expects a list"))),
            (None, Some(d)) => Ok(d),
            (None, None) => Err(p.error_at(self.op_pos, format!("missing attribute '{key}'"))),
        }
    }

    pub(super) fn list(
        &mut self,
        p: &Parser,
        key: &str,
        default: Option<Vec<i64>>,
    ) -> PResult<Vec<usize>> {
        let at = self.map.get(key).map_or(self.op_pos, |(_, at)| *at);
        self.ilist(p, key, default)?
            .into_iter()
            .map(|v| Self::usize_of(p, v, at))
            .collect()
    }

    pub(super) fn pair(&mut self, p: &Parser, key: &str) -> PResult<(Vec<usize>, Vec<usize>)> {
        match self.map.remove(key) {
            None => Ok((Vec::new(), Vec::new())),
            Some((AttrValue::Pair(a, b), at)) => {
                let conv = |v: Vec<i64>| {
                    v.into_iter()
                        .map(|x| Self::usize_of(p, x, at))
                        .collect::<PResult<Vec<_>>>()
                };
                Ok((conv(a)?, conv(b)?))
            }
            Some((_, at)) => Err(p.error_at(at, format!("attribute '{key}' expects [..]x[..]"))),
        }
    }

    pub(super) fn func(&mut self, p: &Parser, key: &str) -> PResult<Func> {
        match self.take(p, key)? {
            (AttrValue::Func(f), _) => Ok(*f),
            (_, at) => Err(p.error_at(at, format!("attribute '{key}' expects a function"))),
        }
    }

    /// A list of functions; `[]` is none.
    pub(super) fn funcs(&mut self, p: &Parser, key: &str) -> PResult<Vec<Func>> {
        match self.take(p, key)? {
            (AttrValue::Funcs(f), _) => Ok(f),
            (AttrValue::List(v), _) if v.is_empty() => Ok(Vec::new()),
            (_, at) => {
                Err(p.error_at(at, format!("attribute '{key}' expects a list of functions")))
            }
        }
    }

    /// Ends the taking: an attribute no op took is unknown.
    pub(super) fn finish(self, p: &Parser) -> PResult<()> {
        match self.map.into_iter().next() {
            Some((k, (_, at))) => Err(p.error_at(at, format!("unknown attribute '{k}'"))),
            None => Ok(()),
        }
    }
}

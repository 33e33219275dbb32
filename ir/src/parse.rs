//! Parser for the text format written by [`crate::print_func`]. Value names may be any
//! `%identifier`; they are renumbered densely, so printing a parsed function is canonical.

use crate::{
    bf16_from_f64, f16_from_f64, infer_type, BinaryOp, CompareOp, CustomVjp, DType, DotDims,
    Elements, Func, Instr, Literal, Op, ReduceOp, Scalar, Shape, TensorType, UnaryOp, ValueId,
};
use half::{bf16, f16};
use std::collections::HashMap;

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("line {line}, column {col}: {message}")]
pub struct ParseError {
    pub line: usize,
    pub col: usize,
    pub message: String,
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Punct(char),
    Arrow,
    Value(String),
    Global(String),
    Word(String),
    Eof,
}

impl std::fmt::Display for Tok {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Tok::Punct(c) => write!(f, "'{c}'"),
            Tok::Arrow => f.write_str("'->'"),
            Tok::Value(v) => write!(f, "'%{v}'"),
            Tok::Global(g) => write!(f, "'@{g}'"),
            Tok::Word(w) => write!(f, "'{w}'"),
            Tok::Eof => f.write_str("end of input"),
        }
    }
}

fn is_word_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '+' | '-')
}

fn lex(src: &str) -> Result<Vec<(Tok, usize, usize)>, ParseError> {
    let chars: Vec<char> = src.chars().collect();
    let mut toks = Vec::new();
    let (mut i, mut line, mut col) = (0, 1, 1);
    while i < chars.len() {
        let c = chars[i];
        let (tl, tc) = (line, col);
        let start = i;
        if c == '\n' {
            i += 1;
            line += 1;
            col = 1;
            continue;
        }
        if c.is_whitespace() {
            i += 1;
            col += 1;
            continue;
        }
        if c == '/' && chars.get(i + 1) == Some(&'/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
            continue;
        }
        let tok = if c == '-' && chars.get(i + 1) == Some(&'>') {
            i += 2;
            Tok::Arrow
        } else if "()[]{},:=".contains(c) {
            i += 1;
            Tok::Punct(c)
        } else if c == '%' || c == '@' || is_word_char(c) {
            if c == '%' || c == '@' {
                i += 1;
            }
            let word_start = i;
            while i < chars.len() && is_word_char(chars[i]) {
                i += 1;
            }
            let word: String = chars[word_start..i].iter().collect();
            if word.is_empty() {
                return Err(ParseError {
                    line: tl,
                    col: tc,
                    message: format!("expected a name after '{c}'"),
                });
            }
            match c {
                '%' => Tok::Value(word),
                '@' => Tok::Global(word),
                _ => Tok::Word(word),
            }
        } else {
            return Err(ParseError {
                line: tl,
                col: tc,
                message: format!("unexpected character {c:?}"),
            });
        };
        col += i - start;
        toks.push((tok, tl, tc));
    }
    toks.push((Tok::Eof, line, col));
    Ok(toks)
}

/// An attribute value: `3`, `[1,2]`, `[1]x[0]` or a nested `func`.
enum AttrValue {
    Int(i64),
    List(Vec<i64>),
    Pair(Vec<i64>, Vec<i64>),
    Func(Box<Func>),
}

struct Parser {
    toks: Vec<(Tok, usize, usize)>,
    pos: usize,
}

type PResult<T> = Result<T, ParseError>;

impl Parser {
    fn peek(&self) -> &Tok {
        &self.toks[self.pos].0
    }

    fn error_at(&self, pos: usize, message: impl Into<String>) -> ParseError {
        let (_, line, col) = self.toks[pos.min(self.toks.len() - 1)];
        ParseError {
            line,
            col,
            message: message.into(),
        }
    }

    fn error(&self, message: impl Into<String>) -> ParseError {
        self.error_at(self.pos, message)
    }

    fn next(&mut self) -> Tok {
        let t = self.toks[self.pos].0.clone();
        if self.pos + 1 < self.toks.len() {
            self.pos += 1;
        }
        t
    }

    fn eat(&mut self, c: char) -> bool {
        if *self.peek() == Tok::Punct(c) {
            self.next();
            true
        } else {
            false
        }
    }

    fn expect(&mut self, c: char) -> PResult<()> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(self.error(format!("expected '{c}', found {}", self.peek())))
        }
    }

    fn word(&mut self, what: &str) -> PResult<String> {
        match self.next() {
            Tok::Word(w) => Ok(w),
            t => Err(self.error_at(self.pos - 1, format!("expected {what}, found {t}"))),
        }
    }

    fn keyword(&mut self, kw: &str) -> PResult<()> {
        match self.next() {
            Tok::Word(w) if w == kw => Ok(()),
            t => Err(self.error_at(self.pos - 1, format!("expected '{kw}', found {t}"))),
        }
    }

    fn int(&mut self) -> PResult<i64> {
        let at = self.pos;
        let w = self.word("an integer")?;
        w.parse()
            .map_err(|_| self.error_at(at, format!("expected an integer, found '{w}'")))
    }

    fn int_list(&mut self) -> PResult<Vec<i64>> {
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

    fn tensor_type(&mut self) -> PResult<TensorType> {
        let at = self.pos;
        let name = self.word("a type")?;
        let dtype = DType::from_name(&name)
            .ok_or_else(|| self.error_at(at, format!("unknown element type '{name}'")))?;
        let at = self.pos;
        let dims = self.int_list()?;
        let dims = dims
            .into_iter()
            .map(|d| usize::try_from(d).map_err(|_| self.error_at(at, "negative dimension size")))
            .collect::<PResult<Vec<_>>>()?;
        Ok(TensorType::new(dtype, dims))
    }

    fn value_name(&mut self) -> PResult<String> {
        match self.next() {
            Tok::Value(v) => Ok(v),
            t => Err(self.error_at(self.pos - 1, format!("expected a value, found {t}"))),
        }
    }

    fn attr_value(&mut self) -> PResult<AttrValue> {
        if *self.peek() == Tok::Word("func".into()) {
            return Ok(AttrValue::Func(Box::new(parse_one(self)?)));
        }
        if *self.peek() != Tok::Punct('[') {
            return Ok(AttrValue::Int(self.int()?));
        }
        let first = self.int_list()?;
        if *self.peek() == Tok::Word("x".into()) {
            self.next();
            let second = self.int_list()?;
            return Ok(AttrValue::Pair(first, second));
        }
        Ok(AttrValue::List(first))
    }

    /// A literal's raw words: one scalar or a bracketed list.
    fn literal_words(&mut self) -> PResult<(Vec<String>, bool)> {
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

fn parse_scalar(dtype: DType, w: &str) -> Option<Scalar> {
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
        DType::U8 => Scalar::U8(w.parse().ok()?),
        DType::Bool => Scalar::Bool(w.parse().ok()?),
    })
}

struct Attrs {
    map: HashMap<String, (AttrValue, usize)>,
    op_pos: usize,
}

impl Attrs {
    fn take(&mut self, p: &Parser, key: &str) -> PResult<(AttrValue, usize)> {
        self.map
            .remove(key)
            .ok_or_else(|| p.error_at(self.op_pos, format!("missing attribute '{key}'")))
    }

    fn usize_of(p: &Parser, v: i64, at: usize) -> PResult<usize> {
        usize::try_from(v)
            .map_err(|_| p.error_at(at, format!("expected a non-negative integer, got {v}")))
    }

    fn int(&mut self, p: &Parser, key: &str) -> PResult<usize> {
        match self.take(p, key)? {
            (AttrValue::Int(v), at) => Self::usize_of(p, v, at),
            (_, at) => Err(p.error_at(at, format!("attribute '{key}' expects an integer"))),
        }
    }

    fn ilist(&mut self, p: &Parser, key: &str, default: Option<Vec<i64>>) -> PResult<Vec<i64>> {
        match (self.map.remove(key), default) {
            (Some((AttrValue::List(v), _)), _) => Ok(v),
            (Some((_, at)), _) => Err(p.error_at(at, format!("attribute '{key}' expects a list"))),
            (None, Some(d)) => Ok(d),
            (None, None) => Err(p.error_at(self.op_pos, format!("missing attribute '{key}'"))),
        }
    }

    fn list(&mut self, p: &Parser, key: &str, default: Option<Vec<i64>>) -> PResult<Vec<usize>> {
        let at = self.map.get(key).map_or(self.op_pos, |(_, at)| *at);
        self.ilist(p, key, default)?
            .into_iter()
            .map(|v| Self::usize_of(p, v, at))
            .collect()
    }

    fn pair(&mut self, p: &Parser, key: &str) -> PResult<(Vec<usize>, Vec<usize>)> {
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

    fn func(&mut self, p: &Parser, key: &str) -> PResult<Func> {
        match self.take(p, key)? {
            (AttrValue::Func(f), _) => Ok(*f),
            (_, at) => Err(p.error_at(at, format!("attribute '{key}' expects a function"))),
        }
    }

    fn finish(self, p: &Parser) -> PResult<()> {
        match self.map.into_iter().next() {
            Some((k, (_, at))) => Err(p.error_at(at, format!("unknown attribute '{k}'"))),
            None => Ok(()),
        }
    }
}

fn build_op(
    p: &Parser,
    name: &str,
    mut attrs: Attrs,
    literal: Option<(Vec<String>, bool, usize)>,
    ty: &TensorType,
) -> PResult<Op> {
    let at = attrs.op_pos;
    let op = if let Some(u) = UnaryOp::ALL.into_iter().find(|u| u.name() == name) {
        Op::Unary(u)
    } else if let Some(b) = BinaryOp::ALL.into_iter().find(|b| b.name() == name) {
        Op::Binary(b)
    } else if let Some(c) = CompareOp::ALL.into_iter().find(|c| c.name() == name) {
        Op::Compare(c)
    } else if let Some(r) = ReduceOp::ALL.into_iter().find(|r| r.name() == name) {
        Op::Reduce {
            op: r,
            axes: attrs.list(p, "axes", None)?,
        }
    } else {
        match name {
            "constant" => {
                let Some((words, splat, lit_at)) = literal else {
                    return Err(p.error_at(at, "constant needs a value"));
                };
                let scalars = words
                    .iter()
                    .map(|w| {
                        parse_scalar(ty.dtype, w).ok_or_else(|| {
                            p.error_at(lit_at, format!("'{w}' is not a valid {} value", ty.dtype))
                        })
                    })
                    .collect::<PResult<Vec<_>>>()?;
                if !splat && scalars.len() != ty.numel() {
                    return Err(p.error_at(
                        lit_at,
                        format!("{} values for a constant of type {ty}", scalars.len()),
                    ));
                }
                let data = Elements::from_scalars(ty.dtype, &scalars)
                    .ok_or_else(|| p.error_at(lit_at, "mixed constant types"))?;
                Op::Constant(Literal {
                    ty: ty.clone(),
                    data,
                })
            }
            "iota" => Op::Iota {
                dtype: ty.dtype,
                shape: ty.shape.clone(),
                dim: attrs.int(p, "dim")?,
            },
            "select" => Op::Select,
            "clamp" => Op::Clamp,
            "convert" => Op::Convert { to: ty.dtype },
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
            "stop_gradient" => Op::StopGradient,
            "custom_vjp" => Op::CustomVjp(Box::new(CustomVjp {
                primal: attrs.func(p, "primal")?,
                fwd: attrs.func(p, "fwd")?,
                bwd: attrs.func(p, "bwd")?,
            })),
            _ => return Err(p.error_at(at, format!("unknown op '{name}'"))),
        }
    };
    attrs.finish(p)?;
    Ok(op)
}

/// Parses one function in the text format.
pub fn parse_func(src: &str) -> Result<Func, ParseError> {
    let mut p = Parser {
        toks: lex(src)?,
        pos: 0,
    };
    let func = parse_one(&mut p)?;
    if *p.peek() != Tok::Eof {
        return Err(p.error(format!("expected end of input, found {}", p.peek())));
    }
    Ok(func)
}

fn parse_one(p: &mut Parser) -> PResult<Func> {
    p.keyword("func")?;
    let name = match p.next() {
        Tok::Global(g) => g,
        t => return Err(p.error_at(p.pos - 1, format!("expected '@name', found {t}"))),
    };
    let mut names: HashMap<String, ValueId> = HashMap::new();
    let mut params = Vec::new();
    p.expect('(')?;
    if !p.eat(')') {
        loop {
            let at = p.pos;
            let v = p.value_name()?;
            p.expect(':')?;
            let ty = p.tensor_type()?;
            if ty.rank() > crate::MAX_RANK {
                return Err(p.error_at(
                    at,
                    format!("parameter type {ty} exceeds rank {}", crate::MAX_RANK),
                ));
            }
            if names
                .insert(v.clone(), ValueId(params.len() as u32))
                .is_some()
            {
                return Err(p.error_at(at, format!("%{v} is defined twice")));
            }
            params.push(ty);
            if p.eat(')') {
                break;
            }
            p.expect(',')?;
        }
    }
    if p.next() != Tok::Arrow {
        return Err(p.error_at(p.pos - 1, "expected '->'"));
    }
    p.expect('(')?;
    let mut result_types = Vec::new();
    if !p.eat(')') {
        loop {
            result_types.push(p.tensor_type()?);
            if p.eat(')') {
                break;
            }
            p.expect(',')?;
        }
    }
    p.expect('{')?;
    let mut func = Func {
        name,
        params,
        body: Vec::new(),
        outputs: Vec::new(),
    };
    loop {
        let at = p.pos;
        match p.next() {
            Tok::Word(w) if w == "return" => break,
            Tok::Value(v) => {
                p.expect('=')?;
                let op_pos = p.pos;
                let op_name = p.word("an op name")?;
                let mut args = Vec::new();
                let mut attrs = Attrs {
                    map: HashMap::new(),
                    op_pos,
                };
                let mut literal = None;
                if op_name == "constant" {
                    let lit_at = p.pos;
                    let (words, splat) = p.literal_words()?;
                    literal = Some((words, splat, lit_at));
                } else if *p.peek() != Tok::Punct(':') {
                    loop {
                        let item_at = p.pos;
                        match p.next() {
                            Tok::Value(a) => {
                                let id = names.get(&a).ok_or_else(|| {
                                    p.error_at(item_at, format!("%{a} is not defined"))
                                })?;
                                args.push(*id);
                            }
                            Tok::Word(k) => {
                                p.expect('=')?;
                                let val = p.attr_value()?;
                                if attrs.map.insert(k.clone(), (val, item_at)).is_some() {
                                    return Err(p.error_at(
                                        item_at,
                                        format!("attribute '{k}' is given twice"),
                                    ));
                                }
                            }
                            t => {
                                return Err(p.error_at(
                                    item_at,
                                    format!("expected an operand or attribute, found {t}"),
                                ))
                            }
                        }
                        if !p.eat(',') {
                            break;
                        }
                    }
                }
                p.expect(':')?;
                let ty = p.tensor_type()?;
                let op = build_op(p, &op_name, attrs, literal, &ty)?;
                let arg_types: Vec<&TensorType> =
                    args.iter().filter_map(|&a| func.value_type(a)).collect();
                let inferred =
                    infer_type(&op, &arg_types).map_err(|e| p.error_at(op_pos, e.to_string()))?;
                if inferred != ty {
                    return Err(p.error_at(
                        op_pos,
                        format!("{op_name} declares type {ty} but its operands give {inferred}"),
                    ));
                }
                func.body.push(Instr { op, args, ty });
                let id = func.instr_value(func.body.len() - 1);
                if names.insert(v.clone(), id).is_some() {
                    return Err(p.error_at(at, format!("%{v} is defined twice")));
                }
            }
            t => {
                return Err(p.error_at(
                    at,
                    format!("expected an instruction or 'return', found {t}"),
                ))
            }
        }
    }
    let ret_pos = p.pos;
    if *p.peek() != Tok::Punct('}') {
        loop {
            let at = p.pos;
            let v = p.value_name()?;
            func.outputs.push(
                *names
                    .get(&v)
                    .ok_or_else(|| p.error_at(at, format!("%{v} is not defined")))?,
            );
            if !p.eat(',') {
                break;
            }
        }
    }
    p.expect('}')?;
    if func.output_types() != result_types {
        let shown: Vec<String> = func.output_types().iter().map(|t| t.to_string()).collect();
        let declared: Vec<String> = result_types.iter().map(|t| t.to_string()).collect();
        return Err(p.error_at(
            ret_pos,
            format!(
                "returns ({}) but the signature declares ({})",
                shown.join(", "),
                declared.join(", ")
            ),
        ));
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

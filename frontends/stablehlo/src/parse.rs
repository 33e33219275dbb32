//! MLIR text → a light operation tree. Ops are kept close to their text: operands, named
//! attributes and loose words as tokens, types, nested regions; `import` gives them meaning.

use crate::lex::{lex, Tok};
use crate::types::{self, Dynamic, Quant, Written, MAX_NESTING, MAX_RESULTS, MAX_TOTAL_RESULTS};
use crate::Error;
use ferrax_ir::TensorType;

pub(crate) struct MFunc {
    pub name: String,
    pub public: bool,
    pub params: Vec<(String, TensorType)>,
    /// Which dimensions of each parameter are dynamic (`?`).
    pub param_dynamic: Vec<Dynamic>,
    pub body: Vec<Operation>,
}

#[derive(Clone)]
pub(crate) struct Region {
    pub args: Vec<(String, TensorType)>,
    pub ops: Vec<Operation>,
}

#[derive(Clone)]
pub(crate) struct Operation {
    pub line: usize,
    pub name: String,
    /// Result names as they are used: `0` or `0#1`.
    pub results: Vec<String>,
    pub operands: Vec<String>,
    pub callee: Option<String>,
    pub attrs: Vec<(String, Vec<Tok>)>,
    /// Tokens that are neither operands nor attributes (`LE`, `dense<...>`, `[1:2]`, ...).
    pub words: Vec<Tok>,
    pub regions: Vec<Region>,
    /// Names the pretty `while` binds to its carried values (`%iterArg = %0`), which its
    /// `cond` and `do` regions read.
    pub bound: Vec<String>,
    /// Types after `:`: operand types and result types of a function type, or a plain list.
    /// Quantized types are their storage types here, with their [`Quant`] beside them.
    pub operand_types: Vec<TensorType>,
    pub result_types: Vec<TensorType>,
    /// The quantization of each operand and result type (`None` where it is not quantized).
    pub operand_quant: Vec<Option<Quant>>,
    pub result_quant: Vec<Option<Quant>>,
    /// Which dimensions of each result type are dynamic (`?`); their size in `result_types`
    /// is 1 until the importer refines them.
    pub result_dynamic: Vec<Dynamic>,
}

impl Operation {
    pub fn is_quantized(&self) -> bool {
        self.operand_quant
            .iter()
            .chain(&self.result_quant)
            .any(Option::is_some)
    }

    /// The dimensions dynamic in any of the op's result types.
    pub fn dynamic_results(&self) -> Dynamic {
        self.result_dynamic
            .iter()
            .fold(Dynamic::default(), |a, &d| a.union(d))
    }

    pub fn attr(&self, keys: &[&str]) -> Option<&[Tok]> {
        self.attrs
            .iter()
            .find(|(k, _)| keys.contains(&k.as_str()))
            .map(|(_, v)| v.as_slice())
    }
}

struct P {
    toks: Vec<(Tok, usize)>,
    pos: usize,
    /// Regions open around the current token.
    depth: usize,
    /// Result names declared so far.
    results: usize,
}

type PResult<T> = Result<T, Error>;

impl P {
    fn peek(&self) -> &Tok {
        &self.toks[self.pos].0
    }

    fn peek_at(&self, k: usize) -> &Tok {
        &self.toks[(self.pos + k).min(self.toks.len() - 1)].0
    }

    fn line(&self) -> usize {
        self.toks[self.pos].1
    }

    fn next(&mut self) -> Tok {
        let t = self.toks[self.pos].0.clone();
        if self.pos + 1 < self.toks.len() {
            self.pos += 1;
        }
        t
    }

    fn err(&self, msg: impl Into<String>) -> Error {
        Error::at(self.line(), msg)
    }

    fn is(&self, c: char) -> bool {
        *self.peek() == Tok::Punct(c)
    }

    fn eat(&mut self, c: char) -> bool {
        if self.is(c) {
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
            Err(self.err(format!("expected '{c}', found {}", self.peek())))
        }
    }

    /// Skips a balanced `{...}` (attribute dictionaries we do not need).
    fn skip_braces(&mut self) -> PResult<()> {
        self.expect('{')?;
        let mut depth = 1;
        while depth > 0 {
            match self.next() {
                Tok::Punct('{') => depth += 1,
                Tok::Punct('}') => depth -= 1,
                Tok::Eof => return Err(self.err("unbalanced '{'")),
                _ => {}
            }
        }
        Ok(())
    }

    /// A tensor type that is not quantized: region arguments. (A region's ops would compute
    /// on the expressed values its op passes it, not on storage.)
    fn tensor_type(&mut self) -> PResult<TensorType> {
        let line = self.line();
        let w = self.quantizable_type()?;
        if w.quant.is_some() {
            return Err(Error::unsupported(
                line,
                format!("quantized {} as a region's argument", w.ty),
            ));
        }
        if !w.dynamic.is_static() {
            return Err(Error::unsupported(
                line,
                format!(
                    "dynamic shape in {} as a region's argument",
                    w.dynamic.show(&w.ty)
                ),
            ));
        }
        Ok(w.ty)
    }

    /// A tensor type, quantized or not.
    fn quantizable_type(&mut self) -> PResult<Written> {
        let line = self.line();
        match self.next() {
            Tok::Word(w) if w == "tensor" => {}
            Tok::Word(w) if w.starts_with('!') => {
                return Err(Error::unsupported(line, format!("type {w}")))
            }
            t => {
                return Err(Error::at(
                    line,
                    format!("expected a tensor type, found {t}"),
                ))
            }
        }
        self.expect('<')?;
        // The tokens up to the matching '>'.
        let mut inner = Vec::new();
        let mut depth = 1usize;
        loop {
            let t = self.next();
            match t {
                Tok::Punct('<') => depth += 1,
                Tok::Punct('>') => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                Tok::Eof => return Err(Error::at(line, "unterminated tensor type")),
                _ => {}
            }
            inner.push(t);
        }
        types::tensor_type(&inner, line)
    }

    /// A type with an optional attribute dictionary after it (function signatures).
    fn annotated_type(&mut self) -> PResult<TensorType> {
        let t = self.tensor_type()?;
        if self.is('{') {
            self.skip_braces()?;
        }
        Ok(t)
    }

    /// `annotated_type`, quantized or not.
    fn annotated_quantizable(&mut self) -> PResult<Written> {
        let t = self.quantizable_type()?;
        if self.is('{') {
            self.skip_braces()?;
        }
        Ok(t)
    }

    fn type_list(&mut self) -> PResult<Vec<Written>> {
        self.expect('(')?;
        let mut out = Vec::new();
        if self.eat(')') {
            return Ok(out);
        }
        loop {
            out.push(self.annotated_quantizable()?);
            if self.eat(')') {
                return Ok(out);
            }
            self.expect(',')?;
        }
    }

    /// `(%name: T, ...)`: a function's parameters (`quantized`: they may be of quantized types,
    /// which are their storage types here) or a region's arguments.
    fn typed_args(&mut self, quantized: bool) -> PResult<Vec<(String, TensorType, Dynamic)>> {
        self.expect('(')?;
        let mut out = Vec::new();
        if self.eat(')') {
            return Ok(out);
        }
        loop {
            let name = match self.next() {
                Tok::Value(v) => v,
                t => return Err(self.err(format!("expected an argument, found {t}"))),
            };
            self.expect(':')?;
            let (ty, dynamic) = if quantized {
                let w = self.annotated_quantizable()?;
                (w.ty, w.dynamic)
            } else {
                (self.annotated_type()?, Dynamic::default())
            };
            out.push((name, ty, dynamic));
            if self.eat(')') {
                return Ok(out);
            }
            self.expect(',')?;
        }
    }

    /// A region's arguments (static, as the shapes in a region do not vary).
    fn region_args(&mut self) -> PResult<Vec<(String, TensorType)>> {
        Ok(self
            .typed_args(false)?
            .into_iter()
            .map(|(n, t, _)| (n, t))
            .collect())
    }

    fn func(&mut self) -> PResult<MFunc> {
        self.next();
        let mut public = true;
        if let Tok::Word(w) = self.peek() {
            public = w != "private";
            self.next();
        }
        let name = match self.next() {
            Tok::Symbol(s) => s,
            t => return Err(self.err(format!("expected a function name, found {t}"))),
        };
        let (params, param_dynamic) = self
            .typed_args(true)?
            .into_iter()
            .map(|(n, t, d)| ((n, t), d))
            .unzip();
        if *self.peek() == Tok::Arrow {
            self.next();
            if self.is('(') {
                self.type_list()?;
            } else {
                self.quantizable_type()?;
            }
        }
        if *self.peek() == Tok::Word("attributes".into()) {
            self.next();
            self.skip_braces()?;
        }
        self.expect('{')?;
        let body = self.ops_until_brace()?;
        Ok(MFunc {
            name,
            public,
            params,
            param_dynamic,
            body,
        })
    }

    fn ops_until_brace(&mut self) -> PResult<Vec<Operation>> {
        let mut ops = Vec::new();
        while !self.eat('}') {
            if *self.peek() == Tok::Eof {
                return Err(self.err("missing '}'"));
            }
            ops.push(self.operation()?);
        }
        Ok(ops)
    }

    fn results(&mut self) -> PResult<Vec<String>> {
        let mut names = Vec::new();
        loop {
            let base = match self.next() {
                Tok::Value(v) => v,
                t => return Err(self.err(format!("expected a result name, found {t}"))),
            };
            if self.eat(':') {
                let n: usize = match self.next() {
                    Tok::Word(w) => {
                        w.parse()
                            .ok()
                            .filter(|&n| n <= MAX_RESULTS)
                            .ok_or_else(|| {
                                self.err(format!(
                                    "result count {w} is not a number of at most {MAX_RESULTS}"
                                ))
                            })?
                    }
                    t => return Err(self.err(format!("expected a result count, found {t}"))),
                };
                self.count_results(n)?;
                names.extend((0..n).map(|k| format!("{base}#{k}")));
            } else {
                self.count_results(1)?;
                names.push(base);
            }
            if !self.eat(',') {
                break;
            }
        }
        self.expect('=')?;
        Ok(names)
    }

    fn count_results(&mut self, n: usize) -> PResult<()> {
        self.results += n;
        if self.results > MAX_TOTAL_RESULTS {
            return Err(self.err(format!(
                "more than {MAX_TOTAL_RESULTS} results in the whole text"
            )));
        }
        Ok(())
    }

    /// The operations up to the `}` closing a region, one nesting level deeper.
    fn nested_ops(&mut self) -> PResult<Vec<Operation>> {
        if self.depth >= MAX_NESTING {
            return Err(self.err(format!("regions nest more than {MAX_NESTING} deep")));
        }
        self.depth += 1;
        let ops = self.ops_until_brace();
        self.depth -= 1;
        ops
    }

    fn region(&mut self) -> PResult<Region> {
        self.expect('{')?;
        let mut args = Vec::new();
        if let Tok::Block(_) = self.peek() {
            self.next();
            if self.is('(') {
                args = self.region_args()?;
            }
            self.expect(':')?;
        }
        let ops = self.nested_ops()?;
        Ok(Region { args, ops })
    }

    /// The pretty reduce's body after its types: `reducer(%a0: T, %e0: T) (%a1: U, %e1: U)
    /// { ops }`, one group per operand; its arguments in the generic form's order, the
    /// accumulators first (`a0, a1, e0, e1`).
    fn reducer(&mut self) -> PResult<Region> {
        self.next();
        let mut groups = Vec::new();
        while self.is('(') {
            groups.push(self.region_args()?);
        }
        let args = if groups.iter().all(|g| g.len() == 2) {
            let (accumulators, elements): (Vec<_>, Vec<_>) = groups
                .into_iter()
                .filter_map(|mut g| Some((g.remove(0), g.pop()?)))
                .unzip();
            accumulators.into_iter().chain(elements).collect()
        } else {
            groups.concat()
        };
        self.expect('{')?;
        let ops = self.nested_ops()?;
        Ok(Region { args, ops })
    }

    /// `{key = value, ...}`: values kept as tokens.
    fn attr_dict(&mut self, attrs: &mut Vec<(String, Vec<Tok>)>) -> PResult<()> {
        self.expect('{')?;
        while !self.eat('}') {
            let key = match self.next() {
                Tok::Word(w) => w,
                t => return Err(self.err(format!("expected an attribute name, found {t}"))),
            };
            let mut value = Vec::new();
            if self.eat('=') {
                value = self.attr_value()?;
            }
            // A typed value (`0 : i64`): the type is not needed.
            if self.eat(':') {
                self.attr_value()?;
            }
            attrs.push((key, value));
            self.eat(',');
        }
        Ok(())
    }

    /// Tokens up to the next `,` `}` or `:` outside brackets.
    fn attr_value(&mut self) -> PResult<Vec<Tok>> {
        let mut out = Vec::new();
        let mut depth = 0i32;
        loop {
            let t = self.peek().clone();
            match t {
                Tok::Punct(',') | Tok::Punct('}') | Tok::Punct(':') if depth == 0 => {
                    return Ok(out)
                }
                Tok::Punct('(') | Tok::Punct('[') | Tok::Punct('<') | Tok::Punct('{') => depth += 1,
                Tok::Punct(')') | Tok::Punct(']') | Tok::Punct('>') | Tok::Punct('}') => depth -= 1,
                Tok::Eof => return Err(self.err("unexpected end of input in an attribute")),
                _ => {}
            }
            out.push(self.next());
            // A dictionary value (`window = {...}`) ends with its brace: what follows is the
            // op's own attribute dictionary.
            if depth == 0 && out.first() == Some(&Tok::Punct('{')) {
                return Ok(out);
            }
        }
    }

    fn operation(&mut self) -> PResult<Operation> {
        let line = self.line();
        let results = if let Tok::Value(_) = self.peek() {
            self.results()?
        } else {
            Vec::new()
        };
        let name = match self.next() {
            Tok::Word(w) | Tok::Str(w) => w,
            t => return Err(Error::at(line, format!("expected an operation, found {t}"))),
        };
        let mut op = Operation {
            line,
            name,
            results,
            operands: Vec::new(),
            callee: None,
            attrs: Vec::new(),
            words: Vec::new(),
            regions: Vec::new(),
            bound: Vec::new(),
            operand_types: Vec::new(),
            result_types: Vec::new(),
            operand_quant: Vec::new(),
            result_quant: Vec::new(),
            result_dynamic: Vec::new(),
        };
        // Operands, attributes and words up to the type.
        let mut depth = 0i32;
        loop {
            match self.peek().clone() {
                Tok::Punct(':') if depth == 0 => break,
                Tok::Punct('}') if depth == 0 => return Ok(op),
                Tok::Eof => return Err(Error::at(line, "unexpected end of input")),
                Tok::Punct('(') if *self.peek_at(1) == Tok::Punct('{') => {
                    self.next();
                    loop {
                        op.regions.push(self.region()?);
                        if !self.eat(',') {
                            break;
                        }
                    }
                    self.expect(')')?;
                }
                Tok::Punct('{') if depth == 0 => self.attr_dict(&mut op.attrs)?,
                // The generic form's properties: `<{key = value, ...}>`.
                Tok::Punct('<') if *self.peek_at(1) == Tok::Punct('{') => {
                    self.next();
                    self.attr_dict(&mut op.attrs)?;
                    self.expect('>')?;
                }
                Tok::Word(key) if depth == 0 && *self.peek_at(1) == Tok::Punct('=') => {
                    self.next();
                    self.next();
                    let value = self.attr_value()?;
                    op.attrs.push((key, value));
                }
                // `%iterArg = %0` (the pretty while): a name bound, not an operand.
                Tok::Value(name) if *self.peek_at(1) == Tok::Punct('=') => {
                    self.next();
                    self.next();
                    op.bound.push(name);
                }
                Tok::Value(v) => {
                    self.next();
                    op.operands.push(v);
                }
                Tok::Symbol(s) => {
                    self.next();
                    op.callee = Some(s);
                }
                t => {
                    match t {
                        Tok::Punct('(') | Tok::Punct('[') | Tok::Punct('<') => depth += 1,
                        Tok::Punct(')') | Tok::Punct(']') | Tok::Punct('>') => depth -= 1,
                        _ => {}
                    }
                    op.words.push(self.next());
                }
            }
        }
        self.expect(':')?;
        let (operands, results) = if self.is('(') {
            let operands = self.type_list()?;
            if *self.peek() != Tok::Arrow {
                return Err(self.err(format!("expected '->', found {}", self.peek())));
            }
            self.next();
            let results = if self.is('(') {
                self.type_list()?
            } else {
                vec![self.annotated_quantizable()?]
            };
            (operands, results)
        } else {
            let mut plain = vec![self.quantizable_type()?];
            while self.is(',') && *self.peek_at(1) == Tok::Word("tensor".into()) {
                self.next();
                plain.push(self.quantizable_type()?);
            }
            let results = if *self.peek() == Tok::Arrow {
                // `: T -> T`.
                self.next();
                if self.is('(') {
                    self.type_list()?
                } else {
                    vec![self.annotated_quantizable()?]
                }
            } else {
                plain.last().cloned().into_iter().collect()
            };
            (plain, results)
        };
        (op.operand_types, op.operand_quant) =
            operands.into_iter().map(|w| (w.ty, w.quant)).unzip();
        for w in results {
            op.result_types.push(w.ty);
            op.result_quant.push(w.quant);
            op.result_dynamic.push(w.dynamic);
        }
        // Regions the pretty forms write after the types.
        loop {
            match self.peek() {
                Tok::Word(w) if w == "reducer" => {
                    op.regions.push(self.reducer()?);
                    // `(%x0 init: %i0), (%x1 init: %i1)`: operands first, then initial
                    // values, as the generic form and the types list them.
                    if op.operands.len().is_multiple_of(2) {
                        let (operands, inits): (Vec<_>, Vec<_>) = op
                            .operands
                            .chunks(2)
                            .map(|p| (p[0].clone(), p[1].clone()))
                            .unzip();
                        op.operands = operands.into_iter().chain(inits).collect();
                    }
                }
                Tok::Word(w)
                    if (w == "cond" || w == "do") && *self.peek_at(1) == Tok::Punct('{') =>
                {
                    self.next();
                    self.next();
                    let ops = self.nested_ops()?;
                    op.regions.push(Region {
                        args: Vec::new(),
                        ops,
                    });
                }
                _ => return Ok(op),
            }
        }
    }
}

/// All functions of the text: inside `module` wrappers or at top level.
pub(crate) fn parse_module(src: &str) -> Result<Vec<MFunc>, Error> {
    let mut p = P {
        toks: lex(src)?,
        pos: 0,
        depth: 0,
        results: 0,
    };
    let mut funcs = Vec::new();
    loop {
        match p.peek().clone() {
            Tok::Eof => return Ok(funcs),
            Tok::Word(w) if w == "func.func" => funcs.push(p.func()?),
            Tok::Word(w) if w == "module" => {
                p.next();
                if let Tok::Symbol(_) = p.peek() {
                    p.next();
                }
                if *p.peek() == Tok::Word("attributes".into()) {
                    p.next();
                    p.skip_braces()?;
                }
                p.expect('{')?;
            }
            Tok::Punct('}') => {
                p.next();
            }
            t => return Err(p.err(format!("expected a function, found {t}"))),
        }
    }
}

//! Operation tree → ferrax IR. Calls are inlined; the checks of conformance programs become
//! outputs so that a runner can compare them.

use crate::dense::literal;
use crate::lex::Tok;
use crate::parse::{MFunc, Operation};
use crate::Error;
use ferrax_ir::{
    BinaryOp, CompareOp, DType, DotDims, Func, FuncBuilder, Literal, Op, ReduceOp, Scalar,
    TensorType, UnaryOp, ValueId,
};
use std::collections::HashMap;

/// How a conformance check compares its actual and expected values.
#[derive(Clone, Debug, PartialEq)]
pub enum CheckKind {
    /// Bit-exact (NaNs equal each other).
    Exact,
    /// Between `min` and `max` units in the last place apart (non-finite values that are not
    /// identical are `u64::MAX` apart).
    Ulp { min: u64, max: u64 },
    /// Absolute difference at most this.
    Absolute(f64),
}

/// A check: output `actual` against output `expected` or a constant.
#[derive(Clone, Debug, PartialEq)]
pub struct Check {
    pub kind: CheckKind,
    pub actual: usize,
    pub expected: Expected,
    pub line: usize,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Expected {
    Output(usize),
    Constant(Literal),
}

/// An imported entry point: its program and the checks it makes. The program's outputs are
/// the entry's returned values (the first `returned`), then the values the checks compare.
#[derive(Clone, Debug)]
pub struct Program {
    pub func: Func,
    pub returned: usize,
    pub checks: Vec<Check>,
}

pub(crate) struct Importer<'a> {
    funcs: HashMap<&'a str, &'a MFunc>,
    b: FuncBuilder,
    constants: HashMap<ValueId, Literal>,
    outputs: Vec<ValueId>,
    checks: Vec<Check>,
    /// Calls to these functions become parameters instead of being inlined.
    external: Vec<String>,
    external_params: Vec<ValueId>,
}

type Env = HashMap<String, ValueId>;

fn ints(tokens: &[Tok]) -> Vec<i64> {
    tokens
        .iter()
        .filter_map(|t| match t {
            Tok::Word(w) => w.parse().ok(),
            _ => None,
        })
        .collect()
}

fn usizes(tokens: &[Tok], line: usize) -> Result<Vec<usize>, Error> {
    ints(tokens)
        .into_iter()
        .map(|v| usize::try_from(v).map_err(|_| Error::at(line, format!("negative index {v}"))))
        .collect()
}

/// `[a] x [b]` as two lists.
fn pair(tokens: &[Tok], line: usize) -> Result<(Vec<usize>, Vec<usize>), Error> {
    match tokens.iter().position(|t| *t == Tok::Word("x".into())) {
        Some(k) => Ok((usizes(&tokens[..k], line)?, usizes(&tokens[k + 1..], line)?)),
        None => Err(Error::at(
            line,
            "expected dimensions of the form [..] x [..]",
        )),
    }
}

/// `key = [..]` inside an attribute's tokens (`#stablehlo.dot<...>` style).
fn nested_list(tokens: &[Tok], key: &str) -> Vec<i64> {
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

fn unary(name: &str) -> Option<UnaryOp> {
    Some(match name {
        "negate" => UnaryOp::Neg,
        "abs" => UnaryOp::Abs,
        "sign" => UnaryOp::Sign,
        "floor" => UnaryOp::Floor,
        "ceil" => UnaryOp::Ceil,
        "round_nearest_afz" => UnaryOp::Round,
        "round_nearest_even" => UnaryOp::RoundEven,
        "exponential" => UnaryOp::Exp,
        "exponential_minus_one" => UnaryOp::Expm1,
        "log" => UnaryOp::Log,
        "log_plus_one" => UnaryOp::Log1p,
        "sqrt" => UnaryOp::Sqrt,
        "rsqrt" => UnaryOp::Rsqrt,
        "tanh" => UnaryOp::Tanh,
        "logistic" => UnaryOp::Logistic,
        "sine" => UnaryOp::Sin,
        "cosine" => UnaryOp::Cos,
        "not" => UnaryOp::Not,
        _ => return None,
    })
}

/// The binary op for `name` on `dtype`: on booleans, arithmetic is logic (`add` is `or`).
fn binary(name: &str, dtype: DType) -> Option<BinaryOp> {
    let op = match name {
        "add" => BinaryOp::Add,
        "subtract" => BinaryOp::Sub,
        "multiply" => BinaryOp::Mul,
        "divide" => BinaryOp::Div,
        "remainder" => BinaryOp::Rem,
        "power" => BinaryOp::Pow,
        "maximum" => BinaryOp::Max,
        "minimum" => BinaryOp::Min,
        "and" => BinaryOp::And,
        "or" => BinaryOp::Or,
        "xor" => BinaryOp::Xor,
        _ => return None,
    };
    if dtype != DType::Bool {
        return Some(op);
    }
    Some(match op {
        BinaryOp::Add | BinaryOp::Max => BinaryOp::Or,
        BinaryOp::Mul | BinaryOp::Min => BinaryOp::And,
        BinaryOp::Sub => BinaryOp::Xor,
        other => other,
    })
}

fn direction(words: &[Tok]) -> Option<CompareOp> {
    words.iter().find_map(|t| match t {
        Tok::Word(w) => Some(match w.as_str() {
            "EQ" => CompareOp::Eq,
            "NE" => CompareOp::Ne,
            "LT" => CompareOp::Lt,
            "LE" => CompareOp::Le,
            "GT" => CompareOp::Gt,
            "GE" => CompareOp::Ge,
            _ => return None,
        }),
        _ => None,
    })
}

impl<'a> Importer<'a> {
    pub(crate) fn new(funcs: &'a [MFunc], name: &str, external: &[&str]) -> Importer<'a> {
        Importer {
            funcs: funcs.iter().map(|f| (f.name.as_str(), f)).collect(),
            b: FuncBuilder::new(name),
            constants: HashMap::new(),
            outputs: Vec::new(),
            checks: Vec::new(),
            external: external.iter().map(|s| s.to_string()).collect(),
            external_params: Vec::new(),
        }
    }

    /// Imports `entry`: its parameters, then the results of calls to external functions, become
    /// the parameters of the program; its returned values and checked values its outputs.
    pub(crate) fn import(mut self, entry: &MFunc) -> Result<Program, Error> {
        let mut env = Env::new();
        for (name, ty) in &entry.params {
            env.insert(name.clone(), self.b.param(ty.clone()));
        }
        for op in &entry.body {
            let external = matches!(op.name.as_str(), "call" | "func.call")
                && op
                    .callee
                    .as_ref()
                    .is_some_and(|c| self.external.contains(c));
            if external {
                for (name, ty) in op.results.iter().zip(&op.result_types) {
                    let p = self.b.param(ty.clone());
                    self.external_params.push(p);
                    env.insert(name.clone(), p);
                }
            }
        }
        let returned = self.body(&entry.body, &mut env, 0)?;
        let mut outputs = returned;
        outputs.extend(self.outputs.iter().copied());
        let returned_count = outputs.len() - self.outputs.len();
        let checks = self
            .checks
            .into_iter()
            .map(|mut c| {
                c.actual += returned_count;
                if let Expected::Output(k) = &mut c.expected {
                    *k += returned_count;
                }
                c
            })
            .collect();
        Ok(Program {
            func: self.b.finish(outputs),
            returned: returned_count,
            checks,
        })
    }

    fn push(&mut self, op: Op, args: &[ValueId], line: usize) -> Result<ValueId, Error> {
        self.b
            .push(op, args)
            .map_err(|e| Error::at(line, e.to_string()))
    }

    fn output(&mut self, v: ValueId) -> usize {
        self.outputs.push(v);
        self.outputs.len() - 1
    }

    /// Emits `ops`; returns the values of their `return`.
    fn body(
        &mut self,
        ops: &[Operation],
        env: &mut Env,
        depth: usize,
    ) -> Result<Vec<ValueId>, Error> {
        if depth > 64 {
            return Err(Error::at(
                ops.first().map_or(0, |o| o.line),
                "calls nest too deeply (recursion?)",
            ));
        }
        for op in ops {
            let args = op
                .operands
                .iter()
                .map(|o| {
                    env.get(o)
                        .copied()
                        .ok_or_else(|| Error::at(op.line, format!("%{o} is not defined")))
                })
                .collect::<Result<Vec<_>, _>>()?;
            let short = op.name.strip_prefix("stablehlo.").unwrap_or(&op.name);
            match short {
                "return" | "func.return" => return Ok(args),
                "call" | "func.call" => {
                    let callee = op.callee.clone().unwrap_or_default();
                    if self.external.contains(&callee) && depth == 0 {
                        continue;
                    }
                    let f = *self.funcs.get(callee.as_str()).ok_or_else(|| {
                        Error::at(op.line, format!("call of unknown function @{callee}"))
                    })?;
                    let mut inner = Env::new();
                    for ((name, _), v) in f.params.iter().zip(&args) {
                        inner.insert(name.clone(), *v);
                    }
                    let results = self.body(&f.body, &mut inner, depth + 1)?;
                    for (name, v) in op.results.iter().zip(results) {
                        env.insert(name.clone(), v);
                    }
                }
                _ if short.starts_with("check.")
                    || op
                        .callee
                        .as_deref()
                        .is_some_and(|c| c.starts_with("check.")) =>
                {
                    self.check(op, &args)?;
                }
                _ => {
                    let v = self.simple(short, op, &args)?;
                    if let Some(name) = op.results.first() {
                        env.insert(name.clone(), v);
                    }
                }
            }
        }
        Ok(Vec::new())
    }

    fn check(&mut self, op: &Operation, args: &[ValueId]) -> Result<(), Error> {
        let which = op
            .callee
            .clone()
            .filter(|c| c.starts_with("check."))
            .unwrap_or_else(|| op.name.clone());
        let kind = match which.as_str() {
            "check.expect_eq" | "check.expect_eq_const" => CheckKind::Exact,
            "check.expect_close" => {
                let bound = |key: &str| {
                    op.attr(&[key]).and_then(|t| match t.first() {
                        Some(Tok::Word(w)) => w.parse::<u64>().ok(),
                        _ => None,
                    })
                };
                CheckKind::Ulp {
                    min: bound("min_ulp_difference").unwrap_or(0),
                    max: bound("max_ulp_difference").unwrap_or(3),
                }
            }
            "check.expect_almost_eq" | "check.expect_almost_eq_const" => CheckKind::Absolute(1e-3),
            other => return Err(Error::unsupported(op.line, format!("check {other}"))),
        };
        let Some(&actual) = args.first() else {
            return Err(Error::at(op.line, "a check needs a value"));
        };
        let expected = if which.ends_with("_const") {
            let ty = op
                .operand_types
                .last()
                .cloned()
                .ok_or_else(|| Error::at(op.line, "a constant check needs a type"))?;
            Expected::Constant(literal(&op.words, &ty, op.line)?)
        } else {
            let &e = args
                .get(1)
                .ok_or_else(|| Error::at(op.line, "a check needs an expected value"))?;
            Expected::Output(self.output(e))
        };
        let actual = self.output(actual);
        self.checks.push(Check {
            kind,
            actual,
            expected,
            line: op.line,
        });
        Ok(())
    }

    fn result_type(&self, op: &Operation) -> Result<TensorType, Error> {
        op.result_types
            .first()
            .cloned()
            .ok_or_else(|| Error::at(op.line, format!("{} needs a result type", op.name)))
    }

    /// One StableHLO op with one result.
    fn simple(&mut self, short: &str, op: &Operation, args: &[ValueId]) -> Result<ValueId, Error> {
        let line = op.line;
        let ty = self.result_type(op)?;
        let arg_dtype = args
            .first()
            .and_then(|&a| self.b.value_type(a))
            .map_or(ty.dtype, |t| t.dtype);
        if let Some(u) = unary(short) {
            return self.push(Op::Unary(u), args, line);
        }
        if let Some(b) = binary(short, arg_dtype) {
            return self.push(Op::Binary(b), args, line);
        }
        let attr = |keys: &[&str]| -> Result<&[Tok], Error> {
            op.attr(keys).ok_or_else(|| {
                Error::at(line, format!("{} needs the attribute {}", op.name, keys[0]))
            })
        };
        let new = match short {
            "constant" => {
                let lit = literal(&op.words, &ty, line)?;
                let v = self.push(Op::Constant(lit.clone()), &[], line)?;
                self.constants.insert(v, lit);
                return Ok(v);
            }
            "compare" => {
                let dir = direction(&op.words)
                    .or_else(|| op.attr(&["comparison_direction"]).and_then(direction))
                    .ok_or_else(|| Error::at(line, "compare needs a direction"))?;
                Op::Compare(dir)
            }
            "select" => Op::Select,
            "clamp" => Op::Clamp,
            "convert" => Op::Convert { to: ty.dtype },
            "broadcast_in_dim" => Op::BroadcastInDim {
                shape: ty.shape.clone(),
                dims: usizes(attr(&["dims", "broadcast_dimensions"])?, line)?,
            },
            "reshape" => Op::Reshape {
                shape: ty.shape.clone(),
            },
            "transpose" => Op::Transpose {
                perm: usizes(attr(&["dims", "permutation"])?, line)?,
            },
            "concatenate" => Op::Concatenate {
                axis: usizes(attr(&["dim", "dimension"])?, line)?
                    .first()
                    .copied()
                    .unwrap_or(0),
            },
            "iota" => Op::Iota {
                dtype: ty.dtype,
                shape: ty.shape.clone(),
                dim: usizes(attr(&["dim", "iota_dimension"])?, line)?
                    .first()
                    .copied()
                    .unwrap_or(0),
            },
            "pad" => Op::Pad {
                low: ints(attr(&["low", "edge_padding_low"])?),
                high: ints(attr(&["high", "edge_padding_high"])?),
                interior: usizes(attr(&["interior", "interior_padding"])?, line)?,
            },
            "slice" => Self::slice(op)?,
            "dot_general" => return self.dot_general(op, args, &ty),
            "reduce" => return self.reduce(op, args, &ty),
            other => return Err(Error::unsupported(line, format!("op stablehlo.{other}"))),
        };
        self.push(new, args, line)
    }

    fn slice(op: &Operation) -> Result<Op, Error> {
        let line = op.line;
        if let Some(start) = op.attr(&["start_indices"]) {
            let limit = op
                .attr(&["limit_indices"])
                .ok_or_else(|| Error::at(line, "slice needs limit_indices"))?;
            let rank = usizes(start, line)?.len();
            let strides = match op.attr(&["strides"]) {
                Some(s) => usizes(s, line)?,
                None => vec![1; rank],
            };
            return Ok(Op::Slice {
                start: usizes(start, line)?,
                limit: usizes(limit, line)?,
                strides,
            });
        }
        // Pretty form: `[a:b, c:d:s]`.
        let (mut start, mut limit, mut strides) = (Vec::new(), Vec::new(), Vec::new());
        let mut current: Vec<usize> = Vec::new();
        let mut flush = |cur: &mut Vec<usize>| {
            if !cur.is_empty() {
                start.push(cur[0]);
                limit.push(cur.get(1).copied().unwrap_or(cur[0] + 1));
                strides.push(cur.get(2).copied().unwrap_or(1));
                cur.clear();
            }
        };
        for t in &op.words {
            match t {
                Tok::Word(w) => current.push(
                    w.parse()
                        .map_err(|_| Error::at(line, format!("bad slice bound {w}")))?,
                ),
                Tok::Punct(',') | Tok::Punct(']') => flush(&mut current),
                _ => {}
            }
        }
        flush(&mut current);
        Ok(Op::Slice {
            start,
            limit,
            strides,
        })
    }

    fn dot_general(
        &mut self,
        op: &Operation,
        args: &[ValueId],
        ty: &TensorType,
    ) -> Result<ValueId, Error> {
        let line = op.line;
        let dims = if let Some(numbers) = op.attr(&["dot_dimension_numbers"]) {
            let get = |k| {
                nested_list(numbers, k)
                    .into_iter()
                    .map(|v| v as usize)
                    .collect()
            };
            DotDims {
                lhs_batch: get("lhs_batching_dimensions"),
                rhs_batch: get("rhs_batching_dimensions"),
                lhs_contract: get("lhs_contracting_dimensions"),
                rhs_contract: get("rhs_contracting_dimensions"),
            }
        } else {
            let (lhs_batch, rhs_batch) = match op.attr(&["batching_dims"]) {
                Some(t) => pair(t, line)?,
                None => (Vec::new(), Vec::new()),
            };
            let (lhs_contract, rhs_contract) = match op.attr(&["contracting_dims"]) {
                Some(t) => pair(t, line)?,
                None => (Vec::new(), Vec::new()),
            };
            DotDims {
                lhs_batch,
                rhs_batch,
                lhs_contract,
                rhs_contract,
            }
        };
        // Mixed precision: compute in the result type.
        let mut operands = Vec::with_capacity(2);
        for &a in args {
            let dtype = self.b.value_type(a).map(|t| t.dtype);
            operands.push(if dtype == Some(ty.dtype) {
                a
            } else {
                self.push(Op::Convert { to: ty.dtype }, &[a], line)?
            });
        }
        self.push(Op::DotGeneral(dims), &operands, line)
    }

    fn reduce(
        &mut self,
        op: &Operation,
        args: &[ValueId],
        ty: &TensorType,
    ) -> Result<ValueId, Error> {
        let line = op.line;
        let [x, init] = args else {
            return Err(Error::unsupported(
                line,
                "reduce over several operands".to_string(),
            ));
        };
        let body = match op
            .words
            .iter()
            .position(|t| *t == Tok::Word("applies".into()))
        {
            Some(k) => match op.words.get(k + 1) {
                Some(Tok::Word(w)) => w.clone(),
                _ => return Err(Error::at(line, "reduce: expected the applied op")),
            },
            None => {
                let region = op
                    .regions
                    .first()
                    .ok_or_else(|| Error::at(line, "reduce needs a body"))?;
                match region.ops.as_slice() {
                    [combine, ret]
                        if matches!(ret.name.as_str(), "stablehlo.return" | "return")
                            && combine.operands.len() == 2
                            && region
                                .args
                                .iter()
                                .all(|(a, _)| combine.operands.contains(a)) =>
                    {
                        combine.name.clone()
                    }
                    _ => {
                        return Err(Error::unsupported(
                            line,
                            "reduce with a body other than one add/multiply/maximum/minimum"
                                .to_string(),
                        ))
                    }
                }
            }
        };
        let short = body.strip_prefix("stablehlo.").unwrap_or(&body);
        let (reduce_op, combine) = match (short, ty.dtype == DType::Bool) {
            ("add", false) => (ReduceOp::Sum, BinaryOp::Add),
            ("multiply", false) => (ReduceOp::Prod, BinaryOp::Mul),
            ("maximum", false) => (ReduceOp::Max, BinaryOp::Max),
            ("minimum", false) => (ReduceOp::Min, BinaryOp::Min),
            ("add" | "maximum" | "or", true) => (ReduceOp::Max, BinaryOp::Or),
            ("multiply" | "minimum" | "and", true) => (ReduceOp::Min, BinaryOp::And),
            _ => return Err(Error::unsupported(line, format!("reduce with body {body}"))),
        };
        let mut axes = usizes(op.attr(&["dimensions"]).unwrap_or(&[]), line)?;
        axes.sort_unstable();
        let reduced = self.push(
            Op::Reduce {
                op: reduce_op,
                axes,
            },
            &[*x],
            line,
        )?;
        if self.is_identity(*init, reduce_op) {
            return Ok(reduced);
        }
        let init_b = self.push(
            Op::BroadcastInDim {
                shape: ty.shape.clone(),
                dims: Vec::new(),
            },
            &[*init],
            line,
        )?;
        self.push(Op::Binary(combine), &[reduced, init_b], line)
    }

    /// Whether `v` is a constant equal to the identity of `r` (then it need not be applied).
    fn is_identity(&self, v: ValueId, r: ReduceOp) -> bool {
        let Some(lit) = self.constants.get(&v) else {
            return false;
        };
        if !lit.is_splat() {
            return false;
        }
        let s = lit.data.get(0);
        let d = s.dtype();
        let identity = match (r, d) {
            (ReduceOp::Sum, _) => Scalar::zero(d),
            (ReduceOp::Prod, _) => Scalar::from_f64(d, 1.0),
            (ReduceOp::Max, DType::Bool) => Scalar::Bool(false),
            (ReduceOp::Min, DType::Bool) => Scalar::Bool(true),
            (ReduceOp::Max, DType::I32) => Scalar::I32(i32::MIN),
            (ReduceOp::Max, DType::I64) => Scalar::I64(i64::MIN),
            (ReduceOp::Max, DType::U8) => Scalar::U8(0),
            (ReduceOp::Min, DType::I32) => Scalar::I32(i32::MAX),
            (ReduceOp::Min, DType::I64) => Scalar::I64(i64::MAX),
            (ReduceOp::Min, DType::U8) => Scalar::U8(u8::MAX),
            (ReduceOp::Max, _) => Scalar::from_f64(d, f64::NEG_INFINITY),
            (ReduceOp::Min, _) => Scalar::from_f64(d, f64::INFINITY),
        };
        s == identity
    }
}

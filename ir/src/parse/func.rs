//! The function grammar: `func @name(params) -> (types) { instructions return values }`.
//! Value names resolve to [`ValueId`]s here, and each instruction's declared type is
//! checked against the type its op and operands give.
//!
//! An attribute may hold whole functions (`custom_vjp`, `while`, `cond`), so reading one
//! recurses; nesting is limited to [`MAX_DEPTH`] levels so that no input can overflow the
//! stack.

use super::attrs::Attrs;
use super::cursor::{PResult, Parser};
use super::lex::Tok;
use super::op::{build_op, ConstantText};
use crate::{infer_type, Func, Instr, TensorType, ValueId};
use std::collections::HashMap;

/// The value names defined so far, each with its value.
type Names = HashMap<String, ValueId>;

/// How deeply functions may nest, the top-level one included.
pub(super) const MAX_DEPTH: usize = 64;

/// One function, from `func` to its closing `}`, at most [`MAX_DEPTH`] levels deep.
pub(super) fn parse_one(p: &mut Parser) -> PResult<Func> {
    if p.depth >= MAX_DEPTH {
        return Err(p.error(format!("functions nest more than {MAX_DEPTH} levels deep")));
    }
    p.depth += 1;
    let func = function(p);
    p.depth -= 1;
    func
}

/// The value numbered `n`, if the numbering reaches it.
fn value_id(p: &Parser, n: usize, at: usize) -> PResult<ValueId> {
    u32::try_from(n)
        .map(ValueId)
        .map_err(|_| p.error_at(at, format!("more than {} values", u32::MAX)))
}

fn function(p: &mut Parser) -> PResult<Func> {
    p.keyword("func")?;
    let at = p.pos;
    let name = match p.next() {
        Tok::Global(g) => g,
        t => return Err(p.error_at(at, format!("expected '@name', found {t}"))),
    };
    let mut names = Names::new();
    let params = params(p, &mut names)?;
    let at = p.pos;
    if p.next() != Tok::Arrow {
        return Err(p.error_at(at, "expected '->'"));
    }
    let result_types = result_types(p)?;
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
                let id = value_id(p, func.num_values(), at)?;
                let instr = instruction(p, &func, &names)?;
                func.body.push(instr);
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
    returns(p, &mut func, &names, &result_types)?;
    Ok(func)
}

/// `(%a: type, ...)`: the parameters' types, their names added to `names`.
fn params(p: &mut Parser, names: &mut Names) -> PResult<Vec<TensorType>> {
    let mut params = Vec::new();
    p.expect('(')?;
    if p.eat(')') {
        return Ok(params);
    }
    loop {
        let at = p.pos;
        let v = p.value_name()?;
        p.expect(':')?;
        let ty = p.bounded_type("parameter type", at)?;
        if names
            .insert(v.clone(), value_id(p, params.len(), at)?)
            .is_some()
        {
            return Err(p.error_at(at, format!("%{v} is defined twice")));
        }
        params.push(ty);
        if p.eat(')') {
            return Ok(params);
        }
        p.expect(',')?;
    }
}

/// `(type, ...)`: the declared result types.
fn result_types(p: &mut Parser) -> PResult<Vec<TensorType>> {
    p.expect('(')?;
    let mut result_types = Vec::new();
    if p.eat(')') {
        return Ok(result_types);
    }
    loop {
        let at = p.pos;
        result_types.push(p.bounded_type("result type", at)?);
        if p.eat(')') {
            return Ok(result_types);
        }
        p.expect(',')?;
    }
}

/// What follows `%v` in `%v = op operands, attrs : type`, type-checked against `func` so far.
fn instruction(p: &mut Parser, func: &Func, names: &Names) -> PResult<Instr> {
    p.expect('=')?;
    let op_pos = p.pos;
    let op_name = p.word("an op name")?;
    let (args, attrs, literal) = if op_name == "constant" {
        let at = p.pos;
        let (words, splat) = p.literal_words()?;
        let text = ConstantText { words, splat, at };
        (Vec::new(), Attrs::new(op_pos), Some(text))
    } else {
        let (args, attrs) = operands(p, names, op_pos)?;
        (args, attrs, None)
    };
    p.expect(':')?;
    let ty = p.tensor_type()?;
    let op = build_op(p, &op_name, attrs, literal, &ty)?;
    let arg_types: Vec<&TensorType> = args.iter().filter_map(|&a| func.value_type(a)).collect();
    let inferred = infer_type(&op, &arg_types).map_err(|e| p.error_at(op_pos, e.to_string()))?;
    if inferred != ty {
        return Err(p.error_at(
            op_pos,
            format!("{op_name} declares type {ty} but its operands give {inferred}"),
        ));
    }
    Ok(Instr { op, args, ty })
}

/// The comma-separated operands (`%a`) and attributes (`key=value`) of the op at token
/// `op_pos`, up to its `:`.
fn operands(p: &mut Parser, names: &Names, op_pos: usize) -> PResult<(Vec<ValueId>, Attrs)> {
    let mut args = Vec::new();
    let mut attrs = Attrs::new(op_pos);
    if *p.peek() == Tok::Punct(':') {
        return Ok((args, attrs));
    }
    loop {
        let item_at = p.pos;
        match p.next() {
            Tok::Value(a) => {
                let id = names
                    .get(&a)
                    .ok_or_else(|| p.error_at(item_at, format!("%{a} is not defined")))?;
                args.push(*id);
            }
            Tok::Word(k) => {
                p.expect('=')?;
                let val = p.attr_value()?;
                attrs.add(p, k, val, item_at)?;
            }
            t => {
                return Err(p.error_at(
                    item_at,
                    format!("expected an operand or attribute, found {t}"),
                ))
            }
        }
        if !p.eat(',') {
            return Ok((args, attrs));
        }
    }
}

/// The values after `return`, up to the closing `}`: they become `func`'s outputs, whose
/// types must be the declared `result_types`.
fn returns(
    p: &mut Parser,
    func: &mut Func,
    names: &Names,
    result_types: &[TensorType],
) -> PResult<()> {
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
    Ok(())
}

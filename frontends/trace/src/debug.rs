//! `jax.debug`: host functions called on the values a traced function computes, where it
//! computes them. Inside `jit`, `grad`, `vmap` and the loops of `lax`, a callback is staged
//! into the program (a `debug_callback` instruction) and runs every time that point of the
//! program runs, as JAX's do: each time a compiled function is called, once per loop
//! iteration, once per example under `vmap` (in order), on the primal values under `grad` and
//! `jvp`. The callbacks of one function run in the order they were traced. Outside any trace
//! a callback runs at once.
//!
//! A staged callback is this process's: a program that holds one cannot become an AOT
//! artifact, and `jit` does not keep it in the persistent compile cache.

use crate::tensor::Tensor;
use crate::trace_ctx::current_trace;
use crate::{Error, Result};
use ferrax_ir::{scalar_text, Op};
use ferrax_runtime::callbacks::{self, HostCallback};
use ferrax_runtime::Array;
use std::panic::Location;
use std::sync::Arc;

/// Calls `f` on the values of `args` where this call is in the traced function
/// (`jax.debug.callback`). An operand that failed is the error; inside a trace, the error is
/// also the trace's.
#[track_caller]
pub fn callback(f: impl Fn(&[Array]) + Send + Sync + 'static, args: &[&Tensor]) -> Result<()> {
    let f = Arc::new(f);
    let staged = f.clone();
    call_back(
        Location::caller(),
        args,
        move || {
            callbacks::register(Arc::new(move |values: &[Array]| {
                staged(values);
                Ok(Vec::new())
            }))
        },
        move |values| {
            f(values);
            Ok(())
        },
    )
}

/// Prints `format` with each `{}` replaced by the next operand's value, `{k}` by operand `k`'s
/// (`{{` and `}}` are braces), followed by a newline, to standard output (`jax.debug.print`).
/// A format that names an operand `args` lacks, or a brace that opens no placeholder, is an
/// error before anything runs.
#[track_caller]
pub fn print(format: &str, args: &[&Tensor]) -> Result<()> {
    let location = Location::caller();
    let pieces = parse(format, args.len()).map_err(|message| Error::Trace {
        location,
        message: format!("debug::print({format:?}): {message}"),
    })?;
    let staged = pieces.clone();
    call_back(
        location,
        args,
        || {
            // One function per format string, however often it is traced.
            callbacks::register_keyed(&format!("debug::print {format}"), move || {
                Arc::new(move |values: &[Array]| {
                    println!("{}", render(&staged, values));
                    Ok(Vec::new())
                }) as HostCallback
            })
        },
        move |values| {
            println!("{}", render(&pieces, values));
            Ok(())
        },
    )
}

/// `format` with its placeholders replaced by `values`, as [`print`] prints it: a value
/// as its elements in nested brackets, one level per dimension.
pub fn format(format: &str, values: &[Array]) -> Result<String> {
    let pieces = parse(format, values.len()).map_err(|message| Error::Tree {
        expected: "a format whose placeholders name the values given".into(),
        found: format!("{format:?}: {message}"),
    })?;
    Ok(render(&pieces, values))
}

/// Stages `op` in the innermost running trace, or runs `eager` on the operands' data.
fn call_back(
    location: &'static Location<'static>,
    args: &[&Tensor],
    register: impl FnOnce() -> u64,
    eager: impl FnOnce(&[Array]) -> std::result::Result<(), String>,
) -> Result<()> {
    // A failed operand is the error; inside a trace, the trace's too, as the callback has no
    // result to carry it.
    match current_trace() {
        Some(ctx) => {
            let op = Op::DebugCallback {
                callback: register(),
            };
            ctx.push_effect(op, args, location).map(|_| ())
        }
        None => {
            let values = args
                .iter()
                .map(|a| a.to_array())
                .collect::<Result<Vec<_>>>()?;
            eager(&values).map_err(|message| Error::Trace { location, message })
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
enum Piece {
    Text(String),
    Value(usize),
}

/// The pieces of `format` for `count` operands.
fn parse(format: &str, count: usize) -> std::result::Result<Vec<Piece>, String> {
    let mut pieces = Vec::new();
    let mut text = String::new();
    let mut next = 0;
    let mut chars = format.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '{' if chars.peek() == Some(&'{') => {
                chars.next();
                text.push('{');
            }
            '}' if chars.peek() == Some(&'}') => {
                chars.next();
                text.push('}');
            }
            '{' => {
                let mut inner = String::new();
                loop {
                    match chars.next() {
                        Some('}') => break,
                        Some(c) => inner.push(c),
                        None => return Err("a '{' is not closed".into()),
                    }
                }
                let k = if inner.is_empty() {
                    next += 1;
                    next - 1
                } else {
                    inner.trim().parse::<usize>().map_err(|_| {
                        format!("placeholder {{{inner}}} is neither {{}} nor an operand's position")
                    })?
                };
                if k >= count {
                    return Err(format!(
                        "placeholder {} names operand {k}, and there are {count}",
                        if inner.is_empty() {
                            "{}".into()
                        } else {
                            format!("{{{inner}}}")
                        }
                    ));
                }
                pieces.push(Piece::Text(std::mem::take(&mut text)));
                pieces.push(Piece::Value(k));
            }
            '}' => return Err("a '}' closes no placeholder (write '}}' for a brace)".into()),
            c => text.push(c),
        }
    }
    pieces.push(Piece::Text(text));
    Ok(pieces)
}

fn render(pieces: &[Piece], values: &[Array]) -> String {
    let mut out = String::new();
    for piece in pieces {
        match piece {
            Piece::Text(t) => out.push_str(t),
            Piece::Value(k) => match values.get(*k) {
                Some(v) => write_value(&mut out, v),
                None => out.push_str("<missing>"),
            },
        }
    }
    out
}

/// `value`'s elements nested by dimension: `2.5`, `[1, 2]`, `[[1, 2], [3, 4]]`, `[]`.
fn write_value(out: &mut String, value: &Array) {
    let dims = value.shape().dims();
    let data = value.elements();
    if dims.is_empty() {
        out.push_str(&scalar_text(data.get(0)));
        return;
    }
    // Row-major order: before element `i`, open a bracket for each dimension whose index
    // starts there; after it, close each that ends there.
    let numel = value.ty().numel();
    if numel == 0 {
        out.push_str(&"[".repeat(dims.len()));
        out.push_str(&"]".repeat(dims.len()));
        return;
    }
    for i in 0..numel {
        let (mut stride, mut opens) = (1, 0);
        for &d in dims.iter().rev() {
            stride *= d;
            if i % stride == 0 {
                opens += 1;
            }
        }
        if i > 0 {
            out.push_str(", ");
        }
        out.push_str(&"[".repeat(opens));
        out.push_str(&scalar_text(data.get(i)));
        let (mut stride, mut closes) = (1, 0);
        for &d in dims.iter().rev() {
            stride *= d;
            if (i + 1) % stride == 0 {
                closes += 1;
            }
        }
        out.push_str(&"]".repeat(closes));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_parse_and_render() {
        let v = Array::from_vec([2, 2], vec![1i32, 2, 3, 4]).expect("array");
        let s = Array::scalar(2.5f32);
        let pieces = parse("a={} b={0} {{c}} {1}", 2).expect("format");
        assert_eq!(
            render(&pieces, &[v, s]),
            "a=[[1, 2], [3, 4]] b=[[1, 2], [3, 4]] {c} 2.5"
        );
        let empty = Array::from_vec([0, 3], Vec::<f32>::new()).expect("array");
        assert_eq!(render(&parse("{}", 1).expect("format"), &[empty]), "[[]]");
        for bad in ["{", "}", "{} {}", "{x}", "{2}"] {
            assert!(parse(bad, 1).is_err(), "{bad}");
        }
    }
}

//! Reading a PTX module: its entries' parameters, declared registers, shared variables,
//! `.maxntid` bounds and `.reqntid` counts, labels and instructions. What `ptxas` or the driver would refuse to load
//! (malformed text, a register the entry does not declare) is an [`EmulatorError`].

use crate::EmulatorError;
use std::collections::HashMap;

#[derive(Clone, Debug)]
pub(crate) enum Operand {
    Reg(usize),
    Imm(u64),
    Special(String),
    /// A `.shared` variable's address, or a parameter's name.
    Symbol(String),
    /// `[reg + offset]` or `[symbol + offset]`.
    Address(Box<Operand>, i64),
    Vector(Vec<usize>),
    Label(String),
}

#[derive(Clone, Debug)]
pub(crate) struct Instr {
    /// Register and whether the predicate is negated.
    pub(crate) guard: Option<(usize, bool)>,
    /// The opcode split at its dots: `["add", "rn", "f32"]`.
    pub(crate) op: Vec<String>,
    pub(crate) args: Vec<Operand>,
    pub(crate) line: String,
}

/// One `.entry` of a module, ready to launch.
#[derive(Debug)]
pub struct Entry {
    pub(crate) params: Vec<String>,
    pub(crate) registers: usize,
    /// Shared variables: offset in the block's shared memory, bytes.
    pub(crate) shared: HashMap<String, (u64, u64)>,
    pub(crate) shared_bytes: u64,
    /// The `.maxntid` bound on a block's threads, where declared.
    pub(crate) max_threads: Option<u32>,
    /// The `.reqntid` count a block's threads must be, where declared.
    pub(crate) required_threads: Option<u32>,
    pub(crate) instrs: Vec<Instr>,
    pub(crate) labels: HashMap<String, usize>,
}

/// The entries of a PTX module.
#[derive(Debug)]
pub struct Module {
    entries: HashMap<String, Entry>,
}

impl Module {
    /// Reads the entries of `ptx`.
    pub fn parse(ptx: &str) -> Result<Module, EmulatorError> {
        let mut entries = HashMap::new();
        let mut lines = ptx.lines();
        while let Some(line) = lines.next() {
            let Some(rest) = line.trim().strip_prefix(".visible .entry ") else {
                continue;
            };
            let name = rest.trim_end_matches('(').to_string();
            let mut params = Vec::new();
            for l in lines.by_ref() {
                let l = l.trim();
                if l.starts_with(')') {
                    break;
                }
                if let Some(p) = l.strip_prefix(".param .u64 ") {
                    params.push(p.trim_end_matches(',').to_string());
                }
            }
            let body = parse_body(&name, &mut lines)?;
            entries.insert(
                name,
                Entry {
                    params,
                    registers: body.registers,
                    shared: body.shared,
                    shared_bytes: body.shared_bytes,
                    max_threads: body.max_threads,
                    required_threads: body.required_threads,
                    instrs: body.instrs,
                    labels: body.labels,
                },
            );
        }
        Ok(Module { entries })
    }

    /// The entry called `name`.
    pub fn entry(&self, name: &str) -> Result<&Entry, EmulatorError> {
        self.entries
            .get(name)
            .ok_or_else(|| EmulatorError::NoEntry(name.to_string()))
    }
}

/// What an entry's body declares and does.
struct Body {
    registers: usize,
    shared: HashMap<String, (u64, u64)>,
    shared_bytes: u64,
    max_threads: Option<u32>,
    required_threads: Option<u32>,
    instrs: Vec<Instr>,
    labels: HashMap<String, usize>,
}

fn malformed(line: &str, what: impl Into<String>) -> EmulatorError {
    EmulatorError::Parse {
        line: line.to_string(),
        what: what.into(),
    }
}

/// The body of entry `name`, up to its closing brace.
fn parse_body<'a>(
    name: &str,
    lines: &mut impl Iterator<Item = &'a str>,
) -> Result<Body, EmulatorError> {
    let mut regs: HashMap<String, usize> = HashMap::new();
    let mut declared: HashMap<String, usize> = HashMap::new();
    let mut shared = HashMap::new();
    // Each shared variable at an odd multiple of its declared alignment (8 or 16 bytes), no
    // better aligned than it promises; addresses below 16 are never valid.
    let mut shared_bytes: u64 = 16;
    let mut max_threads = None;
    let mut required_threads = None;
    let mut instrs = Vec::new();
    let mut labels = HashMap::new();
    for l in lines {
        if l.starts_with('}') {
            break;
        }
        let l = l.trim();
        if l.is_empty() || l.starts_with("//") || l == "{" {
            continue;
        }
        // Hints to the assembler (`.pragma "nounroll";`, `.minnctapersm 1`) change nothing
        // that runs.
        if l.starts_with(".pragma ") || l.starts_with(".minnctapersm ") {
            continue;
        }
        for (directive, threads) in [
            (".maxntid ", &mut max_threads),
            (".reqntid ", &mut required_threads),
        ] {
            if let Some(dims) = l.strip_prefix(directive) {
                let x = dims.split(',').next().unwrap_or_default().trim();
                *threads = Some(x.parse().map_err(|_| malformed(l, "thread bound"))?);
            }
        }
        if l.starts_with(".maxntid ") || l.starts_with(".reqntid ") {
            continue;
        }
        if let Some(label) = l.strip_suffix(':') {
            labels.insert(label.to_string(), instrs.len());
            continue;
        }
        if let Some(decl) = l.strip_prefix(".reg .") {
            // `.reg .b32 %r<24>;` declares %r0 to %r23.
            let (prefix, count) = decl
                .split_once(' ')
                .and_then(|(_, names)| names.trim_end_matches(">;").split_once('<'))
                .ok_or_else(|| malformed(l, "register declaration"))?;
            let count = count
                .parse::<usize>()
                .map_err(|_| malformed(l, "register count"))?;
            declared.insert(prefix.to_string(), count);
            continue;
        }
        let aligned = [
            (8u64, ".shared .align 8 .b8 "),
            (16, ".shared .align 16 .b8 "),
        ]
        .into_iter()
        .find_map(|(align, prefix)| l.strip_prefix(prefix).map(|d| (align, d)));
        if let Some((align, decl)) = aligned {
            let (sym, size) = decl
                .trim_end_matches(';')
                .split_once('[')
                .ok_or_else(|| malformed(l, "shared declaration"))?;
            let bytes: u64 = size
                .trim_end_matches(']')
                .parse()
                .map_err(|_| malformed(l, "shared size"))?;
            // At an odd multiple of its alignment: no better aligned than it promises.
            shared_bytes = shared_bytes.div_ceil(align) * align;
            if shared_bytes.is_multiple_of(2 * align) {
                shared_bytes += align;
            }
            shared.insert(sym.to_string(), (shared_bytes, bytes));
            shared_bytes += bytes;
            continue;
        }
        instrs.push(parse_instr(l, &mut regs)?);
    }
    // ptxas refuses a register the entry does not declare.
    for reg in regs.keys() {
        let digits = reg.trim_start_matches(|c: char| !c.is_ascii_digit());
        let prefix = &reg[..reg.len() - digits.len()];
        let index: usize = digits.parse().unwrap_or(usize::MAX);
        if declared.get(prefix).is_none_or(|&n| index >= n) {
            return Err(EmulatorError::Undeclared {
                entry: name.to_string(),
                register: reg.clone(),
            });
        }
    }
    Ok(Body {
        registers: regs.len(),
        shared,
        shared_bytes,
        max_threads,
        required_threads,
        instrs,
        labels,
    })
}

/// `s` split at its top-level commas (not those inside `{}` or `[]`), each part trimmed.
fn split_operands(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut depth = 0;
    let mut cur = String::new();
    for c in s.chars() {
        match c {
            '{' | '[' => depth += 1,
            '}' | ']' => depth -= 1,
            _ => {}
        }
        if c == ',' && depth == 0 {
            out.push(cur.trim().to_string());
            cur.clear();
        } else {
            cur.push(c);
        }
    }
    if !cur.trim().is_empty() {
        out.push(cur.trim().to_string());
    }
    out
}

/// Operand `s`, its registers numbered in `regs` in order of first appearance.
fn parse_operand(s: &str, regs: &mut HashMap<String, usize>) -> Result<Operand, String> {
    let mut reg = |name: &str| {
        let n = regs.len();
        *regs.entry(name.to_string()).or_insert(n)
    };
    if let Some(inner) = s.strip_prefix('[').and_then(|x| x.strip_suffix(']')) {
        let (base, offset) = match inner.split_once('+') {
            Some((b, o)) => (
                b.trim(),
                o.trim().parse().map_err(|_| format!("offset {o}"))?,
            ),
            None => (inner.trim(), 0),
        };
        let base = if base.starts_with('%') {
            Operand::Reg(reg(base))
        } else {
            Operand::Symbol(base.to_string())
        };
        return Ok(Operand::Address(Box::new(base), offset));
    }
    if let Some(inner) = s.strip_prefix('{').and_then(|x| x.strip_suffix('}')) {
        return Ok(Operand::Vector(
            inner.split(',').map(|r| reg(r.trim())).collect(),
        ));
    }
    if s.starts_with("%tid")
        || s.starts_with("%ntid")
        || s.starts_with("%ctaid")
        || s.starts_with("%nctaid")
    {
        return Ok(Operand::Special(s.to_string()));
    }
    if s.starts_with('%') {
        return Ok(Operand::Reg(reg(s)));
    }
    if s.starts_with('$') {
        return Ok(Operand::Label(s.to_string()));
    }
    let hex = |h: &str| u64::from_str_radix(h, 16).map_err(|_| format!("constant {s}"));
    if let Some(h) = s.strip_prefix("0f") {
        let bits = hex(h)?;
        return match u32::try_from(bits) {
            Ok(_) => Ok(Operand::Imm(bits)),
            Err(_) => Err(format!("f32 constant {s}")),
        };
    }
    if let Some(h) = s.strip_prefix("0d").or_else(|| s.strip_prefix("0x")) {
        return Ok(Operand::Imm(hex(h)?));
    }
    if let Ok(v) = s.parse::<i64>() {
        return Ok(Operand::Imm(v as u64));
    }
    Ok(Operand::Symbol(s.to_string()))
}

fn parse_instr(line: &str, regs: &mut HashMap<String, usize>) -> Result<Instr, EmulatorError> {
    let text = line.trim_end_matches(';').trim();
    let (guard, text) = match text.strip_prefix('@') {
        Some(rest) => {
            let (p, rest) = rest
                .split_once(' ')
                .ok_or_else(|| malformed(line, "guarded instruction"))?;
            let (neg, p) = match p.strip_prefix('!') {
                Some(p) => (true, p),
                None => (false, p),
            };
            let Ok(Operand::Reg(r)) = parse_operand(p, regs) else {
                return Err(malformed(line, format!("guard {p}")));
            };
            (Some((r, neg)), rest.trim())
        }
        None => (None, text),
    };
    let (op, rest) = text.split_once(char::is_whitespace).unwrap_or((text, ""));
    let args = split_operands(rest)
        .iter()
        .map(|a| parse_operand(a, regs))
        .collect::<Result<_, _>>()
        .map_err(|what| malformed(line, what))?;
    Ok(Instr {
        guard,
        op: op.split('.').map(str::to_string).collect(),
        args,
        line: line.to_string(),
    })
}

//! The runtime fuzzer's inputs (see `main.rs`): random mutations of a seed program's text
//! (dimensions, dtypes, attribute numbers, op names, constants, instructions duplicated or
//! deleted, operands swapped or replaced), each *repaired* so that a changed type flows
//! through the program, and the random numbers that pick them.

pub use crate::common::rng::Rng;
use ferrax::ir::{parse_func, verify};
use ferrax::Func;

/// Where an integer stands in the text.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Site {
    /// A dimension size in a type (`f32[2,3]`).
    Dim,
    /// In an attribute's value (`axes=[1]`, `dim=0`, `low=[-1]`).
    Attr,
    /// Elsewhere: constant literals, names.
    Literal,
}

pub struct NumSite {
    pub start: usize,
    pub end: usize,
    pub kind: Site,
}

const DTYPES: &[&str] = &["f32", "f64", "f16", "bf16", "i32", "i64", "u8", "bool"];

/// Every integer in `text` (a leading `-` included), with what it stands for.
pub fn number_sites(text: &str) -> Vec<NumSite> {
    let b = text.as_bytes();
    let mut sites = Vec::new();
    let mut i = 0;
    let word_byte = |c: u8| c.is_ascii_alphanumeric() || c == b'_' || c == b'.' || c == b'%';
    while i < b.len() {
        let starts_number =
            b[i].is_ascii_digit() || (b[i] == b'-' && i + 1 < b.len() && b[i + 1].is_ascii_digit());
        if !starts_number || (i > 0 && word_byte(b[i - 1])) {
            i += 1;
            continue;
        }
        let mut end = i + 1;
        while end < b.len() && b[end].is_ascii_digit() {
            end += 1;
        }
        if end < b.len() && (word_byte(b[end]) || b[end] == b'e') {
            // A float, or part of a name.
            while end < b.len() && word_byte(b[end]) {
                end += 1;
            }
            i = end;
            continue;
        }
        // What opened the innermost bracket, or the `key=` right before.
        let line_start = text[..i].rfind('\n').map_or(0, |p| p + 1);
        let before = &text[line_start..i];
        let kind = match before.rfind('[') {
            Some(open) if !before[open..].contains(']') => {
                let head = &before[..open];
                if DTYPES.iter().any(|d| {
                    head.ends_with(d)
                        && !head[..head.len() - d.len()]
                            .ends_with(|c: char| c.is_ascii_alphanumeric())
                }) {
                    Site::Dim
                } else if head.ends_with('=') || head.ends_with("]x") {
                    Site::Attr
                } else {
                    Site::Literal
                }
            }
            _ if before.ends_with('=') => Site::Attr,
            _ => Site::Literal,
        };
        sites.push(NumSite {
            start: i,
            end,
            kind,
        });
        i = end;
    }
    sites
}

const DIMS: &[&str] = &[
    "0",
    "1",
    "2",
    "3",
    "5",
    "8",
    "17",
    "65",
    "65536",
    "2147483648",
    "4294967296",
    "1099511627776",
    "35184372088832",
    "140737488355328",
    "9223372036854775807",
    "18446744073709551615",
];

const ATTR_NUMBERS: &[&str] = &[
    "0",
    "1",
    "2",
    "3",
    "4",
    "7",
    "8",
    "-1",
    "-2",
    "-3",
    "64",
    "2147483647",
    "4294967296",
    "1099511627776",
    "9223372036854775807",
    "-9223372036854775808",
];

/// Ops that may stand for each other: same operands, often the same type.
const OP_FAMILIES: &[&[&str]] = &[
    &[
        "neg",
        "abs",
        "sign",
        "floor",
        "ceil",
        "round",
        "round_even",
        "exp",
        "expm1",
        "log",
        "log1p",
        "sqrt",
        "rsqrt",
        "tanh",
        "logistic",
        "sin",
        "cos",
        "not",
        "stop_gradient",
    ],
    &[
        "add", "sub", "mul", "div", "rem", "pow", "max", "min", "and", "or", "xor",
    ],
    &["eq", "ne", "lt", "le", "gt", "ge"],
    &["reduce_sum", "reduce_prod", "reduce_max", "reduce_min"],
    &[
        "scatter",
        "scatter_add",
        "scatter_mul",
        "scatter_min",
        "scatter_max",
    ],
    &["select", "clamp"],
    &["reshape", "convert", "broadcast_in_dim", "transpose"],
];

const LITERALS: &[&str] = &[
    "0.0",
    "-0.0",
    "NaN",
    "inf",
    "-inf",
    "1e38",
    "-1e-45",
    "65504.0",
    "0",
    "-1",
    "255",
    "true",
    "2147483647",
];

/// The defining instruction lines of the top-level function (`  %n = ...`).
fn instruction_lines(lines: &[String]) -> Vec<usize> {
    (0..lines.len())
        .filter(|&i| lines[i].starts_with("  %") && !lines[i].starts_with("   "))
        .collect()
}

/// The name an instruction line defines (`%n`).
fn defined(line: &str) -> Option<&str> {
    let rest = line.trim_start();
    rest.split_once(" = ").map(|(name, _)| name)
}

/// The operand names of an instruction line, with their byte ranges.
fn operand_ranges(line: &str) -> Vec<(usize, usize)> {
    let Some(eq) = line.find(" = ") else {
        return Vec::new();
    };
    let b = line.as_bytes();
    let mut out = Vec::new();
    let mut i = eq + 3;
    while i < b.len() {
        if b[i] == b'%' {
            let mut end = i + 1;
            while end < b.len() && (b[end].is_ascii_alphanumeric() || b"_.+-".contains(&b[end])) {
                end += 1;
            }
            out.push((i, end));
            i = end;
        } else if b[i] == b':' {
            break;
        } else {
            i += 1;
        }
    }
    out
}

/// Names defined before line `at` (parameters and earlier instructions).
fn names_before(lines: &[String], at: usize) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    if let Some(header) = lines.first() {
        let params = header.split("->").next().unwrap_or("");
        for part in params.split('%').skip(1) {
            if let Some(name) = part.split(':').next() {
                names.push(format!("%{name}"));
            }
        }
    }
    for i in instruction_lines(lines) {
        if i >= at {
            break;
        }
        if let Some(n) = defined(&lines[i]) {
            names.push(n.to_string());
        }
    }
    names
}

/// One random mutation of the program text `text`.
fn mutate(rng: &mut Rng, text: &str) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let instrs = instruction_lines(&lines);
    let sites = number_sites(text);
    let replace =
        |start: usize, end: usize, with: &str| format!("{}{with}{}", &text[..start], &text[end..]);
    match rng.below(14) {
        // One dtype for another everywhere, or one size for another in every type (the
        // program stays consistent more often than after a single change).
        12 => {
            let (from, to) = (*rng.pick(DTYPES), rng.pick(DTYPES));
            let mut out = String::with_capacity(text.len());
            let mut rest = text;
            let pattern = format!("{from}[");
            while let Some(i) = rest.find(&pattern) {
                let word_before = i > 0 && rest.as_bytes()[i - 1].is_ascii_alphanumeric();
                out.push_str(&rest[..i]);
                out.push_str(if word_before { from } else { to });
                rest = &rest[i + from.len()..];
            }
            out.push_str(rest);
            return out;
        }
        13 => {
            let dims: Vec<&NumSite> = sites.iter().filter(|s| s.kind == Site::Dim).collect();
            if dims.is_empty() {
                return text.to_string();
            }
            let s = dims[rng.below(dims.len())];
            let from = &text[s.start..s.end];
            let to = *rng.pick(DIMS);
            let mut out = String::with_capacity(text.len());
            let mut at = 0;
            for d in dims.iter().filter(|d| &text[d.start..d.end] == from) {
                out.push_str(&text[at..d.start]);
                out.push_str(to);
                at = d.end;
            }
            out.push_str(&text[at..]);
            return out;
        }
        // A dimension, often a parameter's (the change then flows through the program).
        0 | 1 => {
            let header_end = text.find('\n').unwrap_or(text.len());
            let dims: Vec<&NumSite> = sites
                .iter()
                .filter(|s| s.kind == Site::Dim && (rng.below(2) == 0 || s.start < header_end))
                .collect();
            if dims.is_empty() {
                return text.to_string();
            }
            let s = dims[rng.below(dims.len())];
            let with: &str = DIMS[rng.below(DIMS.len())];
            return replace(s.start, s.end, with);
        }
        // A dtype.
        2 => {
            let mut at: Vec<(usize, &str)> = Vec::new();
            for d in DTYPES {
                let pattern = format!("{d}[");
                for (i, _) in text.match_indices(&pattern) {
                    if i == 0 || !text.as_bytes()[i - 1].is_ascii_alphanumeric() {
                        at.push((i, d));
                    }
                }
            }
            if at.is_empty() {
                return text.to_string();
            }
            let (i, d) = *rng.pick(&at);
            let with: &str = DTYPES[rng.below(DTYPES.len())];
            return replace(i, i + d.len(), with);
        }
        // An attribute number: replaced, or one off.
        3 | 4 => {
            let attrs: Vec<&NumSite> = sites.iter().filter(|s| s.kind == Site::Attr).collect();
            if attrs.is_empty() {
                return text.to_string();
            }
            let s = attrs[rng.below(attrs.len())];
            let with = match (rng.below(3), text[s.start..s.end].parse::<i64>()) {
                (0, Ok(n)) => (n + 1).to_string(),
                (1, Ok(n)) => (n - 1).to_string(),
                _ => rng.pick(ATTR_NUMBERS).to_string(),
            };
            return replace(s.start, s.end, &with);
        }
        // An attribute list: an entry added or dropped, or two swapped.
        5 => {
            let lists: Vec<(usize, usize)> = text
                .match_indices("=[")
                .filter_map(|(i, _)| text[i + 1..].find(']').map(|e| (i + 2, i + 1 + e)))
                .collect();
            if lists.is_empty() {
                return text.to_string();
            }
            let (start, end) = *rng.pick(&lists);
            let mut items: Vec<String> = text[start..end]
                .split(',')
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect();
            match rng.below(3) {
                0 => {
                    let k = rng.below(items.len() + 1);
                    items.insert(k, rng.pick(&["0", "1", "2", "-1"]).to_string());
                }
                1 if !items.is_empty() => {
                    let k = rng.below(items.len());
                    items.remove(k);
                }
                _ if items.len() >= 2 => {
                    let (a, b) = (rng.below(items.len()), rng.below(items.len()));
                    items.swap(a, b);
                }
                _ => {}
            }
            return replace(start, end, &items.join(","));
        }
        // An op renamed within its family.
        6 => {
            if instrs.is_empty() {
                return text.to_string();
            }
            let i = *rng.pick(&instrs);
            let line = &lines[i];
            let Some(eq) = line.find(" = ") else {
                return text.to_string();
            };
            let op_start = eq + 3;
            let op_end = line[op_start..]
                .find(' ')
                .map_or(line.len(), |e| op_start + e);
            let op = &line[op_start..op_end];
            if let Some(family) = OP_FAMILIES.iter().find(|f| f.contains(&op)) {
                let new = rng.pick(family);
                lines[i] = format!("{}{new}{}", &line[..op_start], &line[op_end..]);
            }
        }
        // A constant's literal.
        7 => {
            let consts: Vec<usize> = instrs
                .iter()
                .copied()
                .filter(|&i| lines[i].contains(" = constant "))
                .collect();
            if consts.is_empty() {
                return text.to_string();
            }
            let i = *rng.pick(&consts);
            let line = &lines[i];
            let (Some(a), Some(b)) = (line.find(" = constant "), line.rfind(" : ")) else {
                return text.to_string();
            };
            let lit = rng.pick(LITERALS);
            lines[i] = format!("{} = constant {lit}{}", &line[..a], &line[b..]);
        }
        // An instruction duplicated under a new name, which a later use then reads.
        8 => {
            if instrs.is_empty() {
                return text.to_string();
            }
            let k = rng.below(instrs.len());
            let i = instrs[k];
            let Some(name) = defined(&lines[i]).map(str::to_string) else {
                return text.to_string();
            };
            let copy_name = format!("%dup{}", rng.below(1000));
            let copy = lines[i].replacen(&name, &copy_name, 1);
            lines.insert(i + 1, copy);
            let later: Vec<usize> = ((i + 2)..lines.len())
                .filter(|&j| {
                    operand_ranges(&lines[j])
                        .iter()
                        .any(|&(s, e)| lines[j][s..e] == name)
                })
                .collect();
            if !later.is_empty() {
                let j = *rng.pick(&later);
                let ranges = operand_ranges(&lines[j]);
                if let Some(&(s, e)) = ranges.iter().find(|&&(s, e)| lines[j][s..e] == name) {
                    lines[j].replace_range(s..e, &copy_name);
                }
            } else if let Some(ret) = lines
                .iter()
                .rposition(|l| l.trim_start().starts_with("return"))
            {
                lines[ret] = lines[ret].replacen(&name, &copy_name, 1);
            }
        }
        // An instruction deleted; its uses read an earlier value instead.
        9 => {
            if instrs.is_empty() {
                return text.to_string();
            }
            let i = *rng.pick(&instrs);
            let Some(name) = defined(&lines[i]).map(str::to_string) else {
                return text.to_string();
            };
            let earlier = names_before(&lines, i);
            lines.remove(i);
            if earlier.is_empty() {
                return lines.join("\n");
            }
            let sub = rng.pick(&earlier).clone();
            for line in lines.iter_mut().skip(i) {
                let ranges = operand_ranges(line);
                for &(s, e) in ranges.iter().rev() {
                    if line[s..e] == name {
                        line.replace_range(s..e, &sub);
                    }
                }
                if let Some((head, rest)) = line.split_once("return ") {
                    let values: Vec<&str> = rest
                        .split(',')
                        .map(str::trim)
                        .map(|w| if w == name { sub.as_str() } else { w })
                        .collect();
                    *line = format!("{head}return {}", values.join(", "));
                }
            }
        }
        // Two operands swapped.
        10 => {
            let with_two: Vec<usize> = instrs
                .iter()
                .copied()
                .filter(|&i| operand_ranges(&lines[i]).len() >= 2)
                .collect();
            if with_two.is_empty() {
                return text.to_string();
            }
            let i = *rng.pick(&with_two);
            let ranges = operand_ranges(&lines[i]);
            let a = rng.below(ranges.len());
            let b = (a + 1 + rng.below(ranges.len() - 1)) % ranges.len();
            let (a, b) = (ranges[a.min(b)], ranges[a.max(b)]);
            let line = &lines[i];
            lines[i] = format!(
                "{}{}{}{}{}",
                &line[..a.0],
                &line[b.0..b.1],
                &line[a.1..b.0],
                &line[a.0..a.1],
                &line[b.1..]
            );
        }
        // An operand replaced by another earlier value.
        _ => {
            if instrs.is_empty() {
                return text.to_string();
            }
            let i = *rng.pick(&instrs);
            let ranges = operand_ranges(&lines[i]);
            let earlier = names_before(&lines, i);
            if ranges.is_empty() || earlier.is_empty() {
                return text.to_string();
            }
            let (s, e) = *rng.pick(&ranges);
            let sub = rng.pick(&earlier).clone();
            lines[i].replace_range(s..e, &sub);
        }
    }
    lines.join("\n") + "\n"
}

/// Parses `text`, first giving each instruction whose declared type its operands no longer
/// give the inferred type, and the signature the returned types; `None` if it still does not
/// parse.
fn repair(text: &str) -> Option<(Func, String)> {
    let mut text = text.to_string();
    for _ in 0..400 {
        let e = match parse_func(&text) {
            Ok(f) => return Some((f, text)),
            Err(e) => e,
        };
        let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
        let at = e.line.checked_sub(1).filter(|&l| l < lines.len())?;
        if let Some((_, inferred)) = e.message.split_once(" but its operands give ") {
            let line = &lines[at];
            let colon = line.rfind(" : ")?;
            lines[at] = format!("{} : {inferred}", &line[..colon]);
        } else if let Some((returned, _)) = e.message.split_once(" but the signature declares") {
            let returned = returned.strip_prefix("returns ")?;
            let header = (0..=at).rev().find(|&l| lines[l].contains("func @"))?;
            let line = &lines[header];
            let open = line.find(") -> (")? + ") -> ".len();
            let close = line.rfind(") {")? + 1;
            if close < open {
                return None;
            }
            lines[header] = format!("{}{returned}{}", &line[..open], &line[close..]);
        } else {
            return None;
        }
        text = lines.join("\n") + "\n";
    }
    None
}

/// One fuzzing input: a seed after 1 to 6 mutations, each repaired; a mutation after which
/// the program does not parse is undone and another tried. `None` if none took.
pub fn input(seeds: &[String], s: u64) -> Option<(Func, String)> {
    let mut rng = Rng::new(s);
    let mut text = rng.pick(seeds).clone();
    let mut func = None;
    let wanted = 1 + rng.below(6);
    let mut done = 0;
    for _ in 0..4 * wanted {
        if done == wanted {
            break;
        }
        if let Some((f, repaired)) = repair(&mutate(&mut rng, &text)) {
            if verify(&f).is_ok() {
                (func, text) = (Some(f), repaired);
                done += 1;
            }
        }
    }
    Some((func?, text))
}

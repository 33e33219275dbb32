//! Tokens of the MLIR text subset that StableHLO programs use.

use crate::Error;

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Tok {
    /// `%name` (with `#n` or `:n` suffixes kept in the text).
    Value(String),
    /// `@name`.
    Symbol(String),
    /// `^bb0`.
    Block(String),
    /// A quoted string, unescaped.
    Str(String),
    /// Identifiers, keywords and numbers.
    Word(String),
    Punct(char),
    Arrow,
    Eof,
}

impl std::fmt::Display for Tok {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Tok::Value(v) => write!(f, "'%{v}'"),
            Tok::Symbol(s) => write!(f, "'@{s}'"),
            Tok::Block(b) => write!(f, "'^{b}'"),
            Tok::Str(s) => write!(f, "\"{s}\""),
            Tok::Word(w) => write!(f, "'{w}'"),
            Tok::Punct(c) => write!(f, "'{c}'"),
            Tok::Arrow => f.write_str("'->'"),
            Tok::Eof => f.write_str("end of input"),
        }
    }
}

fn ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '$')
}

/// Tokens with their 1-based line numbers.
pub(crate) fn lex(src: &str) -> Result<Vec<(Tok, usize)>, Error> {
    let chars: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let (mut i, mut line) = (0, 1);
    while i < chars.len() {
        let c = chars[i];
        if c == '\n' {
            line += 1;
            i += 1;
            continue;
        }
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        if c == '/' && chars.get(i + 1) == Some(&'/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
            continue;
        }
        let start = i;
        let tok = match c {
            '-' if chars.get(i + 1) == Some(&'>') => {
                i += 2;
                Tok::Arrow
            }
            // A quoted symbol name: `@"<lambda>"`.
            '@' if chars.get(i + 1) == Some(&'"') => {
                i += 2;
                let end = chars[i..]
                    .iter()
                    .position(|&ch| ch == '"')
                    .ok_or_else(|| Error::at(line, "unterminated symbol name"))?;
                let name: String = chars[i..i + end].iter().collect();
                i += end + 1;
                Tok::Symbol(name)
            }
            '"' => {
                i += 1;
                let mut s = String::new();
                while i < chars.len() && chars[i] != '"' {
                    if chars[i] == '\\' && i + 1 < chars.len() {
                        i += 1;
                    }
                    s.push(chars[i]);
                    i += 1;
                }
                if i >= chars.len() {
                    return Err(Error::at(line, "unterminated string"));
                }
                i += 1;
                Tok::Str(s)
            }
            // Attribute aliases and dialect types (`!quant.uniform`), kept as words.
            '#' | '!' => {
                i += 1;
                while i < chars.len() && ident_char(chars[i]) {
                    i += 1;
                }
                Tok::Word(chars[start..i].iter().collect())
            }
            '%' | '@' | '^' => {
                i += 1;
                while i < chars.len()
                    && (ident_char(chars[i]) || chars[i] == '#' || chars[i] == '-')
                {
                    i += 1;
                }
                let name: String = chars[start + 1..i].iter().collect();
                match c {
                    '%' => Tok::Value(name),
                    '@' => Tok::Symbol(name),
                    _ => Tok::Block(name),
                }
            }
            '-' | '+' | '0'..='9' => {
                // A number: sign, digits, fraction, exponent (with its own sign), or hex.
                i += 1;
                let mut hex = false;
                while i < chars.len() {
                    let d = chars[i];
                    let exp_sign =
                        matches!(d, '+' | '-') && matches!(chars[i - 1], 'e' | 'E') && !hex;
                    if d.is_ascii_alphanumeric() || d == '.' || exp_sign {
                        hex |= d == 'x';
                        i += 1;
                    } else {
                        break;
                    }
                }
                Tok::Word(chars[start..i].iter().collect())
            }
            _ if ident_char(c) => {
                while i < chars.len() && ident_char(chars[i]) {
                    i += 1;
                }
                Tok::Word(chars[start..i].iter().collect())
            }
            '(' | ')' | '[' | ']' | '{' | '}' | '<' | '>' | ',' | ':' | '=' | '?' | '*' => {
                i += 1;
                Tok::Punct(c)
            }
            other => return Err(Error::at(line, format!("unexpected character {other:?}"))),
        };
        out.push((tok, line));
    }
    out.push((Tok::Eof, line));
    Ok(out)
}

//! The text format's tokens. Lexing comes first so that the grammar sees whole names and
//! punctuation, each with the line and column every error message points at.

use super::ParseError;

#[derive(Clone, Debug, PartialEq)]
pub(super) enum Tok {
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

/// The tokens of `src`, each with its line and column, ending with [`Tok::Eof`].
pub(super) fn lex(src: &str) -> Result<Vec<(Tok, usize, usize)>, ParseError> {
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

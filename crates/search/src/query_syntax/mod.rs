//! Lucene's classic query syntax (`org.apache.lucene.queryparser.classic.QueryParser`), the
//! language of CouchDB's search APIs (Nouveau and Clouseau), parsed into an AST that is not
//! yet analyzed: the engine decides how each word is tokenized and which query it becomes.
//!
//! This follows Lucene's JavaCC grammar and lexer (longest match, lexical states for boosts
//! and ranges) with the default operator OR, so user queries mean what they mean to CouchDB.
//! Deliberate differences, all more lenient:
//! - a leading wildcard (`*ing`) is accepted (Clouseau allows it);
//! - `\uXXXX` is decoded everywhere, wildcards included (Lucene only outside wildcards);
//! - backslash escapes work inside bare range endpoints (`[a\ b TO c\]]`);
//! - `/regex/` keeps its escapes for the regex engine except `\/`, which becomes `/`.
//!
//! As in Lucene, `!` cannot be inside a term (`a!b` is `a` and NOT `b`), and `+`, `-` or `!`
//! followed by whitespace is a one-character term (`a - b` is three words).

use std::collections::VecDeque;

/// How a clause takes part in a boolean query.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Occur {
    Should,
    Must,
    MustNot,
}

/// One bound of a range: the raw text of the endpoint (escapes removed), or open (`*`).
#[derive(Debug, Clone, PartialEq)]
pub enum Endpoint {
    Open,
    Included(String),
    Excluded(String),
}

/// One char of a wildcard pattern: kept apart so an escaped `\*` cannot pass for a wildcard.
#[derive(Debug, Clone, PartialEq)]
pub enum WildPiece {
    Literal(char),
    /// `?`
    AnyOne,
    /// `*`
    AnyMany,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    /// `*:*`: every document.
    All,
    /// A boolean combination; never empty.
    Boolean(Vec<(Occur, Node)>),
    /// A bare word (escapes removed, not yet analyzed): `field:word` or `word`.
    Term { field: Option<String>, text: String },
    /// `"a quoted phrase"~slop` (slop 0 when absent); text with escapes removed.
    Phrase {
        field: Option<String>,
        text: String,
        slop: u32,
    },
    /// A word with an unescaped `*` or `?` (`dat*`, `te?t`, `*ing`, `field:*`).
    Wildcard {
        field: Option<String>,
        pattern: Vec<WildPiece>,
    },
    /// `word~` (2 edits), `word~1`; old similarities `~0.8` map as Lucene 9's
    /// `FuzzyQuery.floatToEdits(sim, codePointCount)`; at most 2.
    Fuzzy {
        field: Option<String>,
        text: String,
        distance: u8,
    },
    /// `/regex/`
    Regex {
        field: Option<String>,
        pattern: String,
    },
    /// `[a TO b]`, `{a TO b}`, `[a TO *]`, mixed `[a TO b}`.
    Range {
        field: Option<String>,
        lower: Endpoint,
        upper: Endpoint,
    },
    /// `q^2.5`
    Boost(Box<Node>, f32),
}

/// Why a query could not be parsed: a message a user can act on, naming the position.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct SyntaxError(pub String);

/// Groups nested deeper than this are refused, so hostile input cannot overflow the stack.
const MAX_DEPTH: usize = 100;

/// Parses a query in Lucene's classic syntax.
pub fn parse(query: &str) -> Result<Node, SyntaxError> {
    let mut p = Parser {
        lx: Lexer {
            query,
            chars: query.chars().collect(),
            pos: 0,
            mode: Mode::Default,
        },
        ahead: VecDeque::new(),
    };
    let node = p.query(None, 0)?;
    let t = p.bump()?;
    if t.kind != Kind::Eof {
        return Err(p.unexpected(&t, "<EOF>, an operator or another clause"));
    }
    Ok(node)
}

fn is_ws(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\r' | '\u{3000}')
}

/// Chars that cannot be in a term unless escaped (`-` and `+` can, after its first char).
const SPECIALS: &str = "+-!():^[]\"{}~*?\\/";

fn is_term_start(c: char) -> bool {
    !is_ws(c) && !SPECIALS.contains(c)
}

fn is_term_char(c: char) -> bool {
    is_term_start(c) || c == '-' || c == '+'
}

#[derive(Debug, Clone, PartialEq)]
enum Kind {
    And,
    Or,
    Not,
    Plus,
    Minus,
    /// `+`, `-` or `!` followed by whitespace: a term of that one char.
    BareOper(char),
    LParen,
    RParen,
    Colon,
    Caret,
    Number(f32),
    /// A bare word (or a lone `*`), escapes resolved.
    Word(Vec<WildPiece>),
    Quoted(String),
    /// `~...`: the raw text after the tilde.
    Slop(String),
    Regex(String),
    RangeStart(bool),
    RangeEnd(bool),
    RangeTo,
    /// A range endpoint: `None` for a bare `*`.
    Bound(Option<String>),
    Eof,
}

#[derive(Debug)]
struct Token {
    kind: Kind,
    start: usize,
    end: usize,
}

/// Lucene's lexical states: after `^` only a number; between `[` and `]` range tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Default,
    Boost,
    Range,
}

#[derive(Debug)]
struct Lexer<'a> {
    query: &'a str,
    chars: Vec<char>,
    pos: usize,
    mode: Mode,
}

impl Lexer<'_> {
    /// 1-based line and column of the char at `pos`; past the end, of the last char (JavaCC).
    fn line_col(&self, pos: usize) -> (usize, usize) {
        let upto = &self.chars[..(pos + 1).min(self.chars.len())];
        let Some((_, before)) = upto.split_last() else {
            return (1, 0);
        };
        let line_start = before.iter().rposition(|&c| c == '\n').map_or(0, |i| i + 1);
        let line = 1 + before.iter().filter(|&&c| c == '\n').count();
        (line, before.len() - line_start + 1)
    }

    fn error(&self, pos: usize, what: &str, detail: &str) -> SyntaxError {
        let (line, col) = self.line_col(pos);
        let sep = if detail.is_empty() { "" } else { " " };
        let q = self.query;
        SyntaxError(format!(
            "Cannot parse '{q}': {what} at line {line}, column {col}.{sep}{detail}"
        ))
    }

    fn at(&self, pos: usize) -> Option<char> {
        self.chars.get(pos).copied()
    }

    fn skip_ws(&mut self) {
        while self.at(self.pos).is_some_and(is_ws) {
            self.pos += 1;
        }
    }

    fn next(&mut self) -> Result<Token, SyntaxError> {
        let mode = std::mem::replace(&mut self.mode, Mode::Default);
        let start = self.pos;
        if mode == Mode::Boost && self.at(start).is_some_and(|c| c.is_ascii_digit()) {
            // Lucene's NUMBER: digits, optionally `.digits`; no whitespace after `^`.
            let digits = |lx: &mut Self| {
                while lx.at(lx.pos).is_some_and(|c| c.is_ascii_digit()) {
                    lx.pos += 1;
                }
            };
            digits(self);
            if self.at(self.pos) == Some('.')
                && self.at(self.pos + 1).is_some_and(|c| c.is_ascii_digit())
            {
                self.pos += 1;
                digits(self);
            }
            let text: String = self.chars[start..self.pos].iter().collect();
            let kind = Kind::Number(text.parse().unwrap_or(1.0));
            return Ok(Token {
                kind,
                start,
                end: self.pos,
            });
        }
        self.skip_ws();
        let start = self.pos;
        let Some(c) = self.at(start) else {
            return Ok(Token {
                kind: Kind::Eof,
                start,
                end: start,
            });
        };
        self.pos += 1;
        let kind = match c {
            _ if mode == Mode::Range => self.range_token(c)?,
            '(' => Kind::LParen,
            ')' => Kind::RParen,
            ':' => Kind::Colon,
            '^' => {
                self.mode = Mode::Boost;
                Kind::Caret
            }
            '+' | '-' | '!' if self.at(self.pos).is_some_and(is_ws) => {
                self.pos += 1;
                Kind::BareOper(c)
            }
            '+' => Kind::Plus,
            '-' => Kind::Minus,
            '!' => Kind::Not,
            '[' | '{' => {
                self.mode = Mode::Range;
                Kind::RangeStart(c == '[')
            }
            '"' => Kind::Quoted(self.delimited('"', "quote")?),
            '/' => Kind::Regex(self.delimited('/', "regular expression")?),
            '~' => {
                while let Some(c) = self.at(self.pos) {
                    if c == '\\' && self.pos + 1 < self.chars.len() {
                        self.pos += 2;
                    } else if is_term_char(c) {
                        self.pos += 1;
                    } else {
                        break;
                    }
                }
                Kind::Slop(self.chars[start + 1..self.pos].iter().collect())
            }
            c if c == '\\' || c == '*' || c == '?' || is_term_start(c) => {
                self.pos = start;
                self.word()?
            }
            _ => return Err(self.error(start, &format!("Encountered \"{c}\""), "")),
        };
        Ok(Token {
            kind,
            start,
            end: self.pos,
        })
    }

    /// A word, or one of the operators `AND`, `OR`, `NOT`, `&&`, `||` when it is exactly that.
    fn word(&mut self) -> Result<Kind, SyntaxError> {
        let start = self.pos;
        let mut pieces = Vec::new();
        while let Some(c) = self.at(self.pos) {
            let piece = match c {
                '\\' => {
                    pieces.push(WildPiece::Literal(self.escape()?));
                    continue;
                }
                '*' => WildPiece::AnyMany,
                '?' => WildPiece::AnyOne,
                c if is_term_char(c) => WildPiece::Literal(c),
                _ => break,
            };
            pieces.push(piece);
            self.pos += 1;
        }
        Ok(match &self.chars[start..self.pos] {
            ['A', 'N', 'D'] | ['&', '&'] => Kind::And,
            ['O', 'R'] | ['|', '|'] => Kind::Or,
            ['N', 'O', 'T'] => Kind::Not,
            _ => Kind::Word(pieces),
        })
    }

    /// The escape at `self.pos` (a backslash): `\c` is `c`; `\uXXXX` a UTF-16 unit (or pair).
    fn escape(&mut self) -> Result<char, SyntaxError> {
        let at = self.pos;
        let Some(c) = self.at(at + 1) else {
            let detail = "Was expecting a character to escape.";
            return Err(self.error(at, "Encountered \"<EOF>\" after \"\\\"", detail));
        };
        if c != 'u' {
            self.pos = at + 2;
            return Ok(c);
        }
        let unit = self.hex4(at)?;
        self.pos = at + 6;
        if (0xD800..0xDC00).contains(&unit)
            && self.at(self.pos) == Some('\\')
            && self.at(self.pos + 1) == Some('u')
        {
            let low = self.hex4(self.pos)?;
            if (0xDC00..0xE000).contains(&low)
                && let Some(c) = char::from_u32(0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00))
            {
                self.pos += 6;
                return Ok(c);
            }
        }
        let what = "Unpaired surrogate in unicode escape sequence";
        char::from_u32(unit).ok_or_else(|| self.error(at, what, ""))
    }

    /// The four hex digits after the `\u` at `at`.
    fn hex4(&self, at: usize) -> Result<u32, SyntaxError> {
        let mut v = 0;
        for i in at + 2..at + 6 {
            let Some(c) = self.at(i) else {
                return Err(self.error(at, "Truncated unicode escape sequence", ""));
            };
            let Some(d) = c.to_digit(16) else {
                let what = format!("Non-hex character in Unicode escape sequence: {c}");
                return Err(self.error(i, &what, ""));
            };
            v = v * 16 + d;
        }
        Ok(v)
    }

    /// The text up to `close`, the opening char just read. A quote resolves its escapes; a
    /// regex keeps them for the regex engine, except `\/`.
    fn delimited(&mut self, close: char, name: &str) -> Result<String, SyntaxError> {
        let open = self.pos - 1;
        let mut text = String::new();
        loop {
            match self.at(self.pos) {
                None => {
                    let (line, col) = self.line_col(open);
                    let detail = format!(
                        "Was expecting '{close}' to close the {name} opened at line {line}, column {col}."
                    );
                    return Err(self.error(self.pos, "Encountered \"<EOF>\"", &detail));
                }
                Some(c) if c == close => {
                    self.pos += 1;
                    return Ok(text);
                }
                Some('\\') if close == '/' => {
                    let next = self.at(self.pos + 1);
                    if next != Some('/') {
                        text.push('\\');
                    }
                    text.extend(next);
                    self.pos += 2;
                }
                Some('\\') => text.push(self.escape()?),
                Some(c) => {
                    text.push(c);
                    self.pos += 1;
                }
            }
        }
    }

    /// A token between `[`/`{` and `]`/`}` starting with `c`: `TO`, an endpoint or the end.
    fn range_token(&mut self, c: char) -> Result<Kind, SyntaxError> {
        if c == ']' || c == '}' {
            return Ok(Kind::RangeEnd(c == ']'));
        }
        self.mode = Mode::Range;
        if c == '"' {
            return Ok(Kind::Bound(Some(self.delimited('"', "quote")?)));
        }
        let start = self.pos - 1;
        self.pos = start;
        let mut text = String::new();
        while let Some(c) = self.at(self.pos) {
            if is_ws(c) || c == ']' || c == '}' {
                break;
            } else if c == '\\' {
                text.push(self.escape()?);
            } else {
                text.push(c);
                self.pos += 1;
            }
        }
        Ok(match &self.chars[start..self.pos] {
            ['T', 'O'] => Kind::RangeTo,
            ['*'] => Kind::Bound(None),
            _ => Kind::Bound(Some(text)),
        })
    }
}

/// A clause's prefix: `+`, or `-`/`!`/`NOT`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mods {
    None,
    Required,
    Prohibited,
}

/// Lucene's `QueryParserBase.addClause` with the default operator OR: a clause introduced by
/// AND is required, and makes the previous clause required unless it is prohibited; OR
/// changes nothing. So `a AND b OR c` is `+a +b c` and `a OR b AND c` is `a +b +c`.
fn add_clause(clauses: &mut Vec<(Occur, Node)>, and: bool, mods: Mods, q: Node) {
    if and
        && let Some(last) = clauses.last_mut()
        && last.0 != Occur::MustNot
    {
        last.0 = Occur::Must;
    }
    let occur = match mods {
        Mods::Prohibited => Occur::MustNot,
        Mods::Required => Occur::Must,
        Mods::None if and => Occur::Must,
        Mods::None => Occur::Should,
    };
    clauses.push((occur, q));
}

fn boosted(node: Node, boost: Option<f32>) -> Node {
    match boost {
        Some(b) => Node::Boost(Box::new(node), b),
        None => node,
    }
}

/// Lucene 9's `FuzzyQuery.floatToEdits`: `>= 1` is an edit count, `(0, 1)` an old-style
/// similarity scaled by the term's length in code points; at most 2 edits.
fn float_to_edits(sim: f32, text: &str) -> u8 {
    if sim >= 1.0 {
        sim.min(2.0) as u8
    } else if sim == 0.0 {
        0
    } else {
        let len = text.chars().count() as f64;
        ((1.0 - f64::from(sim)) * len).min(2.0) as u8
    }
}

#[derive(Debug)]
struct Parser<'a> {
    lx: Lexer<'a>,
    ahead: VecDeque<Token>,
}

impl Parser<'_> {
    fn peek(&mut self, i: usize) -> Result<&Kind, SyntaxError> {
        while self.ahead.len() <= i {
            let t = self.lx.next()?;
            self.ahead.push_back(t);
        }
        match self.ahead.get(i) {
            Some(t) => Ok(&t.kind),
            None => Ok(&Kind::Eof),
        }
    }

    fn bump(&mut self) -> Result<Token, SyntaxError> {
        match self.ahead.pop_front() {
            Some(t) => Ok(t),
            None => self.lx.next(),
        }
    }

    fn unexpected(&self, t: &Token, expecting: &str) -> SyntaxError {
        let image: String = match t.kind {
            Kind::Eof => "<EOF>".into(),
            _ => self.lx.chars[t.start..t.end].iter().collect(),
        };
        let what = format!("Encountered \"{}\"", image.trim_end_matches(is_ws));
        self.lx
            .error(t.start, &what, &format!("Was expecting {expecting}."))
    }

    /// `Query := Modifiers Clause (Conjunction Modifiers Clause)*`.
    fn query(&mut self, field: Option<&str>, depth: usize) -> Result<Node, SyntaxError> {
        let mut clauses = Vec::new();
        let mut first_plain = true;
        loop {
            let conj = !clauses.is_empty() && matches!(self.peek(0)?, Kind::And | Kind::Or);
            let and = conj && self.bump()?.kind == Kind::And;
            let mods = match self.peek(0)? {
                Kind::Plus => Mods::Required,
                Kind::Minus | Kind::Not => Mods::Prohibited,
                _ => Mods::None,
            };
            if mods != Mods::None {
                self.bump()?;
            }
            first_plain &= !clauses.is_empty() || mods == Mods::None;
            let q = self.clause(field, depth)?;
            add_clause(&mut clauses, and, mods, q);
            use Kind::*;
            let more = matches!(
                self.peek(0)?,
                And | Or
                    | Not
                    | Plus
                    | Minus
                    | BareOper(_)
                    | LParen
                    | Word(_)
                    | Quoted(_)
                    | Regex(_)
                    | RangeStart(_)
            );
            if !more {
                break;
            }
        }
        // As Lucene: one clause without a modifier is the query itself.
        if clauses.len() == 1
            && first_plain
            && let Some((_, q)) = clauses.pop()
        {
            return Ok(q);
        }
        Ok(Node::Boolean(clauses))
    }

    /// `Clause := [field ':'] (Term | '(' Query ')' ['^' number])`.
    fn clause(&mut self, field: Option<&str>, depth: usize) -> Result<Node, SyntaxError> {
        let mut own = None;
        if self.peek(1)? == &Kind::Colon
            && let Kind::Word(pieces) = self.peek(0)?
        {
            own = match pieces.as_slice() {
                [WildPiece::AnyMany] => Some("*".to_owned()),
                pieces => literal_text(pieces),
            };
            if own.is_some() {
                self.bump()?;
                self.bump()?;
            }
        }
        let field = own.as_deref().or(field);
        if self.peek(0)? != &Kind::LParen {
            return self.term(field);
        }
        let open = self.bump()?;
        if depth >= MAX_DEPTH {
            let what = format!("Too many nested groups (more than {MAX_DEPTH})");
            return Err(self.lx.error(open.start, &what, ""));
        }
        let q = self.query(field, depth + 1)?;
        let close = self.bump()?;
        if close.kind != Kind::RParen {
            return Err(self.unexpected(&close, "\")\" or another clause"));
        }
        Ok(boosted(q, self.boost()?))
    }

    fn boost(&mut self) -> Result<Option<f32>, SyntaxError> {
        if self.peek(0)? != &Kind::Caret {
            return Ok(None);
        }
        self.bump()?;
        let t = self.bump()?;
        match t.kind {
            Kind::Number(n) => Ok(Some(n)),
            _ => Err(self.unexpected(&t, "a number after '^'")),
        }
    }

    /// An optional `~...`: its text and position.
    fn slop(&mut self) -> Result<Option<(String, usize)>, SyntaxError> {
        if !matches!(self.peek(0)?, Kind::Slop(_)) {
            return Ok(None);
        }
        let t = self.bump()?;
        Ok(match t.kind {
            Kind::Slop(s) => Some((s, t.start)),
            _ => None,
        })
    }

    fn term(&mut self, field: Option<&str>) -> Result<Node, SyntaxError> {
        let t = self.bump()?;
        let f = field.map(str::to_owned);
        let node = match t.kind {
            Kind::Word(_) | Kind::BareOper(_) | Kind::Regex(_) => {
                // Lucene: [~slop] [^boost [~slop]], the last slop winning.
                let slop = self.slop()?;
                let boost = self.boost()?;
                let slop = if boost.is_some() {
                    self.slop()?.or(slop)
                } else {
                    slop
                };
                let node = match t.kind {
                    Kind::Regex(pattern) => Node::Regex { field: f, pattern },
                    Kind::Word(pattern) => match literal_text(&pattern) {
                        Some(text) => self.term_or_fuzzy(f, text, slop)?,
                        // Lucene's getWildcardQuery: `*` on field `*` is every document.
                        None if field == Some("*") && pattern == [WildPiece::AnyMany] => Node::All,
                        None => Node::Wildcard { field: f, pattern },
                    },
                    Kind::BareOper(c) => self.term_or_fuzzy(f, c.to_string(), slop)?,
                    _ => return Err(self.unexpected(&t, "a term")),
                };
                return Ok(boosted(node, boost));
            }
            Kind::Quoted(text) => {
                // Lucene: `(int) Float.parseFloat(slop)`, 0 when it does not parse.
                let slop = self.slop()?.map_or(0, |(s, _)| {
                    s.parse::<f32>()
                        .map_or(0, |v| v.clamp(0.0, i32::MAX as f32) as u32)
                });
                Node::Phrase {
                    field: f,
                    text,
                    slop,
                }
            }
            Kind::RangeStart(lower_inclusive) => {
                let lower = self.bound()?;
                if self.peek(0)? == &Kind::RangeTo {
                    self.bump()?;
                }
                let upper = self.bound()?;
                let end = self.bump()?;
                let Kind::RangeEnd(upper_inclusive) = end.kind else {
                    return Err(self.unexpected(&end, "\"]\" or \"}\" to close the range"));
                };
                let endpoint = |b: Option<String>, inclusive| match b {
                    None => Endpoint::Open,
                    Some(s) if inclusive => Endpoint::Included(s),
                    Some(s) => Endpoint::Excluded(s),
                };
                let (lower, upper) = (
                    endpoint(lower, lower_inclusive),
                    endpoint(upper, upper_inclusive),
                );
                Node::Range {
                    field: f,
                    lower,
                    upper,
                }
            }
            _ => {
                let expecting = "a term, phrase, range, regular expression or \"(\"";
                return Err(self.unexpected(&t, expecting));
            }
        };
        Ok(boosted(node, self.boost()?))
    }

    /// A range endpoint: `None` when open (`*`).
    fn bound(&mut self) -> Result<Option<String>, SyntaxError> {
        let t = self.bump()?;
        match t.kind {
            Kind::Bound(b) => Ok(b),
            _ => Err(self.unexpected(&t, "a range endpoint")),
        }
    }

    /// Lucene's `handleBareFuzzy`: an unparsable `~x` means the default, 2 edits.
    fn term_or_fuzzy(
        &self,
        field: Option<String>,
        text: String,
        slop: Option<(String, usize)>,
    ) -> Result<Node, SyntaxError> {
        let Some((slop, at)) = slop else {
            return Ok(Node::Term { field, text });
        };
        let sim = slop.parse::<f32>().unwrap_or(2.0);
        let what = if sim < 0.0 {
            "Minimum similarity for a FuzzyQuery has to be between 0.0f and 1.0f !"
        } else if sim >= 1.0 && sim.fract() != 0.0 {
            "Fractional edit distances are not allowed!"
        } else {
            let distance = float_to_edits(sim, &text);
            return Ok(Node::Fuzzy {
                field,
                text,
                distance,
            });
        };
        Err(self.lx.error(at, what, ""))
    }
}

/// The text of a pattern without wildcards, `None` if it has some.
fn literal_text(pieces: &[WildPiece]) -> Option<String> {
    pieces
        .iter()
        .map(|p| match p {
            WildPiece::Literal(c) => Some(*c),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests;

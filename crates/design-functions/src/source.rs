//! A design function's source as CouchDB's query server reads it: a script
//! whose completion value is the function. A top-level statement that
//! starts with an anonymous `function (` is an expression there
//! (SpiderMonkey 1.8.5's rule, kept in CouchDB's QuickJS by a patch), so
//! `function(doc) {...};`, trailing comments and statements before the
//! function all work, and the last such function wins. Plain QuickJS reads
//! that statement as a declaration without a name, so [`as_script`] puts
//! `0,` before each, which makes it an expression with the same value.

/// The source with `0,` before every top-level statement that starts
/// with an anonymous `function (`; everything else as it was.
pub(crate) fn as_script(source: &str) -> String {
    let bytes = source.as_bytes();
    let mut out = String::with_capacity(source.len() + 8);
    let mut copied = 0;
    let mut scan = Scanner {
        bytes,
        at: 0,
        open: Vec::new(),
        prev: Prev::Start,
        newline: false,
    };
    while let Some(start) = scan.next_word() {
        if &bytes[start..scan.at] == b"function" && scan.statement_start() && scan.paren_follows() {
            out.push_str(&source[copied..start]);
            out.push_str("0,");
            copied = start;
        }
        scan.prev = word_kind(&bytes[start..scan.at]);
        scan.newline = false;
    }
    out.push_str(&source[copied..]);
    out
}

/// What came before the current token, as far as statements go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Prev {
    /// Nothing: the source's start.
    Start,
    /// A `;` or a `}` closing a top-level block: a statement starts next.
    StatementEnd,
    /// Something an expression can end with (a name, a literal, `)`).
    Value,
    /// An operator, an opening bracket or a keyword: an expression goes on.
    Operator,
}

struct Scanner<'a> {
    bytes: &'a [u8],
    at: usize,
    /// Open brackets (`(`, `[`, `{`), and `` ` `` for a template's `${`.
    open: Vec<u8>,
    prev: Prev,
    /// Whether a line ended since the previous token.
    newline: bool,
}

impl Scanner<'_> {
    /// Skips to the next word (name, keyword or number), stepping over
    /// everything else; returns where it starts, `at` is where it ends.
    fn next_word(&mut self) -> Option<usize> {
        while let Some(&b) = self.bytes.get(self.at) {
            match b {
                b'\n' | b'\r' => {
                    self.newline = true;
                    self.at += 1;
                }
                _ if b.is_ascii_whitespace() => self.at += 1,
                b'/' if self.bytes.get(self.at + 1) == Some(&b'/') => self.line_comment(),
                b'/' if self.bytes.get(self.at + 1) == Some(&b'*') => self.block_comment(),
                b'/' if self.prev == Prev::Value => self.token(1, Prev::Operator),
                b'/' => {
                    self.regex();
                    self.prev = Prev::Value;
                    self.newline = false;
                }
                b'\'' | b'"' => {
                    self.string(b);
                    self.prev = Prev::Value;
                    self.newline = false;
                }
                b'`' => {
                    self.at += 1;
                    self.template();
                }
                b'(' | b'[' | b'{' => {
                    self.open.push(b);
                    self.token(1, Prev::Operator);
                }
                b')' | b']' => {
                    self.open.pop();
                    self.token(1, Prev::Value);
                }
                b'}' => {
                    if self.open.pop() == Some(b'`') {
                        self.at += 1;
                        self.template();
                    } else if self.open.is_empty() {
                        self.token(1, Prev::StatementEnd);
                    } else {
                        self.token(1, Prev::Value);
                    }
                }
                b';' if self.open.is_empty() => self.token(1, Prev::StatementEnd),
                _ if is_word_byte(b) => {
                    let start = self.at;
                    while self.bytes.get(self.at).is_some_and(|&b| is_word_byte(b)) {
                        self.at += 1;
                    }
                    return Some(start);
                }
                _ => self.token(1, Prev::Operator),
            }
        }
        None
    }

    fn token(&mut self, len: usize, kind: Prev) {
        self.at += len;
        self.prev = kind;
        self.newline = false;
    }

    /// Whether a statement may start at the word just read: at the top
    /// level, after a statement's end, or on a new line after a value
    /// (where a semicolon is inserted).
    fn statement_start(&self) -> bool {
        self.open.is_empty()
            && match self.prev {
                Prev::Start | Prev::StatementEnd => true,
                Prev::Value => self.newline,
                Prev::Operator => false,
            }
    }

    /// Whether `(` comes next, comments and spaces aside.
    fn paren_follows(&self) -> bool {
        let mut probe = Scanner {
            bytes: self.bytes,
            at: self.at,
            open: Vec::new(),
            prev: Prev::Operator,
            newline: false,
        };
        loop {
            match probe.bytes.get(probe.at) {
                Some(b) if b.is_ascii_whitespace() => probe.at += 1,
                Some(b'/') if probe.bytes.get(probe.at + 1) == Some(&b'/') => probe.line_comment(),
                Some(b'/') if probe.bytes.get(probe.at + 1) == Some(&b'*') => probe.block_comment(),
                Some(b) => return *b == b'(',
                None => return false,
            }
        }
    }

    fn line_comment(&mut self) {
        while self
            .bytes
            .get(self.at)
            .is_some_and(|&b| b != b'\n' && b != b'\r')
        {
            self.at += 1;
        }
    }

    fn block_comment(&mut self) {
        self.at += 2;
        while self.at < self.bytes.len() && !self.bytes[self.at..].starts_with(b"*/") {
            if matches!(self.bytes[self.at], b'\n' | b'\r') {
                self.newline = true;
            }
            self.at += 1;
        }
        self.at = (self.at + 2).min(self.bytes.len());
    }

    /// A quoted string, from its opening quote.
    fn string(&mut self, quote: u8) {
        self.at += 1;
        while let Some(&b) = self.bytes.get(self.at) {
            self.at += if b == b'\\' { 2 } else { 1 };
            if b == quote || b == b'\n' {
                return;
            }
        }
    }

    /// A regular expression literal, from its opening slash.
    fn regex(&mut self) {
        self.at += 1;
        let mut class = false;
        while let Some(&b) = self.bytes.get(self.at) {
            self.at += if b == b'\\' { 2 } else { 1 };
            match b {
                b'[' => class = true,
                b']' => class = false,
                b'/' if !class => break,
                b'\n' => return,
                _ => {}
            }
        }
        while self.bytes.get(self.at).is_some_and(|&b| is_word_byte(b)) {
            self.at += 1;
        }
    }

    /// A template literal's text, after its opening `` ` `` or a `}`
    /// closing one of its `${`: up to its end or its next `${`.
    fn template(&mut self) {
        while let Some(&b) = self.bytes.get(self.at) {
            match b {
                b'\\' => self.at += 2,
                b'`' => {
                    self.token(1, Prev::Value);
                    return;
                }
                b'$' if self.bytes.get(self.at + 1) == Some(&b'{') => {
                    self.open.push(b'`');
                    self.token(2, Prev::Operator);
                    return;
                }
                _ => self.at += 1,
            }
        }
    }
}

fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'$' || b >= 0x80
}

/// After these words an expression goes on (a `/` starts a regex).
fn word_kind(word: &[u8]) -> Prev {
    const GO_ON: &[&[u8]] = &[
        b"return",
        b"typeof",
        b"instanceof",
        b"in",
        b"of",
        b"new",
        b"delete",
        b"void",
        b"throw",
        b"case",
        b"do",
        b"else",
        b"yield",
        b"await",
        b"var",
        b"let",
        b"const",
    ];
    if GO_ON.contains(&word) {
        Prev::Operator
    } else {
        Prev::Value
    }
}

#[cfg(test)]
mod tests {
    use super::as_script;

    #[test]
    fn an_anonymous_function_at_a_statement_start_becomes_an_expression() {
        let cases = [
            (
                "function(doc) { emit(doc._id, 1); };",
                "0,function(doc) { emit(doc._id, 1); };",
            ),
            (
                "  /* c */ function (doc) {}\n// end",
                "  /* c */ 0,function (doc) {}\n// end",
            ),
            (
                "var x = 1; function(doc) {}",
                "var x = 1; 0,function(doc) {}",
            ),
            (
                "var x = 1\nfunction(doc) {}",
                "var x = 1\n0,function(doc) {}",
            ),
            (
                "function(a) {}\nfunction(b) {}",
                "0,function(a) {}\n0,function(b) {}",
            ),
            (
                "if (x) { y(); } function(a) {}",
                "if (x) { y(); } 0,function(a) {}",
            ),
        ];
        for (source, script) in cases {
            assert_eq!(as_script(source), script, "{source}");
        }
    }

    #[test]
    fn everything_else_is_left_as_it_was() {
        let unchanged = [
            "(function(doc) {});",
            "function foo(doc) {}",
            "x = function(doc) {}",
            "(doc) => { emit(doc._id, 1); }",
            "x = function(doc) { var f = function(a) { return a; }; emit(f(1)); }",
            "x = function(doc) { emit('function(', /function(/g, `function(${ {a: 1}.a }`); }",
            "var s = 'a;b'; // function(doc) {}\n",
            "/* function(x) {} */",
            "a = b\n/function(/.test(c)",
        ];
        for source in unchanged {
            assert_eq!(as_script(source), source);
        }
    }

    #[test]
    fn nested_templates_and_regexes_keep_the_depth() {
        let source = "var t = `a${ `b${ {c: 1}.c }` }`; var r = /[/]}/; function(doc) {}";
        assert_eq!(
            as_script(source),
            "var t = `a${ `b${ {c: 1}.c }` }`; var r = /[/]}/; 0,function(doc) {}"
        );
    }
}

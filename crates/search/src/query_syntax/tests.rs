//! The parser's cases, as tables rendered in a Lucene-like notation.

use super::*;

/// The AST in a Lucene-like notation: groups in parentheses, `W<..>` wildcards (escaped
/// literals as `\*`), `<*`/`*>` open range ends.
fn show(n: &Node) -> String {
    let f = |field: &Option<String>| field.as_ref().map_or(String::new(), |f| f.clone() + ":");
    let end = |e: &Endpoint, incl: &str, excl: &str| match e {
        Endpoint::Open => "*".to_owned(),
        Endpoint::Included(s) => format!("{incl}{s}"),
        Endpoint::Excluded(s) => format!("{excl}{s}"),
    };
    match n {
        Node::All => "ALL".into(),
        Node::Boolean(cs) => {
            let cs: Vec<String> = cs
                .iter()
                .map(|(o, n)| {
                    let o = match o {
                        Occur::Should => "",
                        Occur::Must => "+",
                        Occur::MustNot => "-",
                    };
                    format!("{o}{}", show(n))
                })
                .collect();
            format!("({})", cs.join(" "))
        }
        Node::Term { field, text } => format!("{}{text}", f(field)),
        Node::Phrase { field, text, slop } => format!("{}\"{text}\"~{slop}", f(field)),
        Node::Wildcard { field, pattern } => {
            let p: String = pattern
                .iter()
                .map(|p| match p {
                    WildPiece::Literal(c @ ('*' | '?')) => format!("\\{c}"),
                    WildPiece::Literal(c) => c.to_string(),
                    WildPiece::AnyOne => "?".into(),
                    WildPiece::AnyMany => "*".into(),
                })
                .collect();
            format!("{}W<{p}>", f(field))
        }
        Node::Fuzzy {
            field,
            text,
            distance,
        } => format!("{}{text}~{distance}", f(field)),
        Node::Regex { field, pattern } => format!("{}/{pattern}/", f(field)),
        Node::Range {
            field,
            lower,
            upper,
        } => {
            let (l, u) = (end(lower, "[", "{"), end(upper, "", ""));
            let close = match upper {
                Endpoint::Excluded(_) => "}",
                _ => "]",
            };
            let open = if *lower == Endpoint::Open { "<" } else { "" };
            format!("{}{open}{l} TO {u}{close}", f(field))
        }
        Node::Boost(n, b) => format!("{}^{b}", show(n)),
    }
}

fn check(cases: &[(&str, &str)]) {
    for (q, want) in cases {
        match parse(q) {
            Ok(n) => assert_eq!(show(&n), *want, "query {q:?}"),
            Err(e) => panic!("query {q:?}: {e}"),
        }
    }
}

/// Each query fails with a message holding the query, then the given text.
fn check_err(cases: &[(&str, &str)]) {
    for (q, want) in cases {
        let e = parse(q).expect_err(q).0;
        assert!(
            e.starts_with(&format!("Cannot parse '{q}': ")),
            "{q:?}: {e}"
        );
        assert!(e.contains(want), "query {q:?}: {e}");
    }
}

#[test]
fn terms_and_default_or() {
    check(&[
        ("foo", "foo"),
        ("  foo\t", "foo"),
        ("a b", "(a b)"),
        ("a-b a+b &&a a&&b", "(a-b a+b &&a a&&b)"),
        ("ANDROID NOTE ORE", "(ANDROID NOTE ORE)"),
        ("a and or not b", "(a and or not b)"),
        ("\\AND \\OR", "(AND OR)"),
        // As Lucene: `-` before whitespace is a word, `!` ends a word.
        ("a - b", "(a - b)"),
        ("a!b", "(a -b)"),
    ]);
}

#[test]
fn modifiers_and_conjunctions() {
    check(&[
        ("+a", "(+a)"),
        ("-a", "(-a)"),
        ("NOT a", "(-a)"),
        ("+a -b !c NOT d e", "(+a -b -c -d e)"),
        ("-a-b", "(-a-b)"),
        ("a AND b", "(+a +b)"),
        ("a && b", "(+a +b)"),
        ("a OR b", "(a b)"),
        ("a || b", "(a b)"),
        // QueryParserBase.addClause with the default operator OR.
        ("a AND b OR c", "(+a +b c)"),
        ("a OR b AND c", "(a +b +c)"),
        ("a AND NOT b", "(+a -b)"),
        ("-a AND b", "(-a +b)"),
        ("a NOT b", "(a -b)"),
        ("+a OR b", "(+a b)"),
        ("a AND b AND -c OR d", "(+a +b -c d)"),
    ]);
}

#[test]
fn groups_and_fields() {
    check(&[
        ("(a)", "a"),
        ("((a))^2", "a^2"),
        ("(a b) c", "((a b) c)"),
        ("+(a OR b) -c", "(+(a b) -c)"),
        ("(a (b))", "(a b)"),
        ("title:foo", "title:foo"),
        ("title : foo", "title:foo"),
        ("f:(a g:b)", "(f:a g:b)"),
        ("f:(a g:b)^3", "(f:a g:b)^3"),
        ("f:(+a (b \"c\"))", "(+f:a (f:b f:\"c\"~0))"),
        ("my.field_1-x:v", "my.field_1-x:v"),
        ("a\\:b:c", "a:b:c"),
        ("*:*", "ALL"),
        ("*:*^2", "ALL^2"),
        ("*:(*)", "ALL"),
        ("*:x", "*:x"),
        ("f:*", "f:W<*>"),
        ("foo\\ bar:baz", "foo bar:baz"),
        ("(a AND b) OR (c AND d)", "((+a +b) (+c +d))"),
        ("t:\"x y\"~2^3 AND -b:z*", "(+t:\"x y\"~2^3 -b:W<z*>)"),
        ("*", "W<*>"),
    ]);
}

#[test]
fn escapes() {
    check(&[
        ("a\\ b", "a b"),
        ("\\(x\\)\\+\\-\\!\\~\\^\\\\\\:\\/", "(x)+-!~^\\:/"),
        ("\\u0041bc", "Abc"),
        ("\\uD83D\\uDE00", "\u{1F600}"),
        ("\"\\u00e9t\\u00E9\"", "\"été\"~0"),
    ]);
    check_err(&[
        (
            "\\u00",
            "Truncated unicode escape sequence at line 1, column 1.",
        ),
        (
            "\\u00zz",
            "Non-hex character in Unicode escape sequence: z at line 1, column 5.",
        ),
        ("\\uD83D", "Unpaired surrogate"),
        ("\\uD83D\\u0041", "Unpaired surrogate"),
        ("\\uD83DxuDE00", "Unpaired surrogate"),
        ("\\uDE00", "Unpaired surrogate"),
        (
            "a\\",
            "Encountered \"<EOF>\" after \"\\\" at line 1, column 2.",
        ),
    ]);
}

#[test]
fn wildcards() {
    check(&[
        ("dat*", "W<dat*>"),
        ("te?t", "W<te?t>"),
        ("*ing", "W<*ing>"),
        ("a\\*b*", "W<a\\*b*>"),
        ("a*~2^3", "W<a*>^3"),
        ("a\\*\\?", "a*?"),
        ("f:te?t", "f:W<te?t>"),
        ("?", "W<?>"),
    ]);
    check_err(&[("fo*:bar", "Encountered \":\" at line 1, column 4.")]);
}

#[test]
fn phrases() {
    check(&[
        ("\"a b\"", "\"a b\"~0"),
        ("\"a \\\"q\\\" b\"", "\"a \"q\" b\"~0"),
        ("\"a b\"~3", "\"a b\"~3"),
        ("\"a b\"~2.7", "\"a b\"~2"),
        ("\"a b\"~x", "\"a b\"~0"),
        ("\"a b\"^2", "\"a b\"~0^2"),
        ("\"a b\"~3^2", "\"a b\"~3^2"),
        ("\"\"", "\"\"~0"),
        ("f:\"x y\"", "f:\"x y\"~0"),
    ]);
    check_err(&[("\"a\"^2~3", "Encountered \"~3\" at line 1, column 6.")]);
}

#[test]
fn fuzzy() {
    check(&[
        ("word~", "word~2"),
        ("word~1", "word~1"),
        ("word~0", "word~0"),
        ("word~5", "word~2"),
        ("word ~1", "word~1"),
        // floatToEdits: (1 - 0.8f) * code points, truncated: 0.8 and 1.999...
        ("word~0.8", "word~0"),
        ("abcdefghij~0.8", "abcdefghij~1"),
        ("word~0.5", "word~2"),
        ("word~abc", "word~2"),
        ("f:a~1^2", "f:a~1^2"),
        ("a^2~1", "a~1^2"),
    ]);
    check_err(&[
        (
            "word~1.5",
            "Fractional edit distances are not allowed! at line 1, column 5.",
        ),
        ("word~-1", "has to be between 0.0f and 1.0f"),
    ]);
}

#[test]
fn regex() {
    check(&[("/ab+c/", "/ab+c/"), ("f:/a\\/b\\d/^2", "f:/a/b\\d/^2")]);
    check_err(&[(
        "a/b",
        "Was expecting '/' to close the regular expression opened at line 1, column 2.",
    )]);
}

#[test]
fn ranges() {
    check(&[
        ("[a TO b]", "[a TO b]"),
        ("{a TO b}", "{a TO b}"),
        ("[a TO b}", "[a TO b}"),
        ("{a TO b]", "{a TO b]"),
        ("[* TO 5]", "<* TO 5]"),
        ("f:{a TO *}", "f:{a TO *]"),
        ("[\"a b\" TO \"*\"]", "[a b TO *]"),
        ("[a\\ b TO c\\]]", "[a b TO c]]"),
        ("[a b]", "[a TO b]"),
        ("n:[-1.5 TO 1e3]^2", "n:[-1.5 TO 1e3]^2"),
        ("+n:[-1.5 TO 1e3] x", "(+n:[-1.5 TO 1e3] x)"),
    ]);
    check_err(&[
        ("[a TO b", "Encountered \"<EOF>\" at line 1, column 7."),
        (
            "[a TO ]",
            "Encountered \"]\" at line 1, column 7. Was expecting a range endpoint.",
        ),
        ("[a to b]", "Encountered \"b\" at line 1, column 7."),
    ]);
    // A quoted `*` is a value, a bare one is open.
    assert_eq!(
        parse("[\"*\" TO *]").ok(),
        Some(Node::Range {
            field: None,
            lower: Endpoint::Included("*".into()),
            upper: Endpoint::Open
        })
    );
}

#[test]
fn boosts() {
    check(&[
        ("a^2.5", "a^2.5"),
        ("a ^2", "a^2"),
        ("(a b)^3 c", "((a b)^3 c)"),
    ]);
    check_err(&[
        (
            "a^",
            "Encountered \"<EOF>\" at line 1, column 2. Was expecting a number after '^'.",
        ),
        ("a^x", "Encountered \"x\" at line 1, column 3."),
        ("a^ 2", "Encountered \"2\" at line 1, column 4."),
        ("a^2^3", "Encountered \"^\" at line 1, column 4."),
    ]);
}

#[test]
fn errors_name_the_query_and_position() {
    assert_eq!(
        parse("foo:(").map_err(|e| e.0),
        Err(
            "Cannot parse 'foo:(': Encountered \"<EOF>\" at line 1, column 5. \
                 Was expecting a term, phrase, range, regular expression or \"(\"."
                .to_owned()
        )
    );
    check_err(&[
        ("", "Encountered \"<EOF>\" at line 1, column 0."),
        (" \t ", "Encountered \"<EOF>\""),
        (
            "(a",
            "Encountered \"<EOF>\" at line 1, column 2. Was expecting \")\"",
        ),
        ("a)", "Encountered \")\" at line 1, column 2."),
        ("()", "Encountered \")\" at line 1, column 2."),
        (
            "\"abc",
            "Was expecting '\"' to close the quote opened at line 1, column 1.",
        ),
        ("a AND", "Encountered \"<EOF>\" at line 1, column 5."),
        ("a AND OR b", "Encountered \"OR\" at line 1, column 7."),
        (":", "Encountered \":\" at line 1, column 1."),
        ("f:", "Encountered \"<EOF>\" at line 1, column 2."),
        ("a]", "Encountered \"]\" at line 1, column 2."),
        ("+-a", "Encountered \"-\" at line 1, column 2."),
        ("a -", "Encountered \"<EOF>\" at line 1, column 3."),
        ("NOT", "Encountered \"<EOF>\" at line 1, column 3."),
        ("a:b:c", "Encountered \":\" at line 1, column 4."),
        ("a~2~3", "Encountered \"~3\" at line 1, column 4."),
        ("[a TO b]~2", "Encountered \"~2\" at line 1, column 9."),
        ("a\n  b:)", "Encountered \")\" at line 2, column 5."),
    ]);
}

#[test]
fn nesting_is_bounded() {
    let nested = |n: usize| format!("{}a{}", "(".repeat(n), ")".repeat(n));
    check(&[(&nested(MAX_DEPTH), "a")]);
    check_err(&[
        (&nested(MAX_DEPTH + 1), "Too many nested groups"),
        (&"(".repeat(100_000), "Too many nested groups"),
    ]);
    assert!(parse(&"a ".repeat(100_000)).is_ok());
}

#[test]
fn garbage_never_panics() {
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state as usize
    };
    for alphabet in ["ab:\"()[]{}^~*?\\+-! TOANDOR/&|\n", "\\uD8C0E9a~^1.[]\" "] {
        let alphabet: Vec<char> = alphabet.chars().collect();
        for _ in 0..20_000 {
            let len = next() % 16;
            let q: String = (0..len)
                .map(|_| alphabet[next() % alphabet.len()])
                .collect();
            if let Err(e) = parse(&q) {
                assert!(
                    e.0.starts_with(&format!("Cannot parse '{q}': ")),
                    "{q:?}: {e}"
                );
            }
        }
    }
}

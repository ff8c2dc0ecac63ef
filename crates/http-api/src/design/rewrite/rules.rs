//! The array form of `rewrites`: rules `{from, to, method, query,
//! formats}` matched in order against the path after `_rewrite`, as
//! CouchDB's `chttpd_rewrite` matches them. Pure code: the handler turns
//! the relative target it gives into a request.
//!
//! CouchDB's details are kept, odd ones included, because applications
//! rely on them: every rule is read before any is matched (one bad rule
//! fails every request), `:name` in `to` or in a `query` value takes the
//! path's or the query string's value, `*` in `from` keeps the rest of the
//! path for `*` in `to` (which drops what follows it), the view keys
//! (`key`, `startkey`...) are JSON in and out, other query values must be
//! text (a number is CouchDB's 500 `badarg`), and the query string is
//! written in CouchDB's order.

use serde_json::{Map, Value};

use crate::base::error::ApiError;

/// Query parameters that hold JSON: decoded when they become variables,
/// encoded when they are written back.
const JSON_KEYS: &[&str] = &["key", "startkey", "start_key", "endkey", "end_key", "keys"];

/// One segment of a rule's `from` or `to`.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Literal(String),
    /// `:name`; `*` is the variable named `*` (the rest of the path as the
    /// last segment of `from` or anywhere in `to`).
    Var(String),
}

#[derive(Debug, Clone, PartialEq)]
enum MethodRule {
    Any,
    Exactly(String),
    /// A `method` that is not text matches nothing, as in CouchDB.
    Never,
}

/// One rule, read.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Rule {
    method: MethodRule,
    from: Vec<Part>,
    to: Vec<Part>,
    query: Vec<(String, Value)>,
    formats: Map<String, Value>,
}

/// Variables and query parameters, in CouchDB's order: the first of a
/// name is the one that counts.
type Bindings = Vec<(String, Value)>;

/// CouchDB's 500 for a rule it cannot read (an Erlang `badarg`).
fn badarg() -> ApiError {
    ApiError::Status {
        status: axum::http::StatusCode::INTERNAL_SERVER_ERROR,
        error: "unknown_error",
        reason: "badarg".into(),
    }
}

/// CouchDB's 500 for a rule member of the wrong type.
fn case_clause(value: &Value) -> ApiError {
    ApiError::Status {
        status: axum::http::StatusCode::INTERNAL_SERVER_ERROR,
        error: "case_clause",
        reason: ejson::to_string(value),
    }
}

/// Reads every rule (members that are not objects are skipped, as
/// CouchDB skips them). `secure` refuses a path with more than two `..`
/// (CouchDB's `secure_rewrites`).
pub(crate) fn read(rules: &[Value], secure: bool) -> Result<Vec<Rule>, ApiError> {
    rules
        .iter()
        .filter_map(Value::as_object)
        .map(|rule| read_rule(rule, secure))
        .collect()
}

fn read_rule(rule: &Map<String, Value>, secure: bool) -> Result<Rule, ApiError> {
    let method = match rule.get("method") {
        None => MethodRule::Any,
        Some(Value::String(m)) if m == "*" => MethodRule::Any,
        Some(Value::String(m)) => MethodRule::Exactly(m.clone()),
        Some(_) => MethodRule::Never,
    };
    let query = match rule.get("query") {
        None => Vec::new(),
        Some(Value::Object(args)) => args.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        Some(other) => return Err(case_clause(other)),
    };
    let from = match rule.get("from") {
        None => vec![Part::Var("*".into())],
        Some(Value::String(from)) => parse_path(from, secure)?,
        Some(_) => return Err(badarg()),
    };
    let to = match rule.get("to") {
        None => {
            return Err(ApiError::Failed {
                error: "error",
                reason: "invalid_rewrite_target".into(),
            });
        }
        Some(Value::String(to)) => parse_path(to, secure)?,
        Some(_) => return Err(badarg()),
    };
    let formats = match rule.get("formats") {
        None => Map::new(),
        Some(Value::Object(formats)) => formats.clone(),
        Some(other) => return Err(case_clause(other)),
    };
    Ok(Rule {
        method,
        from,
        to,
        query,
        formats,
    })
}

/// `a/:b/*` as parts; empty segments vanish. A third `..` is refused
/// unless rewrites may leave the database.
fn parse_path(path: &str, secure: bool) -> Result<Vec<Part>, ApiError> {
    let mut parts = Vec::new();
    let mut dot_dots = 0;
    for segment in path.split('/').filter(|s| !s.is_empty()) {
        if segment == ".." {
            if dot_dots == 2 && secure {
                tracing::info!(rule = path, "an insecure rewrite rule was blocked");
                return Err(ApiError::Failed {
                    error: "insecure_rewrite_rule",
                    reason: "too many ../.. segments".into(),
                });
            }
            dot_dots += 1;
        }
        parts.push(match segment.strip_prefix(':') {
            _ if segment == "*" => Part::Var("*".into()),
            Some(name) => Part::Var(name.into()),
            None => Part::Literal(segment.into()),
        });
    }
    Ok(parts)
}

/// The request's query string as variables: the view keys decoded from
/// JSON (400 when they are not), the rest as text.
pub(crate) fn query_bindings(pairs: &[(String, String)]) -> Result<Bindings, ApiError> {
    pairs
        .iter()
        .map(|(k, v)| {
            let value = if JSON_KEYS.contains(&k.as_str()) {
                ejson::from_str(v)?
            } else {
                Value::String(v.clone())
            };
            Ok((k.clone(), value))
        })
        .collect()
}

/// The first rule that takes `method` and `segments` (the decoded path
/// after `_rewrite`), as a path relative to the design document with its
/// query string; `None` when none does.
pub(crate) fn apply(
    rules: &[Rule],
    method: &str,
    segments: &[String],
    query: &Bindings,
) -> Result<Option<String>, ApiError> {
    for rule in rules {
        let takes = match &rule.method {
            MethodRule::Any => true,
            MethodRule::Exactly(m) => m == method,
            MethodRule::Never => false,
        };
        if !takes {
            continue;
        }
        let Some((remaining, mut bindings)) = bind_path(&rule.from, segments) else {
            continue;
        };
        bindings.extend(query.iter().cloned());
        let args = query_args(rule, &bindings);
        let mut all: Bindings = bindings
            .into_iter()
            .filter(|(k, _)| !args.iter().any(|(a, _)| a == k))
            .collect();
        all.extend(args);
        let path = new_path(&rule.to, &all, remaining)?;
        let mut target = path.iter().map(quote_plus).collect::<Vec<_>>().join("/");
        let mut pairs = Vec::new();
        for (key, value) in all.iter().rev() {
            if key == "*" {
                continue;
            }
            let bytes = if JSON_KEYS.contains(&key.as_str()) {
                ejson::to_vec(value)
            } else {
                iolist(value)?
            };
            pairs.push(format!(
                "{}={}",
                quote_plus(key.as_bytes()),
                quote_plus(&bytes)
            ));
        }
        if !pairs.is_empty() {
            target.push('?');
            target.push_str(&pairs.join("&"));
        }
        return Ok(Some(target));
    }
    Ok(None)
}

/// Matches `from` against the path: what `*` left over and the variables
/// bound (the last one first, as CouchDB gathers them).
fn bind_path<'a>(from: &[Part], segments: &'a [String]) -> Option<(&'a [String], Bindings)> {
    let mut bindings = Vec::new();
    let mut at = 0;
    for (i, part) in from.iter().enumerate() {
        if i + 1 == from.len() && *part == Part::Var("*".into()) {
            bindings.reverse();
            return Some((&segments[at..], bindings));
        }
        let segment = segments.get(at)?;
        match part {
            Part::Var(name) => bindings.push((name.clone(), Value::String(segment.clone()))),
            Part::Literal(text) if text == segment => {}
            Part::Literal(_) => return None,
        }
        at += 1;
    }
    bindings.reverse();
    (at == segments.len()).then_some((&[][..], bindings))
}

/// The rule's `query` with its variables replaced, in reverse order (as
/// CouchDB builds it; the query string is written reversed again).
fn query_args(rule: &Rule, bindings: &Bindings) -> Bindings {
    let mut args: Bindings = rule
        .query
        .iter()
        .map(|(key, value)| {
            let value = match value {
                Value::String(text) => replace_var(text, bindings, &rule.formats),
                Value::Array(items) => Value::Array(
                    items
                        .iter()
                        .map(|item| match item {
                            Value::String(text) if text.starts_with(':') => {
                                get_var(&text[1..], bindings, item, &rule.formats)
                            }
                            other => other.clone(),
                        })
                        .collect(),
                ),
                other => other.clone(),
            };
            (key.clone(), value)
        })
        .collect();
    args.reverse();
    args
}

fn replace_var(text: &str, bindings: &Bindings, formats: &Map<String, Value>) -> Value {
    let original = Value::String(text.to_string());
    if text == "*" {
        get_var("*", bindings, &original, formats)
    } else if let Some(name) = text.strip_prefix(':') {
        get_var(name, bindings, &original, formats)
    } else {
        original
    }
}

/// A variable's value (or `default`), converted by its `formats` entry.
fn get_var(
    name: &str,
    bindings: &Bindings,
    default: &Value,
    formats: &Map<String, Value>,
) -> Value {
    let value = bindings
        .iter()
        .find(|(k, _)| k == name)
        .map_or(default, |(_, v)| v)
        .clone();
    // Text that does not convert comes back as CouchDB's Erlang leaves
    // it: a list of bytes (`[32,53]` for " 5"), which is JSON as such and
    // the same text again in a query string.
    let bytes = |text: &str| Value::Array(text.bytes().map(Value::from).collect());
    match (formats.get(name).and_then(Value::as_str), &value) {
        (Some("int"), Value::String(text)) => {
            let digits = text.strip_prefix('+').unwrap_or(text);
            let unsigned = digits.strip_prefix('-').unwrap_or(digits);
            match unsigned.bytes().all(|b| b.is_ascii_digit()) && !unsigned.is_empty() {
                true => ejson::from_str(digits).unwrap_or_else(|_| bytes(text)),
                false => bytes(text),
            }
        }
        (Some("bool"), Value::String(text)) => match text.to_ascii_lowercase().as_str() {
            "true" => Value::Bool(true),
            "false" => Value::Bool(false),
            _ => bytes(text),
        },
        _ => value,
    }
}

/// `to` with its variables replaced; `*` ends it with the rest of the path.
fn new_path(
    to: &[Part],
    bindings: &Bindings,
    remaining: &[String],
) -> Result<Vec<Vec<u8>>, ApiError> {
    let mut out = Vec::new();
    for part in to {
        match part {
            Part::Var(name) if name == "*" => {
                out.extend(remaining.iter().map(|s| s.as_bytes().to_vec()));
                return Ok(out);
            }
            Part::Var(name) => match bindings.iter().find(|(k, _)| k == name) {
                Some((_, value)) => out.push(iolist(value)?),
                None => out.push(b"undefined".to_vec()),
            },
            Part::Literal(text) => out.push(text.as_bytes().to_vec()),
        }
    }
    Ok(out)
}

/// A value as the bytes Erlang's `iolist_to_binary` makes of it: text, or
/// a list of text, lists and bytes (integers 0 to 255); anything else
/// (a number alone too) is `badarg`.
fn iolist(value: &Value) -> Result<Vec<u8>, ApiError> {
    if !value.is_string() && !value.is_array() {
        return Err(badarg());
    }
    let mut out = Vec::new();
    let mut stack = vec![value];
    while let Some(value) = stack.pop() {
        match value {
            Value::String(text) => out.extend_from_slice(text.as_bytes()),
            Value::Array(items) => stack.extend(items.iter().rev()),
            Value::Number(n) => match n.as_u64().and_then(|b| u8::try_from(b).ok()) {
                Some(byte) => out.push(byte),
                None => return Err(badarg()),
            },
            _ => return Err(badarg()),
        }
    }
    Ok(out)
}

/// Percent-encodes all but letters, digits and `.-~_`, a space as `+`
/// (CouchDB's `quote_plus`).
pub(crate) fn quote_plus(bytes: impl AsRef<[u8]>) -> String {
    let mut out = String::new();
    for &b in bytes.as_ref() {
        match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'.' | b'-' | b'~' | b'_' => {
                out.push(char::from(b))
            }
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// Percent-encodes all but letters, digits and `_.-:` (CouchDB's
/// `url_encode`, which writes the design document's own path).
pub(crate) fn url_encode(text: &str) -> String {
    let mut out = String::new();
    for b in text.bytes() {
        match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' | b'.' | b'-' | b':' => {
                out.push(char::from(b))
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// Resolves `.` and `..` segments and drops empty ones, as CouchDB
/// normalizes a rewritten path (a `..` past the root stays).
pub(crate) fn normalize(path: &str) -> String {
    let mut kept: Vec<&str> = Vec::new();
    for segment in path.split('/').filter(|s| !s.is_empty()) {
        match segment {
            "." => {}
            ".." if kept.last().is_none_or(|last| *last == "..") => kept.push(".."),
            ".." => {
                kept.pop();
            }
            other => kept.push(other),
        }
    }
    format!("/{}", kept.join("/"))
}

#[cfg(test)]
#[path = "rules_tests.rs"]
mod tests;

//! Mango selectors: the query language of `_find`, `_index` partial filters
//! and `_changes?filter=_selector`.
//!
//! A selector is parsed once into a validated tree ([`Selector::parse`]) and
//! then tested against any number of documents ([`Selector::matches`]), so a
//! bad selector is rejected up front as a 400 and matching itself never fails.
//!
//! The behaviour follows Apache CouchDB 3.x (`mango_selector.erl`), including
//! its normalization, because clients rely on its exact results:
//!
//! * Implicit forms become explicit: `{"a": 1}` is `{"a": {"$eq": 1}}`, several
//!   keys in one object are an `$and`, and a nested object without operators
//!   is a dotted path (`{"a": {"b": 1}}` is `{"a.b": 1}`). Field names are
//!   pushed down through `$and`/`$or`/`$not`/`$nor`, so
//!   `{"a": {"$or": [{"$lt": 1}, {"$gt": 9}]}}` is `$or` of two conditions on `a`.
//! * Negations are pushed down to the conditions with De Morgan's laws
//!   (`$not` of `$gt` is `$lte`, `$nor` is an `$and` of negations, ...). A
//!   condition only ever matches a field that is present, except
//!   `$exists: false`, so after this rewriting `$ne`, `$nin` and `$not` do
//!   **not** match documents that lack the field, exactly as in CouchDB: the
//!   only way to select missing fields is `$exists: false` (also reached
//!   through negation, e.g. `{"$not": {"a": {"$exists": true}}}`).
//! * Like CouchDB, the sub-selectors of `$elemMatch`, `$allMatch` and
//!   `$keyMapMatch` are not negation-normalized, so inside them `$not` is a
//!   plain logical "not": `{"$elemMatch": {"$not": {"b": 1}}}` matches an
//!   element without `b`.
//! * Values are compared with CouchDB's view collation (null < booleans <
//!   numbers < strings < arrays < objects; strings by ICU's root collation),
//!   from [`crate::collation`].
//!
//! Known differences from CouchDB:
//!
//! * `$regex` uses the `regex` crate, not PCRE: look-around and
//!   backreferences are rejected as invalid patterns, and matching is by
//!   Unicode character (CouchDB's PCRE runs without its UTF-8 mode, so there
//!   `.` is one byte).
//! * `$nor` inside an `$elemMatch`/`$allMatch`/`$keyMapMatch` sub-selector
//!   means "no clause matches"; CouchDB 3.x cannot evaluate it there and the
//!   sub-selector silently never matches.
//! * `$mod` with a zero divisor is a parse error (CouchDB fails at match time).
//! * `$text` is refused as unsupported: it needs a full-text index.

use std::cmp::Ordering;

use regex::Regex;
use serde_json::{Map, Value};

use crate::collation::*;

/// How deeply a selector may nest: deeper input is rejected at parse time so
/// that parsing and matching, which recurse, can never exhaust the stack.
const MAX_DEPTH: usize = 200;

/// How much of an offending value an error message quotes, so a huge bad
/// argument does not turn into a huge error response.
const MAX_QUOTED_CHARS: usize = 80;

/// A parsed, validated Mango selector, ready to match documents.
///
/// Parsing does all validation and normalization once, so matching is a pure
/// walk over the tree that cannot fail or panic whatever the document holds.
#[derive(Debug, Clone)]
pub struct Selector {
    root: Node,
}

/// Why a selector was rejected. The message names the offending operator or
/// field and is meant to be shown to the user as a 400 `bad_request` reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SelectorError(pub String);

impl Selector {
    /// Parses and validates a selector (a JSON object), normalizing it the way
    /// CouchDB does so that matching has CouchDB's results.
    pub fn parse(value: &Value) -> Result<Selector, SelectorError> {
        // First, so that nothing below (error messages included) recurses
        // deeper than this.
        if nesting_exceeds(value, MAX_DEPTH) {
            return Err(SelectorError(format!(
                "Selector is nested more than {MAX_DEPTH} levels deep"
            )));
        }
        let Value::Object(map) = value else {
            return Err(SelectorError(format!(
                "Selector must be a JSON object, not: {}",
                quote(value)
            )));
        };
        if map.is_empty() {
            // The empty selector matches every document.
            return Ok(Selector {
                root: Node::And(Vec::new()),
            });
        }
        let root = push_negations(parse_node(value, &[])?);
        if let Node::Field { path, .. } = &root
            && path.is_empty()
        {
            // E.g. `{"$gt": 1}`: a condition on nothing.
            return Err(SelectorError(
                "One or more conditions is missing a field name.".to_string(),
            ));
        }
        Ok(Selector { root })
    }

    /// Whether `doc` (a document body) satisfies the selector.
    pub fn matches(&self, doc: &Value) -> bool {
        self.root.matches(doc)
    }
}

/// A node of the normalized selector tree.
#[derive(Debug, Clone)]
enum Node {
    /// All must match; the empty `$and` matches everything.
    And(Vec<Node>),
    /// One must match; the empty `$or` also matches everything (as in CouchDB).
    Or(Vec<Node>),
    /// Left only inside `$elemMatch`-like sub-selectors, which CouchDB does
    /// not negation-normalize.
    Not(Box<Node>),
    /// Likewise only inside sub-selectors: none may match.
    Nor(Vec<Node>),
    /// A condition on the value at `path` (the empty path is the value itself,
    /// as for the elements tested by `$elemMatch`).
    Field { path: Vec<String>, cond: Cond },
}

/// A terminal condition on one value.
#[derive(Debug, Clone)]
enum Cond {
    Compare(CompareOp, Value),
    In(Vec<Value>),
    Nin(Vec<Value>),
    All(Vec<Value>),
    Exists(bool),
    Type(String),
    Mod {
        divisor: i128,
        remainder: i128,
    },
    Regex(Regex),
    Size(u64),
    BeginsWith(String),
    ElemMatch(Box<Node>),
    AllMatch(Box<Node>),
    KeyMapMatch(Box<Node>),
    /// The negation of a condition that has no direct opposite (`$size`,
    /// `$regex`, `$elemMatch`, ...).
    Not(Box<Cond>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CompareOp {
    Lt,
    Lte,
    Eq,
    Ne,
    Gte,
    Gt,
}

impl CompareOp {
    fn negate(self) -> CompareOp {
        match self {
            CompareOp::Lt => CompareOp::Gte,
            CompareOp::Lte => CompareOp::Gt,
            CompareOp::Eq => CompareOp::Ne,
            CompareOp::Ne => CompareOp::Eq,
            CompareOp::Gte => CompareOp::Lt,
            CompareOp::Gt => CompareOp::Lte,
        }
    }

    fn holds(self, ordering: Ordering) -> bool {
        match self {
            CompareOp::Lt => ordering == Ordering::Less,
            CompareOp::Lte => ordering != Ordering::Greater,
            CompareOp::Eq => ordering == Ordering::Equal,
            CompareOp::Ne => ordering != Ordering::Equal,
            CompareOp::Gte => ordering != Ordering::Less,
            CompareOp::Gt => ordering == Ordering::Greater,
        }
    }
}

// ---------------------------------------------------------------------------
// Parsing

/// Parses the selector `value` standing at `path`: operators keep the path,
/// field names extend it, anything that is not an object is an equality.
fn parse_node(value: &Value, path: &[String]) -> Result<Node, SelectorError> {
    let Value::Object(map) = value else {
        return Ok(field(path, Cond::Compare(CompareOp::Eq, value.clone())));
    };
    if map.is_empty() {
        // `{"a": {}}` asks for an empty object, not for "anything".
        return Ok(field(
            path,
            Cond::Compare(CompareOp::Eq, Value::Object(Map::new())),
        ));
    }
    let mut nodes = map
        .iter()
        .map(|(key, arg)| parse_member(key, arg, path))
        .collect::<Result<Vec<_>, _>>()?;
    if nodes.len() == 1
        && let Some(node) = nodes.pop()
    {
        return Ok(node);
    }
    Ok(Node::And(nodes))
}

/// One `key: arg` member of a selector object: an operator or a field name.
fn parse_member(key: &str, arg: &Value, path: &[String]) -> Result<Node, SelectorError> {
    if key.starts_with('$') {
        return parse_operator(key, arg, path);
    }
    let mut full = path.to_vec();
    full.extend(parse_field_name(key)?);
    parse_node(arg, &full)
}

fn parse_operator(op: &str, arg: &Value, path: &[String]) -> Result<Node, SelectorError> {
    let cond = match op {
        "$and" | "$or" | "$nor" => {
            let Value::Array(items) = arg else {
                return Err(bad_arg(op, arg, "expected an array of selectors"));
            };
            let nodes = items
                .iter()
                .map(|item| parse_node(item, path))
                .collect::<Result<Vec<_>, _>>()?;
            return Ok(match op {
                "$and" => Node::And(nodes),
                "$or" => Node::Or(nodes),
                _ => Node::Nor(nodes),
            });
        }
        "$not" => {
            if !arg.is_object() {
                return Err(bad_arg(op, arg, "expected a selector object"));
            }
            return Ok(Node::Not(Box::new(parse_node(arg, path)?)));
        }
        "$lt" => Cond::Compare(CompareOp::Lt, arg.clone()),
        "$lte" => Cond::Compare(CompareOp::Lte, arg.clone()),
        "$eq" => Cond::Compare(CompareOp::Eq, arg.clone()),
        "$ne" => Cond::Compare(CompareOp::Ne, arg.clone()),
        "$gte" => Cond::Compare(CompareOp::Gte, arg.clone()),
        "$gt" => Cond::Compare(CompareOp::Gt, arg.clone()),
        "$in" | "$nin" | "$all" => {
            let Value::Array(items) = arg else {
                return Err(bad_arg(op, arg, "expected an array"));
            };
            let items = items.clone();
            match op {
                "$in" => Cond::In(items),
                "$nin" => Cond::Nin(items),
                _ => Cond::All(items),
            }
        }
        "$exists" => match arg {
            Value::Bool(should_exist) => Cond::Exists(*should_exist),
            _ => return Err(bad_arg(op, arg, "expected true or false")),
        },
        "$type" => match arg {
            // Like CouchDB, an unknown type name is accepted and matches nothing.
            Value::String(name) => Cond::Type(name.clone()),
            _ => {
                return Err(bad_arg(
                    op,
                    arg,
                    "expected one of \"null\", \"boolean\", \"number\", \"string\", \
                     \"array\", \"object\"",
                ));
            }
        },
        "$mod" => parse_mod(arg)?,
        "$regex" => {
            let Value::String(pattern) = arg else {
                return Err(bad_arg(op, arg, "expected a regular expression string"));
            };
            match Regex::new(pattern) {
                Ok(regex) => Cond::Regex(regex),
                Err(e) => {
                    let reason = format!("invalid regular expression: {}", regex_reason(&e));
                    return Err(bad_arg(op, arg, &reason));
                }
            }
        }
        "$size" => match arg.as_u64() {
            Some(size) => Cond::Size(size),
            None => return Err(bad_arg(op, arg, "expected a non-negative integer")),
        },
        "$beginsWith" => match arg {
            Value::String(prefix) => Cond::BeginsWith(prefix.clone()),
            _ => return Err(bad_arg(op, arg, "expected a string")),
        },
        "$elemMatch" | "$allMatch" | "$keyMapMatch" => {
            if !arg.is_object() {
                return Err(bad_arg(op, arg, "expected a selector object"));
            }
            // The sub-selector applies to each element (or key) on its own.
            let sub = Box::new(parse_node(arg, &[])?);
            match op {
                "$elemMatch" => Cond::ElemMatch(sub),
                "$allMatch" => Cond::AllMatch(sub),
                _ => Cond::KeyMapMatch(sub),
            }
        }
        // Operators CouchDB knows but that need something Recliner lacks
        // (`$text` needs a full-text index, `$default` is its internal form).
        "$text" | "$default" | "$where" | "$geoWithin" | "$geoIntersects" | "$near"
        | "$nearSphere" => {
            return Err(SelectorError(format!("Unsupported operator: {op}")));
        }
        _ => return Err(SelectorError(format!("Invalid operator: {op}"))),
    };
    Ok(field(path, cond))
}

/// `$mod: [divisor, remainder]`, both integers; a zero divisor is refused
/// here rather than failing every match.
fn parse_mod(arg: &Value) -> Result<Cond, SelectorError> {
    let (divisor, remainder) = match arg.as_array().map(Vec::as_slice) {
        Some([divisor, remainder]) => match (integer(divisor), integer(remainder)) {
            (Some(d), Some(r)) => (d, r),
            _ => {
                return Err(bad_arg(
                    "$mod",
                    arg,
                    "expected [divisor, remainder] with two integers",
                ));
            }
        },
        _ => {
            return Err(bad_arg(
                "$mod",
                arg,
                "expected [divisor, remainder] with two integers",
            ));
        }
    };
    if divisor == 0 {
        return Err(bad_arg("$mod", arg, "the divisor must not be zero"));
    }
    Ok(Cond::Mod { divisor, remainder })
}

/// Splits a field name into path segments as CouchDB does: on `.`, except a
/// dot right after a backslash; then every backslash is dropped (so `a\.b` is
/// the single key `a.b`). An empty segment is an error.
fn parse_field_name(name: &str) -> Result<Vec<String>, SelectorError> {
    let invalid = || SelectorError(format!("Invalid field name: {}", quote_str(name)));
    let mut segments = Vec::new();
    let mut current = String::new();
    let mut previous = None;
    for c in name.chars() {
        if c == '.' && previous != Some('\\') {
            if current.is_empty() {
                return Err(invalid());
            }
            segments.push(std::mem::take(&mut current));
        } else if c != '\\' {
            current.push(c);
        }
        previous = Some(c);
    }
    if current.is_empty() {
        return Err(invalid());
    }
    segments.push(current);
    Ok(segments)
}

fn field(path: &[String], cond: Cond) -> Node {
    Node::Field {
        path: path.to_vec(),
        cond,
    }
}

fn bad_arg(op: &str, arg: &Value, expected: &str) -> SelectorError {
    SelectorError(format!(
        "Bad argument for operator {op}: {} ({expected})",
        quote(arg)
    ))
}

/// The useful line of a regex compile error (the crate's message spans
/// several lines, with the pattern drawn above an arrow).
fn regex_reason(e: &regex::Error) -> String {
    let text = e.to_string();
    text.lines()
        .rev()
        .map(str::trim)
        .find(|line| !line.is_empty())
        .map(|line| line.strip_prefix("error: ").unwrap_or(line).to_string())
        .unwrap_or(text)
}

/// `value` as compact JSON, cut short if long.
fn quote(value: &Value) -> String {
    shorten(value.to_string())
}

fn quote_str(s: &str) -> String {
    shorten(Value::String(s.to_string()).to_string())
}

fn shorten(text: String) -> String {
    if text.chars().count() <= MAX_QUOTED_CHARS {
        return text;
    }
    let mut cut: String = text.chars().take(MAX_QUOTED_CHARS).collect();
    cut.push('…');
    cut
}

/// Whether `value` nests arrays/objects more than `budget` levels deep
/// (recursing at most `budget` levels itself).
fn nesting_exceeds(value: &Value, budget: usize) -> bool {
    match value {
        Value::Array(items) => {
            budget == 0 || items.iter().any(|item| nesting_exceeds(item, budget - 1))
        }
        Value::Object(map) => {
            budget == 0 || map.values().any(|item| nesting_exceeds(item, budget - 1))
        }
        _ => false,
    }
}

// ---------------------------------------------------------------------------
// Negation normalization (CouchDB's `norm_negations`)

/// Removes `$not` and `$nor` from the top-level tree by pushing negations
/// down to the conditions. Sub-selectors of `$elemMatch` and friends are left
/// alone, as CouchDB leaves them.
fn push_negations(node: Node) -> Node {
    match node {
        Node::Not(inner) => negate(*inner),
        Node::Nor(items) => Node::And(items.into_iter().map(negate).collect()),
        Node::And(items) => Node::And(items.into_iter().map(push_negations).collect()),
        Node::Or(items) => Node::Or(items.into_iter().map(push_negations).collect()),
        field @ Node::Field { .. } => field,
    }
}

fn negate(node: Node) -> Node {
    match node {
        Node::Not(inner) => push_negations(*inner),
        Node::Nor(items) => Node::Or(items.into_iter().map(push_negations).collect()),
        Node::And(items) => Node::Or(items.into_iter().map(negate).collect()),
        Node::Or(items) => Node::And(items.into_iter().map(negate).collect()),
        Node::Field { path, cond } => Node::Field {
            path,
            cond: cond.negate(),
        },
    }
}

impl Cond {
    fn negate(self) -> Cond {
        match self {
            Cond::Compare(op, arg) => Cond::Compare(op.negate(), arg),
            Cond::In(items) => Cond::Nin(items),
            Cond::Nin(items) => Cond::In(items),
            Cond::Exists(should_exist) => Cond::Exists(!should_exist),
            Cond::Not(inner) => *inner,
            other => Cond::Not(Box::new(other)),
        }
    }
}

// ---------------------------------------------------------------------------
// Matching

impl Node {
    fn matches(&self, value: &Value) -> bool {
        match self {
            Node::And(items) => items.iter().all(|node| node.matches(value)),
            Node::Or(items) => items.is_empty() || items.iter().any(|node| node.matches(value)),
            Node::Not(inner) => !inner.matches(value),
            Node::Nor(items) => !items.iter().any(|node| node.matches(value)),
            Node::Field { path, cond } => match lookup(value, path) {
                Lookup::Found(found) => cond.matches(found),
                // Only an explicit `$exists: false` selects a missing field.
                Lookup::Missing => matches!(cond, Cond::Exists(false)),
                // A path through a scalar, or a bad array index, matches
                // nothing, not even `$exists: false` (as in CouchDB).
                Lookup::BadPath => false,
            },
        }
    }
}

impl Cond {
    fn matches(&self, value: &Value) -> bool {
        match self {
            Cond::Compare(op, arg) => op.holds(collate(value, arg)),
            Cond::In(args) => is_in(value, args),
            // Not `$in`, including for arrays; `$nin: []` matches anything present.
            Cond::Nin(args) => !is_in(value, args),
            Cond::All(args) => {
                let Value::Array(items) = value else {
                    return false;
                };
                if args.is_empty() {
                    return false;
                }
                let has_all = args
                    .iter()
                    .all(|arg| items.iter().any(|item| terms_equal(item, arg, true)));
                // `{"$all": [[1, 2]]}` also matches the array `[1, 2]` itself.
                let is_the_one = match args.as_slice() {
                    [only @ Value::Array(_)] => terms_equal(only, value, false),
                    _ => false,
                };
                has_all || is_the_one
            }
            Cond::Exists(should_exist) => *should_exist,
            Cond::Type(name) => type_name(value) == name,
            Cond::Mod { divisor, remainder } => match value {
                Value::Number(n) => integer_of(n)
                    .and_then(|v| v.checked_rem(*divisor))
                    .is_some_and(|r| r == *remainder),
                _ => false,
            },
            Cond::Regex(regex) => value.as_str().is_some_and(|s| regex.is_match(s)),
            Cond::Size(size) => value
                .as_array()
                .is_some_and(|items| u64::try_from(items.len()).ok() == Some(*size)),
            Cond::BeginsWith(prefix) => value.as_str().is_some_and(|s| s.starts_with(prefix)),
            Cond::ElemMatch(sub) => value
                .as_array()
                .is_some_and(|items| items.iter().any(|item| sub.matches(item))),
            Cond::AllMatch(sub) => value.as_array().is_some_and(|items| {
                !items.is_empty() && items.iter().all(|item| sub.matches(item))
            }),
            Cond::KeyMapMatch(sub) => value.as_object().is_some_and(|map| {
                map.keys()
                    .any(|key| sub.matches(&Value::String(key.clone())))
            }),
            Cond::Not(inner) => !inner.matches(value),
        }
    }
}

/// `$in`: an array matches when one of its elements equals one of the
/// arguments (so an array never matches as a whole); anything else matches
/// when it equals one of the arguments.
fn is_in(value: &Value, args: &[Value]) -> bool {
    let equals_an_arg = |v: &Value| args.iter().any(|arg| collate(v, arg) == Ordering::Equal);
    match value {
        Value::Array(items) => items.iter().any(equals_an_arg),
        _ => equals_an_arg(value),
    }
}

enum Lookup<'a> {
    Found(&'a Value),
    Missing,
    BadPath,
}

/// Follows `path` into `value`: object members by name, array elements by
/// decimal index. A missing member is `Missing`; stepping into a scalar or
/// using a bad index is `BadPath`.
fn lookup<'a>(value: &'a Value, path: &[String]) -> Lookup<'a> {
    let mut current = value;
    for segment in path {
        current = match current {
            Value::Object(map) => match map.get(segment) {
                Some(next) => next,
                None => return Lookup::Missing,
            },
            Value::Array(items) => match array_index(segment).and_then(|i| items.get(i)) {
                Some(next) => next,
                None => return Lookup::BadPath,
            },
            _ => return Lookup::BadPath,
        };
    }
    Lookup::Found(current)
}

/// A path segment used as an array index, read as Erlang's
/// `binary_to_integer` reads it (optional sign, decimal digits); negative
/// indexes are invalid.
fn array_index(segment: &str) -> Option<usize> {
    let (negative, digits) = match segment.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, segment.strip_prefix('+').unwrap_or(segment)),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if negative {
        return digits.bytes().all(|b| b == b'0').then_some(0);
    }
    digits.parse().ok()
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(selector: Value) -> Selector {
        Selector::parse(&selector).expect("selector should parse")
    }

    fn matches(selector: Value, doc: Value) -> bool {
        parse(selector).matches(&doc)
    }

    fn parse_error(selector: Value) -> String {
        match Selector::parse(&selector) {
            Ok(parsed) => panic!("selector should be rejected, parsed as {parsed:?}"),
            Err(SelectorError(reason)) => reason,
        }
    }

    /// CouchDB's `check_selector`: `{"x": cond}` against `{"x": value}` gives
    /// the expected result, and `{"x": {"$not": cond}}` gives its opposite.
    fn check(cond: Value, cases: &[(bool, Value)]) {
        let positive = parse(json!({ "x": cond }));
        let negative = parse(json!({ "x": { "$not": cond } }));
        for (expected, value) in cases {
            let doc = json!({ "x": value });
            assert_eq!(
                positive.matches(&doc),
                *expected,
                "{cond} against {value} should be {expected}"
            );
            assert_eq!(
                negative.matches(&doc),
                !*expected,
                "$not {cond} against {value} should be {}",
                !*expected
            );
        }
    }

    // --- comparison operators (CouchDB's match_*_test cases) ---

    #[test]
    fn lt_matches_smaller_numbers_strings_and_arrays() {
        check(
            json!({"$lt": 5}),
            &[(true, json!(4)), (false, json!(5)), (false, json!(6))],
        );
        check(
            json!({"$lt": "hello"}),
            &[
                (true, json!("held")),
                (false, json!("hello")),
                (false, json!("help")),
            ],
        );
        check(
            json!({"$lt": [1, 2, 3]}),
            &[
                (true, json!([1, 2, 2])),
                (true, json!([1, 2])),
                (false, json!([1, 2, 3])),
                (false, json!([1, 2, 4])),
                (false, json!([1, 3])),
            ],
        );
    }

    #[test]
    fn lte_matches_smaller_or_equal_values() {
        check(
            json!({"$lte": 5}),
            &[(true, json!(4)), (true, json!(5)), (false, json!(6))],
        );
        check(
            json!({"$lte": "hello"}),
            &[
                (true, json!("held")),
                (true, json!("hello")),
                (false, json!("help")),
            ],
        );
        check(
            json!({"$lte": [1, 2, 3]}),
            &[
                (true, json!([1, 2, 2])),
                (true, json!([1, 2])),
                (true, json!([1, 2, 3])),
                (false, json!([1, 2, 4])),
                (false, json!([1, 3])),
            ],
        );
    }

    #[test]
    fn gt_matches_greater_values() {
        check(
            json!({"$gt": 5}),
            &[(false, json!(4)), (false, json!(5)), (true, json!(6))],
        );
        check(
            json!({"$gt": "hello"}),
            &[
                (false, json!("held")),
                (false, json!("hello")),
                (true, json!("help")),
            ],
        );
        check(
            json!({"$gt": [1, 2, 3]}),
            &[
                (false, json!([1, 2, 2])),
                (false, json!([1, 2])),
                (false, json!([1, 2, 3])),
                (true, json!([1, 2, 4])),
                (true, json!([1, 3])),
            ],
        );
    }

    #[test]
    fn gte_matches_greater_or_equal_values() {
        check(
            json!({"$gte": 5}),
            &[(false, json!(4)), (true, json!(5)), (true, json!(6))],
        );
        check(
            json!({"$gte": "hello"}),
            &[
                (false, json!("held")),
                (true, json!("hello")),
                (true, json!("help")),
            ],
        );
        check(
            json!({"$gte": [1, 2, 3]}),
            &[
                (false, json!([1, 2, 2])),
                (false, json!([1, 2])),
                (true, json!([1, 2, 3])),
                (true, json!([1, 2, 4])),
                (true, json!([1, 3])),
            ],
        );
    }

    #[test]
    fn eq_compares_nested_arrays_and_objects_whole() {
        check(json!({"$eq": 5}), &[(true, json!(5)), (false, json!(6))]);
        check(
            json!({"$eq": "hello"}),
            &[(true, json!("hello")), (false, json!("help"))],
        );
        check(
            json!({"$eq": [1, [2, 3, 4], 5]}),
            &[
                (true, json!([1, [2, 3, 4], 5])),
                (false, json!([1, [2, 3, 4]])),
                (false, json!([1, [2, 3, 4], 5, 6])),
                (false, json!([1, [2, 7, 4], 5])),
            ],
        );
        check(
            json!({"$eq": {"a": {"b": {"c": 7}}}}),
            &[
                (true, json!({"a": {"b": {"c": 7}}})),
                (false, json!({"a": {"b": {"c": 8}}})),
                (false, json!({"a": {"b": {"d": 7}}})),
                (false, json!({"a": {"d": {"c": 7}}})),
            ],
        );
    }

    #[test]
    fn ne_matches_different_values_but_never_a_missing_field() {
        check(json!({"$ne": 5}), &[(false, json!(5)), (true, json!(6))]);
        check(
            json!({"$ne": [1, [2, 3, 4], 5]}),
            &[
                (false, json!([1, [2, 3, 4], 5])),
                (true, json!([1, [2, 3, 4]])),
                (true, json!([1, [2, 7, 4], 5])),
            ],
        );
        assert!(!matches(json!({"x": {"$ne": 5}}), json!({})));
        // `$not` of an equality normalizes to `$ne`, so it misses too.
        assert!(!matches(json!({"$not": {"x": 5}}), json!({})));
        assert!(matches(json!({"x": {"$ne": 5}}), json!({"x": null})));
    }

    #[test]
    fn implicit_equality_matches_nested_fields() {
        let doc = json!({"_id": "foo", "_rev": "bar", "user_id": 11});
        assert!(matches(json!({"user_id": 11}), doc.clone()));
        assert!(matches(json!({"_id": "foo"}), doc.clone()));
        assert!(matches(json!({"_id": "foo", "_rev": "bar"}), doc.clone()));
        assert!(!matches(json!({"user_id": 1234}), doc.clone()));
        // The string "11" is not the number 11.
        assert!(!matches(json!({"user_id": "11"}), doc.clone()));
        assert!(!matches(json!({"_id": "foo", "_rev": "quux"}), doc));
        assert!(matches(
            json!({"a": {"b": {"c": true}}}),
            json!({"a": {"b": {"c": true, "d": 1}}})
        ));
    }

    #[test]
    fn integers_and_floats_compare_by_value() {
        assert!(matches(json!({"x": 1}), json!({"x": 1.0})));
        assert!(matches(json!({"x": 3.0}), json!({"x": 3})));
        assert!(matches(json!({"x": {"$lt": 2}}), json!({"x": 1.5})));
        assert!(matches(json!({"x": {"$gt": -1}}), json!({"x": -0.5})));
        // Beyond 2^53 an integer is compared exactly, not through a float.
        let big = 9_007_199_254_740_993_u64; // 2^53 + 1
        assert!(matches(
            json!({"x": {"$gt": 9_007_199_254_740_992.0_f64}}),
            json!({ "x": big })
        ));
        assert!(!matches(
            json!({"x": 9_007_199_254_740_992.0_f64}),
            json!({ "x": big })
        ));
        assert!(matches(
            json!({"x": {"$gt": i64::MAX}}),
            json!({"x": u64::MAX})
        ));
    }

    // --- collation ---

    #[test]
    fn type_order_drives_range_queries_across_types() {
        // null < false < true < numbers < strings < arrays < objects
        let selector = parse(json!({"x": {"$gt": true, "$lt": "a"}}));
        assert!(selector.matches(&json!({"x": 42})));
        assert!(selector.matches(&json!({"x": ""})));
        assert!(!selector.matches(&json!({"x": "a"})));
        assert!(!selector.matches(&json!({"x": false})));
        assert!(!selector.matches(&json!({"x": []})));
        assert!(matches(json!({"x": {"$gt": "zzz"}}), json!({"x": [0]})));
        assert!(matches(json!({"x": {"$gt": [[[]]]}}), json!({"x": {}})));
        assert!(matches(json!({"x": {"$lt": 0}}), json!({"x": null})));
        assert!(matches(json!({"x": {"$gte": null}}), json!({"x": null})));
    }

    #[test]
    fn in_matches_a_listed_value_or_an_element_of_an_array() {
        check(
            json!({"$in": []}),
            &[
                (false, json!(0)),
                (false, json!(true)),
                (false, json!("foo")),
            ],
        );
        check(
            json!({"$in": [42, false, "bar", [["nested"], "list"], {"b": 2}]}),
            &[
                (true, json!(42)),
                (true, json!(false)),
                (true, json!("bar")),
                (true, json!({"b": 2})),
                (false, json!(43)),
                (false, json!(true)),
                (false, json!("bars")),
                (false, json!({"b": 2, "c": 3})),
                (true, json!([0, 42])),
                (true, json!([0, false])),
                (true, json!([0, "bar"])),
                (true, json!([0, {"b": 2}])),
                // An array field is never compared whole...
                (false, json!([["nested"], "list"])),
                // ...only its elements are.
                (true, json!([0, [["nested"], "list"]])),
            ],
        );
        assert!(!matches(json!({"x": {"$in": [null]}}), json!({})));
    }

    #[test]
    fn nin_matches_when_no_listed_value_is_present_but_not_a_missing_field() {
        check(
            json!({"$nin": []}),
            &[(true, json!(0)), (true, json!(true)), (true, json!("foo"))],
        );
        check(
            json!({"$nin": [42, false, "bar", [["nested"], "list"], {"b": 2}]}),
            &[
                (false, json!(42)),
                (false, json!(false)),
                (false, json!("bar")),
                (false, json!({"b": 2})),
                (true, json!(43)),
                (true, json!(true)),
                (true, json!("bars")),
                (true, json!({"b": 2, "c": 3})),
                (false, json!([0, 42])),
                (false, json!([0, false])),
                (false, json!([0, "bar"])),
                (false, json!([0, {"b": 2}])),
                (true, json!([["nested"], "list"])),
                (false, json!([0, [["nested"], "list"]])),
            ],
        );
        assert!(!matches(json!({"x": {"$nin": [1]}}), json!({})));
        assert!(!matches(json!({"x": {"$nin": []}}), json!({})));
    }

    #[test]
    fn all_requires_every_listed_value_in_an_array() {
        // `$all: []` matches nothing, not even arrays.
        check(
            json!({"$all": []}),
            &[
                (false, json!([])),
                (false, json!([42])),
                (false, json!({})),
                (false, json!("foo")),
            ],
        );
        check(
            json!({"$all": [1, 2, 3, 4]}),
            &[
                (true, json!([3, 2, 4, 1])),
                (true, json!([0, 4, 3, 5, 2, 1, 6])),
                (false, json!([3, 2, 4])),
                (false, json!([])),
            ],
        );
        // `$all: [list]` also matches the list itself, or arrays containing it.
        check(
            json!({"$all": [[1, 2, 3, 4]]}),
            &[
                (true, json!([1, 2, 3, 4])),
                (false, json!([4, 3, 2, 1])),
                (false, json!([1, 3, 4])),
                (false, json!([])),
                (true, json!([5, [1, 2, 3, 4], 6])),
                (false, json!([5, [1, 3, 4], 6])),
                (false, json!([5, [1, 3, 2, 4], 6])),
            ],
        );
        check(
            json!({"$all": ["hello"]}),
            &[
                (false, json!("hello")),
                (true, json!(["hello"])),
                (true, json!([0, "hello", 1])),
                (false, json!([])),
            ],
        );
        // Values must be exactly equal: no extra members.
        check(
            json!({"$all": [{"a": 1}]}),
            &[
                (true, json!([{"a": 1}])),
                (false, json!([{"a": 1, "b": 2}])),
            ],
        );
        // Like Erlang's `=:=`, $all tells integers from floats.
        assert!(!matches(json!({"x": {"$all": [1]}}), json!({"x": [1.0]})));
    }

    #[test]
    fn not_all_matches_arrays_lacking_a_value() {
        let selector = parse(json!({"x": {"$not": {"$all": [1, 2, 3, 4]}}}));
        assert!(selector.matches(&json!({"x": [2, 4, 1]})));
        assert!(!selector.matches(&json!({"x": [2, 4, 1, 3]})));
        assert!(selector.matches(&json!({"x": []})));
        assert!(!selector.matches(&json!({})));
    }

    // --- $exists, $type ---

    #[test]
    fn exists_tells_present_fields_from_missing_ones() {
        let exists = parse(json!({"x": {"$exists": true}}));
        assert!(exists.matches(&json!({"x": 0})));
        assert!(exists.matches(&json!({"x": null})));
        assert!(!exists.matches(&json!({"y": 0})));
        assert!(!exists.matches(&json!({})));

        let missing = parse(json!({"x": {"$exists": false}}));
        assert!(!missing.matches(&json!({"x": 0})));
        assert!(!missing.matches(&json!({"x": null})));
        assert!(missing.matches(&json!({"y": 0})));
        assert!(missing.matches(&json!({})));
    }

    #[test]
    fn negated_exists_selects_missing_fields() {
        assert!(matches(
            json!({"$not": {"x": {"$exists": true}}}),
            json!({})
        ));
        assert!(matches(
            json!({"x": {"$not": {"$exists": true}}}),
            json!({"y": 1})
        ));
        // `{"x": {"$not": {"$eq": 0}}}` is `$ne` and misses the empty doc...
        assert!(!matches(json!({"x": {"$not": {"$eq": 0}}}), json!({})));
        // ...but putting `$exists: true` inside the negation catches it.
        let selector = parse(json!({"x": {"$not": {"$exists": true, "$eq": 0}}}));
        assert!(selector.matches(&json!({"x": 1})));
        assert!(!selector.matches(&json!({"x": 0})));
        assert!(selector.matches(&json!({})));
    }

    #[test]
    fn exists_false_does_not_match_a_path_through_a_scalar() {
        // CouchDB reports a path through a non-object as a bad path, which
        // matches nothing, not even `$exists: false`.
        let selector = parse(json!({"a.b": {"$exists": false}}));
        assert!(selector.matches(&json!({})));
        assert!(selector.matches(&json!({"a": {}})));
        assert!(!selector.matches(&json!({"a": 5})));
        assert!(!selector.matches(&json!({"a": [1]})));
        assert!(!selector.matches(&json!({"a": {"b": null}})));
    }

    #[test]
    fn type_matches_json_types() {
        check(
            json!({"$type": "null"}),
            &[
                (true, json!(null)),
                (false, json!(false)),
                (false, json!({})),
            ],
        );
        check(
            json!({"$type": "boolean"}),
            &[(true, json!(true)), (true, json!(false)), (false, json!(0))],
        );
        check(
            json!({"$type": "number"}),
            &[
                (true, json!(42)),
                (true, json!(2.5)),
                (true, json!(0)),
                (false, json!(true)),
                (false, json!([1])),
                (false, json!("1")),
            ],
        );
        check(
            json!({"$type": "string"}),
            &[
                (true, json!("")),
                (true, json!("hello")),
                (false, json!([])),
            ],
        );
        check(
            json!({"$type": "array"}),
            &[
                (true, json!([])),
                (true, json!([1, 2])),
                (false, json!({})),
                (false, json!("hi")),
            ],
        );
        check(
            json!({"$type": "object"}),
            &[
                (true, json!({})),
                (true, json!({"a": 1})),
                (false, json!([{"a": 1}])),
                (false, json!(null)),
            ],
        );
    }

    #[test]
    fn type_with_an_unknown_name_matches_nothing() {
        // CouchDB accepts any string here; it simply never matches.
        check(
            json!({"$type": "integer"}),
            &[(false, json!(1)), (false, json!("integer"))],
        );
    }

    // --- $regex, $beginsWith, $mod, $size ---

    #[test]
    fn regex_matches_strings_only() {
        check(
            json!({"$regex": "^[0-9a-f]+$"}),
            &[
                (false, json!("")),
                (true, json!("3a0df5e")),
                (false, json!("3a0gf5e")),
                (false, json!(42)),
            ],
        );
        // Unanchored search, with inline flags.
        assert!(matches(
            json!({"x": {"$regex": "(?i)new.*"}}),
            json!({"x": "North New"})
        ));
        assert!(matches(json!({"x": {"$regex": "b"}}), json!({"x": "abc"})));
    }

    #[test]
    fn begins_with_matches_string_prefixes() {
        check(
            json!({"$beginsWith": "foo"}),
            &[
                (true, json!("foo")),
                (true, json!("food")),
                (true, json!("fool me once")),
                (false, json!("more food")),
                (false, json!("fo")),
                (false, json!(42)),
            ],
        );
        // A prefix is matched exactly, not with collation.
        assert!(!matches(
            json!({"x": {"$beginsWith": "Foo"}}),
            json!({"x": "food"})
        ));
    }

    #[test]
    fn mod_matches_integer_fields_only() {
        check(
            json!({"$mod": [28, 1]}),
            &[
                (true, json!(1)),
                (true, json!(29)),
                (true, json!(57)),
                (false, json!(58)),
                (false, json!("57")),
                (false, json!(57.0)),
            ],
        );
        // The remainder takes the sign of the dividend, as Erlang's `rem`.
        assert!(matches(json!({"x": {"$mod": [3, -1]}}), json!({"x": -7})));
        assert!(matches(json!({"x": {"$mod": [-3, 1]}}), json!({"x": 7})));
        assert!(matches(
            json!({"x": {"$mod": [2, 1]}}),
            json!({ "x": u64::MAX })
        ));
    }

    #[test]
    fn size_matches_arrays_of_that_length() {
        check(
            json!({"$size": 3}),
            &[
                (false, json!(3)),
                (false, json!("fun")),
                (true, json!([0, 0, 0])),
                (false, json!([0, 0])),
                (false, json!([0, 0, 0, 0])),
            ],
        );
        assert!(matches(json!({"x": {"$size": 0}}), json!({"x": []})));
    }

    // --- $elemMatch, $allMatch, $keyMapMatch ---

    #[test]
    fn elem_match_needs_one_matching_element() {
        check(
            json!({"$elemMatch": {"$eq": 0}}),
            &[
                (false, json!([])),
                (true, json!([0])),
                (false, json!([1])),
                (true, json!([0, 1])),
            ],
        );
        // Because of empty arrays, `$not $allMatch S` differs from
        // `$elemMatch $not S`.
        check(
            json!({"$elemMatch": {"$ne": 0}}),
            &[
                (false, json!([])),
                (false, json!([0])),
                (true, json!([1])),
                (true, json!([0, 1])),
            ],
        );
        // The range must hold for one element, not across elements.
        let range = parse(json!({"score": {"$elemMatch": {"$gte": 80, "$lt": 85}}}));
        assert!(range.matches(&json!({"score": [70, 82]})));
        assert!(!range.matches(&json!({"score": [70, 90]})));
        assert!(!range.matches(&json!({"score": 82})));
    }

    #[test]
    fn elem_match_applies_field_conditions_to_each_element() {
        // CouchDB's "elem match" operator test.
        let selector = parse(json!({
            "_id": {"$gt": null},
            "bang": {"$elemMatch": {"foo": {"$gte": 1}, "bam": true}}
        }));
        assert!(!selector.matches(&json!({"_id": "a", "bang": [{"foo": 1, "bar": 2}]})));
        assert!(selector.matches(&json!({"_id": "b", "bang": [{"foo": 2, "bam": true}]})));
    }

    #[test]
    fn elem_match_keeps_plain_not_semantics_inside() {
        // CouchDB does not push negations into sub-selectors, so there `$not`
        // is a plain "not" and matches an element lacking the field...
        let inner = parse(json!({"a": {"$elemMatch": {"$not": {"b": 1}}}}));
        assert!(inner.matches(&json!({"a": [{}]})));
        assert!(inner.matches(&json!({"a": [{"b": 2}]})));
        assert!(!inner.matches(&json!({"a": [{"b": 1}]})));
        // ...whereas at the top level it becomes `$ne`, which does not.
        assert!(!matches(json!({"$not": {"b": 1}}), json!({})));
    }

    #[test]
    fn nor_inside_elem_match_matches_elements_that_match_no_clause() {
        let selector = parse(json!({"a": {"$elemMatch": {"$nor": [{"b": 1}, {"b": 2}]}}}));
        assert!(selector.matches(&json!({"a": [{"b": 1}, {"b": 3}]})));
        assert!(!selector.matches(&json!({"a": [{"b": 1}, {"b": 2}]})));
    }

    #[test]
    fn all_match_is_false_for_empty_arrays() {
        check(
            json!({"$allMatch": {"$eq": 0}}),
            &[
                (false, json!([])),
                (true, json!([0])),
                (false, json!([1])),
                (false, json!([0, 1])),
                (false, json!(0)),
            ],
        );
        // CouchDB's "all match" operator test.
        let selector = parse(
            json!({"bang": {"$allMatch": {"foo": {"$mod": [2, 1]}, "bar": {"$mod": [2, 0]}}}}),
        );
        assert!(selector.matches(&json!({"bang": [{"foo": 1, "bar": 2}, {"foo": 3, "bar": 4}]})));
        assert!(!selector.matches(&json!({"bang": [{"foo": 1, "bar": 2}, {"foo": 4, "bar": 4}]})));
    }

    #[test]
    fn key_map_match_tests_the_keys_of_an_object() {
        check(
            json!({"$keyMapMatch": {"$regex": "^[a-z]+$"}}),
            &[
                (true, json!({"hello": 0})),
                (true, json!({"a": 1, "b": 2})),
                (true, json!({"a": 1, "b4": 2})),
                (false, json!({"b4": 2})),
                (false, json!({})),
                (false, json!(["a"])),
            ],
        );
        let selector = parse(json!({"foo": {"$keyMapMatch": {"$eq": "aa"}}}));
        assert!(selector.matches(&json!({"foo": {"aa": "bar", "bb": "bang"}})));
        assert!(!selector.matches(&json!({"foo": {"cc": "bar", "bb": "bang"}})));
    }

    // --- objects, paths and combinations ---

    #[test]
    fn empty_selector_matches_every_document() {
        let selector = parse(json!({}));
        for doc in [
            json!({}),
            json!({"x": {}}),
            json!({"x": {"a": 1}}),
            json!({"x": []}),
        ] {
            assert!(selector.matches(&doc));
        }
    }

    #[test]
    fn inner_empty_object_matches_only_empty_objects() {
        let selector = parse(json!({"x": {}}));
        assert!(!selector.matches(&json!({})));
        assert!(selector.matches(&json!({"x": {}})));
        assert!(!selector.matches(&json!({"x": {"a": 1}})));
        assert!(!selector.matches(&json!({"x": []})));

        let negated = parse(json!({"$not": {"x": {}}}));
        assert!(!negated.matches(&json!({})));
        assert!(!negated.matches(&json!({"x": {}})));
        assert!(negated.matches(&json!({"x": {"a": 1}})));
        assert!(negated.matches(&json!({"x": []})));
    }

    #[test]
    fn nested_objects_are_dotted_paths_matching_supersets() {
        let docs = [
            json!({}),
            json!({"x": {}}),
            json!({"x": {"a": 1}}),
            json!({"x": {"a": 1, "b": 2}}),
            json!({"x": []}),
        ];
        let results = |selector: Value| {
            let selector = parse(selector);
            docs.iter().map(|d| selector.matches(d)).collect::<Vec<_>>()
        };
        assert_eq!(
            results(json!({"x": {"a": 1}})),
            [false, false, true, true, false]
        );
        assert_eq!(
            results(json!({"x": {"a": 1, "b": 2}})),
            [false, false, false, true, false]
        );
        assert_eq!(
            results(json!({"x.b": 2})),
            [false, false, false, true, false]
        );
        assert_eq!(results(json!({"x": {"b": 2}})), results(json!({"x.b": 2})));
    }

    #[test]
    fn operators_and_fields_mix_inside_a_nested_object() {
        let selector = parse(json!({"x": {"$exists": true, "a": {"$gt": 1}}}));
        assert!(selector.matches(&json!({"x": {"a": 2}})));
        assert!(!selector.matches(&json!({"x": {"a": 1}})));
        assert!(!selector.matches(&json!({})));
    }

    #[test]
    fn dotted_paths_with_escaped_dots_address_literal_keys() {
        // CouchDB's key tests.
        let kvothe = json!({"name.first": "Kvothe", "none": {"dot": "none dot's value"}});
        let elodin = json!({"name": {"first": "Master Elodin"}, "deep": {"$key": "deep peso"}});
        assert!(matches(json!({"name\\.first": "Kvothe"}), kvothe.clone()));
        assert!(!matches(json!({"name.first": "Kvothe"}), kvothe.clone()));
        assert!(matches(
            json!({"name.first": "Master Elodin"}),
            elodin.clone()
        ));
        assert!(!matches(
            json!({"name\\.first": "Master Elodin"}),
            elodin.clone()
        ));
        assert!(matches(json!({"none.dot": "none dot's value"}), kvothe));
        assert!(matches(json!({"deep.$key": "deep peso"}), elodin));
        assert!(matches(
            json!({"a.b\\.c.d": 1}),
            json!({"a": {"b.c": {"d": 1}}})
        ));
        assert!(matches(
            json!({"\u{f8ff}": "apple"}),
            json!({"\u{f8ff}": "apple"})
        ));
    }

    #[test]
    fn numeric_path_segments_index_into_arrays() {
        let doc = json!({"favorites": ["C", "Lisp", "Ruby", "C"], "n": {"3": "three"}});
        assert!(matches(json!({"favorites.3": "C"}), doc.clone()));
        assert!(matches(json!({"favorites.0": "C"}), doc.clone()));
        assert!(matches(json!({"favorites.+1": "Lisp"}), doc.clone()));
        assert!(matches(json!({"favorites.01": "Lisp"}), doc.clone()));
        assert!(!matches(json!({"favorites.1": "C"}), doc.clone()));
        // Digits are still plain member names on objects.
        assert!(matches(json!({"n.3": "three"}), doc.clone()));
        // Out of range, negative or non-numeric indexes match nothing.
        for path in ["favorites.4", "favorites.-1", "favorites.x", "favorites.1x"] {
            assert!(!matches(json!({ path: {"$exists": true} }), doc.clone()));
            assert!(!matches(json!({ path: {"$exists": false} }), doc.clone()));
        }
        assert!(matches(
            json!({"m.0.k": 1}),
            json!({"m": [{"k": 1}, {"k": 2}]})
        ));
    }

    #[test]
    fn multiple_fields_and_operators_are_an_implicit_and() {
        let selector = parse(json!({"age": {"$gte": 18, "$lt": 30}, "name": {"$exists": true}}));
        assert!(selector.matches(&json!({"age": 20, "name": "x"})));
        assert!(!selector.matches(&json!({"age": 30, "name": "x"})));
        assert!(!selector.matches(&json!({"age": 20})));
    }

    #[test]
    fn duplicate_keys_keep_the_last_condition() {
        // As CouchDB's "multi cond duplicate field" test: the later one wins.
        let selector: Value = serde_json::from_str(
            r#"{"location.city": {"$regex": "^L+"}, "location.city": {"$exists": true}}"#,
        )
        .expect("valid JSON");
        let selector = parse(selector);
        assert!(selector.matches(&json!({"location": {"city": "Ronco"}})));
    }

    #[test]
    fn and_with_an_empty_list_matches_everything() {
        let empty = parse(json!({"x": {"$and": []}}));
        for doc in [
            json!({"x": 0}),
            json!({"x": false}),
            json!({"x": []}),
            json!({}),
        ] {
            assert!(empty.matches(&doc));
        }
        // Its negation is `{"$or": []}`, which also matches everything.
        let not_empty = parse(json!({"x": {"$not": {"$and": []}}}));
        for doc in [json!({"x": 0}), json!({"x": []}), json!({})] {
            assert!(not_empty.matches(&doc));
        }
        let multi = parse(json!({"x": {"$and": [{"$gt": 3}, {"$lt": 7}]}}));
        assert!(multi.matches(&json!({"x": 6})));
        assert!(!multi.matches(&json!({"x": 2})));
        assert!(!multi.matches(&json!({"x": 9})));
        assert!(!multi.matches(&json!({})));
        let not_multi = parse(json!({"x": {"$not": {"$and": [{"$gt": 3}, {"$lt": 7}]}}}));
        assert!(!not_multi.matches(&json!({"x": 6})));
        assert!(not_multi.matches(&json!({"x": 2})));
        assert!(not_multi.matches(&json!({"x": 9})));
        assert!(!not_multi.matches(&json!({})));
    }

    #[test]
    fn or_with_an_empty_list_matches_everything() {
        let empty = parse(json!({"x": {"$or": []}}));
        for doc in [json!({"x": 0}), json!({"x": []}), json!({})] {
            assert!(empty.matches(&doc));
        }
        let not_empty = parse(json!({"x": {"$not": {"$or": []}}}));
        for doc in [json!({"x": 0}), json!({"x": []}), json!({})] {
            assert!(not_empty.matches(&doc));
        }
        let multi = parse(json!({"x": {"$or": [{"$lt": 3}, {"$gt": 7}]}}));
        assert!(!multi.matches(&json!({"x": 6})));
        assert!(multi.matches(&json!({"x": 2})));
        assert!(multi.matches(&json!({"x": 9})));
        assert!(!multi.matches(&json!({})));
        let not_multi = parse(json!({"x": {"$not": {"$or": [{"$lt": 3}, {"$gt": 7}]}}}));
        assert!(not_multi.matches(&json!({"x": 6})));
        assert!(!not_multi.matches(&json!({"x": 2})));
        assert!(!not_multi.matches(&json!({"x": 9})));
        assert!(!not_multi.matches(&json!({})));
    }

    #[test]
    fn nor_matches_when_no_clause_matches() {
        let empty = parse(json!({"x": {"$nor": []}}));
        for doc in [json!({"x": 0}), json!({"x": []}), json!({})] {
            assert!(empty.matches(&doc));
        }
        let multi = parse(json!({"x": {"$nor": [{"$lt": 3}, {"$gt": 7}]}}));
        assert!(multi.matches(&json!({"x": 6})));
        assert!(!multi.matches(&json!({"x": 2})));
        assert!(!multi.matches(&json!({"x": 9})));
        assert!(!multi.matches(&json!({})));
        let top = parse(json!({"$nor": [{"age": 22}, {"age": 33}]}));
        assert!(top.matches(&json!({"age": 23})));
        assert!(!top.matches(&json!({"age": 33})));
        assert!(!top.matches(&json!({})));
    }

    #[test]
    fn double_negation_cancels_out() {
        let selector = parse(json!({"$not": {"$not": {"x": {"$size": 1}}}}));
        assert!(selector.matches(&json!({"x": [1]})));
        assert!(!selector.matches(&json!({"x": [1, 2]})));
        assert!(!selector.matches(&json!({})));
    }

    #[test]
    fn negated_conditions_without_an_opposite_still_need_the_field() {
        let selector = parse(json!({"x": {"$not": {"$size": 1}}}));
        assert!(selector.matches(&json!({"x": [1, 2]})));
        assert!(selector.matches(&json!({"x": "a"})));
        assert!(!selector.matches(&json!({"x": [1]})));
        assert!(!selector.matches(&json!({})));
    }

    #[test]
    fn an_operator_without_a_field_inside_and_applies_to_the_whole_document() {
        // CouchDB only rejects a missing field name at the top level.
        let selector = parse(json!({"$and": [{"$type": "object"}]}));
        assert!(selector.matches(&json!({"a": 1})));
    }

    #[test]
    fn matching_odd_documents_never_fails() {
        let selector = parse(json!({"a.0.b": {"$gt": 1}, "c": {"$elemMatch": {"d": 1}}}));
        for doc in [
            json!(null),
            json!(5),
            json!("a"),
            json!([1, 2]),
            json!({"a": "string"}),
            json!({"a": [[]], "c": {}}),
        ] {
            assert!(!selector.matches(&doc));
        }
    }

    // --- parse errors ---

    #[test]
    fn a_selector_that_is_not_an_object_is_rejected() {
        for bad in [
            json!(null),
            json!(true),
            json!(false),
            json!(1.0),
            json!("foobarbaz"),
            json!([null, "bing"]),
        ] {
            assert!(parse_error(bad).starts_with("Selector must be a JSON object"));
        }
    }

    #[test]
    fn unknown_operators_are_rejected_by_name() {
        assert_eq!(
            parse_error(json!({"foo": {"$not_an_op": 2}})),
            "Invalid operator: $not_an_op"
        );
        assert_eq!(
            parse_error(json!({"$key": "peso"})),
            "Invalid operator: $key"
        );
        assert_eq!(
            parse_error(json!({"a": {"$elemMatch": {"$bogus": 1}}})),
            "Invalid operator: $bogus"
        );
    }

    #[test]
    fn unsupported_operators_are_rejected_by_name() {
        for op in [
            "$where",
            "$geoWithin",
            "$geoIntersects",
            "$near",
            "$nearSphere",
            "$text",
        ] {
            assert_eq!(
                parse_error(json!({ "a": { op: 1 } })),
                format!("Unsupported operator: {op}")
            );
        }
    }

    #[test]
    fn a_condition_without_a_field_is_rejected() {
        for bad in [
            json!({"$gt": 2}),
            json!({"$not": {"$size": 2}}),
            json!({"$elemMatch": {"a": 1}}),
        ] {
            assert_eq!(
                parse_error(bad),
                "One or more conditions is missing a field name."
            );
        }
    }

    #[test]
    fn empty_field_name_segments_are_rejected() {
        assert_eq!(
            parse_error(json!({"_id": {"": null}})),
            "Invalid field name: \"\""
        );
        for name in ["a..b", ".a", "a.", "", "a\\..", "."] {
            assert_eq!(
                parse_error(json!({ name: 1 })),
                format!("Invalid field name: {}", json!(name))
            );
        }
    }

    #[test]
    fn operator_arguments_of_the_wrong_type_are_rejected_by_operator() {
        let cases = [
            ("$and", json!({})),
            ("$or", json!(1)),
            ("$nor", json!("a")),
            ("$not", json!([])),
            ("$in", json!(1)),
            ("$nin", json!({"a": 1})),
            ("$all", json!("a")),
            ("$exists", json!(1)),
            ("$exists", json!("true")),
            ("$type", json!(1)),
            ("$mod", json!(2)),
            ("$mod", json!([2])),
            ("$mod", json!([2, 1, 0])),
            ("$mod", json!([2.0, 1])),
            ("$mod", json!(["2", 1])),
            ("$regex", json!(1)),
            ("$size", json!(-1)),
            ("$size", json!(1.5)),
            ("$size", json!("1")),
            ("$beginsWith", json!(123)),
            ("$beginsWith", json!(true)),
            ("$beginsWith", json!([])),
            ("$beginsWith", json!({})),
            ("$elemMatch", json!([])),
            ("$allMatch", json!(1)),
            ("$keyMapMatch", json!("a")),
        ];
        for (op, arg) in cases {
            let reason = parse_error(json!({ "x": { op: arg } }));
            assert!(
                reason.starts_with(&format!("Bad argument for operator {op}: {arg} (")),
                "{op} {arg}: {reason}"
            );
        }
    }

    #[test]
    fn mod_with_a_zero_divisor_is_rejected() {
        let reason = parse_error(json!({"x": {"$mod": [0, 1]}}));
        assert!(reason.contains("$mod"), "{reason}");
        assert!(reason.contains("zero"), "{reason}");
    }

    #[test]
    fn invalid_regex_is_rejected_with_the_reason() {
        let reason = parse_error(json!({"x": {"$regex": "(unclosed"}}));
        assert!(
            reason.starts_with(
                "Bad argument for operator $regex: \"(unclosed\" (invalid regular expression: "
            ),
            "{reason}"
        );
        assert!(!reason.contains('\n'), "{reason}");
    }

    #[test]
    fn long_bad_arguments_are_quoted_shortened() {
        let long = "x".repeat(1000);
        let reason = parse_error(json!({"a": {"$in": long}}));
        assert!(reason.len() < 300, "{reason}");
        assert!(reason.contains('…'));
    }

    #[test]
    fn deeply_nested_selectors_are_rejected() {
        let mut selector = json!({"a": 1});
        for _ in 0..MAX_DEPTH + 5 {
            selector = json!({ "$and": [selector] });
        }
        assert!(parse_error(selector).contains("nested"));
        let mut deep_array = json!(1);
        for _ in 0..1000 {
            deep_array = Value::Array(vec![deep_array]);
        }
        assert!(parse_error(deep_array).contains("nested"));
        let mut shallow = json!({"a": 1});
        for _ in 0..50 {
            shallow = json!({ "$and": [shallow] });
        }
        assert!(parse(shallow).matches(&json!({"a": 1})));
    }

    #[test]
    fn errors_display_their_reason() {
        let error = Selector::parse(&json!({"a": {"$nope": 1}})).expect_err("invalid");
        assert_eq!(error.to_string(), "Invalid operator: $nope");
    }

    // --- CouchDB's integration tests over its user documents ---

    /// The 15 user documents of CouchDB's Mango test suite (`user_docs`),
    /// without the fields no test here reads.
    fn user_docs() -> Vec<Value> {
        serde_json::from_str(USER_DOCS).expect("valid fixture")
    }

    fn user_ids(selector: Value) -> Vec<i64> {
        user_ids_in(selector, &user_docs())
    }

    fn user_ids_in(selector: Value, docs: &[Value]) -> Vec<i64> {
        let selector = parse(selector);
        let mut ids: Vec<i64> = docs
            .iter()
            .filter(|doc| selector.matches(doc))
            .filter_map(|doc| doc.get("user_id").and_then(Value::as_i64))
            .collect();
        ids.sort_unstable();
        ids
    }

    #[test]
    fn couchdb_basic_find_cases_select_the_same_users() {
        assert_eq!(user_ids(json!({"age": {"$lt": 35}})), [1, 7, 9]);
        assert_eq!(
            user_ids(json!({"manager": true, "location.city": "Longbranch"})),
            [7]
        );
        assert_eq!(
            user_ids(json!({"$and": [
                {"age": {"$gte": 75}},
                {"$or": [{"name.first": "Mathis"}, {"name.first": "Whitley"}]}
            ]})),
            [11, 13]
        );
        assert_eq!(
            user_ids(json!({
                "location.state": {"$and": [{"$gt": "Hawaii"}, {"$lt": "Maine"}]},
                "location.city": {"$lt": "Longbranch"}
            })),
            [6]
        );
        assert_eq!(user_ids(json!({"favorites.3": "C"})), [6]);
        assert_eq!(user_ids(json!({"favorites.3": null})), Vec::<i64>::new());
        assert_eq!(user_ids(json!({"twitter": {"$gt": null}})), [0, 1, 4, 13]);
        assert_eq!(user_ids(json!({})).len(), 15);
        assert_eq!(
            user_ids(json!({"_id": {"$gt": null}, "location": {}})),
            Vec::<i64>::new()
        );
        assert_eq!(
            user_ids(json!({"$and": [{"age": {"$gt": 0}}, {"age": {"$lt": 0}}]})),
            Vec::<i64>::new()
        );
        assert_eq!(user_ids(json!({"favorites": {"$nin": []}})).len(), 15);
        assert_eq!(
            user_ids(json!({"age": 22, "company": {"$all": []}})),
            Vec::<i64>::new()
        );
    }

    #[test]
    fn couchdb_operator_cases_select_the_same_users() {
        assert_eq!(
            user_ids(json!({"manager": true, "favorites": {"$all": ["Lisp", "Python"]}})),
            [2, 9, 12]
        );
        assert_eq!(
            user_ids(json!({"manager": true, "location": {"$all": ["Ohai"]}})),
            Vec::<i64>::new()
        );
        assert_eq!(
            user_ids(json!({"manager": true, "favorites": {"$in": ["Ruby", "Python"]}})),
            [2, 6, 7, 9, 11, 12]
        );
        assert_eq!(
            user_ids(json!({"manager": true, "favorites": {"$nin": ["Erlang", "Python"]}})),
            [5, 6, 8, 11]
        );
        assert_eq!(
            user_ids(json!({"age": {"$gt": 40}, "location.state": {"$regex": "(?i)new.*"}})),
            [2, 10]
        );
        assert_eq!(
            user_ids(json!({"age": {"$gt": 0}, "twitter": {"$exists": false}})),
            [2, 3, 5, 6, 7, 8, 10, 11, 12, 14]
        );
        assert_eq!(user_ids(json!({"twitter": null})), [9]);
        assert_eq!(
            user_ids(json!({"twitter": {"$ne": "notamatch"}})),
            [0, 1, 4, 9, 13]
        );
        assert_eq!(user_ids(json!({"twitter": {"$lte": null}})), [9]);
        assert_eq!(
            user_ids(json!({"twitter": {"$and": [{"$lte": "@z"}, {"$ne": null}]}})),
            [0, 1, 4, 13]
        );
        assert_eq!(user_ids(json!({"twitter": {"$gte": null}})).len(), 5);
        assert_eq!(user_ids(json!({"twitter": {"$lt": 1}})), [9]);
        assert_eq!(user_ids(json!({"twitter": {"$lte": 1}})), [9]);
        assert_eq!(
            user_ids(json!({"favorites": {"$allMatch": {"$eq": "Erlang"}}})),
            [10]
        );
        assert_eq!(user_ids(json!({"favorites": {"$size": 4}})), [1, 3, 4, 6]);
        assert_eq!(
            user_ids(json!({"exists_object.should": {"$exists": true}})),
            [11]
        );
        assert_eq!(
            user_ids(json!({"exists_array": {"$exists": true}})),
            [9, 10]
        );
    }

    #[test]
    fn couchdb_unicode_collation_cases_select_the_same_users() {
        // "ordered" holds null, false, true, 9, 10000, "a", "A", "aa".
        assert_eq!(
            user_ids(json!({"ordered": {"$lte": "a"}})),
            [7, 8, 9, 10, 11, 12]
        );
        assert_eq!(user_ids(json!({"ordered": {"$gte": "a"}})), [12, 13, 14]);
    }

    #[test]
    fn couchdb_begins_with_cases_select_the_same_users() {
        let mut docs = user_docs();
        docs.push(json!({"user_id": 99, "location": {"state": ":Bar"}}));
        let cases: [(&str, &[i64]); 6] = [
            ("New", &[2, 10]),
            ("New ", &[2, 10]),
            (":", &[99]),
            ("Foo", &[]),
            ("\"Foo", &[]),
            (" New", &[]),
        ];
        for (prefix, expected) in cases {
            assert_eq!(
                user_ids_in(json!({"location.state": {"$beginsWith": prefix}}), &docs),
                expected,
                "prefix {prefix:?}"
            );
        }
    }

    #[test]
    fn couchdb_multi_type_value_cases_select_the_same_documents() {
        let docs = [
            json!({"_id": "1", "name": "Jimi", "age": 10}),
            json!({"_id": "2", "name": {"forename": "Eddie"}, "age": 20}),
            json!({"_id": "3", "name": null, "age": 30}),
            json!({"_id": "4", "name": 1, "age": 40}),
            json!({"_id": "5", "forename": "Sam", "age": 50}),
        ];
        let ids = |selector: Value| {
            let selector = parse(selector);
            docs.iter()
                .filter(|d| selector.matches(d))
                .filter_map(|d| d.get("_id").and_then(Value::as_str))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            ids(json!({"name": {"$exists": true}})),
            ["1", "2", "3", "4"]
        );
        assert_eq!(ids(json!({"name.forename": {"$exists": true}})), ["2"]);
        assert_eq!(ids(json!({"name": {"$gte": 0}})), ["1", "2", "4"]);
        assert_eq!(
            ids(json!({"age": {"$gte": 0, "$lt": 40}, "name": {"$gte": 0}})),
            ["1", "2"]
        );
    }

    const USER_DOCS: &str = r##"[
{"_id": "71562648-6acb-42bc-a182-df6b1f005b09", "user_id": 0, "name": {"first": "Stephanie", "last": "Kirkland"}, "age": 48, "location": {"state": "Nevada", "city": "Ronco"}, "manager": false, "twitter": "@stephaniekirkland", "favorites": ["Ruby", "C", "Python"], "test": [{"a": 1}, {"b": 2}]},
{"_id": "12a2800c-4fe2-45a8-8d78-c084f4e242a9", "user_id": 1, "name": {"first": "Abbott", "last": "Watson"}, "age": 31, "location": {"state": "Connecticut", "city": "Gerber"}, "manager": false, "twitter": "@abbottwatson", "favorites": ["Ruby", "Python", "C", {"Versions": {"Alpha": "Beta"}}], "test": [{"a": 1, "b": 2}]},
{"_id": "48ca0455-8bd0-473f-9ae2-459e42e3edd1", "user_id": 2, "name": {"first": "Shelly", "last": "Ewing"}, "age": 42, "location": {"state": "New Mexico", "city": "Thornport"}, "manager": true, "favorites": ["Lisp", "Python", "Erlang"], "test_in": {"val1": 1, "val2": "val2"}},
{"_id": "0461444c-e60a-457d-a4bb-b8d811853f21", "user_id": 3, "name": {"first": "Madelyn", "last": "Soto"}, "age": 79, "location": {"state": "Utah", "city": "Albany"}, "manager": true, "favorites": [["Lisp", "Erlang", "Python"], "Erlang", "C", "Erlang"], "11111": "number_field", "22222": {"33333": "nested_number_field"}},
{"_id": "8e1c90c0-ac18-4832-8081-40d14325bde0", "user_id": 4, "name": {"first": "Nona", "last": "Horton"}, "age": 61, "location": {"state": "Georgia", "city": "Corinne"}, "manager": false, "twitter": "@nonahorton", "favorites": ["Lisp", "C", "Ruby", "Ruby"], "name.first": "name dot first"},
{"_id": "a33d5457-741a-4dce-a217-3eab28b24e3e", "user_id": 5, "name": {"first": "Sheri", "last": "Perkins"}, "age": 73, "location": {"state": "Michigan", "city": "Nutrioso"}, "manager": true, "favorites": ["Lisp", "Lisp"]},
{"_id": "b31dad3f-ae8b-4f86-8327-dfe8770beb27", "user_id": 6, "name": {"first": "Tate", "last": "Guy"}, "age": 47, "location": {"state": "Illinois", "city": "Helen"}, "manager": true, "favorites": ["C", "Lisp", "Ruby", "C"]},
{"_id": "659d0430-b1f4-413a-a6b7-9ea1ef071325", "user_id": 7, "name": {"first": "Jewell", "last": "Stafford"}, "age": 33, "location": {"state": "Iowa", "city": "Longbranch"}, "manager": true, "favorites": ["C", "C", "Ruby", "Ruby", "Erlang"], "exists_field": "should_exist1", "ordered": null},
{"_id": "6c0afcf1-e57e-421d-a03d-0c0717ebf843", "user_id": 8, "name": {"first": "James", "last": "Mcdaniel"}, "age": 68, "location": {"state": "Maine", "city": "Craig"}, "manager": true, "favorites": null, "exists_field": "should_exist2", "ordered": false},
{"_id": "954272af-d5ed-4039-a5eb-8ed57e9def01", "user_id": 9, "name": {"first": "Ramona", "last": "Floyd"}, "age": 22, "location": {"state": "Missouri", "city": "Foxworth"}, "manager": true, "twitter": null, "favorites": ["Lisp", "Erlang", "Python"], "exists_array": ["should", "exist", "array1"], "complex_field_value": "+-()%{}[]^~&&*||\"\\/? =>!", "ordered": true},
{"_id": "e900001d-bc48-48a6-9b1a-ac9a1f5d1a03", "user_id": 10, "name": {"first": "Charmaine", "last": "Mills"}, "age": 43, "location": {"state": "New Hampshire", "city": "Kiskimere"}, "manager": true, "favorites": ["Erlang", "Erlang"], "exists_array": ["should", "exist", "array2"], "ordered": 9},
{"_id": "b06aadcf-cd0f-4ca6-9f7e-2c993e48d4c4", "user_id": 11, "name": {"first": "Mathis", "last": "Hernandez"}, "age": 75, "location": {"state": "Hawaii", "city": "Dupuyer"}, "manager": true, "favorites": ["Ruby", "Lisp", "C", "C++", "C++"], "exists_object": {"should": "object"}, "ordered": 10000},
{"_id": "5b61abc1-a3d3-4092-b9d7-ced90e675536", "user_id": 12, "name": {"first": "Patti", "last": "Rosales"}, "age": 71, "location": {"state": "Pennsylvania", "city": "Juntura"}, "manager": true, "favorites": ["C", "Python", "Lisp"], "exists_object": {"another": "object"}, "ordered": "a"},
{"_id": "b1e70402-8add-4068-af8f-b4f3d0feb049", "user_id": 13, "name": {"first": "Whitley", "last": "Harvey"}, "age": 78, "location": {"state": "Minnesota", "city": "Trail"}, "manager": false, "twitter": "@whitleyharvey", "favorites": ["C", "Ruby", "Ruby"], "ordered": "A"},
{"_id": "c78c529f-0b07-4947-90a6-d6b7ca81da62", "user_id": 14, "name": {"first": "Faith", "last": "Hess"}, "age": 51, "location": {"state": "North Dakota", "city": "Axis"}, "foo": "bar car apple", "favorites": ["Erlang", "Python", "Lisp"], "ordered": "aa"}
]"##;
}

/// One end of a field's range, as an index can use it.
#[derive(Debug, Clone, PartialEq)]
pub enum RangeEnd {
    /// No bound on this side.
    Open,
    Inclusive(Value),
    Exclusive(Value),
}

/// The values a field may take by the selector's indexable conditions.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldRange {
    pub low: RangeEnd,
    pub high: RangeEnd,
}

impl FieldRange {
    fn all() -> FieldRange {
        FieldRange {
            low: RangeEnd::Open,
            high: RangeEnd::Open,
        }
    }

    /// Whether no value can lie inside.
    pub fn is_empty(&self) -> bool {
        let (lo, lo_in) = match &self.low {
            RangeEnd::Open => return false,
            RangeEnd::Inclusive(v) => (v, true),
            RangeEnd::Exclusive(v) => (v, false),
        };
        let (hi, hi_in) = match &self.high {
            RangeEnd::Open => return false,
            RangeEnd::Inclusive(v) => (v, true),
            RangeEnd::Exclusive(v) => (v, false),
        };
        match collate(lo, hi) {
            Ordering::Greater => true,
            Ordering::Equal => !(lo_in && hi_in),
            Ordering::Less => false,
        }
    }

    fn narrow(&mut self, op: CompareOp, value: &Value) {
        let raise = |low: &mut RangeEnd, new: RangeEnd| {
            let replace = match (&*low, &new) {
                (RangeEnd::Open, _) => true,
                (
                    RangeEnd::Inclusive(a) | RangeEnd::Exclusive(a),
                    RangeEnd::Inclusive(b) | RangeEnd::Exclusive(b),
                ) => match collate(b, a) {
                    Ordering::Greater => true,
                    Ordering::Equal => matches!(new, RangeEnd::Exclusive(_)),
                    Ordering::Less => false,
                },
                (_, RangeEnd::Open) => false,
            };
            if replace {
                *low = new;
            }
        };
        let lower = |high: &mut RangeEnd, new: RangeEnd| {
            let replace = match (&*high, &new) {
                (RangeEnd::Open, _) => true,
                (
                    RangeEnd::Inclusive(a) | RangeEnd::Exclusive(a),
                    RangeEnd::Inclusive(b) | RangeEnd::Exclusive(b),
                ) => match collate(b, a) {
                    Ordering::Less => true,
                    Ordering::Equal => matches!(new, RangeEnd::Exclusive(_)),
                    Ordering::Greater => false,
                },
                (_, RangeEnd::Open) => false,
            };
            if replace {
                *high = new;
            }
        };
        match op {
            CompareOp::Eq => {
                raise(&mut self.low, RangeEnd::Inclusive(value.clone()));
                lower(&mut self.high, RangeEnd::Inclusive(value.clone()));
            }
            CompareOp::Gt => raise(&mut self.low, RangeEnd::Exclusive(value.clone())),
            CompareOp::Gte => raise(&mut self.low, RangeEnd::Inclusive(value.clone())),
            CompareOp::Lt => lower(&mut self.high, RangeEnd::Exclusive(value.clone())),
            CompareOp::Lte => lower(&mut self.high, RangeEnd::Inclusive(value.clone())),
            CompareOp::Ne => {}
        }
    }
}

/// A field path as Mango writes it: segments joined by `.`, dots inside a
/// segment escaped.
fn path_name(path: &[String]) -> String {
    path.iter()
        .map(|s| s.replace('.', "\\."))
        .collect::<Vec<_>>()
        .join(".")
}

impl Selector {
    /// The ranges of the fields an index can narrow: conditions reached
    /// through `$and` alone whose operator is a comparison (not `$ne`),
    /// `$beginsWith` or `$exists` (which leaves the range whole), each
    /// field's conditions intersected. As CouchDB's `field_ranges`.
    pub fn field_ranges(&self) -> std::collections::BTreeMap<String, FieldRange> {
        fn walk(node: &Node, out: &mut std::collections::BTreeMap<String, FieldRange>) {
            match node {
                Node::And(items) => items.iter().for_each(|n| walk(n, out)),
                Node::Field { path, cond } if !path.is_empty() => {
                    let name = path_name(path);
                    match cond {
                        Cond::Compare(op, value) if *op != CompareOp::Ne => {
                            out.entry(name)
                                .or_insert_with(FieldRange::all)
                                .narrow(*op, value);
                        }
                        Cond::BeginsWith(prefix) => {
                            let range = out.entry(name).or_insert_with(FieldRange::all);
                            range.narrow(CompareOp::Gte, &Value::String(prefix.clone()));
                            range.narrow(
                                CompareOp::Lte,
                                &Value::String(format!("{prefix}\u{FFFF}")),
                            );
                        }
                        Cond::Exists(true) => {
                            out.entry(name).or_insert_with(FieldRange::all);
                        }
                        _ => {}
                    }
                }
                _ => {}
            }
        }
        let mut out = Default::default();
        walk(&self.root, &mut out);
        out
    }

    /// Whether the selector has a condition on `field` that a document
    /// lacking the field cannot pass (any but `$exists: false`), through
    /// `$and`, or in every branch of an `$or`: CouchDB's test of whether
    /// an index on the field holds every match.
    pub fn requires_field(&self, field: &str) -> bool {
        fn has(node: &Node, field: &str) -> bool {
            match node {
                Node::And(items) => items.iter().any(|n| has(n, field)),
                Node::Or(items) => !items.is_empty() && items.iter().all(|n| has(n, field)),
                Node::Field { path, cond } => {
                    !path.is_empty()
                        && path_name(path) == field
                        && !matches!(cond, Cond::Exists(false))
                }
                Node::Not(_) | Node::Nor(_) => false,
            }
        }
        has(&self.root, field)
    }

    /// Fields the selector fixes to one value (`$eq` through `$and`).
    pub fn equal_fields(&self) -> Vec<String> {
        fn walk(node: &Node, out: &mut Vec<String>) {
            match node {
                Node::And(items) => items.iter().for_each(|n| walk(n, out)),
                Node::Field {
                    path,
                    cond: Cond::Compare(CompareOp::Eq, _),
                } if !path.is_empty() => out.push(path_name(path)),
                _ => {}
            }
        }
        let mut out = Vec::new();
        walk(&self.root, &mut out);
        out
    }

    /// Every field the selector looks at (sorted, once each).
    pub fn fields(&self) -> Vec<String> {
        fn walk(node: &Node, out: &mut std::collections::BTreeSet<String>) {
            match node {
                Node::And(items) | Node::Or(items) | Node::Nor(items) => {
                    items.iter().for_each(|n| walk(n, out))
                }
                Node::Not(inner) => walk(inner, out),
                Node::Field { path, .. } if !path.is_empty() => {
                    out.insert(path_name(path));
                }
                Node::Field { .. } => {}
            }
        }
        let mut out = Default::default();
        walk(&self.root, &mut out);
        out.into_iter().collect()
    }
}

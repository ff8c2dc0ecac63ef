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
//!   from [`collation`].
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
//! * `$text` (a Lucene query on a `nouveau` index's `$default` field)
//!   matches every document here, as in CouchDB: the index decides; see
//!   [`Selector::text_query`] for the query a selector asks of the index.

use std::cmp::Ordering;

use regex::Regex;
use serde_json::{Map, Value};

use collation::*;

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
    /// `$text`: a query for the full-text index, which alone can judge it.
    Text(String),
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
        "$text" => {
            let query = match arg {
                Value::String(s) => s.clone(),
                Value::Number(_) | Value::Bool(_) => arg.to_string(),
                _ => return Err(bad_arg(op, arg, "expected a string")),
            };
            // At the top it is asked of the index's `$default` field.
            if path.is_empty() {
                return Ok(field(&["$default".to_string()], Cond::Text(query)));
            }
            Cond::Text(query)
        }
        // Operators CouchDB knows but that need something Recliner lacks
        // (`$default` is `$text`'s internal form).
        "$default" | "$where" | "$geoWithin" | "$geoIntersects" | "$near" | "$nearSphere" => {
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
            // Only the full-text index can judge `$text`: trusted, as CouchDB does.
            Node::Field {
                cond: Cond::Text(_),
                ..
            } => true,
            Node::Field {
                path,
                cond: Cond::Compare(op, arg),
            } if is_id(path) && !arg.is_string() => match lookup(value, path) {
                Lookup::Found(found) => op.holds(id_order(found, arg)),
                Lookup::Missing | Lookup::BadPath => false,
            },
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

fn is_id(path: &[String]) -> bool {
    matches!(path, [only] if only == "_id")
}

/// How a document id compares with a value that is not a string: CouchDB
/// orders ids as its runtime orders terms, where every other JSON value
/// comes before every string (so `_id: {"$gt": {}}` is every document and
/// `_id: {"$lt": []}` none, as its `_all_docs` ranges read them).
fn id_order(id: &Value, other: &Value) -> Ordering {
    if id.is_string() && !other.is_string() {
        Ordering::Greater
    } else {
        collate(id, other)
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
            Cond::Text(_) => true,
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
mod tests;

mod text_query;

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

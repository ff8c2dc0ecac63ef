//! A selector as a Lucene query for a Mango full-text (`nouveau`) index,
//! ported from CouchDB's `mango_selector_text`: each condition becomes a
//! query on the field named by its path and its value's type
//! (`bar_3Anumber:[5 TO *]`), `$exists` a query on `$fieldnames`, `$text`
//! one on `$default`. Conditions Lucene cannot judge (`$regex`, `$type`,
//! ...) only ask for the field: the documents found are matched against
//! the whole selector again, so the query must find at least every match.

use serde_json::Value;

use super::{CompareOp, Cond, Node, Selector};
use crate::text::{escape_field, field_name};

/// CouchDB's abstract text selector (`op_and`, `op_or`, ...).
#[derive(Debug, Clone)]
enum Q {
    And(Vec<Q>),
    Or(Vec<Q>),
    /// The field exists and the query does not hold.
    Not(Box<Q>, Box<Q>),
    /// `$exists: false`: the field does not exist.
    Missing(Box<Q>),
    /// A path, the type suffix of its name, and the query value.
    Field(Vec<String>, String, String),
    /// `$eq: null`, which is not one of the index's columns.
    Null(Vec<String>, String),
    /// `$fieldnames:` the path's name, then `:` and the suffix when there
    /// is a type, else the wildcard.
    FieldName(Vec<String>, Option<&'static str>, &'static str),
    /// `$regex`: documents with the field as a string.
    Regex(Vec<String>),
    /// `$text` at the top: `$default`.
    Default(String),
}

impl Selector {
    /// The Lucene query that finds the selector's candidates
    /// (`mango_selector_text:convert/1`); empty when it asks nothing.
    pub fn text_query(&self) -> String {
        to_query(&node(&self.root, &[]))
    }

    /// The `name:type` columns an index needs to answer the selector
    /// (`mango_idx_nouveau:indexable_fields`).
    pub fn text_fields(&self) -> Vec<String> {
        let mut out = Vec::new();
        indexable(&node(&self.root, &[]), &mut out);
        let mut seen = std::collections::HashSet::new();
        out.retain(|f| seen.insert(f.clone()));
        out
    }

    /// How many `$text` conditions the selector holds.
    pub fn text_count(&self) -> usize {
        fn in_node(node: &Node) -> usize {
            match node {
                Node::And(items) | Node::Or(items) | Node::Nor(items) => {
                    items.iter().map(in_node).sum()
                }
                Node::Not(inner) => in_node(inner),
                Node::Field { cond, .. } => in_cond(cond),
            }
        }
        fn in_cond(cond: &Cond) -> usize {
            match cond {
                Cond::Text(_) => 1,
                Cond::ElemMatch(sub) | Cond::AllMatch(sub) | Cond::KeyMapMatch(sub) => in_node(sub),
                Cond::Not(inner) => in_cond(inner),
                _ => 0,
            }
        }
        in_node(&self.root)
    }

    /// Whether the selector needs a full-text index (`$text`).
    pub fn has_text(&self) -> bool {
        self.text_count() > 0
    }
}

fn node(node: &Node, base: &[String]) -> Q {
    match node {
        Node::And(items) => Q::And(items.iter().map(|n| self::node(n, base)).collect()),
        Node::Or(items) => Q::Or(items.iter().map(|n| self::node(n, base)).collect()),
        // Only inside `$elemMatch`: a negated superset would lose matches.
        Node::Not(_) | Node::Nor(_) => exists(base),
        Node::Field { path, cond } => {
            let mut full = base.to_vec();
            full.extend(path.iter().cloned());
            if base.is_empty()
                && path.len() == 1
                && path[0] == "$default"
                && let Cond::Text(query) = cond
            {
                return Q::Default(value_str(&Value::String(query.clone())));
            }
            // An array position also asks every element (`a.0` and `a.[]`).
            if path.iter().any(|p| is_integer(p)) {
                let mut arrays = base.to_vec();
                arrays.extend(path.iter().map(|p| {
                    if is_integer(p) {
                        "[]".to_string()
                    } else {
                        p.clone()
                    }
                }));
                return Q::Or(vec![convert(&full, cond), convert(&arrays, cond)]);
            }
            convert(&full, cond)
        }
    }
}

/// Erlang's `binary_to_integer` accepts it.
fn is_integer(part: &str) -> bool {
    let digits = part
        .strip_prefix('-')
        .or_else(|| part.strip_prefix('+'))
        .unwrap_or(part);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

fn elements(path: &[String]) -> Vec<String> {
    let mut out = path.to_vec();
    out.push("[]".into());
    out
}

fn exists(path: &[String]) -> Q {
    Q::Or(vec![
        Q::FieldName(path.to_vec(), Some(""), "*"),
        Q::FieldName(path.to_vec(), None, ".*"),
    ])
}

fn convert(path: &[String], cond: &Cond) -> Q {
    match cond {
        Cond::Compare(CompareOp::Eq, value) => eq(path, value),
        Cond::Compare(CompareOp::Ne, value) => {
            Q::Not(Box::new(exists(path)), Box::new(eq(path, value)))
        }
        Cond::Compare(op, value) => match value {
            Value::Array(_) | Value::Object(_) | Value::Null => exists(path),
            _ => Q::Field(path.to_vec(), type_str(value).into(), range(*op, value)),
        },
        Cond::In(args) => Q::Or(args.iter().map(|arg| one_of(path, arg)).collect()),
        Cond::Nin(args) => Q::Not(
            Box::new(exists(path)),
            Box::new(Q::Or(args.iter().map(|arg| one_of(path, arg)).collect())),
        ),
        Cond::All(args) => match args.as_slice() {
            [whole @ Value::Array(_)] => Q::Or(vec![eq(path, whole), eq(&elements(path), whole)]),
            _ => Q::And(args.iter().map(|a| eq(&elements(path), a)).collect()),
        },
        Cond::Exists(true) => exists(path),
        Cond::Exists(false) => Q::Missing(Box::new(exists(path))),
        Cond::Type(_) | Cond::KeyMapMatch(_) => exists(path),
        Cond::Mod { .. } => Q::FieldName(path.to_vec(), Some("number"), ""),
        Cond::Regex(_) => Q::Regex(path.to_vec()),
        Cond::Size(n) => Q::Field(elements(path), "length".into(), n.to_string()),
        Cond::BeginsWith(prefix) => Q::Field(
            path.to_vec(),
            "string".into(),
            format!("{}*", escape_value(prefix)),
        ),
        Cond::ElemMatch(sub) | Cond::AllMatch(sub) => node(sub, &elements(path)),
        Cond::Text(query) => Q::Field(
            path.to_vec(),
            "string".into(),
            value_str(&Value::String(query.clone())),
        ),
        // A negation is exact only when what it negates is.
        Cond::Not(inner) if exact(inner) => {
            Q::Not(Box::new(exists(path)), Box::new(convert(path, inner)))
        }
        Cond::Not(_) => exists(path),
    }
}

/// Whether the query of `cond` finds exactly its matches.
fn exact(cond: &Cond) -> bool {
    let scalar = |v: &Value| !matches!(v, Value::Array(_) | Value::Object(_));
    match cond {
        Cond::Compare(CompareOp::Eq | CompareOp::Ne, v) => scalar(v),
        Cond::In(args) | Cond::Nin(args) => args.iter().all(scalar),
        Cond::Size(_) | Cond::Exists(_) => true,
        _ => false,
    }
}

/// `$eq`: an array by its length and each element, an object by its members.
fn eq(path: &[String], value: &Value) -> Q {
    match value {
        Value::Null => Q::Null(path.to_vec(), value_str(value)),
        Value::Array(items) => {
            let inner = elements(path);
            let mut parts = vec![Q::Field(
                inner.clone(),
                "length".into(),
                items.len().to_string(),
            )];
            parts.extend(items.iter().map(|item| eq(&inner, item)));
            Q::And(parts)
        }
        Value::Object(map) if map.is_empty() => exists(path),
        Value::Object(map) => Q::And(
            map.iter()
                .map(|(k, v)| {
                    if k.starts_with('$') {
                        return exists(path);
                    }
                    let mut inner = path.to_vec();
                    inner.push(k.clone());
                    eq(&inner, v)
                })
                .collect(),
        ),
        _ => Q::Field(path.to_vec(), type_str(value).into(), value_str(value)),
    }
}

/// One `$in` argument: the field itself or one of its elements.
fn one_of(path: &[String], arg: &Value) -> Q {
    Q::Or(vec![eq(path, arg), eq(&elements(path), arg)])
}

fn type_str(value: &Value) -> &'static str {
    match value {
        Value::Number(_) => "number",
        Value::Bool(_) => "boolean",
        Value::String(_) => "string",
        _ => "null",
    }
}

fn range(op: CompareOp, value: &Value) -> String {
    let number = value.is_number();
    // CouchDB writes `""` and `u0x10FFFF` (an Erlang escape gone wrong) as
    // the open ends of a string range; `*` is the open end it meant.
    let (min, max) = if number { ("*", "*") } else { ("\"\"", "*") };
    let v = value_str(value);
    match op {
        CompareOp::Lt => format!("[{min} TO {v}}}"),
        CompareOp::Lte => format!("[{min} TO {v}]"),
        CompareOp::Gte => format!("[{v} TO {max}]"),
        _ => format!("{{{v} TO {max}]"),
    }
}

/// A value as a query term (`value_str`).
fn value_str(value: &Value) -> String {
    match value {
        Value::String(s) => format!("\"{}\"", escape_value(s)),
        Value::Number(n) if n.is_f64() => erlang_float(n.as_f64().unwrap_or(0.0)),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        _ => "true".into(),
    }
}

/// Erlang's `float_to_binary/1`: 20 digits after the point, a signed
/// two-digit exponent (`1.20000000000000000000e+01`).
fn erlang_float(f: f64) -> String {
    let text = format!("{f:.20e}");
    let (mantissa, exponent) = text.split_once('e').unwrap_or((&text, "0"));
    let (sign, digits) = match exponent.strip_prefix('-') {
        Some(d) => ('-', d),
        None => ('+', exponent),
    };
    format!("{mantissa}e{sign}{digits:0>2}")
}

/// Lucene's special characters and whitespace, escaped
/// (`mango_util:lucene_escape_query_value`).
fn escape_value(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '&' | '|' if chars.peek() == Some(&c) => {
                chars.next();
                out.push('\\');
                out.push(c);
                out.push(c);
            }
            '+' | '-' | '(' | ')' | '{' | '}' | '[' | ']' | '!' | '^' | '~' | '*' | '?' | ':'
            | '/' | '\\' | '"' | ' ' | '\t' | '\r' | '\n' => {
                out.push('\\');
                out.push(c);
            }
            other => out.push(other),
        }
    }
    out
}

fn to_query(q: &Q) -> String {
    let joined = |args: &[Q], sep: &str| {
        let parts: Vec<String> = args
            .iter()
            .map(to_query)
            .filter(|p| !p.is_empty() && p != "()")
            .collect();
        if parts.is_empty() {
            String::new()
        } else {
            format!("({})", parts.join(sep))
        }
    };
    match q {
        Q::And(args) => joined(args, " AND "),
        Q::Or(args) => joined(args, " OR "),
        Q::Not(exists, arg) => match to_query(arg) {
            inner if inner.is_empty() => format!("({})", to_query(exists)),
            inner => format!("({} AND NOT ({inner}))", to_query(exists)),
        },
        Q::Missing(exists) => format!("($fieldnames:/.*/  AND NOT ({}))", to_query(exists)),
        Q::Field(path, kind, value) => format!("({}:{value})", field_name(path, kind)),
        Q::Null(path, value) => format!("({}:{value})", field_name(path, "null")),
        Q::FieldName(path, Some(kind), wildcard) => {
            format!("($fieldnames:{}{wildcard})", field_name(path, kind))
        }
        Q::FieldName(path, None, wildcard) => {
            let name: Vec<String> = path.iter().map(|p| escape_field(p)).collect();
            format!("($fieldnames:{}{wildcard})", name.join("."))
        }
        Q::Regex(path) => format!("($fieldnames:{}string)", field_name(path, "")),
        Q::Default(value) => format!("($default:{value})"),
    }
}

/// A path and type as a column name (`a.b:string`), dots in segments escaped.
fn column(path: &[String], kind: &str) -> String {
    let name: Vec<String> = path.iter().map(|p| p.replace('.', "\\.")).collect();
    format!("{}:{kind}", name.join("."))
}

fn indexable(q: &Q, out: &mut Vec<String>) {
    match q {
        Q::And(args) => args.iter().for_each(|a| indexable(a, out)),
        // `$in` asks the field and its elements; an index defines one.
        Q::Or(args) => match args.as_slice() {
            [first @ Q::Field(..), Q::Field(path, ..)] if path.iter().any(|p| p == "[]") => {
                indexable(first, out)
            }
            _ => args.iter().for_each(|a| indexable(a, out)),
        },
        Q::Not(exists, arg) => {
            indexable(exists, out);
            indexable(arg, out);
        }
        // CouchDB forgets what it found so far here.
        Q::Missing(_) => out.clear(),
        Q::Field(_, kind, _) if kind == "length" => {}
        Q::Field(path, kind, _) => out.push(column(path, kind)),
        Q::Null(..) | Q::FieldName(..) => {}
        Q::Regex(path) => out.push(column(path, "string")),
        Q::Default(_) => out.push("$default".into()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn query(selector: Value) -> String {
        Selector::parse(&selector).unwrap().text_query()
    }

    #[test]
    fn conditions_become_couchdbs_queries() {
        assert_eq!(query(json!({"bar": {"$gt": 5}})), "(bar_3Anumber:{5 TO *])");
        assert_eq!(query(json!({"foo": "foo"})), "(foo_3Astring:\"foo\")");
        assert_eq!(query(json!({"$text": "hello"})), "($default:\"hello\")");
        assert_eq!(
            query(json!({"bar": 12.0})),
            "(bar_3Anumber:1.20000000000000000000e+01)"
        );
        assert_eq!(
            query(json!({"a": {"$exists": true}})),
            "(($fieldnames:a_3A*) OR ($fieldnames:a.*))"
        );
        assert_eq!(
            query(json!({"a": {"$exists": false}})),
            "($fieldnames:/.*/  AND NOT ((($fieldnames:a_3A*) OR ($fieldnames:a.*))))"
        );
        assert_eq!(
            query(json!({"a": {"$ne": "x"}})),
            "((($fieldnames:a_3A*) OR ($fieldnames:a.*)) AND NOT ((a_3Astring:\"x\")))"
        );
        assert_eq!(
            query(json!({"tags": {"$size": 2}})),
            "(tags._5B_5D_3Alength:2)"
        );
        assert_eq!(
            query(json!({"a": {"$in": ["x", 1]}})),
            "(((a_3Astring:\"x\") OR (a._5B_5D_3Astring:\"x\")) OR ((a_3Anumber:1) OR (a._5B_5D_3Anumber:1)))"
        );
        assert_eq!(
            query(json!({"a": {"$regex": "^x"}})),
            "($fieldnames:a_3Astring)"
        );
        assert_eq!(
            query(json!({"a": "x", "b.c": true})),
            "((a_3Astring:\"x\") AND (b.c_3Aboolean:true))"
        );
        assert_eq!(
            query(json!({"a": {"$elemMatch": {"b": {"$lt": "m"}}}})),
            "(a._5B_5D.b_3Astring:[\"\" TO \"m\"})"
        );
        assert_eq!(query(json!({"s": "a b:c"})), "(s_3Astring:\"a\\ b\\:c\")");
        assert_eq!(query(json!({})), "");
    }

    #[test]
    fn indexable_fields_are_couchdbs() {
        let fields = |s: Value| Selector::parse(&s).unwrap().text_fields();
        assert_eq!(fields(json!({"bar": {"$gt": 5}})), ["bar:number"]);
        assert_eq!(fields(json!({"a": {"$in": ["x"]}})), ["a:string"]);
        assert_eq!(fields(json!({"$text": "x"})), ["$default"]);
        assert_eq!(
            fields(json!({"a": {"$exists": true}})),
            Vec::<String>::new()
        );
        assert_eq!(fields(json!({"t": {"$size": 1}})), Vec::<String>::new());
        assert_eq!(fields(json!({"a": {"$regex": "x"}})), ["a:string"]);
    }

    #[test]
    fn text_is_counted_and_trusted() {
        let s = Selector::parse(&json!({"$and": [{"$text": "a"}, {"$text": "b"}]})).unwrap();
        assert_eq!(s.text_count(), 2);
        assert!(s.matches(&json!({"_id": "x"})));
    }
}

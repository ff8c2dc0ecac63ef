//! CouchDB's raw view collation (a view's `options.collation: "raw"`):
//! Erlang's term order on the decoded JSON, which CouchDB compares with
//! `<` instead of ICU. Numbers (by value) < atoms (`false < null < true`,
//! by name) < objects (tuples: member by member, key then value, a prefix
//! first) < arrays (lists: element by element, a prefix first) < strings
//! (binaries: UTF-8 byte by byte).

use std::cmp::Ordering;

use serde_json::Value;

use crate::{compare_numbers, number_sort_key};

/// How a view orders its keys: CouchDB's default collation, or `raw`
/// (Erlang's term order, this module's).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Collation {
    #[default]
    Unicode,
    Raw,
}

impl Collation {
    /// A view's collation, from its `options.collation`: only `"raw"`
    /// changes it, as in CouchDB (other values are the default).
    pub fn of_view(view: &Value) -> Collation {
        match view.pointer("/options/collation").and_then(Value::as_str) {
            Some("raw") => Collation::Raw,
            _ => Collation::Unicode,
        }
    }

    /// Writes `value`'s sort key in this collation.
    pub fn sort_key(self, value: &Value, out: &mut Vec<u8>) {
        match self {
            Collation::Unicode => crate::sort_key(value, out),
            Collation::Raw => sort_key(value, out),
        }
    }
}

/// Orders two JSON values in Erlang's term order.
pub fn compare(a: &Value, b: &Value) -> Ordering {
    let by_type = rank(a).cmp(&rank(b));
    if by_type != Ordering::Equal {
        return by_type;
    }
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => compare_numbers(x, y),
        (Value::String(x), Value::String(y)) => x.as_bytes().cmp(y.as_bytes()),
        (Value::Array(x), Value::Array(y)) => x
            .iter()
            .zip(y)
            .map(|(i, j)| compare(i, j))
            .find(|o| *o != Ordering::Equal)
            .unwrap_or_else(|| x.len().cmp(&y.len())),
        (Value::Object(x), Value::Object(y)) => x
            .iter()
            .zip(y)
            .map(|((ka, va), (kb, vb))| {
                ka.as_bytes()
                    .cmp(kb.as_bytes())
                    .then_with(|| compare(va, vb))
            })
            .find(|o| *o != Ordering::Equal)
            .unwrap_or_else(|| x.len().cmp(&y.len())),
        // Two atoms of the same rank.
        _ => Ordering::Equal,
    }
}

fn rank(value: &Value) -> u8 {
    match value {
        Value::Number(_) => 1,
        Value::Bool(false) => 2,
        Value::Null => 3,
        Value::Bool(true) => 4,
        Value::Object(_) => 5,
        Value::Array(_) => 6,
        Value::String(_) => 7,
    }
}

/// Writes `value`'s raw sort key: bytes whose `memcmp` order is
/// [`compare`]'s. Each value starts with its rank's byte (1 to 7, never
/// 0); a number is then its order-keeping double, a string its bytes with
/// 0 written as `0 255`, then `0 0`; an array its elements, an object its
/// members (1, the key as a string, then the value), each then 0, which
/// sorts a prefix first.
pub fn sort_key(value: &Value, out: &mut Vec<u8>) {
    out.push(rank(value));
    match value {
        Value::Number(n) => number_sort_key(n, out),
        Value::String(s) => string(s, out),
        Value::Array(items) => {
            for item in items {
                sort_key(item, out);
            }
            out.push(0);
        }
        Value::Object(members) => {
            for (k, v) in members {
                out.push(1);
                string(k, out);
                sort_key(v, out);
            }
            out.push(0);
        }
        Value::Null | Value::Bool(_) => {}
    }
}

fn string(s: &str, out: &mut Vec<u8>) {
    for &b in s.as_bytes() {
        out.push(b);
        if b == 0 {
            out.push(255);
        }
    }
    out.extend_from_slice(&[0, 0]);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn key(v: &Value) -> Vec<u8> {
        let mut out = Vec::new();
        sort_key(v, &mut out);
        out
    }

    #[test]
    fn orders_keys_as_couchdb_3_5_raw_views_do() {
        // The order CouchDB 3.5 gave these keys in a view with
        // `options.collation: "raw"`.
        let ordered = [
            json!(-1),
            json!(0),
            json!(1),
            json!(1.5),
            json!(100),
            json!(false),
            json!(null),
            json!(true),
            json!({}),
            json!({"a": 1}),
            json!({"a": 1, "b": 2}),
            json!({"a": 2}),
            json!({"b": 1}),
            json!([]),
            json!([1]),
            json!([1, 2]),
            json!([null]),
            json!([{}]),
            json!([[]]),
            json!(["a"]),
            json!(""),
            json!("1"),
            json!("A"),
            json!("B"),
            json!("Z"),
            json!("_"),
            json!("a"),
            json!("aa"),
            json!("b"),
            json!("z"),
            json!("~"),
            json!("é"),
            json!("éa"),
        ];
        for (i, a) in ordered.iter().enumerate() {
            for (j, b) in ordered.iter().enumerate() {
                assert_eq!(compare(a, b), i.cmp(&j), "{a} against {b}");
                assert_eq!(key(a).cmp(&key(b)), i.cmp(&j), "{a} against {b}");
            }
        }
        assert_eq!(key(&json!(1.0)), key(&json!(1)));
        assert!(key(&json!("a")) < key(&json!("a\u{0}")));
        assert!(key(&json!("a\u{0}")) < key(&json!("a\u{1}")));
        assert!(key(&json!({})) < key(&json!({"\u{0}": 1})));
    }

    fn any_json() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            (-1_000i64..1_000).prop_map(|n| json!(n)),
            (-1e3f64..1e3).prop_map(|f| json!(f)),
            "[\u{0}\u{1}aAb~é]{0,3}".prop_map(Value::String),
        ];
        leaf.prop_recursive(3, 16, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                proptest::collection::vec(("[\u{0}ab]{0,2}", inner), 0..3)
                    .prop_map(|members| Value::Object(members.into_iter().collect())),
            ]
        })
    }

    proptest::proptest! {
        /// The bytes order exactly as the terms do.
        #[test]
        fn sort_keys_agree_with_compare(a in any_json(), b in any_json()) {
            proptest::prop_assert_eq!(key(&a).cmp(&key(&b)), compare(&a, &b), "{} against {}", a, b);
        }
    }
}

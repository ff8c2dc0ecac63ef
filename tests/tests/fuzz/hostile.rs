//! Hostile building blocks shared by the targets: strings, numbers, revision
//! ids and JSON values biased towards what has broken servers before (quotes
//! and backslashes that must be escaped, control characters, non-ASCII, the
//! edges of integer types, deep nesting).

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::select;
use serde_json::{Map, Number, Value};

/// Fragments that need escaping in JSON, URLs, SQL or logs, or mean
/// something to CouchDB (`_design/`, `-` in revisions).
pub const PIECES: &[&str] = &[
    "\"",
    "\\",
    "\\\"",
    "\\u0000",
    "\u{0}",
    "\n",
    "\r\n",
    "\t",
    "\u{1}",
    "\u{1f}",
    "\u{7f}",
    "\u{80}",
    "é",
    "日本",
    "😀",
    "\u{fffd}",
    "\u{200b}",
    "\u{2028}",
    "\u{feff}",
    "-",
    "--",
    "%",
    "%22",
    "%00",
    "%2F",
    "%FF",
    "/",
    "?",
    "#",
    "&",
    "=",
    "+",
    " ",
    "{",
    "}",
    "[",
    "]",
    ",",
    ":",
    "<",
    ">",
    "'",
    "`",
    "_",
    "_design/",
    "_local/",
    "..",
    "0",
    "1",
    "18446744073709551615",
    "9223372036854775808",
    "-9223372036854775808",
    "1e308",
    "NaN",
    "null",
    "true",
    "a",
];

/// Integers at the edges of the types a server may squeeze them into.
pub const EDGE_U64: &[u64] = &[
    0,
    1,
    2,
    3,
    1000,
    (1 << 31) - 1,
    1 << 31,
    1 << 32,
    1 << 53,
    (1 << 53) + 1,
    i64::MAX as u64 - 1,
    i64::MAX as u64,
    i64::MAX as u64 + 1,
    u64::MAX - 2,
    u64::MAX - 1,
    u64::MAX,
];

/// Mostly small, often an edge, sometimes anything.
pub fn edge_u64() -> BoxedStrategy<u64> {
    prop_oneof![
        3 => 0u64..8,
        4 => select(EDGE_U64),
        1 => any::<u64>(),
    ]
    .boxed()
}

/// Number-like texts for JSON bodies and query strings, valid or not.
pub fn number_text() -> BoxedStrategy<String> {
    prop_oneof![
        3 => edge_u64().prop_map(|n| n.to_string()),
        2 => select(&[
            "-1", "-0", "0.5", "1.0", "1e3", "1E2", "1e308", "-1e308", "1e999999", "5e-324",
            "-9223372036854775808", "-9223372036854775809", "18446744073709551616",
            "99999999999999999999999999", "00", "01", "0x10", "NaN", "Infinity", "\"3\"", "null",
            "true", "[]", "{}",
        ][..])
        .prop_map(str::to_string),
    ]
    .boxed()
}

/// Arbitrary text, biased towards [`PIECES`].
pub fn text() -> BoxedStrategy<String> {
    prop_oneof![
        3 => "[a-z0-9]{1,6}",
        2 => vec(select(PIECES), 1..5).prop_map(|v| v.concat()),
        2 => vec(
            prop_oneof![
                select(PIECES).prop_map(str::to_string),
                "[a-z]{1,3}",
                any::<char>().prop_map(String::from),
            ],
            0..6,
        )
        .prop_map(|v| v.concat()),
        1 => any::<String>(),
        1 => Just(String::new()),
    ]
    .boxed()
}

/// The position part of a revision id, as text.
pub fn pos_text() -> BoxedStrategy<String> {
    prop_oneof![
        4 => edge_u64().prop_map(|n| n.to_string()),
        2 => select(&[
            "", "0", "00", "01", "+1", " 1", "1 ", "-1", "1.0", "1e3", "١", "18446744073709551616",
            "99999999999999999999999", "-9223372036854775808", "0x1",
        ][..])
        .prop_map(str::to_string),
        1 => "[0-9]{1,25}",
    ]
    .boxed()
}

/// The hash part of a revision id: md5-shaped or anything.
pub fn hash_text() -> BoxedStrategy<String> {
    prop_oneof![
        3 => "[0-9a-f]{32}",
        1 => "[0-9A-F]{32}",
        1 => "[0-9a-f]{31,33}",
        1 => "[a-z]{1,3}",
        3 => text(),
        1 => Just(String::new()),
    ]
    .boxed()
}

/// A revision id, as text: mostly `N-hash`, sometimes anything.
pub fn rev_text() -> BoxedStrategy<String> {
    prop_oneof![
        4 => (pos_text(), hash_text()).prop_map(|(p, h)| format!("{p}-{h}")),
        1 => text(),
    ]
    .boxed()
}

/// A JSON object key: plain, hostile, or one of CouchDB's special fields.
pub fn key() -> BoxedStrategy<String> {
    prop_oneof![
        4 => "[a-c]{1,2}",
        2 => text(),
        1 => select(&[
            "_id", "_rev", "_deleted", "_revisions", "_attachments", "_conflicts", "_foo", "$eq",
            "$gt", "$and", "a.b", "",
        ][..])
        .prop_map(str::to_string),
    ]
    .boxed()
}

/// A scalar JSON value at the edges.
pub fn json_leaf() -> BoxedStrategy<Value> {
    prop_oneof![
        1 => Just(Value::Null),
        1 => any::<bool>().prop_map(Value::Bool),
        2 => edge_u64().prop_map(Value::from),
        1 => prop_oneof![any::<i64>(), select(&[i64::MIN, i64::MIN + 1, -1][..])].prop_map(Value::from),
        1 => prop_oneof![
            any::<f64>(),
            select(&[1e308, -1e308, 5e-324, -0.0, 0.5, 1e15, 9_007_199_254_740_993.0][..]),
        ]
        .prop_filter_map("finite", |f| Number::from_f64(f).map(Value::Number)),
        3 => text().prop_map(Value::String),
    ]
    .boxed()
}

/// Any JSON value, nested up to `depth` levels.
pub fn json(depth: u32) -> BoxedStrategy<Value> {
    json_leaf()
        .prop_recursive(depth, 48, 6, |inner| {
            prop_oneof![
                vec(inner.clone(), 0..5).prop_map(Value::Array),
                vec((key(), inner), 0..5).prop_map(|kv| Value::Object(kv.into_iter().collect())),
            ]
        })
        .boxed()
}

/// An object from key-value pairs (later keys win, as in a parsed body).
pub fn object(pairs: Vec<(String, Value)>) -> Value {
    Value::Object(pairs.into_iter().collect::<Map<String, Value>>())
}

/// `value` wrapped in `depth` arrays or objects.
pub fn nest(value: Value, depth: usize, in_objects: bool) -> Value {
    (0..depth).fold(value, |inner, _| {
        if in_objects {
            object(vec![("a".into(), inner)])
        } else {
            Value::Array(vec![inner])
        }
    })
}

/// Standard base64, for inline attachment data.
pub fn base64(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// A `_revisions` value: consistent, inconsistent or malformed.
pub fn revisions() -> BoxedStrategy<Value> {
    let start = prop_oneof![
        4 => edge_u64().prop_map(Value::from),
        1 => json_leaf(),
    ];
    let ids = prop_oneof![
        4 => vec(hash_text().prop_map(Value::String), 0..5).prop_map(Value::Array),
        1 => vec(json_leaf(), 0..3).prop_map(Value::Array),
        1 => json_leaf(),
    ];
    (start, ids)
        .prop_map(|(start, ids)| object(vec![("start".into(), start), ("ids".into(), ids)]))
        .boxed()
}

/// One `_attachments` entry: inline, stub or `follows`, with hostile metadata.
pub fn attachment() -> BoxedStrategy<Value> {
    let content_type = prop_oneof![
        3 => Just(Value::from("text/plain")),
        1 => text().prop_map(Value::String),
        1 => json_leaf(),
    ];
    let data = prop_oneof![
        4 => vec(any::<u8>(), 0..64).prop_map(|b| Value::String(base64(&b))),
        1 => text().prop_map(Value::String),
        1 => json_leaf(),
    ];
    let length = prop_oneof![
        3 => edge_u64().prop_map(Value::from),
        1 => json_leaf(),
    ];
    let encoding = prop_oneof![
        2 => Just(Value::from("gzip")),
        1 => text().prop_map(Value::String),
        1 => json_leaf(),
    ];
    let digest = prop_oneof![
        2 => vec(any::<u8>(), 16).prop_map(|b| Value::String(format!("md5-{}", base64(&b)))),
        1 => text().prop_map(Value::String),
    ];
    let kind = 0u8..3;
    (
        kind,
        content_type,
        data,
        length,
        prop::option::of(encoding),
        digest,
        prop::option::of(edge_u64()),
    )
        .prop_map(
            |(kind, content_type, data, length, encoding, digest, revpos)| {
                let mut pairs = vec![("content_type".to_string(), content_type)];
                match kind {
                    0 => pairs.push(("data".into(), data)),
                    1 => {
                        pairs.push(("stub".into(), Value::Bool(true)));
                        pairs.push(("digest".into(), digest));
                        pairs.push(("length".into(), length));
                    }
                    _ => {
                        pairs.push(("follows".into(), Value::Bool(true)));
                        pairs.push(("length".into(), length));
                    }
                }
                if let Some(encoding) = encoding {
                    pairs.push(("encoding".into(), encoding));
                }
                if let Some(revpos) = revpos {
                    pairs.push(("revpos".into(), Value::from(revpos)));
                }
                object(pairs)
            },
        )
        .boxed()
}

/// A document body shaped like a real one, with CouchDB's special fields
/// present or absent, well-formed or hostile. `id` and `rev` give its `_id`
/// and `_rev` candidates, so callers can aim at documents that exist.
pub fn document(
    id: impl Strategy<Value = Value> + 'static,
    rev: impl Strategy<Value = Value> + 'static,
) -> BoxedStrategy<Value> {
    (
        prop::option::weighted(0.8, id),
        prop::option::weighted(0.5, rev),
        prop::option::weighted(0.2, revisions()),
        prop::option::weighted(
            0.2,
            prop_oneof![4 => any::<bool>().prop_map(Value::Bool), 1 => json_leaf()],
        ),
        prop::option::weighted(
            0.25,
            vec(
                (prop_oneof![3 => "[a-z]{1,4}", 1 => text()], attachment()),
                0..3,
            )
            .prop_map(object),
        ),
        vec((key(), json(2)), 0..4),
        prop::option::weighted(0.05, (1usize..300, any::<bool>())),
    )
        .prop_map(
            |(id, rev, revisions, deleted, attachments, mut body, deep)| {
                let mut pairs: Vec<(String, Value)> = Vec::new();
                for (name, value) in [
                    ("_id", id),
                    ("_rev", rev),
                    ("_revisions", revisions),
                    ("_deleted", deleted),
                    ("_attachments", attachments),
                ] {
                    if let Some(value) = value {
                        pairs.push((name.into(), value));
                    }
                }
                if let Some((depth, in_objects)) = deep {
                    body.push(("deep".into(), nest(Value::from(1), depth, in_objects)));
                }
                pairs.append(&mut body);
                object(pairs)
            },
        )
        .boxed()
}

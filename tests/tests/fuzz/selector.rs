//! Target `selector`: Mango selectors (`mango::selector`) parsed from
//! generated and arbitrary JSON and matched against generated documents,
//! including nesting right around the parser's depth limit and hostile
//! `$regex`/`$mod`/`$size` arguments. Invariants: no panic, no hang (the
//! driver's watchdog), and the logical identities normalization must keep:
//! `$and`/`$or` of one selector, `$nor` of one as `$not`, double `$not`.

use mango::selector::Selector;
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::select;
use serde_json::Value;

use crate::driver::Violations;
use crate::hostile::{self, object};

#[derive(Clone)]
pub struct Case {
    selector: Value,
    docs: Vec<Value>,
}

/// JSON text, so a reproducer can be pasted into a request.
impl std::fmt::Debug for Case {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "selector: {}", self.selector)?;
        for doc in &self.docs {
            writeln!(f, "document: {doc}")?;
        }
        Ok(())
    }
}

const FIELDS: &[&str] = &[
    "a", "b", "c", "a.b", "a.b.c", "", "\\.", "a\\.b", "$x", "日本", "_id", "0", "1", "a..b",
];

const REGEXES: &[&str] = &[
    "^a",
    "a.*b",
    "(a*)*b",
    "[",
    "(",
    "\\",
    "(?i)A",
    "a{1000000}",
    "(?=a)",
    "\\1",
    "[\\s\\S]{0,100000}",
    ".{1000}{1000}",
    "\\p{Greek}",
    "",
    "\u{0}",
    "(?x) a # c",
    "^$",
    "(a|b|c|d|e|f|g|h){100}",
    "\\b",
    "(?u)\\w+",
];

fn field() -> BoxedStrategy<String> {
    prop_oneof![5 => select(FIELDS).prop_map(str::to_string), 1 => hostile::text()].boxed()
}

fn number() -> BoxedStrategy<Value> {
    prop_oneof![
        2 => (-3i64..4).prop_map(Value::from),
        1 => select(&[i64::MIN, i64::MAX, -1][..]).prop_map(Value::from),
        1 => hostile::edge_u64().prop_map(Value::from),
        1 => select(&[1.5, 1e300, -0.0, 0.5, -1e-300][..]).prop_map(Value::from),
        1 => hostile::json_leaf(),
    ]
    .boxed()
}

/// One operator with an argument that is not a sub-selector.
fn operator() -> BoxedStrategy<Value> {
    prop_oneof![
        4 => (select(&["$eq", "$ne", "$gt", "$gte", "$lt", "$lte"][..]), hostile::json(2))
            .prop_map(|(op, arg)| object(vec![(op.into(), arg)])),
        2 => (
            select(&["$in", "$nin", "$all"][..]),
            prop_oneof![4 => vec(hostile::json(1), 0..4).prop_map(Value::Array), 1 => hostile::json_leaf()],
        )
            .prop_map(|(op, arg)| object(vec![(op.into(), arg)])),
        1 => prop_oneof![3 => any::<bool>().prop_map(Value::Bool), 1 => hostile::json_leaf()]
            .prop_map(|arg| object(vec![("$exists".into(), arg)])),
        1 => prop_oneof![
            3 => select(&["null", "boolean", "number", "string", "array", "object", "x"][..]).prop_map(Value::from),
            1 => hostile::json_leaf(),
        ]
        .prop_map(|arg| object(vec![("$type".into(), arg)])),
        2 => prop_oneof![
            4 => vec(number(), 2).prop_map(Value::Array),
            1 => vec(number(), 0..4).prop_map(Value::Array),
            1 => hostile::json_leaf(),
        ]
        .prop_map(|arg| object(vec![("$mod".into(), arg)])),
        2 => prop_oneof![
            3 => select(REGEXES).prop_map(Value::from),
            1 => hostile::text().prop_map(Value::String),
            1 => hostile::json_leaf(),
        ]
        .prop_map(|arg| object(vec![("$regex".into(), arg)])),
        1 => number().prop_map(|arg| object(vec![("$size".into(), arg)])),
        1 => prop_oneof![hostile::text().prop_map(Value::String), hostile::json_leaf()]
            .prop_map(|arg| object(vec![("$beginsWith".into(), arg)])),
        1 => (select(&["$text", "$foo", "$elemMatch", "$and", "$not"][..]), hostile::json_leaf())
            .prop_map(|(op, arg)| object(vec![(op.into(), arg)])),
    ]
    .boxed()
}

/// A selector: field conditions combined with every combinator.
fn selector() -> BoxedStrategy<Value> {
    let leaf = prop_oneof![
        2 => (field(), hostile::json(1)).prop_map(|(f, v)| object(vec![(f, v)])),
        4 => (field(), operator()).prop_map(|(f, op)| object(vec![(f, op)])),
        1 => operator(),
        1 => Just(object(vec![])),
    ];
    leaf.prop_recursive(5, 40, 4, |inner| {
        prop_oneof![
            3 => (select(&["$and", "$or", "$nor"][..]), vec(inner.clone(), 0..4))
                .prop_map(|(op, items)| object(vec![(op.into(), Value::Array(items))])),
            2 => inner.clone().prop_map(|s| object(vec![("$not".into(), s)])),
            2 => (field(), inner.clone()).prop_map(|(f, s)| object(vec![(f, s)])),
            2 => (field(), select(&["$elemMatch", "$allMatch", "$keyMapMatch", "$not"][..]), inner.clone())
                .prop_map(|(f, op, s)| object(vec![(f, object(vec![(op.into(), s)]))])),
            1 => vec((field(), inner.clone()), 1..3).prop_map(object),
            1 => (select(&["$and", "$or", "$nor", "$not"][..]), inner)
                .prop_map(|(op, s)| object(vec![(op.into(), s)])),
        ]
    })
    .boxed()
}

/// A selector nested close to the parser's limit (200 levels of JSON).
fn deep_selector() -> BoxedStrategy<Value> {
    (vec(0u8..4, 60..210), operator())
        .prop_map(|(wrappers, core)| {
            let mut s = object(vec![("a".into(), core)]);
            for w in wrappers {
                s = match w {
                    0 => object(vec![("$not".into(), s)]),
                    1 => object(vec![("$and".into(), Value::Array(vec![s]))]),
                    2 => object(vec![("a".into(), s)]),
                    _ => object(vec![("a".into(), object(vec![("$elemMatch".into(), s)]))]),
                };
            }
            s
        })
        .boxed()
}

/// A document made of the selector's field names, so selectors do match.
fn document() -> BoxedStrategy<Value> {
    let value = hostile::json(3);
    prop_oneof![
        4 => vec((field(), value), 0..5).prop_map(object),
        1 => hostile::json(3),
        1 => (100usize..130, any::<bool>()).prop_map(|(d, o)| hostile::nest(Value::from(1), d, o)),
    ]
    .boxed()
}

pub fn strategy() -> BoxedStrategy<Case> {
    let selector = prop_oneof![
        6 => selector(),
        1 => deep_selector(),
        1 => hostile::json(4),
    ];
    (selector, vec(document(), 1..5))
        .prop_map(|(selector, docs)| Case { selector, docs })
        .boxed()
}

fn depth(value: &Value) -> usize {
    match value {
        Value::Array(items) => 1 + items.iter().map(depth).max().unwrap_or(0),
        Value::Object(map) => 1 + map.values().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

pub fn check(case: &Case, v: &mut Violations) {
    let Ok(selector) = Selector::parse(&case.selector) else {
        return;
    };
    let results: Vec<bool> = case.docs.iter().map(|d| selector.matches(d)).collect();
    let again: Vec<bool> = case.docs.iter().map(|d| selector.matches(d)).collect();
    v.check(results == again, "matching is not deterministic", || {
        format!("{results:?} then {again:?}")
    });
    // Beyond 190 levels the wrappers below could pass the depth limit; the
    // empty selector is the one selector without a field that may stand alone.
    if depth(&case.selector) > 190 || case.selector == object(vec![]) {
        return;
    }
    let wrapped = |op: &str, s: Value| object(vec![(op.into(), s)]);
    let one = |s: &Value| Value::Array(vec![s.clone()]);
    let identities = [
        (
            "$and of one selector differs from it",
            wrapped("$and", one(&case.selector)),
        ),
        (
            "$or of one selector differs from it",
            wrapped("$or", one(&case.selector)),
        ),
        (
            "double $not differs from the selector",
            wrapped("$not", wrapped("$not", case.selector.clone())),
        ),
    ];
    for (kind, same) in identities {
        equivalent(kind, &same, &results, case, v);
    }
    if let (Ok(not), Ok(nor)) = (
        Selector::parse(&wrapped("$not", case.selector.clone())),
        Selector::parse(&wrapped("$nor", one(&case.selector))),
    ) {
        for doc in &case.docs {
            v.check(
                not.matches(doc) == nor.matches(doc),
                "$nor of one selector differs from its $not",
                || format!("document {doc}"),
            );
        }
    }
}

/// `other` must parse and match exactly the documents the selector matched.
fn equivalent(kind: &str, other: &Value, expected: &[bool], case: &Case, v: &mut Violations) {
    match Selector::parse(other) {
        Ok(other) => {
            for (doc, &want) in case.docs.iter().zip(expected) {
                let got = other.matches(doc);
                v.check(got == want, kind, || {
                    format!("document {doc}: the selector says {want}, the rewritten one {got}")
                });
            }
        }
        Err(e) => v.add(kind, format!("the rewritten selector does not parse: {e}")),
    }
}

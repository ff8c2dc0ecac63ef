//! CouchDB's view collation suite (`view_collation` in CouchDB's own
//! tests), run against Recliner: its ordered keys come back in that order,
//! ascending and descending, each one alone by `key`, and the ends of
//! ranges honour `inclusive_end` and `endkey_docid`.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use recliner_tests::{Client, TempDir, TestServer, percent_encode};
use serde_json::{Value, json};

/// The suite's values, in their collation order.
fn values() -> Vec<Value> {
    vec![
        json!(null),
        json!(false),
        json!(true),
        json!(1),
        json!(2),
        json!(3.0),
        json!(4),
        json!("a"),
        json!("A"),
        json!("aa"),
        json!("b"),
        json!("B"),
        json!("ba"),
        json!("bb"),
        json!(["a"]),
        json!(["b"]),
        json!(["b", "c"]),
        json!(["b", "c", "a"]),
        json!(["b", "d"]),
        json!(["b", "d", "e"]),
        json!({"a": 1}),
        json!({"a": 2}),
        json!({"b": 1}),
        json!({"b": 2}),
        json!({"b": 2, "a": 1}),
        json!({"b": 2, "c": 2}),
    ]
}

/// The keys of an answer, numbers as doubles (JavaScript emits `3.0` as `3`,
/// which the suite counts as the same key).
fn keys(answer: &Value) -> Vec<Value> {
    answer["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| as_double(&r["key"]))
        .collect()
}

fn as_double(v: &Value) -> Value {
    match v {
        Value::Number(n) => json!(n.as_f64().unwrap()),
        other => other.clone(),
    }
}

#[tokio::test]
async fn couchdbs_view_collation_suite_passes() {
    let data = TempDir::new("view-collation");
    let server = TestServer::start(data.path(), &[]);
    let c = Client::new(&server);
    c.put("/db", json!({})).await;
    let docs: Vec<Value> = values()
        .into_iter()
        .enumerate()
        .map(|(i, v)| json!({"_id": (i + 1).to_string(), "foo": v}))
        .collect();
    assert_eq!(
        c.post("/db/_bulk_docs", json!({ "docs": docs }))
            .await
            .status,
        201
    );
    c.put(
        "/db/_design/foo",
        json!({"views": {"foo": {"map": "function(doc) { emit(doc.foo, null); }"}}}),
    )
    .await;
    let url = "/db/_design/foo/_view/foo";

    let expected: Vec<Value> = values().iter().map(as_double).collect();
    assert_eq!(keys(&c.get(url).await.json()), expected);
    let mut reversed = expected.clone();
    reversed.reverse();
    assert_eq!(
        keys(&c.get(&format!("{url}?descending=true")).await.json()),
        reversed
    );
    for value in values() {
        let one = c
            .get(&format!("{url}?key={}", percent_encode(&value.to_string())))
            .await
            .json();
        assert_eq!(keys(&one), [as_double(&value)], "key={value}");
    }
    let last = |answer: Value| keys(&answer).last().cloned().unwrap();
    assert_eq!(
        last(
            c.get(&format!("{url}?endkey=%22b%22&inclusive_end=true"))
                .await
                .json()
        ),
        json!("b")
    );
    assert_eq!(
        last(
            c.get(&format!(
                "{url}?endkey=%22b%22&inclusive_end=true&descending=true"
            ))
            .await
            .json()
        ),
        json!("b")
    );
    assert_eq!(
        last(
            c.get(&format!("{url}?endkey=%22b%22&inclusive_end=false"))
                .await
                .json()
        ),
        json!("aa")
    );
    assert_eq!(
        last(
            c.get(&format!(
                "{url}?endkey=%22b%22&inclusive_end=false&descending=true"
            ))
            .await
            .json()
        ),
        json!("B")
    );
    assert_eq!(
        last(
            c.get(&format!(
                "{url}?endkey=%22b%22&endkey_docid=11&inclusive_end=false"
            ))
            .await
            .json()
        ),
        json!("aa")
    );
    assert_eq!(
        last(
            c.get(&format!(
                "{url}?endkey=%22b%22&endkey_docid=12&inclusive_end=false"
            ))
            .await
            .json()
        ),
        json!("b")
    );
}

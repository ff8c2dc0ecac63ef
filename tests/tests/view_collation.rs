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

/// A query of the raw view of `raw_collation_is_erlang_term_order`.
async fn view(c: &Client, query: &str) -> Value {
    let reply = c.get(&format!("/db/_design/r/_view/raw?{query}")).await;
    assert_eq!(reply.status, 200, "{query}: {}", reply.text);
    reply.json()
}

/// A view with `options.collation: "raw"` orders its keys as CouchDB 3.5
/// does: Erlang's term order (numbers, `false < null < true`, objects,
/// arrays, then strings byte by byte), in ranges and groups too.
#[tokio::test]
async fn raw_collation_is_erlang_term_order() {
    let data = TempDir::new("view-collation-raw");
    let server = TestServer::start(data.path(), &[]);
    let c = Client::new(&server);
    assert_eq!(c.put("/db", json!({})).await.status, 201);
    // The order CouchDB 3.5 answered for these keys.
    let ordered = vec![
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
    // Written in reverse, so neither ids nor writes give the order away.
    let docs: Vec<Value> = ordered
        .iter()
        .rev()
        .enumerate()
        .map(|(i, k)| json!({"_id": format!("k{i:02}"), "k": k}))
        .collect();
    assert_eq!(
        c.post("/db/_bulk_docs", json!({"docs": docs})).await.status,
        201
    );
    let map = "function (doc) { if ('k' in doc) { emit(doc.k, null); } }";
    let ddoc = json!({"views": {
        "raw": {"map": map, "reduce": "_count", "options": {"collation": "raw"}},
        "icu": {"map": map}
    }});
    assert_eq!(c.put("/db/_design/r", ddoc).await.status, 201);

    let doubles: Vec<Value> = ordered.iter().map(as_double).collect();
    assert_eq!(keys(&view(&c, "reduce=false").await), doubles);
    let icu = c.get("/db/_design/r/_view/icu").await.json();
    assert_eq!(
        keys(&icu)[0],
        json!(null),
        "the default collation stays ICU's"
    );

    let range = view(&c, "reduce=false&startkey=false&endkey=%7B%7D").await;
    assert_eq!(range["offset"], 5);
    assert_eq!(
        keys(&range),
        [json!(false), json!(null), json!(true), json!({})]
    );
    let down = view(
        &c,
        "reduce=false&descending=true&startkey=%22~%22&endkey=%22a%22",
    )
    .await;
    assert_eq!(down["offset"], 2);
    assert_eq!(keys(&down), ["~", "z", "b", "aa", "a"].map(|s| json!(s)));
    let one = view(&c, "reduce=false&key=%22%C3%A9%22").await;
    assert_eq!(
        (one["offset"].clone(), keys(&one)),
        (json!(31), vec![json!("é")])
    );

    let grouped = view(&c, "group=true&startkey=%22a%22&endkey=%22~%22").await;
    assert_eq!(
        grouped["rows"],
        json!([{"key": "a", "value": 1}, {"key": "aa", "value": 1}, {"key": "b", "value": 1},
               {"key": "z", "value": 1}, {"key": "~", "value": 1}])
    );
    let levels = view(&c, "group_level=1&startkey=%5B%5D&endkey=%22%22").await;
    assert_eq!(
        levels["rows"],
        json!([{"key": [], "value": 1}, {"key": [1], "value": 2}, {"key": [null], "value": 1},
               {"key": [{}], "value": 1}, {"key": [[]], "value": 1}, {"key": ["a"], "value": 1},
               {"key": "", "value": 1}])
    );
}

//! Design function sources as CouchDB 3.5 reads them: a script whose value
//! is the function, so a trailing `;`, comments and statements before the
//! function are accepted by every kind of design function, while a named
//! function declaration (no value) is refused.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use recliner_tests::{Client, TempDir, TestServer};
use serde_json::json;

#[tokio::test]
async fn functions_ending_in_a_semicolon_compile_and_run() {
    let data = TempDir::new("design-sources");
    let server = TestServer::start(data.path(), &[]);
    let c = Client::new(&server);
    assert_eq!(c.put("/db", json!({})).await.status, 201);
    assert_eq!(
        c.put("/db/a", json!({"type": "t", "n": 1})).await.status,
        201
    );
    let ddoc = c
        .put(
            "/db/_design/d",
            json!({
                "views": {"v": {
                    "map": "function(doc) { if (doc.n) emit(doc._id, doc.n); };",
                    "reduce": "function(keys, values, rereduce) { return sum(values); };"
                }},
                "filters": {"f": "function(doc, req) { return doc.type === 't'; };\n// trailing comment"},
                "validate_doc_update": "function(newDoc, oldDoc, userCtx) { if (newDoc.bad) throw({forbidden: 'no'}); };",
                "shows": {"s": "function(doc, req) { return 'show ' + doc._id; };"},
                "lists": {"l": "function(head, req) { var row; while ((row = getRow())) { send(row.key + ' '); } return 'end'; };"},
                "updates": {"u": "function(doc, req) { return [null, 'updated']; };"}
            }),
        )
        .await;
    assert_eq!(ddoc.status, 201, "{}", ddoc.text);

    let map = c.get("/db/_design/d/_view/v?reduce=false").await;
    assert_eq!(map.status, 200, "{}", map.text);
    assert_eq!(
        map.json()["rows"],
        json!([{"id": "a", "key": "a", "value": 1}])
    );
    let reduced = c.get("/db/_design/d/_view/v").await;
    assert_eq!(reduced.status, 200, "{}", reduced.text);
    assert_eq!(reduced.json()["rows"], json!([{"key": null, "value": 1}]));

    let changes = c.get("/db/_changes?filter=d/f").await;
    assert_eq!(changes.status, 200, "{}", changes.text);
    assert_eq!(changes.json()["results"][0]["id"], "a");

    let refused = c.put("/db/b", json!({"bad": true})).await;
    assert_eq!(refused.status, 403, "{}", refused.text);
    assert_eq!(
        refused.json(),
        json!({"error": "forbidden", "reason": "no"})
    );

    let shown = c.get("/db/_design/d/_show/s/a").await;
    assert_eq!((shown.status, shown.text.as_str()), (200, "show a"));
    let listed = c.get("/db/_design/d/_list/l/v?reduce=false").await;
    assert_eq!((listed.status, listed.text.as_str()), (200, "a end"));
    let updated = c.post("/db/_design/d/_update/u", json!({})).await;
    assert_eq!((updated.status, updated.text.as_str()), (200, "updated"));
}

#[tokio::test]
async fn a_source_is_a_script_whose_value_is_the_function() {
    let data = TempDir::new("design-scripts");
    let server = TestServer::start(data.path(), &[]);
    let c = Client::new(&server);
    assert_eq!(c.put("/db", json!({})).await.status, 201);
    assert_eq!(c.put("/db/a", json!({})).await.status, 201);
    let ddoc = c
        .put(
            "/db/_design/d",
            json!({"views": {
                "before": {"map": "/* lead */ var x = 2; function(doc) { emit(doc._id, x); }"},
                "last": {"map": "function(doc) { emit(doc._id, 1); }\nfunction(doc) { emit(doc._id, 3); }\n;\n"}
            }}),
        )
        .await;
    assert_eq!(ddoc.status, 201, "{}", ddoc.text);
    let before = c.get("/db/_design/d/_view/before").await.json();
    assert_eq!(before["rows"], json!([{"id": "a", "key": "a", "value": 2}]));
    let last = c.get("/db/_design/d/_view/last").await.json();
    assert_eq!(last["rows"], json!([{"id": "a", "key": "a", "value": 3}]));

    let named = c
        .put(
            "/db/_design/n",
            json!({"views": {"v": {"map": "function foo(doc) { emit(doc._id, 1); }"}}}),
        )
        .await;
    assert_eq!(named.status, 400, "{}", named.text);
    assert_eq!(
        named.json(),
        json!({"error": "compilation_error",
               "reason": "Compilation of the map function in the 'v' view failed: Expression does not eval to a function. (function foo(doc) { emit(doc._id, 1); })"})
    );
}

//! Mango end to end: JSON indexes created, listed and deleted; `_find`
//! answering through an index (reading only its range, as
//! `execution_stats` shows) or by a full scan (with CouchDB's warning);
//! sort, fields, skip, limit, bookmarks across pages, partial indexes,
//! `use_index`, and `_explain`.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use recliner_tests::{Client, TempDir, TestServer};
use serde_json::{Value, json};

async fn seed(c: &Client) {
    assert_eq!(c.put("/db", json!({})).await.status, 201);
    let cities = ["Paris", "Lyon", "Nice", "Lille"];
    let docs: Vec<Value> = (0..200)
        .map(|i| {
            json!({"_id": format!("p{i:03}"), "age": i % 50, "city": cities[i % 4],
                   "name": format!("n{i:03}"), "address": {"zip": format!("{:05}", 75000 + i)}})
        })
        .collect();
    let written = c.post("/db/_bulk_docs", json!({ "docs": docs })).await;
    assert_eq!(written.status, 201);
}

fn ids(answer: &Value) -> Vec<String> {
    answer["docs"]
        .as_array()
        .unwrap_or_else(|| panic!("no docs: {answer}"))
        .iter()
        .map(|d| d["_id"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn indexes_are_created_listed_and_deleted() {
    let data = TempDir::new("mango-indexes");
    let server = TestServer::start(data.path(), &[]);
    let c = Client::new(&server);
    seed(&c).await;
    let listed = c.get("/db/_index").await.json();
    assert_eq!(listed["total_rows"], 1);
    assert_eq!(listed["indexes"][0]["name"], "_all_docs");

    let made = c
        .post("/db/_index", json!({"index": {"fields": ["age"]}}))
        .await;
    assert_eq!(made.status, 200, "{}", made.text);
    // CouchDB's generated name for this very request.
    assert_eq!(
        made.json(),
        json!({"result": "created", "id": "_design/ae8325de4e40689e6a6f4843a539d4b91f68c4f1", "name": "ae8325de4e40689e6a6f4843a539d4b91f68c4f1"})
    );
    let again = c
        .post("/db/_index", json!({"index": {"fields": ["age"]}}))
        .await;
    assert_eq!(again.json()["result"], "exists");
    let named = c
        .post(
            "/db/_index",
            json!({"index": {"fields": ["city", "age"]}, "ddoc": "byCity", "name": "city-age"}),
        )
        .await;
    assert_eq!(named.json()["id"], "_design/byCity");
    c.post(
        "/db/_index",
        json!({"index": {"fields": ["age"], "partial_filter_selector": {"city": "Paris"}}, "ddoc": "partial", "name": "paris-age"}),
    )
    .await;
    let ddoc = c.get("/db/_design/partial").await.json();
    assert_eq!(ddoc["language"], "query");
    assert_eq!(
        ddoc["views"]["paris-age"]["map"],
        json!({"fields": {"age": "asc"}, "partial_filter_selector": {"city": {"$eq": "Paris"}}})
    );
    let listed = c.get("/db/_index").await.json();
    assert_eq!(listed["total_rows"], 4);
    let names: Vec<&str> = listed["indexes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "_all_docs",
            "ae8325de4e40689e6a6f4843a539d4b91f68c4f1",
            "city-age",
            "paris-age"
        ]
    );
    assert_eq!(
        listed["indexes"][2]["def"],
        json!({"fields": [{"city": "asc"}, {"age": "asc"}]})
    );
    let page = c.get("/db/_index?skip=1&limit=2").await.json();
    assert_eq!(
        (
            page["total_rows"].as_u64(),
            page["indexes"].as_array().unwrap().len()
        ),
        (Some(4), 2)
    );

    let bad = c
        .post(
            "/db/_index",
            json!({"index": {"fields": [{"a": "asc"}, {"b": "desc"}]}}),
        )
        .await;
    assert_eq!(bad.status, 400);
    assert_eq!(bad.json()["error"], "unsupported_mixed_sort");
    let text = c
        .post(
            "/db/_index",
            json!({"index": {"fields": ["a"]}, "type": "text"}),
        )
        .await;
    assert_eq!(text.status, 503);
    let plain = c
        .send_bytes("POST", "/db/_index", b"{}".to_vec(), "text/plain")
        .await;
    assert_eq!(plain.status, 415);

    assert_eq!(
        c.delete("/db/_index/byCity/json/city-age").await.json(),
        json!({"ok": true})
    );
    assert_eq!(
        c.get("/db/_design/byCity").await.status,
        404,
        "nothing left in it"
    );
    assert_eq!(
        c.delete("/db/_index/byCity/json/city-age").await.status,
        404
    );
    let bulk = c
        .post(
            "/db/_index/_bulk_delete",
            json!({"docids": ["ae8325de4e40689e6a6f4843a539d4b91f68c4f1", "_design/nope"]}),
        )
        .await
        .json();
    assert_eq!(
        bulk,
        json!({"success": [{"id": "_design/ae8325de4e40689e6a6f4843a539d4b91f68c4f1", "ok": true}],
               "fail": [{"id": "_design/nope", "error": "not_found"}]})
    );
    assert_eq!(c.get("/db/_index").await.json()["total_rows"], 2);
}

#[tokio::test]
async fn find_reads_only_the_index_range_and_pages_with_bookmarks() {
    let data = TempDir::new("mango-find");
    let server = TestServer::start(data.path(), &[]);
    let c = Client::new(&server);
    seed(&c).await;

    // Without an index: a full scan, with CouchDB's warning.
    let scan = c
        .post("/db/_find", json!({"selector": {"age": {"$gte": 10, "$lt": 12}}, "limit": 100, "execution_stats": true}))
        .await
        .json();
    assert_eq!(ids(&scan).len(), 8);
    assert_eq!(scan["execution_stats"]["total_docs_examined"], 200);
    assert!(
        scan["warning"]
            .as_str()
            .unwrap()
            .starts_with("No matching index found")
    );

    c.post(
        "/db/_index",
        json!({"index": {"fields": ["age"]}, "ddoc": "age", "name": "age"}),
    )
    .await;
    let indexed = c
        .post("/db/_find", json!({"selector": {"age": {"$gte": 10, "$lt": 12}}, "limit": 100, "execution_stats": true}))
        .await
        .json();
    // The same documents, in the index's order (by age, then id).
    assert_eq!(
        ids(&indexed),
        [
            "p010", "p060", "p110", "p160", "p011", "p061", "p111", "p161"
        ]
    );
    let mut by_id = ids(&indexed);
    by_id.sort();
    assert_eq!(by_id, ids(&scan));
    // The range's end includes `$lt`'s own key, as CouchDB's does (the
    // selector then drops those rows): 8 matches and the 4 rows at 12.
    assert_eq!(indexed["execution_stats"]["total_keys_examined"], 12);
    assert_eq!(indexed["execution_stats"]["total_docs_examined"], 12);
    assert!(indexed.get("warning").is_none(), "{indexed}");

    // Sort, fields, limit, skip.
    let sorted = c
        .post(
            "/db/_find",
            json!({"selector": {"age": {"$gt": 45}}, "sort": [{"age": "desc"}], "fields": ["_id", "age", "address.zip"], "limit": 3, "skip": 1}),
        )
        .await
        .json();
    assert_eq!(
        sorted["docs"],
        json!([
            {"_id": "p149", "age": 49, "address": {"zip": "75149"}},
            {"_id": "p099", "age": 49, "address": {"zip": "75099"}},
            {"_id": "p049", "age": 49, "address": {"zip": "75049"}}
        ])
    );
    let unsortable = c
        .post(
            "/db/_find",
            json!({"selector": {"name": {"$gt": null}}, "sort": ["name"]}),
        )
        .await;
    assert_eq!(unsortable.status, 400);
    assert_eq!(unsortable.json()["error"], "no_usable_index");

    // Bookmarks page through every match once, through the index and
    // through a full scan alike.
    for selector in [json!({"age": {"$lt": 20}}), json!({"city": "Nice"})] {
        let mut seen = Vec::new();
        let mut bookmark = Value::Null;
        loop {
            let page = c
                .post(
                    "/db/_find",
                    json!({"selector": selector, "limit": 7, "bookmark": bookmark}),
                )
                .await
                .json();
            let got = ids(&page);
            if got.is_empty() {
                break;
            }
            seen.extend(got);
            bookmark = page["bookmark"].clone();
        }
        let want = if selector.get("age").is_some() {
            80
        } else {
            50
        };
        assert_eq!(seen.len(), want, "{selector}");
        let mut unique = seen.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), want, "no document twice: {selector}");
    }
    let bad = c
        .post("/db/_find", json!({"selector": {}, "bookmark": "garbage"}))
        .await;
    assert_eq!(bad.json()["error"], "invalid_bookmark");

    // A partial index serves only when named, and only its documents.
    c.post(
        "/db/_index",
        json!({"index": {"fields": ["age"], "partial_filter_selector": {"city": "Paris"}}, "ddoc": "partial", "name": "paris-age"}),
    )
    .await;
    let partial = c
        .post(
            "/db/_find",
            json!({"selector": {"age": {"$gt": 40}}, "use_index": "partial", "limit": 100}),
        )
        .await
        .json();
    let docs = partial["docs"].as_array().unwrap();
    assert!(!docs.is_empty() && docs.iter().all(|d| d["city"] == "Paris"));
    let fallback = c
        .post(
            "/db/_find",
            json!({"selector": {"age": 3}, "use_index": "nope", "limit": 100}),
        )
        .await
        .json();
    assert_eq!(ids(&fallback).len(), 4);
    assert!(
        fallback["warning"]
            .as_str()
            .unwrap()
            .contains("_design/nope was not used")
    );

    // Explain names the index and the range it reads.
    let explained = c
        .post("/db/_explain", json!({"selector": {"age": {"$gt": 26}}}))
        .await
        .json();
    assert_eq!(explained["index"]["name"], "age");
    assert_eq!(explained["mrargs"]["start_key"], json!([26]));
    assert_eq!(explained["mrargs"]["end_key"], json!(["<MAX>"]));
    assert_eq!(explained["selector"], json!({"age": {"$gt": 26}}));

    // A covering query reads no document.
    let covered = c
        .post(
            "/db/_find",
            json!({"selector": {"age": 7}, "fields": ["_id", "age"], "execution_stats": true}),
        )
        .await
        .json();
    assert_eq!(ids(&covered).len(), 4);
    assert_eq!(covered["execution_stats"]["total_docs_examined"], 0);
    assert_eq!(covered["docs"][0], json!({"_id": "p007", "age": 7}));

    // The index follows writes.
    let doc = c.get("/db/p007").await.json();
    c.put("/db/p007", json!({"_rev": doc["_rev"], "age": 99}))
        .await;
    let moved = c
        .post("/db/_find", json!({"selector": {"age": 99}}))
        .await
        .json();
    assert_eq!(ids(&moved), ["p007"]);
}

/// `conflicts` adds each document's conflicts; `update: false` answers from
/// the index as it is; `r` and `stable` are accepted as CouchDB accepts them.
#[tokio::test]
async fn find_options_conflicts_update_r_and_stable() {
    let data = TempDir::new("mango-options");
    let server = TestServer::start(data.path(), &[]);
    let c = Client::new(&server);
    seed(&c).await;
    c.post(
        "/db/_bulk_docs",
        json!({"new_edits": false, "docs": [{"_id": "p001", "_rev": "1-aaaa", "age": 1, "city": "Lyon"}]}),
    )
    .await;
    let found = c
        .post(
            "/db/_find",
            json!({"selector": {"_id": "p001"}, "conflicts": true, "fields": ["_id", "_conflicts"], "r": 2, "stable": true}),
        )
        .await;
    assert_eq!(found.status, 200, "{}", found.text);
    let doc = &found.json()["docs"][0];
    assert_eq!(doc["_id"], "p001");
    assert_eq!(doc["_conflicts"].as_array().map(Vec::len), Some(1), "{doc}");

    c.post(
        "/db/_index",
        json!({"index": {"fields": ["age"]}, "ddoc": "age", "name": "age"}),
    )
    .await;
    let built = c
        .post("/db/_find", json!({"selector": {"age": 77}}))
        .await
        .json();
    assert_eq!(built["docs"], json!([]));
    c.put("/db/newcomer", json!({"age": 77})).await;
    let stale = c
        .post(
            "/db/_find",
            json!({"selector": {"age": 77}, "update": false}),
        )
        .await
        .json();
    assert_eq!(stale["docs"], json!([]), "the index as it was");
    let fresh = c
        .post("/db/_find", json!({"selector": {"age": 77}}))
        .await
        .json();
    assert_eq!(fresh["docs"][0]["_id"], "newcomer");
}

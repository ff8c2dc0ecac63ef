//! A view's `_info` sizes: what its index holds, and what compaction gives
//! back to the disk.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use recliner_tests::{Client, TempDir, TestServer};
use serde_json::{Value, json};

/// A view's `_info` reports its sizes as CouchDB's view compaction test
/// reads them: live data smaller than the file, and a compaction that
/// makes the file smaller while the live data stays.
#[tokio::test]
async fn view_sizes_follow_the_rows_and_compaction_shrinks_the_file() {
    let data = TempDir::new("views-sizes");
    let server = TestServer::start(data.path(), &[]);
    let c = Client::new(&server);
    assert_eq!(c.put("/db", json!({})).await.status, 201);
    let ddoc = json!({"views": {"bar": {"map": "function (doc) { emit(doc.owner, doc.text); }"}}});
    assert_eq!(c.put("/db/_design/foo", ddoc).await.status, 201);
    let text = "x".repeat(300);
    let mut docs: Vec<Value> = (0..1000)
        .map(|i| json!({"_id": format!("d{i:04}"), "owner": i % 7, "text": text}))
        .collect();
    for round in 0..3 {
        let written = c.post("/db/_bulk_docs", json!({ "docs": docs })).await;
        assert_eq!(written.status, 201, "{}", written.text);
        for (doc, result) in docs.iter_mut().zip(written.json().as_array().unwrap()) {
            doc["_rev"] = result["rev"].clone();
            doc["owner"] = json!(round * 10);
        }
        // Each round is indexed, so the index rewrites every row.
        let view = c.get("/db/_design/foo/_view/bar?limit=1").await;
        assert_eq!(view.status, 200, "{}", view.text);
    }
    let sizes = |info: &Value| {
        let s = &info["view_index"]["sizes"];
        (
            s["file"].as_u64().unwrap(),
            s["active"].as_u64().unwrap(),
            s["external"].as_u64().unwrap(),
        )
    };
    let before = c.get("/db/_design/foo/_info").await.json();
    let (file, active, external) = sizes(&before);
    // 1000 rows whose key is a number and value a 302-byte string.
    assert!((303_000..=305_000).contains(&external), "{before}");
    assert!(external < active && active < file, "{before}");

    let compacted = c
        .send_bytes(
            "POST",
            "/db/_compact/foo",
            b"{}".to_vec(),
            "application/json",
        )
        .await;
    assert_eq!(compacted.status, 202, "{}", compacted.text);
    let mut after = c.get("/db/_design/foo/_info").await.json();
    for _ in 0..100 {
        if after["view_index"]["compact_running"] == false && sizes(&after).0 < file {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        after = c.get("/db/_design/foo/_info").await.json();
    }
    let (file_after, active_after, external_after) = sizes(&after);
    assert!(file_after < file, "{before} -> {after}");
    assert!(active_after < file_after, "{after}");
    assert_eq!((active_after, external_after), (active, external));

    // Deleting every document empties the index's live data.
    let deleted: Vec<Value> = docs
        .iter()
        .map(|d| json!({"_id": d["_id"], "_rev": d["_rev"], "_deleted": true}))
        .collect();
    assert_eq!(
        c.post("/db/_bulk_docs", json!({ "docs": deleted }))
            .await
            .status,
        201
    );
    let view = c.get("/db/_design/foo/_view/bar").await.json();
    assert_eq!(view["total_rows"], 0);
    let emptied = c.get("/db/_design/foo/_info").await.json();
    assert_eq!(sizes(&emptied).1, 0, "{emptied}");
    assert_eq!(sizes(&emptied).2, 0, "{emptied}");
}

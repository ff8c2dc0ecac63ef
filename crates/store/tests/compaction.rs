//! Compaction drops old bodies and unreferenced attachment bytes, and keeps
//! every leaf readable.

#![allow(clippy::unwrap_used)]

mod common;

use common::{TempStore, get, get_with, put, rev};
use serde_json::json;
use store::{GetOptions, StoreError};

#[tokio::test]
async fn compaction_keeps_leaves_and_drops_everything_else() {
    let t = TempStore::new();
    let db = t.db("compact").await;
    let big = "QUFB".repeat(50_000); // 150 KB of "AAA..."
    let r1 = put(
        &db,
        json!({"_id": "a", "v": 1, "pad": "y".repeat(50_000),
        "_attachments": {"keep": {"content_type": "text/plain", "data": "aGVsbG8="},
                         "drop": {"content_type": "application/octet-stream", "data": big}}}),
    )
    .await;
    let r2 = put(
        &db,
        json!({"_id": "a", "_rev": r1, "v": 2, "_attachments": {"keep": {"stub": true}}}),
    )
    .await;
    let before = db.info().await.unwrap();

    db.compact().await.unwrap();
    assert!(!db.compact_running());

    let doc = get_with(
        &db,
        "a",
        GetOptions {
            attachments: true,
            ..Default::default()
        },
    )
    .await;
    assert_eq!(
        (doc["_rev"].as_str(), doc["v"].as_i64()),
        (Some(r2.as_str()), Some(2))
    );
    assert_eq!(doc["_attachments"]["keep"]["data"], "aGVsbG8=");
    let old = db
        .get(
            "a",
            GetOptions {
                rev: Some(rev(&r1)),
                ..Default::default()
            },
        )
        .await;
    assert!(matches!(old, Err(StoreError::DocNotFound("missing"))));
    let info = get_with(
        &db,
        "a",
        GetOptions {
            revs_info: true,
            ..Default::default()
        },
    )
    .await;
    assert_eq!(info["_revs_info"][1]["status"], "missing");
    let after = db.info().await.unwrap();
    assert!(
        after.active_size < before.active_size,
        "{} !< {}",
        after.active_size,
        before.active_size
    );
    assert_eq!(
        after.update_seq, before.update_seq,
        "compaction is not an update"
    );
    // Writes still work afterwards, and the kept attachment still resolves as a stub.
    put(
        &db,
        json!({"_id": "a", "_rev": r2, "v": 3, "_attachments": {"keep": {"stub": true}}}),
    )
    .await;
    assert_eq!(get(&db, "a").await["v"], 3);
}

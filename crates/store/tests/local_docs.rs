//! Local documents: `0-N` revisions, last writer wins, invisible to feeds.

#![allow(clippy::unwrap_used)]

mod common;

use common::{TempStore, doc};
use serde_json::json;
use store::{AllDocsQuery, ChangesQuery, StoreError};

#[tokio::test]
async fn local_documents_count_their_own_revisions() {
    let t = TempStore::new();
    let db = t.db("local").await;
    assert_eq!(
        db.put_local("_local/cp", json!({"seq": 1})).await.unwrap(),
        "0-1"
    );
    assert_eq!(
        db.put_local("_local/cp", json!({"_rev": "0-1", "seq": 2}))
            .await
            .unwrap(),
        "0-2"
    );
    // No conflict check, as in CouchDB: a stale revision still writes.
    assert_eq!(
        db.put_local("_local/cp", json!({"_rev": "0-1", "seq": 3}))
            .await
            .unwrap(),
        "0-2"
    );
    let got = db.get_local("_local/cp").await.unwrap();
    assert_eq!(got, json!({"_id": "_local/cp", "_rev": "0-2", "seq": 3}));
    assert!(
        db.put_local("_local/cp", json!({"_rev": "1-abc"}))
            .await
            .is_err()
    );
    db.delete_local("_local/cp").await.unwrap();
    assert!(matches!(
        db.get_local("_local/cp").await,
        Err(StoreError::DocNotFound("missing"))
    ));
    assert!(matches!(
        db.delete_local("_local/cp").await,
        Err(StoreError::DocNotFound(_))
    ));
}

#[tokio::test]
async fn local_documents_never_show_in_changes_or_all_docs() {
    let t = TempStore::new();
    let db = t.db("hidden").await;
    let results = db
        .bulk_docs(
            vec![
                doc(json!({"_id": "_local/x", "a": 1})),
                doc(json!({"_id": "real"})),
            ],
            true,
        )
        .await
        .unwrap();
    assert_eq!(results[0].result.as_deref(), Ok("0-1"));
    let changes = db.changes(ChangesQuery::default()).await.unwrap();
    assert_eq!(changes.rows.len(), 1);
    assert_eq!(changes.rows[0].id, "real");
    let all = db.all_docs(AllDocsQuery::default()).await.unwrap();
    assert_eq!(all.rows.len(), 1);
    assert_eq!(db.info().await.unwrap().doc_count, 1);
    let via_get = db.get("_local/x", Default::default()).await.unwrap();
    assert!(via_get.as_str().contains("\"_rev\":\"0-1\""));
}

//! Local documents: `0-N` revisions, last writer wins, invisible to feeds.

use crate::Backend;

use crate::common::{TempStore, doc};
use serde_json::json;
use store::{AllDocsQuery, ChangesQuery, StoreError};

pub async fn local_documents_count_their_own_revisions(backend: &dyn Backend) {
    let t = TempStore::new(backend);
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

pub async fn local_documents_never_show_in_changes_or_all_docs(backend: &dyn Backend) {
    let t = TempStore::new(backend);
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

pub async fn local_docs_lists_them_in_id_order_within_a_range(backend: &dyn Backend) {
    use std::ops::Bound;
    let t = TempStore::new(backend);
    let db = t.db("listing").await;
    for (id, n) in [("_local/b", 2), ("_local/a", 1), ("_local/c", 3)] {
        db.put_local(id, json!({"n": n})).await.unwrap();
    }
    db.put_local("_local/b", json!({"_rev": "0-1", "n": 22}))
        .await
        .unwrap();
    db.bulk_docs(vec![doc(json!({"_id": "plain", "x": 1}))], true)
        .await
        .unwrap();
    let ids = |rows: Vec<store::LocalRow>| -> Vec<(String, String)> {
        rows.into_iter().map(|r| (r.id, r.rev)).collect()
    };
    let all = db.local_docs(AllDocsQuery::default()).await.unwrap();
    assert_eq!(
        ids(all),
        [
            ("_local/a", "0-1"),
            ("_local/b", "0-2"),
            ("_local/c", "0-1")
        ]
        .map(|(i, r)| (i.to_string(), r.to_string()))
    );
    let down = db
        .local_docs(AllDocsQuery {
            start: Bound::Included("_local/b".into()),
            descending: true,
            include_docs: true,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(down.len(), 2);
    assert_eq!(
        down[0].doc,
        Some(json!({"_id": "_local/b", "_rev": "0-2", "n": 22}))
    );
    assert_eq!(down[1].id, "_local/a");
    let page = db
        .local_docs(AllDocsQuery {
            end: Bound::Excluded("_local/c".into()),
            skip: 1,
            limit: 5,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(page.len(), 1);
    assert_eq!(
        (page[0].id.as_str(), page[0].doc.is_none()),
        ("_local/b", true)
    );
    let keyed = db
        .local_docs_keys(vec!["_local/c".into(), "_local/zz".into()], false)
        .await
        .unwrap();
    assert_eq!(keyed[0].1.as_ref().map(|r| r.rev.as_str()), Some("0-1"));
    assert_eq!(keyed[1], ("_local/zz".to_string(), None));
}

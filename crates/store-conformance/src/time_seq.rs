//! Time to sequence: commits are dated in the database's bins, in the same
//! transaction, so `_changes?since=<time>` finds where to start after a
//! restart too; a reset forgets them.

use std::time::Duration;

use serde_json::json;
use store::StoreOptions;
use store::time_seq::TimeSeq;

use crate::Backend;
use crate::common::{TempStore, put};

/// One-second bins, so a test sees several.
fn options() -> StoreOptions {
    StoreOptions {
        time_seq_resolution: 1,
        ..StoreOptions::default()
    }
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

pub async fn commits_are_dated_in_bins_that_survive_a_reopen(backend: &dyn Backend) {
    let t = TempStore::with_options(backend, options());
    let db = t.db("t").await;
    assert_eq!(db.time_seq().await.unwrap(), TimeSeq::default());
    let before = now();
    put(&db, json!({"_id": "a"})).await;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    put(&db, json!({"_id": "b"})).await;
    let bins = db.time_seq().await.unwrap();
    // Newest first: the second bin starts after `a`, the first before it.
    assert_eq!(bins.bins().len(), 2, "{bins:?}");
    let (newest, oldest) = (bins.bins()[0], bins.bins()[1]);
    assert_eq!((newest.1, oldest.1), (1, 0));
    assert!(oldest.0 as i64 >= before && newest.0 > oldest.0);
    assert_eq!(
        bins.histogram(2),
        vec![(oldest.0, 1), (newest.0, 1)],
        "changes per bin, oldest first"
    );
    // From a time: the sequence before the bin holding it.
    assert_eq!(db.seq_since_time(newest.0 as i64).await.unwrap(), 1);
    assert_eq!(db.seq_since_time(oldest.0 as i64).await.unwrap(), 0);
    assert_eq!(db.seq_since_time(before - 3600).await.unwrap(), 0);
    assert_eq!(db.seq_since_time(now() + 3600).await.unwrap(), 2);
    t.store.close_all().await;

    let db = t.reopen(options()).db("t").await.unwrap();
    assert_eq!(db.time_seq().await.unwrap(), bins, "kept across a restart");
    assert_eq!(db.seq_since_time(newest.0 as i64).await.unwrap(), 1);
    db.reset_time_seq().await.unwrap();
    assert_eq!(db.time_seq().await.unwrap(), TimeSeq::default());
    assert_eq!(db.seq_since_time(newest.0 as i64).await.unwrap(), 0);
    t.store.close_all().await;

    let db = t.reopen(options()).db("t").await.unwrap();
    assert_eq!(
        db.time_seq().await.unwrap(),
        TimeSeq::default(),
        "reset is kept"
    );
}

/// Automatic purging goes through the one purge path: the purge infos and
/// the purge sequence move, and a deletion newer than the TTL stays.
pub async fn deleted_documents_past_a_ttl_are_purged(backend: &dyn Backend) {
    let t = TempStore::with_options(backend, options());
    let db = t.db("t").await;
    let rev = put(&db, json!({"_id": "gone"})).await;
    put(&db, json!({"_id": "gone", "_rev": rev, "_deleted": true})).await;
    put(&db, json!({"_id": "live"})).await;
    // Younger than an hour: kept.
    assert_eq!(db.purge_deleted_older_than(3600).await.unwrap(), 0);
    assert!(
        db.set_auto_purge_props(serde_json::from_value(json!({"x": 1})).unwrap())
            .await
            .is_err()
    );
    let props = serde_json::from_value(json!({"deleted_document_ttl": "1_sec"})).unwrap();
    db.set_auto_purge_props(props).await.unwrap();
    assert_eq!(
        db.auto_purge_props().await.unwrap()["deleted_document_ttl"],
        "1_sec"
    );
    // Past the newest one-second bin and the TTL after it.
    tokio::time::sleep(Duration::from_millis(3100)).await;
    assert_eq!(db.purge_deleted_older_than(1).await.unwrap(), 1);
    let infos = db.purge_infos().await.unwrap();
    assert_eq!(infos.len(), 1);
    assert_eq!(infos[0].id, "gone");
    let info = db.info().await.unwrap();
    assert_eq!(
        (info.purge_seq, info.doc_count, info.doc_del_count),
        (1, 1, 0)
    );
    assert_eq!(
        db.purge_deleted_older_than(1).await.unwrap(),
        0,
        "nothing left"
    );
}

//! Compaction drops old bodies and unreferenced attachment bytes, and keeps
//! every leaf readable.

use crate::Backend;

use crate::common::{TempStore, get, get_with, put, rev};
use serde_json::json;
use store::{GetOptions, StoreError};

pub async fn compaction_keeps_leaves_and_drops_everything_else(backend: &dyn Backend) {
    let t = TempStore::new(backend);
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

/// `len` digits that do not compress (bodies are stored compressed, and
/// the sizes here are of what is stored).
fn incompressible(seed: usize, len: usize) -> String {
    let mut x = seed as u64 ^ 0x9E37_79B9_7F4A_7C15;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            char::from(b'0' + (x % 10) as u8)
        })
        .collect()
}

/// The garbage estimate follows edits and compaction: what automatic
/// compaction decides on.
pub async fn garbage_grows_with_edits_and_goes_with_compaction(backend: &dyn Backend) {
    let t = TempStore::new(backend);
    let db = t.db("garbage").await;
    let mut revs = Vec::new();
    for i in 0..200 {
        revs.push(
            put(
                &db,
                json!({"_id": format!("d{i}"), "pad": incompressible(i, 2_000)}),
            )
            .await,
        );
    }
    let fresh = db.garbage().await.unwrap();
    assert!(fresh.fraction() < 0.2, "{fresh:?}");

    // Four edits of every document: four of five bodies are old.
    for _ in 0..4 {
        for (i, rev) in revs.iter_mut().enumerate() {
            *rev = put(
                &db,
                json!({"_id": format!("d{i}"), "_rev": rev, "pad": incompressible(i + 1000, 2_000)}),
            )
            .await;
        }
    }
    let edited = db.garbage().await.unwrap();
    assert!(edited.fraction() > 0.6, "{edited:?}");
    assert!(edited.file_size > fresh.file_size);

    db.compact().await.unwrap();
    let compacted = db.garbage().await.unwrap();
    assert!(compacted.fraction() < 0.2, "{compacted:?}");
    assert!(
        compacted.file_size < edited.file_size / 2,
        "{compacted:?} {edited:?}"
    );

    // A conflict's leaf is not garbage: after compaction it stays out of
    // the estimate.
    crate::common::replicate(
        &db,
        vec![json!({"_id": "d0", "_rev": "9-aaaa", "_revisions": {"start": 9, "ids": ["aaaa"]}})],
    )
    .await;
    db.compact().await.unwrap();
    assert!(db.garbage().await.unwrap().fraction() < 0.2);
}

/// Automatic compaction compacts a written database past the threshold
/// and leaves a clean one alone.
pub async fn automatic_compaction_compacts_databases_full_of_garbage(backend: &dyn Backend) {
    let t = TempStore::new(backend);
    let dirty = t.db("dirty").await;
    let clean = t.db("clean").await;
    let mut rev = put(&dirty, json!({"_id": "a", "pad": "x".repeat(4_000)})).await;
    for _ in 0..50 {
        rev = put(
            &dirty,
            json!({"_id": "a", "_rev": rev, "pad": "x".repeat(4_000)}),
        )
        .await;
    }
    for i in 0..50 {
        put(
            &clean,
            json!({"_id": format!("c{i}"), "pad": "x".repeat(4_000)}),
        )
        .await;
    }
    let (dirty_before, clean_before) = (
        dirty.garbage().await.unwrap(),
        clean.garbage().await.unwrap(),
    );
    assert!(dirty_before.fraction() > 0.5, "{dirty_before:?}");

    let (stop_tx, stop) = tokio::sync::watch::channel(false);
    let settings = store::AutoCompaction {
        min_garbage: 0.5,
        min_file_size: 0,
        check_interval: std::time::Duration::from_millis(50),
        pause: std::time::Duration::from_millis(1),
    };
    let daemon = tokio::spawn({
        let store = t.store.clone();
        async move { store.compact_automatically(settings, stop).await }
    });
    let mut compacted = false;
    for _ in 0..100 {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        if dirty.garbage().await.unwrap().fraction() < 0.2 {
            compacted = true;
            break;
        }
    }
    stop_tx.send(true).unwrap();
    daemon.await.unwrap();
    assert!(
        compacted,
        "{dirty_before:?} {:?}",
        dirty.garbage().await.unwrap()
    );
    assert_eq!(get(&dirty, "a").await["_rev"], rev);
    assert_eq!(
        clean.garbage().await.unwrap().file_size,
        clean_before.file_size
    );
}

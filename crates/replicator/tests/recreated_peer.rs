//! A source database deleted and created again under the same name while a
//! continuous replication follows it: the job must notice (its
//! `instance_start_time` changed) instead of waiting forever past the new
//! database's sequence or checkpointing a sequence that skips its data.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::time::Duration;

use replicator::{Progress, ReplicationError, ReplicationSpec};
use serde_json::json;
use store::{DocInput, Store};

async fn put(store: &Store, db: &str, id: &str) {
    let db = store.db(db).await.unwrap();
    let doc = DocInput::from_json(json!({"_id": id})).unwrap();
    db.bulk_docs(vec![doc], true).await.unwrap();
}

#[tokio::test]
async fn a_recreated_source_stops_the_job_instead_of_skipping_its_data() {
    let dir = std::env::temp_dir().join(format!("recliner-recreated-{}", uuid::Uuid::new_v4()));
    let store = store_sqlite::open(&dir).unwrap();
    store.create_db("src").await.unwrap();
    for id in ["a", "b", "c"] {
        put(&store, "src", id).await;
    }
    let spec = ReplicationSpec::parse(&json!({
        "source": "src", "target": "dst", "create_target": true, "continuous": true,
        "checkpoint_interval": 50,
    }))
    .unwrap();
    let (_stop_tx, stop) = tokio::sync::watch::channel(false);
    let job = {
        let store = store.clone();
        let spec = spec.clone();
        tokio::spawn(async move {
            let progress = Progress::default();
            replicator::run(&store, &spec, stop, &progress, None).await
        })
    };
    // Caught up with a, b, c.
    for _ in 0..100 {
        if let Ok(dst) = store.db("dst").await
            && dst.info().await.unwrap().doc_count == 3
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    store.delete_db("src").await.unwrap();
    store.create_db("src").await.unwrap();
    put(&store, "src", "fresh").await;

    let ended = tokio::time::timeout(Duration::from_secs(10), job)
        .await
        .expect("the job noticed the recreated source")
        .unwrap();
    // Either it saw the new database (`PeerChanged`) or the moment between
    // delete and create (`db_not_found`): it stopped rather than carry on.
    match ended {
        Err(ReplicationError::PeerChanged(reason)) => {
            assert!(reason.contains("source src"), "{reason}")
        }
        Err(ReplicationError::Endpoint(replicator::EndpointError::NotFound(db))) => {
            assert_eq!(db, "src")
        }
        other => panic!("expected the job to stop, got {other:?}"),
    }
    // The same replication run again starts over on the new database (the
    // checkpoints no longer match): nothing is skipped.
    let (stop_tx, stop) = tokio::sync::watch::channel(false);
    let again = {
        let store = store.clone();
        let spec = spec.clone();
        tokio::spawn(async move {
            let progress = Progress::default();
            replicator::run(&store, &spec, stop, &progress, None).await
        })
    };
    let dst = store.db("dst").await.unwrap();
    for _ in 0..250 {
        if dst.info().await.unwrap().doc_count == 4 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(dst.info().await.unwrap().doc_count, 4);
    stop_tx.send(true).unwrap();
    again.await.unwrap().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

//! The blocks that count live documents by id (`recliner_id_blocks`) are
//! kept by the triggers on `recliner_docs`: after batches of writes and
//! deletions they sum to the live documents, and none holds more than
//! 2,048 (a grown block is split in the write that grew it). Run when
//! `RECLINER_TEST_POSTGRES` holds a server's URL; skipped otherwise.

#![allow(clippy::unwrap_used)] // a test: a failed unwrap is a failed test

use serde_json::json;
use store::DocInput;
use store_postgres::PostgresStore;

const URL_VAR: &str = "RECLINER_TEST_POSTGRES";

/// (blocks, the most live in one, their sum, live documents) of `db`.
fn blocks(url: &str, schema: &str, db: &str) -> (i64, i64, i64, i64) {
    let (url, sql, db) = (
        url.to_string(),
        format!(
            "SELECT (SELECT count(*) FROM \"{schema}\".recliner_id_blocks b WHERE b.db_id = d.db_id),
                    (SELECT COALESCE(max(live), 0) FROM \"{schema}\".recliner_id_blocks b WHERE b.db_id = d.db_id),
                    (SELECT COALESCE(sum(live), 0)::bigint FROM \"{schema}\".recliner_id_blocks b WHERE b.db_id = d.db_id),
                    (SELECT count(*) FROM \"{schema}\".recliner_docs x WHERE x.db_id = d.db_id AND NOT x.deleted)
             FROM \"{schema}\".recliner_dbs d WHERE d.name = $1"
        ),
        db.to_string(),
    );
    std::thread::spawn(move || {
        let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        let row = client.query_one(&sql, &[&db]).unwrap();
        (row.get(0), row.get(1), row.get(2), row.get(3))
    })
    .join()
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn triggers_count_live_documents_in_blocks_and_split_them() {
    let Some(url) = std::env::var(URL_VAR).ok().filter(|u| !u.is_empty()) else {
        eprintln!("{URL_VAR} is not set: no blocks to count");
        return;
    };
    let schema = format!("blocks_{}", uuid::Uuid::new_v4().simple());
    let dir = std::env::temp_dir().join(format!("recliner-{schema}"));
    let store = PostgresStore::connect_in_schema(&url, &schema, dir.clone(), Default::default())
        .unwrap()
        .into_store(dir.clone(), Default::default());
    let db = store.create_db("counted").await.unwrap();
    // One batch that grows the first block past two blocks at once, then
    // deletions of every third document.
    let docs = (0..7000)
        .map(|i| DocInput::from_json(json!({"_id": format!("d{i:05}")})).unwrap())
        .collect();
    let written = db.bulk_docs(docs, true).await.unwrap();
    let (count, most, sum, live) = blocks(&url, &schema, "counted");
    assert_eq!((sum, live), (7000, 7000));
    assert!(
        count >= 4 && most <= 2048,
        "{count} blocks, the largest {most}"
    );
    let deletions = written
        .iter()
        .enumerate()
        .filter(|(i, _)| i % 3 == 0)
        .map(|(_, r)| {
            DocInput::from_json(
                json!({"_id": r.id, "_rev": r.result.clone().unwrap(), "_deleted": true}),
            )
            .unwrap()
        })
        .collect();
    db.bulk_docs(deletions, true).await.unwrap();
    let (_, most, sum, live) = blocks(&url, &schema, "counted");
    assert_eq!(sum, live);
    assert_eq!(live, 7000 - 2334);
    assert!(most <= 2048);
    assert_eq!(db.info().await.unwrap().doc_count, 7000 - 2334);
    store.close_all().await;
    drop((db, store));
    let _ = std::fs::remove_dir_all(&dir);
    store_postgres::drop_schema(&url, &schema).unwrap();
}

//! A deleted database leaves no row behind, in the tables that cascade
//! from `recliner_dbs` and in those written once per document, which keep
//! no foreign key (they are deleted with the database instead). Run when
//! `RECLINER_TEST_POSTGRES` holds a server's URL; skipped otherwise.

#![allow(clippy::unwrap_used)] // a test: a failed unwrap is a failed test

use serde_json::json;
use store::{CreateDb, DocInput};
use store_postgres::PostgresStore;

const URL_VAR: &str = "RECLINER_TEST_POSTGRES";

/// Rows of `table` (in `schema`) whose database is gone.
fn orphans(url: &str, schema: &str, table: &str) -> i64 {
    let (url, sql) = (
        url.to_string(),
        format!(
            "SELECT count(*) FROM \"{schema}\".{table} t
             WHERE NOT EXISTS (SELECT 1 FROM \"{schema}\".recliner_dbs d WHERE d.db_id = t.db_id)"
        ),
    );
    std::thread::spawn(move || {
        let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        client.query_one(&sql, &[]).unwrap().get(0)
    })
    .join()
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_database_leaves_no_rows() {
    let Some(url) = std::env::var(URL_VAR).ok().filter(|u| !u.is_empty()) else {
        eprintln!("{URL_VAR} is not set: nothing to delete from");
        return;
    };
    let schema = format!("del_{}", uuid::Uuid::new_v4().simple());
    let dir = std::env::temp_dir().join(format!("recliner-{schema}"));
    let store = PostgresStore::connect_in_schema(&url, &schema, dir.clone(), Default::default())
        .unwrap()
        .into_store(dir.clone(), Default::default());
    let tables = [
        "recliner_docs",
        "recliner_revs",
        "recliner_access",
        "recliner_meta",
        "recliner_local",
    ];
    for name in ["plain", "per-user"] {
        let db = store
            .create_db_with(
                name,
                CreateDb {
                    access: name == "per-user",
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        let docs = (0..50)
            .map(|i| {
                DocInput::from_json(json!({"_id": format!("d{i}"), "_access": ["ann"]})).unwrap()
            })
            .collect();
        assert!(
            db.bulk_docs(docs, true)
                .await
                .unwrap()
                .iter()
                .all(|r| r.result.is_ok())
        );
        db.put_local("_local/x", json!({"v": 1})).await.unwrap();
    }
    store.delete_db("plain").await.unwrap();
    store.delete_db("per-user").await.unwrap();
    for table in tables {
        assert_eq!(
            orphans(&url, &schema, table),
            0,
            "{table} kept a deleted database's rows"
        );
    }
    // A database created again under the same name starts empty.
    let again = store.create_db("plain").await.unwrap();
    assert_eq!(again.info().await.unwrap().doc_count, 0);
    store.close_all().await;
    drop((again, store));
    let _ = std::fs::remove_dir_all(&dir);
    store_postgres::drop_schema(&url, &schema).unwrap();
}

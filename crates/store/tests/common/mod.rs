//! Shared helpers for the store's tests: a store in a temporary folder and
//! terse document builders.

#![allow(dead_code, clippy::unwrap_used)]

use std::path::PathBuf;

use serde_json::Value;
use store::{Database, DocInput, DocWriteResult, Store};

/// A store in a fresh temporary folder, removed on drop: on SQLite, or on
/// PostgreSQL when `RECLINER_TEST_POSTGRES` holds a server's URL (each
/// store then gets a schema of its own, dropped on drop). Every test of
/// this suite runs against both backends: `cargo xtask test` runs it twice.
pub struct TempStore {
    pub store: Store,
    pub dir: PathBuf,
    schema: Option<(String, String)>,
}

impl TempStore {
    pub fn new() -> TempStore {
        TempStore::with_options(store::StoreOptions::default())
    }

    pub fn with_options(options: store::StoreOptions) -> TempStore {
        let id = uuid::Uuid::new_v4().simple().to_string();
        let dir = std::env::temp_dir().join(format!("recliner-store-{id}"));
        match std::env::var("RECLINER_TEST_POSTGRES") {
            Ok(url) if !url.is_empty() => {
                let schema = format!("t_{id}");
                let backend =
                    store_postgres::PostgresStore::connect_in_schema(&url, &schema, dir.clone())
                        .unwrap();
                let store = backend.into_store(dir.clone(), options);
                TempStore {
                    store,
                    dir,
                    schema: Some((url, schema)),
                }
            }
            _ => TempStore {
                store: store_sqlite::open_with(&dir, options).unwrap(),
                dir,
                schema: None,
            },
        }
    }

    /// Another store on the same databases (a restart, or a second node).
    pub fn reopen(&self, options: store::StoreOptions) -> Store {
        match &self.schema {
            Some((url, schema)) => {
                let backend =
                    store_postgres::PostgresStore::connect_in_schema(url, schema, self.dir.clone())
                        .unwrap();
                backend.into_store(self.dir.clone(), options)
            }
            None => store_sqlite::open_with(&self.dir, options).unwrap(),
        }
    }

    /// Whether the store is on PostgreSQL (for what only SQLite has: files).
    pub fn is_postgres(&self) -> bool {
        self.schema.is_some()
    }

    pub async fn db(&self, name: &str) -> Database {
        self.store.create_db(name).await.unwrap()
    }
}

impl Drop for TempStore {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
        if let Some((url, schema)) = &self.schema {
            let _ = store_postgres::drop_schema(url, schema);
        }
    }
}

pub fn doc(value: Value) -> DocInput {
    DocInput::from_json(value).unwrap()
}

/// Writes one document interactively and returns its new revision.
pub async fn put(db: &Database, value: Value) -> String {
    let results = db.bulk_docs(vec![doc(value)], true).await.unwrap();
    results[0].result.clone().unwrap()
}

/// Writes documents with `new_edits=false`.
pub async fn replicate(db: &Database, values: Vec<Value>) -> Vec<DocWriteResult> {
    db.bulk_docs(values.into_iter().map(doc).collect(), false)
        .await
        .unwrap()
}

pub async fn get(db: &Database, id: &str) -> Value {
    serde_json::from_str(db.get(id, Default::default()).await.unwrap().as_str()).unwrap()
}

pub async fn get_with(db: &Database, id: &str, opts: store::GetOptions) -> Value {
    serde_json::from_str(db.get(id, opts).await.unwrap().as_str()).unwrap()
}

pub fn rev(s: &str) -> revtree::RevId {
    revtree::RevId::parse(s).unwrap()
}

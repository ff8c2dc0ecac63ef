//! Shared helpers for the store's tests: a store in a temporary folder and
//! terse document builders.

#![allow(dead_code, clippy::unwrap_used)]

use std::path::PathBuf;

use serde_json::Value;
use store::{Database, DocInput, DocWriteResult, Store};

/// A store in a fresh temporary folder, removed on drop.
pub struct TempStore {
    pub store: Store,
    pub dir: PathBuf,
}

impl TempStore {
    pub fn new() -> TempStore {
        let dir =
            std::env::temp_dir().join(format!("recliner-store-{}", uuid::Uuid::new_v4().simple()));
        let store = Store::open(&dir).unwrap();
        TempStore { store, dir }
    }

    pub async fn db(&self, name: &str) -> Database {
        self.store.create_db(name).await.unwrap()
    }
}

impl Drop for TempStore {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
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

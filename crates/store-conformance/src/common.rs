//! Shared helpers of the suite: a store on a new, empty place of the
//! backend under test, and terse document builders.

use std::path::PathBuf;

use serde_json::Value;
use store::{Database, DocInput, DocWriteResult, Store};

use crate::{Backend, Place};

/// A store on a new, empty place of the backend under test (with a fresh
/// temporary folder for the node's own files), removed on drop.
#[derive(Debug)]
pub struct TempStore {
    pub store: Store,
    pub dir: PathBuf,
    place: Box<dyn Place>,
}

impl TempStore {
    pub fn new(backend: &dyn Backend) -> TempStore {
        TempStore::with_options(backend, store::StoreOptions::default())
    }

    pub fn with_options(backend: &dyn Backend, options: store::StoreOptions) -> TempStore {
        let id = uuid::Uuid::new_v4().simple().to_string();
        let dir = std::env::temp_dir().join(format!("recliner-store-{id}"));
        let (store, place) = backend.create(&id, &dir, options);
        TempStore { store, dir, place }
    }

    /// Another store on the same databases (a restart, or a second node).
    pub fn reopen(&self, options: store::StoreOptions) -> Store {
        self.place.reopen(&self.dir, options)
    }

    /// Whether the databases are files in the data folder (what only some
    /// backends have).
    pub fn keeps_db_files(&self) -> bool {
        self.place.keeps_db_files()
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

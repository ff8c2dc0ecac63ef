//! Recliner's storage: every database of a server, one SQLite file each.
//!
//! The store owns databases (create, delete, list, open lazily with cached
//! handles), documents with their revision trees and bodies, local documents,
//! content-addressed attachments, the per-database sequence and changes feed
//! with its wake-ups, database metadata and durability. It knows nothing of
//! HTTP: its public surface is the wire-level operations the HTTP API and the
//! replicator call (`bulk_docs`, `get`, `open_revs`, `bulk_get`, `changes`,
//! `all_docs`, `revs_diff`, local documents, `info`).
//!
//! Concurrency: each database has one writer thread that groups concurrent
//! writes into one transaction (group commit); readers use pooled connections
//! of their own (SQLite WAL) and never wait for the writer. All SQLite work
//! runs off the async executor's threads.

mod attachments;
mod body;
mod checkpoint;
mod compaction;
mod database;
mod doc;
mod error;
mod feeds;
mod health;
mod local;
pub mod name;
mod read;
mod schema;
pub mod selector;
mod server_uuid;
mod update;
mod writer;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

pub use attachments::{
    AttachmentMeta, AttachmentReader, AttachmentUpload, BlobPin, CHUNK_SIZE, StagedBlob, digest_of,
};
pub use database::{Database, DbInfo};
pub use doc::{AttachmentInput, DocInput, validate_doc_id};
pub use error::{DocFailure, ErrorKind, StoreError};
pub use feeds::{AllDocsPage, AllDocsQuery, AllDocsRow, ChangeRow, ChangesPage, ChangesQuery};
pub use health::Health;
pub use read::{
    BulkGetError, BulkGetRequest, BulkGetResult, DocJson, GetOptions, OpenRev, OpenRevs,
};
pub use schema::Durability;
pub use server_uuid::ServerUuidError;
pub use update::{BulkError, DocWriteResult};

/// How the store is set up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreOptions {
    pub durability: Durability,
    /// The largest attachment in bytes (CouchDB's `max_attachment_size`,
    /// 1 GiB by default): declared lengths above it are refused, and gzip
    /// bytes are never inflated past it.
    pub max_attachment_size: u64,
}

impl Default for StoreOptions {
    fn default() -> StoreOptions {
        StoreOptions {
            durability: Durability::default(),
            max_attachment_size: 1 << 30,
        }
    }
}

/// All databases of one Recliner server, rooted in a data folder. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Store {
    inner: Arc<StoreInner>,
}

#[derive(Debug)]
struct StoreInner {
    data_dir: PathBuf,
    server_uuid: String,
    options: StoreOptions,
    /// Open databases by name; also serializes create/delete.
    open: Mutex<HashMap<String, Database>>,
}

impl Store {
    /// Opens (creating if needed) the data folder and the server identity in it.
    pub fn open(data_dir: impl Into<PathBuf>) -> Result<Store, StoreError> {
        Store::open_with(data_dir, StoreOptions::default())
    }

    pub fn open_with(
        data_dir: impl Into<PathBuf>,
        options: StoreOptions,
    ) -> Result<Store, StoreError> {
        let data_dir = data_dir.into();
        std::fs::create_dir_all(&data_dir).map_err(|source| StoreError::DataDir {
            path: data_dir.clone(),
            source,
        })?;
        let server_uuid = server_uuid::load_or_create(&data_dir)?;
        Ok(Store {
            inner: Arc::new(StoreInner {
                data_dir,
                server_uuid,
                options,
                open: Mutex::new(HashMap::new()),
            }),
        })
    }

    /// The folder holding every database file.
    pub fn data_dir(&self) -> &Path {
        &self.inner.data_dir
    }

    /// This server's uuid (32 lowercase hex digits): generated once, kept in
    /// the data folder, and part of every replication id this server computes.
    pub fn server_uuid(&self) -> &str {
        &self.inner.server_uuid
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Database>> {
        self.inner
            .open
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn path_of(&self, name: &str) -> PathBuf {
        self.inner.data_dir.join(name::file_name(name))
    }

    fn check_name(name: &str) -> Result<(), StoreError> {
        if name::is_valid_db_name(name) {
            Ok(())
        } else {
            Err(StoreError::IllegalDbName(name.to_string()))
        }
    }

    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Store) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let store = self.clone();
        tokio::task::spawn_blocking(move || f(&store))
            .await
            .map_err(|e| StoreError::CommitFailed(format!("store task failed: {e}")))?
    }

    /// Creates a database; `DbExists` if it is already there.
    pub async fn create_db(&self, name: &str) -> Result<Database, StoreError> {
        Store::check_name(name)?;
        let name = name.to_string();
        self.blocking(move |store| {
            let mut open = store.lock();
            let path = store.path_of(&name);
            if open.contains_key(&name) || path.exists() {
                return Err(StoreError::DbExists(name));
            }
            let db = Database::create(&name, &path, store.inner.options)?;
            open.insert(name, db.clone());
            Ok(db)
        })
        .await
    }

    /// Opens a database (cached after the first call); `DbNotFound` if absent.
    pub async fn db(&self, name: &str) -> Result<Database, StoreError> {
        if let Some(db) = self.lock().get(name) {
            return Ok(db.clone());
        }
        if !name::is_valid_db_name(name) {
            return Err(StoreError::DbNotFound(name.to_string()));
        }
        let name = name.to_string();
        self.blocking(move |store| {
            let mut open = store.lock();
            if let Some(db) = open.get(&name) {
                return Ok(db.clone());
            }
            let db = Database::open(&name, &store.path_of(&name), store.inner.options)?;
            open.insert(name, db.clone());
            Ok(db)
        })
        .await
    }

    /// Opens a database, creating it first if needed (system databases at startup).
    pub async fn ensure_db(&self, name: &str) -> Result<Database, StoreError> {
        match self.create_db(name).await {
            Err(StoreError::DbExists(_)) => self.db(name).await,
            other => other,
        }
    }

    /// Deletes a database and its files; `DbNotFound` if absent. Handles
    /// others still hold answer `DbNotFound` from then on.
    pub async fn delete_db(&self, name: &str) -> Result<(), StoreError> {
        if !name::is_valid_db_name(name) {
            return Err(StoreError::DbNotFound(name.to_string()));
        }
        let name = name.to_string();
        self.blocking(move |store| {
            let mut open = store.lock();
            let path = store.path_of(&name);
            let cached = open.remove(&name);
            if cached.is_none() && !path.exists() {
                return Err(StoreError::DbNotFound(name));
            }
            if let Some(db) = cached {
                db.close(true);
            }
            for suffix in ["", "-wal", "-shm"] {
                let mut file = path.as_os_str().to_owned();
                file.push(suffix);
                match std::fs::remove_file(PathBuf::from(file)) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(e.into()),
                }
            }
            Ok(())
        })
        .await
    }

    /// Every database name, sorted.
    pub async fn all_dbs(&self) -> Result<Vec<String>, StoreError> {
        self.blocking(|store| {
            let mut names = Vec::new();
            for entry in std::fs::read_dir(&store.inner.data_dir)? {
                let entry = entry?;
                if let Some(name) = entry.file_name().to_str().and_then(name::name_from_file) {
                    names.push(name);
                }
            }
            names.sort();
            Ok(names)
        })
        .await
    }

    /// Closes every open database cleanly (writers finish queued writes).
    pub async fn close_all(&self) {
        let _ = self
            .blocking(|store| {
                let dbs: Vec<Database> = store.lock().drain().map(|(_, db)| db).collect();
                for db in dbs {
                    db.close(false);
                }
                Ok(())
            })
            .await;
    }
}

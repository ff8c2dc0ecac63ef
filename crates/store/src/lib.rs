//! Recliner's storage: every database of a server, by CouchDB's rules.
//!
//! The store knows the rules, not where rows are kept: a backend crate
//! (`store-sqlite`, one file per database; `store-postgres`, one shared
//! PostgreSQL database) implements [`backend`]'s traits and opens a
//! [`Store`] over itself.
//!
//! The store owns databases (create, delete, list, open lazily with cached
//! handles), documents with their revision trees and bodies, local documents,
//! content-addressed attachments, the per-database sequence and changes feed
//! with its wake-ups, database metadata and durability. It knows nothing of
//! HTTP: its public surface is the wire-level operations the HTTP API and the
//! replicator call (`bulk_docs`, `get`, `open_revs`, `bulk_get`, `changes`,
//! `all_docs`, `revs_diff`, `purge`, local documents, `info`).
//!
//! Concurrency: each database has one writer thread that groups concurrent
//! writes into one transaction (group commit); readers read consistent
//! snapshots of their own (a backend's pooled connections) and never wait
//! for the writer. All backend work runs off the async executor's threads.
//!
//! Open databases: at most `max_dbs_open` stay open; the least recently
//! used one that nobody holds is closed to make room, and opened again
//! transparently when next asked for. A writer thread runs only while its
//! database is being written (it ends after `writer_idle_timeout`), so
//! threads and file descriptors follow the open and active databases, never
//! the number of databases in the data folder.

mod attachments;
mod auto_compaction;
pub mod auto_purge;
pub mod backend;
mod body;
mod compaction;
mod compression;
mod coordination;
mod data_lock;
mod database;
pub mod db_events;
mod doc;
pub mod doc_access;
mod durability;
mod error;
mod feeds;
mod health;
mod index;
mod index_blocks;
mod index_rows;
mod index_sizes;
mod local;
pub mod name;
mod partition;
mod purge;
mod read;
mod replaced;

mod seq;
mod server_uuid;
pub mod time_seq;
mod update;
mod writer;
#[cfg(feature = "test-hooks")]
#[doc(hidden)]
pub mod writer_checks;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

pub use attachments::{
    AttachmentMeta, AttachmentReader, AttachmentUpload, BlobPin, CHUNK_SIZE, InflatingReader,
    StagedBlob, digest_of,
};
pub use auto_compaction::AutoCompaction;
pub use backend::Garbage;
pub use compression::{AttachmentCompression, DEFAULT_COMPRESSIBLE_TYPES};
pub use coordination::Coordination;
pub use data_lock::DataDirLock;
pub use database::{Database, DbSummary};
pub use doc::{
    AttachmentInput, BODY_SPECIAL_FIELDS, DocInput, validate_doc_id, validate_partition,
    validate_partitioned_id,
};
pub use durability::Durability;
pub use error::{DocFailure, ErrorKind, StoreError};
pub use feeds::{AllDocsPage, AllDocsQuery, AllDocsRow, ChangeRow, ChangesQuery, FeedPage};
pub use health::Health;
pub use index::Index;
pub use index_blocks::ReducePart;
pub use index_rows::{IndexEntry, IndexPosition, IndexRange, IndexRow, IndexedDoc};
pub use index_sizes::IndexSizes;
pub use local::{LocalRow, validate_local_id};
pub use partition::{PartitionInfo, partition_range};
pub use purge::{DEFAULT_PURGED_INFOS_LIMIT, PurgeInfo, PurgeRequest, PurgeResult, PurgedSince};
pub use read::{DocJson, GetOptions, OpenRev, OpenRevs, RevisionsRead, RevisionsRequest};
pub use replaced::Replaced;
pub use seq::{MalformedSeq, Since};
pub use server_uuid::{ServerUuidError, load_or_create as load_or_create_server_uuid, node_uuid};
pub use update::{BulkError, DocWriteResult};

/// How the store is set up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreOptions {
    pub durability: Durability,
    /// The largest attachment in bytes (CouchDB's `max_attachment_size`,
    /// 1 GiB by default): declared lengths above it are refused, and gzip
    /// bytes are never inflated past it.
    pub max_attachment_size: u64,
    /// The size past which a partition of a partitioned database takes no
    /// more edits (CouchDB's `max_partition_size`, 10 GiB; 0 for none).
    pub max_partition_size: u64,
    /// Databases kept open (CouchDB's `max_dbs_open`, 500 by default). Each
    /// open database holds its pooled reader connections (file descriptors
    /// and page cache); past the limit the least recently used one that no
    /// request, feed or replication holds is closed. When all are held the
    /// limit is exceeded for a while rather than a request refused.
    pub max_dbs_open: usize,
    /// How long a database's writer thread waits for the next write before
    /// it closes its connection and ends (the next write starts another).
    /// When more than 64 writer threads run, each waits 100 ms at most.
    pub writer_idle_timeout: Duration,
    /// The `_security` object a new database starts with.
    pub default_security: DefaultSecurity,
    /// Which new attachments are stored gzip-compressed (CouchDB's
    /// `[attachments]`).
    pub attachment_compression: AttachmentCompression,
    /// The finest interval of the time bins behind `_changes?since=<time>`
    /// and automatic purging, in seconds (CouchDB's fixed 3 hours; shorter
    /// only to test them).
    pub time_seq_resolution: u64,
    /// How long deleted documents are kept before they are purged
    /// automatically, unless a database sets its own (CouchDB's
    /// `[couch_auto_purge_plugin] deleted_document_ttl`, `3_mon`,
    /// `infinity`); `None`: not purged.
    pub auto_purge_ttl: Option<String>,
}

/// CouchDB 3's `default_security`: who may use a database nobody has set
/// a `_security` object on yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DefaultSecurity {
    /// `{}`: every user may read and write documents.
    #[default]
    Everyone,
    /// Members and admins are the `_admin` role (CouchDB 3's default), so
    /// only server admins use the database until its `_security` says more.
    AdminOnly,
}

impl DefaultSecurity {
    pub(crate) fn json(self) -> &'static str {
        match self {
            DefaultSecurity::Everyone => "{}",
            DefaultSecurity::AdminOnly => {
                r#"{"members":{"roles":["_admin"]},"admins":{"roles":["_admin"]}}"#
            }
        }
    }
}

/// The options a running server may change, as CouchDB applies them at
/// once: shared by the store, every open database and its writer thread.
#[derive(Debug)]
pub(crate) struct LiveSettings {
    max_attachment_size: std::sync::atomic::AtomicU64,
    max_partition_size: std::sync::atomic::AtomicU64,
    max_dbs_open: std::sync::atomic::AtomicUsize,
    admin_only: std::sync::atomic::AtomicBool,
    compression: std::sync::RwLock<Arc<compression::CompressionRule>>,
    /// The finest interval of the time bins (`time_seq`), in seconds.
    pub(crate) time_seq_resolution: std::sync::atomic::AtomicU64,
    /// The server-wide `deleted_document_ttl` of automatic purging.
    pub(crate) auto_purge_ttl: std::sync::RwLock<Option<String>>,
    /// Not a setting, but shared the same way: the events every database
    /// reports for `_db_updates`.
    pub(crate) events: db_events::DbEvents,
}

impl LiveSettings {
    pub(crate) fn new(options: &StoreOptions) -> LiveSettings {
        let live = LiveSettings {
            max_attachment_size: Default::default(),
            max_partition_size: Default::default(),
            max_dbs_open: Default::default(),
            admin_only: Default::default(),
            compression: std::sync::RwLock::new(Arc::new(compression::CompressionRule::new(
                &options.attachment_compression,
            ))),
            time_seq_resolution: Default::default(),
            auto_purge_ttl: Default::default(),
            events: db_events::DbEvents::default(),
        };
        live.update(options);
        live
    }

    fn update(&self, options: &StoreOptions) {
        use std::sync::atomic::Ordering::Relaxed;
        self.max_attachment_size
            .store(options.max_attachment_size, Relaxed);
        self.max_partition_size
            .store(options.max_partition_size, Relaxed);
        self.max_dbs_open.store(options.max_dbs_open, Relaxed);
        self.time_seq_resolution
            .store(options.time_seq_resolution, Relaxed);
        *self
            .auto_purge_ttl
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = options.auto_purge_ttl.clone();
        self.admin_only.store(
            options.default_security == DefaultSecurity::AdminOnly,
            Relaxed,
        );
        let rule = Arc::new(compression::CompressionRule::new(
            &options.attachment_compression,
        ));
        *self
            .compression
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = rule;
    }

    /// The level new attachments of this type are compressed at, if they are.
    pub(crate) fn compression_level(&self, content_type: &str) -> Option<u32> {
        self.compression
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .level_for(content_type)
    }

    pub(crate) fn max_attachment_size(&self) -> u64 {
        self.max_attachment_size
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    pub(crate) fn max_partition_size(&self) -> u64 {
        self.max_partition_size
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    pub(crate) fn max_dbs_open(&self) -> usize {
        self.max_dbs_open.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub(crate) fn default_security(&self) -> DefaultSecurity {
        if self.admin_only.load(std::sync::atomic::Ordering::Relaxed) {
            DefaultSecurity::AdminOnly
        } else {
            DefaultSecurity::Everyone
        }
    }
}

/// `max_partition_size` by default, as CouchDB's: 10 GiB.
pub const DEFAULT_MAX_PARTITION_SIZE: u64 = 10 << 30;

/// `max_dbs_open` by default, as CouchDB's.
pub const DEFAULT_MAX_DBS_OPEN: usize = 500;

impl Default for StoreOptions {
    fn default() -> StoreOptions {
        StoreOptions {
            durability: Durability::default(),
            max_attachment_size: 1 << 30,
            max_partition_size: DEFAULT_MAX_PARTITION_SIZE,
            max_dbs_open: DEFAULT_MAX_DBS_OPEN,
            // Long enough that a database written every second or so keeps
            // its thread and connection; short enough that thousands of
            // databases written once each do not hold a thread apiece.
            writer_idle_timeout: Duration::from_secs(2),
            default_security: DefaultSecurity::default(),
            attachment_compression: AttachmentCompression::default(),
            time_seq_resolution: time_seq::DEFAULT_RESOLUTION,
            auto_purge_ttl: None,
        }
    }
}

/// How `PUT /db` asks a database to be made.
#[derive(Debug, Clone, Copy)]
pub struct CreateDb {
    /// `?partitioned=true`: ids are `partition:id`.
    pub partitioned: bool,
    /// `?q=`: kept and reported back (see [`Database::q`]).
    pub q: u32,
    /// `?access=true`: per-document access (see [`doc_access`]).
    pub access: bool,
}

impl Default for CreateDb {
    fn default() -> CreateDb {
        CreateDb {
            partitioned: false,
            q: 1,
            access: false,
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
    backend: Arc<dyn backend::StoreBackend>,
    coordination: Arc<dyn Coordination>,
    options: StoreOptions,
    /// The part of `options` that changes while the server runs.
    live: Arc<LiveSettings>,
    /// Open databases by name; also serializes create/delete of a name.
    dbs: Mutex<OpenDbs>,
    /// Signalled whenever a database settles (opened, closed, created or
    /// deleted), for callers waiting on a `Slot::Changing` name.
    settled: Condvar,
}

/// The cache of open databases.
#[derive(Debug, Default)]
struct OpenDbs {
    slots: HashMap<String, Slot>,
    /// Ticks on every use; a handle's last tick orders eviction.
    clock: u64,
    /// `Slot::Open` entries (the ones the limit counts).
    open: usize,
}

#[derive(Debug)]
enum Slot {
    Open {
        db: Database,
        used: u64,
    },
    /// Being opened, created, closed or deleted outside the lock (file
    /// work, possibly an fsync): whoever wants the name waits until it
    /// settles, so no name ever has two live handles (two writers).
    Changing,
}

impl OpenDbs {
    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    /// The open handle of `name`, marked as just used.
    fn get(&mut self, name: &str) -> Option<Database> {
        let now = self.tick();
        match self.slots.get_mut(name) {
            Some(Slot::Open { db, used }) => {
                *used = now;
                Some(db.clone())
            }
            _ => None,
        }
    }

    fn is_changing(&self, name: &str) -> bool {
        matches!(self.slots.get(name), Some(Slot::Changing))
    }

    /// Marks `name` as changing; returns its open handle, if it had one.
    fn begin_change(&mut self, name: &str) -> Option<Database> {
        match self.slots.insert(name.to_string(), Slot::Changing) {
            Some(Slot::Open { db, .. }) => {
                self.open -= 1;
                Some(db)
            }
            _ => None,
        }
    }

    /// Ends a change: `name` is open with `db`, or closed.
    fn settle(&mut self, name: &str, db: Option<Database>) {
        match db {
            Some(db) => {
                let used = self.tick();
                self.slots.insert(name.to_string(), Slot::Open { db, used });
                self.open += 1;
            }
            None => {
                self.slots.remove(name);
            }
        }
    }

    /// Takes the least recently used idle handles past `max` out of the
    /// cache (their names are left changing until they are closed). Busy
    /// ones stay, even past the limit.
    fn evict(&mut self, max: usize) -> Vec<(String, Database)> {
        let excess = self.open.saturating_sub(max);
        if excess == 0 {
            return Vec::new();
        }
        let mut idle: Vec<(u64, &String)> = self
            .slots
            .iter()
            .filter_map(|(name, slot)| match slot {
                Slot::Open { db, used } if db.is_idle() => Some((*used, name)),
                _ => None,
            })
            .collect();
        if idle.len() > excess {
            idle.select_nth_unstable(excess);
            idle.truncate(excess);
        }
        let names: Vec<String> = idle.into_iter().map(|(_, name)| name.clone()).collect();
        if names.len() < excess {
            tracing::debug!(
                open = self.open,
                max_dbs_open = max,
                "every open database is in use: over the limit until one is free"
            );
        }
        names
            .into_iter()
            .filter_map(|name| self.begin_change(&name).map(|db| (name, db)))
            .collect()
    }
}

/// Names a caller marked `Slot::Changing`. Dropping it settles them as
/// closed and wakes the waiters, also when the caller unwinds midway, so
/// no name is left changing for good.
struct Changes<'a> {
    store: &'a Store,
    names: Vec<String>,
}

impl<'a> Changes<'a> {
    fn one(store: &'a Store, name: &str) -> Changes<'a> {
        Changes {
            store,
            names: vec![name.to_string()],
        }
    }
}

impl Drop for Changes<'_> {
    fn drop(&mut self) {
        if self.names.is_empty() {
            return;
        }
        let mut dbs = self.store.lock();
        for name in self.names.drain(..) {
            dbs.settle(&name, None);
        }
        drop(dbs);
        self.store.inner.settled.notify_all();
    }
}

impl Store {
    /// A store whose databases `backend` keeps, its nodes agreeing through
    /// `coordination` (the backend crates call this); `data_dir` holds this node's own files (indexes, spooled
    /// request bodies) whatever the backend.
    pub fn with_backend(
        data_dir: PathBuf,
        backend: Arc<dyn backend::StoreBackend>,
        coordination: Arc<dyn Coordination>,
        options: StoreOptions,
    ) -> Store {
        Store {
            inner: Arc::new(StoreInner {
                data_dir,
                backend,
                coordination,
                live: Arc::new(LiveSettings::new(&options)),
                options,
                dbs: Mutex::new(OpenDbs::default()),
                settled: Condvar::new(),
            }),
        }
    }

    /// Applies the options CouchDB lets a running server change
    /// (`max_attachment_size`, `max_dbs_open`, `default_security`), to the
    /// open databases too; durability and the writers' idle time stay as
    /// they were opened with until the next start.
    pub fn apply_options(&self, options: &StoreOptions) {
        self.inner.live.update(options);
    }

    /// The folder holding every database file.
    pub fn data_dir(&self) -> &Path {
        &self.inner.data_dir
    }

    /// This server's uuid (32 lowercase hex digits): generated once, kept in
    /// the data folder, and part of every replication id this server computes.
    pub fn server_uuid(&self) -> &str {
        self.inner.backend.server_uuid()
    }

    /// See [`Coordination::shared_value`].
    pub async fn shared_value(&self, key: &str, fresh: &str) -> Result<Option<String>, StoreError> {
        let (key, fresh) = (key.to_string(), fresh.to_string());
        self.blocking(move |store| store.inner.coordination.shared_value(&key, &fresh))
            .await
    }

    /// See [`Coordination::shared_values`].
    pub async fn shared_values(&self, prefix: &str) -> Result<Vec<(String, String)>, StoreError> {
        let prefix = prefix.to_string();
        self.blocking(move |store| store.inner.coordination.shared_values(&prefix))
            .await
    }

    /// See [`Coordination::set_shared_value`].
    pub async fn set_shared_value(&self, key: &str, value: Option<&str>) -> Result<(), StoreError> {
        let (key, value) = (key.to_string(), value.map(str::to_string));
        self.blocking(move |store| {
            store
                .inner
                .coordination
                .set_shared_value(&key, value.as_deref())
        })
        .await
    }

    /// Whether other nodes may serve the same databases (a shared backend).
    pub fn is_shared(&self) -> bool {
        self.inner.coordination.is_shared()
    }

    /// See [`Coordination::lease`].
    pub async fn lease(&self, key: &str, holder: &str, ttl: Duration) -> Result<bool, StoreError> {
        let (key, holder) = (key.to_string(), holder.to_string());
        self.blocking(move |store| store.inner.coordination.lease(&key, &holder, ttl))
            .await
    }

    /// See [`Coordination::release_lease`].
    pub async fn release_lease(&self, key: &str, holder: &str) -> Result<(), StoreError> {
        let (key, holder) = (key.to_string(), holder.to_string());
        self.blocking(move |store| store.inner.coordination.release_lease(&key, &holder))
            .await
    }

    /// See [`Coordination::publish_node_state`].
    pub async fn publish_node_state(
        &self,
        node: &str,
        entries: Vec<(String, String)>,
    ) -> Result<(), StoreError> {
        let node = node.to_string();
        self.blocking(move |store| store.inner.coordination.publish_node_state(&node, &entries))
            .await
    }

    /// See [`Coordination::other_nodes_state`].
    pub async fn other_nodes_state(
        &self,
        node: &str,
        fresh: Duration,
    ) -> Result<Vec<(String, String, String)>, StoreError> {
        let node = node.to_string();
        self.blocking(move |store| store.inner.coordination.other_nodes_state(&node, fresh))
            .await
    }

    pub(crate) fn backend(&self) -> &Arc<dyn backend::StoreBackend> {
        &self.inner.backend
    }

    fn lock(&self) -> MutexGuard<'_, OpenDbs> {
        self.inner
            .dbs
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Locks the cache once `name` is not changing (blocking: call it off
    /// the async threads).
    fn lock_settled(&self, name: &str) -> MutexGuard<'_, OpenDbs> {
        let mut dbs = self.lock();
        while dbs.is_changing(name) {
            dbs = self
                .inner
                .settled
                .wait(dbs)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
        }
        dbs
    }

    /// Ends the change of one name (see `Slot::Changing`): it is open with
    /// `db`, or closed. Then closes what the limit evicts. Blocking.
    fn finish_change(&self, mut change: Changes<'_>, db: Option<Database>) {
        let Some(name) = change.names.pop() else {
            return;
        };
        let evicted = {
            let mut dbs = self.lock();
            dbs.settle(&name, db);
            dbs.evict(self.inner.live.max_dbs_open())
        };
        self.inner.settled.notify_all();
        let closing = Changes {
            store: self,
            names: evicted.iter().map(|(name, _)| name.clone()).collect(),
        };
        for (_, db) in &evicted {
            db.close(false);
        }
        drop(closing);
    }

    /// How many databases are open now (idle or in use).
    pub fn open_dbs(&self) -> usize {
        self.lock().open
    }

    /// The size of a database's file and its write-ahead log (where recent
    /// writes are until a checkpoint); 0 when it has none.
    pub(crate) async fn file_len(&self, name: &str) -> u64 {
        let name = name.to_string();
        self.blocking(move |store| Ok(store.inner.backend.db_size(&name)))
            .await
            .unwrap_or(0)
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
        self.create_db_with(name, CreateDb::default()).await
    }

    /// Creates a database, partitioned (`?partitioned=true`) or not.
    pub async fn create_db_with(&self, name: &str, how: CreateDb) -> Result<Database, StoreError> {
        let CreateDb {
            partitioned,
            q,
            access,
        } = how;
        Store::check_name(name)?;
        if partitioned && name::is_system_db(name) {
            return Err(StoreError::bad_request(
                "Cannot partition a system database",
            ));
        }
        if access && name::is_system_db(name) {
            return Err(StoreError::bad_request(
                "System databases cannot have per-document access",
            ));
        }
        let name = name.to_string();
        self.blocking(move |store| {
            let change = {
                let mut dbs = store.lock_settled(&name);
                if dbs.slots.contains_key(&name) || store.inner.backend.exists(&name)? {
                    return Err(StoreError::DbExists(name));
                }
                dbs.begin_change(&name);
                Changes::one(store, &name)
            };
            let setup = backend::NewDb {
                partitioned,
                q,
                security: store.inner.live.default_security().json(),
                access,
            };
            let created = store
                .inner
                .backend
                .create_db(&name, &setup)
                .and_then(|opened| {
                    Database::start(
                        &name,
                        opened.into(),
                        store.inner.options.clone(),
                        store.inner.live.clone(),
                    )
                });
            store.finish_change(change, created.as_ref().ok().cloned());
            if created.is_ok() {
                store
                    .inner
                    .live
                    .events
                    .note(db_events::DbEventType::Created, &name);
            }
            created
        })
        .await
    }

    /// Opens a database (kept open after the first call, within
    /// `max_dbs_open`); `DbNotFound` if absent. A database with
    /// per-document access is handed out once its access index is whole.
    pub async fn db(&self, name: &str) -> Result<Database, StoreError> {
        self.open(name).await?.with_access_index().await
    }

    async fn open(&self, name: &str) -> Result<Database, StoreError> {
        if let Some(db) = self.lock().get(name) {
            return Ok(db);
        }
        if !name::is_valid_db_name(name) {
            return Err(StoreError::DbNotFound(name.to_string()));
        }
        let name = name.to_string();
        self.blocking(move |store| {
            let change = {
                let mut dbs = store.lock_settled(&name);
                if let Some(db) = dbs.get(&name) {
                    return Ok(db);
                }
                dbs.begin_change(&name);
                Changes::one(store, &name)
            };
            let opened = store.inner.backend.open_db(&name).and_then(|opened| {
                Database::start(
                    &name,
                    opened.into(),
                    store.inner.options.clone(),
                    store.inner.live.clone(),
                )
            });
            store.finish_change(change, opened.as_ref().ok().cloned());
            opened
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
            let (change, cached) = {
                let mut dbs = store.lock_settled(&name);
                if !dbs.slots.contains_key(&name) && !store.inner.backend.exists(&name)? {
                    return Err(StoreError::DbNotFound(name));
                }
                (Changes::one(store, &name), dbs.begin_change(&name))
            };
            if let Some(db) = cached {
                db.close(true);
            }
            let removed = store.inner.backend.delete_db(&name);
            store.finish_change(change, None);
            store
                .inner
                .live
                .events
                .note(db_events::DbEventType::Deleted, &name);
            removed
        })
        .await
    }

    /// Every database name, sorted.
    pub async fn all_dbs(&self) -> Result<Vec<String>, StoreError> {
        self.blocking(|store| store.inner.backend.list_dbs()).await
    }

    /// Closes every open database cleanly (writers finish queued writes).
    /// Handles still held refuse writes afterwards.
    pub async fn close_all(&self) {
        let _ = self
            .blocking(|store| {
                let closing: Vec<(String, Database)> = {
                    let mut dbs = store.lock();
                    let names: Vec<String> = dbs
                        .slots
                        .iter()
                        .filter(|(_, slot)| matches!(slot, Slot::Open { .. }))
                        .map(|(name, _)| name.clone())
                        .collect();
                    names
                        .into_iter()
                        .filter_map(|name| dbs.begin_change(&name).map(|db| (name, db)))
                        .collect()
                };
                let change = Changes {
                    store,
                    names: closing.iter().map(|(name, _)| name.clone()).collect(),
                };
                for (_, db) in &closing {
                    db.close(false);
                }
                drop(change);
                Ok(())
            })
            .await;
    }
}

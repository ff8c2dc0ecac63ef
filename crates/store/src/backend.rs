//! The seam between CouchDB's rules and storage: what a backend implements.
//!
//! The rules (revision-tree merge, winner choice, stemming, attachment
//! stubs, document assembly, `open_revs` targets, the changes and
//! `_all_docs` pages, compaction's choice of what to drop) are written once,
//! in `update`, `read`, `feeds` and `compaction`, over these traits. A
//! backend stores and finds rows: documents with their encoded trees,
//! revision bodies, attachment bytes in chunks, local documents, metadata.
//!
//! - [`StoreBackend`]: the databases of a server (create, open, delete, list)
//!   and the server's uuid. What nodes sharing them agree on (leases, node
//!   state, shared values) is [`crate::Coordination`], apart.
//! - [`DbBackend`]: one open database: write sessions for its writer thread,
//!   and consistent snapshots for readers.
//! - [`WriteSession`] and [`WriteTx`]: a group of writes in one transaction,
//!   each write in its own savepoint.
//! - [`WriteRows`] and [`ReadRows`]: the rows themselves.
//!
//! The backends live in crates of their own (`store-sqlite`,
//! `store-postgres`), so the rules never depend on one. Row
//! handles (`DocRow::key`, `RevisionRef::row`, blob ids) are the backend's
//! own numbers: the rules only pass them back.

use std::ops::Bound;

use revtree::{RevId, RevTree};

use crate::StoreError;
pub use crate::attachments::{Attachments, CHUNK_SIZE, decode_atts, encode_atts, new_blob_id};
pub use crate::body::{StoredBody, snappy_text};

/// The counters a database keeps, mirrored in memory by the writer and
/// only replaced after a successful commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DbState {
    pub update_seq: u64,
    pub purge_seq: u64,
    pub doc_count: u64,
    pub doc_del_count: u64,
    pub external_size: i64,
    /// The row handle the next new document gets.
    pub next_doc_key: i64,
    pub revs_limit: u32,
    /// Set by a write that changed a design document (not stored): once
    /// its group commits, the design generation moves.
    pub design_changed: bool,
}

/// What [`crate::Database::garbage`] estimates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Garbage {
    /// Bytes of the database file (its write-ahead log aside).
    pub file_size: u64,
    /// Bytes of it compaction would free, estimated.
    pub garbage: u64,
}

impl Garbage {
    /// The share of the file that is garbage, 0 to 1.
    pub fn fraction(&self) -> f64 {
        if self.file_size == 0 {
            0.0
        } else {
            self.garbage as f64 / self.file_size as f64
        }
    }
}

/// A document's row as the writer finds it before an edit.
#[derive(Debug)]
pub struct StoredDoc {
    /// The backend's handle of the document's rows.
    pub key: i64,
    pub tree: RevTree,
    /// Body length of the winner when the document is live (for `sizes.external`).
    pub live_body_len: Option<i64>,
}

/// A revision body as stored: where it is, and its length for `sizes.external`.
#[derive(Debug, Clone, Copy)]
pub struct RevisionRef {
    /// The backend's handle of the body's row (0: none).
    pub row: i64,
    pub body_len: i64,
}

/// What an update writes to a document's row.
#[derive(Debug)]
pub struct DocUpdate<'a> {
    pub key: i64,
    pub id: &'a str,
    pub seq: u64,
    pub winner: &'a RevId,
    pub deleted: bool,
    /// The winner's body row (0 when its body is not kept).
    pub winner_row: i64,
    pub tree: &'a RevTree,
    /// The document had no row before this update.
    pub is_new: bool,
    /// Its winner was live before this update (false when new): a backend
    /// that counts live documents by id counts the change.
    pub was_live: bool,
}

/// Row storage inside a write transaction: what the edit rules read and
/// write. Every call sees the transaction's own earlier writes.
/// The database meta key under which the last compaction's measure of how
/// full the pages in use are is kept (see `DbBackend::measure_page_fill`).
pub const PAGE_FILL_META: &str = "page_fill";

pub trait WriteRows {
    /// The document's row, or `None` when it was never written.
    fn load_doc(&self, id: &str) -> Result<Option<StoredDoc>, StoreError>;
    /// Says which documents a batch, or a group of writes, is about to
    /// load: a backend that pays a round trip per query reads them at once
    /// (each is handed out once; a second call adds to the first). Nothing
    /// by default.
    fn prefetch_docs(&self, ids: &[&str]) -> Result<(), StoreError> {
        let _ = ids;
        Ok(())
    }
    /// The attachments recorded with one revision (none when not kept).
    fn revision_attachments(&self, key: i64, rev: &RevId) -> Result<Attachments, StoreError>;
    /// The attachments of every kept revision of a document, revision by revision.
    fn every_revision_attachments(&self, key: i64) -> Result<Vec<Attachments>, StoreError>;
    /// Stores a revision's body and attachments (filling in a revision
    /// known until now without its body).
    fn write_revision(
        &self,
        key: i64,
        rev: &RevId,
        body: &StoredBody,
        atts: &Attachments,
    ) -> Result<RevisionRef, StoreError>;
    /// Where a revision's body is, if it is kept.
    fn revision_ref(&self, key: i64, rev: &RevId) -> Result<Option<RevisionRef>, StoreError>;
    /// Forgets a revision's body (stemmed off the tree).
    fn drop_revision(&self, key: i64, rev: &RevId) -> Result<(), StoreError>;
    /// Writes the document's row at its new sequence.
    fn write_doc(&self, update: &DocUpdate<'_>) -> Result<(), StoreError>;
    /// Stores bytes under their digest (once); returns the digest.
    fn put_blob(&self, data: &[u8]) -> Result<String, StoreError>;
    fn has_blob(&self, digest: &str) -> Result<bool, StoreError>;
    /// The stored bytes of a digest, whole (small, inline-sized uses only).
    fn blob(&self, digest: &str) -> Result<Vec<u8>, StoreError>;
    /// The bytes of a partition's live documents.
    fn partition_size(&self, partition: &str) -> Result<u64, StoreError>;
    /// Writes a local document (replacing any).
    fn put_local(&self, id: &str, rev: u64, body: &str) -> Result<(), StoreError>;
    /// Removes a local document; false when there was none.
    fn delete_local(&self, id: &str) -> Result<bool, StoreError>;
    /// Removes a document and every revision of it (purged whole).
    fn delete_doc(&self, key: i64) -> Result<(), StoreError>;
    /// Records what one purge request removed.
    fn record_purge(&self, info: &PurgeInfoRow) -> Result<(), StoreError>;
    /// Forgets the purge infos up to and including `purge_seq`.
    fn drop_purge_infos_through(&self, purge_seq: u64) -> Result<(), StoreError>;
    /// A value of the database's metadata (`revs_limit`, `security`, ...).
    fn meta(&self, key: &str) -> Result<Option<String>, StoreError>;
    fn set_meta(&self, key: &str, value: &str) -> Result<(), StoreError>;
    /// Stores one chunk of an attachment being uploaded, under a blob id
    /// not yet filed under a digest.
    fn put_chunk(&self, blob: i64, index: u64, data: &[u8]) -> Result<(), StoreError>;
    /// Files an uploaded blob under its digest; when the digest is already
    /// stored, drops the upload's chunks instead.
    fn file_blob(&self, digest: &str, blob: i64, length: u64) -> Result<(), StoreError>;
    /// Compaction: the next documents after `after_key`, in key order.
    fn docs_after(
        &self,
        after_key: i64,
        limit: u64,
    ) -> Result<Vec<(i64, String, RevTree)>, StoreError>;
    /// Compaction: rewrites a document's tree (bodies marked gone).
    fn set_tree(&self, key: i64, tree: &RevTree) -> Result<(), StoreError>;
    /// Compaction: every digest a kept revision refers to.
    fn referenced_digests(&self) -> Result<std::collections::HashSet<String>, StoreError>;
    /// Compaction: every filed blob, as digest and blob id.
    fn blobs(&self) -> Result<Vec<(String, i64)>, StoreError>;
    fn delete_blob(&self, digest: &str, blob: i64) -> Result<(), StoreError>;
    /// Compaction: drops chunks no filed blob owns (abandoned uploads).
    fn delete_unfiled_chunks(&self) -> Result<(), StoreError>;
    /// Compaction's last step: gives up to `most_pages` pages of freed
    /// space back, where the backend can; whether more is left to give.
    fn reclaim_space(&self, most_pages: u64) -> Result<bool, StoreError>;
    /// The stored JSON text of one revision's body, if kept.
    fn revision_text(&self, key: i64, rev: &RevId) -> Result<Option<String>, StoreError>;
    /// A document's rows of the access index (databases with per-document
    /// access only).
    fn access_rows(&self, key: i64) -> Result<Vec<AccessRow>, StoreError>;
    /// Replaces a document's rows of the access index.
    fn set_access_rows(&self, key: i64, rows: &[AccessRow]) -> Result<(), StoreError>;
}

/// One row of a database's access index: who (a user name or a role, as
/// written in `_access`) may see a document, at the sequence the row
/// changed. A row with `gone` says that principal lost the document at
/// `seq`: it holds the JSON array of the leaves it may still have (see
/// `store::doc_access`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessRow {
    pub principal: String,
    pub seq: u64,
    pub gone: Option<String>,
}

/// A row of a user's changes feed from the access index: the document
/// (as [`ReadRows::changes`] gives it) and, when the user lost it, the
/// leaves they may hold (`gone`, as in [`AccessRow`]) at `seq`.
#[derive(Debug)]
pub struct AccessChange {
    pub seq: u64,
    pub id: String,
    pub gone: Option<String>,
    pub row: DocRow,
}

/// Takes the rows of a user's feed one by one.
pub type AccessVisitor<'a> = dyn FnMut(AccessChange) -> Result<(), StoreError> + 'a;

/// One purge request as recorded: its purge sequence, a uuid, the
/// document id and the revisions asked for (JSON text).
#[derive(Debug)]
pub struct PurgeInfoRow {
    pub purge_seq: u64,
    pub uuid: String,
    pub id: String,
    pub revs: String,
}

/// A local document as stored: no tree, a revision number and a body.
#[derive(Debug)]
pub struct LocalDocRow {
    pub id: String,
    pub rev: u64,
    pub body: String,
}

/// A document row as readers need it.
#[derive(Debug)]
pub struct DocRow {
    /// The backend's handle of the document's rows.
    pub key: i64,
    pub seq: u64,
    pub tree: RevTree,
    /// The winner as stored, and the handle of its body (0 when not kept).
    pub winner: String,
    pub winner_row: i64,
    /// The winner's body and attachments, when the page brought them along.
    pub winner_body: Option<(String, Option<String>)>,
}

/// A page of live documents in id order, for `_all_docs`.
#[derive(Debug)]
pub struct IdPage<'a> {
    /// Bounds in ascending id order, whatever the direction of travel.
    pub lo: &'a Bound<String>,
    pub hi: &'a Bound<String>,
    pub descending: bool,
    pub skip: u64,
    pub limit: u64,
    /// Bring the winners' bodies along (`include_docs`).
    pub with_bodies: bool,
}

/// The counters a database keeps, as a snapshot sees them.
#[derive(Debug, Clone, Copy)]
pub struct DbCounts {
    pub doc_count: u64,
    pub doc_del_count: u64,
    pub update_seq: u64,
    pub purge_seq: u64,
    /// Bytes of the live documents' bodies as JSON (`sizes.external`).
    pub external_size: i64,
}

/// What the database takes in storage (`sizes.file`, `sizes.active`).
#[derive(Debug, Clone, Copy)]
pub struct StorageSizes {
    pub file: u64,
    pub active: u64,
}

/// Takes the rows of a scan one by one: a page is answered as it is read,
/// never held as rows and answer both.
pub type RowVisitor<'a> = dyn FnMut(String, DocRow) -> Result<(), StoreError> + 'a;

/// Row storage as readers see it: one consistent snapshot per call.
pub trait ReadRows {
    fn doc_row(&self, id: &str) -> Result<Option<DocRow>, StoreError>;
    /// The stored body and encoded attachments of one revision, if kept.
    fn revision_body(
        &self,
        row: &DocRow,
        rev: &RevId,
    ) -> Result<Option<(String, Option<String>)>, StoreError>;
    /// The stored bytes of a digest, whole (small, inline-sized uses only).
    fn blob(&self, digest: &str) -> Result<Vec<u8>, StoreError>;
    /// The database's counters as this snapshot sees them.
    fn counts(&self) -> Result<DbCounts, StoreError>;
    /// Documents by sequence: after `since` ascending, or before it
    /// descending (0: from the newest), each handed to `each` as it is read.
    fn changes(
        &self,
        since: u64,
        descending: bool,
        limit: u64,
        with_bodies: bool,
        each: &mut RowVisitor<'_>,
    ) -> Result<(), StoreError>;
    /// How many documents changed after `seq`.
    fn count_changes_after(&self, seq: u64) -> Result<u64, StoreError>;
    /// Live documents with ids within the bounds (ascending order).
    fn count_live(&self, lo: &Bound<String>, hi: &Bound<String>) -> Result<u64, StoreError>;
    /// A page of live documents in id order, each handed to `each` as it is read.
    fn live_docs(&self, page: &IdPage<'_>, each: &mut RowVisitor<'_>) -> Result<(), StoreError>;
    fn local_doc(&self, id: &str) -> Result<Option<LocalDocRow>, StoreError>;
    /// A page of local documents in id (byte) order; `with_bodies` is ignored.
    fn local_docs(&self, page: &IdPage<'_>) -> Result<Vec<LocalDocRow>, StoreError>;
    /// The purge infos kept, oldest first.
    fn purge_infos(&self) -> Result<Vec<PurgeInfoRow>, StoreError>;
    /// A value of the database's metadata.
    fn meta(&self, key: &str) -> Result<Option<String>, StoreError>;
    /// The attachments recorded with one revision; `None` when the
    /// revision's body is not kept.
    fn revision_attachments(
        &self,
        key: i64,
        rev: &RevId,
    ) -> Result<Option<Attachments>, StoreError>;
    /// A stored blob's handle and number of chunks; `None` for an unknown digest.
    fn blob_chunks(&self, digest: &str) -> Result<Option<(i64, u64)>, StoreError>;
    /// One chunk of a stored blob.
    fn blob_chunk(&self, blob: i64, index: u64) -> Result<Vec<u8>, StoreError>;
    /// Counts and body bytes of a partition's documents.
    fn partition_counts(&self, partition: &str) -> Result<crate::PartitionInfo, StoreError>;
    fn storage_sizes(&self) -> Result<StorageSizes, StoreError>;
    /// A document's rows of the access index.
    fn access_rows(&self, key: i64) -> Result<Vec<AccessRow>, StoreError>;
    /// A user's changes (`principals`: their name and roles), each
    /// document once at its latest row for any of them: present rows
    /// first when several share that sequence. After `since` ascending,
    /// or before it descending (0: from the newest).
    fn access_changes(
        &self,
        principals: &[String],
        since: u64,
        descending: bool,
        limit: u64,
        with_bodies: bool,
        each: &mut AccessVisitor<'_>,
    ) -> Result<(), StoreError>;
    /// How many documents of a user's feed changed after `seq`.
    fn access_count_changes_after(
        &self,
        principals: &[String],
        seq: u64,
    ) -> Result<u64, StoreError>;
    /// A page of the live documents a user may read, in id order.
    fn access_live_docs(
        &self,
        principals: &[String],
        page: &IdPage<'_>,
        each: &mut RowVisitor<'_>,
    ) -> Result<(), StoreError>;
    /// How many live documents within the bounds a user may read.
    fn access_count_live(
        &self,
        principals: &[String],
        lo: &Bound<String>,
        hi: &Bound<String>,
    ) -> Result<u64, StoreError>;
    /// How many deleted documents a user may read (their tombstones
    /// still name them).
    fn access_count_deleted(&self, principals: &[String]) -> Result<u64, StoreError>;
}

/// The databases of a server, wherever they are kept.
pub trait StoreBackend: Send + Sync + std::fmt::Debug {
    /// The server's persistent uuid (`GET /` and replication ids).
    fn server_uuid(&self) -> &str;
    /// Creates a database and opens it; `DbExists` when the name is taken.
    fn create_db(&self, name: &str, setup: &NewDb<'_>) -> Result<Box<dyn DbBackend>, StoreError>;
    /// Opens an existing database; `DbNotFound` when there is none.
    fn open_db(&self, name: &str) -> Result<Box<dyn DbBackend>, StoreError>;
    /// Whether a database of this name exists.
    fn exists(&self, name: &str) -> Result<bool, StoreError>;
    /// Deletes a database (its handle is closed already); `DbNotFound`
    /// when there is none.
    fn delete_db(&self, name: &str) -> Result<(), StoreError>;
    /// Every database's name, sorted.
    fn list_dbs(&self) -> Result<Vec<String>, StoreError>;
    /// Bytes the database takes in storage, cheaply (`_dbs_info`-style listings).
    fn db_size(&self, name: &str) -> u64;
    /// Whether the databases can be read now (`GET /_up`); the data folder
    /// is probed besides.
    fn check_read(&self) -> Result<(), StoreError>;
    /// Whether the databases can be written now (`GET /_up`).
    fn check_write(&self) -> Result<(), StoreError>;
}

/// How a new database starts.
#[derive(Debug, Clone, Copy)]
pub struct NewDb<'a> {
    pub partitioned: bool,
    /// The shard count asked for (`?q=`): kept and reported, since a
    /// database here is one shard whatever it says.
    pub q: u32,
    /// The `_security` object it starts with, as JSON text.
    pub security: &'a str,
    /// `?access=true`: each document is for the users its `_access` names.
    pub access: bool,
}

/// One open database in a backend.
pub trait DbBackend: Send + Sync {
    /// A session for the database's writer thread (one at a time).
    fn open_writer(&self) -> Result<Box<dyn WriteSession>, StoreError>;
    /// Runs `op` on one consistent snapshot of the database.
    fn read(
        &self,
        op: &mut dyn FnMut(&dyn ReadRows) -> Result<(), StoreError>,
    ) -> Result<(), StoreError>;
    /// Where the database's view and Mango indexes are kept (files of this
    /// node: indexes are derived data, rebuilt from the changes feed).
    fn index_dir(&self) -> std::path::PathBuf;
    /// How much compaction would give back; `kept_extra_revs` is what the
    /// last compaction had to keep.
    fn garbage(&self, kept_extra_revs: u64) -> Result<Garbage, StoreError>;
    /// Makes every committed write durable against power loss too.
    fn sync(&self) -> Result<(), StoreError>;
    /// After compaction: gives back the disk a write-ahead log still holds
    /// (compaction's own writes pass through it). Best effort, and never a
    /// long stop of writes; a backend without such a log has nothing to do.
    fn give_back_log(&self) -> Result<(), StoreError> {
        Ok(())
    }
    /// After compaction: how full the pages in use are (live bytes over
    /// page bytes), measured by reading them (without stopping writes), so
    /// `sizes.active` counts live data rather than whole pages. `None`
    /// where the backend's sizes need no such measure.
    fn measure_page_fill(&self) -> Result<Option<f64>, StoreError> {
        Ok(None)
    }
    /// Drops pooled connections: the database is being closed or deleted.
    fn close(&self);
    /// Where other processes write the same database (other nodes on one
    /// PostgreSQL), calls `listener` for each change they commit, so that
    /// changes feeds wake and caches are dropped. A backend only this
    /// process writes has nothing to report.
    fn listen(&self, listener: ChangeListener) {
        let _ = listener;
    }
}

/// What another process changed in a database.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RemoteChange {
    /// A commit moved the update sequence to `update_seq`; it changed a
    /// design document when `design_changed`.
    Committed {
        update_seq: u64,
        design_changed: bool,
    },
    /// The `_security` object was replaced.
    Security,
}

/// Called with each [`RemoteChange`] of one database.
pub type ChangeListener = std::sync::Arc<dyn Fn(RemoteChange) + Send + Sync>;

/// The writer thread's connection to a database.
pub trait WriteSession: Send {
    /// The counters as stored.
    fn load_state(&mut self) -> Result<DbState, StoreError>;
    /// Runs `group` in one transaction: committed when it returns
    /// `Ok(true)`, rolled back when it returns `Ok(false)` or an error.
    fn transaction(
        &mut self,
        group: &mut dyn FnMut(&dyn WriteTx) -> Result<bool, StoreError>,
    ) -> Result<bool, StoreError>;
}

/// One open write transaction.
pub trait WriteTx {
    fn rows(&self) -> &dyn WriteRows;
    /// The counters at the start of this transaction when other processes
    /// write the same database (the writer's own copy may be stale); `None`
    /// when this writer is the only one.
    fn shared_state(&self) -> Result<Option<DbState>, StoreError>;
    /// Runs one write in a savepoint: kept when `job` returns true, rolled
    /// back alone otherwise. Returns whether it was kept.
    fn savepoint(&self, job: &mut dyn FnMut(&dyn WriteRows) -> bool) -> Result<bool, StoreError>;
    /// Writes the counters back.
    fn save_state(&self, state: &DbState) -> Result<(), StoreError>;
}

/// The metadata every write group reads (the revision limit with the
/// counters, then the commit-date bins when it commits): a backend that
/// pays a round trip per statement can read them with the group's lock and
/// answer [`WriteRows::meta`] for them from what it read.
pub const WRITE_GROUP_META: &[&str] = &["revs_limit", TIME_SEQ_META];

/// The metadata key of a database's commit-date bins (`time_seq`).
pub const TIME_SEQ_META: &str = "time_seq";

/// The metadata key saying a database's access index is whole (see
/// `store::doc_access`): set when the database is created, and after a
/// rebuild.
pub const ACCESS_INDEX_META: &str = "access_index";

/// The metadata a new database starts with: a uuid, its creation time
/// (fixed for its life: CouchDB's replicator restarts from scratch when it
/// changes), `revs_limit`, `_security`, and whether it is partitioned.
pub fn new_db_meta(setup: &NewDb<'_>) -> Vec<(&'static str, String)> {
    let micros = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros())
        .unwrap_or(0);
    let mut meta = vec![
        ("uuid", uuid::Uuid::new_v4().simple().to_string()),
        ("instance_start_time", micros.to_string()),
        ("revs_limit", revtree::DEFAULT_REVS_LIMIT.to_string()),
        ("security", setup.security.to_string()),
    ];
    if setup.partitioned {
        meta.push(("partitioned", "true".to_string()));
    }
    if setup.access {
        meta.push(("access", "true".to_string()));
        meta.push((ACCESS_INDEX_META, "1".to_string()));
    }
    if setup.q != 1 {
        meta.push(("q", setup.q.to_string()));
    }
    meta
}

/// A document's tree as stored ([`RevTree::encode`]), read back; a tree
/// that does not decode is a corrupt document, never a panic.
pub fn decode_tree(id: &str, bytes: &[u8]) -> Result<RevTree, StoreError> {
    RevTree::decode(bytes).map_err(|e| StoreError::Corrupt {
        db: String::new(),
        detail: format!("document {id}: {e}"),
    })
}

//! The seam between CouchDB's rules and row storage.
//!
//! The rules (revision-tree merge, winner choice, stemming, attachment
//! stubs, document assembly, `open_revs` targets, the changes and
//! `_all_docs` pages) are written once, in `update`, `read` and `feeds`,
//! over these traits. A backend stores and finds rows: documents with their
//! encoded trees, revision bodies, attachment bytes by digest. The SQLite
//! backend (`crate::sqlite`) implements them on a connection; the writer
//! thread hands the rules its transaction as [`WriteRows`], readers hand
//! them their connection as [`ReadRows`].
//!
//! Row handles (`DocRow::key`, `RevisionRef::row`) are the backend's own
//! numbers: the rules only pass them back.

use std::ops::Bound;

use revtree::{RevId, RevTree};

use crate::StoreError;
use crate::attachments::Attachments;
use crate::body::StoredBody;

/// A document's row as the writer finds it before an edit.
pub(crate) struct StoredDoc {
    /// The backend's handle of the document's rows.
    pub(crate) key: i64,
    pub(crate) tree: RevTree,
    /// Body length of the winner when the document is live (for `sizes.external`).
    pub(crate) live_body_len: Option<i64>,
}

/// A revision body as stored: where it is, and its length for `sizes.external`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RevisionRef {
    /// The backend's handle of the body's row (0: none).
    pub(crate) row: i64,
    pub(crate) body_len: i64,
}

/// What an update writes to a document's row.
pub(crate) struct DocUpdate<'a> {
    pub(crate) key: i64,
    pub(crate) id: &'a str,
    pub(crate) seq: u64,
    pub(crate) winner: &'a RevId,
    pub(crate) deleted: bool,
    /// The winner's body row (0 when its body is not kept).
    pub(crate) winner_row: i64,
    pub(crate) tree: &'a RevTree,
    /// The document had no row before this update.
    pub(crate) is_new: bool,
}

/// Row storage inside a write transaction: what the edit rules read and
/// write. Every call sees the transaction's own earlier writes.
pub(crate) trait WriteRows {
    /// The document's row, or `None` when it was never written.
    fn load_doc(&self, id: &str) -> Result<Option<StoredDoc>, StoreError>;
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
}

/// One purge request as recorded: its purge sequence, a uuid, the
/// document id and the revisions asked for (JSON text).
pub(crate) struct PurgeInfoRow {
    pub purge_seq: u64,
    pub uuid: String,
    pub id: String,
    pub revs: String,
}

/// A local document as stored: no tree, a revision number and a body.
pub(crate) struct LocalDocRow {
    pub id: String,
    pub rev: u64,
    pub body: String,
}

/// A document row as readers need it.
pub(crate) struct DocRow {
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
pub(crate) struct IdPage<'a> {
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
pub(crate) struct DbCounts {
    pub doc_count: u64,
    pub doc_del_count: u64,
    pub update_seq: u64,
    pub purge_seq: u64,
    /// Bytes of the live documents' bodies as JSON (`sizes.external`).
    pub external_size: i64,
}

/// What the database takes in storage (`sizes.file`, `sizes.active`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct StorageSizes {
    pub file: u64,
    pub active: u64,
}

/// Takes the rows of a scan one by one: a page is answered as it is read,
/// never held as rows and answer both.
pub(crate) type RowVisitor<'a> = dyn FnMut(String, DocRow) -> Result<(), StoreError> + 'a;

/// Row storage as readers see it: one consistent snapshot per call.
pub(crate) trait ReadRows {
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
}

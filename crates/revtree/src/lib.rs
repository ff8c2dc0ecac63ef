//! CouchDB's MVCC revision model: revision ids, revision trees and the
//! algorithms on them (merge, interactive edits, winner, conflicts,
//! `revs_info`, `revs_diff`, stemming, purging), new revision ids as CouchDB
//! computes them, and the binary encoding the store persists.
//!
//! This crate does no I/O and knows nothing of storage or HTTP; the store and
//! the replicator build on it. CouchDB's `couch_key_tree` and PouchDB's
//! `pouchdb-merge` are the reference behaviour.

mod encoding;
mod erlang_term;
mod path;
mod rev_hash;
mod rev_id;
mod tree;

pub use encoding::{DecodeError, FORMAT_V1};
pub use path::{PathError, RevPath};
pub use rev_hash::{AttachmentDigest, new_rev_hash, write_canonical_json};
pub use rev_id::{MAX_POS, ParseRevError, RevHash, RevId};
pub use tree::{EditError, Leaf, LeafState, MergeOutcome, Purged, RevStatus, RevTree, RevsDiff};

/// CouchDB's default `_revs_limit`: how many generations of history a
/// document keeps before stemming.
pub const DEFAULT_REVS_LIMIT: u32 = 1000;

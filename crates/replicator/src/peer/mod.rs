//! The peers of a replication, by role: a database of this server
//! ([`local`]: the store, through the shared gates of the `access` crate)
//! or a remote one ([`http`]: the only place that speaks HTTP). Both
//! answer the same protocol calls; [`Endpoint`] is the one place that
//! chooses between them, so the job and the transfer of attachments never
//! ask which kind of peer they talk to.

mod attachments;
mod error;
mod fetched;
pub mod http;
pub mod local;
pub(crate) mod retry;

use std::time::Duration;

use revtree::RevId;
use serde::Serialize;
use serde_json::{Map, Value};
use store::Store;
use wire::rows::{DbInfo, RevsDiffRequest};

pub(crate) use self::attachments::Prepared;
pub use self::error::EndpointError;
pub use self::http::{HttpOptions, HttpPeer};
pub use self::local::LocalPeer;
use crate::spec::{ChangesFilter, Peer, RemoteDb};

/// One change of the source's feed, as the replicator needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    /// Opaque: compared only by arrival order.
    pub seq: Value,
    pub id: String,
    /// Every leaf revision (`style=all_docs`), the winner first.
    pub revs: Vec<RevId>,
}

/// A page of changes.
#[derive(Debug, Clone, PartialEq)]
pub struct ChangesBatch {
    pub changes: Vec<Change>,
    pub last_seq: Value,
    /// Changes left after this page, when the source said (or was asked).
    pub pending: Option<u64>,
}

/// What a target lacks of one document.
#[derive(Debug, Clone, PartialEq)]
pub struct Missing {
    pub id: String,
    pub revs: Vec<RevId>,
    pub possible_ancestors: Vec<RevId>,
}

/// The outcome of writing one replicated document.
#[derive(Debug, Clone, PartialEq)]
pub struct WriteFailure {
    pub id: String,
    pub error: String,
    pub reason: String,
}

/// A database a replication reads from or writes to. Each method only
/// forwards to the peer's own: this is the single place that tells the
/// kinds of peer apart.
#[derive(Debug, Clone)]
pub enum Endpoint {
    Local(LocalPeer),
    Http(HttpPeer),
}

/// Calls the same method of whichever peer this is.
macro_rules! forward {
    ($self:ident, $peer:ident => $call:expr) => {
        match $self {
            Endpoint::Local($peer) => $call,
            Endpoint::Http($peer) => $call,
        }
    };
}

impl Endpoint {
    /// An endpoint for a peer; a remote one is called with `options`, a
    /// local one with the rights of `user` and its `validators`.
    pub fn new(
        peer: &Peer,
        store: &Store,
        options: HttpOptions,
        user: Option<&auth::UserCtx>,
        validators: Option<&design_functions::Validators>,
    ) -> Result<Endpoint, EndpointError> {
        match peer {
            Peer::Local(name) => Ok(Endpoint::Local(LocalPeer::new(
                store, name, user, validators,
            ))),
            Peer::Remote(db) => Endpoint::remote(db, options),
        }
    }

    /// An endpoint for a remote database, called with `options`.
    pub fn remote(db: &RemoteDb, options: HttpOptions) -> Result<Endpoint, EndpointError> {
        HttpPeer::new(db, options).map(Endpoint::Http)
    }

    /// The endpoint as it may be shown: never with credentials.
    pub fn display(&self) -> String {
        forward!(self, peer => peer.display())
    }

    /// Whether a question to this peer costs no request (a database of
    /// this server): the job may then ask it as often as it likes.
    pub fn answers_without_requests(&self) -> bool {
        forward!(self, peer => peer.answers_without_requests())
    }

    /// Whether attachments stored gzip-encoded may go to this peer as they
    /// are (with `encoding` in the document): a local database, CouchDB
    /// and Recliner take them; other servers (PouchDB Server) get their
    /// content.
    pub async fn takes_encoded_attachments(&self) -> bool {
        forward!(self, peer => peer.takes_encoded_attachments().await)
    }

    /// `GET /db`: the update sequence and `instance_start_time`.
    pub async fn info(&self) -> Result<DbInfo, EndpointError> {
        forward!(self, peer => peer.info().await)
    }

    /// Creates the database (an existing one is fine). A remote peer gets
    /// `params` (`create_target_params`) as the creation's query.
    pub async fn create(&self, params: &Map<String, Value>) -> Result<(), EndpointError> {
        forward!(self, peer => peer.create(params).await)
    }

    /// A local (checkpoint) document, `None` when absent.
    pub async fn get_local(&self, id: &str) -> Result<Option<Value>, EndpointError> {
        forward!(self, peer => peer.get_local(id).await)
    }

    /// A document (its winner), `None` when there is none.
    pub async fn get_doc(&self, id: &str) -> Result<Option<Value>, EndpointError> {
        forward!(self, peer => peer.get_doc(id).await)
    }

    /// Writes a local (checkpoint) document; returns its new `_rev`.
    pub async fn put_local(&self, id: &str, doc: &impl Serialize) -> Result<String, EndpointError> {
        forward!(self, peer => peer.put_local(id, doc).await)
    }

    /// One page of changes after `since`, every leaf of each document;
    /// `count_pending` asks a local source to count the changes left (a
    /// remote one says when it does).
    pub async fn changes(
        &self,
        since: &Value,
        limit: u64,
        filter: &ChangesFilter,
        count_pending: bool,
    ) -> Result<ChangesBatch, EndpointError> {
        forward!(self, peer => peer.changes(since, limit, filter, count_pending).await)
    }

    /// Waits until the source may have changes after `since`, at most
    /// `timeout`: a local database's update channel, or a remote longpoll
    /// feed. Returns early on `stop`.
    pub async fn wait_for_changes(
        &self,
        since: &Value,
        timeout: Duration,
        stop: &mut tokio::sync::watch::Receiver<bool>,
    ) -> Result<(), EndpointError> {
        forward!(self, peer => peer.wait_for_changes(since, timeout, stop).await)
    }

    /// Whether the source has changes after `since`: a local database
    /// answers at once; a remote one is asked with a longpoll feed that
    /// waits up to `timeout` for the first change.
    pub async fn changes_after(
        &self,
        since: &Value,
        timeout: Duration,
    ) -> Result<bool, EndpointError> {
        forward!(self, peer => peer.changes_after(since, timeout).await)
    }

    /// `_revs_diff`: which of these revisions the database lacks.
    pub async fn revs_diff(&self, asked: RevsDiffRequest) -> Result<Vec<Missing>, EndpointError> {
        forward!(self, peer => peer.revs_diff(asked).await)
    }

    /// The missing revisions of one document with their history and
    /// attachment stubs (bytes travel separately: see `transfer`).
    pub async fn fetch(&self, missing: &Missing) -> Result<Vec<Value>, EndpointError> {
        forward!(self, peer => peer.fetch(missing).await)
    }

    /// The missing revisions of many documents: a local database reads
    /// them at once; a remote one with one `_bulk_get` request when it
    /// supports it and `use_bulk_get` allows, else one request per document.
    pub async fn fetch_many(
        &self,
        missing: &[Missing],
        use_bulk_get: bool,
    ) -> Result<Vec<Value>, EndpointError> {
        forward!(self, peer => peer.fetch_many(missing, use_bulk_get).await)
    }

    /// Writes replicated revisions (`new_edits=false`); returns the
    /// documents the target refused.
    pub async fn write(&self, docs: Vec<Value>) -> Result<Vec<WriteFailure>, EndpointError> {
        forward!(self, peer => peer.write(docs).await)
    }

    /// `_ensure_full_commit`: everything written is durable.
    pub async fn ensure_full_commit(&self) -> Result<(), EndpointError> {
        forward!(self, peer => peer.ensure_full_commit().await)
    }

    /// Reads a revision and readies its attachments to be streamed: those
    /// named `names` (a local source), or those newer than the target's
    /// `possible_ancestors` (a remote one, asked with `atts_since`).
    pub(crate) async fn read_with_attachments(
        &self,
        doc: Value,
        names: &[String],
        possible_ancestors: &[RevId],
    ) -> Result<Prepared, EndpointError> {
        forward!(self, peer => peer.read_with_attachments(doc, names, possible_ancestors).await)
    }

    /// Writes a revision read with [`Endpoint::read_with_attachments`]
    /// (`new_edits=false`), its attachments streamed from their source; a
    /// refusal by the target is a write failure, not an error.
    pub(crate) async fn write_with_attachments(
        &self,
        prepared: Prepared,
    ) -> Result<Option<WriteFailure>, EndpointError> {
        forward!(self, peer => peer.write_with_attachments(prepared).await)
    }
}

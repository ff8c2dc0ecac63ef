//! Fetched revisions gathered document by document, whatever peer sent them.

use revtree::RevId;
use serde_json::Value;
use wire::doc::DocMeta;
use wire::rows::FetchedRev;

use super::EndpointError;

/// Fetched revisions, gathered document by document (a document's are
/// adjacent in every answer, in the order asked), each document's repeated
/// leaves dropped.
pub(crate) struct Fetched {
    /// The peer as it may be shown, for logs and errors.
    peer: String,
    pub(crate) docs: Vec<Value>,
    /// The document being gathered, and where its revisions start.
    id: Option<String>,
    start: usize,
}

impl Fetched {
    pub(crate) fn new(peer: String, capacity: usize) -> Fetched {
        Fetched {
            peer,
            docs: Vec::with_capacity(capacity),
            id: None,
            start: 0,
        }
    }

    /// The next revisions are `id`'s.
    pub(crate) fn document(&mut self, id: String) -> Result<(), EndpointError> {
        if self.id.as_deref() != Some(id.as_str()) {
            self.dedup()?;
            self.start = self.docs.len();
            self.id = Some(id);
        }
        Ok(())
    }

    /// Keeps a fetched revision, or says why there is none.
    pub(crate) fn take(&mut self, fetched: FetchedRev) {
        match fetched {
            FetchedRev::Ok(doc) => self.docs.push(doc),
            FetchedRev::Missing(rev) => self.unreadable(&rev.to_string(), "not_found", "missing"),
            FetchedRev::Error(e) => {
                let rev = e.rev.map(|r| r.to_string()).unwrap_or_default();
                self.unreadable(&rev, &e.error, &e.reason);
            }
        }
    }

    /// A revision the source listed but could not read (compacted or purged
    /// since): there is nothing to copy, as for CouchDB's replicator, but
    /// it is said.
    pub(crate) fn unreadable(&self, rev: &str, error: &str, reason: &str) {
        let id = self.id.as_deref().unwrap_or_default();
        tracing::warn!(peer = %self.peer, id, rev, error, reason, "the source could not read a revision it listed");
    }

    /// Drops the current document's repeated revisions: with `latest=true`
    /// two asked revisions may lead to the same leaf. Only a document with
    /// several fetched revisions has its metadata read.
    fn dedup(&mut self) -> Result<(), EndpointError> {
        let from = self.start;
        if self.docs.len() <= from + 1 {
            return Ok(());
        }
        let mut seen: Vec<RevId> = Vec::with_capacity(self.docs.len() - from);
        let mut keep = vec![true; from];
        for doc in &self.docs[from..] {
            let rev = DocMeta::of(doc)
                .map_err(|e| EndpointError::Protocol {
                    url: self.peer.clone(),
                    detail: format!("fetched document: {e}"),
                })?
                .rev;
            keep.push(!seen.contains(&rev));
            seen.push(rev);
        }
        let mut keep = keep.into_iter();
        self.docs.retain(|_| keep.next().unwrap_or(true));
        Ok(())
    }

    pub(crate) fn finish(mut self) -> Result<Vec<Value>, EndpointError> {
        self.dedup()?;
        Ok(self.docs)
    }
}

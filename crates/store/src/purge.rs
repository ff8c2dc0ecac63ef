//! Purging (`POST /db/_purge`): revisions taken out of documents as if
//! they had never been written, with CouchDB 3.5's bookkeeping.
//!
//! A purge request runs as one write on the writer thread (one
//! transaction). For each document it removes the named leaves and the
//! branches only they used (`RevTree::purge_leaves`) with their bodies;
//! attachment bytes only those revisions used become garbage for
//! compaction. A document left with no leaf is deleted outright: it is gone
//! from every read, the changes feed included. One that keeps leaves moves
//! to the end of the changes feed, the update sequence advancing once per
//! remaining leaf as CouchDB relabels each of them; a request that moved no
//! document still advances it by one (CouchDB does, so indexers notice).
//! Every document of the request, purged or not, gets a purge info at the
//! next purge sequence; infos older than `purged_infos_limit` are dropped.

use revtree::{RevId, RevTree};

use crate::backend::{PurgeInfoRow, ReadRows, WriteRows};
use crate::writer::WriteCtx;
use crate::{Database, StoreError};

/// CouchDB's default `purged_infos_limit`: purge infos kept per database.
pub const DEFAULT_PURGED_INFOS_LIMIT: u64 = 1000;

/// The `db_meta` key of `purged_infos_limit`.
const LIMIT_KEY: &str = "purged_infos_limit";

/// One document of a purge request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PurgeRequest {
    pub id: String,
    /// The revisions to purge; only the document's leaves among them are.
    pub revs: Vec<RevId>,
    /// Every revision the request named, as its purge info records them
    /// (CouchDB records even revisions no tree can hold, such as `0-x`).
    pub recorded: Vec<String>,
}

/// What a purge did to one document, in request order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PurgeResult {
    pub id: String,
    /// The leaves purged (position, then hash order); empty when none of
    /// the revisions was a leaf, or the document does not exist.
    pub purged: Vec<RevId>,
}

/// One purge info: a document of a purge request, at its purge sequence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PurgeInfo {
    pub purge_seq: u64,
    pub uuid: String,
    pub id: String,
    pub revs: Vec<String>,
}

impl Database {
    /// Purges the given revisions, all documents in one transaction. An
    /// empty request changes nothing (no purge sequence is spent).
    pub async fn purge(&self, requests: Vec<PurgeRequest>) -> Result<Vec<PurgeResult>, StoreError> {
        if requests.is_empty() {
            return Ok(Vec::new());
        }
        if self.is_partitioned() {
            check_partitioned_ids(&requests)?;
        }
        self.write(requests.len(), move |ctx| purge_in_tx(ctx, requests))
            .await
    }

    /// How many purge infos the database keeps (`_purged_infos_limit`).
    pub async fn purged_infos_limit(&self) -> Result<u64, StoreError> {
        self.read(|conn| Ok(purge_limit(ReadRows::meta(conn, LIMIT_KEY)?)))
            .await
    }

    /// Sets `_purged_infos_limit` (at least 1); older infos go at once.
    pub async fn set_purged_infos_limit(&self, limit: u64) -> Result<(), StoreError> {
        if limit == 0 {
            return Err(StoreError::bad_request(
                "`purged_infos_limit` must be positive integer",
            ));
        }
        self.write(1, move |ctx| {
            ctx.rows.set_meta(LIMIT_KEY, &limit.to_string())?;
            trim_infos(ctx.rows, ctx.state.purge_seq, limit)
        })
        .await
    }

    /// The purge infos kept, oldest first.
    pub async fn purge_infos(&self) -> Result<Vec<PurgeInfo>, StoreError> {
        self.read(|conn| {
            let rows: &dyn ReadRows = conn;
            let mut infos = Vec::new();
            for row in rows.purge_infos()? {
                let revs = serde_json::from_str(&row.revs).map_err(|e| StoreError::Corrupt {
                    db: String::new(),
                    detail: format!("purge info {}: {e}", row.purge_seq),
                })?;
                infos.push(PurgeInfo {
                    purge_seq: row.purge_seq,
                    uuid: row.uuid,
                    id: row.id,
                    revs,
                });
            }
            Ok(infos)
        })
        .await
    }
}

/// The purges after a purge sequence, as an index needs them to drop the
/// rows of purged documents (which leave no trace in the changes feed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PurgedSince {
    /// The database's purge sequence.
    pub purge_seq: u64,
    /// Documents purged since then that no longer exist. Those that still
    /// do moved to the end of the changes feed when purged.
    pub gone: Vec<String>,
    /// False when infos since then were dropped (`purged_infos_limit`):
    /// what was purged is no longer known.
    pub complete: bool,
}

impl Database {
    /// What was purged after purge sequence `since`, read at one moment.
    pub async fn purged_since(&self, since: u64) -> Result<PurgedSince, StoreError> {
        self.read(move |conn| {
            let rows: &dyn ReadRows = conn;
            let purge_seq = rows.counts()?.purge_seq;
            if purge_seq <= since {
                return Ok(PurgedSince {
                    purge_seq,
                    gone: Vec::new(),
                    complete: true,
                });
            }
            let newer: Vec<PurgeInfoRow> = rows
                .purge_infos()?
                .into_iter()
                .filter(|info| info.purge_seq > since)
                .collect();
            let complete = newer.first().is_some_and(|i| i.purge_seq == since + 1);
            let mut gone = Vec::new();
            let mut seen = std::collections::HashSet::new();
            for info in newer {
                if seen.insert(info.id.clone()) && rows.doc_row(&info.id)?.is_none() {
                    gone.push(info.id);
                }
            }
            Ok(PurgedSince {
                purge_seq,
                gone,
                complete,
            })
        })
        .await
    }
}

/// In a partitioned database, CouchDB purges only `partition:id` ids, or
/// ids starting with `_` (a looser rule than a write's: `:x` passes).
fn check_partitioned_ids(requests: &[PurgeRequest]) -> Result<(), StoreError> {
    if requests
        .iter()
        .any(|r| !r.id.starts_with('_') && !r.id.contains(':'))
    {
        return Err(StoreError::Invalid {
            error: crate::ErrorKind::IllegalDocId,
            reason: "Doc id must be of form partition:id".into(),
        });
    }
    Ok(())
}

/// `_purged_infos_limit` as the metadata keeps it.
fn purge_limit(meta: Option<String>) -> u64 {
    meta.and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_PURGED_INFOS_LIMIT)
}

/// Keeps the newest `limit` purge infos.
fn trim_infos(rows: &dyn WriteRows, purge_seq: u64, limit: u64) -> Result<(), StoreError> {
    let oldest_dropped = purge_seq.saturating_sub(limit);
    if oldest_dropped > 0 {
        rows.drop_purge_infos_through(oldest_dropped)?;
    }
    Ok(())
}

fn purge_in_tx(
    ctx: &mut WriteCtx<'_>,
    requests: Vec<PurgeRequest>,
) -> Result<Vec<PurgeResult>, StoreError> {
    let update_seq_before = ctx.state.update_seq;
    let mut results = Vec::with_capacity(requests.len());
    for request in requests {
        let purged = purge_doc(ctx, &request.id, &request.revs)?;
        ctx.state.purge_seq += 1;
        let revs = ejson::to_string_of(&request.recorded)
            .map_err(|e| StoreError::CommitFailed(format!("purge info: {e}")))?;
        ctx.rows.record_purge(&PurgeInfoRow {
            purge_seq: ctx.state.purge_seq,
            uuid: uuid::Uuid::new_v4().simple().to_string(),
            id: request.id.clone(),
            revs,
        })?;
        results.push(PurgeResult {
            id: request.id,
            purged,
        });
    }
    if ctx.state.update_seq == update_seq_before {
        ctx.state.update_seq += 1;
    }
    let limit = purge_limit(ctx.rows.meta(LIMIT_KEY)?);
    trim_infos(ctx.rows, ctx.state.purge_seq, limit)?;
    Ok(results)
}

/// Purges the leaves of one document among `revs`; returns those purged.
fn purge_doc(ctx: &mut WriteCtx<'_>, id: &str, revs: &[RevId]) -> Result<Vec<RevId>, StoreError> {
    let Some(stored) = ctx.rows.load_doc(id)? else {
        return Ok(Vec::new());
    };
    let key = stored.key;
    let previous = stored.tree.clone();
    let mut tree: RevTree = stored.tree;
    let outcome = tree.purge_leaves(revs);
    if outcome.purged.is_empty() {
        return Ok(Vec::new());
    }
    let state = &mut *ctx.state;
    if id.starts_with("_design/") {
        state.design_changed = true;
    }
    match stored.live_body_len {
        Some(len) => {
            state.doc_count -= 1;
            state.external_size -= len;
        }
        None => state.doc_del_count -= 1,
    }
    if tree.winner().is_none() {
        // Nothing left: the document never existed.
        ctx.rows.delete_doc(key)?;
        return Ok(outcome.purged);
    }
    for rev in &outcome.removed {
        ctx.rows.drop_revision(key, rev)?;
    }
    // CouchDB gives each remaining leaf a new sequence; the document sits
    // at the last of them.
    let advance = tree.leaves().len() as u64;
    crate::update::record_winner(ctx, key, id, &tree, None, advance, Some(&previous))?;
    Ok(outcome.purged)
}

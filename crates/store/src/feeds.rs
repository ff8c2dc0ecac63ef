//! The changes feed and `_all_docs`, read one page at a time so that no
//! caller ever holds a whole feed in memory: the HTTP layer streams pages.

use std::ops::Bound;

use crate::backend::{AccessChange, AccessRow, DocRow, IdPage, ReadRows};
use crate::doc_access::{Visibility, visibility_in};
use crate::read::{self, DocJson, GetOptions};
use crate::{Database, StoreError};
use revtree::RevId;

/// A changes-feed query for one page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangesQuery {
    /// Rows after this sequence (before it, when descending and non-zero).
    pub since: u64,
    pub limit: usize,
    pub descending: bool,
    /// `style=all_docs`: every leaf in `changes`, not only the winner.
    pub all_leaves: bool,
    pub include_docs: bool,
    /// With `include_docs`: add `_conflicts`.
    pub conflicts: bool,
    /// With `include_docs`: add `_deleted_conflicts` (views see them).
    pub deleted_conflicts: bool,
    /// With `include_docs`: add `_local_seq` (a view's `options.local_seq`).
    pub local_seq: bool,
    /// With `include_docs`: attachment bytes inline.
    pub attachments: bool,
    /// With `include_docs`: how attachments are stored (`encoding`).
    pub att_encoding_info: bool,
    /// Only these documents (`filter=_doc_ids`).
    pub doc_ids: Option<Vec<String>>,
    /// Count the changes left after this page for `pending` (a scan of the
    /// sequence index): ask on the page that ends a response, not on every one.
    pub count_pending: bool,
}

impl Default for ChangesQuery {
    fn default() -> Self {
        ChangesQuery {
            since: 0,
            limit: usize::MAX,
            descending: false,
            all_leaves: false,
            include_docs: false,
            conflicts: false,
            deleted_conflicts: false,
            local_seq: false,
            attachments: false,
            att_encoding_info: false,
            doc_ids: None,
            count_pending: true,
        }
    }
}

/// One row of the changes feed: a document at the sequence of its latest update.
#[derive(Debug)]
pub struct ChangeRow {
    pub seq: u64,
    pub id: String,
    /// The winner, or every leaf (winner first) with `style=all_docs`.
    pub changes: Vec<RevId>,
    pub deleted: bool,
    pub doc: Option<DocJson>,
    /// In a user's feed of a database with per-document access: the user
    /// lost this document, and `changes` are its revocation tombstones
    /// (see [`crate::doc_access`]).
    pub removed: bool,
}

/// One page of the changes feed.
#[derive(Debug)]
pub struct FeedPage {
    pub rows: Vec<ChangeRow>,
    /// Where the next page starts; the database's update sequence once the
    /// feed is exhausted (so filtered feeds still advance).
    pub last_seq: u64,
    /// Changes after `last_seq` not yet returned (0 when not counted).
    pub pending: u64,
}

fn change_row(
    rows: &dyn ReadRows,
    id: String,
    row: &DocRow,
    q: &ChangesQuery,
) -> Result<ChangeRow, StoreError> {
    let leaves = row.tree.leaves();
    let winner = leaves.first().cloned().ok_or_else(|| StoreError::Corrupt {
        db: String::new(),
        detail: format!("document {id} has an empty revision tree"),
    })?;
    let changes = if q.all_leaves {
        leaves.into_iter().map(|l| l.rev).collect()
    } else {
        vec![winner.rev.clone()]
    };
    let doc = if q.include_docs {
        let opts = GetOptions {
            conflicts: q.conflicts,
            deleted_conflicts: q.deleted_conflicts,
            local_seq: q.local_seq,
            attachments: q.attachments,
            att_encoding_info: q.att_encoding_info,
            ..Default::default()
        };
        read::doc_at(rows, &id, row, &winner.rev, &opts)?
    } else {
        None
    };
    Ok(ChangeRow {
        seq: row.seq,
        id,
        changes,
        deleted: winner.deleted,
        doc,
        removed: false,
    })
}

/// A user's row for a document they lost: its revocation tombstones (the
/// first leaf's, or all with `style=all_docs`), deleted.
fn removed_row(
    seq: u64,
    id: String,
    leaves: &[RevId],
    q: &ChangesQuery,
) -> Result<ChangeRow, StoreError> {
    let shown = if q.all_leaves {
        leaves
    } else {
        &leaves[..leaves.len().min(1)]
    };
    let changes = shown
        .iter()
        .filter_map(|leaf| crate::doc_access::revocation_tombstone(&id, leaf))
        .collect();
    let doc = match (q.include_docs, leaves.first()) {
        (true, Some(leaf)) => Some(read::tombstone_doc(&id, leaf, false)?),
        _ => None,
    };
    Ok(ChangeRow {
        seq,
        id,
        changes,
        deleted: true,
        doc,
        removed: true,
    })
}

/// A user's change row from the access index.
fn access_change_row(
    store: &dyn ReadRows,
    change: AccessChange,
    q: &ChangesQuery,
) -> Result<ChangeRow, StoreError> {
    match &change.gone {
        None => change_row(store, change.id, &change.row, q),
        Some(gone) => {
            let leaves = crate::doc_access::parse_gone(gone);
            removed_row(change.seq, change.id, &leaves, q)
        }
    }
}

/// A user's row for one document asked for by id (`filter=_doc_ids`).
fn access_row_by_id(
    store: &dyn ReadRows,
    principals: &[String],
    id: &str,
    q: &ChangesQuery,
) -> Result<Option<ChangeRow>, StoreError> {
    let Some(row) = store.doc_row(id)? else {
        return Ok(None);
    };
    let rows = store.access_rows(row.key)?;
    let mine: Vec<&AccessRow> = rows
        .iter()
        .filter(|r| principals.contains(&r.principal))
        .collect();
    match Visibility::of(&rows, principals) {
        Visibility::Readable => change_row(store, id.to_string(), &row, q).map(Some),
        Visibility::Revoked(leaves) => {
            let seq = mine.iter().map(|r| r.seq).max().unwrap_or(row.seq);
            removed_row(seq, id.to_string(), &leaves, q).map(Some)
        }
        Visibility::Hidden => Ok(None),
    }
}

fn changes_in(
    store: &dyn ReadRows,
    q: &ChangesQuery,
    reader: Option<&[String]>,
) -> Result<FeedPage, StoreError> {
    let update_seq = store.counts()?.update_seq;
    let limit = q.limit.min(i64::MAX as usize);
    let mut rows = Vec::new();
    if let (Some(ids), Some(principals)) = (&q.doc_ids, reader) {
        let mut found: Vec<ChangeRow> = Vec::new();
        for id in ids {
            if found.iter().any(|r| &r.id == id) {
                continue;
            }
            if let Some(row) = access_row_by_id(store, principals, id, q)?
                && (q.descending || row.seq > q.since)
            {
                found.push(row);
            }
        }
        found.sort_by_key(|row| row.seq);
        if q.descending {
            found.reverse();
        }
        rows.extend(found.into_iter().take(limit));
    } else if let Some(ids) = &q.doc_ids {
        let mut found = Vec::new();
        for id in ids {
            if let Some(row) = store.doc_row(id)?
                && (q.descending || row.seq > q.since)
                && !found.iter().any(|(i, _): &(String, DocRow)| i == id)
            {
                found.push((id.clone(), row));
            }
        }
        found.sort_by_key(|(_, row)| row.seq);
        if q.descending {
            found.reverse();
        }
        for (id, row) in found.into_iter().take(limit) {
            rows.push(change_row(store, id, &row, q)?);
        }
    } else if let Some(principals) = reader {
        // A user's feed costs their changes, not the database's.
        store.access_changes(
            principals,
            q.since,
            q.descending,
            limit as u64,
            q.include_docs,
            &mut |change| {
                rows.push(access_change_row(store, change, q)?);
                Ok(())
            },
        )?;
    } else {
        store.changes(
            q.since,
            q.descending,
            limit as u64,
            q.include_docs,
            &mut |id, row| {
                rows.push(change_row(store, id, &row, q)?);
                Ok(())
            },
        )?;
    }
    let exhausted = rows.len() < limit;
    let last_seq = match (rows.last(), exhausted, q.descending) {
        (_, true, false) => update_seq.max(q.since),
        (Some(last), _, _) => last.seq,
        (None, _, _) => q.since,
    };
    let pending = if q.descending || exhausted || !q.count_pending {
        0
    } else if let Some(principals) = reader {
        store.access_count_changes_after(principals, last_seq)?
    } else {
        store.count_changes_after(last_seq)?
    };
    Ok(FeedPage {
        rows,
        last_seq,
        pending,
    })
}

/// An `_all_docs` query for one page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllDocsQuery {
    /// Bounds on the document id, in the direction of travel (with
    /// `descending`, `start` is the high end).
    pub start: Bound<String>,
    pub end: Bound<String>,
    pub descending: bool,
    pub limit: usize,
    pub skip: usize,
    pub include_docs: bool,
    /// With `include_docs`: add `_conflicts`.
    pub conflicts: bool,
    /// With `include_docs`: attachment bytes inline, as CouchDB gives them.
    pub attachments: bool,
    /// With `include_docs`: how attachments are stored (`encoding`).
    pub att_encoding_info: bool,
    /// Count the rows before the range for `offset` (a scan of the id index
    /// up to the start key): wanted for the first page, wasted on the rest.
    pub count_offset: bool,
}

impl Default for AllDocsQuery {
    fn default() -> Self {
        AllDocsQuery {
            start: Bound::Unbounded,
            end: Bound::Unbounded,
            descending: false,
            limit: usize::MAX,
            skip: 0,
            include_docs: false,
            conflicts: false,
            attachments: false,
            att_encoding_info: false,
            count_offset: true,
        }
    }
}

/// One row of `_all_docs`.
#[derive(Debug)]
pub struct AllDocsRow {
    pub id: String,
    pub rev: RevId,
    /// Only for rows asked for by key (`keys=[...]`): deleted documents show.
    pub deleted: bool,
    pub doc: Option<DocJson>,
}

/// One page of `_all_docs`.
#[derive(Debug)]
pub struct AllDocsPage {
    /// Live documents in the database.
    pub total_rows: u64,
    /// Live documents before the first row returned (when counted).
    pub offset: Option<u64>,
    pub rows: Vec<AllDocsRow>,
    pub update_seq: u64,
}

fn all_docs_in(
    store: &dyn ReadRows,
    q: &AllDocsQuery,
    reader: Option<&[String]>,
) -> Result<AllDocsPage, StoreError> {
    let mut counts = store.counts()?;
    let count_live = |lo: &Bound<String>, hi: &Bound<String>| match reader {
        Some(principals) => store.access_count_live(principals, lo, hi),
        None => store.count_live(lo, hi),
    };
    if reader.is_some() {
        // `total_rows` counts what the user may read.
        counts.doc_count = count_live(&Bound::Unbounded, &Bound::Unbounded)?;
    }
    let (lo, hi) = if q.descending {
        (&q.end, &q.start)
    } else {
        (&q.start, &q.end)
    };
    // Rows the client skips over, plus those before the range, make the offset.
    let before = match (q.count_offset, q.descending) {
        (false, _) => 0,
        (true, false) if *lo == Bound::Unbounded => 0,
        (true, false) => count_live(&Bound::Unbounded, &invert(lo))?,
        (true, true) if *hi == Bound::Unbounded => 0,
        (true, true) => count_live(&invert(hi), &Bound::Unbounded)?,
    };
    let page = q.id_page();
    let doc_options = q.doc_options();
    let mut rows = Vec::new();
    let mut each = |id, row: DocRow| {
        rows.push(all_docs_row(store, id, &row, &doc_options)?);
        Ok(())
    };
    match reader {
        Some(principals) => store.access_live_docs(principals, &page, &mut each)?,
        None => store.live_docs(&page, &mut each)?,
    }
    Ok(AllDocsPage {
        total_rows: counts.doc_count,
        // Rows skipped past the end count up to the end, as in CouchDB
        // (and a skip near 2^64 must not overflow).
        offset: q
            .count_offset
            .then_some(before.saturating_add(q.skip as u64).min(counts.doc_count)),
        rows,
        update_seq: counts.update_seq,
    })
}

/// The opposite side of a bound: the ids strictly outside it.
fn invert(bound: &Bound<String>) -> Bound<String> {
    match bound {
        Bound::Included(k) => Bound::Excluded(k.clone()),
        Bound::Excluded(k) => Bound::Included(k.clone()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

impl AllDocsQuery {
    /// The page of ids this query asks for, bounds in ascending order.
    pub(crate) fn id_page(&self) -> IdPage<'_> {
        let (lo, hi) = if self.descending {
            (&self.end, &self.start)
        } else {
            (&self.start, &self.end)
        };
        IdPage {
            lo,
            hi,
            descending: self.descending,
            skip: self.skip as u64,
            limit: self.limit as u64,
            with_bodies: self.include_docs,
        }
    }

    /// How each row's document is read; `None` without `include_docs`.
    pub fn doc_options(&self) -> Option<GetOptions> {
        self.include_docs.then(|| GetOptions {
            conflicts: self.conflicts,
            attachments: self.attachments,
            att_encoding_info: self.att_encoding_info,
            ..Default::default()
        })
    }
}

fn all_docs_row(
    rows: &dyn ReadRows,
    id: String,
    row: &DocRow,
    doc_options: &Option<GetOptions>,
) -> Result<AllDocsRow, StoreError> {
    let winner = read::winner_of(&id, row)?;
    let doc = match doc_options {
        Some(opts) if !winner.deleted => read::doc_at(rows, &id, row, &winner.rev, opts)?,
        _ => None,
    };
    Ok(AllDocsRow {
        id,
        rev: winner.rev,
        deleted: winner.deleted,
        doc,
    })
}

impl Database {
    /// One page of the changes feed.
    pub async fn changes(&self, query: ChangesQuery) -> Result<FeedPage, StoreError> {
        let reader = self.reader.clone();
        self.read(move |conn| changes_in(conn, &query, reader.as_deref()))
            .await
    }

    /// One page of `_all_docs` (live documents in id order).
    pub async fn all_docs(&self, query: AllDocsQuery) -> Result<AllDocsPage, StoreError> {
        let reader = self.reader.clone();
        self.read(move |conn| all_docs_in(conn, &query, reader.as_deref()))
            .await
    }

    /// `_all_docs` with `keys`: one row per key in order, `None` for ids the
    /// database never had; deleted documents show with `deleted: true`.
    pub async fn all_docs_keys(
        &self,
        keys: Vec<String>,
        doc_options: Option<GetOptions>,
    ) -> Result<Vec<(String, Option<AllDocsRow>)>, StoreError> {
        let reader = self.reader.clone();
        self.read(move |conn| {
            let mut out = Vec::with_capacity(keys.len());
            for key in keys {
                let found = match &reader {
                    None => ReadRows::doc_row(conn, &key)?,
                    // A document a user may not read is one that does not exist.
                    Some(principals) => match visibility_in(conn, &key, principals)? {
                        (Some(row), Visibility::Readable) => Some(row),
                        _ => None,
                    },
                };
                let row = match found {
                    Some(row) => Some(all_docs_row(conn, key.clone(), &row, &doc_options)?),
                    None => None,
                };
                out.push((key, row));
            }
            Ok(out)
        })
        .await
    }
}

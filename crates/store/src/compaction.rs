//! Compaction: drop what no reader can ask for any more — bodies of
//! revisions that are no longer leaves, attachment bytes no stored revision
//! refers to, abandoned uploads — and give the freed pages back.
//!
//! It runs as a series of small writes (a batch of documents each), so
//! ordinary writes interleave with it instead of waiting for the end.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::time::Duration;

use rusqlite::params;

use crate::attachments;
use crate::sqlite::decode_tree;
use crate::{Database, StoreError};

/// What [`Database::garbage`] estimates.
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

/// Documents examined per compaction write: keeps each one short.
const DOCS_PER_STEP: i64 = 500;

impl Database {
    /// Compacts the database; returns once done. A second call while one
    /// runs returns at once.
    pub async fn compact(&self) -> Result<(), StoreError> {
        self.compact_paced(Duration::ZERO).await
    }

    /// [`Database::compact`] with a pause between its steps, so that a
    /// compaction nobody asked for (the automatic one) takes a small share
    /// of the writer and the disk.
    pub async fn compact_paced(&self, pause: Duration) -> Result<(), StoreError> {
        if self.compaction_flag().swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        let result = self.compact_steps(pause).await;
        if let Ok(kept) = &result {
            self.kept_extra_revs().store(*kept, Ordering::Relaxed);
        }
        self.compaction_flag().store(false, Ordering::Release);
        result.map(drop)
    }

    /// How much of the file compaction would give back, estimated without
    /// reading the data: free pages, plus the share of revision bodies that
    /// are no longer leaves (revision rows beyond one per document, less
    /// those the last compaction kept), counted at the average body size.
    pub async fn garbage(&self) -> Result<Garbage, StoreError> {
        let kept = self.kept_extra_revs().load(Ordering::Relaxed);
        self.read_sqlite(move |conn| {
            let pragma = |name: &str| -> Result<u64, StoreError> {
                let value: i64 = conn.pragma_query_value(None, name, |r| r.get(0))?;
                Ok(value.max(0) as u64)
            };
            let page_size = pragma("page_size")?;
            let pages = pragma("page_count")?;
            // Free pages go back to the file system only in incremental
            // mode (files made before it stay in the other mode, where
            // SQLite reuses free pages but compaction cannot give them back).
            let free = if pragma("auto_vacuum")? == 2 {
                pragma("freelist_count")?
            } else {
                0
            };
            let count = |sql: &str| -> Result<u64, StoreError> {
                let n: i64 = conn.query_row(sql, [], |r| r.get(0))?;
                Ok(n.max(0) as u64)
            };
            let revs = count("SELECT COUNT(*) FROM revs")?;
            let docs = count("SELECT COUNT(*) FROM docs")?;
            let attachment_bytes = count("SELECT COALESCE(SUM(length), 0) FROM att_blobs")?;
            let stale_revs = revs.saturating_sub(docs).saturating_sub(kept);
            let file_size = pages * page_size;
            let body_bytes =
                ((pages - free.min(pages)) * page_size).saturating_sub(attachment_bytes);
            let stale_bytes = if revs == 0 {
                0
            } else {
                (body_bytes as u128 * stale_revs as u128 / revs as u128) as u64
            };
            Ok(Garbage {
                file_size,
                garbage: (free * page_size + stale_bytes).min(file_size),
            })
        })
        .await
    }

    /// Whether a compaction is running (`compact_running` in `GET /db`).
    pub fn compact_running(&self) -> bool {
        self.compaction_flag().load(Ordering::Acquire)
    }

    /// Returns the revision bodies kept beyond one per document (the
    /// leaves of conflicts).
    async fn compact_steps(&self, pause: Duration) -> Result<u64, StoreError> {
        let mut after_key = 0i64;
        let mut kept = 0;
        loop {
            if !pause.is_zero() {
                tokio::time::sleep(pause).await;
            }
            let next = self
                .write(DOCS_PER_STEP as usize, move |ctx| {
                    drop_old_bodies(ctx.conn, after_key)
                })
                .await?;
            match next {
                Some((key, extra_leaves)) => {
                    after_key = key;
                    kept += extra_leaves;
                }
                None => break,
            }
        }
        let db = self.clone();
        self.write(1, move |ctx| {
            // Read on the writer thread, where uploads file their chunks and
            // blobs, so nothing can start between this check and the deletes.
            let uploads_running = db.active_uploads() > 0;
            let mut referenced: HashSet<String> = HashSet::new();
            let mut stmt = ctx
                .conn
                .prepare("SELECT atts FROM revs WHERE atts IS NOT NULL")?;
            let mut rows = stmt.query([])?;
            while let Some(row) = rows.next()? {
                let text: String = row.get(0)?;
                for (_, meta) in attachments::decode_atts(Some(&text))? {
                    referenced.insert(meta.digest);
                }
            }
            drop(rows);
            let stored: Vec<(String, i64)> = ctx
                .conn
                .prepare("SELECT digest, blob_id FROM att_blobs")?
                .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect::<Result<_, _>>()?;
            let unreferenced = stored
                .iter()
                .filter(|(d, _)| !referenced.contains(d) && !db.blob_pins().is_pinned(d));
            for (digest, id) in unreferenced {
                ctx.conn
                    .execute("DELETE FROM att_chunks WHERE blob_id = ?1", [id])?;
                ctx.conn
                    .execute("DELETE FROM att_blobs WHERE digest = ?1", [digest])?;
            }
            if !uploads_running {
                // Chunks of uploads that never finished belong to no blob.
                ctx.conn.execute(
                    "DELETE FROM att_chunks WHERE blob_id NOT IN (SELECT blob_id FROM att_blobs)",
                    [],
                )?;
            }
            Ok(())
        })
        .await?;
        self.write(1, |ctx| {
            // Each step of the statement frees one page: step it to the end
            // (run once, as a batch, it frees a single page).
            let mut vacuum = ctx.conn.prepare("PRAGMA incremental_vacuum")?;
            let mut steps = vacuum.query([])?;
            while steps.next()?.is_some() {}
            Ok(())
        })
        .await?;
        Ok(kept)
    }
}

/// Drops the bodies of non-leaf revisions for the next batch of documents
/// after `after_key`; returns the last key seen and the bodies kept beyond
/// one per document (conflicts' leaves), or `None` when done.
fn drop_old_bodies(
    conn: &rusqlite::Connection,
    after_key: i64,
) -> Result<Option<(i64, u64)>, StoreError> {
    let batch: Vec<(i64, String, Vec<u8>)> = conn
        .prepare_cached(
            "SELECT doc_key, id, tree FROM docs WHERE doc_key > ?1 ORDER BY doc_key LIMIT ?2",
        )?
        .query_map(params![after_key, DOCS_PER_STEP], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })?
        .collect::<Result<_, _>>()?;
    let Some(last) = batch.last().map(|(k, _, _)| *k) else {
        return Ok(None);
    };
    let mut extra_leaves = 0u64;
    for (key, id, bytes) in batch {
        let mut tree = decode_tree(&id, &bytes)?;
        let leaves: HashSet<_> = tree.leaves().into_iter().map(|l| l.rev).collect();
        let stored_leaves = leaves
            .iter()
            .filter(|r| tree.is_available(r) == Some(true))
            .count() as u64;
        extra_leaves += stored_leaves.saturating_sub(1);
        let old: Vec<_> = tree
            .revs()
            .filter(|r| !leaves.contains(*r) && tree.is_available(r) == Some(true))
            .cloned()
            .collect();
        if old.is_empty() {
            continue;
        }
        for rev in &old {
            tree.set_available(rev, false);
            conn.prepare_cached("DELETE FROM revs WHERE doc_key = ?1 AND rev = ?2")?
                .execute(params![key, rev.to_string()])?;
        }
        conn.prepare_cached("UPDATE docs SET tree = ?2 WHERE doc_key = ?1")?
            .execute(params![key, tree.encode()])?;
    }
    Ok(Some((last, extra_leaves)))
}

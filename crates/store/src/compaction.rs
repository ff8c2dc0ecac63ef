//! Compaction: drop what no reader can ask for any more — bodies of
//! revisions that are no longer leaves, history past `_revs_limit` (as
//! CouchDB stems trees when it compacts), attachment bytes no stored
//! revision refers to, abandoned uploads — and give the freed pages back.
//!
//! It runs as a series of small writes (a batch of documents each), so
//! ordinary writes interleave with it instead of waiting for the end.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::backend::{Garbage, WriteRows};
use crate::{Database, StoreError};

/// Documents examined per compaction write: keeps each one short.
const DOCS_PER_STEP: u64 = 500;
/// Pages given back to the file system per compaction write (32 MiB of
/// 4 KiB pages).
const RECLAIM_PAGES: u64 = 8192;

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

    /// How much of the database's storage compaction would give back, estimated.
    pub async fn garbage(&self) -> Result<Garbage, StoreError> {
        let kept = self.kept_extra_revs().load(Ordering::Relaxed);
        let backend = self.backend().clone();
        tokio::task::spawn_blocking(move || backend.garbage(kept))
            .await
            .map_err(|e| StoreError::CommitFailed(format!("read task failed: {e}")))?
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
                    drop_old_bodies(ctx.rows, after_key, ctx.state.revs_limit)
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
            let referenced = ctx.rows.referenced_digests()?;
            let stored = ctx.rows.blobs()?;
            let unreferenced = stored
                .iter()
                .filter(|(d, _)| !referenced.contains(d) && !db.blob_pins().is_pinned(d));
            for (digest, id) in unreferenced {
                ctx.rows.delete_blob(digest, *id)?;
            }
            if !uploads_running {
                // Chunks of uploads that never finished belong to no blob.
                ctx.rows.delete_unfiled_chunks()?;
            }
            Ok(())
        })
        .await?;
        // In steps, each its own write: a file of gigabytes freed in one
        // write held every other write back for a second.
        while self
            .write(1, |ctx| ctx.rows.reclaim_space(RECLAIM_PAGES))
            .await?
        {}
        let backend = self.backend().clone();
        let fill = tokio::task::spawn_blocking(move || backend.measure_page_fill())
            .await
            .map_err(|e| StoreError::CommitFailed(format!("compaction task failed: {e}")))??;
        if let Some(fill) = fill {
            self.write(1, move |ctx| {
                ctx.rows
                    .set_meta(crate::backend::PAGE_FILL_META, &format!("{fill:.4}"))
            })
            .await?;
        }
        // Last, so that no write of compaction's is left in the log.
        let backend = self.backend().clone();
        tokio::task::spawn_blocking(move || backend.give_back_log())
            .await
            .map_err(|e| StoreError::CommitFailed(format!("compaction task failed: {e}")))??;
        Ok(kept)
    }
}

/// Stems the trees of the next batch of documents after `after_key` to
/// `revs_limit` and drops the bodies of non-leaf revisions; returns the
/// last key seen and the bodies kept beyond one per document (conflicts'
/// leaves), or `None` when done.
fn drop_old_bodies(
    rows: &dyn WriteRows,
    after_key: i64,
    revs_limit: u32,
) -> Result<Option<(i64, u64)>, StoreError> {
    let batch = rows.docs_after(after_key, DOCS_PER_STEP)?;
    let Some(last) = batch.last().map(|(k, _, _)| *k) else {
        return Ok(None);
    };
    let mut extra_leaves = 0u64;
    for (key, _id, mut tree) in batch {
        // History past the limit (lowered since the document was written).
        let stemmed = tree.stem(revs_limit);
        for rev in &stemmed {
            rows.drop_revision(key, rev)?;
        }
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
            if !stemmed.is_empty() {
                rows.set_tree(key, &tree)?;
            }
            continue;
        }
        for rev in &old {
            tree.set_available(rev, false);
            rows.drop_revision(key, rev)?;
        }
        rows.set_tree(key, &tree)?;
    }
    Ok(Some((last, extra_leaves)))
}

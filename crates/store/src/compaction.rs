//! Compaction: drop what no reader can ask for any more — bodies of
//! revisions that are no longer leaves, attachment bytes no stored revision
//! refers to, abandoned uploads — and give the freed pages back.
//!
//! It runs as a series of small writes (a batch of documents each), so
//! ordinary writes interleave with it instead of waiting for the end.

use std::collections::HashSet;
use std::sync::atomic::Ordering;

use rusqlite::params;

use crate::attachments;
use crate::read::decode_tree;
use crate::{Database, StoreError};

/// Documents examined per compaction write: keeps each one short.
const DOCS_PER_STEP: i64 = 500;

impl Database {
    /// Compacts the database; returns once done. A second call while one
    /// runs returns at once.
    pub async fn compact(&self) -> Result<(), StoreError> {
        if self.compaction_flag().swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        let result = self.compact_steps().await;
        self.compaction_flag().store(false, Ordering::Release);
        result
    }

    /// Whether a compaction is running (`compact_running` in `GET /db`).
    pub fn compact_running(&self) -> bool {
        self.compaction_flag().load(Ordering::Acquire)
    }

    async fn compact_steps(&self) -> Result<(), StoreError> {
        let mut after_key = 0i64;
        loop {
            let next = self
                .write(DOCS_PER_STEP as usize, move |ctx| {
                    drop_old_bodies(ctx.conn, after_key)
                })
                .await?;
            match next {
                Some(key) => after_key = key,
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
            ctx.conn.execute_batch("PRAGMA incremental_vacuum;")?;
            Ok(())
        })
        .await
    }
}

/// Drops the bodies of non-leaf revisions for the next batch of documents
/// after `after_key`; returns the last key seen, or `None` when done.
fn drop_old_bodies(conn: &rusqlite::Connection, after_key: i64) -> Result<Option<i64>, StoreError> {
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
    for (key, id, bytes) in batch {
        let mut tree = decode_tree(&id, &bytes)?;
        let leaves: HashSet<_> = tree.leaves().into_iter().map(|l| l.rev).collect();
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
    Ok(Some(last))
}

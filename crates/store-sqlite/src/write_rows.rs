//! The writer's row storage on a SQLite connection (inside its transaction).

use std::collections::HashSet;

use revtree::{RevId, RevTree};
use rusqlite::{OptionalExtension, params};

use crate::WriteConn;
use crate::body_sql::{BodyLen, SqlBody};
use crate::doc_rows::{decode_tree, sql_int};
use store::StoreError;
use store::backend::StoredBody;
use store::backend::{self as attachments, Attachments};
use store::backend::{DocUpdate, PurgeInfoRow, RevisionRef, StoredDoc, WriteRows};

impl WriteRows for WriteConn<'_> {
    fn load_doc(&self, id: &str) -> Result<Option<StoredDoc>, StoreError> {
        // Two point lookups rather than a LEFT JOIN: SQLite re-prepares that
        // join on every execution, which costs far more than the second lookup.
        let row: Option<(i64, Vec<u8>, bool, i64)> = self
            .prepare_cached("SELECT doc_key, tree, deleted, winner_row FROM docs WHERE id = ?1")?
            .query_row([id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
            .optional()?;
        let Some((key, tree, deleted, winner_row)) = row else {
            return Ok(None);
        };
        let tree = decode_tree(id, &tree)?;
        let live_body_len = if deleted {
            None
        } else {
            let len: Option<BodyLen> = self
                .prepare_cached("SELECT body FROM revs WHERE row = ?1")?
                .query_row([winner_row], |r| r.get(0))
                .optional()?;
            Some(len.map_or(0, |BodyLen(len)| len))
        };
        Ok(Some(StoredDoc {
            key,
            tree,
            live_body_len,
        }))
    }

    fn revision_attachments(&self, key: i64, rev: &RevId) -> Result<Attachments, StoreError> {
        let text: Option<Option<String>> = self
            .prepare_cached("SELECT atts FROM revs WHERE doc_key = ?1 AND rev = ?2")?
            .query_row(params![key, rev.to_string()], |r| r.get(0))
            .optional()?;
        attachments::decode_atts(text.flatten().as_deref())
    }

    fn every_revision_attachments(&self, key: i64) -> Result<Vec<Attachments>, StoreError> {
        let mut stmt =
            self.prepare_cached("SELECT atts FROM revs WHERE doc_key = ?1 AND atts IS NOT NULL")?;
        let mut rows = stmt.query([key])?;
        let mut out = Vec::new();
        while let Some(row) = rows.next()? {
            let text: String = row.get(0)?;
            out.push(attachments::decode_atts(Some(&text))?);
        }
        Ok(out)
    }

    fn write_revision(
        &self,
        key: i64,
        rev: &RevId,
        body: &StoredBody,
        atts: &Attachments,
    ) -> Result<RevisionRef, StoreError> {
        // Plain INSERT and last_insert_rowid: an upsert with RETURNING makes
        // SQLite re-prepare statements, which costs more than this.
        let atts = attachments::encode_atts(atts);
        let rev = rev.to_string();
        let inserted = self
            .prepare_cached(
                "INSERT OR IGNORE INTO revs (doc_key, rev, body, atts) VALUES (?1, ?2, ?3, ?4)",
            )?
            .execute(params![key, rev, SqlBody(body), atts])?;
        let row = if inserted == 1 {
            self.last_insert_rowid()
        } else {
            // The revision was known without its body (replication fills it in).
            self.prepare_cached(
                "UPDATE revs SET body = ?3, atts = ?4 WHERE doc_key = ?1 AND rev = ?2",
            )?
            .execute(params![key, rev, SqlBody(body), atts])?;
            self.prepare_cached("SELECT row FROM revs WHERE doc_key = ?1 AND rev = ?2")?
                .query_row(params![key, rev], |r| r.get(0))?
        };
        Ok(RevisionRef {
            row,
            body_len: body.text_len(),
        })
    }

    fn revision_ref(&self, key: i64, rev: &RevId) -> Result<Option<RevisionRef>, StoreError> {
        Ok(self
            .prepare_cached("SELECT row, body FROM revs WHERE doc_key = ?1 AND rev = ?2")?
            .query_row(params![key, rev.to_string()], |r| {
                Ok(RevisionRef {
                    row: r.get(0)?,
                    body_len: r.get::<_, BodyLen>(1)?.0,
                })
            })
            .optional()?)
    }

    fn drop_revision(&self, key: i64, rev: &RevId) -> Result<(), StoreError> {
        self.prepare_cached("DELETE FROM revs WHERE doc_key = ?1 AND rev = ?2")?
            .execute(params![key, rev.to_string()])?;
        Ok(())
    }

    fn write_doc(&self, u: &DocUpdate<'_>) -> Result<(), StoreError> {
        match (u.was_live, !u.deleted) {
            (false, true) => self.counts.ids.record((u.id.to_string(), 1)),
            (true, false) => self.counts.ids.record((u.id.to_string(), -1)),
            _ => {}
        }
        if !u.is_new {
            let old: i64 = self
                .prepare_cached("SELECT seq FROM docs WHERE doc_key = ?1")?
                .query_row([u.key], |r| r.get(0))?;
            self.counts.seqs.record((old.max(0) as u64, -1));
        }
        self.counts.seqs.record((u.seq, 1));
        let winner = u.winner.to_string();
        let seq = sql_int(u.seq);
        let encoded = u.tree.encode();
        if u.is_new {
            self.prepare_cached(
                "INSERT INTO docs (doc_key, id, seq, winner, deleted, winner_row, tree)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )?
            .execute(params![
                u.key,
                u.id,
                seq,
                winner,
                u.deleted,
                u.winner_row,
                encoded
            ])?;
        } else {
            self.prepare_cached(
                "UPDATE docs SET seq = ?2, winner = ?3, deleted = ?4, winner_row = ?5, tree = ?6
                 WHERE doc_key = ?1",
            )?
            .execute(params![
                u.key,
                seq,
                winner,
                u.deleted,
                u.winner_row,
                encoded
            ])?;
        }
        Ok(())
    }

    fn put_blob(&self, data: &[u8]) -> Result<String, StoreError> {
        crate::blobs::put_blob(self, data)
    }

    fn has_blob(&self, digest: &str) -> Result<bool, StoreError> {
        crate::blobs::has_blob(self, digest)
    }

    fn blob(&self, digest: &str) -> Result<Vec<u8>, StoreError> {
        crate::blobs::read_blob(self, digest)
    }

    fn partition_size(&self, partition: &str) -> Result<u64, StoreError> {
        crate::partitions::partition_size(self, partition)
    }

    fn put_local(&self, id: &str, rev: u64, body: &str) -> Result<(), StoreError> {
        self.prepare_cached(
            "INSERT OR REPLACE INTO local_docs (id, rev, body) VALUES (?1, ?2, ?3)",
        )?
        .execute(params![id, sql_int(rev), body])?;
        Ok(())
    }

    fn delete_local(&self, id: &str) -> Result<bool, StoreError> {
        let removed = self
            .prepare_cached("DELETE FROM local_docs WHERE id = ?1")?
            .execute([id])?;
        Ok(removed > 0)
    }

    fn delete_doc(&self, key: i64) -> Result<(), StoreError> {
        self.prepare_cached("DELETE FROM revs WHERE doc_key = ?1")?
            .execute([key])?;
        let gone: Option<(String, bool, i64)> = self
            .prepare_cached("DELETE FROM docs WHERE doc_key = ?1 RETURNING id, deleted, seq")?
            .query_row([key], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .optional()?;
        if let Some((id, deleted, seq)) = gone {
            if !deleted {
                self.counts.ids.record((id, -1));
            }
            self.counts.seqs.record((seq.max(0) as u64, -1));
        }
        self.prepare_cached("DELETE FROM doc_access WHERE doc_key = ?1")?
            .execute([key])?;
        Ok(())
    }

    fn record_purge(&self, info: &PurgeInfoRow) -> Result<(), StoreError> {
        self.prepare_cached(
            "INSERT INTO purge_infos (purge_seq, uuid, doc_id, revs) VALUES (?1, ?2, ?3, ?4)",
        )?
        .execute(params![
            sql_int(info.purge_seq),
            info.uuid,
            info.id,
            info.revs
        ])?;
        Ok(())
    }

    fn drop_purge_infos_through(&self, purge_seq: u64) -> Result<(), StoreError> {
        self.prepare_cached("DELETE FROM purge_infos WHERE purge_seq <= ?1")?
            .execute([sql_int(purge_seq)])?;
        Ok(())
    }

    fn meta(&self, key: &str) -> Result<Option<String>, StoreError> {
        crate::read_meta(self, key)
    }

    fn set_meta(&self, key: &str, value: &str) -> Result<(), StoreError> {
        crate::write_meta(self, key, value)
    }

    fn put_chunk(&self, blob: i64, index: u64, data: &[u8]) -> Result<(), StoreError> {
        crate::blobs::put_chunk(self, blob, index, data)
    }

    fn file_blob(&self, digest: &str, blob: i64, length: u64) -> Result<(), StoreError> {
        crate::blobs::file_blob(self, digest, blob, length)
    }

    fn docs_after(
        &self,
        after_key: i64,
        limit: u64,
    ) -> Result<Vec<(i64, String, RevTree)>, StoreError> {
        let mut stmt = self.prepare_cached(
            "SELECT doc_key, id, tree FROM docs WHERE doc_key > ?1 ORDER BY doc_key LIMIT ?2",
        )?;
        let mut rows = stmt.query(params![after_key, sql_int(limit)])?;
        let mut out = Vec::new();
        while let Some(row) = rows.next()? {
            let id: String = row.get(1)?;
            let tree = decode_tree(&id, &row.get::<_, Vec<u8>>(2)?)?;
            out.push((row.get(0)?, id, tree));
        }
        Ok(out)
    }

    fn set_tree(&self, key: i64, tree: &RevTree) -> Result<(), StoreError> {
        self.prepare_cached("UPDATE docs SET tree = ?2 WHERE doc_key = ?1")?
            .execute(params![key, tree.encode()])?;
        Ok(())
    }

    fn referenced_digests(&self) -> Result<HashSet<String>, StoreError> {
        let mut referenced = HashSet::new();
        let mut stmt = self.prepare("SELECT atts FROM revs WHERE atts IS NOT NULL")?;
        let mut rows = stmt.query([])?;
        while let Some(row) = rows.next()? {
            let text: String = row.get(0)?;
            for (_, meta) in attachments::decode_atts(Some(&text))? {
                referenced.insert(meta.digest);
            }
        }
        Ok(referenced)
    }

    fn blobs(&self) -> Result<Vec<(String, i64)>, StoreError> {
        Ok(self
            .prepare("SELECT digest, blob_id FROM att_blobs")?
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<Result<_, _>>()?)
    }

    fn delete_blob(&self, digest: &str, blob: i64) -> Result<(), StoreError> {
        self.execute("DELETE FROM att_chunks WHERE blob_id = ?1", [blob])?;
        self.execute("DELETE FROM att_blobs WHERE digest = ?1", [digest])?;
        Ok(())
    }

    fn delete_unfiled_chunks(&self) -> Result<(), StoreError> {
        self.execute(
            "DELETE FROM att_chunks WHERE blob_id NOT IN (SELECT blob_id FROM att_blobs)",
            [],
        )?;
        Ok(())
    }

    fn reclaim_space(&self, most_pages: u64) -> Result<bool, StoreError> {
        // Each step of the statement frees one page: step it to the end
        // (run once, as a batch, it frees a single page).
        let most = i64::try_from(most_pages).unwrap_or(i64::MAX);
        let mut vacuum = self.prepare(&format!("PRAGMA incremental_vacuum({most})"))?;
        let mut steps = vacuum.query([])?;
        while steps.next()?.is_some() {}
        let free: i64 = self.pragma_query_value(None, "freelist_count", |r| r.get(0))?;
        Ok(free > 0)
    }

    fn revision_text(&self, key: i64, rev: &RevId) -> Result<Option<String>, StoreError> {
        let text: Option<crate::body_sql::BodyText> = self
            .prepare_cached("SELECT body FROM revs WHERE doc_key = ?1 AND rev = ?2")?
            .query_row(params![key, rev.to_string()], |r| r.get(0))
            .optional()?;
        Ok(text.map(|crate::body_sql::BodyText(body)| body))
    }

    fn access_rows(&self, key: i64) -> Result<Vec<store::backend::AccessRow>, StoreError> {
        crate::access_rows::access_rows(self, key)
    }

    fn set_access_rows(
        &self,
        key: i64,
        rows: &[store::backend::AccessRow],
    ) -> Result<(), StoreError> {
        crate::access_rows::set_access_rows(self, key, rows)
    }
}

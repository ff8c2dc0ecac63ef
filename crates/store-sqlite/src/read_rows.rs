//! Readers' row storage on a SQLite connection (a reader's snapshot).

use std::ops::Bound;

use revtree::RevId;
use rusqlite::{OptionalExtension, params, params_from_iter};

use crate::Rows;
use crate::body_sql::BodyText;
use crate::doc_rows::{DOC_COLUMNS, columns, doc_row, id_page_sql, read_rows, sql_int};
use store::PartitionInfo;
use store::StoreError;
use store::backend as attachments;
use store::backend::Attachments;
use store::backend::{
    DbCounts, DocRow, IdPage, LocalDocRow, PurgeInfoRow, ReadRows, RowVisitor, StorageSizes,
};

impl ReadRows for Rows<'_> {
    fn doc_row(&self, id: &str) -> Result<Option<DocRow>, StoreError> {
        let mut stmt =
            self.prepare_cached(&format!("SELECT {DOC_COLUMNS} FROM docs WHERE id = ?1"))?;
        let mut rows = stmt.query([id])?;
        match rows.next()? {
            Some(r) => Ok(Some(doc_row(r)?.1)),
            None => Ok(None),
        }
    }

    fn revision_body(
        &self,
        row: &DocRow,
        rev: &RevId,
    ) -> Result<Option<(String, Option<String>)>, StoreError> {
        let rev_text = rev.to_string();
        let found: Option<(BodyText, Option<String>)> =
            if row.winner_row != 0 && rev_text == row.winner {
                self.prepare_cached("SELECT body, atts FROM revs WHERE row = ?1")?
                    .query_row([row.winner_row], |r| Ok((r.get(0)?, r.get(1)?)))
                    .optional()?
            } else {
                self.prepare_cached("SELECT body, atts FROM revs WHERE doc_key = ?1 AND rev = ?2")?
                    .query_row(params![row.key, rev_text], |r| Ok((r.get(0)?, r.get(1)?)))
                    .optional()?
            };
        Ok(found.map(|(BodyText(body), atts)| (body, atts)))
    }

    fn blob(&self, digest: &str) -> Result<Vec<u8>, StoreError> {
        crate::blobs::read_blob(self, digest)
    }

    fn counts(&self) -> Result<DbCounts, StoreError> {
        Ok(self
            .prepare_cached(
                "SELECT doc_count, doc_del_count, update_seq, purge_seq, external_size
                 FROM db_state WHERE id = 0",
            )?
            .query_row([], |r| {
                Ok(DbCounts {
                    doc_count: r.get::<_, i64>(0)?.max(0) as u64,
                    doc_del_count: r.get::<_, i64>(1)?.max(0) as u64,
                    update_seq: r.get::<_, i64>(2)?.max(0) as u64,
                    purge_seq: r.get::<_, i64>(3)?.max(0) as u64,
                    external_size: r.get(4)?,
                })
            })?)
    }

    fn changes(
        &self,
        since: u64,
        descending: bool,
        limit: u64,
        with_bodies: bool,
        each: &mut RowVisitor<'_>,
    ) -> Result<(), StoreError> {
        let (columns, from) = columns(with_bodies);
        let sql = if descending {
            format!(
                "SELECT {columns} FROM {from} WHERE (?1 = 0 OR seq < ?1) ORDER BY seq DESC LIMIT ?2"
            )
        } else {
            format!("SELECT {columns} FROM {from} WHERE seq > ?1 ORDER BY seq LIMIT ?2")
        };
        let mut stmt = self.prepare_cached(&sql)?;
        read_rows(
            &mut stmt,
            params![sql_int(since), sql_int(limit)],
            with_bodies,
            each,
        )
    }

    fn count_changes_after(&self, seq: u64) -> Result<u64, StoreError> {
        crate::seq_buckets::docs_after(self, seq)
    }

    fn count_live(&self, lo: &Bound<String>, hi: &Bound<String>) -> Result<u64, StoreError> {
        crate::id_blocks::live_between(self, lo, hi)
    }

    fn live_docs(&self, page: &IdPage<'_>, each: &mut RowVisitor<'_>) -> Result<(), StoreError> {
        let mut args = Vec::new();
        let (columns, from) = columns(page.with_bodies);
        let head = format!("SELECT {columns} FROM {from} WHERE deleted = 0");
        let sql = id_page_sql(&head, page, &mut args);
        let mut stmt = self.prepare_cached(&sql)?;
        read_rows(
            &mut stmt,
            params_from_iter(args.iter()),
            page.with_bodies,
            each,
        )
    }

    fn local_doc(&self, id: &str) -> Result<Option<LocalDocRow>, StoreError> {
        Ok(self
            .prepare_cached("SELECT rev, body FROM local_docs WHERE id = ?1")?
            .query_row([id], |r| {
                Ok(LocalDocRow {
                    id: id.to_string(),
                    rev: r.get::<_, i64>(0)? as u64,
                    body: r.get(1)?,
                })
            })
            .optional()?)
    }

    fn local_docs(&self, page: &IdPage<'_>) -> Result<Vec<LocalDocRow>, StoreError> {
        let mut args = Vec::new();
        let sql = id_page_sql(
            "SELECT id, rev, body FROM local_docs WHERE 1",
            page,
            &mut args,
        );
        let mut stmt = self.prepare_cached(&sql)?;
        let mut cursor = stmt.query(params_from_iter(args.iter()))?;
        let mut out = Vec::new();
        while let Some(r) = cursor.next()? {
            out.push(LocalDocRow {
                id: r.get(0)?,
                rev: r.get::<_, i64>(1)? as u64,
                body: r.get(2)?,
            });
        }
        Ok(out)
    }

    fn purge_infos(&self) -> Result<Vec<PurgeInfoRow>, StoreError> {
        let mut stmt = self.prepare_cached(
            "SELECT purge_seq, uuid, doc_id, revs FROM purge_infos ORDER BY purge_seq",
        )?;
        let mut cursor = stmt.query([])?;
        let mut out = Vec::new();
        while let Some(r) = cursor.next()? {
            out.push(PurgeInfoRow {
                purge_seq: r.get::<_, i64>(0)? as u64,
                uuid: r.get(1)?,
                id: r.get(2)?,
                revs: r.get(3)?,
            });
        }
        Ok(out)
    }

    fn meta(&self, key: &str) -> Result<Option<String>, StoreError> {
        crate::read_meta(self, key)
    }

    fn revision_attachments(
        &self,
        key: i64,
        rev: &RevId,
    ) -> Result<Option<Attachments>, StoreError> {
        let text: Option<Option<String>> = self
            .prepare_cached("SELECT atts FROM revs WHERE doc_key = ?1 AND rev = ?2")?
            .query_row(params![key, rev.to_string()], |r| r.get(0))
            .optional()?;
        text.map(|text| attachments::decode_atts(text.as_deref()))
            .transpose()
    }

    fn blob_chunks(&self, digest: &str) -> Result<Option<(i64, u64)>, StoreError> {
        crate::blobs::blob_chunks(self, digest)
    }

    fn blob_chunk(&self, blob: i64, index: u64) -> Result<Vec<u8>, StoreError> {
        crate::blobs::read_chunk(self, blob, index)
    }

    fn partition_counts(&self, partition: &str) -> Result<PartitionInfo, StoreError> {
        crate::partitions::partition_counts(self, partition)
    }

    fn storage_sizes(&self) -> Result<StorageSizes, StoreError> {
        let pragma = |name: &str| -> Result<i64, StoreError> {
            Ok(self.pragma_query_value(None, name, |r| r.get(0))?)
        };
        let pages_in_use = ((pragma("page_count")? - pragma("freelist_count")?).max(0)
            * pragma("page_size")?) as u64;
        // Live data is the pages in use as full as the last compaction
        // measured them (whole pages before any).
        let fill = crate::read_meta(self, store::backend::PAGE_FILL_META)?
            .and_then(|f| f.parse::<f64>().ok())
            .filter(|f| f.is_finite())
            .map_or(1.0, |f| f.clamp(0.05, 1.0));
        let active = (pages_in_use as f64 * fill) as u64;
        // The file and its write-ahead log, where recent writes are.
        let file_len = |p: &std::path::Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
        let file = match self.path() {
            Some(path) if !path.is_empty() => {
                let wal = format!("{path}-wal");
                file_len(std::path::Path::new(path)) + file_len(std::path::Path::new(&wal))
            }
            _ => 0,
        };
        Ok(StorageSizes { file, active })
    }

    fn access_rows(&self, key: i64) -> Result<Vec<store::backend::AccessRow>, StoreError> {
        crate::access_rows::access_rows(self, key)
    }

    fn access_changes(
        &self,
        principals: &[String],
        since: u64,
        descending: bool,
        limit: u64,
        with_bodies: bool,
        each: &mut store::backend::AccessVisitor<'_>,
    ) -> Result<(), StoreError> {
        crate::access_rows::access_changes(
            self,
            principals,
            since,
            descending,
            limit,
            with_bodies,
            each,
        )
    }

    fn access_count_changes_after(
        &self,
        principals: &[String],
        seq: u64,
    ) -> Result<u64, StoreError> {
        crate::access_rows::access_count_changes_after(self, principals, seq)
    }

    fn access_live_docs(
        &self,
        principals: &[String],
        page: &IdPage<'_>,
        each: &mut RowVisitor<'_>,
    ) -> Result<(), StoreError> {
        crate::access_rows::access_live_docs(self, principals, page, each)
    }

    fn access_count_live(
        &self,
        principals: &[String],
        lo: &Bound<String>,
        hi: &Bound<String>,
    ) -> Result<u64, StoreError> {
        crate::access_rows::access_count_live(self, principals, lo, hi)
    }

    fn access_count_deleted(&self, principals: &[String]) -> Result<u64, StoreError> {
        crate::access_rows::access_count_deleted(self, principals)
    }
}

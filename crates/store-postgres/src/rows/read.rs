//! What readers ask of the rows (`ReadRows`), inside a snapshot: documents,
//! revisions, scans by id and by sequence, counts, local documents and
//! attachments. The writer's side is the parent module.

use super::*;

impl ReadRows for PgRows<'_> {
    fn doc_row(&self, id: &str) -> Result<Option<DocRow>, StoreError> {
        let sql = format!(
            "SELECT {} WHERE d.db_id = $1 AND d.id = $2",
            doc_columns(false)
        );
        self.query_opt(&sql, &[&self.db_id, &Text(id)])?
            .map(|row| Ok(doc_row(&row, false)?.1))
            .transpose()
    }

    fn revision_body(
        &self,
        row: &DocRow,
        rev: &RevId,
    ) -> Result<Option<(String, Option<String>)>, StoreError> {
        let rev_text = rev.to_string();
        let found = if row.winner_row != 0 && rev_text == row.winner {
            self.query_opt(
                "SELECT body, snappy, atts FROM recliner_revs WHERE row = $1",
                &[&row.winner_row],
            )?
        } else {
            self.query_opt(
                "SELECT body, snappy, atts FROM recliner_revs WHERE db_id = $1 AND doc_key = $2 AND rev = $3",
                &[&self.db_id, &row.key, &Text(&rev_text)],
            )?
        };
        found
            .map(|r| Ok((body_text(get(&r, 0)?, get(&r, 1)?)?, r.opt_text(2)?)))
            .transpose()
    }

    fn blob(&self, digest: &str) -> Result<Vec<u8>, StoreError> {
        self.read_blob(digest)
    }

    fn counts(&self) -> Result<DbCounts, StoreError> {
        let row = self
            .query_opt(
                "SELECT doc_count, doc_del_count, update_seq, purge_seq, external_size
                 FROM recliner_dbs WHERE db_id = $1",
                &[&self.db_id],
            )?
            .ok_or_else(|| StoreError::DbNotFound(self.name.to_string()))?;
        Ok(DbCounts {
            doc_count: get::<i64>(&row, 0)?.max(0) as u64,
            doc_del_count: get::<i64>(&row, 1)?.max(0) as u64,
            update_seq: get::<i64>(&row, 2)?.max(0) as u64,
            purge_seq: get::<i64>(&row, 3)?.max(0) as u64,
            external_size: get(&row, 4)?,
        })
    }

    fn changes(
        &self,
        since: u64,
        descending: bool,
        limit: u64,
        with_bodies: bool,
        each: &mut RowVisitor<'_>,
    ) -> Result<(), StoreError> {
        let columns = doc_columns(with_bodies);
        let sql = if descending {
            format!(
                "SELECT {columns} WHERE d.db_id = $1 AND ($2::bigint = 0 OR d.seq < $2) ORDER BY d.seq DESC LIMIT $3"
            )
        } else {
            format!("SELECT {columns} WHERE d.db_id = $1 AND d.seq > $2 ORDER BY d.seq LIMIT $3")
        };
        let (mut from, mut left) = (int(since), limit);
        while left > 0 {
            let page = left.min(SCAN_PAGE);
            let rows = self.query(&sql, &[&self.db_id, &from, &int(page)])?;
            let got = rows.len() as u64;
            for row in &rows {
                let (id, doc) = doc_row(row, with_bodies)?;
                from = int(doc.seq);
                each(id, doc)?;
            }
            if got < page {
                break;
            }
            left -= got;
        }
        Ok(())
    }

    fn count_changes_after(&self, seq: u64) -> Result<u64, StoreError> {
        self.count(
            "SELECT count(*) FROM recliner_docs WHERE db_id = $1 AND seq > $2",
            &[&self.db_id, &int(seq)],
        )
    }

    fn count_live(&self, lo: &Bound<String>, hi: &Bound<String>) -> Result<u64, StoreError> {
        let mut args: Args = vec![Box::new(self.db_id)];
        let filter = range_sql("id", lo, hi, &mut args);
        let sql =
            format!("SELECT count(*) FROM recliner_docs WHERE db_id = $1 AND NOT deleted{filter}");
        self.count(&sql, &refs(&args))
    }

    fn live_docs(&self, page: &IdPage<'_>, each: &mut RowVisitor<'_>) -> Result<(), StoreError> {
        self.scan_live(None, page, each)
    }

    fn local_doc(&self, id: &str) -> Result<Option<LocalDocRow>, StoreError> {
        self.query_opt(
            "SELECT rev, body FROM recliner_local WHERE db_id = $1 AND id = $2",
            &[&self.db_id, &Text(id)],
        )?
        .map(|row| {
            Ok(LocalDocRow {
                id: id.to_string(),
                rev: get::<i64>(&row, 0)?.max(0) as u64,
                body: row.text(1)?,
            })
        })
        .transpose()
    }

    fn local_docs(&self, page: &IdPage<'_>) -> Result<Vec<LocalDocRow>, StoreError> {
        let mut args: Args = vec![Box::new(self.db_id)];
        let filter = range_sql("id", page.lo, page.hi, &mut args);
        let order = if page.descending { "DESC" } else { "ASC" };
        args.push(Box::new(int(page.limit)));
        let limit_arg = args.len();
        args.push(Box::new(int(page.skip)));
        let skip_arg = args.len();
        let sql = format!(
            "SELECT id, rev, body FROM recliner_local WHERE db_id = $1{filter}
             ORDER BY id {order} LIMIT ${limit_arg} OFFSET ${skip_arg}"
        );
        self.query(&sql, &refs(&args))?
            .iter()
            .map(|row| {
                Ok(LocalDocRow {
                    id: row.text(0)?,
                    rev: get::<i64>(row, 1)?.max(0) as u64,
                    body: row.text(2)?,
                })
            })
            .collect()
    }

    fn purge_infos(&self) -> Result<Vec<PurgeInfoRow>, StoreError> {
        self.query(
            "SELECT purge_seq, uuid, doc_id, revs FROM recliner_purges WHERE db_id = $1 ORDER BY purge_seq",
            &[&self.db_id],
        )?
        .iter()
        .map(|row| {
            Ok(PurgeInfoRow {
                purge_seq: get::<i64>(row, 0)?.max(0) as u64,
                uuid: row.text(1)?,
                id: row.text(2)?,
                revs: row.text(3)?,
            })
        })
        .collect()
    }

    fn meta(&self, key: &str) -> Result<Option<String>, StoreError> {
        self.get_meta(key)
    }

    fn revision_attachments(
        &self,
        key: i64,
        rev: &RevId,
    ) -> Result<Option<Attachments>, StoreError> {
        self.atts_of(key, rev)?
            .map(|atts| decode_atts(atts.as_deref()))
            .transpose()
    }

    fn blob_chunks(&self, digest: &str) -> Result<Option<(i64, u64)>, StoreError> {
        let Some(id) = self.blob_id(digest)? else {
            return Ok(None);
        };
        let count = self.count(
            "SELECT count(*) FROM recliner_chunks WHERE db_id = $1 AND blob_id = $2",
            &[&self.db_id, &id],
        )?;
        Ok(Some((id, count)))
    }

    fn blob_chunk(&self, blob: i64, index: u64) -> Result<Vec<u8>, StoreError> {
        self.query_opt(
            "SELECT data FROM recliner_chunks WHERE db_id = $1 AND blob_id = $2 AND idx = $3",
            &[&self.db_id, &blob, &int(index)],
        )?
        .map(|row| get(&row, 0))
        .transpose()?
        .ok_or_else(|| StoreError::Corrupt {
            db: self.name.to_string(),
            detail: format!("attachment blob {blob} lacks chunk {index}"),
        })
    }

    fn partition_counts(&self, partition: &str) -> Result<PartitionInfo, StoreError> {
        self.partition(partition)
    }

    fn storage_sizes(&self) -> Result<StorageSizes, StoreError> {
        // PostgreSQL does not attribute its files to one Recliner database:
        // the sizes are the bytes of its stored bodies (every kept
        // revision's, so compaction shows) and attachments. A scan of the
        // database's revisions.
        let bodies = self.count(
            "SELECT COALESCE(sum(octet_length(body)), 0)::bigint FROM recliner_revs WHERE db_id = $1",
            &[&self.db_id],
        )?;
        let attachments = self.count(
            "SELECT COALESCE(sum(length), 0)::bigint FROM recliner_blobs WHERE db_id = $1",
            &[&self.db_id],
        )?;
        let active = bodies + attachments;
        Ok(StorageSizes {
            file: active,
            active,
        })
    }

    fn access_rows(&self, key: i64) -> Result<Vec<store::backend::AccessRow>, StoreError> {
        self.read_access_rows(key)
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
        self.scan_access_changes(principals, since, descending, limit, with_bodies, each)
    }

    fn access_count_changes_after(
        &self,
        principals: &[String],
        seq: u64,
    ) -> Result<u64, StoreError> {
        self.count_access_changes_after(principals, seq)
    }

    fn access_live_docs(
        &self,
        principals: &[String],
        page: &IdPage<'_>,
        each: &mut RowVisitor<'_>,
    ) -> Result<(), StoreError> {
        self.scan_access_live_docs(principals, page, each)
    }

    fn access_count_live(
        &self,
        principals: &[String],
        lo: &Bound<String>,
        hi: &Bound<String>,
    ) -> Result<u64, StoreError> {
        self.count_access_live(principals, lo, hi)
    }

    fn access_count_deleted(&self, principals: &[String]) -> Result<u64, StoreError> {
        self.count_access_deleted(principals)
    }
}

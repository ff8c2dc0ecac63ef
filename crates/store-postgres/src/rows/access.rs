//! The access index of a database with per-document access (see
//! `store::doc_access`) in `recliner_access`: what `store::backend`'s
//! access methods read and write.

use std::ops::Bound;

use store::StoreError;
use store::backend::{AccessChange, AccessRow, AccessVisitor, DocRow, IdPage, RowVisitor};

use super::{Args, PgRows, SCAN_PAGE, doc_columns, get, int, owned_texts, range_sql, refs};
use crate::conn::PgRow;
use crate::text::{Text, texts};

/// The live documents a user may read (`$2`: their principals).
pub(super) const READABLE: &str = "d.db_id = $1 AND NOT d.deleted AND d.doc_key IN
    (SELECT doc_key FROM recliner_access
     WHERE db_id = $1 AND principal = ANY($2) AND gone IS NULL)";

impl PgRows<'_> {
    pub(super) fn read_access_rows(&self, key: i64) -> Result<Vec<AccessRow>, StoreError> {
        self.query(
            "SELECT principal, seq, gone FROM recliner_access WHERE db_id = $1 AND doc_key = $2",
            &[&self.db_id, &key],
        )?
        .iter()
        .map(|row| {
            Ok(AccessRow {
                principal: row.text(0)?,
                seq: get::<i64>(row, 1)?.max(0) as u64,
                gone: row.opt_text(2)?,
            })
        })
        .collect()
    }

    pub(super) fn write_access_rows(&self, key: i64, rows: &[AccessRow]) -> Result<(), StoreError> {
        self.execute(
            "DELETE FROM recliner_access WHERE db_id = $1 AND doc_key = $2",
            &[&self.db_id, &key],
        )?;
        if rows.is_empty() {
            return Ok(());
        }
        let principals: Vec<Text<&str>> = rows.iter().map(|r| Text(r.principal.as_str())).collect();
        let seqs: Vec<i64> = rows.iter().map(|r| int(r.seq)).collect();
        let gone: Vec<Option<Text<&str>>> =
            rows.iter().map(|r| r.gone.as_deref().map(Text)).collect();
        self.execute(
            "INSERT INTO recliner_access (db_id, principal, doc_key, seq, gone)
             SELECT $1, p, $2, s, g FROM unnest($3::text[], $4::bigint[], $5::text[]) AS t(p, s, g)",
            &[&self.db_id, &key, &principals, &seqs, &gone],
        )?;
        Ok(())
    }

    pub(super) fn scan_access_changes(
        &self,
        principals: &[String],
        since: u64,
        descending: bool,
        limit: u64,
        with_bodies: bool,
        each: &mut AccessVisitor<'_>,
    ) -> Result<(), StoreError> {
        let (range, order) = if descending {
            ("($3::bigint = 0 OR a.seq < $3)", "DESC")
        } else {
            ("a.seq > $3", "ASC")
        };
        // As the SQLite backend: each document once, at the latest of the
        // user's rows for it.
        let sql = format!(
            "SELECT a.seq, a.gone, {columns}
             JOIN recliner_access a ON a.db_id = d.db_id AND a.doc_key = d.doc_key
             WHERE d.db_id = $1 AND a.principal = ANY($2) AND {range}
               AND NOT EXISTS (
                 SELECT 1 FROM recliner_access b
                 WHERE b.db_id = $1 AND b.doc_key = a.doc_key AND b.principal = ANY($2)
                   AND (b.seq > a.seq
                     OR (b.seq = a.seq AND b.gone IS NULL AND a.gone IS NOT NULL)
                     OR (b.seq = a.seq AND (b.gone IS NULL) = (a.gone IS NULL)
                         AND b.principal < a.principal)))
             ORDER BY a.seq {order} LIMIT $4",
            columns = doc_columns(with_bodies),
        );
        let principals = texts(principals);
        let (mut from, mut left) = (int(since), limit);
        while left > 0 {
            let page = left.min(SCAN_PAGE);
            let rows = self.query(&sql, &[&self.db_id, &principals, &from, &int(page)])?;
            let got = rows.len() as u64;
            let mut changes = Vec::with_capacity(rows.len());
            for row in &rows {
                let seq = get::<i64>(row, 0)?.max(0) as u64;
                let gone = row.opt_text(1)?;
                let (id, doc) = doc_row_after(row, 2, with_bodies)?;
                from = int(seq);
                changes.push(AccessChange {
                    seq,
                    id,
                    gone,
                    row: doc,
                });
            }
            for change in changes {
                each(change)?;
            }
            if got < page {
                break;
            }
            left -= got;
        }
        Ok(())
    }

    pub(super) fn count_access_changes_after(
        &self,
        principals: &[String],
        seq: u64,
    ) -> Result<u64, StoreError> {
        let principals = texts(principals);
        self.count(
            "SELECT count(DISTINCT doc_key) FROM recliner_access
             WHERE db_id = $1 AND principal = ANY($2) AND seq > $3",
            &[&self.db_id, &principals, &int(seq)],
        )
    }

    pub(super) fn scan_access_live_docs(
        &self,
        principals: &[String],
        page: &IdPage<'_>,
        each: &mut RowVisitor<'_>,
    ) -> Result<(), StoreError> {
        self.scan_live(Some(principals), page, each)
    }

    pub(super) fn count_access_live(
        &self,
        principals: &[String],
        lo: &Bound<String>,
        hi: &Bound<String>,
    ) -> Result<u64, StoreError> {
        let mut args: Args = vec![Box::new(self.db_id), Box::new(owned_texts(principals))];
        let filter = range_sql("d.id", lo, hi, &mut args);
        let sql = format!("SELECT count(*) FROM recliner_docs d WHERE {READABLE}{filter}");
        self.count(&sql, &refs(&args))
    }
}

impl PgRows<'_> {
    pub(super) fn count_access_deleted(&self, principals: &[String]) -> Result<u64, StoreError> {
        let args: Args = vec![Box::new(self.db_id), Box::new(owned_texts(principals))];
        self.count(
            &format!("SELECT count(*) FROM recliner_docs d WHERE {HELD_DELETED}"),
            &refs(&args),
        )
    }
}

/// The deleted documents whose tombstones name one of a user's
/// principals (`$2`).
const HELD_DELETED: &str = "d.db_id = $1 AND d.deleted AND d.doc_key IN
    (SELECT doc_key FROM recliner_access
     WHERE db_id = $1 AND principal = ANY($2) AND gone IS NULL)";

/// A document row whose columns start at `at`.
fn doc_row_after(row: &PgRow, at: usize, with_body: bool) -> Result<(String, DocRow), StoreError> {
    super::doc_row_at(row, at, with_body)
}

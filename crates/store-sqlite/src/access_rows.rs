//! The access index of a database with per-document access (see
//! `store::doc_access`): `doc_access`, one row per principal a document
//! names or lost, read by principal and sequence for a user's changes
//! feed, and by principal for their `_all_docs`.

use std::ops::Bound;

use rusqlite::params_from_iter;
use rusqlite::types::Value as SqlValue;

use crate::Rows;
use crate::doc_rows::{
    doc_row, doc_row_at, doc_row_with_body, doc_row_with_body_at, id_page_sql, range_sql, sql_int,
};
use store::StoreError;
use store::backend::{AccessChange, AccessRow, AccessVisitor, IdPage, RowVisitor};

/// The document columns of a user's feed and listing, after the access
/// row's own, and the joins they need.
const COLUMNS: &str = "d.id, d.doc_key, d.seq, d.tree, d.winner, d.winner_row";
const COLUMNS_WITH_BODY: &str =
    "d.id, d.doc_key, d.seq, d.tree, d.winner, d.winner_row, r.body, r.atts";

/// `?1, ?2, ...` for the principals, pushed first into `args`.
fn principals_sql(principals: &[String], args: &mut Vec<SqlValue>) -> String {
    let mut list = Vec::with_capacity(principals.len());
    for principal in principals {
        args.push(SqlValue::Text(principal.clone()));
        list.push(format!("?{}", args.len()));
    }
    if list.is_empty() {
        // Nobody: `IN ()` is not SQL.
        return "NULL".to_string();
    }
    list.join(", ")
}

pub(crate) fn access_rows(
    rows: &rusqlite::Connection,
    key: i64,
) -> Result<Vec<AccessRow>, StoreError> {
    let mut stmt =
        rows.prepare_cached("SELECT principal, seq, gone FROM doc_access WHERE doc_key = ?1")?;
    let mut cursor = stmt.query([key])?;
    let mut out = Vec::new();
    while let Some(r) = cursor.next()? {
        out.push(AccessRow {
            principal: r.get(0)?,
            seq: r.get::<_, i64>(1)?.max(0) as u64,
            gone: r.get(2)?,
        });
    }
    Ok(out)
}

pub(crate) fn set_access_rows(
    rows: &rusqlite::Connection,
    key: i64,
    access: &[AccessRow],
) -> Result<(), StoreError> {
    rows.prepare_cached("DELETE FROM doc_access WHERE doc_key = ?1")?
        .execute([key])?;
    let mut insert = rows.prepare_cached(
        "INSERT INTO doc_access (principal, doc_key, seq, gone) VALUES (?1, ?2, ?3, ?4)",
    )?;
    for row in access {
        insert.execute(rusqlite::params![
            row.principal,
            key,
            sql_int(row.seq),
            row.gone
        ])?;
    }
    Ok(())
}

pub(crate) fn access_changes(
    rows: &Rows<'_>,
    principals: &[String],
    since: u64,
    descending: bool,
    limit: u64,
    with_bodies: bool,
    each: &mut AccessVisitor<'_>,
) -> Result<(), StoreError> {
    let mut args = Vec::new();
    let who = principals_sql(principals, &mut args);
    args.push(SqlValue::Integer(sql_int(since)));
    let since_arg = args.len();
    args.push(SqlValue::Integer(sql_int(limit)));
    let limit_arg = args.len();
    let (columns, join) = if with_bodies {
        (
            COLUMNS_WITH_BODY,
            " LEFT JOIN revs r ON r.row = d.winner_row",
        )
    } else {
        (COLUMNS, "")
    };
    let (range, order) = if descending {
        (
            format!("(?{since_arg} = 0 OR a.seq < ?{since_arg})"),
            "DESC",
        )
    } else {
        (format!("a.seq > ?{since_arg}"), "ASC")
    };
    // Each document once: at the latest of the user's rows for it, a row
    // that holds it before one that lost it, then by principal.
    let sql = format!(
        "SELECT a.seq, a.gone, {columns}
         FROM doc_access a JOIN docs d ON d.doc_key = a.doc_key{join}
         WHERE a.principal IN ({who}) AND {range}
           AND NOT EXISTS (
             SELECT 1 FROM doc_access b
             WHERE b.doc_key = a.doc_key AND b.principal IN ({who})
               AND (b.seq > a.seq
                 OR (b.seq = a.seq AND b.gone IS NULL AND a.gone IS NOT NULL)
                 OR (b.seq = a.seq AND (b.gone IS NULL) = (a.gone IS NULL)
                     AND b.principal < a.principal)))
         ORDER BY a.seq {order} LIMIT ?{limit_arg}"
    );
    let mut stmt = rows.prepare_cached(&sql)?;
    let mut cursor = stmt.query(params_from_iter(args.iter()))?;
    while let Some(r) = cursor.next()? {
        let seq = r.get::<_, i64>(0)?.max(0) as u64;
        let gone: Option<String> = r.get(1)?;
        let (id, row) = if with_bodies {
            doc_row_with_body_at(r, 2)?
        } else {
            doc_row_at(r, 2)?
        };
        each(AccessChange { seq, id, gone, row })?;
    }
    Ok(())
}

pub(crate) fn access_count_changes_after(
    rows: &Rows<'_>,
    principals: &[String],
    seq: u64,
) -> Result<u64, StoreError> {
    let mut args = Vec::new();
    let who = principals_sql(principals, &mut args);
    args.push(SqlValue::Integer(sql_int(seq)));
    let seq_arg = args.len();
    let count: i64 = rows
        .prepare_cached(&format!(
            "SELECT COUNT(DISTINCT doc_key) FROM doc_access
             WHERE principal IN ({who}) AND seq > ?{seq_arg}"
        ))?
        .query_row(params_from_iter(args.iter()), |r| r.get(0))?;
    Ok(count.max(0) as u64)
}

/// `WHERE` of the live documents a user may read.
fn readable_sql(principals: &[String], args: &mut Vec<SqlValue>) -> String {
    held_sql(principals, false, args)
}

/// The documents, live or deleted, whose access rows name one of
/// `principals`.
fn held_sql(principals: &[String], deleted: bool, args: &mut Vec<SqlValue>) -> String {
    let who = principals_sql(principals, args);
    let deleted = i32::from(deleted);
    format!(
        "d.deleted = {deleted} AND d.doc_key IN
           (SELECT doc_key FROM doc_access WHERE principal IN ({who}) AND gone IS NULL)"
    )
}

pub(crate) fn access_count_deleted(
    rows: &Rows<'_>,
    principals: &[String],
) -> Result<u64, StoreError> {
    let mut args = Vec::new();
    let held = held_sql(principals, true, &mut args);
    let count: i64 = rows
        .prepare_cached(&format!("SELECT COUNT(*) FROM docs d WHERE {held}"))?
        .query_row(params_from_iter(args.iter()), |r| r.get(0))?;
    Ok(count.max(0) as u64)
}

pub(crate) fn access_live_docs(
    rows: &Rows<'_>,
    principals: &[String],
    page: &IdPage<'_>,
    each: &mut RowVisitor<'_>,
) -> Result<(), StoreError> {
    let mut args = Vec::new();
    let readable = readable_sql(principals, &mut args);
    let head = if page.with_bodies {
        format!(
            "SELECT {COLUMNS_WITH_BODY} FROM docs d LEFT JOIN revs r ON r.row = d.winner_row
             WHERE {readable}"
        )
    } else {
        format!("SELECT {COLUMNS} FROM docs d WHERE {readable}")
    };
    let sql = id_page_sql(&head, page, &mut args).replace(" id ", " d.id ");
    let mut stmt = rows.prepare_cached(&sql)?;
    let mut cursor = stmt.query(params_from_iter(args.iter()))?;
    while let Some(r) = cursor.next()? {
        let (id, row) = if page.with_bodies {
            doc_row_with_body(r)?
        } else {
            doc_row(r)?
        };
        each(id, row)?;
    }
    Ok(())
}

pub(crate) fn access_count_live(
    rows: &Rows<'_>,
    principals: &[String],
    lo: &Bound<String>,
    hi: &Bound<String>,
) -> Result<u64, StoreError> {
    let mut args = Vec::new();
    let readable = readable_sql(principals, &mut args);
    let range = range_sql(lo, hi, &mut args).replace(" id ", " d.id ");
    let count: i64 = rows
        .prepare_cached(&format!(
            "SELECT COUNT(*) FROM docs d WHERE {readable}{range}"
        ))?
        .query_row(params_from_iter(args.iter()), |r| r.get(0))?;
    Ok(count.max(0) as u64)
}

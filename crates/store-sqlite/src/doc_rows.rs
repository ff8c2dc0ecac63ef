//! Documents and revisions as SQLite rows: `docs` (one row per document,
//! its encoded tree and winner) and `revs` (one row per kept body); the
//! queries both sides of the seam share.

use std::ops::Bound;

use rusqlite::types::Value as SqlValue;

use crate::body_sql::BodyText;
use store::StoreError;
use store::backend::{DocRow, IdPage, RowVisitor};

/// The `docs` columns [`doc_row`] reads, in order.
pub(super) const DOC_COLUMNS: &str = "id, doc_key, seq, tree, winner, winner_row";

/// The columns of [`DOC_COLUMNS`] plus the winner's body, for scans that
/// embed documents: one joined query per page instead of a lookup per row.
pub(super) const DOC_COLUMNS_WITH_BODY: &str =
    "d.id, d.doc_key, d.seq, d.tree, d.winner, d.winner_row, r.body, r.atts";

/// The `FROM` clause that goes with [`DOC_COLUMNS_WITH_BODY`].
pub(super) const DOCS_WITH_BODY: &str = "docs d LEFT JOIN revs r ON r.row = d.winner_row";

pub(super) fn columns(with_bodies: bool) -> (&'static str, &'static str) {
    if with_bodies {
        (DOC_COLUMNS_WITH_BODY, DOCS_WITH_BODY)
    } else {
        (DOC_COLUMNS, "docs")
    }
}

pub(super) use store::backend::decode_tree;

/// Reads a row selected with [`DOC_COLUMNS`].
pub(super) fn doc_row(r: &rusqlite::Row<'_>) -> Result<(String, DocRow), StoreError> {
    doc_row_at(r, 0)
}

/// [`doc_row`] of columns that start at `at`.
pub(super) fn doc_row_at(r: &rusqlite::Row<'_>, at: usize) -> Result<(String, DocRow), StoreError> {
    let id: String = r.get(at)?;
    let tree: Vec<u8> = r.get(at + 3)?;
    let row = DocRow {
        key: r.get(at + 1)?,
        seq: r.get::<_, i64>(at + 2)? as u64,
        tree: decode_tree(&id, &tree)?,
        winner: r.get(at + 4)?,
        winner_row: r.get(at + 5)?,
        winner_body: None,
    };
    Ok((id, row))
}

/// Reads a row selected with [`DOC_COLUMNS_WITH_BODY`].
pub(super) fn doc_row_with_body(r: &rusqlite::Row<'_>) -> Result<(String, DocRow), StoreError> {
    doc_row_with_body_at(r, 0)
}

/// [`doc_row_with_body`] of columns that start at `at`.
pub(super) fn doc_row_with_body_at(
    r: &rusqlite::Row<'_>,
    at: usize,
) -> Result<(String, DocRow), StoreError> {
    let (id, mut row) = doc_row_at(r, at)?;
    let body: Option<BodyText> = r.get(at + 6)?;
    row.winner_body = body
        .map(|BodyText(b)| Ok::<_, rusqlite::Error>((b, r.get(at + 7)?)))
        .transpose()?;
    Ok((id, row))
}

pub(super) fn read_rows(
    stmt: &mut rusqlite::CachedStatement<'_>,
    args: impl rusqlite::Params,
    with_bodies: bool,
    each: &mut RowVisitor<'_>,
) -> Result<(), StoreError> {
    let mut cursor = stmt.query(args)?;
    while let Some(r) = cursor.next()? {
        let (id, row) = if with_bodies {
            doc_row_with_body(r)?
        } else {
            doc_row(r)?
        };
        each(id, row)?;
    }
    Ok(())
}

/// ` AND id >= ?n` and the like, its argument pushed to `args`.
pub(super) fn bound_sql(
    bound: &Bound<String>,
    incl: &str,
    excl: &str,
    args: &mut Vec<SqlValue>,
) -> String {
    match bound {
        Bound::Included(k) => {
            args.push(SqlValue::Text(k.clone()));
            format!(" AND id {incl} ?{}", args.len())
        }
        Bound::Excluded(k) => {
            args.push(SqlValue::Text(k.clone()));
            format!(" AND id {excl} ?{}", args.len())
        }
        Bound::Unbounded => String::new(),
    }
}

pub(super) fn range_sql(
    lo: &Bound<String>,
    hi: &Bound<String>,
    args: &mut Vec<SqlValue>,
) -> String {
    let mut filter = bound_sql(lo, ">=", ">", args);
    filter.push_str(&bound_sql(hi, "<=", "<", args));
    filter
}

/// `{head}` (a `SELECT ... WHERE <condition>`) narrowed to the page's ids,
/// ordered and cut by its skip and limit; the arguments go to `args`.
pub(super) fn id_page_sql(head: &str, page: &IdPage<'_>, args: &mut Vec<SqlValue>) -> String {
    let filter = range_sql(page.lo, page.hi, args);
    let order = if page.descending { "DESC" } else { "ASC" };
    args.push(SqlValue::Integer(sql_int(page.limit)));
    let limit_arg = args.len();
    args.push(SqlValue::Integer(sql_int(page.skip)));
    let skip_arg = args.len();
    format!("{head}{filter} ORDER BY id {order} LIMIT ?{limit_arg} OFFSET ?{skip_arg}")
}

pub(super) fn sql_int(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

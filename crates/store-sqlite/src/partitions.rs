//! A partition's counts from a SQLite file.

use rusqlite::params;

use crate::body_sql::BodyLen;
use store::{PartitionInfo, StoreError, partition_range};

/// Bytes of a partition's live documents' bodies (as JSON, uncompressed:
/// CouchDB's external size), inside a write.
pub(super) fn partition_size(
    conn: &rusqlite::Connection,
    partition: &str,
) -> Result<u64, StoreError> {
    Ok(partition_counts(conn, partition)?.external_size)
}

pub(super) fn partition_counts(
    conn: &rusqlite::Connection,
    partition: &str,
) -> Result<PartitionInfo, StoreError> {
    let (start, end) = partition_range(partition);
    let mut stmt = conn.prepare_cached(
        "SELECT d.deleted, r.body FROM docs d JOIN revs r ON r.row = d.winner_row
         WHERE d.id >= ?1 AND d.id < ?2",
    )?;
    let mut rows = stmt.query(params![start, end])?;
    let mut info = PartitionInfo {
        doc_count: 0,
        doc_del_count: 0,
        external_size: 0,
    };
    while let Some(row) = rows.next()? {
        if row.get::<_, bool>(0)? {
            info.doc_del_count += 1;
        } else {
            info.doc_count += 1;
            let BodyLen(len) = row.get(1)?;
            info.external_size += len.max(0) as u64;
        }
    }
    Ok(info)
}

//! Partitioned databases (`PUT /db?partitioned=true`): every document id
//! is `partition:id`, and a partition is the range of ids with its prefix,
//! counted and listed on its own.

use rusqlite::params;

use crate::body::BodyLen;
use crate::{Database, StoreError};

/// A partition's documents (`GET /db/_partition/{partition}`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionInfo {
    pub doc_count: u64,
    pub doc_del_count: u64,
    /// Bytes of the live documents' bodies.
    pub external_size: u64,
}

/// The ids of a partition: from `partition:` up to (not including) the
/// next prefix (`:` is followed by `;`).
pub fn partition_range(partition: &str) -> (String, String) {
    (format!("{partition}:"), format!("{partition};"))
}

/// Bytes of a partition's live documents' bodies (as JSON, uncompressed:
/// CouchDB's external size), inside a write.
pub(crate) fn partition_size(
    conn: &rusqlite::Connection,
    partition: &str,
) -> Result<u64, StoreError> {
    Ok(partition_counts(conn, partition)?.external_size)
}

pub(crate) fn partition_counts(
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

impl Database {
    pub async fn partition_info(&self, partition: &str) -> Result<PartitionInfo, StoreError> {
        let partition = partition.to_string();
        self.read(move |rows| rows.partition_counts(&partition))
            .await
    }
}

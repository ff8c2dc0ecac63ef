//! Partitioned databases (`PUT /db?partitioned=true`): every document id
//! is `partition:id`, and a partition is the range of ids with its prefix,
//! counted and listed on its own.

use rusqlite::params;

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

impl Database {
    pub async fn partition_info(&self, partition: &str) -> Result<PartitionInfo, StoreError> {
        let (start, end) = partition_range(partition);
        self.read(move |conn| {
            let (live, deleted, bytes): (i64, i64, i64) = conn
                .prepare_cached(
                    "SELECT COALESCE(SUM(d.deleted = 0), 0), COALESCE(SUM(d.deleted != 0), 0),
                            COALESCE(SUM(CASE WHEN d.deleted = 0 THEN length(r.body) ELSE 0 END), 0)
                     FROM docs d JOIN revs r ON r.row = d.winner_row
                     WHERE d.id >= ?1 AND d.id < ?2",
                )?
                .query_row(params![start, end], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?))
                })?;
            Ok(PartitionInfo {
                doc_count: live.max(0) as u64,
                doc_del_count: deleted.max(0) as u64,
                external_size: bytes.max(0) as u64,
            })
        })
        .await
    }
}

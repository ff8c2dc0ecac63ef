//! Partitioned databases (`PUT /db?partitioned=true`): every document id
//! is `partition:id`, and a partition is the range of ids with its prefix,
//! counted and listed on its own.

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
        let partition = partition.to_string();
        self.read(move |rows| rows.partition_counts(&partition))
            .await
    }
}

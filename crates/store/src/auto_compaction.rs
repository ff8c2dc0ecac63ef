//! Automatic compaction, as CouchDB's compaction daemon (smoosh): the
//! databases written since the last look are checked every interval, and
//! those whose file is mostly garbage are compacted in the background, one
//! at a time, with pauses between compaction steps so requests keep the
//! writer and the disk.

use std::time::Duration;

use crate::{Store, StoreError};

/// When a database is compacted without being asked.
#[derive(Debug, Clone, PartialEq)]
pub struct AutoCompaction {
    /// Compact once at least this share of the file (0 to 1) is garbage.
    /// CouchDB's `ratio_dbs` channel compacts at a file twice its live
    /// data: 0.5.
    pub min_garbage: f64,
    /// Files smaller than this are left alone: compacting them gains little.
    pub min_file_size: u64,
    /// How often written databases are looked at.
    pub check_interval: Duration,
    /// The pause between two compaction steps.
    pub pause: Duration,
}

impl Default for AutoCompaction {
    fn default() -> AutoCompaction {
        AutoCompaction {
            min_garbage: 0.5,
            min_file_size: 1 << 20,
            check_interval: Duration::from_secs(60),
            pause: Duration::from_millis(20),
        }
    }
}

impl Store {
    /// Compacts written databases that hold too much garbage, until `stop`
    /// turns true.
    pub async fn compact_automatically(
        &self,
        settings: AutoCompaction,
        mut stop: tokio::sync::watch::Receiver<bool>,
    ) {
        loop {
            tokio::select! {
                _ = tokio::time::sleep(settings.check_interval) => {}
                _ = async { stop.wait_for(|s| *s).await.is_ok() } => return,
            }
            for name in self.inner.live.events.take_written() {
                if *stop.borrow() {
                    return;
                }
                if let Err(e) = self.compact_if_worth_it(&name, &settings).await {
                    tracing::warn!(db = %name, error = %e, "automatic compaction failed");
                }
            }
        }
    }

    async fn compact_if_worth_it(
        &self,
        name: &str,
        settings: &AutoCompaction,
    ) -> Result<(), StoreError> {
        // Most written databases are small: their file says so without
        // opening them.
        if self.file_len(name).await < settings.min_file_size {
            return Ok(());
        }
        let db = match self.db(name).await {
            Ok(db) => db,
            // Deleted since it was written.
            Err(StoreError::DbNotFound(_)) => return Ok(()),
            Err(e) => return Err(e),
        };
        let before = db.garbage().await?;
        if before.file_size < settings.min_file_size || before.fraction() < settings.min_garbage {
            return Ok(());
        }
        tracing::info!(
            db = %name,
            file_size = before.file_size,
            garbage = before.garbage,
            "compacting automatically"
        );
        db.compact_paced(settings.pause).await?;
        let after = db.garbage().await?;
        tracing::info!(db = %name, file_size = after.file_size, "compacted automatically");
        Ok(())
    }
}

//! Whether the store can still do its job, for `/_up`: a load balancer must
//! stop sending traffic to a server whose disk went read-only or full.

use std::io::Write;

use crate::{Store, StoreError};

/// The outcome of one probe of the data folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Health {
    /// `Err` with the reason when the data folder cannot be listed or the
    /// server uuid read back.
    pub read: Result<(), String>,
    /// `Err` with the reason when a file cannot be created, written,
    /// synced and removed in the data folder.
    pub write: Result<(), String>,
}

impl Health {
    pub fn is_ok(&self) -> bool {
        self.read.is_ok() && self.write.is_ok()
    }
}

impl Store {
    /// Probes reading and writing the data folder, off the async threads.
    pub async fn health(&self) -> Health {
        let store = self.clone();
        tokio::task::spawn_blocking(move || Health {
            read: store.probe_read().map_err(|e| e.to_string()),
            write: store.probe_write().map_err(|e| e.to_string()),
        })
        .await
        .unwrap_or_else(|e| Health {
            read: Err(format!("probe failed: {e}")),
            write: Err(format!("probe failed: {e}")),
        })
    }

    /// The data folder lists, and the backend reads what it must.
    fn probe_read(&self) -> Result<(), StoreError> {
        std::fs::read_dir(self.data_dir())?.next().transpose()?;
        self.backend().check_read()
    }

    fn probe_write(&self) -> Result<(), StoreError> {
        let path = self
            .data_dir()
            .join(format!(".health-{}", uuid::Uuid::new_v4().simple()));
        let written = std::fs::File::create(&path).and_then(|mut file| {
            file.write_all(b"ok")?;
            file.sync_all()
        });
        let removed = std::fs::remove_file(&path);
        written?;
        removed?;
        self.backend().check_write()
    }
}

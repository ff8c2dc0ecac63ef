//! Recliner's storage: every database of a server, one SQLite file each.
//!
//! This crate will own databases (create, delete, list, open lazily),
//! documents with their revision trees and bodies, local documents,
//! content-addressed attachments, the per-database sequence and changes feed
//! with its wake-ups, database metadata, compaction and durability. It knows
//! nothing of HTTP: its public surface is the wire-level operations the HTTP
//! API and the replicator call (`bulk_docs`, `get`, `changes`, `all_docs`,
//! `revs_diff`, `bulk_get`, local documents, `info`).
//!
//! Today it owns the data folder and the server's identity (its uuid).

mod server_uuid;

use std::path::{Path, PathBuf};

pub use server_uuid::ServerUuidError;

/// Why the store could not be opened or used.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot use data folder {path}: {source}")]
    DataDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    ServerUuid(#[from] ServerUuidError),
}

/// All databases of one Recliner server, rooted in a data folder.
#[derive(Debug)]
pub struct Store {
    data_dir: PathBuf,
    server_uuid: String,
}

impl Store {
    /// Opens (creating if needed) the data folder and the server identity in it.
    pub fn open(data_dir: impl Into<PathBuf>) -> Result<Store, StoreError> {
        let data_dir = data_dir.into();
        std::fs::create_dir_all(&data_dir).map_err(|source| StoreError::DataDir {
            path: data_dir.clone(),
            source,
        })?;
        let server_uuid = server_uuid::load_or_create(&data_dir)?;
        Ok(Store {
            data_dir,
            server_uuid,
        })
    }

    /// The folder holding every database file.
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// This server's uuid (32 lowercase hex digits): generated once, kept in
    /// the data folder, and part of every replication id this server computes.
    pub fn server_uuid(&self) -> &str {
        &self.server_uuid
    }
}

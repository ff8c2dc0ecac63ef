//! The databases of a server as SQLite files in its data folder: one file
//! per database (named from the database's name), its write-ahead log, and
//! a folder of index files beside it.

use std::path::PathBuf;

use crate::db::SqliteDb;
use store::Durability;
use store::backend::{DbBackend, NewDb, StoreBackend};
use store::{StoreError, name};

/// Every database of a server, each in a file of its own.
#[derive(Debug)]
pub struct SqliteStore {
    data_dir: PathBuf,
    server_uuid: String,
    durability: Durability,
}

impl SqliteStore {
    /// The data folder's databases; its `server-uuid` file is created on first use.
    pub fn open(data_dir: PathBuf, durability: Durability) -> Result<SqliteStore, StoreError> {
        std::fs::create_dir_all(&data_dir).map_err(|source| StoreError::DataDir {
            path: data_dir.clone(),
            source,
        })?;
        let server_uuid = store::load_or_create_server_uuid(&data_dir)?;
        Ok(SqliteStore {
            data_dir,
            server_uuid,
            durability,
        })
    }

    fn path_of(&self, name: &str) -> PathBuf {
        self.data_dir.join(name::file_name(name))
    }
}

impl StoreBackend for SqliteStore {
    fn server_uuid(&self) -> &str {
        &self.server_uuid
    }

    fn create_db(&self, name: &str, setup: &NewDb<'_>) -> Result<Box<dyn DbBackend>, StoreError> {
        let path = self.path_of(name);
        if path.exists() {
            return Err(StoreError::DbExists(name.to_string()));
        }
        Ok(Box::new(SqliteDb::create(
            name,
            &path,
            self.durability,
            setup,
        )?))
    }

    fn open_db(&self, name: &str) -> Result<Box<dyn DbBackend>, StoreError> {
        Ok(Box::new(SqliteDb::open(
            name,
            &self.path_of(name),
            self.durability,
        )?))
    }

    fn exists(&self, name: &str) -> Result<bool, StoreError> {
        Ok(self.path_of(name).exists())
    }

    fn delete_db(&self, name: &str) -> Result<(), StoreError> {
        let path = self.path_of(name);
        if !path.exists() {
            return Err(StoreError::DbNotFound(name.to_string()));
        }
        for suffix in ["", "-wal", "-shm"] {
            let mut file = path.as_os_str().to_owned();
            file.push(suffix);
            match std::fs::remove_file(PathBuf::from(file)) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e.into()),
            }
        }
        // Its indexes go with it.
        let mut indexes = path.as_os_str().to_owned();
        indexes.push("-indexes");
        match std::fs::remove_dir_all(PathBuf::from(indexes)) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::warn!(db = %name, error = %e, "a deleted database's indexes stay on disk")
            }
        }
        Ok(())
    }

    fn list_dbs(&self) -> Result<Vec<String>, StoreError> {
        let mut names = Vec::new();
        for entry in std::fs::read_dir(&self.data_dir)? {
            let entry = entry?;
            if let Some(name) = entry.file_name().to_str().and_then(name::name_from_file) {
                names.push(name);
            }
        }
        names.sort();
        Ok(names)
    }

    fn check_read(&self) -> Result<(), StoreError> {
        let uuid = std::fs::read_to_string(self.data_dir.join("server-uuid"))?;
        if uuid.trim() != self.server_uuid {
            return Err(StoreError::Corrupt {
                db: String::new(),
                detail: "the server uuid file changed".into(),
            });
        }
        Ok(())
    }

    fn check_write(&self) -> Result<(), StoreError> {
        // The database files are in the data folder, which is probed.
        Ok(())
    }

    fn db_size(&self, name: &str) -> u64 {
        let path = self.path_of(name);
        let mut wal = path.as_os_str().to_owned();
        wal.push("-wal");
        [path, PathBuf::from(wal)]
            .iter()
            .map(|p| std::fs::metadata(p).map_or(0, |m| m.len()))
            .sum()
    }
}

//! One process per data folder: the server, and the commands that open
//! databases directly (`recliner dump DB`), hold an exclusive lock on a
//! file in it, so two writers never share a database file.

use std::fs::{File, OpenOptions, TryLockError};
use std::path::Path;

use crate::StoreError;

/// The lock file's name in the data folder.
const LOCK_FILE: &str = "recliner.lock";

/// Held while the process uses the data folder; released on drop (and by
/// the system when the process ends, however it ends).
#[derive(Debug)]
pub struct DataDirLock {
    _file: File,
}

impl DataDirLock {
    /// Takes the lock, or says that another process holds it.
    pub fn acquire(data_dir: &Path) -> Result<DataDirLock, StoreError> {
        std::fs::create_dir_all(data_dir).map_err(|source| StoreError::DataDir {
            path: data_dir.to_path_buf(),
            source,
        })?;
        let path = data_dir.join(LOCK_FILE);
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|source| StoreError::DataDir {
                path: path.clone(),
                source,
            })?;
        match file.try_lock() {
            Ok(()) => Ok(DataDirLock { _file: file }),
            Err(TryLockError::WouldBlock) => Err(StoreError::DataDir {
                path: data_dir.to_path_buf(),
                source: std::io::Error::new(
                    std::io::ErrorKind::WouldBlock,
                    "another recliner process (a server, or a dump or load) is using this data folder",
                ),
            }),
            Err(TryLockError::Error(source)) => Err(StoreError::DataDir { path, source }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_is_refused_until_the_first_lets_go() {
        let dir = std::env::temp_dir().join(format!("recliner-lock-{}", uuid::Uuid::new_v4()));
        let first = DataDirLock::acquire(&dir).expect("the first lock");
        let second = DataDirLock::acquire(&dir).expect_err("a second lock");
        assert!(
            second.to_string().contains("another recliner process"),
            "{second}"
        );
        drop(first);
        assert!(DataDirLock::acquire(&dir).is_ok());
        let _ = std::fs::remove_dir_all(&dir);
    }
}

//! The server's persistent uuid, kept in a small file in the data folder;
//! and the node's, the same way (nodes sharing a store tell each other
//! apart by it, and a node started again on its folder is the same node).

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// The file name; it cannot clash with a database file, which ends in `.sqlite`.
const FILE_NAME: &str = "server-uuid";

/// The node's uuid file, beside the server's.
const NODE_FILE_NAME: &str = "node-uuid";

/// Why the server uuid could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum ServerUuidError {
    #[error("cannot read or write the server uuid file {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("the server uuid file {path} is corrupt: expected 32 hex digits")]
    Corrupt { path: PathBuf },
}

/// Reads the uuid, or creates it atomically (a synced temporary file linked
/// into place) so a crash never leaves a half-written identity behind.
pub fn load_or_create(data_dir: &Path) -> Result<String, ServerUuidError> {
    load_or_create_named(data_dir, FILE_NAME)
}

/// This node's uuid in `data_dir`, created on first use: on a shared store
/// it names the node's leases, so a node restarted on its data folder
/// takes its own jobs back at once.
pub fn node_uuid(data_dir: &Path) -> Result<String, ServerUuidError> {
    std::fs::create_dir_all(data_dir).map_err(|source| ServerUuidError::Io {
        path: data_dir.to_path_buf(),
        source,
    })?;
    load_or_create_named(data_dir, NODE_FILE_NAME)
}

fn load_or_create_named(data_dir: &Path, file_name: &str) -> Result<String, ServerUuidError> {
    let path = data_dir.join(file_name);
    let io_err = |source| ServerUuidError::Io {
        path: path.clone(),
        source,
    };
    match fs::read_to_string(&path) {
        Ok(text) => {
            let uuid = text.trim();
            if uuid.len() == 32 && uuid.bytes().all(|b| b.is_ascii_hexdigit()) {
                Ok(uuid.to_ascii_lowercase())
            } else {
                Err(ServerUuidError::Corrupt { path: path.clone() })
            }
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let uuid = uuid::Uuid::new_v4().simple().to_string();
            let tmp = data_dir.join(format!("{file_name}.{uuid}.tmp"));
            let mut file = fs::File::create(&tmp).map_err(io_err)?;
            file.write_all(format!("{uuid}\n").as_bytes())
                .map_err(io_err)?;
            file.sync_all().map_err(io_err)?;
            // A hard link never replaces an existing file: if another process
            // created the identity meanwhile, theirs wins and we read it.
            let linked = fs::hard_link(&tmp, &path);
            let _ = fs::remove_file(&tmp);
            match linked {
                Ok(()) => {
                    if let Ok(dir) = fs::File::open(data_dir) {
                        // Make the new name itself durable; not every platform allows it.
                        let _ = dir.sync_all();
                    }
                    Ok(uuid)
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    load_or_create_named(data_dir, file_name)
                }
                Err(e) => Err(io_err(e)),
            }
        }
        Err(e) => Err(io_err(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "recliner-uuid-{name}-{}",
            uuid::Uuid::new_v4().simple()
        ));
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn the_uuid_is_created_once_and_then_read_back() {
        let dir = temp_dir("once");
        let first = load_or_create(&dir).unwrap();
        assert_eq!(first.len(), 32);
        assert_eq!(load_or_create(&dir).unwrap(), first);
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn concurrent_first_starts_agree_on_one_identity() {
        let dir = temp_dir("race");
        let uuids: Vec<String> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..8)
                .map(|_| s.spawn(|| load_or_create(&dir).unwrap()))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(uuids.iter().all(|u| u == &uuids[0]), "{uuids:?}");
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_corrupt_uuid_file_is_an_error_not_a_new_identity() {
        let dir = temp_dir("corrupt");
        fs::write(dir.join(FILE_NAME), "not a uuid").unwrap();
        assert!(matches!(
            load_or_create(&dir),
            Err(ServerUuidError::Corrupt { .. })
        ));
        fs::remove_dir_all(dir).unwrap();
    }
}

//! The conformance suite's backend on SQLite files, shared by its test binaries.

use std::path::Path;

use store::{Store, StoreOptions};
use store_conformance::{Backend, Place};

/// Each test's databases in a data folder of their own.
pub struct Sqlite;

/// The data folder is the test's folder: removed with it.
#[derive(Debug)]
struct DataFolder;

impl Backend for Sqlite {
    fn create(&self, _id: &str, dir: &Path, options: StoreOptions) -> (Store, Box<dyn Place>) {
        let store = store_sqlite::open_with(dir, options).expect("open a data folder");
        (store, Box::new(DataFolder))
    }
}

impl Place for DataFolder {
    fn reopen(&self, dir: &Path, options: StoreOptions) -> Store {
        store_sqlite::open_with(dir, options).expect("reopen a data folder")
    }

    fn keeps_db_files(&self) -> bool {
        true
    }
}

pub fn sqlite() -> Option<Sqlite> {
    Some(Sqlite)
}

//! The SQLite backend: one file per database, row storage for the rules
//! of the store (`crate::rows`).

mod doc_rows;
mod read_rows;
mod write_rows;

pub(crate) use doc_rows::decode_tree;

impl From<rusqlite::Error> for crate::StoreError {
    fn from(e: rusqlite::Error) -> crate::StoreError {
        crate::StoreError::Backend(Box::new(e))
    }
}

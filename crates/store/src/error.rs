//! What can go wrong in the store, typed so the HTTP layer can map each case
//! to CouchDB's status, `error` and `reason` in its one error table.

use std::path::PathBuf;

use crate::ServerUuidError;

/// A failure of a store operation as a whole.
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
    /// CouchDB: 404 `not_found`, "Database does not exist."
    #[error("Database does not exist.")]
    DbNotFound(String),
    /// CouchDB: 412 `file_exists`.
    #[error("The database could not be created, the file already exists.")]
    DbExists(String),
    /// CouchDB: 400 `illegal_database_name`.
    #[error("{}", crate::name::illegal_name_reason(.0))]
    IllegalDbName(String),
    /// CouchDB: 404 `not_found` with reason `missing` or `deleted`.
    #[error("{0}")]
    DocNotFound(&'static str),
    /// A refused request or document: CouchDB's 400 family, with its
    /// `error` (`bad_request`, `illegal_docid`, `doc_validation`) and reason.
    #[error("{reason}")]
    Invalid { error: &'static str, reason: String },
    /// CouchDB: 409 `conflict`.
    #[error("Document update conflict.")]
    Conflict,
    /// CouchDB: 413 `attachment_too_large`, reason = the attachment's name.
    #[error("{0}")]
    AttachmentTooLarge(String),
    /// CouchDB: 412 `missing_stub` (an attachment stub with nothing to keep).
    #[error("{0}")]
    MissingStub(String),
    /// The database file holds something we cannot read.
    #[error("corrupt database {db}: {detail}")]
    Corrupt { db: String, detail: String },
    #[error("database error: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
    /// One document's write was refused for a reason other than a conflict
    /// (`forbidden`, `unauthorized`, `doc_validation`, ...).
    #[error("{}", .0.reason)]
    Refused(DocFailure),
    /// A group commit this write was part of failed; nothing of it was written.
    #[error("commit failed: {0}")]
    CommitFailed(String),
}

impl StoreError {
    /// A 400 `bad_request`.
    pub fn bad_request(reason: impl Into<String>) -> StoreError {
        StoreError::Invalid {
            error: "bad_request",
            reason: reason.into(),
        }
    }
}

impl From<DocFailure> for StoreError {
    fn from(failure: DocFailure) -> StoreError {
        match failure.error {
            "conflict" => StoreError::Conflict,
            "missing_stub" => StoreError::MissingStub(failure.reason),
            _ => StoreError::Refused(failure),
        }
    }
}

/// Why one document of a batch was not written; the others still are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocFailure {
    /// CouchDB's `error`: `conflict`, `missing_stub`, `forbidden`, ...
    pub error: &'static str,
    pub reason: String,
}

impl DocFailure {
    pub fn conflict() -> DocFailure {
        DocFailure {
            error: "conflict",
            reason: "Document update conflict.".into(),
        }
    }
}

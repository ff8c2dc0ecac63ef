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
    Invalid { error: ErrorKind, reason: String },
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
    /// The storage backend failed (a SQLite or PostgreSQL error): a 500.
    #[error("database error: {0}")]
    Backend(Box<dyn std::error::Error + Send + Sync>),
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
            error: ErrorKind::BadRequest,
            reason: reason.into(),
        }
    }
}

/// CouchDB's `error` names for a refused document or request: a closed set,
/// so the HTTP layer's error table can map every one of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// 400 `bad_request`.
    BadRequest,
    /// 400 `illegal_docid`.
    IllegalDocId,
    /// 400 `doc_validation`.
    DocValidation,
    /// 409 `conflict`.
    Conflict,
    /// 412 `missing_stub`.
    MissingStub,
    /// 403 `forbidden` (a validation function's refusal).
    Forbidden,
    /// 401 `unauthorized`.
    Unauthorized,
    /// CouchDB's generic `error` (a malformed local revision, say).
    Error,
    /// 500 `unknown_error`: a validation function threw something other
    /// than `{forbidden}` or `{unauthorized}`.
    UnknownError,
    /// 400 `invalid_design_doc`: a design document CouchDB would refuse.
    InvalidDesignDoc,
    /// 400 `compilation_error`: a design document's map function does not compile.
    CompilationError,
    /// 400 `illegal_partition`: a partition name CouchDB refuses.
    IllegalPartition,
    /// 403 `partition_overflow`: the partition is at its size limit.
    PartitionOverflow,
    /// 403 `ddocs_with_access`: a design document naming readers in a
    /// database with per-document access.
    DdocsWithAccess,
}

impl ErrorKind {
    /// The `error` field CouchDB sends.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::BadRequest => "bad_request",
            ErrorKind::IllegalDocId => "illegal_docid",
            ErrorKind::DocValidation => "doc_validation",
            ErrorKind::Conflict => "conflict",
            ErrorKind::MissingStub => "missing_stub",
            ErrorKind::Forbidden => "forbidden",
            ErrorKind::Unauthorized => "unauthorized",
            ErrorKind::Error => "error",
            ErrorKind::UnknownError => "unknown_error",
            ErrorKind::InvalidDesignDoc => "invalid_design_doc",
            ErrorKind::CompilationError => "compilation_error",
            ErrorKind::IllegalPartition => "illegal_partition",
            ErrorKind::PartitionOverflow => "partition_overflow",
            ErrorKind::DdocsWithAccess => "ddocs_with_access",
        }
    }
}

impl std::fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<ErrorKind> for String {
    fn from(kind: ErrorKind) -> String {
        kind.as_str().to_string()
    }
}

impl PartialEq<&str> for ErrorKind {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl serde::Serialize for ErrorKind {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl From<DocFailure> for StoreError {
    fn from(failure: DocFailure) -> StoreError {
        match failure.error {
            ErrorKind::Conflict => StoreError::Conflict,
            ErrorKind::MissingStub => StoreError::MissingStub(failure.reason),
            _ => StoreError::Refused(failure),
        }
    }
}

/// Why one document of a batch was not written; the others still are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocFailure {
    /// CouchDB's `error`: `conflict`, `missing_stub`, `forbidden`, ...
    pub error: ErrorKind,
    pub reason: String,
}

impl DocFailure {
    pub fn conflict() -> DocFailure {
        DocFailure {
            error: ErrorKind::Conflict,
            reason: "Document update conflict.".into(),
        }
    }
}

/// SQLite's errors are a backend's failures. Here rather than in the SQLite
/// backend because the indexes (`index`), node-local files whatever the
/// backend, are SQLite files too, and the orphan rule lets only this crate
/// convert into its own error.
impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> StoreError {
        StoreError::Backend(Box::new(e))
    }
}

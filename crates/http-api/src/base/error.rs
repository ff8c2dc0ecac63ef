//! The one error table: every failure becomes `(status, "error", "reason")`
//! here and nowhere else, as CouchDB's `chttpd:error_info/1` does.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use store::StoreError;

use crate::base::response::json_response;

/// An API failure, rendered as CouchDB's `{"error": ..., "reason": ...}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiError {
    /// 404 `not_found`, with CouchDB's reason (`missing`, `deleted`, `Database does not exist.`).
    NotFound(String),
    /// 400 `bad_request`.
    BadRequest(String),
    /// 400 with a more specific `error` (`illegal_docid`, `doc_validation`, ...).
    Invalid { error: &'static str, reason: String },
    /// 400 `illegal_database_name`.
    IllegalDbName(String),
    /// 401 `unauthorized`.
    Unauthorized(String),
    /// 403 `forbidden`.
    Forbidden(String),
    /// 405 `method_not_allowed`; carries the methods the route does allow.
    MethodNotAllowed(&'static str),
    /// 409 `conflict`.
    Conflict,
    /// 412 `file_exists`.
    FileExists,
    /// 412 `missing_stub`.
    MissingStub(String),
    /// 412 `precondition_failed`.
    PreconditionFailed(String),
    /// 413 `too_large`: the request body is over `max_http_request_size`.
    RequestTooLarge,
    /// 413 `document_too_large`, reason = the document id, as CouchDB.
    DocumentTooLarge(String),
    /// 413 `attachment_too_large`, reason = the attachment's name.
    AttachmentTooLarge(String),
    /// 415 `bad_content_type`.
    BadContentType(String),
    /// 416 `requested_range_not_satisfiable`.
    RangeNotSatisfiable,
    /// 501 `not_implemented`.
    NotImplemented(String),
    /// 409 with `not_found`/`missing_rev`: CouchDB's answer to an attachment
    /// write against a revision the document lacks.
    MissingRevConflict,
    /// 500 with a named error and a reason safe to show (no credentials,
    /// no internals): a replication that failed, for instance.
    Failed { error: &'static str, reason: String },
    /// Any status with a named error: Mango's answers (400s, 503 for an
    /// absent text search service, CouchDB's few 500s).
    Status {
        status: StatusCode,
        error: &'static str,
        reason: String,
    },
    /// 500 `unknown_error`: a fault of ours. The details are logged, not sent.
    Internal(String),
}

impl ApiError {
    /// The single mapping from an error to its status, `error` and `reason`.
    pub fn error_info(&self) -> (StatusCode, &'static str, String) {
        use ApiError::*;
        match self {
            NotFound(reason) => (StatusCode::NOT_FOUND, "not_found", reason.clone()),
            BadRequest(reason) => (StatusCode::BAD_REQUEST, "bad_request", reason.clone()),
            Invalid { error, reason } => (StatusCode::BAD_REQUEST, error, reason.clone()),
            IllegalDbName(name) => (
                StatusCode::BAD_REQUEST,
                "illegal_database_name",
                store::name::illegal_name_reason(name),
            ),
            Unauthorized(reason) => (StatusCode::UNAUTHORIZED, "unauthorized", reason.clone()),
            Forbidden(reason) => (StatusCode::FORBIDDEN, "forbidden", reason.clone()),
            MethodNotAllowed(allowed) => (
                StatusCode::METHOD_NOT_ALLOWED,
                "method_not_allowed",
                format!("Only {allowed} allowed"),
            ),
            Conflict => (
                StatusCode::CONFLICT,
                "conflict",
                "Document update conflict.".into(),
            ),
            FileExists => (
                StatusCode::PRECONDITION_FAILED,
                "file_exists",
                "The database could not be created, the file already exists.".into(),
            ),
            MissingStub(reason) => (
                StatusCode::PRECONDITION_FAILED,
                "missing_stub",
                reason.clone(),
            ),
            PreconditionFailed(reason) => (
                StatusCode::PRECONDITION_FAILED,
                "precondition_failed",
                reason.clone(),
            ),
            RequestTooLarge => (
                StatusCode::PAYLOAD_TOO_LARGE,
                "too_large",
                "the request entity is too large".into(),
            ),
            DocumentTooLarge(id) => (
                StatusCode::PAYLOAD_TOO_LARGE,
                "document_too_large",
                id.clone(),
            ),
            AttachmentTooLarge(name) => (
                StatusCode::PAYLOAD_TOO_LARGE,
                "attachment_too_large",
                name.clone(),
            ),
            BadContentType(reason) => (
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "bad_content_type",
                reason.clone(),
            ),
            RangeNotSatisfiable => (
                StatusCode::RANGE_NOT_SATISFIABLE,
                "requested_range_not_satisfiable",
                "Requested range not satisfiable".into(),
            ),
            Failed { error, reason } => (StatusCode::INTERNAL_SERVER_ERROR, error, reason.clone()),
            Status {
                status,
                error,
                reason,
            } => (*status, error, reason.clone()),
            MissingRevConflict => (StatusCode::CONFLICT, "not_found", "missing_rev".into()),
            NotImplemented(reason) => (
                StatusCode::NOT_IMPLEMENTED,
                "not_implemented",
                reason.clone(),
            ),
            Internal(_) => (
                StatusCode::INTERNAL_SERVER_ERROR,
                "unknown_error",
                "An internal error occurred; see the server log.".into(),
            ),
        }
    }

    pub fn bad_request(reason: impl Into<String>) -> ApiError {
        ApiError::BadRequest(reason.into())
    }

    pub fn not_found(reason: impl Into<String>) -> ApiError {
        ApiError::NotFound(reason.into())
    }

    /// The answer to a request or document the store refused, by kind.
    pub fn refused(kind: store::ErrorKind, reason: String) -> ApiError {
        use store::ErrorKind::*;
        match kind {
            BadRequest => ApiError::BadRequest(reason),
            Conflict => ApiError::Conflict,
            MissingStub => ApiError::MissingStub(reason),
            Forbidden => ApiError::Forbidden(reason),
            PartitionOverflow | DdocsWithAccess => ApiError::Status {
                status: StatusCode::FORBIDDEN,
                error: kind.as_str(),
                reason,
            },
            Unauthorized => ApiError::Unauthorized(reason),
            UnknownError => ApiError::Failed {
                error: "unknown_error",
                reason,
            },
            IllegalDocId | DocValidation | Error | InvalidDesignDoc | CompilationError
            | IllegalPartition => ApiError::Invalid {
                error: kind.as_str(),
                reason,
            },
        }
    }
}

/// JSON a client or peer sent that CouchDB would not hold: its answer for
/// text it cannot read (numbers out of range included), and a clear 400
/// past the depth `ejson` reads.
impl From<ejson::JsonError> for ApiError {
    fn from(e: ejson::JsonError) -> ApiError {
        match e {
            ejson::JsonError::TooDeep => ApiError::bad_request(format!(
                "JSON is too deeply nested: at most {} levels",
                ejson::MAX_DEPTH
            )),
            ejson::JsonError::Syntax { .. } | ejson::JsonError::NumberOutOfRange { .. } => {
                ApiError::bad_request("invalid UTF-8 JSON")
            }
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> ApiError {
        match e {
            StoreError::DbNotFound(_) => ApiError::NotFound("Database does not exist.".into()),
            StoreError::DbExists(_) => ApiError::FileExists,
            StoreError::IllegalDbName(name) => ApiError::IllegalDbName(name),
            StoreError::DocNotFound(reason) => ApiError::NotFound(reason.into()),
            StoreError::Invalid { error, reason } => ApiError::refused(error, reason),
            StoreError::Conflict => ApiError::Conflict,
            StoreError::MissingStub(reason) => ApiError::MissingStub(reason),
            StoreError::AttachmentTooLarge(name) => ApiError::AttachmentTooLarge(name),
            StoreError::Refused(failure) => ApiError::refused(failure.error, failure.reason),
            other => ApiError::Internal(other.to_string()),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, error, reason) = self.error_info();
        if let ApiError::Internal(detail) = &self {
            tracing::error!(%detail, "request failed");
        }
        let mut response = json_response(status, &json!({"error": error, "reason": reason}));
        if let ApiError::MethodNotAllowed(allowed) = self {
            response
                .headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static(allowed));
        }
        response
    }
}

/// A design function that gave no answer, as CouchDB reports it: the
/// function's own error name and reason (500), 404 for a missing function,
/// `os_process_error` for one that ran too long or out of memory.
pub(crate) fn script_error(e: design_functions::JsError) -> ApiError {
    use design_functions::JsError;
    match e {
        JsError::Runtime { error, reason } if error == "not_found" => ApiError::NotFound(reason),
        // CouchDB answers these two names of a function's error with
        // their own statuses: no `provides` matches the `Accept` header,
        // and an update function asked with GET (no `Allow`: the function
        // decides, not the route).
        JsError::Runtime { error, reason } if error == "not_acceptable" => ApiError::Status {
            status: StatusCode::NOT_ACCEPTABLE,
            error: "not_acceptable",
            reason,
        },
        JsError::Runtime { error, reason } if error == "method_not_allowed" => ApiError::Status {
            status: StatusCode::METHOD_NOT_ALLOWED,
            error: "method_not_allowed",
            reason,
        },
        JsError::Runtime { error, reason } => ApiError::Failed {
            error: static_error_name(&error),
            reason,
        },
        JsError::Timeout(_) => ApiError::Failed {
            error: "os_process_error",
            reason: "OS process timed out.".into(),
        },
        JsError::OutOfMemory => ApiError::Failed {
            error: "os_process_error",
            reason: "The JavaScript function ran out of memory.".into(),
        },
        JsError::Internal(detail) => ApiError::Internal(detail),
    }
}

/// The error names functions produce, as the static words answers carry.
fn static_error_name(name: &str) -> &'static str {
    const KNOWN: &[&str] = &[
        "compilation_error",
        "invalid_require_path",
        "unnamed_error",
        "render_error",
        "rewrite_error",
        "reduce_overflow_error",
        "builtin_reduce_error",
        "unknown_builtin_reduce",
        "unknown_query_language",
        "Error",
        "TypeError",
        "ReferenceError",
        "SyntaxError",
        "RangeError",
        "EvalError",
        "URIError",
        "InternalError",
        "AggregateError",
    ];
    KNOWN
        .iter()
        .find(|known| **known == name)
        .copied()
        .unwrap_or("unknown_error")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn functions_errors_keep_couchdbs_statuses() {
        let runtime = |error: &str| design_functions::JsError::Runtime {
            error: error.into(),
            reason: "why".into(),
        };
        let cases = [
            ("not_found", 404, "not_found"),
            ("not_acceptable", 406, "not_acceptable"),
            ("method_not_allowed", 405, "method_not_allowed"),
            ("render_error", 500, "render_error"),
        ];
        for (error, status, name) in cases {
            let e = script_error(runtime(error));
            let (got, got_name, reason) = e.error_info();
            assert_eq!(
                (got.as_u16(), got_name, reason.as_str()),
                (status, name, "why")
            );
            // The function refused the method, not the route: no `Allow`.
            assert!(e.into_response().headers().get(header::ALLOW).is_none());
        }
    }

    #[test]
    fn store_errors_map_to_couchdbs_statuses() {
        let cases = [
            (
                StoreError::DbNotFound("x".into()),
                404,
                "not_found",
                "Database does not exist.",
            ),
            (
                StoreError::DbExists("x".into()),
                412,
                "file_exists",
                "The database could not be created, the file already exists.",
            ),
            (
                StoreError::DocNotFound("deleted"),
                404,
                "not_found",
                "deleted",
            ),
            (
                StoreError::Conflict,
                409,
                "conflict",
                "Document update conflict.",
            ),
            (
                StoreError::MissingStub("Invalid attachment stub in a for b".into()),
                412,
                "missing_stub",
                "Invalid attachment stub in a for b",
            ),
            (StoreError::bad_request("nope"), 400, "bad_request", "nope"),
            (
                StoreError::Invalid {
                    error: store::ErrorKind::IllegalDocId,
                    reason: "x".into(),
                },
                400,
                "illegal_docid",
                "x",
            ),
            (
                StoreError::CommitFailed("disk full at /secret/path".into()),
                500,
                "unknown_error",
                "An internal error occurred; see the server log.",
            ),
        ];
        for (store_error, status, error, reason) in cases {
            let (s, e, r) = ApiError::from(store_error).error_info();
            assert_eq!((s.as_u16(), e, r.as_str()), (status, error, reason));
        }
    }
}

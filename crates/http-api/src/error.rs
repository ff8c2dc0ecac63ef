//! The one error table: every failure becomes `(status, "error", "reason")`
//! here and nowhere else, as CouchDB's `chttpd:error_info/1` does.

use axum::Json;
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// An API failure, rendered as CouchDB's `{"error": ..., "reason": ...}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiError {
    /// 404 `not_found`, with CouchDB's reason (`missing`, `deleted`, `Database does not exist.`).
    NotFound(String),
    /// 400 `bad_request`.
    BadRequest(String),
    /// 405 `method_not_allowed`; carries the methods the route does allow.
    MethodNotAllowed(&'static str),
    /// 500 `unknown_error`: a fault of ours, logged, never a panic.
    Internal(String),
}

impl ApiError {
    /// The single mapping from an error to its status, `error` and `reason`.
    pub fn error_info(&self) -> (StatusCode, &'static str, String) {
        match self {
            ApiError::NotFound(reason) => (StatusCode::NOT_FOUND, "not_found", reason.clone()),
            ApiError::BadRequest(reason) => {
                (StatusCode::BAD_REQUEST, "bad_request", reason.clone())
            }
            ApiError::MethodNotAllowed(allowed) => (
                StatusCode::METHOD_NOT_ALLOWED,
                "method_not_allowed",
                format!("Only {allowed} allowed"),
            ),
            ApiError::Internal(reason) => (
                StatusCode::INTERNAL_SERVER_ERROR,
                "unknown_error",
                reason.clone(),
            ),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, error, reason) = self.error_info();
        if status.is_server_error() {
            tracing::error!(%error, %reason, "request failed");
        }
        let mut response =
            (status, Json(json!({"error": error, "reason": reason}))).into_response();
        if let ApiError::MethodNotAllowed(allowed) = self {
            response
                .headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static(allowed));
        }
        response
    }
}

/// Any path no route claims: a JSON 404, never HTML or an empty body.
pub(crate) async fn unknown_route(method: Method) -> Response {
    let error = ApiError::NotFound("missing".into());
    if method == Method::HEAD {
        // HEAD answers carry no body, only the status.
        let (status, _, _) = error.error_info();
        return status.into_response();
    }
    error.into_response()
}

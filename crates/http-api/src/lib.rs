//! The CouchDB REST API of Recliner, as an axum [`Router`].
//!
//! Handlers are thin: each one names its route in its doc header, extracts
//! the request, calls the store (or the replicator), and returns JSON. Every
//! failure goes through the one error table in [`error`], so status codes and
//! `{"error", "reason"}` bodies match CouchDB 3.x everywhere.
//!
//! This crate will grow the database, document, attachment, changes, bulk and
//! multipart endpoints; today it serves the server routes and answers every
//! other path with a CouchDB-style JSON error.

pub mod error;
mod server_routes;

use axum::Router;
use axum::http::{HeaderValue, header};
use axum::response::Response;
use store::Store;

pub use error::ApiError;

/// The CouchDB release whose API we follow; clients read it from `GET /`.
pub const COUCHDB_COMPAT_VERSION: &str = "3.5.0";

/// Everything a handler may need, shared by all requests.
#[derive(Debug, Clone)]
pub struct AppState {
    pub store: Store,
}

/// Builds the whole API.
pub fn router(state: AppState) -> Router {
    server_routes::routes()
        .fallback(error::unknown_route)
        .layer(axum::middleware::map_response(couchdb_headers))
        .with_state(state)
}

/// Headers CouchDB puts on every answer: clients and caches rely on
/// `Cache-Control: must-revalidate`, and `Server` names who answered.
async fn couchdb_headers(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("must-revalidate"),
    );
    headers.insert(
        header::SERVER,
        HeaderValue::from_static(concat!(
            "Recliner/",
            env!("CARGO_PKG_VERSION"),
            " (CouchDB/3.5.0 compatible)"
        )),
    );
    response
}

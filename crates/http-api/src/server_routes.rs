//! Server-level routes: `/` and `/_up`.

use axum::extract::State;
use axum::response::IntoResponse;
use axum::routing::{MethodRouter, get};
use axum::{Json, Router};
use serde_json::{Value, json};

use crate::{AppState, COUCHDB_COMPAT_VERSION, error::ApiError};

/// Optional features we advertise in `GET /`; grows as the API does.
const FEATURES: &[&str] = &[];

pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/", only_get(get(welcome)))
        .route("/_up", only_get(get(up)))
}

/// A route that answers only GET (and HEAD) and refuses the rest with
/// CouchDB's 405 `method_not_allowed`.
fn only_get(route: MethodRouter<AppState>) -> MethodRouter<AppState> {
    route.fallback(|| async { ApiError::MethodNotAllowed("GET,HEAD") })
}

/// # GET /
/// The welcome object: clients read `version` to pick their protocol, the
/// replicator reads `uuid`.
async fn welcome(State(state): State<AppState>) -> Json<Value> {
    Json(json!({
        "couchdb": "Welcome",
        "version": COUCHDB_COMPAT_VERSION,
        "uuid": state.store.server_uuid(),
        "features": FEATURES,
        "vendor": {"name": "Recliner", "version": env!("CARGO_PKG_VERSION")},
    }))
}

/// # GET /_up
/// Health check for load balancers, shaped as CouchDB 3's.
async fn up() -> impl IntoResponse {
    Json(json!({"status": "ok", "seeds": {}}))
}

#[cfg(test)]
mod tests {

    use axum::body::Body;
    use axum::http::{Request, StatusCode, header};
    use http_body_util::BodyExt;
    use store::Store;
    use tower::ServiceExt;

    use crate::{AppState, router};

    fn app() -> axum::Router {
        let dir = std::env::temp_dir().join(format!(
            "recliner-api-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let store = Store::open(&dir).unwrap();
        router(AppState { store })
    }

    async fn call(method: &str, uri: &str) -> (StatusCode, serde_json::Value) {
        let app = app();
        let response = app
            .oneshot(
                Request::builder()
                    .method(method)
                    .uri(uri)
                    .body(Body::empty())
                    .unwrap(),
            )
            .await
            .unwrap();
        let status = response.status();
        assert_eq!(
            response.headers().get(header::CONTENT_TYPE).unwrap(),
            "application/json",
            "{method} {uri} must answer JSON"
        );
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        (status, serde_json::from_slice(&bytes).unwrap())
    }

    #[tokio::test]
    async fn the_welcome_object_has_couchdbs_shape() {
        let (status, body) = call("GET", "/").await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(body["couchdb"], "Welcome");
        assert_eq!(body["vendor"]["name"], "Recliner");
        assert_eq!(body["uuid"].as_str().unwrap().len(), 32);
        assert!(body["features"].is_array());
    }

    #[tokio::test]
    async fn post_to_the_root_is_method_not_allowed() {
        let (status, body) = call("POST", "/").await;
        assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
        assert_eq!(body["error"], "method_not_allowed");
        assert_eq!(body["reason"], "Only GET,HEAD allowed");
    }

    #[tokio::test]
    async fn an_unknown_path_is_a_json_not_found() {
        let (status, body) = call("GET", "/_nothing/here").await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert_eq!(
            body,
            serde_json::json!({"error": "not_found", "reason": "missing"})
        );
    }
}

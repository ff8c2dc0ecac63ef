//! Server-level routes: `/`, `/_up`, `/_all_dbs`, `/_dbs_info`, `/_uuids`,
//! `/_session`, `/_utils`; the table of every server route (`routes`).

pub(crate) mod analyze;
pub(crate) mod reshard;
pub(crate) mod session;
pub(crate) mod uuids;

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, get, post};
use axum::{Json, Router};
use serde_json::{Value, json};

use crate::base::error::ApiError;
use crate::base::json_body::{read_json_object, require_json_content_type};
use crate::base::params::Query;
use crate::base::response::json_response;
use crate::{AppState, COUCHDB_COMPAT_VERSION};

/// Optional features we advertise in `GET /`; grows as the API does.
/// CouchDB's names: the JavaScript engine, partitioned databases, the
/// replication scheduler. (`reshard` is left out: the endpoints answer,
/// but nothing can be split.)
const FEATURES: &[&str] = &[
    "search",
    "nouveau",
    "quickjs",
    "access-ready",
    "partitioned",
    "scheduler",
];

/// CouchDB's cap on `/_uuids?count=`.
const MAX_UUIDS: u64 = 1000;

pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/", only(get(welcome), "GET,HEAD"))
        .route("/_up", only(get(up), "GET,HEAD"))
        .route("/_all_dbs", only(get(all_dbs), "GET,HEAD"))
        .route("/_uuids", only(get(uuids), "GET"))
        // CouchDB ignores what follows `/_uuids`.
        .route("/_uuids/{*rest}", only(get(uuids), "GET"))
        .route(
            "/_dbs_info",
            only(get(dbs_info_listed).post(dbs_info), "GET,HEAD,POST"),
        )
        .route("/favicon.ico", axum::routing::any(no_favicon))
        .route(
            "/_session",
            axum::routing::any(crate::server::session::session),
        )
        .route(
            "/_membership",
            only(get(crate::node::membership), "GET,HEAD"),
        )
        .route("/_nouveau_analyze", only(post(analyze::nouveau), "POST"))
        .route(
            "/_search_analyze",
            only(get(analyze::search).post(analyze::search), "GET,POST"),
        )
        .route("/_reshard", only(get(reshard::summary), "GET,HEAD"))
        .route("/_reshard/state", axum::routing::any(reshard::switch))
        .route("/_reshard/jobs", axum::routing::any(reshard::jobs))
        .route("/_reshard/jobs/{*id}", axum::routing::any(reshard::job))
        .route(
            "/_node/{node}/_smoosh/status",
            only(get(crate::node::smoosh_status), "GET,HEAD"),
        )
        .route("/_node/{node}", only(get(crate::node::node), "GET,HEAD"))
        .route(
            "/_node/{node}/_versions",
            only(get(crate::node::versions), "GET,HEAD"),
        )
        .route(
            "/_node/{node}/_system",
            only(get(crate::node::system), "GET,HEAD"),
        )
        .route(
            "/_node/{node}/_config",
            only(get(crate::node::config_all), "GET,HEAD"),
        )
        .route(
            "/_node/{node}/_restart",
            only(post(crate::node::restart), "POST"),
        )
        .route(
            "/_node/{node}/_config/{section}",
            axum::routing::any(crate::node::config_section),
        )
        .route(
            "/_node/{node}/_config/{section}/{key}",
            axum::routing::any(crate::node::config_key),
        )
        // CouchDB reads a GET's (empty) body as the replication to run.
        .route(
            "/_replicate",
            only(
                post(crate::replication::replicate)
                    .get(|| async { ApiError::bad_request("Missing request body") }),
                "POST",
            ),
        )
        .route("/_db_updates", axum::routing::any(db_updates))
        .route("/_utils", only(get(console_redirect), "GET,HEAD"))
        .route("/_utils/", only(get(console_file), "GET,HEAD"))
        .route("/_utils/{*file}", only(get(console_file), "GET,HEAD"))
        .route(
            "/_active_tasks",
            only(get(crate::replication::scheduler::active_tasks), "GET,HEAD"),
        )
        .route(
            "/_scheduler/jobs",
            only(
                get(crate::replication::scheduler::scheduler_jobs),
                "GET,HEAD",
            ),
        )
        .route(
            "/_scheduler/jobs/{id}",
            only(
                get(crate::replication::scheduler::scheduler_job),
                "GET,HEAD",
            ),
        )
        .route(
            "/_scheduler/docs",
            only(
                get(crate::replication::scheduler::scheduler_docs),
                "GET,HEAD",
            ),
        )
        .route(
            "/_scheduler/docs/{*rest}",
            only(
                get(crate::replication::scheduler::scheduler_docs),
                "GET,HEAD",
            ),
        )
        .route(
            "/_scheduler/{*rest}",
            only(
                get(crate::replication::scheduler::scheduler_unknown),
                "GET,HEAD",
            ),
        )
}

/// A route that refuses other methods with CouchDB's 405 `method_not_allowed`.
fn only(route: MethodRouter<AppState>, allowed: &'static str) -> MethodRouter<AppState> {
    route.fallback(move || async move { ApiError::MethodNotAllowed(allowed) })
}

/// # GET /_utils
/// The console's page lives at `/_utils/`, so its relative links resolve.
async fn console_redirect() -> Response {
    (
        StatusCode::MOVED_PERMANENTLY,
        [(axum::http::header::LOCATION, "/_utils/")],
    )
        .into_response()
}

/// While developing the console, its files are read from this folder
/// instead of the ones compiled in.
const CONSOLE_DIR_ENV: &str = "RECLINER_CONSOLE_DIR";

/// # GET /_utils/{file}
/// The web console's files, compiled into the binary.
async fn console_file(request: Request) -> Result<Response, ApiError> {
    let path = request.uri().path();
    let name = path.strip_prefix("/_utils/").unwrap_or("");
    let Some(asset) = web_console::asset(name) else {
        return Err(ApiError::NotFound("missing".into()));
    };
    let dev_dir = std::env::var_os(CONSOLE_DIR_ENV).map(std::path::PathBuf::from);
    let bytes = web_console::bytes(&asset, dev_dir.as_deref()).into_owned();
    use axum::http::header;
    Ok((
        StatusCode::OK,
        // The console's own files: its strict policy, not the sandbox
        // every stored or function-made answer gets.
        axum::Extension(crate::base::content_policy::OwnPolicy),
        [
            (header::CONTENT_TYPE, asset.content_type),
            (header::CACHE_CONTROL, "no-cache"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            // The console runs its own files only and talks to this server
            // only: a document's content can never run as script.
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'self'; img-src 'self' data: blob:; object-src 'none'; frame-ancestors 'none'; base-uri 'none'",
            ),
        ],
        bytes,
    )
        .into_response())
}

/// # GET /_db_updates
async fn db_updates(State(state): State<AppState>, request: Request) -> Result<Response, ApiError> {
    let query = Query::parse(request.uri());
    crate::changes::db_updates(state, query, request).await
}

/// # GET /
/// The welcome object: clients read `version` to pick their protocol, the
/// replicator reads `uuid`.
async fn welcome(State(state): State<AppState>) -> Response {
    json_response(
        StatusCode::OK,
        &json!({
            "couchdb": "Welcome",
            "version": COUCHDB_COMPAT_VERSION,
            "uuid": state.databases.server_uuid(),
            "features": FEATURES,
            "vendor": {"name": "Recliner", "version": env!("CARGO_PKG_VERSION")},
        }),
    )
}

/// # GET /_up
/// Health check for load balancers, shaped as CouchDB 3's.
/// 200 only when the store can be read and written, else 503, so that a
/// load balancer stops sending traffic here; the body says which failed,
/// and how many search indexes are open, updating and failing.
async fn up(State(state): State<AppState>) -> impl IntoResponse {
    let health = state.databases.health().await;
    let shown = |probe: &Result<(), String>| match probe {
        Ok(()) => json!("ok"),
        Err(reason) => json!({"error": reason}),
    };
    let store = json!({"read": shown(&health.read), "write": shown(&health.write)});
    // Search indexes at a glance: a failing index does not take the node
    // out of a load balancer (everything else still works), it says so.
    let searches = state.searches.health();
    let search = json!({
        "status": if searches.failing == 0 { "ok" } else { "failing" },
        "open_indexes": searches.open,
        "updating": searches.updating,
        "failing": searches.failing,
    });
    if health.is_ok() {
        json_response(
            StatusCode::OK,
            &json!({"status": "ok", "seeds": {}, "store": store, "search": search}),
        )
    } else {
        tracing::error!(?health, "the store fails its health probe");
        json_response(
            StatusCode::SERVICE_UNAVAILABLE,
            &json!({"status": "error", "seeds": {}, "store": store, "search": search}),
        )
    }
}

/// # GET /_all_dbs
async fn all_dbs(State(state): State<AppState>, request: Request) -> Result<Response, ApiError> {
    let query = Query::parse(request.uri());
    let names = listed_dbs(&state, &query).await?;
    Ok(crate::base::response::tagged_json_response(
        StatusCode::OK,
        &names,
    ))
}

/// The database names `_all_dbs` lists, with its parameters (those of
/// `_all_docs`, refused with the same errors).
async fn listed_dbs(state: &AppState, query: &Query) -> Result<Vec<String>, ApiError> {
    let mut names = state.databases.all_dbs().await?;
    let key = |k: &str, alt: &str| -> Result<Option<String>, ApiError> {
        let v = match query.json(k)? {
            Some(v) => Some(v),
            None => query.json(alt)?,
        };
        Ok(v.and_then(|v| v.as_str().map(str::to_string)))
    };
    let descending = query.view_bool("descending")?.unwrap_or(false);
    let inclusive_end = query.view_bool("inclusive_end")?.unwrap_or(true);
    if descending {
        names.reverse();
    }
    let (start, end) = match key("key", "key")? {
        Some(key) => (Some(key.clone()), Some(key)),
        None => (key("startkey", "start_key")?, key("endkey", "end_key")?),
    };
    let in_range = |n: &String| {
        let after_start = start
            .as_ref()
            .is_none_or(|s| if descending { n <= s } else { n >= s });
        let before_end = end
            .as_ref()
            .is_none_or(|e| match (descending, inclusive_end) {
                (false, true) => n <= e,
                (false, false) => n < e,
                (true, true) => n >= e,
                (true, false) => n > e,
            });
        after_start && before_end
    };
    let skip = query.view_uint("skip")?.unwrap_or(0);
    let limit = query.view_uint("limit")?.unwrap_or(u64::MAX);
    Ok(names
        .into_iter()
        .filter(in_range)
        .skip(usize::try_from(skip).unwrap_or(usize::MAX))
        .take(usize::try_from(limit).unwrap_or(usize::MAX))
        .collect())
}

/// # GET /favicon.ico
/// CouchDB without its web console has none either.
async fn no_favicon() -> Response {
    let mut response = (StatusCode::NOT_FOUND, "Not found.").into_response();
    let headers = response.headers_mut();
    headers.insert(
        axum::http::header::CONTENT_TYPE,
        axum::http::HeaderValue::from_static("text/plain"),
    );
    headers.insert(
        axum::http::header::CACHE_CONTROL,
        axum::http::HeaderValue::from_static("public, max-age=31536000"),
    );
    response
}

/// # GET /_uuids
async fn uuids(State(state): State<AppState>, request: Request) -> Result<Response, ApiError> {
    let query = Query::parse(request.uri());
    let count = match query.get("count") {
        None => 1,
        Some(text) => text
            .parse::<u64>()
            .map_err(|_| ApiError::bad_request("count must be a positive integer"))?,
    };
    if count > MAX_UUIDS {
        return Err(ApiError::bad_request("count parameter too large"));
    }
    let uuids: Vec<String> = (0..count).map(|_| state.uuids.next()).collect();
    // As CouchDB: tagged, yet never cached.
    let mut response =
        crate::base::response::tagged_json_response(StatusCode::OK, &json!({"uuids": uuids}));
    let headers = response.headers_mut();
    headers.insert(
        axum::http::header::CACHE_CONTROL,
        axum::http::HeaderValue::from_static("no-cache"),
    );
    headers.insert(
        axum::http::header::PRAGMA,
        axum::http::HeaderValue::from_static("no-cache"),
    );
    headers.insert(
        axum::http::header::EXPIRES,
        axum::http::HeaderValue::from_static("Mon, 01 Jan 1990 00:00:00 GMT"),
    );
    Ok(response)
}

/// # POST /_dbs_info
async fn dbs_info(State(state): State<AppState>, request: Request) -> Result<Response, ApiError> {
    require_json_content_type(request.headers())?;
    let user = crate::base::auth::user_of(&request);
    let body = read_json_object(request.into_body(), &state.config).await?;
    let keys = match body.get("keys") {
        Some(Value::Array(keys)) => keys,
        Some(_) => return Err(ApiError::bad_request("`keys` member must be an array.")),
        None => return Err(ApiError::bad_request("`keys` member must exist.")),
    };
    let mut out = Vec::with_capacity(keys.len());
    for key in keys {
        let info = match key.as_str() {
            // The counts a member of a per-document access database may
            // see: their own.
            Some(name) => match state.open(name, &user).await {
                Ok(db) => Some(crate::base::db_info::info_json(&db).await?),
                Err(_) => None,
            },
            None => None,
        };
        out.push(match info {
            Some(info) => json!({"key": key, "info": info}),
            None => json!({"key": key, "error": "not_found"}),
        });
    }
    Ok(Json(out).into_response())
}

/// # GET /_dbs_info
/// Every database `_all_dbs` would list, with its information.
async fn dbs_info_listed(
    State(state): State<AppState>,
    request: Request,
) -> Result<Response, ApiError> {
    let query = Query::parse(request.uri());
    let user = crate::base::auth::user_of(&request);
    let mut out = Vec::new();
    for name in listed_dbs(&state, &query).await? {
        if let Ok(db) = state.open(&name, &user).await {
            out.push(json!({"key": name, "info": crate::base::db_info::info_json(&db).await?}));
        }
    }
    Ok(crate::base::response::tagged_json_response(
        StatusCode::OK,
        &out,
    ))
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::http::{Request, StatusCode, header};
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    use crate::{AppState, router};

    fn app() -> axum::Router {
        let dir = std::env::temp_dir().join(format!(
            "recliner-api-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        router(AppState::new(store_sqlite::open(&dir).unwrap()))
    }

    async fn call(method: &str, uri: &str) -> (StatusCode, serde_json::Value) {
        let response = app()
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
        assert!(
            bytes.ends_with(b"\n"),
            "JSON bodies end with a newline as CouchDB's do"
        );
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
        let (status, body) = call("GET", "/nodb/here").await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert_eq!(
            body,
            serde_json::json!({"error": "not_found", "reason": "Database does not exist."})
        );
    }

    #[tokio::test]
    async fn uuids_are_capped_at_a_thousand() {
        let (status, body) = call("GET", "/_uuids?count=3").await;
        assert_eq!(
            (status, body["uuids"].as_array().unwrap().len()),
            (StatusCode::OK, 3)
        );
        let (status, _) = call("GET", "/_uuids?count=1001").await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
    }
}

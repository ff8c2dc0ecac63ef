//! The node endpoints CouchDB 3 tooling calls first: `/_membership` to
//! find the node, and `/_node/{node}/...` (`_local` names this node) for
//! its name, versions and system figures. Recliner is one node.

use std::collections::BTreeMap;

use axum::extract::{Path, State};
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::AppState;
use crate::base::error::ApiError;
use crate::base::response::json_response;

/// # GET /_membership
pub(crate) async fn membership(State(state): State<AppState>) -> Response {
    let name = &state.config.node_name;
    json_response(
        StatusCode::OK,
        &json!({"all_nodes": [name], "cluster_nodes": [name]}),
    )
}

/// The node a `/_node/{node}` path names: this one, or CouchDB's 404.
fn this_node<'a>(state: &'a AppState, node: &str) -> Result<&'a str, ApiError> {
    let name = state.config.node_name.as_str();
    if node == "_local" || node == name {
        Ok(name)
    } else {
        Err(ApiError::not_found(format!("no such node: {node}")))
    }
}

/// # GET /_node/{node}
pub(crate) async fn node(
    State(state): State<AppState>,
    Path(node): Path<String>,
) -> Result<Response, ApiError> {
    let name = this_node(&state, &node)?;
    Ok(json_response(StatusCode::OK, &json!({"name": name})))
}

/// # GET /_node/{node}/_versions
/// What runs this node: the server and the CouchDB API it follows.
pub(crate) async fn versions(
    State(state): State<AppState>,
    Path(node): Path<String>,
) -> Result<Response, ApiError> {
    this_node(&state, &node)?;
    Ok(json_response(
        StatusCode::OK,
        &json!({
            "recliner": {"version": env!("CARGO_PKG_VERSION")},
            "couchdb_api": {"version": crate::COUCHDB_COMPAT_VERSION},
            "collation_driver": {"name": "icu4x", "collator_version": collation::COLLATOR_VERSION},
            "javascript_engine": {"name": "quickjs"},
        }),
    ))
}

/// # GET /_node/{node}/_smoosh/status
/// CouchDB's compaction daemon's queues. Recliner's automatic compaction
/// picks databases as it checks them and keeps no queue: every channel
/// CouchDB has is shown, empty and idle.
pub(crate) async fn smoosh_status(
    State(state): State<AppState>,
    Path(node): Path<String>,
) -> Result<Response, ApiError> {
    this_node(&state, &node)?;
    let idle = json!({"waiting": {"size": 0, "min": 0, "max": 0}, "starting": 0, "active": 0});
    let channels: serde_json::Map<String, Value> = [
        "upgrade_views",
        "upgrade_dbs",
        "slack_views",
        "slack_dbs",
        "ratio_views",
        "ratio_dbs",
        "index_cleanup",
    ]
    .into_iter()
    .map(|name| (name.to_string(), idle.clone()))
    .collect();
    Ok(json_response(
        StatusCode::OK,
        &json!({"channels": channels}),
    ))
}

/// # POST /_node/{node}/_restart
/// As CouchDB: answered at once, then the server stops as it does on
/// SIGTERM (requests finish, replications checkpoint, databases close) and
/// starts again in the same process, on the same ports.
pub(crate) async fn restart(
    State(state): State<AppState>,
    Path(node): Path<String>,
) -> Result<Response, ApiError> {
    this_node(&state, &node)?;
    state
        .restart
        .store(true, std::sync::atomic::Ordering::SeqCst);
    tracing::warn!("restart requested through /_node/{{node}}/_restart");
    let shutdown = state.shutdown.clone();
    tokio::spawn(async move {
        // Time for this answer to reach the client.
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        shutdown.send_replace(true);
    });
    Ok(json_response(StatusCode::OK, &json!({"ok": true})))
}

/// # GET /_node/{node}/_system
/// The figures of CouchDB's answer that mean something for one Rust
/// process: uptime, resident memory, threads and open databases.
pub(crate) async fn system(
    State(state): State<AppState>,
    Path(node): Path<String>,
) -> Result<Response, ApiError> {
    this_node(&state, &node)?;
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| -> u64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    };
    Ok(json_response(
        StatusCode::OK,
        &json!({
            "uptime": state.started.elapsed().as_secs(),
            "memory": {"processes": field("VmRSS:") * 1024, "peak": field("VmHWM:") * 1024},
            "process_count": field("Threads:"),
            "open_databases": state.databases.open_dbs(),
            "message_queues": {},
        }),
    ))
}

/// The statistics endpoints, routed beside the other `/_node` routes.
pub(crate) fn stats_routes() -> axum::Router<AppState> {
    use axum::routing::get;
    let only_get = || async { ApiError::MethodNotAllowed("GET") };
    axum::Router::new()
        .route("/_node/{node}/_stats", get(stats).fallback(only_get))
        .route("/_node/{node}/_stats/", get(stats).fallback(only_get))
        .route(
            "/_node/{node}/_stats/{*path}",
            get(stats_path).fallback(only_get),
        )
        .route(
            "/_node/{node}/_prometheus",
            get(prometheus).fallback(only_get),
        )
}

fn metrics(state: &AppState) -> Vec<crate::base::stats::Metric> {
    state.stats.metrics(&crate::base::stats::Gauges {
        open_databases: state.databases.open_dbs(),
        jobs: state.scheduler.job_counts(),
    })
}

/// # GET /_node/{node}/_stats
/// CouchDB's statistics for what Recliner counts, nested by group.
pub(crate) async fn stats(
    State(state): State<AppState>,
    Path(node): Path<String>,
) -> Result<Response, ApiError> {
    this_node(&state, &node)?;
    Ok(json_response(
        StatusCode::OK,
        &crate::base::stats::to_json(&metrics(&state)),
    ))
}

/// # GET /_node/{node}/_stats/{group}/{metric}...
/// One group or metric (or a part of its value); `null` for an unknown
/// path, as CouchDB answers.
pub(crate) async fn stats_path(
    State(state): State<AppState>,
    Path((node, path)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    this_node(&state, &node)?;
    let all = crate::base::stats::to_json(&metrics(&state));
    let keys = path.split('/').filter(|key| !key.is_empty());
    Ok(json_response(
        StatusCode::OK,
        &crate::base::stats::extract(all, keys),
    ))
}

/// # GET /_node/{node}/_prometheus
/// The same statistics in Prometheus's text format, under CouchDB's names.
pub(crate) async fn prometheus(
    State(state): State<AppState>,
    Path(node): Path<String>,
) -> Result<Response, ApiError> {
    this_node(&state, &node)?;
    let system = crate::base::stats::System {
        uptime_seconds: state.started.elapsed().as_secs(),
        nodes: 1,
    };
    let text = crate::base::stats::to_prometheus(&metrics(&state), &system);
    Ok((
        StatusCode::OK,
        [(
            axum::http::header::CONTENT_TYPE,
            crate::base::stats::PROMETHEUS_CONTENT_TYPE,
        )],
        text,
    )
        .into_response())
}

/// The server's settings as CouchDB's configuration API shows them: by
/// CouchDB's section and key names, every value as text. The server that
/// hosts the API implements it (it owns the settings and their file).
pub trait NodeConfig: Send + Sync + std::fmt::Debug {
    /// Every section with its keys and values.
    fn sections(&self) -> BTreeMap<String, BTreeMap<String, String>>;
    /// Sets a value (at once where the server can apply it while running;
    /// in the configuration file too when `persist`); the previous value.
    fn set(
        &self,
        section: &str,
        key: &str,
        value: &str,
        persist: bool,
    ) -> Result<String, ConfigError>;
    /// Puts a setting back to its default; the previous value.
    fn delete(&self, section: &str, key: &str, persist: bool) -> Result<String, ConfigError>;
    /// Reads the configuration file again, dropping unpersisted changes.
    fn reload(&self) -> Result<(), ConfigError>;
    /// The keys, by section, whose change takes effect only at the next
    /// start (where the server listens, keeps its data, logs...); a change
    /// of any other key applies from the next request.
    fn applied_at_start(&self) -> BTreeMap<String, Vec<String>>;
}

/// Why a configuration change was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigError {
    /// No such section and key: 404 `unknown_config_value`.
    Unknown,
    /// A value the setting cannot take, or a file that cannot be written: 400.
    Refused(String),
    /// A section CouchDB never lets the API change: 403.
    Forbidden(String),
}

impl From<ConfigError> for ApiError {
    fn from(e: ConfigError) -> ApiError {
        match e {
            ConfigError::Unknown => ApiError::not_found("unknown_config_value"),
            ConfigError::Refused(reason) => ApiError::bad_request(reason),
            ConfigError::Forbidden(reason) => ApiError::Forbidden(reason),
        }
    }
}

/// The `_config` sub-resource listing the keys applied at start; `_`-prefixed
/// like CouchDB's `_reload`, so no section can be named so.
const APPLIED_AT_START: &str = "_applied_at_start";

fn node_config(state: &AppState) -> Result<&std::sync::Arc<dyn NodeConfig>, ApiError> {
    state
        .node_config
        .as_ref()
        .ok_or_else(|| ApiError::NotImplemented("this server has no configuration API".into()))
}

/// # GET /_node/{node}/_config
pub(crate) async fn config_all(
    State(state): State<AppState>,
    Path(node): Path<String>,
) -> Result<Response, ApiError> {
    this_node(&state, &node)?;
    Ok(json_response(
        StatusCode::OK,
        &node_config(&state)?.sections(),
    ))
}

/// # GET /_node/{node}/_config/{section}, POST .../_config/_reload,
/// GET .../_config/_applied_at_start
/// The last is Recliner's own: the keys that take effect only at the next
/// start, by section (`{"chttpd": ["bind_address", "port"], ...}`), so a
/// client (the web console) can say a change needs a restart.
pub(crate) async fn config_section(
    State(state): State<AppState>,
    Path((node, section)): Path<(String, String)>,
    method: Method,
) -> Result<Response, ApiError> {
    this_node(&state, &node)?;
    let config = node_config(&state)?;
    match (section.as_str(), method) {
        ("_reload", Method::POST) => {
            config.reload()?;
            Ok(json_response(StatusCode::OK, &json!({"ok": true})))
        }
        ("_reload", _) => Err(ApiError::MethodNotAllowed("POST")),
        (APPLIED_AT_START, Method::GET | Method::HEAD) => {
            Ok(json_response(StatusCode::OK, &config.applied_at_start()))
        }
        (APPLIED_AT_START, _) => Err(ApiError::MethodNotAllowed("GET")),
        (_, Method::GET | Method::HEAD) => {
            let section = config.sections().remove(&section).unwrap_or_default();
            Ok(json_response(StatusCode::OK, &section))
        }
        _ => Err(ApiError::MethodNotAllowed("GET")),
    }
}

/// # GET|PUT|DELETE /_node/{node}/_config/{section}/{key}
/// Values travel as JSON strings; a change answers the previous value.
/// `X-Couch-Persist: false` changes only the running server.
pub(crate) async fn config_key(
    State(state): State<AppState>,
    Path((node, section, key)): Path<(String, String, String)>,
    request: axum::extract::Request,
) -> Result<Response, ApiError> {
    this_node(&state, &node)?;
    let config = node_config(&state)?;
    let persist = request
        .headers()
        .get("x-couch-persist")
        .and_then(|v| v.to_str().ok())
        != Some("false");
    let old = match request.method().clone() {
        Method::GET | Method::HEAD => config
            .sections()
            .get(&section)
            .and_then(|keys| keys.get(&key).cloned())
            .ok_or(ConfigError::Unknown)?,
        Method::PUT => {
            let body =
                crate::base::json_body::read_json_body(request.into_body(), &state.config).await?;
            let Some(Value::String(value)) = body else {
                return Err(ApiError::bad_request("a JSON string expected"));
            };
            config.set(&section, &key, value.trim(), persist)?
        }
        Method::DELETE => config.delete(&section, &key, persist)?,
        _ => return Err(ApiError::MethodNotAllowed("GET,PUT,DELETE")),
    };
    Ok(json_response(StatusCode::OK, &Value::String(old)))
}

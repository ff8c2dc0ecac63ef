//! The node endpoints CouchDB 3 tooling calls first: `/_membership` to
//! find the node, and `/_node/{node}/...` (`_local` names this node) for
//! its name, versions and system figures. Recliner is one node.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::json;

use crate::AppState;
use crate::error::ApiError;
use crate::json::json_response;

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
            "collation_driver": {"name": "recliner"},
        }),
    ))
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
            "open_databases": state.store.open_dbs(),
            "message_queues": {},
        }),
    ))
}

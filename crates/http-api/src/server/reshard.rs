//! CouchDB's resharding API (`/_reshard`), answered as a node with nothing
//! to split: a Recliner database is one file, one shard, so no split job
//! ever runs. The summary, the state switch and the (empty) job list behave
//! as CouchDB's; a job request is checked as CouchDB checks it and then
//! refused per shard with CouchDB's error for a range that cannot be split.

use std::sync::Mutex;

use axum::body::Body;
use axum::extract::{Path, Request, State};
use axum::http::{Method, StatusCode};
use axum::response::Response;
use serde_json::{Map, Value, json};

use crate::AppState;
use crate::base::error::ApiError;
use crate::base::json_body::{read_json_object, require_json_content_type};
use crate::base::response::json_response;

/// CouchDB's reason when a stop names none.
const DEFAULT_STOP_REASON: &str = "Cluster-wide resharding stopped by the user";

/// Whether resharding is switched on for this node (`PUT /_reshard/state`),
/// and why it was stopped. Kept for the process's life: no job depends on
/// it.
#[derive(Debug, Default)]
pub(crate) struct ReshardSwitch(Mutex<Option<String>>);

impl ReshardSwitch {
    /// `(state, reason)` as CouchDB shows them.
    fn shown(&self) -> (&'static str, Value) {
        match &*self.0.lock().unwrap_or_else(|e| e.into_inner()) {
            None => ("running", Value::Null),
            Some(reason) => ("stopped", Value::String(reason.clone())),
        }
    }
}

/// # GET /_reshard
pub(crate) async fn summary(State(state): State<AppState>) -> Response {
    let (shown, reason) = state.reshard.shown();
    json_response(
        StatusCode::OK,
        &json!({"state": shown, "state_reason": reason, "completed": 0, "failed": 0,
                "running": 0, "stopped": 0, "total": 0}),
    )
}

/// # GET|PUT /_reshard/state
pub(crate) async fn switch(
    State(state): State<AppState>,
    request: Request,
) -> Result<Response, ApiError> {
    match *request.method() {
        Method::GET | Method::HEAD => {
            let (shown, reason) = state.reshard.shown();
            Ok(json_response(
                StatusCode::OK,
                &json!({"state": shown, "reason": reason}),
            ))
        }
        Method::PUT => {
            require_json_content_type(request.headers())?;
            let body = read_json_object(request.into_body(), &state.config).await?;
            let reason = match body.get("reason") {
                Some(Value::String(r)) => r.clone(),
                Some(other) => other.to_string(),
                None => DEFAULT_STOP_REASON.to_string(),
            };
            let next = match body.get("state").and_then(Value::as_str) {
                _ if !body.contains_key("state") => {
                    return Err(ApiError::bad_request("Expected a `state` field"));
                }
                Some("running") => None,
                Some("stopped") => Some(reason),
                _ => {
                    return Err(ApiError::bad_request(
                        "State field not `running` or `stopped`",
                    ));
                }
            };
            *state.reshard.0.lock().unwrap_or_else(|e| e.into_inner()) = next;
            Ok(json_response(StatusCode::OK, &json!({"ok": true})))
        }
        _ => Err(ApiError::MethodNotAllowed("GET,HEAD,PUT")),
    }
}

/// # GET|POST /_reshard/jobs
pub(crate) async fn jobs(
    State(state): State<AppState>,
    request: Request,
) -> Result<Response, ApiError> {
    match *request.method() {
        Method::GET | Method::HEAD => Ok(json_response(
            StatusCode::OK,
            &json!({"total_rows": 0, "offset": 0, "jobs": []}),
        )),
        Method::POST => {
            require_json_content_type(request.headers())?;
            let body = read_json_object(request.into_body(), &state.config).await?;
            create_jobs(&state, &body).await
        }
        _ => Err(ApiError::MethodNotAllowed("GET,HEAD,POST")),
    }
}

/// # GET|DELETE /_reshard/jobs/{id}, GET|PUT /_reshard/jobs/{id}/state
/// No job exists, so every job is CouchDB's 404.
pub(crate) async fn job(Path(_): Path<String>, request: Request<Body>) -> ApiError {
    match *request.method() {
        Method::GET | Method::HEAD | Method::DELETE | Method::PUT => ApiError::not_found("missing"),
        _ => ApiError::MethodNotAllowed("DELETE,GET,HEAD"),
    }
}

/// `POST /_reshard/jobs`: CouchDB's checks in CouchDB's order, then one
/// refusal per shard picked.
async fn create_jobs(state: &AppState, body: &Map<String, Value>) -> Result<Response, ApiError> {
    let text = |name: &str| body.get(name).filter(|v| !v.is_null());
    let node = state.config.node_name.as_str();
    if text("node").is_some_and(|asked| asked.as_str() != Some(node)) {
        return Err(ApiError::bad_request("`node` is not a valid node name"));
    }
    let shard_name = |db: &str| format!("shards/00000000-ffffffff/{db}");
    if let Some(shard) = text("shard") {
        let db = shard
            .as_str()
            .and_then(|s| s.strip_prefix("shards/00000000-ffffffff/"))
            .ok_or_else(|| ApiError::bad_request("`shard` is invalid"))?;
        if !state.databases.exists(db).await {
            return Err(ApiError::not_found("missing"));
        }
    }
    let db = match text("db") {
        None => None,
        Some(Value::String(db)) if state.databases.exists(db).await => Some(db.clone()),
        Some(_) => return Err(ApiError::bad_request("Invalid `db`")),
    };
    if let Some(range) = text("range") {
        let whole = range.as_str() == Some("00000000-ffffffff");
        if !range.as_str().is_some_and(valid_range) {
            return Err(ApiError::bad_request("Invalid `range`"));
        }
        if !whole {
            return Err(ApiError::not_found("missing"));
        }
    }
    if body.get("type").and_then(Value::as_str) != Some("split") {
        return Err(ApiError::bad_request("`job type must be `split`"));
    }
    let shard = match (text("shard").and_then(Value::as_str), db) {
        (Some(shard), _) => shard.to_string(),
        (None, Some(db)) => shard_name(&db),
        (None, None) => {
            return Err(ApiError::bad_request(
                "Must specify at least `db` or `shard`",
            ));
        }
    };
    // A whole database is one shard here: it cannot be split in two.
    Ok(json_response(
        StatusCode::INTERNAL_SERVER_ERROR,
        &json!([{
            "error": "{shard_range_cannot_be_split,[0,4294967295],2}",
            "node": node,
            "shard": shard,
        }]),
    ))
}

/// CouchDB's `XXXXXXXX-YYYYYYYY` hexadecimal range, start not after end.
fn valid_range(range: &str) -> bool {
    let Some((start, end)) = range.split_once('-') else {
        return false;
    };
    let hex = |s: &str| {
        (s.len() == 8)
            .then(|| u32::from_str_radix(s, 16).ok())
            .flatten()
    };
    matches!((hex(start), hex(end)), (Some(a), Some(b)) if a <= b)
}

#[cfg(test)]
mod tests {
    use super::valid_range;

    #[test]
    fn ranges_are_eight_hex_digits_each_in_order() {
        assert!(valid_range("00000000-ffffffff"));
        assert!(valid_range("00000000-7fffffff"));
        assert!(!valid_range("garbage"));
        assert!(!valid_range("80000000-00000000"));
        assert!(!valid_range("0-ffffffff"));
    }
}

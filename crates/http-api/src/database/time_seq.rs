//! `GET|DELETE /{db}/_time_seq`: the database's time bins (CouchDB's next
//! release), which `_changes?since=<time>` starts from. The bins themselves
//! are the store's (`store::time_seq`).

use axum::http::{Method, StatusCode};
use axum::response::Response;
use serde_json::{Map, Value, json};

use crate::AppState;
use crate::base::error::ApiError;
use crate::base::response::json_response;

/// The one range a database of this server has: CouchDB names each
/// shard's histogram by its range and node.
const WHOLE_RANGE: &str = "00000000-ffffffff";

/// # GET|DELETE /{db}/_time_seq
///
/// GET: `{"time_seq": {"00000000-ffffffff": {"<node>": [["<bin start>",
/// <changes in it>], ...]}}}`, oldest bin first. DELETE (database admins)
/// forgets the bins: `{"ok": true}`.
pub(crate) async fn time_seq(
    state: AppState,
    db: String,
    method: &Method,
    user: &auth::UserCtx,
) -> Result<Response, ApiError> {
    let database = state.open(&db, user).await?;
    if method == Method::DELETE {
        database.reset_time_seq().await?;
        return Ok(json_response(StatusCode::OK, &json!({"ok": true})));
    }
    let update_seq = database.update_seq();
    let bins: Vec<Value> = database
        .time_seq()
        .await?
        .histogram(update_seq)
        .into_iter()
        .map(|(time, count)| json!([store::time_seq::format_time(time), count]))
        .collect();
    let mut by_node = Map::new();
    by_node.insert(state.config.node_name.clone(), Value::Array(bins));
    Ok(json_response(
        StatusCode::OK,
        &json!({"time_seq": {WHOLE_RANGE: by_node}}),
    ))
}

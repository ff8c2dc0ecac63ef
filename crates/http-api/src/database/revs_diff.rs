//! `POST /{db}/_revs_diff` and `POST /{db}/_missing_revs`: which of the
//! revisions a peer names this database lacks.

use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Map, Value, json};

use crate::AppState;
use crate::base::error::ApiError;
use crate::base::json_body::read_json_object;
use crate::base::params::rev_list;
use crate::base::response::json_response;

/// # POST /{db}/_revs_diff and POST /{db}/_missing_revs
pub(crate) async fn revs_diff(
    state: AppState,
    db: String,
    request: Request,
    missing_revs_shape: bool,
) -> Result<Response, ApiError> {
    let database = state.store.db(&db).await?;
    let body = read_json_object(request.into_body(), &state.config).await?;
    let mut asked = Vec::with_capacity(body.len());
    let mut revisions = 0;
    for (id, revs) in body {
        let revs = rev_list(&revs, "Each document's revisions")?;
        revisions += revs.len();
        state.config.limits.check_items(revisions, "revisions")?;
        asked.push((id, revs));
    }
    let diffs = database.revs_diff(asked).await?;
    let mut out = Map::new();
    for (id, diff) in diffs {
        let missing: Vec<String> = diff.missing.iter().map(ToString::to_string).collect();
        if missing_revs_shape {
            out.insert(id, json!(missing));
        } else {
            let mut entry = Map::new();
            entry.insert("missing".into(), json!(missing));
            if !diff.possible_ancestors.is_empty() {
                let ancestors: Vec<String> = diff
                    .possible_ancestors
                    .iter()
                    .map(ToString::to_string)
                    .collect();
                entry.insert("possible_ancestors".into(), json!(ancestors));
            }
            out.insert(id, Value::Object(entry));
        }
    }
    let body = if missing_revs_shape {
        json!({"missing_revs": out})
    } else {
        Value::Object(out)
    };
    Ok(json_response(StatusCode::OK, &body))
}

//! The render stage: `_bulk_docs`' answer.

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Value, json};
use store::DocWriteResult;

use super::RawDoc;
use crate::base::error::ApiError;
use crate::base::response::json_response;

/// A row per document, or only the failures when replicating
/// (`new_edits: false`), as CouchDB.
pub(super) fn answer(results: &[DocWriteResult], new_edits: bool) -> Response {
    let rows: Vec<Value> = if new_edits {
        results.iter().map(write_row).collect()
    } else {
        results
            .iter()
            .filter_map(|r| {
                r.result.as_ref().err().map(|f| match &r.refused_rev {
                    Some(rev) => {
                        json!({"id": r.id, "rev": rev, "error": f.error, "reason": f.reason})
                    }
                    None => json!({"id": r.id, "error": f.error, "reason": f.reason}),
                })
            })
            .collect()
    };
    json_response(StatusCode::CREATED, &rows)
}

/// `{"ok": true, "id", "rev"}`, or the row's error.
fn write_row(result: &DocWriteResult) -> Value {
    match &result.result {
        Ok(rev) => json!({"ok": true, "id": result.id, "rev": rev}),
        Err(failure) => json!({"id": result.id, "error": failure.error, "reason": failure.reason}),
    }
}

/// CouchDB 3 has no atomic `all_or_nothing` writes and says so for every
/// document, writing none (417): a client that asked for atomicity is not
/// given a partial write instead.
pub(super) fn all_or_nothing_refused<'a>(
    docs: impl Iterator<Item = Result<RawDoc<'a>, ApiError>>,
) -> Response {
    #[derive(serde::Deserialize, Default)]
    struct Named {
        #[serde(rename = "_id")]
        id: Option<String>,
        #[serde(rename = "_rev")]
        rev: Option<String>,
    }
    let rows: Vec<Value> = docs
        .map(|raw| {
            let named = raw
                .ok()
                .and_then(|raw| serde_json::from_slice::<Named>(&raw.json).ok())
                .unwrap_or_default();
            json!({
                "id": named.id.unwrap_or_else(|| uuid::Uuid::new_v4().simple().to_string()),
                "rev": named.rev.unwrap_or_else(|| "0-".into()),
                "error": "not_implemented",
                "reason": "all_or_nothing is not supported",
            })
        })
        .collect();
    json_response(StatusCode::EXPECTATION_FAILED, &rows)
}

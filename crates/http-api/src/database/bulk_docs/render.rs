//! The render stage: `_bulk_docs`' answer.

use axum::http::StatusCode;
use axum::response::Response;
use store::DocWriteResult;
use wire::rows::BulkDocsRow;

use super::RawDoc;
use crate::base::error::ApiError;
use crate::base::response::json_response;

/// A row of our answer: the revision stays the store's text, since a
/// `_local` document's (`0-N`) is no revision id.
type Row = BulkDocsRow<String>;

/// A row per document, or only the failures when replicating
/// (`new_edits: false`), as CouchDB. The rows take the results' strings.
pub(super) fn answer(results: Vec<DocWriteResult>, new_edits: bool) -> Response {
    let rows: Vec<Row> = if new_edits {
        results.into_iter().map(write_row).collect()
    } else {
        results.into_iter().filter_map(refused_row).collect()
    };
    json_response(StatusCode::CREATED, &rows)
}

/// `{"ok": true, "id", "rev"}`, or the row's error.
fn write_row(result: DocWriteResult) -> Row {
    match result.result {
        Ok(rev) => Row {
            ok: Some(true),
            id: Some(result.id),
            rev: Some(rev),
            error: None,
            reason: None,
        },
        Err(failure) => Row {
            ok: None,
            id: Some(result.id),
            rev: None,
            error: Some(failure.error.as_str().to_string()),
            reason: Some(failure.reason),
        },
    }
}

/// A replicated document's refusal, `{"id", "rev", "error", "reason"}`
/// (without `rev` when it carried none); nothing when it was written.
fn refused_row(result: DocWriteResult) -> Option<Row> {
    let failure = result.result.err()?;
    Some(Row {
        ok: None,
        id: Some(result.id),
        rev: result.refused_rev,
        error: Some(failure.error.as_str().to_string()),
        reason: Some(failure.reason),
    })
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
    let rows: Vec<Row> = docs
        .map(|raw| {
            let named = raw
                .ok()
                .and_then(|raw| serde_json::from_slice::<Named>(&raw.json).ok())
                .unwrap_or_default();
            Row {
                ok: None,
                id: Some(
                    named
                        .id
                        .unwrap_or_else(|| uuid::Uuid::new_v4().simple().to_string()),
                ),
                rev: Some(named.rev.unwrap_or_else(|| "0-".into())),
                error: Some("not_implemented".into()),
                reason: Some("all_or_nothing is not supported".into()),
            }
        })
        .collect();
    json_response(StatusCode::EXPECTATION_FAILED, &rows)
}

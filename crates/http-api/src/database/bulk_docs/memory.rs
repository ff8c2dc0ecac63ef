//! The source of a `_bulk_docs` body held in memory. The documents stay
//! raw JSON text here: each is decoded when the store pulls it, while the
//! writer writes the ones before.

use std::borrow::Cow;
use std::collections::HashMap;

use serde_json::value::RawValue;

use super::{Batch, RawDoc};
use crate::AppState;
use crate::base::error::ApiError;
use crate::base::json_body::parse_json;

/// Reads the body's options and hands its documents to `write`.
pub(super) fn read<R>(
    state: &AppState,
    bytes: &[u8],
    write: impl FnOnce(Batch<'_>) -> Result<R, ApiError>,
) -> Result<R, ApiError> {
    let body: HashMap<String, &RawValue> =
        serde_json::from_slice(bytes).map_err(|_| match parse_json(bytes) {
            Ok(_) => ApiError::bad_request("Request body must be a JSON object"),
            Err(e) => e,
        })?;
    let docs: Vec<&RawValue> = match body.get("docs") {
        Some(raw) => serde_json::from_str(raw.get())
            .map_err(|_| ApiError::bad_request("`docs` parameter must be an array."))?,
        None => {
            return Err(ApiError::bad_request(
                "POST body must include `docs` parameter.",
            ));
        }
    };
    let new_edits = match body.get("new_edits").map(|raw| raw.get().trim()) {
        None | Some("true") => true,
        Some("false") => false,
        Some(_) => {
            return Err(ApiError::bad_request(
                "`new_edits` parameter must be a boolean.",
            ));
        }
    };
    let count = docs.len();
    state.config.limits.check_items(count, "documents")?;
    let all_or_nothing = body.get("all_or_nothing").map(|raw| raw.get().trim()) == Some("true");
    let docs = docs.into_iter().map(|raw| {
        Ok(RawDoc {
            json: Cow::Borrowed(raw.get().as_bytes()),
            staged: Vec::new(),
            size_checked: false,
        })
    });
    write(Batch {
        new_edits,
        all_or_nothing,
        count,
        paced: false,
        docs: Box::new(docs),
    })
}

//! Design document functions (`_view`, `_show`, `_list`, `_update`, filter
//! functions). They do not run yet; until they do, a request for one is
//! answered exactly as CouchDB answers when the design document or the
//! function is missing (404 with CouchDB's reason), and with 501 only when
//! the function exists.

use serde_json::Value;
use store::{Database, GetOptions, StoreError};

use crate::error::ApiError;

/// The sections of a design document that name functions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Section {
    Views,
    Shows,
    Lists,
    Updates,
    Filters,
}

impl Section {
    /// The section a `/_design/x/_kind/...` path segment names.
    pub(crate) fn of_path(segment: &str) -> Option<Section> {
        Some(match segment {
            "_view" => Section::Views,
            "_show" => Section::Shows,
            "_list" => Section::Lists,
            "_update" => Section::Updates,
            _ => return None,
        })
    }

    fn key(self) -> &'static str {
        match self {
            Section::Views => "views",
            Section::Shows => "shows",
            Section::Lists => "lists",
            Section::Updates => "updates",
            Section::Filters => "filters",
        }
    }
}

/// The design document `_design/{ddoc}`, or CouchDB's 404 `missing`.
pub(crate) async fn load(database: &Database, ddoc: &str) -> Result<Value, ApiError> {
    let id = format!("_design/{ddoc}");
    let doc = database
        .get(&id, GetOptions::default())
        .await
        .map_err(|e| match e {
            StoreError::DocNotFound(_) => ApiError::not_found("missing"),
            other => other.into(),
        })?;
    Ok(doc.to_value()?)
}

/// Checks that `ddoc` defines `name` in `section`, with CouchDB's reasons
/// when it does not; then answers 501, as the function cannot run yet.
pub(crate) async fn function_not_runnable(
    database: &Database,
    ddoc: &str,
    section: Section,
    name: &str,
) -> ApiError {
    match find(database, ddoc, section, name).await {
        Err(missing) => missing,
        Ok(()) => ApiError::NotImplemented(format!(
            "design document functions do not run yet ({}/{ddoc}/{name})",
            section.key()
        )),
    }
}

async fn find(
    database: &Database,
    ddoc: &str,
    section: Section,
    name: &str,
) -> Result<(), ApiError> {
    let doc = load(database, ddoc).await?;
    let Some(functions) = doc.get(section.key()).and_then(Value::as_object) else {
        return Err(ApiError::not_found(format!(
            "missing json key: {}",
            section.key()
        )));
    };
    if functions.contains_key(name) {
        Ok(())
    } else if section == Section::Views {
        Err(ApiError::not_found("missing_named_view"))
    } else {
        Err(ApiError::not_found(format!("missing json key: {name}")))
    }
}

/// Splits `filter=ddoc/name` (or `view=ddoc/name`) as CouchDB does.
pub(crate) fn split_name<'a>(value: &'a str, what: &str) -> Result<(&'a str, &'a str), ApiError> {
    match value.split_once('/') {
        Some((ddoc, name)) if !ddoc.is_empty() && !name.is_empty() => Ok((ddoc, name)),
        _ => Err(ApiError::bad_request(format!(
            "`{what}` must be of the form `designname/{what}name`"
        ))),
    }
}

//! `POST /db/_find` (and `_explain`) requests, read and checked as
//! CouchDB's `mango_opts` reads them, with its error for each field.

use serde_json::{Map, Value, json};

use super::bookmark::Bookmark;
use super::{MangoError, erlang_text};
use crate::selector::Selector;

/// The default `limit` (CouchDB's `mango.default_limit`).
pub const DEFAULT_LIMIT: u64 = 25;

/// A checked `_find` request.
#[derive(Debug, Clone)]
pub struct FindRequest {
    pub selector: Selector,
    /// The selector as sent.
    pub selector_json: Value,
    pub limit: u64,
    pub skip: u64,
    /// Sort fields and whether descending (one direction for all).
    pub sort: Vec<String>,
    pub descending: bool,
    /// Fields to return (all when empty).
    pub fields: Vec<String>,
    pub bookmark: Option<Bookmark>,
    /// Why the bookmark is not a JSON index's: a full-text index reads its
    /// own kind, so the error waits until the index is known.
    pub bookmark_error: Option<MangoError>,
    /// The bookmark text as sent (echoed when a page is empty).
    pub bookmark_text: Option<String>,
    /// `use_index`: a design document (without `_design/`) and maybe a name.
    pub use_index: Option<(String, Option<String>)>,
    pub r: u64,
    pub conflicts: bool,
    pub update: bool,
    pub stable: bool,
    pub stale: bool,
    pub execution_stats: bool,
    pub allow_fallback: bool,
    pub partition: Option<String>,
}

const KEYS: &[&str] = &[
    "selector",
    "use_index",
    "bookmark",
    "limit",
    "skip",
    "sort",
    "fields",
    "partition",
    "r",
    "conflicts",
    "stale",
    "update",
    "stable",
    "execution_stats",
    "allow_fallback",
];

impl FindRequest {
    pub fn parse(body: &Value) -> Result<FindRequest, MangoError> {
        let Value::Object(map) = body else {
            return Err(MangoError::bad(
                "bad_request",
                "Request body must be a JSON object".into(),
            ));
        };
        for key in map.keys() {
            if !KEYS.contains(&key.as_str()) {
                return Err(MangoError::bad(
                    "invalid_key",
                    format!("Invalid key {key} for this request."),
                ));
            }
        }
        let selector_json = map.get("selector").cloned().ok_or_else(|| {
            MangoError::bad(
                "missing_required_key",
                "Missing required key: selector".into(),
            )
        })?;
        if !selector_json.is_object() {
            return Err(MangoError::bad(
                "invalid_selector_json",
                format!(
                    "Selector must be a JSON object, not: {}",
                    erlang_text(&selector_json)
                ),
            ));
        }
        let selector = Selector::parse(&selector_json).map_err(selector_error)?;
        if selector.text_count() > 1 {
            return Err(MangoError::bad(
                "multiple_text_selector",
                format!(
                    "Selector cannot contain more than one $text operator: {}",
                    erlang_text(&selector_json)
                ),
            ));
        }
        let (sort, descending) = match map.get("sort") {
            None => (Vec::new(), false),
            Some(spec) => super::index_def::sort_fields(spec)?,
        };
        let bookmark_text = match map.get("bookmark") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) if s.is_empty() => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(other) => {
                return Err(MangoError {
                    status: 500,
                    error: "unknown_error".into(),
                    reason: format!(
                        "Unknown Error: mango_opts :: {{invalid_bookmark,{}}}",
                        erlang_text(other)
                    ),
                });
            }
        };
        let (bookmark, bookmark_error) = match bookmark_text.as_deref().map(Bookmark::decode) {
            None => (None, None),
            Some(Ok(mark)) => (Some(mark), None),
            Some(Err(e)) => (None, Some(e)),
        };
        let stale = match map.get("stale") {
            None | Some(Value::Bool(false)) => false,
            Some(Value::String(s)) if s == "false" => false,
            Some(Value::String(s)) if s == "ok" => true,
            Some(other) => {
                return Err(MangoError {
                    status: 500,
                    error: "unknown_error".into(),
                    reason: format!(
                        "Unknown Error: mango_opts :: {{invalid_ok_or_false_value,{}}}",
                        erlang_text(other)
                    ),
                });
            }
        };
        let partition = match map.get("partition") {
            None => None,
            Some(Value::String(p)) if p.is_empty() => None,
            Some(Value::String(p)) => Some(p.clone()),
            Some(other) => {
                return Err(MangoError::bad(
                    "invalid_partition",
                    format!("Invalid partition: {}", erlang_text(other)),
                ));
            }
        };
        Ok(FindRequest {
            selector,
            selector_json,
            limit: non_neg(map, "limit")?.unwrap_or(DEFAULT_LIMIT),
            skip: non_neg(map, "skip")?.unwrap_or(0),
            sort,
            descending,
            fields: fields(map)?,
            bookmark,
            bookmark_error,
            bookmark_text,
            use_index: use_index(map.get("use_index"))?,
            r: pos(map, "r")?.unwrap_or(1),
            conflicts: boolean(map, "conflicts")?.unwrap_or(false),
            update: boolean(map, "update")?.unwrap_or(true),
            stable: boolean(map, "stable")?.unwrap_or(false),
            stale,
            execution_stats: boolean(map, "execution_stats")?.unwrap_or(false),
            allow_fallback: boolean(map, "allow_fallback")?.unwrap_or(true),
            partition,
        })
    }

    /// The options as `_explain` shows them (`opts`).
    pub fn explain_opts(&self) -> Value {
        let mut sort = Map::new();
        for f in &self.sort {
            sort.insert(
                f.clone(),
                json!(if self.descending { "desc" } else { "asc" }),
            );
        }
        let use_index = match &self.use_index {
            None => json!([]),
            Some((d, None)) => json!([d]),
            Some((d, Some(n))) => json!([d, n]),
        };
        json!({
            "use_index": use_index,
            "bookmark": self.bookmark_text.clone().unwrap_or_else(|| "nil".into()),
            "limit": self.limit,
            "skip": self.skip,
            "sort": sort,
            "fields": self.fields,
            "partition": self.partition.clone().unwrap_or_default(),
            "r": self.r,
            "conflicts": self.conflicts,
            "stale": if self.stale { json!("ok") } else { json!(false) },
            "update": self.update,
            "stable": self.stable,
            "execution_stats": self.execution_stats,
            "allow_fallback": self.allow_fallback,
        })
    }
}

/// A selector CouchDB refuses: its error names.
fn selector_error(e: crate::selector::SelectorError) -> MangoError {
    let reason = e.0;
    let error = if reason.starts_with("Invalid operator") {
        "invalid_operator"
    } else if reason.starts_with("Unsupported operator") {
        "not_supported"
    } else if reason.starts_with("One or more conditions") {
        "invalid_selector"
    } else if reason.starts_with("Bad argument") {
        "bad_arg"
    } else {
        "invalid_selector"
    };
    MangoError::bad(error, reason)
}

fn non_neg(map: &Map<String, Value>, key: &str) -> Result<Option<u64>, MangoError> {
    match map.get(key) {
        None => Ok(None),
        Some(v) => v.as_u64().map(Some).ok_or_else(|| {
            MangoError::bad(
                "invalid_non_neg_integer",
                format!(
                    "{} is not an integer greater than or equal to zero",
                    erlang_text(v)
                ),
            )
        }),
    }
}

fn pos(map: &Map<String, Value>, key: &str) -> Result<Option<u64>, MangoError> {
    match map.get(key) {
        None => Ok(None),
        Some(v) => v.as_u64().filter(|n| *n > 0).map(Some).ok_or_else(|| {
            MangoError::bad(
                "invalid_pos_integer",
                format!("{} is not an integer greater than zero", erlang_text(v)),
            )
        }),
    }
}

fn boolean(map: &Map<String, Value>, key: &str) -> Result<Option<bool>, MangoError> {
    match map.get(key) {
        None => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(other) => Err(MangoError::bad(
            "invalid_boolean",
            format!("Invalid boolean value: {}", erlang_text(other)),
        )),
    }
}

fn fields(map: &Map<String, Value>) -> Result<Vec<String>, MangoError> {
    match map.get("fields") {
        None => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| match item {
                Value::String(f) if super::fields::valid_name(f) => Ok(f.clone()),
                Value::String(f) => Err(MangoError::bad(
                    "invalid_field_name",
                    format!("Invalid field name: {f}"),
                )),
                other => Err(MangoError::bad(
                    "invalid_field",
                    format!("Invalid JSON for field spec: {}", erlang_text(other)),
                )),
            })
            .collect(),
        Some(other) => Err(MangoError::bad(
            "invalid_fields",
            format!(
                "Fields must be an array of strings, not: {}",
                erlang_text(other)
            ),
        )),
    }
}

fn use_index(value: Option<&Value>) -> Result<Option<(String, Option<String>)>, MangoError> {
    let bad = |v: &Value| {
        MangoError::bad(
            "invalid_index_name",
            format!("Invalid index name: {}", erlang_text(v)),
        )
    };
    let strip = |s: &str| s.strip_prefix("_design/").unwrap_or(s).to_string();
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => {
            let rest = s.strip_prefix("_design/").unwrap_or(s);
            let parts: Vec<&str> = rest.split('/').collect();
            match parts.as_slice() {
                [d] if !d.is_empty() => Ok(Some((d.to_string(), None))),
                [d, n] if !d.is_empty() && !n.is_empty() => {
                    Ok(Some((d.to_string(), Some(n.to_string()))))
                }
                _ => Err(bad(&Value::String(s.clone()))),
            }
        }
        Some(Value::Array(items)) => match items.as_slice() {
            [] => Ok(None),
            [Value::String(d)] => Ok(Some((strip(d), None))),
            [Value::String(d), Value::String(n)] => Ok(Some((strip(d), Some(n.clone())))),
            _ => Err(bad(&Value::Array(items.clone()))),
        },
        Some(other) => Err(bad(other)),
    }
}

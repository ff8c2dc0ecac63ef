//! Mango, CouchDB's declarative queries: index definitions as CouchDB
//! stores them in design documents, `_find` requests, the choice of index
//! and its key range, field projection, bookmarks, and `_explain`. Pure
//! code: the HTTP API runs the plan against the store.

pub mod bookmark;
mod etf;
pub mod fields;
pub mod find;
pub mod index_def;
pub mod normal;
pub mod nouveau;
pub mod nouveau_def;
pub mod plan;
pub mod selector;
pub mod text;

/// A Mango request CouchDB would refuse, with its status, error and reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MangoError {
    pub status: u16,
    pub error: String,
    pub reason: String,
}

impl MangoError {
    pub fn bad(error: &str, reason: String) -> MangoError {
        MangoError {
            status: 400,
            error: error.into(),
            reason,
        }
    }
}

impl std::fmt::Display for MangoError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.error, self.reason)
    }
}

/// A value as Erlang prints it in CouchDB's reasons (`~w`): strings as
/// byte lists, objects as `{[...]}`.
pub fn erlang_text(value: &serde_json::Value) -> String {
    use serde_json::Value;
    match value {
        Value::String(s) => format!(
            "<<{}>>",
            s.bytes()
                .map(|b| b.to_string())
                .collect::<Vec<_>>()
                .join(",")
        ),
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(erlang_text).collect::<Vec<_>>().join(",")
        ),
        Value::Object(map) => format!(
            "{{[{}]}}",
            map.iter()
                .map(|(k, v)| format!(
                    "{{{},{}}}",
                    erlang_text(&Value::String(k.clone())),
                    erlang_text(v)
                ))
                .collect::<Vec<_>>()
                .join(",")
        ),
        other => other.to_string(),
    }
}

/// A value as Erlang's `~p` prints it: strings as `<<"text">>`.
pub(crate) fn erlang_pretty(value: &serde_json::Value) -> String {
    use serde_json::Value;
    match value {
        Value::String(s) if s.is_empty() => "<<>>".into(),
        Value::String(s) => format!("<<{}>>", Value::String(s.clone())),
        Value::Array(items) => format!(
            "[{}]",
            items
                .iter()
                .map(erlang_pretty)
                .collect::<Vec<_>>()
                .join(",")
        ),
        Value::Object(map) => format!(
            "{{[{}]}}",
            map.iter()
                .map(|(k, v)| format!(
                    "{{{},{}}}",
                    erlang_pretty(&Value::String(k.clone())),
                    erlang_pretty(v)
                ))
                .collect::<Vec<_>>()
                .join(",")
        ),
        other => other.to_string(),
    }
}

//! A document from a request, and the limits on it (`max_document_size`,
//! id length, attachments per document).

use serde_json::Value;
use store::DocInput;

use crate::AppState;
use crate::base::error::ApiError;

/// An approximation of a JSON value's encoded size, computed without
/// encoding it: enough to enforce `max_document_size` cheaply.
pub(crate) fn json_size(value: &Value) -> u64 {
    match value {
        Value::Null => 4,
        Value::Bool(_) => 5,
        Value::Number(_) => 8,
        Value::String(s) => s.len() as u64 + 2,
        Value::Array(items) => 2 + items.iter().map(|v| json_size(v) + 1).sum::<u64>(),
        Value::Object(map) => {
            2 + map
                .iter()
                .map(|(k, v)| k.len() as u64 + 4 + json_size(v))
                .sum::<u64>()
        }
    }
}

/// Parses a document and enforces `max_document_size` on its body (the
/// special fields and attachments do not count, as in CouchDB).
pub(crate) fn parse_doc(state: &AppState, value: Value) -> Result<DocInput, ApiError> {
    let doc = DocInput::from_json(value)?;
    let limits = &state.config.limits;
    if let Some(id) = &doc.id {
        limits.check_doc_id(id)?;
    }
    if doc.attachments.len() > limits.max_attachments_per_document {
        return Err(ApiError::bad_request(format!(
            "Too many attachments: {}, the limit is {} (max_attachments_per_document)",
            doc.attachments.len(),
            limits.max_attachments_per_document
        )));
    }
    for (name, _) in &doc.attachments {
        limits.check_attachment_name(name)?;
    }
    let size: u64 = 2 + doc
        .body
        .iter()
        .map(|(k, v)| k.len() as u64 + 4 + json_size(v))
        .sum::<u64>();
    if size > state.config.max_document_size {
        return Err(ApiError::DocumentTooLarge(
            doc.id.clone().unwrap_or_default(),
        ));
    }
    Ok(doc)
}

/// Refuses a document over `max_document_size` from its raw text, before
/// any tree is built from it: only its top-level fields are visited (values
/// borrowed, not parsed), and inline attachment data does not count, as in
/// CouchDB. Text that is not an object is left to the ordinary parse.
pub(crate) fn check_raw_document_size(state: &AppState, raw: &str) -> Result<(), ApiError> {
    let limit = state.config.max_document_size;
    if raw.len() as u64 <= limit {
        return Ok(());
    }
    match serde_json::from_str::<RawDocSize>(raw) {
        Ok(RawDocSize { size, id }) if size > limit => {
            Err(ApiError::DocumentTooLarge(id.unwrap_or_default()))
        }
        _ => Ok(()),
    }
}

/// A document's size as `max_document_size` counts it, from its raw text.
struct RawDocSize {
    size: u64,
    id: Option<String>,
}

impl<'de> serde::Deserialize<'de> for RawDocSize {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Fields;
        impl<'de> serde::de::Visitor<'de> for Fields {
            type Value = RawDocSize;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<RawDocSize, A::Error> {
                let mut out = RawDocSize { size: 2, id: None };
                while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                    let value: &'de serde_json::value::RawValue = map.next_value()?;
                    if key == "_id" {
                        out.id = serde_json::from_str(value.get()).ok();
                    }
                    if key != "_attachments" {
                        out.size += (key.len() + 4 + value.get().len()) as u64;
                    }
                }
                Ok(out)
            }
        }
        deserializer.deserialize_map(Fields)
    }
}

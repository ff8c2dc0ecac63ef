//! The rows CouchDB's endpoints answer with, for both sides of the wire.
//!
//! The server streams the large ones (`_changes`, `_all_docs`) with the
//! writers here, splicing stored document text it trusts; every other value
//! goes through [`crate::json`]. The replicator decodes the same shapes with
//! serde, so a revision it cannot parse is an error, never silently dropped.

use revtree::RevId;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::json::{push_display, push_string};

/// One revision of a `_changes` row: `{"rev": "N-hash"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangeRev {
    pub rev: RevId,
}

/// A `_changes` row as a peer sends it. `seq` stays opaque (CouchDB's are
/// strings, PouchDB Server's numbers).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ChangesRow {
    pub seq: Value,
    pub id: String,
    pub changes: Vec<ChangeRev>,
    #[serde(default)]
    pub deleted: bool,
}

/// Writes a `_changes` row: `doc` is stored document text, already JSON.
pub fn write_changes_row(
    out: &mut String,
    seq: u64,
    id: &str,
    revs: &[RevId],
    deleted: bool,
    doc: Option<Option<&str>>,
) {
    out.push_str("{\"seq\":");
    out.push_str(&seq.to_string());
    out.push_str(",\"id\":");
    push_string(out, id);
    out.push_str(",\"changes\":[");
    for (i, rev) in revs.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str("{\"rev\":");
        push_display(out, rev);
        out.push('}');
    }
    out.push(']');
    if deleted {
        out.push_str(",\"deleted\":true");
    }
    if let Some(doc) = doc {
        out.push_str(",\"doc\":");
        out.push_str(doc.unwrap_or("null"));
    }
    out.push('}');
}

/// Writes an `_all_docs` row for a document that exists (or existed:
/// `deleted` rows come from `keys` lookups). `doc` is stored document text.
pub fn write_all_docs_row(
    out: &mut String,
    id: &str,
    rev: &RevId,
    deleted: bool,
    doc: Option<Option<&str>>,
) {
    out.push_str("{\"id\":");
    push_string(out, id);
    out.push_str(",\"key\":");
    push_string(out, id);
    out.push_str(",\"value\":{\"rev\":");
    push_display(out, rev);
    if deleted {
        out.push_str(",\"deleted\":true");
    }
    out.push('}');
    if let Some(doc) = doc {
        out.push_str(",\"doc\":");
        out.push_str(doc.unwrap_or("null"));
    }
    out.push('}');
}

/// One document's entry in a `_revs_diff` answer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RevsDiffEntry {
    pub missing: Vec<RevId>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub possible_ancestors: Vec<RevId>,
}

/// One row of a `_bulk_docs` answer: `{"ok":true,"id","rev"}` or
/// `{"id","error","reason"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BulkDocsRow {
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ok: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rev: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// CouchDB's error body: `{"error": ..., "reason": ...}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    pub error: String,
    #[serde(default)]
    pub reason: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn hostile_rev() -> impl Strategy<Value = RevId> {
        (
            prop_oneof![1u64..5, Just(revtree::MAX_POS)],
            prop_oneof![
                Just(String::new()),
                "[a-f0-9]{32}",
                any::<String>(),
                Just("a\"b\\c\r\n\u{1}".to_string()),
            ],
        )
            .prop_map(|(pos, hash)| RevId::new(pos, revtree::RevHash::parse(&hash)).unwrap())
    }

    proptest! {
        #[test]
        fn changes_rows_are_valid_json_that_decodes_to_what_was_written(
            id in any::<String>(),
            revs in prop::collection::vec(hostile_rev(), 1..4),
            deleted in any::<bool>(),
            seq in any::<u64>(),
        ) {
            let mut out = String::new();
            write_changes_row(&mut out, seq, &id, &revs, deleted, Some(None));
            let row: ChangesRow = serde_json::from_str(&out).unwrap();
            prop_assert_eq!(row.id, id);
            prop_assert_eq!(row.changes.into_iter().map(|c| c.rev).collect::<Vec<_>>(), revs);
            prop_assert_eq!(row.deleted, deleted);
            prop_assert_eq!(row.seq, Value::from(seq));
        }

        #[test]
        fn all_docs_rows_are_valid_json(id in any::<String>(), rev in hostile_rev(), deleted in any::<bool>()) {
            let mut out = String::new();
            write_all_docs_row(&mut out, &id, &rev, deleted, Some(Some("{\"a\":1}")));
            let row: Value = serde_json::from_str(&out).unwrap();
            prop_assert_eq!(&row["id"], &Value::from(id.clone()));
            prop_assert_eq!(&row["key"], &Value::from(id));
            prop_assert_eq!(&row["value"]["rev"], &Value::from(rev.to_string()));
            prop_assert_eq!(row["value"].get("deleted").is_some(), deleted);
        }
    }
}

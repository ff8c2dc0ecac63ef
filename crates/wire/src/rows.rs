//! The rows CouchDB's endpoints answer with, for both sides of the wire:
//! one type per shape, which the server writes and the replicator decodes.
//!
//! The server streams the large ones (`_changes`, `_all_docs`, `_bulk_get`)
//! with the writers here, splicing stored document text it trusts through
//! [`crate::json`]'s escaper; it serializes the others from the types. The
//! replicator decodes the same shapes with serde, so a revision it cannot
//! parse is an error, never silently dropped. The round-trip tests hold
//! each writer to its type.

use std::fmt;
use std::marker::PhantomData;

use revtree::RevId;
use serde::de::{MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
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
/// `removed`: the reader lost the document (a database with per-document
/// access), and `revs` are its revocation tombstones.
pub fn write_changes_row(
    out: &mut String,
    seq: &str,
    id: &str,
    revs: &[RevId],
    deleted: bool,
    removed: bool,
    doc: Option<Option<&str>>,
) {
    out.push_str("{\"seq\":");
    push_string(out, seq);
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
    if removed {
        out.push_str(",\"removed\":true");
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

/// An `_all_docs` row as a peer sends it, the shape
/// [`write_all_docs_row`] writes.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct AllDocsAnswerRow {
    pub id: String,
    pub key: String,
    pub value: AllDocsRev,
    /// With `include_docs`: the document, or none for a deleted one.
    #[serde(default, deserialize_with = "ejson::value")]
    pub doc: Value,
}

/// An `_all_docs` row's value: the winning revision, and whether it is a
/// deletion (only `keys` lookups list those).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct AllDocsRev {
    pub rev: RevId,
    #[serde(default)]
    pub deleted: bool,
}

/// A JSON object read and written as an ordered list of its members:
/// `_revs_diff`'s request and answer (keyed by document id) and a
/// document's `_attachments` (keyed by name). The order is the order on the
/// wire, which is the order attachments travel in a multipart body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entries<K, V>(pub Vec<(K, V)>);

impl<K, V> Default for Entries<K, V> {
    fn default() -> Self {
        Entries(Vec::new())
    }
}

impl<K: Serialize, V: Serialize> Serialize for Entries<K, V> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

impl<'de, K: Deserialize<'de>, V: Deserialize<'de>> Deserialize<'de> for Entries<K, V> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visit<K, V>(PhantomData<(K, V)>);
        impl<'de, K: Deserialize<'de>, V: Deserialize<'de>> Visitor<'de> for Visit<K, V> {
            type Value = Entries<K, V>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut out = Vec::with_capacity(map.size_hint().unwrap_or(0).min(4096));
                while let Some(entry) = map.next_entry()? {
                    out.push(entry);
                }
                Ok(Entries(out))
            }
        }
        deserializer.deserialize_map(Visit(PhantomData))
    }
}

/// A `_changes` page (`feed=normal`): its rows, where the next page starts,
/// and how many changes are left when the peer says (CouchDB does; PouchDB
/// Server may not).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ChangesPage {
    pub results: Vec<ChangesRow>,
    /// Opaque, like every sequence: handed back as `since`.
    pub last_seq: Value,
    #[serde(default)]
    pub pending: Option<u64>,
}

/// A `_revs_diff` request: the revisions of each document to look for.
pub type RevsDiffRequest = Entries<String, Vec<RevId>>;

/// A `_revs_diff` answer: documents lacking something, each with what it lacks.
pub type RevsDiffAnswer = Entries<String, RevsDiffEntry>;

/// One document's entry in a `_revs_diff` answer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RevsDiffEntry {
    pub missing: Vec<RevId>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub possible_ancestors: Vec<RevId>,
}

/// The answer of `_missing_revs`, `_revs_diff`'s older form: each
/// document lacking something, with only what it lacks.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MissingRevsAnswer {
    pub missing_revs: Entries<String, Vec<RevId>>,
}

/// One row of a `_bulk_docs` answer: `{"ok":true,"id","rev"}`,
/// `{"id","error","reason"}`, or with `new_edits=false` (where CouchDB
/// lists only the refused documents) `{"id","rev","error","reason"}`; the
/// fields are in that order, which is the order they are written in.
///
/// The replicator reads the revision as a [`RevId`]; the server writes the
/// store's text (`R = String`), since a `_local` document's revision
/// (`0-N`) is outside [`RevId`]'s range.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BulkDocsRow<R = RevId> {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ok: Option<bool>,
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default = "none", skip_serializing_if = "Option::is_none")]
    pub rev: Option<R>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "optional_text"
    )]
    pub reason: Option<String>,
}

/// One revision asked of `_bulk_get`: `{"id", "rev"}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct BulkGetItem<'a> {
    pub id: &'a str,
    pub rev: &'a RevId,
}

/// The body of a `_bulk_get` request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BulkGetRequest<'a> {
    pub docs: Vec<BulkGetItem<'a>>,
}

/// A `_bulk_get` answer: one result per revision asked, in order.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct BulkGetAnswer {
    pub results: Vec<BulkGetResult>,
}

/// The answer for one asked revision: with `latest=true`, each leaf it led to.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct BulkGetResult {
    pub id: String,
    pub docs: Vec<FetchedRev>,
}

/// One revision read by `_bulk_get` or `GET /db/doc?open_revs=[...]`:
/// `{"ok": doc}`, `{"missing": rev}` (`open_revs`, and PouchDB Server's
/// `_bulk_get`) or `{"error": {...}}` (CouchDB's `_bulk_get`). Externally
/// tagged, so a document is decoded once, straight into its `Value`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FetchedRev {
    /// The document: an opaque body with its metadata (see [`crate::doc`]),
    /// read as CouchDB reads it.
    Ok(#[serde(deserialize_with = "ejson::value")] Value),
    Missing(RevId),
    Error(BulkGetError),
}

/// Why `_bulk_get` could not read a revision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BulkGetError {
    #[serde(default)]
    pub id: String,
    #[serde(default)]
    pub rev: Option<RevId>,
    pub error: String,
    #[serde(default, deserialize_with = "text")]
    pub reason: String,
}

/// Writes one result of a `_bulk_get` answer, `{"id","docs":[...]}`, the
/// way [`BulkGetResult`] reads it: each revision read is stored document
/// text, already JSON, spliced as `{"ok": doc}` without being parsed; each
/// revision that could not be read is `{"error": {...}}`.
pub fn write_bulk_get_result<'a>(
    out: &mut String,
    id: &str,
    docs: impl IntoIterator<Item = Result<&'a str, &'a BulkGetError>>,
) {
    out.push_str("{\"id\":");
    push_string(out, id);
    out.push_str(",\"docs\":[");
    for (i, doc) in docs.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        match doc {
            Ok(doc) => {
                out.push_str("{\"ok\":");
                out.push_str(doc);
                out.push('}');
            }
            Err(error) => {
                out.push_str("{\"error\":");
                write_bulk_get_error(out, error);
                out.push('}');
            }
        }
    }
    out.push_str("]}");
}

/// `{"id","rev","error","reason"}`, `rev` null when none was asked.
fn write_bulk_get_error(out: &mut String, error: &BulkGetError) {
    out.push_str("{\"id\":");
    push_string(out, &error.id);
    out.push_str(",\"rev\":");
    match &error.rev {
        Some(rev) => push_display(out, rev),
        None => out.push_str("null"),
    }
    out.push_str(",\"error\":");
    push_string(out, &error.error);
    out.push_str(",\"reason\":");
    push_string(out, &error.reason);
    out.push('}');
}

/// CouchDB's error body: `{"error": ..., "reason": ...}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    pub error: String,
    #[serde(default, deserialize_with = "text")]
    pub reason: String,
}

/// CouchDB's database information (`GET /db`, `_dbs_info`): the server
/// writes every member, in CouchDB 3.5's order; the replicator reads only
/// `update_seq` and `instance_start_time` and needs nothing else from a
/// peer (PouchDB Server sends less, older CouchDB other shapes), so a
/// member it does not use that is missing or of another type reads as its
/// default rather than refusing the peer.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DbInfo {
    /// Changes when the database is recreated (or restored): CouchDB 2+
    /// always says `"0"`, PouchDB Server may leave it out. A number is kept
    /// as its text.
    #[serde(default = "zero_text", deserialize_with = "text")]
    pub instance_start_time: String,
    #[serde(default, deserialize_with = "or_default")]
    pub db_name: String,
    /// Opaque, like every sequence.
    #[serde(default)]
    pub purge_seq: Value,
    /// Opaque, like every sequence.
    pub update_seq: Value,
    #[serde(default, deserialize_with = "or_default")]
    pub sizes: DbSizes,
    #[serde(default, deserialize_with = "or_default")]
    pub props: DbProps,
    #[serde(default, deserialize_with = "or_default")]
    pub doc_del_count: u64,
    #[serde(default, deserialize_with = "or_default")]
    pub doc_count: u64,
    #[serde(default, deserialize_with = "or_default")]
    pub disk_format_version: u64,
    #[serde(default, deserialize_with = "or_default")]
    pub compact_running: bool,
    #[serde(default, deserialize_with = "or_default")]
    pub cluster: ClusterInfo,
}

/// A database's sizes in bytes: on disk, its documents' bodies
/// uncompressed, and the live data in the file.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DbSizes {
    #[serde(default)]
    pub file: u64,
    #[serde(default)]
    pub external: u64,
    #[serde(default)]
    pub active: u64,
}

/// A database's properties: `{"partitioned": true}`, `{"access": true}`
/// or `{}`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DbProps {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partitioned: Option<bool>,
    /// Per-document access (`PUT /db?access=true`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access: Option<bool>,
}

/// A database's sharding and quorums (`q`, `n`, `w`, `r`): all 1 for a
/// single node.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterInfo {
    #[serde(default)]
    pub q: u64,
    #[serde(default)]
    pub n: u64,
    #[serde(default)]
    pub w: u64,
    #[serde(default)]
    pub r: u64,
}

/// A member only informative to its reader: read if it has the expected
/// type, its default otherwise.
fn or_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: serde::de::DeserializeOwned + Default,
{
    let value = Value::deserialize(deserializer)?;
    Ok(serde_json::from_value(value).unwrap_or_default())
}

fn zero_text() -> String {
    "0".to_string()
}

/// The answer to writing a single document (`PUT /db/_local/id`). Its
/// `rev` stays text: a `_local` document's revision is `0-N`, outside any
/// revision tree and outside [`RevId`]'s range.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct DocWritten {
    #[serde(default)]
    pub id: String,
    pub rev: String,
}

/// A `reason` (or similar) field: CouchDB sends a string, except when a
/// validation function threw an object, which it passes on as is. Either
/// way we keep it as text rather than refusing the whole answer.
fn text<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    Ok(match Value::deserialize(deserializer)? {
        Value::String(s) => s,
        Value::Null => String::new(),
        other => other.to_string(),
    })
}

fn none<T>() -> Option<T> {
    None
}

fn optional_text<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<String>, D::Error> {
    text(deserializer).map(Some)
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

    #[test]
    fn answers_decode_typed_in_wire_order() {
        let page: ChangesPage = serde_json::from_str(
            r#"{"results":[{"seq":"3-g1","id":"a","changes":[{"rev":"2-b"},{"rev":"2-a"}],"deleted":true,"doc":{"x":1}}],
                "last_seq":"3-g1","pending":7}"#,
        )
        .unwrap();
        assert_eq!(page.results[0].changes.len(), 2);
        assert!(page.results[0].deleted);
        assert_eq!(
            (page.last_seq, page.pending),
            (Value::from("3-g1"), Some(7))
        );

        let diff: RevsDiffAnswer = serde_json::from_str(
            r#"{"z":{"missing":["2-b"],"possible_ancestors":["1-a"]},"a":{"missing":["1-c"]}}"#,
        )
        .unwrap();
        let ids: Vec<&str> = diff.0.iter().map(|(id, _)| id.as_str()).collect();
        assert_eq!(ids, ["z", "a"], "the peer's order is kept");
        assert_eq!(diff.0[0].1.possible_ancestors[0].to_string(), "1-a");
        let request: RevsDiffRequest = Entries(vec![("b".into(), diff.0[0].1.missing.clone())]);
        assert_eq!(ejson::to_string_of(&request).unwrap(), r#"{"b":["2-b"]}"#);

        let got: BulkGetAnswer = serde_json::from_str(
            r#"{"results":[{"id":"a","docs":[{"ok":{"_id":"a","_rev":"1-a"}},{"missing":"2-x"},
                {"error":{"id":"a","rev":"3-y","error":"not_found","reason":"missing"}}]}]}"#,
        )
        .unwrap();
        let docs = &got.results[0].docs;
        assert!(matches!(&docs[0], FetchedRev::Ok(doc) if doc["_rev"] == "1-a"));
        assert!(matches!(&docs[1], FetchedRev::Missing(rev) if rev.pos() == 2));
        assert!(matches!(&docs[2], FetchedRev::Error(e) if e.error == "not_found"));

        let rows: Vec<BulkDocsRow> = serde_json::from_str(
            r#"[{"id":"a","error":"forbidden","reason":{"field":"x"}},{"ok":true,"id":"b","rev":"1-b"}]"#,
        )
        .unwrap();
        assert_eq!(rows[0].reason.as_deref(), Some(r#"{"field":"x"}"#));
        assert_eq!(rows[1].rev.as_ref().map(RevId::pos), Some(1));

        let info: DbInfo = serde_json::from_str(r#"{"db_name":"x","update_seq":12}"#).unwrap();
        assert_eq!(
            (info.update_seq, info.instance_start_time.as_str()),
            (Value::from(12), "0")
        );
        let info: DbInfo =
            serde_json::from_str(r#"{"update_seq":"1-x","instance_start_time":1234}"#).unwrap();
        assert_eq!(info.instance_start_time, "1234");
    }

    #[test]
    fn malformed_answers_are_errors_not_dropped_revisions() {
        for text in [
            r#"{"results":[{"seq":1,"id":"a","changes":[{"rev":"nope"}]}],"last_seq":1}"#,
            r#"{"results":[{"seq":1,"changes":[{"rev":"1-a"}]}],"last_seq":1}"#,
            r#"{"results":[]}"#,
        ] {
            assert!(serde_json::from_str::<ChangesPage>(text).is_err(), "{text}");
        }
        assert!(serde_json::from_str::<RevsDiffAnswer>(r#"{"a":{"missing":["0-a"]}}"#).is_err());
        assert!(serde_json::from_str::<RevsDiffAnswer>(r#"[]"#).is_err());
        for text in [
            r#"{"results":[{"id":"a","docs":[{}]}]}"#,
            r#"{"results":[{"id":"a","docs":[{"missing":"x"}]}]}"#,
        ] {
            assert!(
                serde_json::from_str::<BulkGetAnswer>(text).is_err(),
                "{text}"
            );
        }
        assert!(serde_json::from_str::<Vec<BulkDocsRow>>(r#"[{"id":"a","rev":"bad"}]"#).is_err());
        assert!(serde_json::from_str::<DbInfo>(r#"{"db_name":"x"}"#).is_err());
    }

    #[test]
    fn error_bodies_keep_non_string_reasons_as_text() {
        let body: ErrorBody =
            serde_json::from_str(r#"{"error":"forbidden","reason":{"a":1}}"#).unwrap();
        assert_eq!(body.reason, r#"{"a":1}"#);
        let body: ErrorBody = serde_json::from_str(r#"{"error":"x"}"#).unwrap();
        assert_eq!(body.reason, "");
    }

    proptest! {
        #[test]
        fn changes_rows_are_valid_json_that_decodes_to_what_was_written(
            id in any::<String>(),
            revs in prop::collection::vec(hostile_rev(), 1..4),
            deleted in any::<bool>(),
            seq in any::<String>(),
        ) {
            let mut out = String::new();
            write_changes_row(&mut out, &seq, &id, &revs, deleted, false, Some(None));
            let row: ChangesRow = serde_json::from_str(&out).unwrap();
            prop_assert_eq!(row.id, id);
            prop_assert_eq!(row.changes.into_iter().map(|c| c.rev).collect::<Vec<_>>(), revs);
            prop_assert_eq!(row.deleted, deleted);
            prop_assert_eq!(row.seq, Value::from(seq.as_str()));
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

//! Incoming documents: CouchDB's JSON shape parsed and validated into a
//! `DocInput` that the writer applies. Validation failures are whole-request
//! errors (CouchDB refuses the request before writing anything).

use base64::Engine;
use revtree::{PathError, RevId, RevPath};
use serde_json::{Map, Value};

use crate::{ErrorKind, StoreError};

/// One document to write, as `_bulk_docs`, `PUT /db/doc` or the replicator
/// send it.
#[derive(Debug, Clone, PartialEq)]
pub struct DocInput {
    /// `None` asks the store to generate an id (a new document).
    pub id: Option<String>,
    /// `_rev`: the parent for an edit, or the revision itself when replicating.
    pub rev: Option<RevId>,
    /// `_rev` of a local document (`0-N`), which is not a revision id.
    pub local_rev: Option<String>,
    /// `_revisions`: the revision's history, used when replicating.
    pub revisions: Option<RevPath>,
    pub deleted: bool,
    /// The body without special fields.
    pub body: Map<String, Value>,
    /// `_attachments`, in the order given.
    pub attachments: Vec<(String, AttachmentInput)>,
}

/// One entry of `_attachments` in a write.
#[derive(Debug, Clone, PartialEq)]
pub enum AttachmentInput {
    /// `stub: true`: keep the attachment of that name the parent revision has
    /// (interactive edits), or one this database holds with that digest
    /// (replication).
    Stub {
        digest: Option<String>,
        revpos: Option<u64>,
    },
    /// `data`: the bytes inline, base64-decoded here. They are always the
    /// content itself: CouchDB ignores an `encoding` sent with them.
    Inline {
        content_type: String,
        data: Vec<u8>,
        revpos: Option<u64>,
    },
    /// Inline content of a type CouchDB compresses, gzip-compressed by the
    /// store before the write (`length` is the content's).
    InlineGzip {
        content_type: String,
        gzip: Vec<u8>,
        length: u64,
        revpos: Option<u64>,
    },
    /// `follows: true`: the bytes travel in a multipart body and must be
    /// staged (see `Database::stage_attachment`) and resolved to `Staged`
    /// before the write.
    Follows {
        content_type: String,
        length: Option<u64>,
        revpos: Option<u64>,
        encoding: Option<String>,
    },
    /// Bytes already in the attachment store.
    Staged {
        content_type: String,
        digest: String,
        length: u64,
        revpos: Option<u64>,
        encoding: Option<String>,
        encoded_length: Option<u64>,
        /// Whether this server counted `length` as the bytes arrived (and
        /// compressed them), rather than a client declaring it.
        length_counted: bool,
        /// Held until the write is done, when the bytes were just uploaded.
        pin: crate::BlobPin,
    },
}

impl AttachmentInput {
    /// New content just uploaded (a standalone PUT, a form file): stored
    /// as sent or as the upload compressed it, at the revision the write makes.
    pub fn uploaded(content_type: String, blob: crate::StagedBlob) -> AttachmentInput {
        AttachmentInput::Follows {
            content_type,
            length: None,
            revpos: None,
            encoding: None,
        }
        .staged(blob)
    }

    /// A `follows` attachment whose bytes are now uploaded: `Staged`. Bytes
    /// sent encoded keep their announced decoded `length`, checked when the
    /// revision is written; bytes sent as they are have the length counted
    /// on arrival, and an encoding when the upload compressed them.
    pub fn staged(self, blob: crate::StagedBlob) -> AttachmentInput {
        match self {
            AttachmentInput::Follows {
                content_type,
                length,
                revpos,
                encoding: Some(encoding),
            } => AttachmentInput::Staged {
                content_type,
                digest: blob.digest,
                length: length.unwrap_or(blob.length),
                revpos,
                encoded_length: Some(blob.length),
                encoding: Some(encoding),
                length_counted: false,
                pin: blob.pin,
            },
            AttachmentInput::Follows {
                content_type,
                revpos,
                encoding: None,
                ..
            } => AttachmentInput::Staged {
                content_type,
                digest: blob.digest,
                length: blob.length,
                revpos,
                encoding: blob.gzipped.map(|_| "gzip".to_string()),
                encoded_length: blob.gzipped,
                length_counted: true,
                pin: blob.pin,
            },
            other => other,
        }
    }
}

/// Special fields CouchDB accepts in a document and ignores on write
/// (read-side metadata a client may send back unchanged).
const IGNORED_SPECIAL_FIELDS: &[&str] = &[
    "_revs_info",
    "_conflicts",
    "_deleted_conflicts",
    "_local_seq",
];

/// Underscore fields CouchDB keeps as ordinary body content: access lists and
/// the replicator's state fields in `_replicator` documents.
pub const BODY_SPECIAL_FIELDS: &[&str] = &[
    "_access",
    "_replication_state",
    "_replication_state_time",
    "_replication_state_reason",
    "_replication_id",
    "_replication_stats",
];

fn invalid(error: ErrorKind, reason: impl Into<String>) -> StoreError {
    StoreError::Invalid {
        error,
        reason: reason.into(),
    }
}

/// Checks a document id as CouchDB's `validate_docid` does.
pub fn validate_doc_id(id: &str) -> Result<(), StoreError> {
    if id.is_empty() {
        return Err(invalid(
            ErrorKind::IllegalDocId,
            "Document id must not be empty",
        ));
    }
    if id.starts_with('_') && !id.starts_with("_design/") && !id.starts_with("_local/") {
        return Err(invalid(
            ErrorKind::IllegalDocId,
            "Only reserved document ids may start with underscore.",
        ));
    }
    if id == "_design/" || id == "_local/" {
        return Err(invalid(
            ErrorKind::IllegalDocId,
            // CouchDB's words for an empty design or local name too.
            "Only reserved document ids may start with underscore.",
        ));
    }
    Ok(())
}

/// In a partitioned database, a document id is `partition:id` (design and
/// local documents aside), as CouchDB requires.
pub fn validate_partitioned_id(id: &str) -> Result<(), StoreError> {
    if id.starts_with("_design/") || id.starts_with("_local/") {
        return Ok(());
    }
    match id.split_once(':') {
        Some(("", _)) => Err(invalid(
            ErrorKind::IllegalPartition,
            "Partition must not be empty",
        )),
        Some((partition, rest)) => {
            validate_partition(partition)?;
            // The id within the partition is held to a document id's rules:
            // not empty, no reserved underscore.
            if rest.starts_with('_') {
                return Err(invalid(
                    ErrorKind::IllegalDocId,
                    "Only reserved document ids may start with underscore.",
                ));
            }
            validate_doc_id(rest)
        }
        None => Err(invalid(
            ErrorKind::IllegalDocId,
            "Doc id must be of form partition:id",
        )),
    }
}

/// A partition name as CouchDB accepts it.
pub fn validate_partition(partition: &str) -> Result<(), StoreError> {
    if partition.is_empty() {
        return Err(invalid(
            ErrorKind::IllegalPartition,
            "Partition must not be empty",
        ));
    }
    if partition.starts_with('_') {
        return Err(invalid(
            ErrorKind::IllegalPartition,
            "Partition must not start with an underscore",
        ));
    }
    Ok(())
}

impl DocInput {
    /// Parses a document from its JSON form.
    pub fn from_json(value: Value) -> Result<DocInput, StoreError> {
        let Value::Object(map) = value else {
            return Err(invalid(
                ErrorKind::BadRequest,
                "Document must be a JSON object",
            ));
        };
        let is_local = map
            .get("_id")
            .and_then(Value::as_str)
            .is_some_and(|id| id.starts_with("_local/"));
        let mut local_revisions = None;
        let mut doc = DocInput {
            id: None,
            rev: None,
            local_rev: None,
            revisions: None,
            deleted: false,
            body: Map::new(),
            attachments: Vec::new(),
        };
        for (key, value) in map {
            if !key.starts_with('_') {
                doc.body.insert(key, value);
                continue;
            }
            match key.as_str() {
                "_id" => match value {
                    Value::String(id) => {
                        validate_doc_id(&id)?;
                        doc.id = Some(id);
                    }
                    _ => {
                        return Err(invalid(
                            ErrorKind::IllegalDocId,
                            "Document id must be a string",
                        ));
                    }
                },
                "_rev" => match value {
                    Value::String(rev) if is_local => doc.local_rev = Some(rev),
                    Value::String(rev) => {
                        doc.rev =
                            Some(RevId::parse(&rev).map_err(|_| {
                                invalid(ErrorKind::BadRequest, "Invalid rev format")
                            })?);
                    }
                    _ => return Err(invalid(ErrorKind::BadRequest, "Invalid rev format")),
                },
                "_revisions" if is_local => local_revisions = Some(value),
                "_revisions" if value.is_object() => doc.revisions = Some(parse_revisions(value)?),
                "_deleted" if value.is_boolean() => doc.deleted = value == Value::Bool(true),
                "_attachments" if value.is_object() => doc.attachments = parse_attachments(value)?,
                other if IGNORED_SPECIAL_FIELDS.contains(&other) => {}
                other if BODY_SPECIAL_FIELDS.contains(&other) => {
                    doc.body.insert(key, value);
                }
                other => {
                    return Err(invalid(
                        ErrorKind::DocValidation,
                        format!("Bad special document member: {other}"),
                    ));
                }
            }
        }
        if let Some(revisions) = local_revisions {
            // CouchDB's replicator sends its checkpoint updates with
            // `_revisions`; for a local document it names the `0-N` revision,
            // whatever `_rev` says (no ids: a first write).
            doc.local_rev = local_rev_of_revisions(&revisions)?;
        }
        // `_revisions` is the richer statement of which revision this is.
        if let Some(path) = &doc.revisions {
            doc.rev = Some(path.leaf());
        }
        Ok(doc)
    }

    /// A document with the given id and body (no revision, no attachments).
    pub fn new(id: impl Into<String>, body: Map<String, Value>) -> DocInput {
        DocInput {
            id: Some(id.into()),
            rev: None,
            local_rev: None,
            revisions: None,
            deleted: false,
            body,
            attachments: Vec::new(),
        }
    }

    /// The revision this document *is* when written with `new_edits=false`:
    /// its `_revisions` path, or just `_rev`.
    pub fn replicated_path(&self) -> Option<RevPath> {
        self.revisions
            .clone()
            .or_else(|| self.rev.clone().map(RevPath::single))
    }
}

/// The `0-N` revision a local document's `_revisions` names, as CouchDB
/// reads it: position 0, the newest id the number.
fn local_rev_of_revisions(value: &Value) -> Result<Option<String>, StoreError> {
    let bad = || invalid(ErrorKind::BadRequest, "Invalid rev format");
    if value.get("start").and_then(Value::as_u64) != Some(0) {
        return Err(bad());
    }
    let ids = value.get("ids").and_then(Value::as_array).ok_or_else(bad)?;
    match ids.first() {
        None => Ok(None),
        Some(Value::String(n)) if n.parse::<u64>().is_ok() => Ok(Some(format!("0-{n}"))),
        Some(_) => Err(bad()),
    }
}

/// `_revisions` as CouchDB checks it, with its reasons.
fn parse_revisions(value: Value) -> Result<RevPath, StoreError> {
    let bad = |reason: &str| invalid(ErrorKind::DocValidation, reason);
    let start = value
        .get("start")
        .and_then(Value::as_u64)
        .ok_or_else(|| bad("_revisions.start isn't an integer."))?;
    let ids = value
        .get("ids")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("_revisions.ids isn't a array."))?;
    let ids: Vec<&str> = ids
        .iter()
        .map(|id| id.as_str().ok_or_else(|| bad("RevId isn't a string")))
        .collect::<Result<_, _>>()?;
    RevPath::from_parts(start, &ids).map_err(|e| match e {
        PathError::Empty => bad("_revisions.ids must not be empty"),
        PathError::StartTooSmall => bad("_revisions.start must be at least the number of ids"),
        PathError::StartTooLarge => bad("_revisions.start must be at most 9223372036854775807"),
    })
}

fn parse_attachments(value: Value) -> Result<Vec<(String, AttachmentInput)>, StoreError> {
    let Value::Object(map) = value else {
        return Ok(Vec::new());
    };
    let mut out = Vec::with_capacity(map.len());
    for (name, entry) in map {
        // CouchDB silently drops entries that are not objects.
        let Value::Object(att) = entry else { continue };
        if name.starts_with('_') {
            return Err(invalid(
                ErrorKind::BadRequest,
                format!("Attachment name '{name}' starts with prohibited character '_'"),
            ));
        }
        let str_field = |f: &str| att.get(f).and_then(Value::as_str).map(str::to_string);
        let u64_field = |f: &str| att.get(f).and_then(Value::as_u64);
        let content_type =
            str_field("content_type").unwrap_or_else(|| "application/octet-stream".into());
        let revpos = u64_field("revpos");
        let encoding = str_field("encoding");
        let input = if att.get("stub").and_then(Value::as_bool) == Some(true) {
            AttachmentInput::Stub {
                digest: str_field("digest"),
                revpos,
            }
        } else if att.get("follows").and_then(Value::as_bool) == Some(true) {
            AttachmentInput::Follows {
                content_type,
                length: u64_field("length"),
                revpos,
                encoding,
            }
        } else {
            let bad_data = || {
                invalid(
                    ErrorKind::BadRequest,
                    format!("Invalid attachment data for {name}"),
                )
            };
            let text = att
                .get("data")
                .and_then(Value::as_str)
                .ok_or_else(bad_data)?;
            let data = base64::engine::general_purpose::STANDARD
                .decode(text.as_bytes())
                .map_err(|_| bad_data())?;
            AttachmentInput::Inline {
                content_type,
                data,
                revpos,
            }
        };
        out.push((name, input));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn error_of(value: Value) -> (&'static str, String) {
        match DocInput::from_json(value) {
            Err(StoreError::Invalid { error, reason }) => (error.as_str(), reason),
            other => panic!("expected a validation error, got {other:?}"),
        }
    }

    #[test]
    fn a_document_splits_into_special_fields_and_body() {
        let doc = DocInput::from_json(json!({
            "_id": "a", "_rev": "1-x", "_deleted": false, "z": 1, "a": 2,
            "_conflicts": ["1-y"],
            "_attachments": {"t.txt": {"content_type": "text/plain", "data": "aGVsbG8="}}
        }))
        .unwrap();
        assert_eq!(doc.id.as_deref(), Some("a"));
        assert_eq!(doc.rev.unwrap().to_string(), "1-x");
        assert_eq!(ejson::to_string_of(&doc.body).unwrap(), r#"{"z":1,"a":2}"#);
        assert_eq!(
            doc.attachments,
            vec![(
                "t.txt".to_string(),
                AttachmentInput::Inline {
                    content_type: "text/plain".into(),
                    data: b"hello".to_vec(),
                    revpos: None,
                }
            )]
        );
    }

    #[test]
    fn reserved_and_malformed_ids_are_refused() {
        assert_eq!(error_of(json!({"_id": "_foo"})).0, "illegal_docid");
        assert_eq!(error_of(json!({"_id": ""})).0, "illegal_docid");
        assert_eq!(error_of(json!({"_id": 12})).0, "illegal_docid");
        assert!(DocInput::from_json(json!({"_id": "_design/x"})).is_ok());
        assert!(DocInput::from_json(json!({"_id": "_local/x"})).is_ok());
    }

    #[test]
    fn unknown_special_fields_and_bad_metadata_are_refused() {
        assert_eq!(
            error_of(json!({"_id": "a", "_foo": 1})),
            (
                "doc_validation",
                "Bad special document member: _foo".to_string()
            )
        );
        assert_eq!(error_of(json!({"_rev": "nope"})).1, "Invalid rev format");
        assert_eq!(
            error_of(json!({"_deleted": "yes"})),
            (
                "doc_validation",
                "Bad special document member: _deleted".to_string()
            )
        );
        assert_eq!(
            error_of(json!({"_revisions": {"start": "1", "ids": ["a"]}})),
            (
                "doc_validation",
                "_revisions.start isn't an integer.".to_string()
            )
        );
        assert_eq!(
            error_of(json!({"_revisions": {"start": 1, "ids": "a"}})).1,
            "_revisions.ids isn't a array."
        );
        assert_eq!(
            error_of(json!({"_revisions": {"start": 1, "ids": ["a", "b"]}})).0,
            "doc_validation"
        );
        assert_eq!(
            error_of(json!({"_revisions": {"start": 2, "ids": [1]}})).1,
            "RevId isn't a string"
        );
        assert_eq!(
            error_of(json!([1, 2])),
            ("bad_request", "Document must be a JSON object".to_string())
        );
        assert_eq!(
            error_of(json!({"_attachments": {"a": {"data": "!!"}}})).1,
            "Invalid attachment data for a"
        );
        assert_eq!(
            error_of(json!({"_attachments": {"a": {}}})).1,
            "Invalid attachment data for a"
        );
        assert_eq!(
            error_of(json!({"_attachments": {"_a": {"stub": true}}})).1,
            "Attachment name '_a' starts with prohibited character '_'"
        );
        assert_eq!(
            error_of(json!({"_id": "_design/"})).1,
            "Only reserved document ids may start with underscore."
        );
    }

    #[test]
    fn the_replicated_path_prefers_revisions_over_rev() {
        let doc = DocInput::from_json(json!({
            "_id": "a", "_rev": "2-b", "_revisions": {"start": 2, "ids": ["b", "a"]}
        }))
        .unwrap();
        assert_eq!(doc.replicated_path().unwrap().ids().len(), 2);
        let bare = DocInput::from_json(json!({"_id": "a", "_rev": "2-b"})).unwrap();
        assert_eq!(bare.replicated_path().unwrap().ids().len(), 1);
        let both = DocInput::from_json(
            json!({"_rev": "3-c", "_revisions": {"start": 2, "ids": ["b", "a"]}}),
        )
        .unwrap();
        assert_eq!(both.rev.unwrap().to_string(), "2-b", "_revisions wins");
    }

    #[test]
    fn replication_fields_stay_in_the_body_and_read_metadata_is_dropped() {
        let doc = DocInput::from_json(json!({
            "_replication_state": "completed", "_access": ["a"], "_conflicts": [], "_local_seq": 3
        }))
        .unwrap();
        let keys: Vec<&String> = doc.body.keys().collect();
        assert_eq!(keys, ["_replication_state", "_access"]);
    }

    #[test]
    fn attachment_entries_that_are_not_objects_are_ignored() {
        let doc =
            DocInput::from_json(json!({"_attachments": {"a": 1, "b": {"stub": true}}})).unwrap();
        assert_eq!(doc.attachments.len(), 1);
    }
}

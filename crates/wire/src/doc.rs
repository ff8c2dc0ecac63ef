//! The metadata of a document body: `_id`, `_rev`, `_deleted`, `_revisions`
//! and `_attachments`.
//!
//! Documents travel as opaque JSON (a `serde_json::Value`) that is never
//! rebuilt field by field; whoever needs their metadata reads it here, once
//! and typed, borrowing from the document, instead of chaining `.get`s that
//! quietly turn a malformed field into a default.

use revtree::{RevHash, RevId};
use serde::Deserialize;
use serde_json::Value;

use crate::rows::Entries;

/// A document's metadata, borrowed from the parsed document.
///
/// Read it with [`DocMeta::of`] from a `&Value`: its strings are then
/// borrowed, never copied (decoding from JSON text would need them free of
/// escapes).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct DocMeta<'a> {
    #[serde(rename = "_id")]
    pub id: &'a str,
    #[serde(rename = "_rev")]
    pub rev: RevId,
    #[serde(rename = "_deleted", default)]
    pub deleted: bool,
    #[serde(rename = "_revisions", default, borrow)]
    pub revisions: Option<Revisions<'a>>,
    /// In the document's order: the order attachments travel in.
    #[serde(rename = "_attachments", default, borrow)]
    pub attachments: Entries<&'a str, AttachmentMeta<'a>>,
}

impl<'a> DocMeta<'a> {
    /// Reads the metadata of `doc`; an error names what is missing or malformed.
    pub fn of(doc: &'a Value) -> Result<DocMeta<'a>, serde_json::Error> {
        DocMeta::deserialize(doc)
    }
}

/// `_revisions`: the revision's history, newest first, as hashes below `start`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Revisions<'a> {
    pub start: u64,
    #[serde(borrow)]
    pub ids: Vec<&'a str>,
}

impl Revisions<'_> {
    /// Whether `rev` is in this history.
    pub fn contains(&self, rev: &RevId) -> bool {
        let Some(back) = self.start.checked_sub(rev.pos()) else {
            return false;
        };
        usize::try_from(back)
            .ok()
            .and_then(|back| self.ids.get(back))
            // Parsing gives back the hash as stored (decoded md5 or text), so
            // comparing parsed hashes is comparing their text.
            .is_some_and(|hash| &RevHash::parse(hash) == rev.hash())
    }
}

/// One entry of `_attachments`: a stub, inline data or a part that follows.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct AttachmentMeta<'a> {
    #[serde(default, borrow)]
    pub content_type: Option<&'a str>,
    #[serde(default)]
    pub revpos: Option<u64>,
    #[serde(default, borrow)]
    pub digest: Option<&'a str>,
    #[serde(default)]
    pub length: Option<u64>,
    /// Set when the stored (and sent) bytes are compressed (`gzip`).
    #[serde(default, borrow)]
    pub encoding: Option<&'a str>,
    #[serde(default)]
    pub encoded_length: Option<u64>,
    #[serde(default)]
    pub stub: bool,
    #[serde(default)]
    pub follows: bool,
}

impl AttachmentMeta<'_> {
    /// How many bytes travel: the encoded length when the bytes are
    /// encoded, else the length.
    pub fn wire_length(&self) -> Option<u64> {
        if self.encoding.is_some() {
            self.encoded_length
        } else {
            self.length
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn metadata_is_read_typed_and_in_order() {
        let doc = json!({
            "_id": "d", "_rev": "3-c", "body": {"x": [1, 2]},
            "_revisions": {"start": 3, "ids": ["c", "b", "a"]},
            "_attachments": {
                "z.txt": {"stub": true, "revpos": 1, "length": 3, "content_type": "text/plain"},
                "a.gz": {"follows": true, "revpos": 3, "length": 9, "encoding": "gzip", "encoded_length": 5},
            }
        });
        let meta = DocMeta::of(&doc).unwrap();
        assert_eq!((meta.id, meta.rev.to_string().as_str()), ("d", "3-c"));
        let names: Vec<&str> = meta.attachments.0.iter().map(|(n, _)| *n).collect();
        assert_eq!(names, ["z.txt", "a.gz"]);
        assert_eq!(meta.attachments.0[0].1.wire_length(), Some(3));
        assert_eq!(meta.attachments.0[1].1.wire_length(), Some(5));
        assert!(meta.attachments.0[1].1.follows && meta.attachments.0[0].1.stub);
        let revisions = meta.revisions.unwrap();
        let rev = |s: &str| RevId::parse(s).unwrap();
        assert!(revisions.contains(&rev("2-b")) && revisions.contains(&rev("1-a")));
        assert!(!revisions.contains(&rev("2-x")) && !revisions.contains(&rev("4-d")));
    }

    #[test]
    fn malformed_metadata_is_an_error_that_names_the_field() {
        for (doc, field) in [
            (json!({"_rev": "1-a"}), "_id"),
            (json!({"_id": "d"}), "_rev"),
            (json!({"_id": "d", "_rev": "x"}), "rev format"),
            (json!({"_id": 5, "_rev": "1-a"}), "string"),
            (
                json!({"_id": "d", "_rev": "1-a", "_attachments": {"a": {"length": "3"}}}),
                "u64",
            ),
            (
                json!({"_id": "d", "_rev": "1-a", "_revisions": {"start": 1}}),
                "ids",
            ),
        ] {
            let err = DocMeta::of(&doc).unwrap_err().to_string();
            assert!(err.contains(field), "{doc}: {err}");
        }
    }
}

//! Deterministic new revision ids: the same edit on two servers yields the same rev.

use std::io::{self, Write};

use md5::{Digest, Md5};
use serde_json::Value;

use crate::{RevHash, RevId};

/// Bumped if the hashed input ever changes shape: old revisions stay valid,
/// but the same edit would get a different id on old and new servers.
const REV_HASH_VERSION: u8 = 1;

/// What a revision's id covers of one attachment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttachmentDigest<'a> {
    pub name: &'a str,
    pub content_type: &'a str,
    /// CouchDB's digest string, `md5-<base64>`.
    pub digest: &'a str,
}

/// The hash of a new revision: md5 (32 lowercase hex) over the parent
/// revision, the deleted flag, the body in canonical JSON without its
/// top-level metadata fields (`_id`, `_rev`, `_attachments`, ...), and the attachments' names, types
/// and digests in name order.
pub fn new_rev_hash(
    parent: Option<&RevId>,
    deleted: bool,
    body: &Value,
    attachments: &[AttachmentDigest<'_>],
) -> RevHash {
    let mut sink = Md5Writer(Md5::new());
    let mut atts: Vec<&AttachmentDigest<'_>> = attachments.iter().collect();
    atts.sort_by(|a, b| a.name.cmp(b.name));

    // The input is one canonical JSON array, which is self-delimiting:
    // [version, parent, deleted, body, [[name, type, digest], ...]].
    // Writing into an md5 sink cannot fail.
    let _ = (|| -> io::Result<()> {
        write!(sink, "[{REV_HASH_VERSION},")?;
        match parent {
            Some(rev) => write_json_string(&mut sink, &rev.to_string())?,
            None => sink.write_all(b"null")?,
        }
        write!(sink, ",{deleted},")?;
        write_canonical_body(&mut sink, body)?;
        sink.write_all(b",[")?;
        for (i, att) in atts.iter().enumerate() {
            if i > 0 {
                sink.write_all(b",")?;
            }
            sink.write_all(b"[")?;
            write_json_string(&mut sink, att.name)?;
            sink.write_all(b",")?;
            write_json_string(&mut sink, att.content_type)?;
            sink.write_all(b",")?;
            write_json_string(&mut sink, att.digest)?;
            sink.write_all(b"]")?;
        }
        sink.write_all(b"]]")
    })();
    RevHash::Md5(sink.0.finalize().into())
}

/// Writes `value` as canonical JSON: object keys sorted by their UTF-8
/// bytes, no whitespace, numbers as parsed.
pub fn write_canonical_json(out: &mut impl Write, value: &Value) -> io::Result<()> {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            write_object(out, entries)
        }
        Value::Array(items) => {
            out.write_all(b"[")?;
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.write_all(b",")?;
                }
                write_canonical_json(out, item)?;
            }
            out.write_all(b"]")
        }
        other => serde_json::to_writer(out, other).map_err(io::Error::other),
    }
}

/// Top-level fields that describe a revision rather than being its content;
/// other `_` fields CouchDB keeps in bodies (`_replication_state`, ...) are hashed.
const METADATA_FIELDS: &[&str] = &[
    "_id",
    "_rev",
    "_revisions",
    "_deleted",
    "_attachments",
    "_revs_info",
    "_conflicts",
    "_deleted_conflicts",
    "_local_seq",
];

/// A document body without its top-level metadata fields.
fn write_canonical_body(out: &mut impl Write, body: &Value) -> io::Result<()> {
    match body {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map
                .iter()
                .filter(|(k, _)| !METADATA_FIELDS.contains(&k.as_str()))
                .collect();
            entries.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            write_object(out, entries)
        }
        other => write_canonical_json(out, other),
    }
}

fn write_object(out: &mut impl Write, entries: Vec<(&String, &Value)>) -> io::Result<()> {
    out.write_all(b"{")?;
    for (i, (key, value)) in entries.into_iter().enumerate() {
        if i > 0 {
            out.write_all(b",")?;
        }
        write_json_string(out, key)?;
        out.write_all(b":")?;
        write_canonical_json(out, value)?;
    }
    out.write_all(b"}")
}

fn write_json_string(out: &mut impl Write, s: &str) -> io::Result<()> {
    serde_json::to_writer(out, s).map_err(io::Error::other)
}

struct Md5Writer(Md5);

impl Write for Md5Writer {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.update(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rev(s: &str) -> RevId {
        RevId::parse(s).unwrap()
    }

    #[test]
    fn the_same_edit_gives_the_same_revision_whatever_the_key_order() {
        let a = json!({"b": 1, "a": {"y": [1, 2], "x": null}, "_id": "doc"});
        let b: Value = serde_json::from_str(r#"{"a":{"x":null,"y":[1,2]},"b":1}"#).unwrap();
        let parent = rev("1-abc");
        assert_eq!(
            new_rev_hash(Some(&parent), false, &a, &[]),
            new_rev_hash(Some(&parent), false, &b, &[])
        );
    }

    #[test]
    fn the_hash_is_32_lowercase_hex() {
        let h = new_rev_hash(None, false, &json!({}), &[]).to_string();
        assert_eq!(h.len(), 32);
        assert!(
            h.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        );
    }

    #[test]
    fn every_part_of_the_edit_changes_the_hash() {
        let body = json!({"v": 1});
        let att = AttachmentDigest {
            name: "a.txt",
            content_type: "text/plain",
            digest: "md5-x",
        };
        let base = new_rev_hash(Some(&rev("1-a")), false, &body, &[att]);
        let variants = [
            new_rev_hash(Some(&rev("1-b")), false, &body, &[att]),
            new_rev_hash(None, false, &body, &[att]),
            new_rev_hash(Some(&rev("1-a")), true, &body, &[att]),
            new_rev_hash(Some(&rev("1-a")), false, &json!({"v": 2}), &[att]),
            new_rev_hash(Some(&rev("1-a")), false, &body, &[]),
            new_rev_hash(
                Some(&rev("1-a")),
                false,
                &body,
                &[AttachmentDigest {
                    digest: "md5-y",
                    ..att
                }],
            ),
            new_rev_hash(
                Some(&rev("1-a")),
                false,
                &body,
                &[AttachmentDigest {
                    content_type: "text/html",
                    ..att
                }],
            ),
        ];
        for v in variants {
            assert_ne!(v, base);
        }
    }

    #[test]
    fn special_fields_and_attachment_order_do_not_change_the_hash() {
        let a1 = AttachmentDigest {
            name: "a",
            content_type: "t",
            digest: "d1",
        };
        let a2 = AttachmentDigest {
            name: "b",
            content_type: "t",
            digest: "d2",
        };
        let with_meta = json!({"v": 1, "_rev": "1-x", "_attachments": {}, "_id": "d"});
        assert_eq!(
            new_rev_hash(None, false, &with_meta, &[a1, a2]),
            new_rev_hash(None, false, &json!({"v": 1}), &[a2, a1])
        );
    }

    #[test]
    fn replication_state_fields_are_content_and_change_the_hash() {
        let plain = new_rev_hash(None, false, &json!({"v": 1}), &[]);
        let with_state = new_rev_hash(
            None,
            false,
            &json!({"v": 1, "_replication_state": "completed"}),
            &[],
        );
        assert_ne!(plain, with_state);
    }

    #[test]
    fn canonical_json_sorts_nested_keys_and_drops_whitespace() {
        let mut out = Vec::new();
        let v: Value =
            serde_json::from_str(r#"{ "b" : [ {"d":1, "c":2} ], "a" : "\u00e9" }"#).unwrap();
        write_canonical_json(&mut out, &v).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"{"a":"é","b":[{"c":2,"d":1}]}"#
        );
    }
}

//! New revision ids as CouchDB 3 computes them: the same edit made on
//! CouchDB and on Recliner gets the same id, so a document written to both
//! converges instead of conflicting.

use std::io::{self, Write};

use md5::{Digest, Md5};
use serde_json::Value;

use crate::erlang_term as term;
use crate::{RevHash, RevId};

/// What a revision's id covers of one attachment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttachmentDigest<'a> {
    pub name: &'a str,
    pub content_type: &'a str,
    /// The attachment's MD5, raw (the 16 bytes behind `md5-<base64>`).
    pub md5: &'a [u8],
}

/// The hash of a new revision, as CouchDB's `couch_db:new_revid/1`: the MD5
/// of the Erlang term `[Deleted, OldPos, OldRev, Body, Atts]`, where the body
/// is the document without its top-level metadata fields (`_id`, `_rev`,
/// `_attachments`...) in its member order, and `Atts` lists each
/// attachment's `{Name, Type, MD5}` in the reverse of the document's order.
pub fn new_rev_hash(
    parent: Option<&RevId>,
    deleted: bool,
    body: &Value,
    attachments: &[AttachmentDigest<'_>],
) -> RevHash {
    let mut sink = Md5Writer(Md5::new());
    // Writing into an md5 sink cannot fail.
    let _ = write_rev_term(&mut sink, parent, deleted, body, attachments);
    RevHash::Md5(sink.0.finalize().into())
}

fn write_rev_term(
    out: &mut impl Write,
    parent: Option<&RevId>,
    deleted: bool,
    body: &Value,
    attachments: &[AttachmentDigest<'_>],
) -> io::Result<()> {
    out.write_all(&[term::VERSION])?;
    term::list_header(out, 5)?;
    term::atom(out, if deleted { "true" } else { "false" })?;
    match parent {
        Some(rev) => {
            term::integer(out, i128::from(rev.pos()))?;
            match &rev.hash {
                RevHash::Md5(bytes) => term::binary(out, bytes)?,
                RevHash::Text(text) => match upper_hex_128(text) {
                    Some(bytes) => term::binary(out, &bytes)?,
                    None => term::binary(out, text.as_bytes())?,
                },
            }
        }
        None => {
            term::integer(out, 0)?;
            term::integer(out, 0)?;
        }
    }
    match body {
        Value::Object(map) => term::object(
            out,
            map.iter()
                .filter(|(k, _)| !METADATA_FIELDS.contains(&k.as_str()))
                .collect::<Vec<_>>()
                .into_iter(),
        )?,
        other => term::ejson(out, other)?,
    }
    if !attachments.is_empty() {
        term::list_header(out, attachments.len() as u32)?;
        for att in attachments.iter().rev() {
            term::tuple_header(out, 3)?;
            term::binary(out, att.name.as_bytes())?;
            term::binary(out, att.content_type.as_bytes())?;
            term::binary(out, att.md5)?;
        }
    }
    // The attachments list ends, then the five-element list does.
    term::nil(out)?;
    term::nil(out)
}

/// CouchDB reads any 32 hex digits as a 16-byte revision id, capitals too;
/// lowercase ones are already [`RevHash::Md5`].
fn upper_hex_128(text: &str) -> Option<[u8; 16]> {
    if text.len() != 32 {
        return None;
    }
    let mut out = [0u8; 16];
    for (i, chunk) in text.as_bytes().chunks(2).enumerate() {
        let pair = std::str::from_utf8(chunk).ok()?;
        out[i] = u8::from_str_radix(pair, 16).ok()?;
    }
    Some(out)
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
        // The hash's own canonical form (see `write_json_string`).
        #[allow(clippy::disallowed_methods)]
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

/// Strings and scalars in the hashed form are written as serde_json writes
/// them: the bytes a revision id is hashed from are fixed for the life of
/// the data (stored revisions were hashed this way), so they do not follow
/// the one JSON writer (`ejson`) if its rules ever change.
#[allow(clippy::disallowed_methods)]
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
    use md5::{Digest, Md5};
    use serde_json::json;

    fn rev(s: &str) -> RevId {
        RevId::parse(s).unwrap()
    }

    fn hex(hash: RevHash) -> String {
        hash.to_string()
    }

    /// Ids from Apache CouchDB 3.5 (and its Erlang runtime) for the same edits.
    #[test]
    fn edits_get_couchdbs_revision_ids() {
        assert_eq!(
            hex(new_rev_hash(None, false, &json!({}), &[])),
            "967a00dff5e02add41819138abb3284d"
        );
        assert_eq!(
            hex(new_rev_hash(None, false, &json!({"_id": "x", "a": 1}), &[])),
            "23202479633c2b380f79507a776743d5"
        );
        let body: Value = serde_json::from_str(r#"{"b":"\u00e9","n":[1,2.5]}"#).unwrap();
        assert_eq!(
            hex(new_rev_hash(
                Some(&rev("1-967a00dff5e02add41819138abb3284d")),
                false,
                &body,
                &[]
            )),
            "06b8c36c4205cd1b5500d0605c0a83e4"
        );
        assert_eq!(
            hex(new_rev_hash(Some(&rev("2-abc")), true, &json!({}), &[])),
            "7b9df18b81d238089ea853ac2a1ff843"
        );
    }

    /// Ids CouchDB 3.5 gave documents `{"v": N}` written as this text:
    /// numbers hash as the Erlang terms jiffy makes of them (integers of
    /// any size, doubles as jiffy reads them, a negative zero with its
    /// sign), and a key given twice as its last value at its last place.
    #[test]
    fn numbers_and_duplicate_keys_hash_as_in_couchdb() {
        for (body, id) in [
            (r#"{"v":1e2}"#, "038bf73435d28dc02e8cbbb83a3cfc4b"),
            (r#"{"v":1E-7}"#, "47bbb55740436c49dfe33cfff9b7213d"),
            (r#"{"v":1.5e300}"#, "e9e97da44562be228bf1c1ce43af6fa2"),
            (r#"{"v":1.0}"#, "ed03183d83bd8187ad0acc41d3ed729c"),
            (r#"{"v":-0.0}"#, "5a7811452a4161777cd378304565ccf1"),
            (r#"{"v":-0}"#, "083d7391ec71ec717a762c87db469932"),
            (
                r#"{"v":12345678901234567890123}"#,
                "05258dea959a73673d1a002f90cd403e",
            ),
            (
                r#"{"v":100000000000000000000}"#,
                "0842b42334c0d767673626b8b6ff6372",
            ),
            (
                r#"{"v":-18446744073709551617}"#,
                "73a5dc9ad35c17043495ed2e55f75e75",
            ),
            (
                r#"{"v":0.36920404944799556}"#,
                "fe1f7622ab86076e364348226ce75bbd",
            ),
            (r#"{"v":5e-324}"#, "68432df6fda388de9a3864ac7b1129d3"),
            (r#"{"v":4.9e-324}"#, "0b7743efaff2fa0c3c7fd368d9d79cdc"),
            (
                r#"{"v":123456789012345678901234567890e5}"#,
                "eb451dd5a3a3b0d602e7428db82b17a1",
            ),
            (
                r#"{"v":9007199254740993}"#,
                "f94701bd22643915e807e3edfe5ae7f7",
            ),
            (
                r#"{"v":9007199254740993.0}"#,
                "9d2f8a455695819bd522c1df66b56601",
            ),
            (r#"{"a":1,"b":2,"a":3}"#, "cf8195ee4268460f49235c8e98d42c6f"),
            (r#"{"b":2,"a":3}"#, "cf8195ee4268460f49235c8e98d42c6f"),
        ] {
            let value = ejson::from_str(body).unwrap();
            assert_eq!(hex(new_rev_hash(None, false, &value, &[])), id, "{body}");
        }
        let big = format!(r#"{{"v":1{}}}"#, "0".repeat(308));
        let value = ejson::from_str(&big).unwrap();
        assert_eq!(
            hex(new_rev_hash(None, false, &value, &[])),
            "0eace677812c11d04dcb9bac1f29a543"
        );
    }

    #[test]
    fn attachments_count_by_name_type_and_md5_in_reverse_document_order() {
        let hello: [u8; 16] = Md5::digest(b"hello").into();
        let empty: [u8; 16] = Md5::digest(b"").into();
        let a = AttachmentDigest {
            name: "a.txt",
            content_type: "text/plain",
            md5: &hello,
        };
        let b = AttachmentDigest {
            name: "b.bin",
            content_type: "application/octet-stream",
            md5: &empty,
        };
        let body = json!({"v": 1, "_attachments": {}});
        assert_eq!(
            hex(new_rev_hash(None, false, &body, &[a, b])),
            "dcc3854cda7a025c5bfd9e9ae4946def"
        );
        assert_ne!(
            new_rev_hash(None, false, &body, &[a, b]),
            new_rev_hash(None, false, &body, &[b, a])
        );
    }

    #[test]
    fn capital_hex_parents_count_as_their_bytes() {
        let lower = rev("1-967a00dff5e02add41819138abb3284d");
        let upper = rev("1-967A00DFF5E02ADD41819138ABB3284D");
        assert_eq!(
            new_rev_hash(Some(&lower), false, &json!({}), &[]),
            new_rev_hash(Some(&upper), false, &json!({}), &[])
        );
    }

    #[test]
    fn every_part_of_the_edit_changes_the_hash() {
        let body = json!({"v": 1});
        let (x, y) = ([1u8; 16], [2u8; 16]);
        let att = AttachmentDigest {
            name: "a.txt",
            content_type: "text/plain",
            md5: &x,
        };
        let base = new_rev_hash(Some(&rev("1-a")), false, &body, &[att]);
        let variants = [
            new_rev_hash(Some(&rev("1-b")), false, &body, &[att]),
            new_rev_hash(Some(&rev("2-a")), false, &body, &[att]),
            new_rev_hash(None, false, &body, &[att]),
            new_rev_hash(Some(&rev("1-a")), true, &body, &[att]),
            new_rev_hash(Some(&rev("1-a")), false, &json!({"v": 2}), &[att]),
            new_rev_hash(Some(&rev("1-a")), false, &body, &[]),
            new_rev_hash(
                Some(&rev("1-a")),
                false,
                &body,
                &[AttachmentDigest { md5: &y, ..att }],
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
    fn metadata_fields_do_not_count_but_replication_state_does() {
        let with_meta = json!({"v": 1, "_rev": "1-x", "_attachments": {}, "_id": "d",
            "_revisions": {}, "_deleted": false, "_conflicts": []});
        assert_eq!(
            new_rev_hash(None, false, &with_meta, &[]),
            new_rev_hash(None, false, &json!({"v": 1}), &[])
        );
        assert_ne!(
            new_rev_hash(None, false, &json!({"v": 1}), &[]),
            new_rev_hash(
                None,
                false,
                &json!({"v": 1, "_replication_state": "completed"}),
                &[]
            )
        );
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

//! What the server writes, the replicator reads back as the same value.
//!
//! Each shape both sides speak is written here the way the server writes
//! it (its streamed writer, or `ejson`'s serializer for whole answers) and
//! decoded the way the replicator decodes a peer's answer (`serde_json`
//! into the `wire` type), with strings made to break a careless writer.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use proptest::prelude::*;
use revtree::{RevHash, RevId};
use serde_json::{Value, json};
use wire::rows::{
    AllDocsAnswerRow, AllDocsRev, BulkDocsRow, BulkGetAnswer, BulkGetError, BulkGetResult,
    ChangeRev, ChangesRow, ClusterInfo, DbInfo, DbProps, DbSizes, Entries, FetchedRev,
    MissingRevsAnswer, RevsDiffAnswer, RevsDiffEntry, write_all_docs_row, write_bulk_get_result,
    write_changes_row,
};

/// Text with quotes, backslashes, control characters and non-ASCII, or
/// anything at all.
fn hostile_text() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        Just("a\"b\\c\r\n\t\u{0}\u{1}\u{1f}\u{7f}".to_string()),
        Just("é√😀\u{2028}\u{2029}\u{feff}".to_string()),
        Just(String::new()),
    ]
}

fn hostile_rev() -> impl Strategy<Value = RevId> {
    (
        prop_oneof![1u64..5, Just(revtree::MAX_POS)],
        prop_oneof!["[a-f0-9]{32}", hostile_text()],
    )
        .prop_map(|(pos, hash)| RevId::new(pos, RevHash::parse(&hash)).unwrap())
}

/// A sequence as a peer may send it: CouchDB's text or PouchDB Server's number.
fn seq() -> impl Strategy<Value = Value> {
    prop_oneof![
        hostile_text().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
    ]
}

/// A stored document's text, as the store keeps it (written by `ejson`),
/// with the value it holds.
fn stored_doc() -> impl Strategy<Value = (String, Value)> {
    (hostile_text(), hostile_rev(), hostile_text(), any::<i64>()).prop_map(|(id, rev, text, n)| {
        let doc = json!({"_id": id, "_rev": rev.to_string(), "text": text, "n": n});
        (ejson::to_string(&doc), doc)
    })
}

fn bulk_get_error() -> impl Strategy<Value = BulkGetError> {
    (
        hostile_text(),
        proptest::option::of(hostile_rev()),
        hostile_text(),
        hostile_text(),
    )
        .prop_map(|(id, rev, error, reason)| BulkGetError {
            id,
            rev,
            error,
            reason,
        })
}

fn written<T: serde::Serialize>(value: &T) -> Vec<u8> {
    ejson::to_vec_of(value).unwrap()
}

fn read<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> T {
    serde_json::from_slice(bytes).unwrap()
}

/// The database information the server answers with for a new database.
fn new_db_info(partitioned: bool) -> DbInfo {
    DbInfo {
        instance_start_time: "0".into(),
        db_name: "db".into(),
        purge_seq: Value::from("0-t"),
        update_seq: Value::from("0-t"),
        sizes: DbSizes {
            file: 8192,
            external: 0,
            active: 0,
        },
        props: DbProps {
            partitioned: partitioned.then_some(true),
            access: None,
        },
        doc_del_count: 0,
        doc_count: 0,
        disk_format_version: 8,
        compact_running: false,
        cluster: ClusterInfo {
            q: 1,
            n: 1,
            w: 1,
            r: 1,
        },
    }
}

#[test]
fn database_information_is_written_in_couchdbs_member_order() {
    assert_eq!(
        String::from_utf8(written(&new_db_info(true))).unwrap(),
        r#"{"instance_start_time":"0","db_name":"db","purge_seq":"0-t","update_seq":"0-t","sizes":{"file":8192,"external":0,"active":0},"props":{"partitioned":true},"doc_del_count":0,"doc_count":0,"disk_format_version":8,"compact_running":false,"cluster":{"q":1,"n":1,"w":1,"r":1}}"#
    );
    assert!(
        String::from_utf8(written(&new_db_info(false)))
            .unwrap()
            .contains(r#""props":{},"#)
    );
}

#[test]
fn a_peers_database_information_needs_only_its_update_sequence() {
    let info: DbInfo = read(
        br#"{"db_name":"x","update_seq":12,"doc_count":"lots","sizes":null,"cluster":{"q":"?"}}"#,
    );
    assert_eq!(info.update_seq, Value::from(12));
    assert_eq!(info.instance_start_time, "0");
    assert_eq!(
        (info.doc_count, info.sizes, info.cluster),
        (0, DbSizes::default(), ClusterInfo::default())
    );
}

#[test]
fn bulk_docs_rows_are_written_in_couchdbs_member_order() {
    let row = |ok, rev: Option<&str>, error: Option<&str>| BulkDocsRow::<String> {
        ok,
        id: Some("a".into()),
        rev: rev.map(Into::into),
        error: error.map(Into::into),
        reason: error.map(|_| "why".into()),
    };
    let rows = [
        row(Some(true), Some("1-a"), None),
        row(None, None, Some("conflict")),
        row(None, Some("1-a"), Some("forbidden")),
    ];
    assert_eq!(
        String::from_utf8(written(&rows)).unwrap(),
        r#"[{"ok":true,"id":"a","rev":"1-a"},{"id":"a","error":"conflict","reason":"why"},{"id":"a","rev":"1-a","error":"forbidden","reason":"why"}]"#
    );
}

proptest! {
    #[test]
    fn database_information_written_by_the_server_reads_back_equal(
        names in (hostile_text(), hostile_text()),
        seqs in (seq(), seq()),
        sizes in any::<(u64, u64, u64)>(),
        partitioned in proptest::option::of(any::<bool>()),
        counts in any::<(u64, u64, u64, bool)>(),
        cluster in any::<(u64, u64, u64, u64)>(),
    ) {
        let info = DbInfo {
            instance_start_time: names.0,
            db_name: names.1,
            purge_seq: seqs.0,
            update_seq: seqs.1,
            sizes: DbSizes { file: sizes.0, external: sizes.1, active: sizes.2 },
            props: DbProps { partitioned, access: None },
            doc_del_count: counts.0,
            doc_count: counts.1,
            disk_format_version: counts.2,
            compact_running: counts.3,
            cluster: ClusterInfo { q: cluster.0, n: cluster.1, w: cluster.2, r: cluster.3 },
        };
        prop_assert_eq!(read::<DbInfo>(&written(&info)), info);
    }

    #[test]
    fn bulk_docs_rows_written_by_the_server_read_back_equal(
        rows in prop::collection::vec(
            (
                proptest::option::of(any::<bool>()),
                proptest::option::of(hostile_text()),
                proptest::option::of(hostile_rev()),
                proptest::option::of(hostile_text()),
                proptest::option::of(hostile_text()),
            ),
            0..4,
        ),
    ) {
        let rows: Vec<BulkDocsRow> = rows
            .into_iter()
            .map(|(ok, id, rev, error, reason)| BulkDocsRow { ok, id, rev, error, reason })
            .collect();
        // The server writes the store's revision text.
        let as_text: Vec<BulkDocsRow<String>> = rows
            .iter()
            .map(|row| BulkDocsRow {
                ok: row.ok,
                id: row.id.clone(),
                rev: row.rev.as_ref().map(ToString::to_string),
                error: row.error.clone(),
                reason: row.reason.clone(),
            })
            .collect();
        prop_assert_eq!(&written(&as_text), &written(&rows));
        prop_assert_eq!(read::<Vec<BulkDocsRow>>(&written(&as_text)), rows);
    }

    #[test]
    fn bulk_get_answers_streamed_by_the_server_read_back_equal(
        results in prop::collection::vec(
            (
                hostile_text(),
                prop::collection::vec(
                    prop_oneof![
                        stored_doc().prop_map(Ok),
                        bulk_get_error().prop_map(Err),
                    ],
                    0..4,
                ),
            ),
            0..4,
        ),
    ) {
        let mut out = String::from("{\"results\":[");
        for (i, (id, docs)) in results.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let docs = docs.iter().map(|doc| match doc {
                Ok((text, _)) => Ok(text.as_str()),
                Err(error) => Err(error),
            });
            write_bulk_get_result(&mut out, id, docs);
        }
        out.push_str("]}\n");
        let expected = BulkGetAnswer {
            results: results
                .into_iter()
                .map(|(id, docs)| BulkGetResult {
                    id,
                    docs: docs
                        .into_iter()
                        .map(|doc| match doc {
                            Ok((_, value)) => FetchedRev::Ok(value),
                            Err(error) => FetchedRev::Error(error),
                        })
                        .collect(),
                })
                .collect(),
        };
        prop_assert_eq!(read::<BulkGetAnswer>(out.as_bytes()), expected);
    }

    #[test]
    fn changes_rows_streamed_by_the_server_read_back_equal(
        seq in hostile_text(),
        id in hostile_text(),
        revs in prop::collection::vec(hostile_rev(), 1..4),
        deleted in any::<bool>(),
        doc in proptest::option::of(proptest::option::of(stored_doc())),
    ) {
        let mut out = String::new();
        let text = doc.as_ref().map(|doc| doc.as_ref().map(|(text, _)| text.as_str()));
        write_changes_row(&mut out, &seq, &id, &revs, deleted, false, text);
        let expected = ChangesRow {
            seq: Value::from(seq),
            id,
            changes: revs.into_iter().map(|rev| ChangeRev { rev }).collect(),
            deleted,
        };
        prop_assert_eq!(read::<ChangesRow>(out.as_bytes()), expected);
    }

    #[test]
    fn all_docs_rows_streamed_by_the_server_read_back_equal(
        id in hostile_text(),
        rev in hostile_rev(),
        deleted in any::<bool>(),
        doc in proptest::option::of(proptest::option::of(stored_doc())),
    ) {
        let mut out = String::new();
        let text = doc.as_ref().map(|doc| doc.as_ref().map(|(text, _)| text.as_str()));
        write_all_docs_row(&mut out, &id, &rev, deleted, text);
        let expected = AllDocsAnswerRow {
            id: id.clone(),
            key: id,
            value: AllDocsRev { rev, deleted },
            doc: doc.flatten().map(|(_, value)| value).unwrap_or(Value::Null),
        };
        prop_assert_eq!(read::<AllDocsAnswerRow>(out.as_bytes()), expected);
    }

    #[test]
    fn revs_diff_answers_written_by_the_server_read_back_equal(
        entries in prop::collection::vec(
            (
                hostile_text(),
                prop::collection::vec(hostile_rev(), 1..3),
                prop::collection::vec(hostile_rev(), 0..3),
            ),
            0..4,
        ),
    ) {
        // Ids are a request's object keys: each once.
        let mut seen = std::collections::HashSet::new();
        let entries: Vec<_> = entries.into_iter().filter(|(id, _, _)| seen.insert(id.clone())).collect();
        let answer: RevsDiffAnswer = Entries(
            entries
                .iter()
                .map(|(id, missing, possible_ancestors)| {
                    let entry = RevsDiffEntry {
                        missing: missing.clone(),
                        possible_ancestors: possible_ancestors.clone(),
                    };
                    (id.clone(), entry)
                })
                .collect(),
        );
        prop_assert_eq!(read::<RevsDiffAnswer>(&written(&answer)), answer);
        let missing = MissingRevsAnswer {
            missing_revs: Entries(
                entries.into_iter().map(|(id, missing, _)| (id, missing)).collect(),
            ),
        };
        prop_assert_eq!(read::<MissingRevsAnswer>(&written(&missing)), missing);
    }
}

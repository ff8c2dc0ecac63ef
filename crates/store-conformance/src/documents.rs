//! Writing and reading documents: interactive edits, replication writes,
//! conflicts, deletion, and the read options.

use crate::Backend;

use crate::common::{TempStore, doc, get, get_with, put, replicate, rev};
use serde_json::json;
use store::{DocFailure, GetOptions, StoreError};

pub async fn a_document_is_created_updated_and_read_back(backend: &dyn Backend) {
    let t = TempStore::new(backend);
    let db = t.db("docs").await;
    let r1 = put(&db, json!({"_id": "a", "n": 1, "z": true})).await;
    assert!(r1.starts_with("1-") && r1.len() == 34, "{r1}");
    let r2 = put(&db, json!({"_id": "a", "_rev": r1, "n": 2, "z": true})).await;
    assert!(r2.starts_with("2-"));
    let body = get(&db, "a").await;
    assert_eq!(body, json!({"_id": "a", "_rev": r2, "n": 2, "z": true}));
    // Field order is kept as written.
    let text = db.get("a", GetOptions::default()).await.unwrap();
    assert!(
        text.as_str()
            .starts_with(&format!(r#"{{"_id":"a","_rev":"{r2}","n":2"#)),
        "{}",
        text.as_str()
    );
    // The old revision's body is still readable until compaction.
    let old = get_with(
        &db,
        "a",
        GetOptions {
            rev: Some(rev(&r1)),
            ..Default::default()
        },
    )
    .await;
    assert_eq!(old["n"], 1);
}

pub async fn the_same_edit_gives_the_same_revision_in_two_databases(backend: &dyn Backend) {
    let t = TempStore::new(backend);
    let (a, b) = (t.db("one").await, t.db("two").await);
    let ra = put(&a, json!({"_id": "x", "k": [1, 2]})).await;
    let rb = put(&b, json!({"k": [1, 2], "_id": "x"})).await;
    assert_eq!(ra, rb);
}

pub async fn conflicts_are_per_document_rows_and_the_others_are_written(backend: &dyn Backend) {
    let t = TempStore::new(backend);
    let db = t.db("conflicts").await;
    let r1 = put(&db, json!({"_id": "a"})).await;
    let results = db
        .bulk_docs(
            vec![
                doc(json!({"_id": "a"})),                   // exists: conflict
                doc(json!({"_id": "b"})),                   // new: ok
                doc(json!({"_id": "a", "_rev": "1-nope"})), // unknown parent: conflict
                doc(json!({"_id": "c", "_rev": r1})),       // missing doc with rev: conflict
                doc(json!({"_id": "b"})),                   // duplicate in batch: first wins
                doc(json!({"v": 1})),                       // no id: generated
            ],
            true,
        )
        .await
        .unwrap();
    let outcome: Vec<Result<(), DocFailure>> = results
        .iter()
        .map(|r| r.result.clone().map(|_| ()))
        .collect();
    assert_eq!(
        outcome,
        [
            Err(DocFailure::conflict()),
            Ok(()),
            Err(DocFailure::conflict()),
            Err(DocFailure::conflict()),
            Err(DocFailure::conflict()),
            Ok(())
        ]
    );
    assert_eq!(results[5].id.len(), 32, "a generated id is a uuid");
    assert_eq!(db.info().await.unwrap().doc_count, 3);
}

pub async fn deleted_documents_answer_deleted_and_can_be_recreated(backend: &dyn Backend) {
    let t = TempStore::new(backend);
    let db = t.db("del").await;
    let r1 = put(&db, json!({"_id": "a", "v": 1})).await;
    let r2 = put(&db, json!({"_id": "a", "_rev": r1, "_deleted": true})).await;
    assert!(matches!(
        db.get("a", GetOptions::default()).await,
        Err(StoreError::DocNotFound("deleted"))
    ));
    assert!(matches!(
        db.get("zz", GetOptions::default()).await,
        Err(StoreError::DocNotFound("missing"))
    ));
    // The tombstone itself is readable by revision.
    let tomb = get_with(
        &db,
        "a",
        GetOptions {
            rev: Some(rev(&r2)),
            ..Default::default()
        },
    )
    .await;
    assert_eq!(tomb["_deleted"], true);
    // Editing the tombstone by revision conflicts; re-creating without one works.
    let again = db
        .bulk_docs(vec![doc(json!({"_id": "a", "_rev": r2, "v": 2}))], true)
        .await
        .unwrap();
    assert_eq!(again[0].result, Err(DocFailure::conflict()));
    let r3 = put(&db, json!({"_id": "a", "v": 3})).await;
    assert!(
        r3.starts_with("3-"),
        "re-creation extends the tombstone: {r3}"
    );
    let info = db.info().await.unwrap();
    assert_eq!((info.doc_count, info.doc_del_count), (1, 0));
}

pub async fn replicated_revisions_merge_into_conflicts_with_a_deterministic_winner(
    backend: &dyn Backend,
) {
    let t = TempStore::new(backend);
    let db = t.db("repl").await;
    let results = replicate(
        &db,
        vec![
            json!({"_id": "d", "_rev": "2-b", "_revisions": {"start": 2, "ids": ["b", "a"]}, "side": "b"}),
            json!({"_id": "d", "_rev": "2-c", "_revisions": {"start": 2, "ids": ["c", "a"]}, "side": "c"}),
        ],
    )
    .await;
    assert!(results.iter().all(|r| r.result.is_ok()));
    let winner = get_with(
        &db,
        "d",
        GetOptions {
            conflicts: true,
            revs: true,
            ..Default::default()
        },
    )
    .await;
    assert_eq!(winner["_rev"], "2-c");
    assert_eq!(winner["side"], "c");
    assert_eq!(winner["_conflicts"], json!(["2-b"]));
    assert_eq!(winner["_revisions"], json!({"start": 2, "ids": ["c", "a"]}));
    // The shared ancestor has no body here.
    let info = get_with(
        &db,
        "d",
        GetOptions {
            revs_info: true,
            ..Default::default()
        },
    )
    .await;
    assert_eq!(
        info["_revs_info"],
        json!([{"rev": "2-c", "status": "available"}, {"rev": "1-a", "status": "missing"}])
    );
    let seq = db.update_seq();
    // Sending a known revision again changes nothing, not even the sequence.
    replicate(
        &db,
        vec![json!({"_id": "d", "_rev": "2-b", "_revisions": {"start": 2, "ids": ["b", "a"]}})],
    )
    .await;
    assert_eq!(db.update_seq(), seq);
}

pub async fn a_replicated_write_without_a_revision_fails_the_whole_request(backend: &dyn Backend) {
    let t = TempStore::new(backend);
    let db = t.db("norev").await;
    let err = db
        .bulk_docs(
            vec![
                doc(json!({"_id": "ok", "_rev": "1-a"})),
                doc(json!({"_id": "x"})),
            ],
            false,
        )
        .await;
    assert!(matches!(
        err,
        Err(StoreError::Invalid {
            error: store::ErrorKind::BadRequest,
            ..
        })
    ));
    assert_eq!(db.info().await.unwrap().doc_count, 0);
}

pub async fn deleting_a_losing_branch_resolves_the_conflict(backend: &dyn Backend) {
    let t = TempStore::new(backend);
    let db = t.db("resolve").await;
    replicate(
        &db,
        vec![
            json!({"_id": "d", "_revisions": {"start": 2, "ids": ["b", "a"]}}),
            json!({"_id": "d", "_revisions": {"start": 2, "ids": ["c", "a"]}}),
        ],
    )
    .await;
    put(&db, json!({"_id": "d", "_rev": "2-b", "_deleted": true})).await;
    let doc = get_with(
        &db,
        "d",
        GetOptions {
            conflicts: true,
            deleted_conflicts: true,
            ..Default::default()
        },
    )
    .await;
    assert_eq!(doc["_rev"], "2-c");
    assert!(doc.get("_conflicts").is_none());
    assert_eq!(doc["_deleted_conflicts"].as_array().unwrap().len(), 1);
}

pub async fn latest_reads_the_leaf_below_an_old_revision_and_local_seq_shows_the_sequence(
    backend: &dyn Backend,
) {
    let t = TempStore::new(backend);
    let db = t.db("latest").await;
    let r1 = put(&db, json!({"_id": "a", "v": 1})).await;
    let r2 = put(&db, json!({"_id": "a", "_rev": r1, "v": 2})).await;
    let doc = get_with(
        &db,
        "a",
        GetOptions {
            rev: Some(rev(&r1)),
            latest: true,
            local_seq: true,
            ..Default::default()
        },
    )
    .await;
    assert_eq!(doc["_rev"], r2.as_str());
    assert_eq!(doc["_local_seq"], 2);
}

pub async fn stemming_to_revs_limit_drops_old_history_but_keeps_leaves(backend: &dyn Backend) {
    let t = TempStore::new(backend);
    let db = t.db("stem").await;
    db.set_revs_limit(3).await.unwrap();
    let mut r = put(&db, json!({"_id": "a", "n": 0})).await;
    for n in 1..6 {
        r = put(&db, json!({"_id": "a", "_rev": r, "n": n})).await;
    }
    let doc = get_with(
        &db,
        "a",
        GetOptions {
            revs: true,
            ..Default::default()
        },
    )
    .await;
    assert_eq!(doc["_revisions"]["start"], 6);
    assert_eq!(doc["_revisions"]["ids"].as_array().unwrap().len(), 3);
    // A stemmed revision's body is gone too.
    let gone = db
        .get(
            "a",
            GetOptions {
                rev: Some(rev(&format!("1-{}", "x"))),
                ..Default::default()
            },
        )
        .await;
    assert!(matches!(gone, Err(StoreError::DocNotFound("missing"))));
}

pub async fn open_revs_answers_leaves_and_missing_revisions(backend: &dyn Backend) {
    let t = TempStore::new(backend);
    let db = t.db("openrevs").await;
    replicate(
        &db,
        vec![
            json!({"_id": "d", "_revisions": {"start": 2, "ids": ["b", "a"]}}),
            json!({"_id": "d", "_revisions": {"start": 2, "ids": ["c", "a"]}}),
        ],
    )
    .await;
    let all = db
        .open_revs("d", store::OpenRevs::All, GetOptions::default(), false)
        .await
        .unwrap();
    assert_eq!(all.len(), 2);
    let some = db
        .open_revs(
            "d",
            store::OpenRevs::List(vec![rev("2-b"), rev("9-z"), rev("1-a")]),
            GetOptions {
                latest: true,
                ..Default::default()
            },
            false,
        )
        .await
        .unwrap();
    let shape: Vec<String> = some
        .iter()
        .map(|r| match r {
            store::OpenRev::Ok(doc) => serde_json::from_str::<serde_json::Value>(doc.as_str())
                .unwrap()["_rev"]
                .as_str()
                .unwrap()
                .to_string(),
            store::OpenRev::Missing(rev) => format!("missing {rev}"),
        })
        .collect();
    assert_eq!(
        shape,
        ["2-b", "2-c", "missing 9-z"],
        "latest on 1-a yields both leaves, 2-b once; found ones first by revision, as CouchDB"
    );
    assert!(matches!(
        db.open_revs("none", store::OpenRevs::All, GetOptions::default(), false)
            .await,
        Err(StoreError::DocNotFound("missing"))
    ));
}

pub async fn revs_diff_and_bulk_get_serve_the_replicator(backend: &dyn Backend) {
    let t = TempStore::new(backend);
    let db = t.db("diff").await;
    let r1 = put(&db, json!({"_id": "a", "v": 1})).await;
    let diff = db
        .revs_diff(vec![
            ("a".into(), vec![rev(&r1), rev("2-new")]),
            ("b".into(), vec![rev("1-x")]),
        ])
        .await
        .unwrap();
    assert_eq!(diff.len(), 2);
    assert_eq!(diff[0].1.missing, vec![rev("2-new")]);
    assert_eq!(diff[0].1.possible_ancestors, vec![rev(&r1)]);
    assert_eq!(diff[1].1.missing, vec![rev("1-x")]);
    let none = db
        .revs_diff(vec![("a".into(), vec![rev(&r1)])])
        .await
        .unwrap();
    assert!(none.is_empty());

    let got = db
        .bulk_get(
            vec![
                store::RevisionsRequest {
                    id: "a".into(),
                    rev: Some(rev(&r1)),
                    atts_since: vec![],
                },
                store::RevisionsRequest {
                    id: "a".into(),
                    rev: None,
                    atts_since: vec![],
                },
                store::RevisionsRequest {
                    id: "nope".into(),
                    rev: Some(rev("1-z")),
                    atts_since: vec![],
                },
                store::RevisionsRequest {
                    id: "nope".into(),
                    rev: None,
                    atts_since: vec![],
                },
            ],
            true,
            true,
            false,
        )
        .await
        .unwrap();
    assert_eq!(got.len(), 4);
    let first: serde_json::Value =
        serde_json::from_str(got[0].docs[0].as_ref().unwrap().as_str()).unwrap();
    assert_eq!(first["_revisions"]["start"], 1);
    assert!(got[1].docs[0].is_ok());
    let missing = got[2].docs[0].as_ref().unwrap_err();
    assert_eq!(
        (
            missing.error.as_str(),
            missing.rev.as_ref().map(ToString::to_string)
        ),
        ("not_found", Some("1-z".to_string()))
    );
    assert_eq!(got[3].docs[0].as_ref().unwrap_err().reason, "missing");
}

pub async fn a_large_batch_that_fails_midway_writes_nothing(backend: &dyn Backend) {
    let t = TempStore::new(backend);
    let db = t.db("midway").await;
    let make = |i: usize| doc(json!({"_id": format!("d{i:03}"), "n": i}));
    // An input error at document 250 of 300 (chunks of the batch before it
    // have reached the writer by then).
    let inputs = (0..300).map(|i| {
        if i == 250 {
            Err("bad input")
        } else {
            Ok(make(i))
        }
    });
    match db.bulk_docs_streamed(inputs, 300, true).await {
        Err(store::BulkError::Input(e)) => assert_eq!(e, "bad input"),
        other => panic!("expected the input error, got {other:?}"),
    }
    assert_eq!(db.info().await.unwrap().doc_count, 0);
    assert_eq!(db.update_seq(), 0);
    // A request-level store error late in a large batch: nothing written either.
    let mut docs: Vec<_> = (0..300)
        .map(|i| doc(json!({"_id": format!("r{i:03}"), "_rev": format!("1-{i:032x}")})))
        .collect();
    docs[280] = doc(json!({"_id": "norev", "n": 1}));
    assert!(matches!(
        db.bulk_docs(docs, false).await,
        Err(StoreError::Invalid { .. })
    ));
    assert_eq!(db.info().await.unwrap().doc_count, 0);
    // The same batch, whole, is written in order with every row.
    let results = db
        .bulk_docs((0..300).map(make).collect(), true)
        .await
        .unwrap();
    assert_eq!(results.len(), 300);
    assert!(
        results
            .iter()
            .enumerate()
            .all(|(i, r)| r.id == format!("d{i:03}") && r.result.is_ok())
    );
    assert_eq!(db.info().await.unwrap().doc_count, 300);
    assert_eq!(db.update_seq(), 300);
}

/// A large batch naming one document twice, in chunks the writer takes
/// apart: the second edit sees the first (a conflict without `_rev`, the
/// next revision with it), as it would in a batch of two.
pub async fn a_large_batch_naming_a_document_twice_sees_its_first_edit(backend: &dyn Backend) {
    let t = TempStore::new(backend);
    let db = t.db("twice").await;
    let batch = |second: serde_json::Value| {
        let mut docs: Vec<_> = (0..250)
            .map(|i| doc(json!({"_id": format!("d{i:03}"), "n": i})))
            .collect();
        docs[10] = doc(json!({"_id": "twice", "v": 1}));
        docs[200] = doc(second);
        docs
    };
    let results = db
        .bulk_docs(batch(json!({"_id": "twice", "v": 2})), true)
        .await
        .unwrap();
    let first = results[10].result.clone().unwrap();
    assert_eq!(results[200].result, Err(DocFailure::conflict()));
    assert_eq!(get(&db, "twice").await["v"], json!(1));
    // Again with the first's revision: the second edit follows it.
    let db = t.db("twice-with-rev").await;
    let mut docs = batch(json!({"_id": "twice", "_rev": first, "v": 2}));
    docs[10] = doc(json!({"_id": "twice", "v": 1}));
    let results = db.bulk_docs(docs, true).await.unwrap();
    let second = results[200].result.clone().unwrap();
    assert!(second.starts_with("2-"), "{second}");
    let got = get(&db, "twice").await;
    assert_eq!(
        (got["v"].clone(), got["_rev"].clone()),
        (json!(2), json!(second))
    );
    // 248 others and the one named twice.
    assert_eq!(db.info().await.unwrap().doc_count, 249);
}

pub async fn large_bodies_are_stored_compressed_and_read_back_everywhere(backend: &dyn Backend) {
    let t = TempStore::new(backend);
    let db = t.db("compressed").await;
    let big = json!({"_id": "big", "pad": "y".repeat(4000), "n": 1});
    let r1 = put(&db, big.clone()).await;
    let small_rev = put(&db, json!({"_id": "small", "a": 1})).await;

    let mut expected = big.clone();
    expected["_rev"] = json!(r1);
    assert_eq!(get(&db, "big").await, expected);
    assert_eq!(get(&db, "small").await["_rev"], small_rev);

    let changes = db
        .changes(store::ChangesQuery {
            include_docs: true,
            ..Default::default()
        })
        .await
        .unwrap();
    let doc = changes.rows[0].doc.as_ref().unwrap().to_value().unwrap();
    assert_eq!(doc, expected);
    let all = db
        .all_docs(store::AllDocsQuery {
            include_docs: true,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        all.rows[0].doc.as_ref().unwrap().to_value().unwrap(),
        expected
    );

    // sizes.external counts the JSON text of the live winners, whatever
    // the stored form, through updates and deletions.
    // Measured by another writer than the store's, on purpose: the model.
    #[allow(clippy::disallowed_methods)]
    let text_len = |v: serde_json::Value| {
        let mut v = v;
        let map = v.as_object_mut().unwrap();
        map.remove("_id");
        map.remove("_rev");
        serde_json::to_string(&v).unwrap().len() as u64
    };
    let info = db.info().await.unwrap();
    assert_eq!(
        info.external_size,
        text_len(big.clone()) + text_len(json!({"a": 1}))
    );

    let bigger = json!({"_id": "big", "_rev": r1, "pad": "z".repeat(9000)});
    let r2 = put(&db, bigger.clone()).await;
    let old = get_with(
        &db,
        "big",
        GetOptions {
            rev: Some(rev(&r1)),
            ..Default::default()
        },
    )
    .await;
    assert_eq!(old["pad"], big["pad"]);
    assert_eq!(
        db.info().await.unwrap().external_size,
        text_len(bigger) + text_len(json!({"a": 1}))
    );
    put(&db, json!({"_id": "big", "_rev": r2, "_deleted": true})).await;
    assert_eq!(
        db.info().await.unwrap().external_size,
        text_len(json!({"a": 1}))
    );
}

/// The paced bulk write, as a spooled `_bulk_docs` body feeds it from a
/// blocking thread: the decoder waits whenever a few chunks are queued,
/// large documents make chunks of their own, and every document is written
/// in order in one batch.
pub async fn a_paced_bulk_write_from_a_blocking_thread_writes_everything(backend: &dyn Backend) {
    let t = TempStore::new(backend);
    let db = t.db("paced").await;
    let big = "b".repeat(3 << 20);
    let handle = tokio::runtime::Handle::current();
    let writer = db.clone();
    let results = tokio::task::spawn_blocking(move || {
        let inputs = (0..2_000).map(|i| {
            let pad = if i % 500 == 0 { big.as_str() } else { "s" };
            Ok::<_, std::convert::Infallible>(doc(json!({"_id": format!("p{i:04}"), "pad": pad})))
        });
        handle.block_on(writer.bulk_docs_paced(inputs, 2_000, true))
    })
    .await
    .unwrap()
    .unwrap();
    assert_eq!(results.len(), 2_000);
    assert!(results.iter().all(|r| r.result.is_ok()));
    assert_eq!(results[1999].id, "p1999");
    assert_eq!(db.info().await.unwrap().doc_count, 2_000);
    let read = get(&db, "p1000").await;
    assert_eq!(read["pad"].as_str().map(str::len), Some(3 << 20));
}

/// Ids holding U+0000 and U+0001 (alone, first, inside, last, side by side),
/// beside ids around them (`a`, `ab`, `a` + U+0002), in every place an id
/// is stored: CouchDB accepts them and orders ids by their bytes.
const NUL_IDS: &[&str] = &[
    "\u{0}",
    "\u{1}",
    "\u{0}\u{0}",
    "\u{1}\u{1}",
    "\u{0}a",
    "\u{1}a",
    "a",
    "a\u{0}",
    "a\u{1}",
    "a\u{0}b",
    "a\u{1}b",
    "a\u{0}\u{1}",
    "a\u{1}\u{0}",
    "a\u{2}",
    "ab",
];

fn in_bounds(id: &str, lo: &std::ops::Bound<String>, hi: &std::ops::Bound<String>) -> bool {
    use std::ops::Bound::*;
    let above = match lo {
        Included(k) => id.as_bytes() >= k.as_bytes(),
        Excluded(k) => id.as_bytes() > k.as_bytes(),
        Unbounded => true,
    };
    let below = match hi {
        Included(k) => id.as_bytes() <= k.as_bytes(),
        Excluded(k) => id.as_bytes() < k.as_bytes(),
        Unbounded => true,
    };
    above && below
}

pub async fn ids_with_nul_and_u0001_are_kept_and_ordered_by_their_bytes(backend: &dyn Backend) {
    use std::ops::Bound::{self, Excluded, Included, Unbounded};
    use store::{AllDocsQuery, ChangesQuery, CreateDb, PurgeRequest};

    let t = TempStore::new(backend);
    let db = t.db("nul").await;
    // Written in one batch, and one more alone: both ways a row is sent.
    let results = db
        .bulk_docs(
            NUL_IDS[1..]
                .iter()
                .map(|id| doc(json!({"_id": id, "v": id})))
                .collect(),
            true,
        )
        .await
        .unwrap();
    assert!(results.iter().all(|r| r.result.is_ok()), "{results:?}");
    put(&db, json!({"_id": NUL_IDS[0], "v": NUL_IDS[0]})).await;

    for id in NUL_IDS {
        let body = get(&db, id).await;
        assert_eq!(
            (body["_id"].as_str(), body["v"].as_str()),
            (Some(*id), Some(*id))
        );
    }
    let mut by_bytes: Vec<String> = NUL_IDS.iter().map(|id| id.to_string()).collect();
    by_bytes.sort_by(|a, b| a.as_bytes().cmp(b.as_bytes()));

    let names = |p: &store::AllDocsPage| p.rows.iter().map(|r| r.id.clone()).collect::<Vec<_>>();
    let all = db.all_docs(AllDocsQuery::default()).await.unwrap();
    assert_eq!(names(&all), by_bytes, "_all_docs in byte order");
    assert_eq!(all.total_rows, NUL_IDS.len() as u64);
    let desc = db
        .all_docs(AllDocsQuery {
            descending: true,
            ..Default::default()
        })
        .await
        .unwrap();
    let mut down = by_bytes.clone();
    down.reverse();
    assert_eq!(names(&desc), down);

    // Bounds holding U+0000 and U+0001 select exactly the ids between them.
    let s = |x: &str| x.to_string();
    let bounds: Vec<(Bound<String>, Bound<String>)> = vec![
        (Included(s("a\u{0}")), Excluded(s("a\u{1}"))),
        (Included(s("\u{0}")), Excluded(s("\u{1}"))),
        (Excluded(s("\u{0}")), Included(s("\u{1}"))),
        (Excluded(s("a")), Included(s("a\u{1}\u{0}"))),
        (Included(s("a\u{0}\u{0}")), Unbounded),
        (Unbounded, Excluded(s("\u{0}\u{1}"))),
        (Excluded(s("a\u{1}")), Excluded(s("a\u{2}"))),
    ];
    for (lo, hi) in bounds {
        let expected: Vec<String> = by_bytes
            .iter()
            .filter(|id| in_bounds(id, &lo, &hi))
            .cloned()
            .collect();
        let page = db
            .all_docs(AllDocsQuery {
                start: lo.clone(),
                end: hi.clone(),
                count_offset: true,
                ..Default::default()
            })
            .await
            .unwrap();
        assert_eq!(names(&page), expected, "{lo:?}..{hi:?}");
        let before = by_bytes
            .iter()
            .filter(|id| !in_bounds(id, &lo, &Unbounded))
            .count();
        assert_eq!(page.offset, Some(before as u64), "offset of {lo:?}");
        // Descending, the same ids the other way round.
        let page = db
            .all_docs(AllDocsQuery {
                descending: true,
                start: hi.clone(),
                end: lo.clone(),
                ..Default::default()
            })
            .await
            .unwrap();
        let mut down = expected.clone();
        down.reverse();
        assert_eq!(names(&page), down, "descending {hi:?}..{lo:?}");
    }
    // Paging past the last id seen, two at a time, walks them all.
    let mut walked = Vec::new();
    let mut start = Unbounded;
    loop {
        let page = db
            .all_docs(AllDocsQuery {
                start: start.clone(),
                limit: 2,
                ..Default::default()
            })
            .await
            .unwrap();
        let ids = names(&page);
        let Some(last) = ids.last() else { break };
        start = Excluded(last.clone());
        walked.extend(ids);
    }
    assert_eq!(walked, by_bytes);
    let keys = db
        .all_docs_keys(by_bytes.iter().rev().cloned().collect(), None)
        .await
        .unwrap();
    assert!(keys.iter().all(|(_, row)| row.is_some()), "{keys:?}");

    // Changes list each once, in the order written.
    let feed = db.changes(ChangesQuery::default()).await.unwrap();
    let mut written: Vec<String> = NUL_IDS[1..].iter().map(|id| id.to_string()).collect();
    written.push(NUL_IDS[0].to_string());
    assert_eq!(
        feed.rows.iter().map(|r| r.id.clone()).collect::<Vec<_>>(),
        written
    );

    // An edit and a deletion find the document by its id.
    let r1 = get(&db, "a\u{0}b").await["_rev"]
        .as_str()
        .unwrap()
        .to_string();
    let r2 = put(&db, json!({"_id": "a\u{0}b", "_rev": r1, "v": 2})).await;
    put(
        &db,
        json!({"_id": "a\u{1}b", "_rev": get(&db, "a\u{1}b").await["_rev"], "_deleted": true}),
    )
    .await;
    assert_eq!(get(&db, "a\u{0}b").await["_rev"], json!(r2));
    assert!(matches!(
        db.get("a\u{1}b", Default::default()).await,
        Err(StoreError::DocNotFound(_))
    ));
    assert_eq!(db.info().await.unwrap().doc_count, NUL_IDS.len() as u64 - 1);

    // A revision whose hash holds U+0000 (replicated) is kept as sent.
    let results = replicate(
        &db,
        vec![json!({"_id": "r\u{0}", "_rev": "1-h\u{0}\u{1}x"})],
    )
    .await;
    assert!(results[0].result.is_ok(), "{results:?}");
    assert_eq!(get(&db, "r\u{0}").await["_rev"], json!("1-h\u{0}\u{1}x"));
    let old = get_with(
        &db,
        "r\u{0}",
        GetOptions {
            rev: Some(rev("1-h\u{0}\u{1}x")),
            ..Default::default()
        },
    )
    .await;
    assert_eq!(old["_id"], json!("r\u{0}"));

    // Purge: the document goes, the purge info keeps its id.
    let gone = get(&db, "\u{0}a").await["_rev"]
        .as_str()
        .unwrap()
        .to_string();
    let purged = db
        .purge(vec![PurgeRequest {
            id: "\u{0}a".into(),
            revs: vec![rev(&gone)],
            recorded: vec![gone.clone()],
        }])
        .await
        .unwrap();
    assert_eq!(purged[0].purged, [rev(&gone)]);
    assert!(matches!(
        db.get("\u{0}a", Default::default()).await,
        Err(StoreError::DocNotFound(_))
    ));
    let infos = db.purge_infos().await.unwrap();
    assert_eq!(infos.last().map(|i| i.id.as_str()), Some("\u{0}a"));
    assert!(!names(&db.all_docs(AllDocsQuery::default()).await.unwrap()).contains(&s("\u{0}a")));

    // Local documents: read by id, listed in byte order within bounds.
    for id in [
        "_local/a\u{1}",
        "_local/a\u{0}b",
        "_local/a",
        "_local/\u{0}",
    ] {
        db.put_local(id, json!({"v": id})).await.unwrap();
    }
    let local = db.get_local("_local/a\u{0}b").await.unwrap();
    assert_eq!(
        local,
        json!({"_id": "_local/a\u{0}b", "_rev": "0-1", "v": "_local/a\u{0}b"})
    );
    let listed: Vec<String> = db
        .local_docs(AllDocsQuery::default())
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(
        listed,
        [
            "_local/\u{0}",
            "_local/a",
            "_local/a\u{0}b",
            "_local/a\u{1}"
        ]
    );
    let listed: Vec<String> = db
        .local_docs(AllDocsQuery {
            start: Excluded(s("_local/a")),
            end: Excluded(s("_local/a\u{1}")),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(listed, ["_local/a\u{0}b"]);
    db.delete_local("_local/a\u{0}b").await.unwrap();
    assert!(db.get_local("_local/a\u{0}b").await.is_err());
    assert!(db.get_local("_local/a\u{1}").await.is_ok());

    // A partition's range (`p:` up to `p;`) holds its ids with U+0000.
    let parts = t
        .store
        .create_db_with(
            "parts",
            CreateDb {
                partitioned: true,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    for id in ["p:\u{0}", "p:a\u{1}", "p:\u{1}\u{0}", "q:\u{0}", "o:\u{0}"] {
        put(&parts, json!({"_id": id})).await;
    }
    assert_eq!(parts.partition_info("p").await.unwrap().doc_count, 3);
    assert_eq!(parts.partition_info("q").await.unwrap().doc_count, 1);
}

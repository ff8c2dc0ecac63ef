//! The changes feed, `_all_docs`, change notifications and group commit.

use crate::Backend;

use std::ops::Bound;
use std::time::Duration;

use crate::common::{TempStore, doc, put, replicate};
use serde_json::json;
use store::{AllDocsQuery, ChangesQuery};

fn ids(page: &store::FeedPage) -> Vec<(u64, &str)> {
    page.rows.iter().map(|r| (r.seq, r.id.as_str())).collect()
}

pub async fn each_document_appears_once_at_its_latest_sequence(backend: &dyn Backend) {
    let t = TempStore::new(backend);
    let db = t.db("changes").await;
    let ra = put(&db, json!({"_id": "a"})).await;
    put(&db, json!({"_id": "b"})).await;
    put(&db, json!({"_id": "a", "_rev": ra, "_deleted": true})).await;
    let page = db.changes(ChangesQuery::default()).await.unwrap();
    assert_eq!(ids(&page), [(2, "b"), (3, "a")]);
    assert!(page.rows[1].deleted);
    assert_eq!((page.last_seq, page.pending), (3, 0));

    let since = db
        .changes(ChangesQuery {
            since: 2,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(ids(&since), [(3, "a")]);
    let limited = db
        .changes(ChangesQuery {
            limit: 1,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        (ids(&limited), limited.last_seq, limited.pending),
        (vec![(2, "b")], 2, 1)
    );
    let desc = db
        .changes(ChangesQuery {
            descending: true,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(ids(&desc), [(3, "a"), (2, "b")]);
}

pub async fn all_docs_style_lists_every_leaf_and_include_docs_embeds_the_winner(
    backend: &dyn Backend,
) {
    let t = TempStore::new(backend);
    let db = t.db("style").await;
    replicate(
        &db,
        vec![
            json!({"_id": "d", "_revisions": {"start": 2, "ids": ["b", "a"]}, "v": "b"}),
            json!({"_id": "d", "_revisions": {"start": 2, "ids": ["c", "a"]}, "v": "c"}),
        ],
    )
    .await;
    let q = ChangesQuery {
        all_leaves: true,
        include_docs: true,
        conflicts: true,
        ..Default::default()
    };
    let page = db.changes(q).await.unwrap();
    let revs: Vec<String> = page.rows[0]
        .changes
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(revs, ["2-c", "2-b"]);
    let doc: serde_json::Value =
        serde_json::from_str(page.rows[0].doc.as_ref().unwrap().as_str()).unwrap();
    assert_eq!(
        (doc["v"].as_str(), doc["_conflicts"].clone()),
        (Some("c"), json!(["2-b"]))
    );
    let main = db.changes(ChangesQuery::default()).await.unwrap();
    assert_eq!(main.rows[0].changes.len(), 1);
}

pub async fn a_doc_ids_filter_still_advances_last_seq_to_the_end(backend: &dyn Backend) {
    let t = TempStore::new(backend);
    let db = t.db("docids").await;
    for id in ["a", "b", "c", "d"] {
        put(&db, json!({"_id": id})).await;
    }
    let q = ChangesQuery {
        doc_ids: Some(vec!["c".into(), "a".into(), "zz".into()]),
        ..Default::default()
    };
    let page = db.changes(q).await.unwrap();
    assert_eq!(ids(&page), [(1, "a"), (3, "c")]);
    assert_eq!(
        page.last_seq, 4,
        "the filtered-out tail still counts as read"
    );
}

pub async fn subscribers_wake_when_a_commit_moves_the_sequence(backend: &dyn Backend) {
    let t = TempStore::new(backend);
    let db = t.db("wake").await;
    let mut rx = db.subscribe();
    let writer = db.clone();
    let task = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(50)).await;
        put(&writer, json!({"_id": "x"})).await;
    });
    tokio::time::timeout(Duration::from_secs(5), rx.changed())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(*rx.borrow(), 1);
    task.await.unwrap();
}

pub async fn all_docs_orders_by_code_point_and_honours_ranges(backend: &dyn Backend) {
    let t = TempStore::new(backend);
    let db = t.db("alldocs").await;
    for id in ["b", "a", "B", "é", "c", "_design/x"] {
        put(&db, json!({"_id": id})).await;
    }
    let gone = put(&db, json!({"_id": "gone"})).await;
    put(&db, json!({"_id": "gone", "_rev": gone, "_deleted": true})).await;
    let names = |p: &store::AllDocsPage| p.rows.iter().map(|r| r.id.clone()).collect::<Vec<_>>();

    let all = db.all_docs(AllDocsQuery::default()).await.unwrap();
    assert_eq!(names(&all), ["B", "_design/x", "a", "b", "c", "é"]);
    assert_eq!((all.total_rows, all.offset), (6, Some(0)));

    let range = AllDocsQuery {
        start: Bound::Included("a".into()),
        end: Bound::Excluded("c".into()),
        ..Default::default()
    };
    let page = db.all_docs(range).await.unwrap();
    assert_eq!(
        (names(&page), page.offset),
        (vec!["a".to_string(), "b".into()], Some(2))
    );

    let desc = AllDocsQuery {
        descending: true,
        start: Bound::Included("b".into()),
        limit: 2,
        skip: 1,
        include_docs: true,
        ..Default::default()
    };
    let page = db.all_docs(desc).await.unwrap();
    assert_eq!(names(&page), ["a", "_design/x"]);
    assert!(page.rows[0].doc.is_some());
    assert_eq!(
        page.offset,
        Some(3),
        "c and é lie before b going down, plus one skipped"
    );

    let keys = db
        .all_docs_keys(vec!["gone".into(), "nope".into(), "a".into()], None)
        .await
        .unwrap();
    assert!(keys[0].1.as_ref().unwrap().deleted);
    assert!(keys[1].1.is_none());
    assert!(!keys[2].1.as_ref().unwrap().deleted);
}

pub async fn concurrent_writers_share_commits(backend: &dyn Backend) {
    let t = TempStore::new(backend);
    let db = t.db("group").await;
    let before = db.commit_count();
    let mut tasks = Vec::new();
    for i in 0..64 {
        let db = db.clone();
        tasks.push(tokio::spawn(async move {
            db.bulk_docs(vec![doc(json!({"_id": format!("d{i}")}))], true)
                .await
                .unwrap()
        }));
    }
    for task in tasks {
        assert!(task.await.unwrap()[0].result.is_ok());
    }
    let commits = db.commit_count() - before;
    assert_eq!(db.info().await.unwrap().doc_count, 64);
    // The 64 writes reach the writer within microseconds of each other (this
    // runtime has one thread): they must share a handful of transactions.
    assert!(
        (1..16).contains(&commits),
        "64 writes took {commits} commits"
    );
    // Every write still got its own sequence number.
    assert_eq!(db.update_seq(), 64);
}

/// `_all_docs`' offset and total, and the live count of any id range,
/// agree with the documents after thousands of writes, deletions,
/// undeletions and purges in batches (enough to split the counted blocks
/// of ids several times, in one batch and across batches).
pub async fn offsets_and_counts_follow_every_kind_of_write(backend: &dyn Backend) {
    use std::collections::BTreeMap;
    let t = TempStore::new(backend);
    let db = t.db("offsets").await;
    let mut rng = 0x2545_F491_4F6C_DD1Du64;
    let mut next = move |n: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % n
    };
    // id -> (rev, live)
    let mut model: BTreeMap<String, (String, bool)> = BTreeMap::new();
    for (batch, size) in [(0, 4500), (1, 1500), (2, 3000), (3, 800)] {
        let mut docs = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for _ in 0..size {
            let id = format!("d{:05}", next(6000));
            if !seen.insert(id.clone()) {
                continue;
            }
            let mut body = json!({"_id": id, "batch": batch});
            // A deleted document is written again (live) without a revision.
            match model.get(&id) {
                Some((rev, true)) => {
                    body["_rev"] = rev.clone().into();
                    if next(3) == 0 {
                        body["_deleted"] = true.into();
                    }
                }
                Some((_, false)) => {}
                None if next(4) == 0 => body["_deleted"] = true.into(),
                None => {}
            }
            docs.push(body);
        }
        let inputs: Vec<_> = docs.iter().cloned().map(doc).collect();
        let results = db.bulk_docs(inputs, true).await.unwrap();
        for (body, result) in docs.iter().zip(results) {
            let rev = result.result.unwrap_or_else(|e| panic!("{body}: {e:?}"));
            let id = body["_id"].as_str().unwrap().to_string();
            model.insert(id, (rev, body.get("_deleted").is_none()));
        }
        // Purge a few documents whole.
        let purged: Vec<String> = model.keys().filter(|_| next(20) == 0).cloned().collect();
        let requests = purged
            .iter()
            .map(|id| {
                let rev = model[id].0.clone();
                store::PurgeRequest {
                    id: id.clone(),
                    revs: vec![crate::common::rev(&rev)],
                    recorded: vec![rev],
                }
            })
            .collect();
        db.purge(requests).await.unwrap();
        for id in purged {
            model.remove(&id);
        }
    }
    let live: Vec<&String> = model
        .iter()
        .filter(|(_, (_, l))| *l)
        .map(|(k, _)| k)
        .collect();
    for probe in 0..40 {
        let at = format!("d{:05}", next(6100));
        let descending = probe % 2 == 1;
        let page = db
            .all_docs(AllDocsQuery {
                start: Bound::Included(at.clone()),
                limit: 3,
                descending,
                count_offset: true,
                ..Default::default()
            })
            .await
            .unwrap();
        let before = if descending {
            live.iter().filter(|id| id.as_str() > at.as_str()).count()
        } else {
            live.iter().filter(|id| id.as_str() < at.as_str()).count()
        };
        assert_eq!(page.total_rows, live.len() as u64);
        assert_eq!(
            page.offset,
            Some(before as u64),
            "offset at {at}, descending {descending}"
        );
    }
    // Each document once, at its latest sequence; a page's `pending` is
    // the rows after its last one.
    let feed = db
        .changes(ChangesQuery {
            limit: usize::MAX,
            ..Default::default()
        })
        .await
        .unwrap();
    let seqs: Vec<u64> = feed.rows.iter().map(|row| row.seq).collect();
    assert_eq!(seqs.len(), model.len());
    for _ in 0..40 {
        let since = next(feed.last_seq + 10);
        let page = db
            .changes(ChangesQuery {
                since,
                limit: 5,
                ..Default::default()
            })
            .await
            .unwrap();
        let after = seqs.iter().filter(|s| **s > page.last_seq).count() as u64;
        let want = if page.rows.len() < 5 { 0 } else { after };
        assert_eq!(page.pending, want, "pending after {since}");
    }
}

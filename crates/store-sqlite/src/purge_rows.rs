//! Purge on SQLite files: the rules' results checked against the rows
//! themselves (every counter recounted, no body left behind), and the
//! schema migration that added the purge table.

use std::ops::Deref;
use std::path::PathBuf;

use revtree::{RevId, RevTree};
use rusqlite::{Connection, params};
use serde_json::json;
use store::{
    AllDocsQuery, ChangesQuery, Database, DocInput, GetOptions, PurgeRequest, Store, StoreError,
};

use crate::body_sql::BodyLen;

/// A database "t" in a data folder of its own, and the path of its file.
struct Scratch {
    store: Store,
    db: Database,
    dir: PathBuf,
    path: PathBuf,
}

impl Scratch {
    async fn create(label: &str) -> Scratch {
        let dir =
            std::env::temp_dir().join(format!("recliner-purge-{label}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let store = crate::open(&dir).unwrap();
        let db = store.create_db("t").await.unwrap();
        let path = dir.join(store::name::file_name("t"));
        Scratch {
            store,
            db,
            dir,
            path,
        }
    }

    /// Closes the database and opens it again (migrating its file).
    async fn reopen(self) -> Scratch {
        self.store.close_all().await;
        let db = self.store.db("t").await.unwrap();
        Scratch { db, ..self }
    }

    /// A read on a connection of its own to the database's file.
    fn read_sqlite_blocking<T>(
        &self,
        op: impl FnOnce(&Connection) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        op(&Connection::open(&self.path)?)
    }
}

impl Deref for Scratch {
    type Target = Database;

    fn deref(&self) -> &Database {
        &self.db
    }
}

fn rev(s: &str) -> RevId {
    RevId::parse(s).unwrap()
}

fn request(id: &str, revs: &[&str]) -> PurgeRequest {
    PurgeRequest {
        id: id.into(),
        revs: revs.iter().map(|r| rev(r)).collect(),
        recorded: revs.iter().map(|r| r.to_string()).collect(),
    }
}

/// Writes `{"_id", "_revisions": ...}` documents with `new_edits=false`.
async fn replicate(db: &Database, docs: serde_json::Value) {
    let docs = docs
        .as_array()
        .unwrap()
        .iter()
        .map(|d| DocInput::from_json(d.clone()).unwrap())
        .collect();
    for row in db.bulk_docs(docs, false).await.unwrap() {
        row.result.unwrap();
    }
}

/// `c`: three branches (`3-c`, `3-d` sharing `2-b`, and `2-x`), and `o`.
async fn conflicted(db: &Database) {
    replicate(
        db,
        json!([
            {"_id": "c", "_revisions": {"start": 3, "ids": ["c", "b", "a"]}, "v": "c"},
            {"_id": "c", "_revisions": {"start": 3, "ids": ["d", "b", "a"]}, "v": "d"},
            {"_id": "c", "_revisions": {"start": 2, "ids": ["x", "a"]}, "v": "x", "_deleted": true},
            {"_id": "o", "_revisions": {"start": 1, "ids": ["o"]}, "v": 1},
        ]),
    )
    .await;
}

fn stored_revs(db: &Scratch, id: &str) -> Vec<String> {
    let id = id.to_string();
    db.read_sqlite_blocking(move |conn| {
        let mut stmt = conn.prepare(
            "SELECT rev FROM revs JOIN docs USING (doc_key) WHERE docs.id = ?1 ORDER BY rev",
        )?;
        let revs = stmt
            .query_map([id], |r| r.get(0))?
            .collect::<Result<Vec<String>, _>>()?;
        Ok(revs)
    })
    .unwrap()
}

async fn change_ids(db: &Database) -> Vec<(String, u64)> {
    db.changes(ChangesQuery::default())
        .await
        .unwrap()
        .rows
        .into_iter()
        .map(|r| (r.id, r.seq))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_purged_branch_goes_and_the_document_moves_to_the_end_of_the_feed() {
    let db = Scratch::create("branch").await;
    conflicted(&db).await;
    let before = db.info().await.unwrap();
    assert_eq!(
        (before.update_seq, before.doc_count, before.doc_del_count),
        (4, 2, 0)
    );
    // 2-b is not a leaf and 9-z is unknown: only 3-d goes, with no
    // ancestor (2-b is still 3-c's).
    let results = db
        .purge(vec![request("c", &["3-d", "2-b", "9-z"])])
        .await
        .unwrap();
    assert_eq!(results[0].purged, vec![rev("3-d")]);
    // Replicated ancestors have no body; the purged leaf's is gone.
    assert_eq!(stored_revs(&db, "c"), ["2-x", "3-c"]);
    let info = db.info().await.unwrap();
    // Two leaves remain: two new sequences, as CouchDB relabels them.
    assert_eq!((info.update_seq, info.purge_seq), (6, 1));
    assert_eq!((info.doc_count, info.doc_del_count), (2, 0));
    assert_eq!(change_ids(&db).await, [("o".into(), 4), ("c".into(), 6)]);
    let doc = db.get("c", GetOptions::default()).await.unwrap();
    assert_eq!(doc.to_value().unwrap()["_rev"], "3-c");
    assert!(
        db.get(
            "c",
            GetOptions {
                rev: Some(rev("3-d")),
                ..Default::default()
            }
        )
        .await
        .is_err()
    );
    let diff = db
        .revs_diff(vec![("c".into(), vec![rev("3-d"), rev("2-b")])])
        .await
        .unwrap();
    assert_eq!(diff[0].1.missing, vec![rev("3-d")]);

    // Purging the live leaf leaves the deleted branch: a deleted document.
    db.purge(vec![request("c", &["3-c"])]).await.unwrap();
    let info = db.info().await.unwrap();
    assert_eq!((info.doc_count, info.doc_del_count), (1, 1));
    assert_eq!(stored_revs(&db, "c"), ["2-x"]);
    assert_eq!(info.update_seq, 7);
}

#[tokio::test(flavor = "multi_thread")]
async fn purging_every_leaf_removes_the_document_everywhere() {
    let db = Scratch::create("whole").await;
    conflicted(&db).await;
    let results = db
        .purge(vec![
            request("c", &["3-c", "3-d", "2-x"]),
            request("nope", &["1-a"]),
            request("o", &[]),
        ])
        .await
        .unwrap();
    assert_eq!(results[0].purged, vec![rev("2-x"), rev("3-c"), rev("3-d")]);
    assert!(results[1].purged.is_empty() && results[2].purged.is_empty());
    let info = db.info().await.unwrap();
    // Nothing relabelled: the update sequence moves by one; one purge
    // sequence per document of the request.
    assert_eq!((info.update_seq, info.purge_seq), (5, 3));
    assert_eq!((info.doc_count, info.doc_del_count), (1, 0));
    assert!(stored_revs(&db, "c").is_empty());
    assert!(matches!(
        db.get("c", GetOptions::default()).await,
        Err(StoreError::DocNotFound("missing"))
    ));
    assert_eq!(change_ids(&db).await, [("o".into(), 4)]);
    let all = db.all_docs(AllDocsQuery::default()).await.unwrap();
    assert_eq!(all.rows.len(), 1);
    let diff = db
        .revs_diff(vec![("c".into(), vec![rev("3-c")])])
        .await
        .unwrap();
    assert_eq!(diff[0].1.missing, vec![rev("3-c")]);
    // The id can be written again from scratch.
    let doc = DocInput::new("c", serde_json::Map::new());
    assert!(db.put_doc(doc, true).await.unwrap().starts_with("1-"));
    // A deleted document purged whole leaves the deleted count.
    replicate(
        &db,
        json!([{"_id": "dead", "_revisions": {"start": 1, "ids": ["z"]}, "_deleted": true}]),
    )
    .await;
    assert_eq!(db.info().await.unwrap().doc_del_count, 1);
    db.purge(vec![request("dead", &["1-z"])]).await.unwrap();
    let info = db.info().await.unwrap();
    assert_eq!((info.doc_count, info.doc_del_count), (2, 0));
}

#[tokio::test(flavor = "multi_thread")]
async fn attachments_only_purged_revisions_used_are_compacted_away() {
    let db = Scratch::create("atts").await;
    let with_att = |id: &str, bytes: &[u8]| {
        let mut doc = DocInput::new(id, serde_json::Map::new());
        doc.attachments.push((
            "a.bin".into(),
            store::AttachmentInput::Inline {
                content_type: "application/octet-stream".into(),
                data: bytes.to_vec(),
                revpos: None,
            },
        ));
        doc
    };
    let gone = db
        .put_doc(with_att("gone", b"only mine"), true)
        .await
        .unwrap();
    let shared = db.put_doc(with_att("shared", b"both"), true).await.unwrap();
    db.put_doc(with_att("keeper", b"both"), true).await.unwrap();
    let blobs = |db: &Scratch| {
        db.read_sqlite_blocking(|conn| {
            Ok(conn.query_row("SELECT COUNT(*) FROM att_blobs", [], |r| r.get::<_, i64>(0))?)
        })
        .unwrap()
    };
    assert_eq!(blobs(&db), 2);
    db.purge(vec![
        request("gone", &[gone.as_str()]),
        request("shared", &[shared.as_str()]),
    ])
    .await
    .unwrap();
    db.compact().await.unwrap();
    // The bytes only the purged revision used are gone; shared ones stay.
    assert_eq!(blobs(&db), 1);
    let keeper = db.get("keeper", GetOptions::default()).await.unwrap();
    assert!(keeper.to_value().unwrap()["_attachments"]["a.bin"].is_object());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_file_of_the_previous_schema_gains_the_purge_table() {
    let db = Scratch::create("migrate").await;
    db.put_doc(DocInput::new("a", serde_json::Map::new()), true)
        .await
        .unwrap();
    db.store.close_all().await;
    {
        let conn = Connection::open(&db.path).unwrap();
        conn.execute_batch("DROP TABLE purge_infos; PRAGMA user_version = 1;")
            .unwrap();
    }
    let db = db.reopen().await;
    let rev = db
        .get("a", GetOptions::default())
        .await
        .unwrap()
        .to_value()
        .unwrap()["_rev"]
        .as_str()
        .unwrap()
        .to_string();
    let results = db.purge(vec![request("a", &[rev.as_str()])]).await.unwrap();
    assert_eq!(results[0].purged.len(), 1);
    assert_eq!(db.purge_infos().await.unwrap().len(), 1);
    let version: i64 = db
        .read_sqlite_blocking(|conn| {
            Ok(conn.pragma_query_value(None, "user_version", |r| r.get(0))?)
        })
        .unwrap();
    assert_eq!(version, crate::schema::SCHEMA_VERSION);
}

/// A document's history as branches of letters: branch "aab" is
/// `3-aab` on `2-aa` on `1-a`, so branches sharing a prefix share
/// revisions.
fn branch_docs(docs: &[Vec<(String, bool)>]) -> (serde_json::Value, Vec<Vec<String>>) {
    let mut out = Vec::new();
    let mut all = Vec::new();
    for (i, branches) in docs.iter().enumerate() {
        // Each branch's newest revision first, so that picks often
        // name leaves, then every revision.
        let mut revs: Vec<String> = branches
            .iter()
            .map(|(letters, _)| format!("{}-{letters}", letters.len()))
            .collect();
        for (letters, deleted) in branches {
            let ids: Vec<String> = (1..=letters.len())
                .rev()
                .map(|n| letters[..n].to_string())
                .collect();
            revs.extend((1..=letters.len()).map(|n| format!("{n}-{}", &letters[..n])));
            out.push(
                json!({"_id": format!("d{i}"), "_deleted": deleted, "n": letters,
                "_revisions": {"start": letters.len(), "ids": ids}}),
            );
        }
        all.push(revs);
    }
    (serde_json::Value::Array(out), all)
}

/// Recounts what the database's counters claim, and checks every row
/// against its tree.
fn check_consistent(db: &Scratch) {
    db.read_sqlite_blocking(|conn| {
        let state = crate::session::load_state(conn)?;
        let mut stmt =
            conn.prepare("SELECT doc_key, id, seq, winner, deleted, winner_row, tree FROM docs")?;
        let rows = stmt
            .query_map([], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, i64>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, bool>(4)?,
                    r.get::<_, i64>(5)?,
                    r.get::<_, Vec<u8>>(6)?,
                ))
            })?
            .collect::<Result<Vec<_>, _>>()?;
        let (mut live, mut dead, mut size) = (0u64, 0u64, 0i64);
        for (key, id, seq, winner, deleted, winner_row, tree) in rows {
            let tree = RevTree::decode(&tree).unwrap();
            let best = tree.winner().expect("no document is left without a leaf");
            assert_eq!(
                (best.rev.to_string(), best.deleted),
                (winner, deleted),
                "{id}"
            );
            assert!(seq as u64 <= state.update_seq);
            if deleted {
                dead += 1;
            } else {
                live += 1;
                let (row, BodyLen(len)): (i64, BodyLen) = conn.query_row(
                    "SELECT row, body FROM revs WHERE doc_key = ?1 AND rev = ?2",
                    params![key, best.rev.to_string()],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )?;
                assert_eq!(row, winner_row, "{id}");
                size += len;
            }
            let mut bodies = conn.prepare("SELECT rev FROM revs WHERE doc_key = ?1")?;
            for stored in bodies.query_map([key], |r| r.get::<_, String>(0))? {
                assert!(
                    tree.contains(&rev(&stored?)),
                    "{id}: a body outlives its revision"
                );
            }
        }
        assert_eq!((state.doc_count, state.doc_del_count), (live, dead));
        assert_eq!(state.external_size, size);
        let orphans: i64 = conn.query_row(
            "SELECT COUNT(*) FROM revs WHERE doc_key NOT IN (SELECT doc_key FROM docs)",
            [],
            |r| r.get(0),
        )?;
        assert_eq!(orphans, 0, "bodies of purged documents remain");
        Ok(())
    })
    .unwrap();
}

fn leaves_of(db: &Scratch, id: &str) -> Vec<RevId> {
    let id = id.to_string();
    db.read_sqlite_blocking(move |conn| {
        Ok(store::backend::ReadRows::doc_row(&crate::Rows(conn), &id)?
            .map(|row| row.tree.leaves().into_iter().map(|l| l.rev).collect())
            .unwrap_or_default())
    })
    .unwrap()
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]

    /// Whatever is purged, in whatever order: exactly the requested
    /// leaves go, every counter matches a recount, no body outlives its
    /// revision, and the sequences move as CouchDB's do.
    #[test]
    fn purges_keep_the_database_consistent(
        docs in proptest::collection::vec(
            proptest::collection::vec(("[ab]{1,4}", proptest::bool::weighted(0.3)), 1..4),
            1..4,
        ),
        purges in proptest::collection::vec(
            proptest::collection::vec(
                (
                    proptest::prelude::any::<proptest::sample::Index>(),
                    proptest::bool::ANY,
                    proptest::prelude::any::<proptest::sample::Index>(),
                ),
                1..4,
            ),
            1..5,
        ),
    ) {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let db = Scratch::create(&format!("prop-{}", uuid::Uuid::new_v4().simple())).await;
            let (written, revs) = branch_docs(&docs);
            replicate(&db, written).await;
            check_consistent(&db);
            for purge in &purges {
                let mut asked: Vec<(String, Vec<RevId>)> = Vec::new();
                for (doc, leaf, pick) in purge {
                    // One index past the documents names one that does not exist.
                    let doc = doc.index(docs.len() + 1);
                    let id = format!("d{doc}");
                    let named = match revs.get(doc) {
                        // A branch's newest revision: often a leaf.
                        Some(r) if *leaf => r[pick.index(docs[doc].len())].clone(),
                        Some(r) => r[pick.index(r.len())].clone(),
                        None => "1-zz".into(),
                    };
                    match asked.iter_mut().find(|(i, _)| *i == id) {
                        Some((_, list)) => list.push(rev(&named)),
                        None => asked.push((id, vec![rev(&named)])),
                    }
                }
                let before: Vec<Vec<RevId>> = asked.iter().map(|(id, _)| leaves_of(&db, id)).collect();
                let info_before = db.info().await.unwrap();
                let requests = asked
                    .iter()
                    .map(|(id, revs)| PurgeRequest {
                        id: id.clone(),
                        revs: revs.clone(),
                        recorded: revs.iter().map(ToString::to_string).collect(),
                    })
                    .collect();
                let results = db.purge(requests).await.unwrap();
                let info = db.info().await.unwrap();
                let mut relabelled = 0;
                for (((id, named), leaves), result) in asked.iter().zip(&before).zip(&results) {
                    let mut expected: Vec<RevId> = leaves.iter().filter(|l| named.contains(l)).cloned().collect();
                    expected.sort();
                    assert_eq!(&result.purged, &expected, "{id}");
                    let now = leaves_of(&db, id);
                    let kept: Vec<RevId> = leaves.iter().filter(|l| !named.contains(l)).cloned().collect();
                    let mut sorted_now = now.clone();
                    sorted_now.sort();
                    let mut sorted_kept = kept.clone();
                    sorted_kept.sort();
                    assert_eq!(sorted_now, sorted_kept, "{id}");
                    if !expected.is_empty() {
                        relabelled += now.len() as u64;
                    }
                }
                assert_eq!(info.purge_seq, info_before.purge_seq + asked.len() as u64);
                let moved = if asked.is_empty() { 0 } else { relabelled.max(1) };
                assert_eq!(info.update_seq, info_before.update_seq + moved);
                check_consistent(&db);
            }
            db.store.close_all().await;
            let _ = std::fs::remove_dir_all(&db.dir);
        });
    }
}

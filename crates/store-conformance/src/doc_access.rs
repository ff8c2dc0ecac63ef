//! Per-document access (`?access=true`): the access index kept with each
//! write, and what a user's handle shows of documents, feeds, listings,
//! revisions and local documents, revocation included.

use serde_json::{Value, json};
use store::doc_access::{Visibility, revocation_tombstone};
use store::{
    AllDocsQuery, ChangesQuery, CreateDb, Database, OpenRev, OpenRevs, RevisionsRequest, StoreError,
};

use crate::Backend;
use crate::common::{TempStore, doc, put, replicate, rev};

async fn access_db(t: &TempStore, name: &str) -> Database {
    t.store
        .create_db_with(
            name,
            CreateDb {
                access: true,
                ..Default::default()
            },
        )
        .await
        .unwrap()
}

fn who(principals: &[&str]) -> Vec<String> {
    principals.iter().map(|p| p.to_string()).collect()
}

async fn ids_in_feed(db: &Database, since: u64) -> Vec<(String, bool)> {
    db.changes(ChangesQuery {
        since,
        ..Default::default()
    })
    .await
    .unwrap()
    .rows
    .into_iter()
    .map(|r| (r.id, r.removed))
    .collect()
}

async fn listed(db: &Database) -> (Vec<String>, u64) {
    let page = db.all_docs(AllDocsQuery::default()).await.unwrap();
    (
        page.rows.into_iter().map(|r| r.id).collect(),
        page.total_rows,
    )
}

pub async fn a_user_reads_only_documents_that_name_them_or_their_roles(backend: &dyn Backend) {
    let t = TempStore::new(backend);
    let db = access_db(&t, "shared").await;
    assert!(db.has_doc_access());
    put(&db, json!({"_id": "a1", "_access": ["alice"]})).await;
    put(&db, json!({"_id": "b1", "_access": ["bob"]})).await;
    put(&db, json!({"_id": "both", "_access": ["alice", "bob"]})).await;
    put(&db, json!({"_id": "team", "_access": ["editors"]})).await;
    put(&db, json!({"_id": "admins-only"})).await;
    put(&db, json!({"_id": "nobody", "_access": []})).await;

    let alice = db.for_reader(who(&["alice", "editors"]));
    let bob = db.for_reader(who(&["bob"]));
    assert_eq!(
        ids_in_feed(&alice, 0).await,
        [("a1", false), ("both", false), ("team", false)].map(|(i, r)| (i.to_string(), r))
    );
    assert_eq!(
        listed(&alice).await,
        (who(&["a1", "both", "team"]), 3),
        "_all_docs counts what the user may read"
    );
    assert_eq!(listed(&bob).await, (who(&["b1", "both"]), 2));
    // The database as a whole is untouched.
    assert_eq!(listed(&db).await.1, 6);

    // A document the user may not read is one that does not exist.
    for id in ["b1", "admins-only", "nobody", "never-written"] {
        assert!(
            matches!(
                alice.get(id, Default::default()).await,
                Err(StoreError::DocNotFound("missing"))
            ),
            "{id}"
        );
        assert_eq!(alice.visibility(id).await.unwrap(), Visibility::Hidden);
    }
    assert!(alice.get("a1", Default::default()).await.is_ok());
    let keys = alice
        .all_docs_keys(who(&["a1", "b1", "never"]), None)
        .await
        .unwrap();
    let found: Vec<bool> = keys.iter().map(|(_, row)| row.is_some()).collect();
    assert_eq!(found, [true, false, false]);

    // `_bulk_get` and `open_revs`: not found, as a missing document.
    let b1_rev = db
        .get("b1", Default::default())
        .await
        .unwrap()
        .to_value()
        .unwrap()["_rev"]
        .as_str()
        .unwrap()
        .to_string();
    let got = alice
        .bulk_get(
            vec![RevisionsRequest {
                id: "b1".into(),
                rev: Some(rev(&b1_rev)),
                atts_since: Vec::new(),
            }],
            true,
            false,
            false,
        )
        .await
        .unwrap();
    assert!(got[0].docs.iter().all(Result::is_err));
    assert!(matches!(
        alice
            .open_revs("b1", OpenRevs::All, Default::default(), false)
            .await,
        Err(StoreError::DocNotFound("missing"))
    ));

    // `_revs_diff` tells nothing of a document the user may not read.
    let diff = alice
        .revs_diff(vec![("b1".into(), vec![rev(&b1_rev)])])
        .await
        .unwrap();
    assert_eq!(diff.len(), 1);
    assert_eq!(diff[0].1.missing, vec![rev(&b1_rev)]);
    assert!(diff[0].1.possible_ancestors.is_empty());
}

pub async fn a_users_feed_starts_where_they_left_it(backend: &dyn Backend) {
    let t = TempStore::new(backend);
    let db = access_db(&t, "feed").await;
    for i in 0..20 {
        let owner = if i % 2 == 0 { "alice" } else { "bob" };
        put(&db, json!({"_id": format!("d{i:02}"), "_access": [owner]})).await;
    }
    let alice = db.for_reader(who(&["alice"]));
    let page = alice
        .changes(ChangesQuery {
            limit: 4,
            ..Default::default()
        })
        .await
        .unwrap();
    let ids: Vec<&str> = page.rows.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, ["d00", "d02", "d04", "d06"]);
    assert_eq!(page.pending, 6, "pending counts the user's changes");
    let rest = alice
        .changes(ChangesQuery {
            since: page.last_seq,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(rest.rows.len(), 6);
    assert_eq!(rest.rows[0].id, "d08");
    // An edit moves the document to the end of the feed, once.
    let d00 = db
        .get("d00", Default::default())
        .await
        .unwrap()
        .to_value()
        .unwrap();
    put(
        &db,
        json!({"_id": "d00", "_rev": d00["_rev"], "_access": ["alice"], "v": 2}),
    )
    .await;
    let after = ids_in_feed(&alice, rest.last_seq).await;
    assert_eq!(after, [("d00".to_string(), false)]);
    // Descending, and by id.
    let newest = alice
        .changes(ChangesQuery {
            descending: true,
            limit: 1,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(newest.rows[0].id, "d00");
    let by_id = alice
        .changes(ChangesQuery {
            doc_ids: Some(who(&["d01", "d02"])),
            ..Default::default()
        })
        .await
        .unwrap();
    let ids: Vec<&str> = by_id.rows.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, ["d02"]);
}

pub async fn a_deletion_reaches_those_who_saw_the_document(backend: &dyn Backend) {
    let t = TempStore::new(backend);
    let db = access_db(&t, "deleted").await;
    let r1 = put(&db, json!({"_id": "x", "_access": ["alice"]})).await;
    let alice = db.for_reader(who(&["alice"]));
    let seq = db.update_seq();
    put(&db, json!({"_id": "x", "_rev": r1, "_deleted": true})).await;
    let page = alice
        .changes(ChangesQuery {
            since: seq,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(page.rows.len(), 1);
    assert!(page.rows[0].deleted);
    assert!(!page.rows[0].removed);
    assert!(listed(&alice).await.0.is_empty());
}

pub async fn a_users_counts_are_of_their_documents(backend: &dyn Backend) {
    let t = TempStore::new(backend);
    let db = access_db(&t, "counted").await;
    let ra = put(&db, json!({"_id": "a", "_access": ["alice"]})).await;
    put(&db, json!({"_id": "a2", "_access": ["alice", "bob"]})).await;
    put(&db, json!({"_id": "t", "_access": ["team"]})).await;
    let rb = put(&db, json!({"_id": "b", "_access": ["bob"]})).await;
    put(&db, json!({"_id": "a", "_rev": ra, "_deleted": true})).await;
    put(&db, json!({"_id": "b", "_rev": rb, "_deleted": true})).await;
    put(&db, json!({"_id": "nobody's"})).await;
    let counts = |db: Database| async move {
        let info = db.info().await.unwrap();
        (info.doc_count, info.doc_del_count)
    };
    assert_eq!(counts(db.clone()).await, (3, 2));
    assert_eq!(counts(db.for_reader(who(&["alice", "team"]))).await, (2, 1));
    assert_eq!(counts(db.for_reader(who(&["bob"]))).await, (1, 1));
    assert_eq!(counts(db.for_reader(who(&["carol"]))).await, (0, 0));
    // The sequence is the database's, for every reader.
    let alice = db.for_reader(who(&["alice"]));
    assert_eq!(alice.info().await.unwrap().update_seq, db.update_seq());
}

pub async fn a_revoked_user_gets_a_tombstone_that_never_enters_the_tree(backend: &dyn Backend) {
    let t = TempStore::new(backend);
    let db = access_db(&t, "revoke").await;
    let r1 = put(
        &db,
        json!({"_id": "s", "_access": ["alice", "bob"], "v": 1}),
    )
    .await;
    let alice = db.for_reader(who(&["alice"]));
    let bob = db.for_reader(who(&["bob"]));
    let since = db.update_seq();
    let r2 = put(
        &db,
        json!({"_id": "s", "_rev": r1, "_access": ["alice"], "v": 2}),
    )
    .await;

    // Bob's feed shows the document once more: deleted, under the
    // tombstone of the leaf he could hold.
    let page = bob
        .changes(ChangesQuery {
            since,
            include_docs: true,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(page.rows.len(), 1);
    let row = &page.rows[0];
    let tombstone = revocation_tombstone("s", &rev(&r1)).unwrap();
    assert!(row.removed && row.deleted);
    assert_eq!(row.changes, vec![tombstone.clone()]);
    let shown: Value = row.doc.as_ref().unwrap().to_value().unwrap();
    assert_eq!(
        shown,
        json!({"_id": "s", "_rev": tombstone.to_string(), "_deleted": true})
    );
    assert!(listed(&bob).await.0.is_empty());
    assert_eq!(
        bob.visibility("s").await.unwrap(),
        Visibility::Revoked(vec![rev(&r1)])
    );
    // Alice still reads it; her feed shows the edit.
    assert!(alice.get("s", Default::default()).await.is_ok());
    assert_eq!(ids_in_feed(&alice, since).await, [("s".to_string(), false)]);

    // What a replicating client asks for: the tombstone with its history.
    let opened = bob
        .open_revs(
            "s",
            OpenRevs::List(vec![tombstone.clone()]),
            store::GetOptions {
                revs: true,
                ..Default::default()
            },
            false,
        )
        .await
        .unwrap();
    let OpenRev::Ok(doc) = &opened[0] else {
        panic!("the tombstone is not served: {opened:?}")
    };
    let doc = doc.to_value().unwrap();
    assert_eq!(doc["_deleted"], true);
    assert_eq!(doc["_revisions"]["start"], tombstone.pos());
    assert_eq!(
        doc["_revisions"]["ids"][1],
        Value::String(rev(&r1).hash().to_string())
    );
    // Every other revision stays unknown to him.
    let other = bob
        .open_revs(
            "s",
            OpenRevs::List(vec![rev(&r2)]),
            Default::default(),
            false,
        )
        .await
        .unwrap();
    assert!(matches!(other[0], OpenRev::Missing(_)));

    // His client holds the tombstone: `_revs_diff` says the database has it,
    // so it is never sent back...
    let diff = bob
        .revs_diff(vec![("s".into(), vec![tombstone.clone(), rev(&r2)])])
        .await
        .unwrap();
    assert_eq!(diff[0].1.missing, vec![rev(&r2)]);
    // ...and if it is, it is answered and dropped.
    let before = db.update_seq();
    let written = replicate(
        &db,
        vec![json!({
            "_id": "s", "_rev": tombstone.to_string(), "_deleted": true,
            "_revisions": {"start": tombstone.pos(), "ids": [tombstone.hash().to_string(), rev(&r1).hash().to_string()]}
        })],
    )
    .await;
    assert!(written[0].result.is_ok());
    assert_eq!(db.update_seq(), before, "nothing was written");
    let tree = db
        .open_revs("s", OpenRevs::All, Default::default(), false)
        .await
        .unwrap();
    assert_eq!(tree.len(), 1, "no branch was added");

    // Given back, the document reaches him again as itself.
    let r3 = put(
        &db,
        json!({"_id": "s", "_rev": r2, "_access": ["alice", "bob"], "v": 3}),
    )
    .await;
    assert_eq!(bob.visibility("s").await.unwrap(), Visibility::Readable);
    let got = bob
        .get("s", Default::default())
        .await
        .unwrap()
        .to_value()
        .unwrap();
    assert_eq!(got["_rev"], r3.as_str());
}

pub async fn revocation_through_a_role_and_a_name_is_decided_by_what_is_left(
    backend: &dyn Backend,
) {
    let t = TempStore::new(backend);
    let db = access_db(&t, "roles").await;
    let r1 = put(&db, json!({"_id": "r", "_access": ["carol", "team"]})).await;
    let carol = db.for_reader(who(&["carol", "team"]));
    let since = db.update_seq();
    // Carol loses her name's entry but keeps the role's: still hers, once
    // in her feed.
    let r2 = put(&db, json!({"_id": "r", "_rev": r1, "_access": ["team"]})).await;
    assert_eq!(ids_in_feed(&carol, since).await, [("r".to_string(), false)]);
    assert_eq!(listed(&carol).await.0, who(&["r"]));
    // Then the role's: gone.
    put(&db, json!({"_id": "r", "_rev": r2, "_access": ["dave"]})).await;
    assert_eq!(ids_in_feed(&carol, since).await, [("r".to_string(), true)]);
    assert!(listed(&carol).await.0.is_empty());
}

pub async fn local_documents_are_read_by_those_they_name(backend: &dyn Backend) {
    let t = TempStore::new(backend);
    let db = access_db(&t, "local").await;
    db.put_local("_local/cp-a", json!({"_access": ["alice"], "seq": 1}))
        .await
        .unwrap();
    db.put_local("_local/cp-admin", json!({"seq": 1}))
        .await
        .unwrap();
    let alice = db.for_reader(who(&["alice"]));
    assert_eq!(alice.get_local("_local/cp-a").await.unwrap()["seq"], 1);
    assert!(matches!(
        alice.get_local("_local/cp-admin").await,
        Err(StoreError::DocNotFound("missing"))
    ));
    let rows = alice.local_docs(AllDocsQuery {
        include_docs: true,
        ..Default::default()
    });
    let ids: Vec<String> = rows.await.unwrap().into_iter().map(|r| r.id).collect();
    assert_eq!(ids, ["_local/cp-a"]);
}

pub async fn the_access_index_is_kept_with_each_write_and_survives_a_restart(
    backend: &dyn Backend,
) {
    let t = TempStore::new(backend);
    {
        let db = access_db(&t, "kept").await;
        let docs = (0..50)
            .map(|i| doc(json!({"_id": format!("k{i:02}"), "_access": [format!("u{}", i % 5)]})))
            .collect();
        let results = db.bulk_docs(docs, true).await.unwrap();
        assert!(results.iter().all(|r| r.result.is_ok()));
        // A document purged whole leaves no row behind.
        let k00 = db
            .get("k00", Default::default())
            .await
            .unwrap()
            .to_value()
            .unwrap();
        let k00_rev = k00["_rev"].as_str().unwrap().to_string();
        db.purge(vec![store::PurgeRequest {
            id: "k00".into(),
            revs: vec![rev(&k00_rev)],
            recorded: vec![k00_rev.clone()],
        }])
        .await
        .unwrap();
    }
    t.store.close_all().await;
    let store = t.reopen(Default::default());
    let db = store.db("kept").await.unwrap();
    assert!(
        db.has_doc_access(),
        "the flag is kept for the database's life"
    );
    let u0 = db.for_reader(who(&["u0"]));
    let (ids, total) = listed(&u0).await;
    assert_eq!(total, 9);
    assert_eq!(ids.first().map(String::as_str), Some("k05"));
    assert_eq!(ids_in_feed(&u0, 0).await.len(), 9);
    // A plain database keeps no index and scopes nothing.
    let plain = store.create_db("plain").await.unwrap();
    put(&plain, json!({"_id": "p", "_access": ["u0"]})).await;
    assert!(!plain.has_doc_access());
    assert_eq!(listed(&plain.for_reader(who(&["nobody"]))).await.1, 1);
}

pub async fn a_lost_access_index_is_rebuilt_when_the_database_is_opened(backend: &dyn Backend) {
    let t = TempStore::new(backend);
    {
        let db = access_db(&t, "rebuilt").await;
        let docs = (0..1200)
            .map(|i| doc(json!({"_id": format!("r{i:04}"), "_access": [format!("u{}", i % 3)]})))
            .collect();
        db.bulk_docs(docs, true).await.unwrap();
        put(&db, json!({"_id": "nobody's"})).await;
        db.forget_access_index().await.unwrap();
        // Without its index, a user sees nothing: the index is the rule's data.
        assert_eq!(listed(&db.for_reader(who(&["u0"]))).await.1, 0);
    }
    t.store.close_all().await;
    let store = t.reopen(Default::default());
    let db = store.db("rebuilt").await.unwrap();
    let u0 = db.for_reader(who(&["u0"]));
    assert_eq!(listed(&u0).await.1, 400);
    assert_eq!(ids_in_feed(&u0, 0).await.len(), 400);
    assert_eq!(
        u0.get("r0001", Default::default())
            .await
            .err()
            .map(|e| e.to_string()),
        Some(StoreError::DocNotFound("missing").to_string())
    );
    // Written after the rebuild, kept as any write.
    put(&db, json!({"_id": "later", "_access": ["u0"]})).await;
    assert_eq!(listed(&u0).await.1, 401);
}

/// The principals documents name in [`feeds_and_listings_follow_a_model`],
/// by bit of an access mask.
const PRINCIPALS: [&str; 5] = ["a", "b", "c", "r1", "r2"];
/// Its readers: a name and maybe a role each.
const READERS: [&[&str]; 4] = [&["a", "r1"], &["b", "r2"], &["c"], &["d"]];

/// What the model knows of one principal and one document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Held {
    Absent,
    Present,
    Gone,
}

#[derive(Debug, Clone, Default)]
struct ModelDoc {
    rev: Option<String>,
    deleted: bool,
    held: [Option<Held>; 5],
    /// The step at which each principal's row was last written.
    at: [usize; 5],
}

impl ModelDoc {
    fn held(&self, p: usize) -> Held {
        self.held[p].unwrap_or(Held::Absent)
    }

    /// The model's answer for one reader: readable, lost, or nothing.
    fn seen_by(&self, reader: &[&str]) -> Held {
        let mine: Vec<Held> = PRINCIPALS
            .iter()
            .enumerate()
            .filter(|(_, p)| reader.contains(p))
            .map(|(i, _)| self.held(i))
            .collect();
        if mine.contains(&Held::Present) {
            Held::Present
        } else if mine.contains(&Held::Gone) {
            Held::Gone
        } else {
            Held::Absent
        }
    }

    /// Whether the reader's latest row was written at `step`: what their
    /// feed since their last look shows.
    fn changed_for(&self, reader: &[&str], step: usize) -> bool {
        let seen = self.seen_by(reader);
        seen != Held::Absent
            && PRINCIPALS
                .iter()
                .enumerate()
                .filter(|(i, p)| reader.contains(p) && self.held(*i) == seen)
                .map(|(i, _)| self.at[i])
                .max()
                == Some(step)
    }

    /// A write at `step` naming `now` (`None`: a deletion that names nobody).
    fn written(&mut self, now: Option<u8>, live_before: bool, step: usize) {
        for p in 0..PRINCIPALS.len() {
            let named = match now {
                Some(mask) => mask & (1 << p) != 0,
                None => self.held(p) == Held::Present,
            };
            let (held, touched) = match (named, self.held(p)) {
                (true, _) => (Held::Present, true),
                (false, Held::Present) if live_before => (Held::Gone, true),
                (false, Held::Present) => (Held::Absent, false),
                (false, other) => (other, false),
            };
            self.held[p] = Some(held);
            if touched {
                self.at[p] = step;
            }
        }
    }
}

/// A random history of edits, deletions and re-creations of a few
/// documents with random `_access` lists: after every step, each reader's
/// `_all_docs`, feed (whole and since their last look) and single reads
/// agree with a model of the rule.
pub fn feeds_and_listings_follow_a_model(backend: &dyn Backend) {
    use proptest::prelude::*;
    let ops = prop::collection::vec((0usize..6, prop::option::weighted(0.8, 0u8..32)), 1..40);
    proptest!(ProptestConfig { cases: 16, ..ProptestConfig::default() }, |(ops in ops)| {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let t = TempStore::new(backend);
            let db = access_db(&t, "model").await;
            let mut model: Vec<ModelDoc> = vec![ModelDoc::default(); 6];
            let mut last: Vec<u64> = vec![0; READERS.len()];
            for (step, (d, access)) in ops.into_iter().enumerate() {
                let step = step + 1;
                let id = format!("m{d}");
                let doc_model = &mut model[d];
                let live_before = doc_model.rev.is_some() && !doc_model.deleted;
                let before: Vec<Held> = READERS.iter().map(|r| doc_model.seen_by(r)).collect();
                match access {
                    Some(mask) => {
                        let list: Vec<&str> = PRINCIPALS
                            .iter()
                            .enumerate()
                            .filter(|(i, _)| mask & (1 << i) != 0)
                            .map(|(_, p)| *p)
                            .collect();
                        let mut body = json!({"_id": id, "_access": list, "m": mask});
                        if let (Some(rev), false) = (&doc_model.rev, doc_model.deleted) {
                            body["_rev"] = json!(rev);
                        }
                        doc_model.rev = Some(put(&db, body).await);
                        doc_model.written(Some(mask), live_before, step);
                        doc_model.deleted = false;
                    }
                    None if live_before => {
                        let rev = doc_model.rev.clone().unwrap();
                        doc_model.rev = Some(put(&db, json!({"_id": id, "_rev": rev, "_deleted": true})).await);
                        doc_model.written(None, live_before, step);
                        doc_model.deleted = true;
                    }
                    None => continue,
                }
                for (r, reader) in READERS.iter().enumerate() {
                    let handle = db.for_reader(who(reader));
                    let after = model[d].seen_by(reader);
                    // Since their last look: this document, if it concerns them.
                    let page = handle
                        .changes(ChangesQuery { since: last[r], ..Default::default() })
                        .await
                        .unwrap();
                    let rows: Vec<(String, bool)> =
                        page.rows.iter().map(|row| (row.id.clone(), row.removed)).collect();
                    let expected = if model[d].changed_for(reader, step) {
                        vec![(id.clone(), after == Held::Gone)]
                    } else {
                        Vec::new()
                    };
                    assert_eq!(rows, expected, "reader {reader:?} after {id} ({before:?} → {after:?})");
                    last[r] = page.last_seq;
                    // Everything, from the start.
                    let mut whole: Vec<(String, bool)> = ids_in_feed(&handle, 0).await;
                    whole.sort();
                    let mut want: Vec<(String, bool)> = model
                        .iter()
                        .enumerate()
                        .filter_map(|(i, m)| match m.seen_by(reader) {
                            Held::Present => Some((format!("m{i}"), false)),
                            Held::Gone => Some((format!("m{i}"), true)),
                            Held::Absent => None,
                        })
                        .collect();
                    want.sort();
                    assert_eq!(whole, want, "reader {reader:?}: whole feed");
                    let live: Vec<String> = model
                        .iter()
                        .enumerate()
                        .filter(|(_, m)| m.seen_by(reader) == Held::Present && !m.deleted)
                        .map(|(i, _)| format!("m{i}"))
                        .collect();
                    assert_eq!(listed(&handle).await, (live.clone(), live.len() as u64));
                    let readable = handle.get(&id, Default::default()).await.is_ok();
                    assert_eq!(readable, after == Held::Present && !model[d].deleted);
                }
            }
        });
    });
}

/// `_access` entries are any JSON strings: a name or role holding U+0000
/// or U+0001 is matched exactly, never by a name that only looks alike.
pub async fn names_and_roles_with_nul_are_matched_exactly(backend: &dyn Backend) {
    let t = TempStore::new(backend);
    let db = access_db(&t, "nul").await;
    put(&db, json!({"_id": "n\u{0}1", "_access": ["al\u{0}ice"]})).await;
    put(
        &db,
        json!({"_id": "n2", "_access": ["al\u{1}ice", "\u{0}"]}),
    )
    .await;
    put(&db, json!({"_id": "n3", "_access": ["alice"]})).await;

    for (principals, ids) in [
        (who(&["al\u{0}ice"]), who(&["n\u{0}1"])),
        (who(&["al\u{1}ice"]), who(&["n2"])),
        (who(&["\u{0}"]), who(&["n2"])),
        (who(&["alice"]), who(&["n3"])),
        (who(&["al", "\u{1}", "al\u{0}"]), Vec::new()),
        (
            who(&["al\u{0}ice", "\u{0}", "alice"]),
            who(&["n\u{0}1", "n2", "n3"]),
        ),
    ] {
        let reader = db.for_reader(principals.clone());
        let (listed_ids, total) = listed(&reader).await;
        assert_eq!(
            (listed_ids, total),
            (ids.clone(), ids.len() as u64),
            "{principals:?}"
        );
        let fed: Vec<String> = ids_in_feed(&reader, 0)
            .await
            .into_iter()
            .map(|(id, _)| id)
            .collect();
        assert_eq!(fed, ids, "{principals:?}");
        for id in &ids {
            assert!(reader.get(id, Default::default()).await.is_ok(), "{id:?}");
        }
    }
    let reader = db.for_reader(who(&["al\u{0}ice"]));
    assert_eq!(
        reader.visibility("n\u{0}1").await.unwrap(),
        Visibility::Readable
    );
    assert_eq!(reader.visibility("n2").await.unwrap(), Visibility::Hidden);
    // Losing the name hides the document from it, and only from it.
    let r = put(&db, json!({"_id": "n\u{0}1", "_rev": db.get("n\u{0}1", Default::default()).await.unwrap().to_value().unwrap()["_rev"], "_access": ["alice"]})).await;
    assert!(r.starts_with("2-"));
    let lost = db.for_reader(who(&["al\u{0}ice"]));
    assert_eq!(listed(&lost).await, (Vec::new(), 0));
    assert_eq!(ids_in_feed(&lost, 0).await, [("n\u{0}1".to_string(), true)]);
    assert_eq!(
        listed(&db.for_reader(who(&["alice"]))).await,
        (who(&["n\u{0}1", "n3"]), 2)
    );
}

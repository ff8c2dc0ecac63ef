//! Purging (`POST /db/_purge`): revisions taken out of documents as if
//! they had never been written, with CouchDB 3.5's bookkeeping.
//!
//! A purge request runs as one write on the writer thread (one
//! transaction). For each document it removes the named leaves and the
//! branches only they used (`RevTree::purge_leaves`) with their bodies;
//! attachment bytes only those revisions used become garbage for
//! compaction. A document left with no leaf is deleted outright: it is gone
//! from every read, the changes feed included. One that keeps leaves moves
//! to the end of the changes feed, the update sequence advancing once per
//! remaining leaf as CouchDB relabels each of them; a request that moved no
//! document still advances it by one (CouchDB does, so indexers notice).
//! Every document of the request, purged or not, gets a purge info at the
//! next purge sequence; infos older than `purged_infos_limit` are dropped.

use revtree::{RevId, RevTree};

use crate::backend::{PurgeInfoRow, ReadRows, WriteRows};
use crate::writer::WriteCtx;
use crate::{Database, StoreError};

/// CouchDB's default `purged_infos_limit`: purge infos kept per database.
pub const DEFAULT_PURGED_INFOS_LIMIT: u64 = 1000;

/// The `db_meta` key of `purged_infos_limit`.
const LIMIT_KEY: &str = "purged_infos_limit";

/// One document of a purge request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PurgeRequest {
    pub id: String,
    /// The revisions to purge; only the document's leaves among them are.
    pub revs: Vec<RevId>,
    /// Every revision the request named, as its purge info records them
    /// (CouchDB records even revisions no tree can hold, such as `0-x`).
    pub recorded: Vec<String>,
}

/// What a purge did to one document, in request order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PurgeResult {
    pub id: String,
    /// The leaves purged (position, then hash order); empty when none of
    /// the revisions was a leaf, or the document does not exist.
    pub purged: Vec<RevId>,
}

/// One purge info: a document of a purge request, at its purge sequence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PurgeInfo {
    pub purge_seq: u64,
    pub uuid: String,
    pub id: String,
    pub revs: Vec<String>,
}

impl Database {
    /// Purges the given revisions, all documents in one transaction. An
    /// empty request changes nothing (no purge sequence is spent).
    pub async fn purge(&self, requests: Vec<PurgeRequest>) -> Result<Vec<PurgeResult>, StoreError> {
        if requests.is_empty() {
            return Ok(Vec::new());
        }
        if self.is_partitioned() {
            check_partitioned_ids(&requests)?;
        }
        self.write(requests.len(), move |ctx| purge_in_tx(ctx, requests))
            .await
    }

    /// How many purge infos the database keeps (`_purged_infos_limit`).
    pub async fn purged_infos_limit(&self) -> Result<u64, StoreError> {
        self.read(|conn| Ok(purge_limit(ReadRows::meta(conn, LIMIT_KEY)?)))
            .await
    }

    /// Sets `_purged_infos_limit` (at least 1); older infos go at once.
    pub async fn set_purged_infos_limit(&self, limit: u64) -> Result<(), StoreError> {
        if limit == 0 {
            return Err(StoreError::bad_request(
                "`purged_infos_limit` must be positive integer",
            ));
        }
        self.write(1, move |ctx| {
            ctx.rows.set_meta(LIMIT_KEY, &limit.to_string())?;
            trim_infos(ctx.rows, ctx.state.purge_seq, limit)
        })
        .await
    }

    /// The purge infos kept, oldest first.
    pub async fn purge_infos(&self) -> Result<Vec<PurgeInfo>, StoreError> {
        self.read(|conn| {
            let rows: &dyn ReadRows = conn;
            let mut infos = Vec::new();
            for row in rows.purge_infos()? {
                let revs = serde_json::from_str(&row.revs).map_err(|e| StoreError::Corrupt {
                    db: String::new(),
                    detail: format!("purge info {}: {e}", row.purge_seq),
                })?;
                infos.push(PurgeInfo {
                    purge_seq: row.purge_seq,
                    uuid: row.uuid,
                    id: row.id,
                    revs,
                });
            }
            Ok(infos)
        })
        .await
    }
}

/// The purges after a purge sequence, as an index needs them to drop the
/// rows of purged documents (which leave no trace in the changes feed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PurgedSince {
    /// The database's purge sequence.
    pub purge_seq: u64,
    /// Documents purged since then that no longer exist. Those that still
    /// do moved to the end of the changes feed when purged.
    pub gone: Vec<String>,
    /// False when infos since then were dropped (`purged_infos_limit`):
    /// what was purged is no longer known.
    pub complete: bool,
}

impl Database {
    /// What was purged after purge sequence `since`, read at one moment.
    pub async fn purged_since(&self, since: u64) -> Result<PurgedSince, StoreError> {
        self.read(move |conn| {
            let rows: &dyn ReadRows = conn;
            let purge_seq = rows.counts()?.purge_seq;
            if purge_seq <= since {
                return Ok(PurgedSince {
                    purge_seq,
                    gone: Vec::new(),
                    complete: true,
                });
            }
            let newer: Vec<PurgeInfoRow> = rows
                .purge_infos()?
                .into_iter()
                .filter(|info| info.purge_seq > since)
                .collect();
            let complete = newer.first().is_some_and(|i| i.purge_seq == since + 1);
            let mut gone = Vec::new();
            let mut seen = std::collections::HashSet::new();
            for info in newer {
                if seen.insert(info.id.clone()) && rows.doc_row(&info.id)?.is_none() {
                    gone.push(info.id);
                }
            }
            Ok(PurgedSince {
                purge_seq,
                gone,
                complete,
            })
        })
        .await
    }
}

/// In a partitioned database, CouchDB purges only `partition:id` ids, or
/// ids starting with `_` (a looser rule than a write's: `:x` passes).
fn check_partitioned_ids(requests: &[PurgeRequest]) -> Result<(), StoreError> {
    if requests
        .iter()
        .any(|r| !r.id.starts_with('_') && !r.id.contains(':'))
    {
        return Err(StoreError::Invalid {
            error: crate::ErrorKind::IllegalDocId,
            reason: "Doc id must be of form partition:id".into(),
        });
    }
    Ok(())
}

/// `_purged_infos_limit` as the metadata keeps it.
fn purge_limit(meta: Option<String>) -> u64 {
    meta.and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_PURGED_INFOS_LIMIT)
}

/// Keeps the newest `limit` purge infos.
fn trim_infos(rows: &dyn WriteRows, purge_seq: u64, limit: u64) -> Result<(), StoreError> {
    let oldest_dropped = purge_seq.saturating_sub(limit);
    if oldest_dropped > 0 {
        rows.drop_purge_infos_through(oldest_dropped)?;
    }
    Ok(())
}

fn purge_in_tx(
    ctx: &mut WriteCtx<'_>,
    requests: Vec<PurgeRequest>,
) -> Result<Vec<PurgeResult>, StoreError> {
    let update_seq_before = ctx.state.update_seq;
    let mut results = Vec::with_capacity(requests.len());
    for request in requests {
        let purged = purge_doc(ctx, &request.id, &request.revs)?;
        ctx.state.purge_seq += 1;
        let revs = serde_json::to_string(&request.recorded)
            .map_err(|e| StoreError::CommitFailed(format!("purge info: {e}")))?;
        ctx.rows.record_purge(&PurgeInfoRow {
            purge_seq: ctx.state.purge_seq,
            uuid: uuid::Uuid::new_v4().simple().to_string(),
            id: request.id.clone(),
            revs,
        })?;
        results.push(PurgeResult {
            id: request.id,
            purged,
        });
    }
    if ctx.state.update_seq == update_seq_before {
        ctx.state.update_seq += 1;
    }
    let limit = purge_limit(ctx.rows.meta(LIMIT_KEY)?);
    trim_infos(ctx.rows, ctx.state.purge_seq, limit)?;
    Ok(results)
}

/// Purges the leaves of one document among `revs`; returns those purged.
fn purge_doc(ctx: &mut WriteCtx<'_>, id: &str, revs: &[RevId]) -> Result<Vec<RevId>, StoreError> {
    let Some(stored) = ctx.rows.load_doc(id)? else {
        return Ok(Vec::new());
    };
    let key = stored.key;
    let mut tree: RevTree = stored.tree;
    let outcome = tree.purge_leaves(revs);
    if outcome.purged.is_empty() {
        return Ok(Vec::new());
    }
    let state = &mut *ctx.state;
    if id.starts_with("_design/") {
        state.design_changed = true;
    }
    match stored.live_body_len {
        Some(len) => {
            state.doc_count -= 1;
            state.external_size -= len;
        }
        None => state.doc_del_count -= 1,
    }
    if tree.winner().is_none() {
        // Nothing left: the document never existed.
        ctx.rows.delete_doc(key)?;
        return Ok(outcome.purged);
    }
    for rev in &outcome.removed {
        ctx.rows.drop_revision(key, rev)?;
    }
    // CouchDB gives each remaining leaf a new sequence; the document sits
    // at the last of them.
    let advance = tree.leaves().len() as u64;
    crate::update::record_winner(ctx, key, id, &tree, None, advance, false)?;
    Ok(outcome.purged)
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use serde_json::json;

    use super::*;
    use crate::body::BodyLen;
    use crate::{AllDocsQuery, ChangesQuery, DocInput, GetOptions, StoreOptions};
    use rusqlite::{Connection, params};

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("recliner-purge-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir.join("db.sqlite")
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

    fn stored_revs(db: &Database, id: &str) -> Vec<String> {
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
        let db = Database::create("t", &scratch("branch"), StoreOptions::default()).unwrap();
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
        let db = Database::create("t", &scratch("whole"), StoreOptions::default()).unwrap();
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
    async fn purge_infos_are_kept_up_to_the_limit_and_survive_a_reopen() {
        let path = scratch("infos");
        let db = Database::create("t", &path, StoreOptions::default()).unwrap();
        assert_eq!(
            db.purged_infos_limit().await.unwrap(),
            DEFAULT_PURGED_INFOS_LIMIT
        );
        assert!(db.purge(Vec::new()).await.unwrap().is_empty());
        assert_eq!(db.info().await.unwrap().purge_seq, 0);
        for i in 0..5 {
            let mut req = request(&format!("d{i}"), &["1-a"]);
            req.recorded.push("0-x".into());
            db.purge(vec![req]).await.unwrap();
        }
        let infos = db.purge_infos().await.unwrap();
        assert_eq!(infos.len(), 5);
        assert_eq!((infos[0].purge_seq, infos[0].id.as_str()), (1, "d0"));
        assert_eq!(infos[0].revs, ["1-a", "0-x"]);
        assert_eq!(infos[0].uuid.len(), 32);
        assert!(db.set_purged_infos_limit(0).await.is_err());
        db.set_purged_infos_limit(2).await.unwrap();
        let seqs: Vec<u64> = db
            .purge_infos()
            .await
            .unwrap()
            .iter()
            .map(|i| i.purge_seq)
            .collect();
        assert_eq!(seqs, [4, 5]);
        db.purge(vec![request("d5", &["1-a"])]).await.unwrap();
        db.close(false);

        let db = Database::open("t", &path, StoreOptions::default()).unwrap();
        assert_eq!(db.purged_infos_limit().await.unwrap(), 2);
        let seqs: Vec<u64> = db
            .purge_infos()
            .await
            .unwrap()
            .iter()
            .map(|i| i.purge_seq)
            .collect();
        assert_eq!(seqs, [5, 6]);
        assert_eq!(db.info().await.unwrap().purge_seq, 6);
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn attachments_only_purged_revisions_used_are_compacted_away() {
        let db = Database::create("t", &scratch("atts"), StoreOptions::default()).unwrap();
        let with_att = |id: &str, bytes: &[u8]| {
            let mut doc = DocInput::new(id, serde_json::Map::new());
            doc.attachments.push((
                "a.bin".into(),
                crate::AttachmentInput::Inline {
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
        let blobs = |db: &Database| {
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
        let path = scratch("migrate");
        let db = Database::create("t", &path, StoreOptions::default()).unwrap();
        db.put_doc(DocInput::new("a", serde_json::Map::new()), true)
            .await
            .unwrap();
        db.close(false);
        {
            let conn = Connection::open(&path).unwrap();
            conn.execute_batch("DROP TABLE purge_infos; PRAGMA user_version = 1;")
                .unwrap();
        }
        let db = Database::open("t", &path, StoreOptions::default()).unwrap();
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
        assert_eq!(version, crate::sqlite::schema::SCHEMA_VERSION);
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
    fn check_consistent(db: &Database) {
        db.read_sqlite_blocking(|conn| {
            let state = crate::sqlite::session::load_state(conn)?;
            let mut stmt = conn
                .prepare("SELECT doc_key, id, seq, winner, deleted, winner_row, tree FROM docs")?;
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

    fn leaves_of(db: &Database, id: &str) -> Vec<RevId> {
        let id = id.to_string();
        db.read_sqlite_blocking(move |conn| {
            Ok(crate::backend::ReadRows::doc_row(conn, &id)?
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
                let path = scratch(&format!("prop-{}", uuid::Uuid::new_v4().simple()));
                let db = Database::create("t", &path, StoreOptions::default()).unwrap();
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
                db.close(true);
                let _ = std::fs::remove_dir_all(path.parent().unwrap());
            });
        }
    }
}

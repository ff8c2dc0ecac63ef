//! Apache CouchDB 3.5's own replicator against Recliner, and Recliner's
//! replicator against CouchDB, each followed by a full comparison of the two
//! databases (leaves, winners, `_revisions` histories, bodies, attachment
//! digests and bytes, deletions). Needs `COUCHDB_URL` (set by
//! `cargo xtask test`); skipped without it.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::time::Duration;

use recliner_tests::content::{
    assert_nothing_new, check_copy, created, edit_more, fill, replicate, seeded_bytes,
};
use recliner_tests::couchdb::{couchdb, unique_db};
use recliner_tests::{Client, TempDir, TestServer, compare_dbs, eventually_within, percent_encode};
use serde_json::{Value, json};

/// The checkpoint documents (`_local/<replication id>`) of `db`.
async fn checkpoints(c: &Client, db: &str) -> Vec<Value> {
    let rows = c.get(&format!("/{db}/_local_docs?include_docs=true")).await;
    assert_eq!(rows.status, 200, "{}", rows.text);
    rows.json()["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row["doc"].clone())
        .filter(|doc| doc.get("history").is_some())
        .collect()
}

/// A checkpoint's last session, which must be the replication's.
fn assert_checkpoint_of(checkpoints: &[Value], log: &Value, side: &str) {
    let session = log["session_id"].as_str().unwrap();
    assert!(
        checkpoints
            .iter()
            .any(|doc| doc["session_id"] == session || doc["history"][0]["session_id"] == session),
        "the {side} holds a checkpoint of session {session}: {checkpoints:?}"
    );
}

#[tokio::test]
async fn couchdbs_replicator_pulls_everything_from_recliner_and_pushes_changes_back() {
    let Some(couch) = couchdb("couchdbs_replicator_pulls_everything_from_recliner") else {
        return;
    };
    let data = TempDir::new("couch-pull");
    let server = TestServer::start(data.path(), &[]);
    let (r, c) = (Client::new(&server), couch.client());
    let mut blobs = fill(&r, "data").await;
    let copy = unique_db("from-recliner");

    // CouchDB pulls from Recliner.
    let pull = json!({"source": server.url("/data"), "target": copy, "create_target": true});
    let log = replicate(&c, pull.clone()).await;
    assert_eq!(log["history"][0]["doc_write_failures"], 0, "{log}");
    check_copy(&r, "data", &c, &copy, "_local/x", &blobs).await;
    compare_dbs(&r, "data", &c, &copy).await;
    assert_checkpoint_of(&checkpoints(&r, "data").await, &log, "source (Recliner)");
    assert_nothing_new(&c, pull.clone()).await;

    // Edits on CouchDB's side, pushed to Recliner by CouchDB.
    edit_more(&c, &copy, &mut blobs).await;
    let push = json!({"source": copy, "target": server.url("/data")});
    let log = replicate(&c, push.clone()).await;
    assert_eq!(log["history"][0]["doc_write_failures"], 0, "{log}");
    assert_eq!(
        log["history"][0]["docs_written"], 6,
        "exactly the six new revisions travel: {log}"
    );
    check_copy(&c, &copy, &r, "data", "_local/y", &blobs).await;
    compare_dbs(&r, "data", &c, &copy).await;
    assert_checkpoint_of(&checkpoints(&r, "data").await, &log, "target (Recliner)");
    assert_nothing_new(&c, push).await;

    // The pull again: its checkpoint on Recliner is updated, not refused.
    let again = replicate(&c, pull).await;
    assert_eq!(again["ok"], true, "{again}");
    compare_dbs(&r, "data", &c, &copy).await;
    assert_checkpoint_of(&checkpoints(&r, "data").await, &again, "source (Recliner)");
    c.delete(&format!("/{copy}")).await;
}

#[tokio::test]
async fn recliners_replicator_pushes_everything_to_couchdb_and_pulls_changes_back() {
    let Some(couch) = couchdb("recliners_replicator_pushes_everything_to_couchdb") else {
        return;
    };
    let data = TempDir::new("couch-push");
    let server = TestServer::start(data.path(), &[]);
    let (r, c) = (Client::new(&server), couch.client());
    let mut blobs = fill(&r, "data").await;
    let copy = unique_db("to-couchdb");

    let push = json!({"source": "data", "target": couch.db_url(&copy), "create_target": true});
    let log = replicate(&r, push.clone()).await;
    assert_eq!(log["history"][0]["doc_write_failures"], 0, "{log}");
    assert_eq!(
        log["history"][0]["docs_written"], 40,
        "every leaf revision is written: {log}"
    );
    check_copy(&r, "data", &c, &copy, "_local/x", &blobs).await;
    compare_dbs(&r, "data", &c, &copy).await;
    assert_checkpoint_of(&checkpoints(&c, &copy).await, &log, "target (CouchDB)");
    assert_nothing_new(&r, push).await;

    edit_more(&c, &copy, &mut blobs).await;
    let pull = json!({"source": couch.db_url(&copy), "target": "data"});
    let log = replicate(&r, pull.clone()).await;
    assert_eq!(log["history"][0]["doc_write_failures"], 0, "{log}");
    assert_eq!(log["history"][0]["docs_written"], 6, "{log}");
    check_copy(&c, &copy, &r, "data", "_local/y", &blobs).await;
    compare_dbs(&r, "data", &c, &copy).await;
    assert_checkpoint_of(&checkpoints(&c, &copy).await, &log, "source (CouchDB)");
    assert_nothing_new(&r, pull).await;
    c.delete(&format!("/{copy}")).await;
}

/// Every document of `db` in a form two servers can be compared by: from
/// `_changes?style=all_docs`, each id with its leaf revisions (sorted) and
/// whether the winner is deleted; from `_all_docs`, each live winner's body
/// with `_conflicts` and `_deleted_conflicts`. Two requests, whatever the
/// size of the database.
async fn summary(c: &Client, db: &str) -> (Vec<(String, Vec<String>, bool)>, Vec<Value>) {
    let feed = c.get(&format!("/{db}/_changes?style=all_docs")).await;
    assert_eq!(feed.status, 200, "{}", feed.text);
    let mut leaves: Vec<(String, Vec<String>, bool)> = feed.json()["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| {
            let mut revs: Vec<String> = row["changes"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c["rev"].as_str().unwrap().to_string())
                .collect();
            revs.sort();
            let deleted = row["deleted"] == true;
            (row["id"].as_str().unwrap().to_string(), revs, deleted)
        })
        .collect();
    leaves.sort();
    let all = c
        .get(&format!(
            "/{db}/_all_docs?include_docs=true&conflicts=true&deleted_conflicts=true"
        ))
        .await;
    assert_eq!(all.status, 200, "{}", all.text);
    let docs = all.json()["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| {
            let mut doc = row["doc"].clone();
            for list in ["_conflicts", "_deleted_conflicts"] {
                if let Some(revs) = doc.get_mut(list).and_then(Value::as_array_mut) {
                    revs.sort_by(|a, b| a.as_str().cmp(&b.as_str()));
                }
            }
            doc
        })
        .collect();
    (leaves, docs)
}

async fn assert_same(r: &Client, r_db: &str, c: &Client, c_db: &str) {
    let (ours, theirs) = (summary(r, r_db).await, summary(c, c_db).await);
    assert_eq!(ours.0.len(), theirs.0.len(), "document counts");
    for (a, b) in ours.0.iter().zip(&theirs.0) {
        assert_eq!(a, b, "leaves of {}", a.0);
    }
    for (a, b) in ours.1.iter().zip(&theirs.1) {
        assert_eq!(a, b, "winner of {}", a["_id"]);
    }
}

/// Writes `docs` with `_bulk_docs`, checking every one was saved.
async fn bulk(c: &Client, db: &str, docs: Vec<Value>) -> Vec<Value> {
    let reply = c
        .post(&format!("/{db}/_bulk_docs"), json!({"docs": docs}))
        .await;
    assert_eq!(reply.status, 201, "{}", reply.text);
    let results = reply.json().as_array().unwrap().clone();
    assert!(results.iter().all(|r| r["ok"] == true), "{}", reply.text);
    results
}

/// The current winners of `ids`, with their revisions.
async fn winners(c: &Client, db: &str, ids: impl Iterator<Item = String>) -> Vec<Value> {
    let keys: Vec<String> = ids.collect();
    let reply = c
        .post(
            &format!("/{db}/_all_docs?include_docs=true"),
            json!({"keys": keys}),
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    reply.json()["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row["doc"].clone())
        .collect()
}

/// 10,000 documents pulled by CouchDB; then edits, deletions and
/// concurrent edits of the same documents on both sides, replicated both
/// ways by CouchDB (every later run updates the checkpoints it wrote on
/// Recliner); then each side resolves half of the conflicts and a last
/// round leaves both databases equal and free of conflicts.
#[tokio::test]
async fn ten_thousand_documents_edits_on_both_sides_and_conflicts_resolved_on_the_other() {
    let Some(couch) = couchdb("ten_thousand_documents_edits_on_both_sides") else {
        return;
    };
    let data = TempDir::new("couch-10k");
    let server = TestServer::start(data.path(), &[]);
    let (r, c) = (Client::new(&server), couch.client());
    created(&r.put("/big", json!({})).await, "create big");
    let id = |n: usize| format!("doc{n:05}");
    for batch in 0..10 {
        let docs = (batch * 1000..(batch + 1) * 1000)
            .map(|n| json!({"_id": id(n), "n": n, "text": format!("document {n}")}))
            .collect();
        bulk(&r, "big", docs).await;
    }
    let copy = unique_db("big");
    let pull = json!({"source": server.url("/big"), "target": copy, "create_target": true});
    let push = json!({"source": copy, "target": server.url("/big")});
    let log = replicate(&c, pull.clone()).await;
    assert_eq!(log["history"][0]["docs_written"], 10_000, "{log}");
    assert_same(&r, "big", &c, &copy).await;

    // Edits on Recliner (0..100), deletions on Recliner (100..150), edits
    // on CouchDB (200..300), and the same documents edited on both sides
    // (300..340).
    let edit = |docs: Vec<Value>, side: &'static str| -> Vec<Value> {
        docs.into_iter()
            .map(|mut d| {
                d["edited_on"] = json!(side);
                d
            })
            .collect()
    };
    let on_r = winners(&r, "big", (0..100).chain(300..340).map(id)).await;
    bulk(&r, "big", edit(on_r, "recliner")).await;
    let gone = winners(&r, "big", (100..150).map(id)).await;
    let deletions = gone
        .into_iter()
        .map(|d| json!({"_id": d["_id"], "_rev": d["_rev"], "_deleted": true}))
        .collect();
    bulk(&r, "big", deletions).await;
    let on_c = winners(&c, &copy, (200..340).map(id)).await;
    bulk(&c, &copy, edit(on_c, "couchdb")).await;

    // Both ways: the pull's second run updates its checkpoint on Recliner.
    let log = replicate(&c, push.clone()).await;
    assert_eq!(log["history"][0]["docs_written"], 140, "{log}");
    let log = replicate(&c, pull.clone()).await;
    assert_eq!(log["history"][0]["doc_write_failures"], 0, "{log}");
    assert_same(&r, "big", &c, &copy).await;
    let conflicted = r
        .get(&format!("/big/{}?conflicts=true", id(300)))
        .await
        .json();
    assert_eq!(
        conflicted["_conflicts"].as_array().map(Vec::len),
        Some(1),
        "{conflicted}"
    );

    // Each side resolves half of the conflicts by deleting the losing leaf.
    for (client, db, range) in [(&r, "big", 300..320), (&c, copy.as_str(), 320..340)] {
        let docs = client
            .post(
                &format!("/{db}/_all_docs?include_docs=true&conflicts=true"),
                json!({"keys": range.map(id).collect::<Vec<_>>()}),
            )
            .await
            .json();
        let losers = docs["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|row| {
                let doc = &row["doc"];
                json!({"_id": doc["_id"], "_rev": doc["_conflicts"][0], "_deleted": true})
            })
            .collect();
        bulk(client, db, losers).await;
    }
    replicate(&c, push.clone()).await;
    replicate(&c, pull.clone()).await;
    assert_same(&r, "big", &c, &copy).await;
    let left = r
        .get("/big/_all_docs?include_docs=true&conflicts=true")
        .await
        .json();
    let still = left["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|row| row["doc"].get("_conflicts").is_some())
        .count();
    assert_eq!(still, 0, "every conflict is resolved on both sides");
    assert_eq!(
        left["rows"].as_array().unwrap().len(),
        9_950,
        "10,000 documents less the 50 deleted"
    );
    assert_nothing_new(&c, push).await;
    assert_nothing_new(&c, pull).await;
    c.delete(&format!("/{copy}")).await;
}

/// The attachments of [`attachments_both_ways`]: binary, compressible text
/// (CouchDB stores and sends it gzip-encoded), 10 MiB, many small ones, and
/// a design document with one (design documents travel one at a time).
fn attachment_set() -> Vec<(String, &'static str, &'static str, Vec<u8>)> {
    let text: Vec<u8> = (0..200_000)
        .map(|i| b"the quick brown fox jumps over the lazy dog\n"[i % 44])
        .collect();
    let mut set = vec![
        (
            "bin".to_string(),
            "a.bin",
            "application/octet-stream",
            seeded_bytes(1, 64 << 10),
        ),
        ("text".to_string(), "a.txt", "text/plain", text),
        (
            "big".to_string(),
            "big.bin",
            "application/octet-stream",
            seeded_bytes(2, 10 << 20),
        ),
        (
            "_design/app".to_string(),
            "index.html",
            "text/html",
            b"<html><body>hello</body></html>".repeat(100),
        ),
    ];
    for i in 0..50 {
        set.push((
            format!("small{i:02}"),
            "s.txt",
            "text/plain",
            format!("small attachment number {i}\n")
                .repeat(4)
                .into_bytes(),
        ));
    }
    set
}

async fn write_attachments(c: &Client, db: &str) {
    created(&c.put(&format!("/{db}"), json!({})).await, "create the db");
    for (doc, name, content_type, bytes) in attachment_set() {
        let path = format!("/{db}/{}/{name}", percent_encode(&doc));
        let reply = c.send_bytes("PUT", &path, bytes, content_type).await;
        created(&reply, &path);
    }
}

/// Every attachment of the set reads back with its bytes and type, and the
/// two databases agree in everything, digests too: both store the text
/// types compressed into the same bytes.
async fn check_attachments(src: &Client, src_db: &str, dst: &Client, dst_db: &str) {
    compare_dbs(src, src_db, dst, dst_db).await;
    for (doc, name, content_type, bytes) in attachment_set() {
        let path = format!("/{dst_db}/{}/{name}", percent_encode(&doc));
        let response = dst.http().get(dst.url(&path)).send().await.unwrap();
        assert_eq!(response.status(), 200, "{path}");
        assert_eq!(
            response.headers()["content-type"].to_str().unwrap(),
            content_type,
            "{path}"
        );
        let got = response.bytes().await.unwrap();
        assert!(
            got[..] == bytes[..],
            "{path}: {} bytes, want {}",
            got.len(),
            bytes.len()
        );
    }
}

#[tokio::test]
async fn attachments_travel_both_ways_with_both_replicators() {
    let Some(couch) = couchdb("attachments_travel_both_ways_with_both_replicators") else {
        return;
    };
    let data = TempDir::new("couch-atts");
    let server = TestServer::start(data.path(), &[]);
    let (r, c) = (Client::new(&server), couch.client());
    let on_couch = unique_db("atts");
    write_attachments(&r, "mine").await;
    write_attachments(&c, &on_couch).await;

    // CouchDB's replicator: pull from Recliner, push to Recliner.
    let pulled = unique_db("atts-pulled");
    replicate(
        &c,
        json!({"source": server.url("/mine"), "target": pulled, "create_target": true}),
    )
    .await;
    check_attachments(&r, "mine", &c, &pulled).await;
    replicate(
        &c,
        json!({"source": on_couch, "target": server.url("/pushed"), "create_target": true}),
    )
    .await;
    check_attachments(&c, &on_couch, &r, "pushed").await;

    // Recliner's replicator: pull from CouchDB, push to CouchDB.
    replicate(
        &r,
        json!({"source": couch.db_url(&on_couch), "target": "pulled", "create_target": true}),
    )
    .await;
    check_attachments(&c, &on_couch, &r, "pulled").await;
    let pushed = unique_db("atts-pushed");
    replicate(
        &r,
        json!({"source": "mine", "target": couch.db_url(&pushed), "create_target": true}),
    )
    .await;
    check_attachments(&r, "mine", &c, &pushed).await;
    for db in [on_couch, pulled, pushed] {
        c.delete(&format!("/{db}")).await;
    }
}

/// The ids of `db`'s documents, sorted.
async fn ids(c: &Client, db: &str) -> Vec<String> {
    let all = c.get(&format!("/{db}/_all_docs")).await;
    assert_eq!(all.status, 200, "{}", all.text);
    all.json()["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row["id"].as_str().unwrap().to_string())
        .collect()
}

/// A database of twenty documents, `d00`..`d19`, with `n` and `even`; the
/// `update_seq` after the first ten.
async fn twenty(c: &Client, db: &str) -> Value {
    created(&c.put(&format!("/{db}"), json!({})).await, "create the db");
    let ddoc = json!({
        "filters": {"every": "function (doc, req) { return doc.n % Number(req.query.m) === 0; }"},
        "views": {"small": {"map": "function (doc) { if (doc.n < 5) { emit(doc.n, null); } }"}}
    });
    created(
        &c.put(&format!("/{db}/_design/app"), ddoc).await,
        "the design document",
    );
    let doc = |n: usize| json!({"_id": format!("d{n:02}"), "n": n, "even": n.is_multiple_of(2)});
    bulk(c, db, (0..10).map(doc).collect()).await;
    let seq = c.get(&format!("/{db}")).await.json()["update_seq"].clone();
    bulk(c, db, (10..20).map(doc).collect()).await;
    seq
}

/// `doc_ids`, `selector`, filter function (with `query_params`), `_view`
/// and `since_seq` replications, run by CouchDB from Recliner and by
/// Recliner from CouchDB: each copies exactly its subset.
#[tokio::test]
async fn filtered_replications_copy_exactly_their_subset_both_ways() {
    let Some(couch) = couchdb("filtered_replications_copy_exactly_their_subset") else {
        return;
    };
    let data = TempDir::new("couch-filtered");
    let server = TestServer::start(data.path(), &[]);
    let (r, c) = (Client::new(&server), couch.client());
    let on_couch = unique_db("twenty");
    let seq_r = twenty(&r, "twenty").await;
    let seq_c = twenty(&c, &on_couch).await;
    let names = |ns: &[usize]| -> Vec<String> { ns.iter().map(|n| format!("d{n:02}")).collect() };
    let evens: Vec<usize> = (0..20).step_by(2).collect();
    let later: Vec<usize> = (10..20).collect();
    let cases = [
        (
            json!({"doc_ids": ["d03", "d17", "absent"]}),
            names(&[3, 17]),
        ),
        (json!({"selector": {"even": true}}), names(&evens)),
        // Filter functions, run by the source with the query parameters.
        (
            json!({"filter": "app/every", "query_params": {"m": "5"}}),
            names(&[0, 5, 10, 15]),
        ),
        (
            json!({"filter": "_view", "query_params": {"view": "app/small"}}),
            names(&[0, 1, 2, 3, 4]),
        ),
    ];
    let mut made = Vec::new();
    for (filter, want) in cases
        .iter()
        .cloned()
        .chain([(json!({"since_seq": seq_r}), names(&later))])
    {
        let target = unique_db("subset");
        let mut spec =
            json!({"source": server.url("/twenty"), "target": target, "create_target": true});
        spec.as_object_mut()
            .unwrap()
            .extend(filter.as_object().unwrap().clone());
        replicate(&c, spec.clone()).await;
        assert_eq!(
            ids(&c, &target).await,
            want,
            "CouchDB pulling with {filter}"
        );
        made.push(target);
    }
    for (k, (filter, want)) in cases
        .iter()
        .cloned()
        .chain([(json!({"since_seq": seq_c}), names(&later))])
        .enumerate()
    {
        let target = format!("subset{k}");
        let mut spec =
            json!({"source": couch.db_url(&on_couch), "target": target, "create_target": true});
        spec.as_object_mut()
            .unwrap()
            .extend(filter.as_object().unwrap().clone());
        replicate(&r, spec).await;
        assert_eq!(
            ids(&r, &target).await,
            want,
            "Recliner pulling with {filter}"
        );
    }
    for db in made.into_iter().chain([on_couch]) {
        c.delete(&format!("/{db}")).await;
    }
}

/// How many documents (deleted ones aside) `db` holds, or `None` while it
/// cannot be read.
async fn doc_count(c: &Client, db: &str) -> Option<u64> {
    let reply = c.http().get(c.url(&format!("/{db}"))).send().await.ok()?;
    let info: Value = reply.json().await.ok()?;
    info["doc_count"].as_u64()
}

/// Waits (up to `secs`) until `db` holds `count` documents.
async fn wait_for_count(c: &Client, db: &str, count: u64, secs: u64, what: &str) {
    let reached = eventually_within(Duration::from_secs(secs), async || {
        doc_count(c, db).await == Some(count)
    })
    .await;
    assert!(
        reached,
        "{what}: {db} holds {:?} documents, not {count}",
        doc_count(c, db).await
    );
}

/// A continuous replication each way, each run by the other server's
/// replicator from a `_replicator` document: writes on either side show up
/// on the other, and both end equal.
#[tokio::test]
async fn continuous_replicator_documents_on_both_servers_keep_them_in_sync() {
    let Some(couch) = couchdb("continuous_replicator_documents_on_both_servers") else {
        return;
    };
    let data = TempDir::new("couch-live");
    let server = TestServer::start(data.path(), &[]);
    let (r, c) = (Client::new(&server), couch.client());
    let theirs = unique_db("live");
    created(&r.put("/live", json!({})).await, "create live");
    created(
        &c.put(&format!("/{theirs}"), json!({})).await,
        "create theirs",
    );
    let job = unique_db("job");
    created(
        &c.put(
            &format!("/_replicator/{job}"),
            json!({"source": server.url("/live"), "target": couch.db_url(&theirs), "continuous": true}),
        )
        .await,
        "CouchDB's _replicator document",
    );
    created(
        &r.put(
            "/_replicator/from-couchdb",
            json!({"source": couch.db_url(&theirs), "target": "live", "continuous": true}),
        )
        .await,
        "Recliner's _replicator document",
    );
    bulk(
        &r,
        "live",
        (0..50)
            .map(|n| json!({"_id": format!("r{n:02}")}))
            .collect(),
    )
    .await;
    bulk(
        &c,
        &theirs,
        (0..50)
            .map(|n| json!({"_id": format!("c{n:02}")}))
            .collect(),
    )
    .await;
    wait_for_count(&c, &theirs, 100, 90, "CouchDB has both sides' writes").await;
    wait_for_count(&r, "live", 100, 90, "Recliner has both sides' writes").await;
    // Edits of the same documents on both sides while both jobs run.
    for (client, db, side) in [(&r, "live", "recliner"), (&c, theirs.as_str(), "couchdb")] {
        let docs = winners(client, db, (0..10).map(|n| format!("r{n:02}"))).await;
        let edited = docs
            .into_iter()
            .map(|mut d| {
                d["side"] = json!(side);
                d
            })
            .collect();
        bulk(client, db, edited).await;
    }
    let settled = eventually_within(Duration::from_secs(90), async || {
        summary(&r, "live").await == summary(&c, &theirs).await
    })
    .await;
    assert!(
        settled,
        "both databases end with the same documents and leaves"
    );
    assert_same(&r, "live", &c, &theirs).await;
    let state = c
        .get(&format!("/_scheduler/docs/_replicator/{job}"))
        .await
        .json();
    assert_eq!(state["state"], "running", "{state}");
    let rev = c.get(&format!("/_replicator/{job}")).await.json()["_rev"].clone();
    c.delete(&format!("/_replicator/{job}?rev={}", rev.as_str().unwrap()))
        .await;
    c.delete(&format!("/{theirs}")).await;
}

/// CouchDB's replicator pulls continuously from Recliner while Recliner
/// is killed with SIGKILL and restarted on the same port: the job carries
/// on from its checkpoint (which survived the kill on Recliner's side), and
/// the copy ends with every document once, nothing lost or duplicated.
#[tokio::test]
async fn couchdbs_continuous_pull_survives_recliner_being_killed_and_restarted() {
    let Some(couch) = couchdb("couchdbs_continuous_pull_survives_recliner_being_killed") else {
        return;
    };
    let data = TempDir::new("couch-kill");
    let server = TestServer::start(data.path(), &[]);
    let url = server.url("");
    let port: u16 = url.rsplit(':').next().unwrap().parse().unwrap();
    let r = Client::new(&server);
    let c = couch.client();
    created(&r.put("/src", json!({})).await, "create src");
    let doc = |n: usize| json!({"_id": format!("k{n:04}"), "n": n});
    bulk(&r, "src", (0..500).map(doc).collect()).await;
    // CouchDB's scheduler looks at crashed jobs every minute by default.
    let interval = c
        .send(
            "PUT",
            "/_node/_local/_config/replicator/interval",
            Some(json!("5000")),
            &[],
        )
        .await;
    assert_eq!(interval.status, 200, "{}", interval.text);
    let copy = unique_db("killed");
    let job = unique_db("job");
    created(
        &c.put(
            &format!("/_replicator/{job}"),
            json!({"source": server.url("/src"), "target": couch.db_url(&copy), "continuous": true, "create_target": true, "checkpoint_interval": 1000}),
        )
        .await,
        "CouchDB's _replicator document",
    );
    wait_for_count(&c, &copy, 500, 90, "the first half arrives").await;
    // A checkpoint of the first half on Recliner's side.
    let checkpointed = eventually_within(Duration::from_secs(30), async || {
        let local = r.get("/src/_local_docs?include_docs=true").await.json();
        local["rows"]
            .as_array()
            .is_some_and(|rows| !rows.is_empty())
    })
    .await;
    assert!(checkpointed, "CouchDB checkpoints on the source");
    let before = r.get("/src/_local_docs?include_docs=true").await.json()["rows"][0]["doc"].clone();

    drop(server); // SIGKILL
    let server = TestServer::start_on_port(data.path(), port, &[]);
    let r = Client::new(&server);
    let after_restart = r
        .get(&format!("/src/{}", before["_id"].as_str().unwrap()))
        .await;
    assert_eq!(
        after_restart.status, 200,
        "the checkpoint survived: {}",
        after_restart.text
    );
    bulk(&r, "src", (500..1000).map(doc).collect()).await;
    // CouchDB's job may have crashed on the dropped feed: it is retried
    // after a 30 s backoff, at the scheduler's next pass (made 5 s above).
    wait_for_count(
        &c,
        &copy,
        1000,
        180,
        "the second half arrives after the restart",
    )
    .await;
    assert_same(&r, "src", &c, &copy).await;
    let leaves = c
        .get(&format!("/{copy}/_changes?style=all_docs"))
        .await
        .json();
    assert!(
        leaves["results"]
            .as_array()
            .unwrap()
            .iter()
            .all(|row| row["changes"].as_array().unwrap().len() == 1),
        "one revision per document, nothing duplicated"
    );
    let state = c
        .get(&format!("/_scheduler/docs/_replicator/{job}"))
        .await
        .json();
    assert_eq!(state["state"], "running", "{state}");
    assert_eq!(
        state["info"]["docs_written"], 1000,
        "every document written once: {state}"
    );
    let rev = c.get(&format!("/_replicator/{job}")).await.json()["_rev"].clone();
    c.delete(&format!("/_replicator/{job}?rev={}", rev.as_str().unwrap()))
        .await;
    c.delete(&format!("/{copy}")).await;
}

/// One database, many users: CouchDB's replicator, as an admin, pulls a
/// database with per-document access from Recliner whole, `_access`
/// intact (CouchDB 3.5 keeps it as a field), and pushes it back into a new
/// one on Recliner, where the rule applies again.
#[tokio::test]
async fn couchdbs_replicator_copies_a_per_document_access_database_whole() {
    let Some(couch) = couchdb("couchdbs_replicator_copies_a_per_document_access_database") else {
        return;
    };
    let data = TempDir::new("couch-access");
    let server = TestServer::start(data.path(), &[]);
    let (r, c) = (Client::new(&server), couch.client());
    assert_eq!(r.put("/shared?access=true", json!(null)).await.status, 201);
    let docs: Vec<Value> = (0..40)
        .map(|i| json!({"_id": format!("d{i:02}"), "_access": [format!("user{}", i % 4)], "n": i}))
        .chain([json!({"_id": "admins-only", "n": -1})])
        .collect();
    bulk(&r, "shared", docs).await;
    let copy = unique_db("access-copy");
    let pull = json!({"source": server.url("/shared"), "target": copy, "create_target": true});
    let log = replicate(&c, pull).await;
    assert_eq!(log["history"][0]["doc_write_failures"], 0, "{log}");
    assert_eq!(log["history"][0]["docs_written"], 41, "{log}");
    compare_dbs(&r, "shared", &c, &copy).await;
    assert_eq!(
        c.get(&format!("/{copy}/d05")).await.json()["_access"],
        json!(["user1"])
    );
    // Back into a new database with per-document access on Recliner.
    assert_eq!(r.put("/again?access=true", json!(null)).await.status, 201);
    let push = json!({"source": copy, "target": server.url("/again")});
    let log = replicate(&c, push).await;
    assert_eq!(log["history"][0]["doc_write_failures"], 0, "{log}");
    compare_dbs(&r, "again", &c, &copy).await;
    let user1 = r
        .send("POST", "/_users", Some(json!({"_id": "org.couchdb.user:user1", "name": "user1", "password": "pw-pw-pw", "roles": [], "type": "user"})), &[])
        .await;
    assert_eq!(user1.status, 201, "{}", user1.text);
    assert_eq!(
        r.put("/again/_security", json!({"members": {"names": ["user1"]}}))
            .await
            .status,
        200
    );
    let as_user1 = Client::at(
        &server
            .plain_url
            .replacen("http://", "http://user1:pw-pw-pw@", 1),
    );
    let theirs = as_user1.get("/again/_all_docs").await.json();
    assert_eq!(theirs["total_rows"], 10, "{theirs}");
    c.delete(&format!("/{copy}")).await;
}

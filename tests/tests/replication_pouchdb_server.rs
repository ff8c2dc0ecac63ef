//! Replication with a real peer of another make: PouchDB Server 4.2 (Node.js,
//! LevelDB). Recliner's replicator, asked through `POST /_replicate`, pushes
//! every kind of content to it and pulls every kind from it: updates,
//! deletions, conflicts of several branches, design documents, attachments
//! of 0 B, 1 B, 1 MiB and 20 MiB, and a `_local` document that must stay home.
//!
//! PouchDB Server comes from `bench/node` (installed by `cargo xtask test`,
//! which names its script in `RECLINER_POUCHDB_SERVER`).

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use recliner_tests::content::{
    assert_nothing_new, check_copy, edit_more, fill, get_bytes, replicate,
};
use recliner_tests::pouchdb_server::PouchDbServer;
use recliner_tests::{Client, TempDir, TestServer, percent_encode};
use serde_json::{Value, json};

/// PouchDB Server, started and checked to be the pinned version.
async fn pouchdb_server() -> PouchDbServer {
    let server = PouchDbServer::start().await;
    let welcome = Client::at(&server.url("")).get("/").await.json();
    assert_eq!(welcome["version"], "4.2.0", "{welcome}");
    server
}

/// `recliner_tests::compare_dbs` between a database on Recliner and one on
/// PouchDB Server, which answers the same content in other shapes:
///
/// - it writes document fields in another order, so bodies are compared as
///   JSON values, never as text;
/// - `?attachments=true` leaves out `length` next to `data`, so leaves are
///   compared with stubs (`length`, `digest`, `revpos`, `content_type`) and
///   each leaf's attachments are fetched as raw bytes and compared;
/// - whenever an attachment's bytes reach it, its LevelDB adapter sets the
///   attachment's `revpos` to the position of the revision being written,
///   whatever `revpos` came with them; so on PouchDB Server's side only, a
///   `revpos` equal to its own leaf's position is taken as the one Recliner
///   has (Recliner's side must keep the `revpos` it was sent);
/// - a document whose winner is deleted answers 404 `missing` where
///   Recliner says `deleted`: only the status is compared then.
///
/// As there: the same ids in both changes feeds, and for each, the same
/// leaves (`open_revs=all`) with the same `_revisions` and bodies.
async fn compare_peer_dbs(recliner: &Client, db_r: &str, pouchdb: &Client, db_p: &str) {
    async fn ids(c: &Client, db: &str) -> Vec<String> {
        let feed = c.get(&format!("/{db}/_changes")).await.json();
        let mut ids: Vec<String> = feed["results"]
            .as_array()
            .expect("a changes feed")
            .iter()
            .map(|r| r["id"].as_str().expect("an id").to_string())
            .collect();
        ids.sort();
        ids
    }
    async fn leaves(c: &Client, db: &str, id: &str) -> Vec<Value> {
        let path = format!("/{db}/{}?open_revs=all&revs=true", percent_encode(id));
        let reply = c.get(&path).await;
        assert_eq!(reply.status, 200, "GET {path}: {}", reply.text);
        let mut leaves: Vec<Value> = reply
            .json()
            .as_array()
            .expect("open_revs answers an array")
            .iter()
            .map(|r| r["ok"].clone())
            .collect();
        assert!(
            leaves.iter().all(Value::is_object),
            "only found leaves: {}",
            reply.text
        );
        leaves.sort_by(|x, y| x["_rev"].as_str().cmp(&y["_rev"].as_str()));
        leaves
    }
    let (ids_r, ids_p) = (ids(recliner, db_r).await, ids(pouchdb, db_p).await);
    assert_eq!(ids_r, ids_p, "the same document ids in {db_r} and {db_p}");
    for id in &ids_r {
        let (lr, mut lp) = (
            leaves(recliner, db_r, id).await,
            leaves(pouchdb, db_p, id).await,
        );
        for (r, p) in lr.iter().zip(lp.iter_mut()) {
            forgive_rewritten_revpos(p, r);
        }
        assert_eq!(lr, lp, "document {id} differs between {db_r} and {db_p}");
        for leaf in &lr {
            let rev = leaf["_rev"].as_str().unwrap();
            let Some(atts) = leaf["_attachments"].as_object() else {
                continue;
            };
            for (name, stub) in atts {
                let path = |db: &str| format!("/{db}/{}/{name}?rev={rev}", percent_encode(id));
                let (status_r, bytes_r) = get_bytes(recliner, &path(db_r)).await;
                let (status_p, bytes_p) = get_bytes(pouchdb, &path(db_p)).await;
                assert_eq!((status_r, status_p), (200, 200), "{id}/{name} at {rev}");
                assert_eq!(json!(bytes_r.len()), stub["length"], "{id}/{name} at {rev}");
                assert!(
                    bytes_r == bytes_p,
                    "{id}/{name} at {rev}: different bytes in {db_r} and {db_p}"
                );
            }
        }
        let winner = |c: &Client, db: &str| {
            let path = format!("/{db}/{}", percent_encode(id));
            let c = c.clone();
            async move {
                let reply = c.get(&path).await;
                match reply.status {
                    200 => (200, reply.json()),
                    status => (status, Value::Null),
                }
            }
        };
        let (wr, mut wp) = (winner(recliner, db_r).await, winner(pouchdb, db_p).await);
        forgive_rewritten_revpos(&mut wp.1, &wr.1);
        assert_eq!(wr, wp, "winner of {id}");
    }
}

/// In PouchDB Server's revision `pouchdb`, takes an attachment `revpos`
/// equal to the revision's own position (set by PouchDB Server when the
/// bytes arrived) as the `revpos` of the same attachment in Recliner's
/// revision `recliner`.
fn forgive_rewritten_revpos(pouchdb: &mut Value, recliner: &Value) {
    let Some(pos) = pouchdb["_rev"]
        .as_str()
        .and_then(|rev| rev.split('-').next())
        .and_then(|pos| pos.parse::<u64>().ok())
    else {
        return;
    };
    let Some(atts) = pouchdb
        .get_mut("_attachments")
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    for (name, stub) in atts {
        if stub["revpos"] == json!(pos) {
            stub["revpos"] = recliner["_attachments"][name]["revpos"].clone();
        }
    }
}

#[tokio::test]
async fn recliner_replicates_with_credentials_to_a_pouchdb_server_that_checks_them() {
    let pouchdb = PouchDbServer::start_with_admin("pouchadmin", "pouch-pass").await;
    let data = TempDir::new("pouchdb-login");
    let server = TestServer::start(data.path(), &[]);
    let c = Client::new(&server);
    assert_eq!(c.put("/src", json!(null)).await.status, 201);
    for i in 0..5 {
        c.put(&format!("/src/d{i}"), json!({"i": i})).await;
    }
    let with = |password: &str| {
        pouchdb
            .url("/dst")
            .replacen("http://", &format!("http://pouchadmin:{password}@"), 1)
    };
    let push = json!({"source": "src", "target": with("pouch-pass"), "create_target": true});
    let log = replicate(&c, push).await;
    assert_eq!(log["history"][0]["docs_written"], 5, "{log}");
    let p = Client::at(with("pouch-pass").trim_end_matches("/dst"));
    assert_eq!(p.get("/dst/d3").await.json()["i"], 3);
    let refused = c
        .post(
            "/_replicate",
            json!({"source": "src", "target": with("wrong")}),
        )
        .await;
    assert_eq!(refused.status, 500, "{}", refused.text);
    assert!(!refused.text.contains("wrong"), "{}", refused.text);
}

#[tokio::test]
async fn recliner_pushes_every_kind_of_content_to_pouchdb_server() {
    let pouchdb = pouchdb_server().await;
    let data = TempDir::new("pouchdb-push");
    let server = TestServer::start(data.path(), &[]);
    let (c, p) = (Client::new(&server), Client::at(&pouchdb.url("")));
    let blobs = fill(&c, "src").await;

    let push = json!({"source": "src", "target": pouchdb.url("/dst"), "create_target": true});
    let log = replicate(&c, push.clone()).await;
    let session = &log["history"][0];
    assert_eq!(session["doc_write_failures"], 0, "{log}");
    assert_eq!(
        session["docs_written"], 40,
        "every leaf revision is written: {log}"
    );
    check_copy(&c, "src", &p, "dst", "_local/x", &blobs).await;
    assert_nothing_new(&c, push).await;
    compare_peer_dbs(&c, "src", &p, "dst").await;
}

#[tokio::test]
async fn recliner_pulls_every_kind_of_content_from_pouchdb_server_and_pushes_changes_back() {
    let pouchdb = pouchdb_server().await;
    let data = TempDir::new("pouchdb-pull");
    let server = TestServer::start(data.path(), &[]);
    let (c, p) = (Client::new(&server), Client::at(&pouchdb.url("")));
    let mut blobs = fill(&p, "src").await;

    // Both peers as URLs: PouchDB Server's, and Recliner's own.
    let pull =
        json!({"source": pouchdb.url("/src"), "target": server.url("/dst"), "create_target": true});
    let log = replicate(&c, pull.clone()).await;
    let session = &log["history"][0];
    assert_eq!(session["doc_write_failures"], 0, "{log}");
    assert_eq!(
        session["docs_written"], 40,
        "every leaf revision is written: {log}"
    );
    check_copy(&p, "src", &c, "dst", "_local/x", &blobs).await;
    compare_peer_dbs(&c, "dst", &p, "src").await;
    assert_nothing_new(&c, pull).await;

    // Changes made on Recliner go back to PouchDB Server, where only the
    // new attachment travels next to the ones it has.
    edit_more(&c, "dst", &mut blobs).await;
    let push = json!({"source": "dst", "target": pouchdb.url("/src")});
    let log = replicate(&c, push.clone()).await;
    assert_eq!(log["history"][0]["doc_write_failures"], 0, "{log}");
    assert_eq!(
        log["history"][0]["docs_written"], 6,
        "exactly the six new revisions travel back: {log}"
    );
    let leaves = p.get("/src/doc00?open_revs=all").await.json();
    assert_eq!(leaves.as_array().unwrap().len(), 2, "{leaves}");
    check_copy(&c, "dst", &p, "src", "_local/y", &blobs).await;
    assert_nothing_new(&c, push).await;
    compare_peer_dbs(&c, "dst", &p, "src").await;
}

/// A document whose attachment is stored gzip-encoded, as CouchDB's
/// replicator sends text attachments: a multipart upload with `encoding`.
async fn put_gzip_attachment(c: &Client, db: &str, id: &str, content: &[u8]) {
    use std::io::Write;
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(content).unwrap();
    let gz = encoder.finish().unwrap();
    let doc = json!({"_attachments": {"a.txt": {"follows": true, "content_type": "text/plain",
        "encoding": "gzip", "length": content.len()}}});
    let mut body = format!(
        "--B\r\nContent-Type: application/json\r\n\r\n{doc}\r\n--B\r\nContent-Type: application/octet-stream\r\n\r\n"
    )
    .into_bytes();
    body.extend_from_slice(&gz);
    body.extend_from_slice(b"\r\n--B--\r\n");
    let reply = c
        .send_bytes(
            "PUT",
            &format!("/{db}/{id}"),
            body,
            "multipart/related; boundary=\"B\"",
        )
        .await;
    assert_eq!(reply.status, 201, "{}", reply.text);
}

#[tokio::test]
async fn gzip_stored_attachments_reach_every_peer_as_their_content() {
    let pouchdb = pouchdb_server().await;
    let data = TempDir::new("gzip-peers");
    let other_data = TempDir::new("gzip-peers-other");
    let server = TestServer::start(data.path(), &[]);
    let other = TestServer::start(other_data.path(), &[]);
    let (c, p, o) = (
        Client::new(&server),
        Client::at(&pouchdb.url("")),
        Client::new(&other),
    );
    c.put("/src", json!({})).await;
    let content = "hello, compressed world\n".repeat(500);
    put_gzip_attachment(&c, "src", "g", content.as_bytes()).await;
    let stored = c.get("/src/g?att_encoding_info=true").await.json();
    assert_eq!(stored["_attachments"]["a.txt"]["encoding"], "gzip");

    // PouchDB Server does not take encoded attachments: it gets the content.
    let to_pouchdb = json!({"source": "src", "target": pouchdb.url("/dst"), "create_target": true});
    let log = replicate(&c, to_pouchdb).await;
    assert_eq!(log["history"][0]["docs_written"], 1, "{log}");
    assert_eq!(p.get("/dst/g/a.txt").await.text, content);
    // Another Recliner and a local database keep it encoded, same digest.
    let to_other = json!({"source": "src", "target": other.url("/dst"), "create_target": true});
    assert_eq!(
        replicate(&c, to_other).await["history"][0]["docs_written"],
        1
    );
    let local = json!({"source": "src", "target": "copy", "create_target": true});
    assert_eq!(replicate(&c, local).await["history"][0]["docs_written"], 1);
    for (client, db) in [(&o, "dst"), (&c, "copy")] {
        assert_eq!(client.get(&format!("/{db}/g/a.txt")).await.text, content);
        let doc = client
            .get(&format!("/{db}/g?att_encoding_info=true"))
            .await
            .json();
        assert_eq!(
            doc["_attachments"]["a.txt"], stored["_attachments"]["a.txt"],
            "{db}"
        );
    }
    // And back from PouchDB Server.
    let back = json!({"source": pouchdb.url("/dst"), "target": "back", "create_target": true});
    replicate(&c, back).await;
    assert_eq!(c.get("/back/g/a.txt").await.text, content);
}

/// Filtered replications with PouchDB Server on either side: Recliner's
/// filter function with `query_params` as the source, PouchDB Server's as
/// the source of a pull (it runs the filter itself).
#[tokio::test]
async fn filtered_replications_with_query_params_both_ways() {
    let pouchdb = pouchdb_server().await;
    let data = TempDir::new("pouchdb-filtered");
    let server = TestServer::start(data.path(), &[]);
    let (c, p) = (Client::new(&server), Client::at(&pouchdb.url("")));
    let ddoc = json!({"filters": {"by_kind": "function (doc, req) { return doc.kind === req.query.kind; }"}});
    c.put("/src", json!({})).await;
    c.put("/src/_design/app", ddoc.clone()).await;
    for i in 0..10 {
        let kind = if i % 3 == 0 { "keep" } else { "skip" };
        c.put(&format!("/src/d{i}"), json!({"kind": kind})).await;
    }
    let push = json!({"source": "src", "target": pouchdb.url("/dst"), "create_target": true,
                      "filter": "app/by_kind", "query_params": {"kind": "keep"}});
    let log = replicate(&c, push).await;
    assert_eq!(log["history"][0]["docs_written"], 4, "{log}");
    let pushed = p.get("/dst/_all_docs").await.json();
    let ids: Vec<&str> = pushed["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["d0", "d3", "d6", "d9"]);

    // PouchDB Server runs the filter for a pull from it.
    p.put("/psrc", json!({})).await;
    p.put("/psrc/_design/app", ddoc).await;
    for i in 0..6 {
        let kind = if i % 2 == 0 { "keep" } else { "skip" };
        p.put(&format!("/psrc/p{i}"), json!({"kind": kind})).await;
    }
    let pull = json!({"source": pouchdb.url("/psrc"), "target": "pulled", "create_target": true,
                      "filter": "app/by_kind", "query_params": {"kind": "keep"}});
    let log = replicate(&c, pull).await;
    assert_eq!(log["history"][0]["docs_written"], 3, "{log}");
    let pulled = c.get("/pulled/_all_docs").await.json();
    let ids: Vec<&str> = pulled["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["p0", "p2", "p4"]);
}

/// A design document CouchDB would refuse (a map function that does not
/// compile) is refused when replicated too, as a write failure; the rest
/// arrives.
#[tokio::test]
async fn a_replicated_design_document_is_checked_as_a_written_one() {
    let pouchdb = pouchdb_server().await;
    let data = TempDir::new("pouchdb-bad-ddoc");
    let server = TestServer::start(data.path(), &[]);
    let (c, p) = (Client::new(&server), Client::at(&pouchdb.url("")));
    p.put("/psrc", json!({})).await;
    p.put(
        "/psrc/_design/bad",
        json!({"views": {"v": {"map": "function (doc) { emit(1 }"}}}),
    )
    .await;
    p.put(
        "/psrc/_design/good",
        json!({"views": {"v": {"map": "function (doc) { emit(doc._id, null); }"}}}),
    )
    .await;
    p.put("/psrc/plain", json!({"x": 1})).await;
    let pull = json!({"source": pouchdb.url("/psrc"), "target": "pulled", "create_target": true});
    let log = replicate(&c, pull).await;
    let session = &log["history"][0];
    assert_eq!(session["doc_write_failures"], 1, "{log}");
    assert_eq!(session["docs_written"], 2, "{log}");
    assert_eq!(c.get("/pulled/_design/bad").await.status, 404);
    assert_eq!(c.get("/pulled/_design/good").await.status, 200);
}

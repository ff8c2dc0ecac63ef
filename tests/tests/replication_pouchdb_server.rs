//! Replication with a real peer of another make: PouchDB Server 4.2 (Node.js,
//! LevelDB). Recliner's replicator, asked through `POST /_replicate`, pushes
//! every kind of content to it and pulls every kind from it: updates,
//! deletions, conflicts of several branches, design documents, attachments
//! of 0 B, 1 B, 1 MiB and 20 MiB, and a `_local` document that must stay home.
//!
//! PouchDB Server comes from `bench/node` (installed by `cargo xtask test`,
//! which names its script in `RECLINER_POUCHDB_SERVER`).

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::fs::File;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use recliner_tests::{Client, Reply, TempDir, TestServer, percent_encode};
use serde_json::{Value, json};

/// How long PouchDB Server may take to answer `GET /` after it was started.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(30);

/// The `pouchdb-server` script: `RECLINER_POUCHDB_SERVER`, else where
/// `cargo xtask test` installs it (`bench/node/node_modules`).
fn pouchdb_server_script() -> PathBuf {
    let script = match std::env::var_os("RECLINER_POUCHDB_SERVER") {
        Some(path) => PathBuf::from(path),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("..")
            .join("bench/node/node_modules/pouchdb-server/bin/pouchdb-server"),
    };
    assert!(
        script.is_file(),
        "PouchDB Server is not installed ({} is missing): run the tests with \
         `cargo xtask test`, which installs it from bench/node",
        script.display()
    );
    std::fs::canonicalize(&script).unwrap()
}

/// `node pouchdb-server` in a temporary folder of its own, killed when
/// dropped. PouchDB Server cannot listen on port 0 (it takes 0 as unset and
/// uses 5984), so a free port is found first.
#[derive(Debug)]
struct PouchDbServer {
    child: Child,
    /// `http://127.0.0.1:PORT`
    url: String,
    dir: TempDir,
}

impl PouchDbServer {
    async fn start() -> PouchDbServer {
        let script = pouchdb_server_script();
        let dir = TempDir::new("pouchdb-server");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .expect("a free loopback port")
            .port();
        // Its log goes to a file in its folder, its output to another.
        let config = json!({"log": {"file": dir.path().join("log.txt"), "level": "warning"}});
        std::fs::write(dir.path().join("config.json"), config.to_string()).unwrap();
        let output = File::create(dir.path().join("output.txt")).unwrap();
        let child = Command::new("node")
            .arg(&script)
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .arg("--dir")
            .arg(dir.path().join("data"))
            .arg("--config")
            .arg(dir.path().join("config.json"))
            .arg("--no-stdout-logs")
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(output.try_clone().unwrap())
            .stderr(output)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start `node {}`: {e}", script.display()));
        let mut server = PouchDbServer {
            child,
            url: format!("http://127.0.0.1:{port}"),
            dir,
        };
        server.wait_until_up().await;
        server
    }

    async fn wait_until_up(&mut self) {
        let http = recliner_tests::http_client();
        let deadline = Instant::now() + STARTUP_TIMEOUT;
        loop {
            if let Ok(response) = http.get(format!("{}/", self.url)).send().await
                && response.status().is_success()
            {
                let welcome: Value = response.json().await.unwrap();
                assert_eq!(welcome["version"], "4.2.0", "{welcome}");
                return;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "pouchdb-server exited during startup ({status}):\n{}",
                    self.output()
                );
            }
            assert!(
                Instant::now() < deadline,
                "pouchdb-server did not answer within {STARTUP_TIMEOUT:?}:\n{}",
                self.output()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// What the server printed, to explain a failure.
    fn output(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("output.txt")).unwrap_or_default()
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.url)
    }
}

impl Drop for PouchDbServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An attachment written by a test, with the bytes it must have everywhere.
#[derive(Debug)]
struct Blob {
    doc: &'static str,
    name: &'static str,
    bytes: Vec<u8>,
}

/// `len` pseudo-random bytes (xorshift from a random seed): incompressible,
/// and different in every run.
fn random_bytes(len: usize) -> Vec<u8> {
    let mut state = uuid::Uuid::new_v4().as_u64_pair().0 | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        out.extend_from_slice(&state.to_le_bytes());
    }
    out.truncate(len);
    out
}

/// Checks a write was accepted (201, or 202 for deferred commits).
fn created(reply: &Reply, what: &str) -> Value {
    assert!(
        reply.status == 201 || reply.status == 202,
        "{what}: {} {}",
        reply.status,
        reply.text
    );
    reply.json()
}

async fn rev_of(c: &Client, db: &str, id: &str) -> String {
    let reply = c.get(&format!("/{db}/{id}")).await;
    assert_eq!(reply.status, 200, "GET /{db}/{id}: {}", reply.text);
    reply.json()["_rev"].as_str().unwrap().to_string()
}

/// Attaches `bytes` to `doc` (creating it when missing) as a new revision.
async fn attach(c: &Client, db: &str, doc: &str, name: &str, bytes: Vec<u8>) {
    let path = match c.get(&format!("/{db}/{doc}")).await {
        r if r.status == 200 => format!(
            "/{db}/{doc}/{name}?rev={}",
            r.json()["_rev"].as_str().unwrap()
        ),
        _ => format!("/{db}/{doc}/{name}"),
    };
    let reply = c
        .send_bytes("PUT", &path, bytes, "application/octet-stream")
        .await;
    created(&reply, &format!("PUT {path}"));
}

/// Fills `db` (created here) on either server with every kind of content;
/// returns the attachments written.
async fn fill(c: &Client, db: &str) -> Vec<Blob> {
    created(&c.put(&format!("/{db}"), json!({})).await, "create the db");
    let mut docs: Vec<Value> = (0..30)
        .map(|i| json!({"_id": format!("doc{i:02}"), "n": i, "nested": {"list": [i, "x"]}}))
        .collect();
    docs.push(json!({"_id": "ünïcode id", "v": "ok"}));
    docs.push(json!({"_id": "_design/app", "views": {"all": {"map": "function(d){emit(d._id)}"}}}));
    docs.push(json!({"_id": "_design/gone", "views": {}}));
    let reply = c
        .post(&format!("/{db}/_bulk_docs"), json!({"docs": docs}))
        .await;
    created(&reply, "_bulk_docs");

    // Updates: doc00 twice, the design document once.
    for round in 1..=2 {
        let rev = rev_of(c, db, "doc00").await;
        let reply = c
            .put(
                &format!("/{db}/doc00?rev={rev}"),
                json!({"n": 0, "edited": round}),
            )
            .await;
        created(&reply, "update doc00");
    }
    let rev = rev_of(c, db, "_design/app").await;
    let reply = c
        .put(
            &format!("/{db}/_design/app?rev={rev}"),
            json!({"views": {"all": {"map": "function(d){emit(d._id, 1)}"}, "n": {"map": "function(d){emit(d.n)}"}}}),
        )
        .await;
    created(&reply, "update the design document");

    // Deletions: a document, a design document, and one deleted then
    // created again on top of its tombstone.
    for id in ["doc01", "_design/gone", "doc02"] {
        let rev = rev_of(c, db, id).await;
        let reply = c.delete(&format!("/{db}/{id}?rev={rev}")).await;
        assert_eq!(reply.status, 200, "delete {id}: {}", reply.text);
    }
    created(
        &c.put(&format!("/{db}/doc02"), json!({"reborn": true}))
            .await,
        "recreate doc02",
    );

    // Conflicts written as a replicator would: three branches from one
    // root (one of them deleted), and a document whose every leaf is deleted.
    let reply = c
        .post(
            &format!("/{db}/_bulk_docs"),
            json!({"new_edits": false, "docs": [
                {"_id": "conflicted", "_revisions": {"start": 2, "ids": ["b", "a"]}, "side": "b"},
                {"_id": "conflicted", "_revisions": {"start": 3, "ids": ["c3", "c", "a"]}, "side": "c"},
                {"_id": "conflicted", "_revisions": {"start": 2, "ids": ["d", "a"]}, "_deleted": true},
                {"_id": "all-gone", "_revisions": {"start": 2, "ids": ["x2", "x1"]}, "_deleted": true},
                {"_id": "all-gone", "_revisions": {"start": 3, "ids": ["y3", "y2", "x1"]}, "_deleted": true},
            ]}),
        )
        .await;
    created(&reply, "_bulk_docs new_edits=false");
    let leaves = c.get(&format!("/{db}/conflicted?open_revs=all")).await;
    assert_eq!(
        leaves.json().as_array().unwrap().len(),
        3,
        "the source has three leaves: {}",
        leaves.text
    );

    // Attachments: 0 B, 1 B and 1 MiB added one revision at a time to one
    // document, then a body edit that keeps them; 20 MiB on its own.
    let blobs = vec![
        Blob {
            doc: "files",
            name: "empty.bin",
            bytes: Vec::new(),
        },
        Blob {
            doc: "files",
            name: "one.bin",
            bytes: random_bytes(1),
        },
        Blob {
            doc: "files",
            name: "mib.bin",
            bytes: random_bytes(1 << 20),
        },
        Blob {
            doc: "big",
            name: "big.bin",
            bytes: random_bytes(20 << 20),
        },
    ];
    for blob in &blobs {
        attach(c, db, blob.doc, blob.name, blob.bytes.clone()).await;
    }
    for id in ["files", "big"] {
        let mut doc = c.get(&format!("/{db}/{id}")).await.json();
        doc["title"] = json!(format!("{id} edited after its attachments"));
        let reply = c.put(&format!("/{db}/{id}"), doc).await;
        created(&reply, &format!("edit {id} keeping its attachment stubs"));
    }

    // A local document, which must not replicate.
    created(
        &c.put(&format!("/{db}/_local/x"), json!({"secret": 1}))
            .await,
        "_local/x",
    );
    blobs
}

/// More changes made on the other side before replicating back: a new
/// document, a conflict on an edited document, a deletion, the losing
/// branch of `conflicted` deleted, a new 1 MiB attachment next to the old
/// ones, a body edit of the document with the 20 MiB attachment, and a
/// local document `_local/y` (which must not travel).
async fn edit_more(c: &Client, db: &str, blobs: &mut Vec<Blob>) {
    created(
        &c.put(&format!("/{db}/_local/y"), json!({"here": "only"}))
            .await,
        "_local/y",
    );
    created(
        &c.put(&format!("/{db}/from-the-other-side"), json!({"v": 1}))
            .await,
        "new document",
    );
    let doc00 = c.get(&format!("/{db}/doc00?revs=true")).await.json();
    let mut ids = doc00["_revisions"]["ids"].as_array().unwrap().clone();
    ids[0] = json!("0123456789abcdef0123456789abcdef");
    let reply = c
        .post(
            &format!("/{db}/_bulk_docs"),
            json!({"new_edits": false, "docs": [
                {"_id": "doc00", "_revisions": {"start": doc00["_revisions"]["start"], "ids": ids}, "branch": "sibling"},
            ]}),
        )
        .await;
    created(&reply, "a sibling branch of doc00");
    let rev = rev_of(c, db, "doc03").await;
    assert_eq!(
        c.delete(&format!("/{db}/doc03?rev={rev}")).await.status,
        200
    );
    let reply = c.delete(&format!("/{db}/conflicted?rev=2-b")).await;
    assert_eq!(reply.status, 200, "delete a losing branch: {}", reply.text);
    let bytes = random_bytes(1 << 20);
    attach(c, db, "files", "second.bin", bytes.clone()).await;
    blobs.push(Blob {
        doc: "files",
        name: "second.bin",
        bytes,
    });
    let mut big = c.get(&format!("/{db}/big")).await.json();
    big["title"] = json!("edited on the other side");
    created(&c.put(&format!("/{db}/big"), big).await, "edit big");
}

/// The raw bytes of `path`.
async fn get_bytes(c: &Client, path: &str) -> (u16, Vec<u8>) {
    let response = c.http().get(c.url(path)).send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.bytes().await.unwrap().to_vec())
}

/// The copy lacks the source's `_local` document `local`, and has every
/// attachment with the source's digest and the bytes first written.
async fn check_copy(
    src: &Client,
    src_db: &str,
    dst: &Client,
    dst_db: &str,
    local: &str,
    blobs: &[Blob],
) {
    assert_eq!(
        src.get(&format!("/{src_db}/{local}")).await.status,
        200,
        "the source has {local}"
    );
    let copied = dst.get(&format!("/{dst_db}/{local}")).await;
    assert_eq!(
        copied.status, 404,
        "{local} must stay home: {}",
        copied.text
    );
    for blob in blobs {
        let stub = |c: &Client, db: &str| {
            let path = format!("/{db}/{}", blob.doc);
            let c = c.clone();
            async move { c.get(&path).await.json()["_attachments"][blob.name].clone() }
        };
        let (want, got) = (stub(src, src_db).await, stub(dst, dst_db).await);
        assert!(
            want["digest"].as_str().unwrap().starts_with("md5-"),
            "{want}"
        );
        assert_eq!(got["digest"], want["digest"], "digest of {}", blob.name);
        assert_eq!(got["length"], json!(blob.bytes.len()), "{}", blob.name);
        let (status, bytes) =
            get_bytes(dst, &format!("/{dst_db}/{}/{}", blob.doc, blob.name)).await;
        assert_eq!(status, 200, "{}/{}", blob.doc, blob.name);
        assert!(
            bytes == blob.bytes,
            "{}/{}: {} bytes arrived, {} expected (or different bytes)",
            blob.doc,
            blob.name,
            bytes.len(),
            blob.bytes.len()
        );
    }
    if blobs.iter().any(|b| b.name == "empty.bin") {
        let stub = dst.get(&format!("/{dst_db}/files")).await.json();
        assert_eq!(
            stub["_attachments"]["empty.bin"]["digest"], "md5-1B2M2Y8AsgTpgAmY7PhCfg==",
            "the md5 of no bytes"
        );
    }
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

/// Runs a one-shot replication on `runner`; returns its answer.
async fn replicate(runner: &Client, spec: Value) -> Value {
    let reply = runner.post("/_replicate", spec.clone()).await;
    assert_eq!(reply.status, 200, "{spec}: {}", reply.text);
    let log = reply.json();
    assert_eq!(log["ok"], true, "{log}");
    log
}

/// A second run of the same replication finds nothing to do.
async fn assert_nothing_new(runner: &Client, spec: Value) {
    let again = replicate(runner, spec).await;
    let written = again["history"][0]["docs_written"].as_u64();
    let before = again["history"]
        .as_array()
        .and_then(|h| h.get(1))
        .map(|h| h["docs_written"].as_u64());
    assert!(
        again["no_changes"] == true || before == Some(written),
        "a second run finds nothing new: {again}"
    );
}

#[tokio::test]
async fn recliner_pushes_every_kind_of_content_to_pouchdb_server() {
    let pouchdb = PouchDbServer::start().await;
    let data = TempDir::new("pouchdb-push");
    let server = TestServer::start(data.path(), &[]);
    let (c, p) = (Client::new(&server), Client::at(&pouchdb.url));
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
    let pouchdb = PouchDbServer::start().await;
    let data = TempDir::new("pouchdb-pull");
    let server = TestServer::start(data.path(), &[]);
    let (c, p) = (Client::new(&server), Client::at(&pouchdb.url));
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

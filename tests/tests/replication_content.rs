//! Replication between two recliner processes over HTTP, in both directions
//! (a pull run by the target's server, a push run by the source's), with
//! every kind of content: updates, deletions, conflicts of several branches,
//! design documents, attachments of 0 B, 1 B, 1 MiB and 20 MiB, and local
//! documents that must stay home. Also a `since_seq` replication, and a
//! continuous one that survives a restart of its source server.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::time::{Duration, Instant};

use recliner_tests::{Client, TempDir, TestServer, compare_dbs};
use serde_json::{Value, json};

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

async fn rev_of(c: &Client, db: &str, id: &str) -> String {
    let reply = c.get(&format!("/{db}/{id}")).await;
    assert_eq!(reply.status, 200, "GET /{db}/{id}: {}", reply.text);
    reply.json()["_rev"].as_str().unwrap().to_string()
}

/// Checks a write was accepted (201, or 202 for deferred commits).
fn created(reply: &recliner_tests::Reply, what: &str) -> Value {
    assert!(
        reply.status == 201 || reply.status == 202,
        "{what}: {} {}",
        reply.status,
        reply.text
    );
    reply.json()
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

/// Fills `db` (created here) with every kind of content; returns the
/// attachments written.
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
    let first_written = again["history"]
        .as_array()
        .and_then(|h| h.get(1))
        .map(|h| h["docs_written"].as_u64());
    assert!(
        again["no_changes"] == true || first_written == Some(written),
        "a second run finds nothing new: {again}"
    );
}

#[tokio::test]
async fn a_pull_run_by_the_target_copies_everything_and_a_push_from_there_brings_changes_back() {
    let (da, db) = (
        TempDir::new("content-pull-a"),
        TempDir::new("content-pull-b"),
    );
    let (a, b) = (
        TestServer::start(da.path(), &[]),
        TestServer::start(db.path(), &[]),
    );
    let (ca, cb) = (Client::new(&a), Client::new(&b));
    let mut blobs = fill(&ca, "data").await;

    // Pull: B runs the job, A is the remote source.
    let pull = json!({"source": a.url("/data"), "target": "copy", "create_target": true});
    let log = replicate(&cb, pull.clone()).await;
    let session = &log["history"][0];
    assert_eq!(session["doc_write_failures"], 0, "{log}");
    assert_eq!(
        session["docs_written"], 40,
        "every leaf revision is written: {log}"
    );
    check_copy(&ca, "data", &cb, "copy", "_local/x", &blobs).await;
    compare_dbs(&ca, "data", &cb, "copy").await;
    assert_nothing_new(&cb, pull).await;

    // Push back: B, now the source, runs the job with A as the remote target.
    edit_more(&cb, "copy", &mut blobs).await;
    let push = json!({"source": "copy", "target": a.url("/data")});
    let log = replicate(&cb, push.clone()).await;
    assert_eq!(log["history"][0]["doc_write_failures"], 0, "{log}");
    assert_eq!(
        log["history"][0]["docs_written"], 6,
        "exactly the six new revisions travel back: {log}"
    );
    let leaves = ca.get("/data/doc00?open_revs=all").await.json();
    assert_eq!(leaves.as_array().unwrap().len(), 2, "{leaves}");
    check_copy(&cb, "copy", &ca, "data", "_local/y", &blobs).await;
    assert_nothing_new(&cb, push).await;
    compare_dbs(&ca, "data", &cb, "copy").await;
}

#[tokio::test]
async fn a_push_run_by_the_source_copies_everything_and_a_pull_from_there_brings_changes_back() {
    let (da, db) = (
        TempDir::new("content-push-a"),
        TempDir::new("content-push-b"),
    );
    let (a, b) = (
        TestServer::start(da.path(), &[]),
        TestServer::start(db.path(), &[]),
    );
    let (ca, cb) = (Client::new(&a), Client::new(&b));
    let mut blobs = fill(&ca, "data").await;

    // Push: A runs the job, B is the remote target (created by the job).
    let push = json!({"source": "data", "target": b.url("/copy"), "create_target": true});
    let log = replicate(&ca, push.clone()).await;
    assert_eq!(log["history"][0]["doc_write_failures"], 0, "{log}");
    assert_eq!(
        log["history"][0]["docs_written"], 40,
        "every leaf revision is written: {log}"
    );
    check_copy(&ca, "data", &cb, "copy", "_local/x", &blobs).await;
    compare_dbs(&ca, "data", &cb, "copy").await;
    assert_nothing_new(&ca, push).await;

    // Pull back: A, now the target, runs the job with B as the remote source.
    edit_more(&cb, "copy", &mut blobs).await;
    let pull = json!({"source": b.url("/copy"), "target": "data"});
    let log = replicate(&ca, pull.clone()).await;
    assert_eq!(log["history"][0]["doc_write_failures"], 0, "{log}");
    assert_eq!(log["history"][0]["docs_written"], 6, "{log}");
    let conflicted = ca
        .get("/data/conflicted?conflicts=true&deleted_conflicts=true")
        .await
        .json();
    assert_eq!(conflicted["_rev"], "3-c3", "{conflicted}");
    assert_eq!(
        conflicted["_deleted_conflicts"].as_array().unwrap().len(),
        2,
        "both deleted branches are known: {conflicted}"
    );
    assert!(conflicted.get("_conflicts").is_none(), "{conflicted}");
    check_copy(&cb, "copy", &ca, "data", "_local/y", &blobs).await;
    assert_nothing_new(&ca, pull).await;
    compare_dbs(&ca, "data", &cb, "copy").await;
}

/// The ids in a database's changes feed, sorted.
async fn feed_ids(c: &Client, db: &str) -> Vec<String> {
    let feed = c.get(&format!("/{db}/_changes")).await.json();
    let mut ids: Vec<String> = feed["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect();
    ids.sort();
    ids
}

#[tokio::test]
async fn a_since_seq_replication_copies_only_the_changes_after_that_sequence() {
    let (da, db) = (TempDir::new("since-a"), TempDir::new("since-b"));
    let (a, b) = (
        TestServer::start(da.path(), &[]),
        TestServer::start(db.path(), &[]),
    );
    let (ca, cb) = (Client::new(&a), Client::new(&b));
    created(&ca.put("/src", json!({})).await, "create src");
    let docs: Vec<Value> = (0..20)
        .map(|i| json!({"_id": format!("d{i:02}"), "n": i}))
        .collect();
    created(
        &ca.post("/src/_bulk_docs", json!({"docs": docs})).await,
        "_bulk_docs",
    );
    attach(&ca, "src", "d05", "early.bin", random_bytes(1000)).await;
    let since = ca.get("/src").await.json()["update_seq"].clone();

    // After `since`: new documents, an update, a deletion, an attachment and
    // a conflict branch.
    for id in ["after1", "after2"] {
        created(
            &ca.put(&format!("/src/{id}"), json!({"late": true})).await,
            id,
        );
    }
    let rev = rev_of(&ca, "src", "d03").await;
    created(
        &ca.put(
            &format!("/src/d03?rev={rev}"),
            json!({"n": 3, "updated": true}),
        )
        .await,
        "update d03",
    );
    let rev = rev_of(&ca, "src", "d04").await;
    assert_eq!(ca.delete(&format!("/src/d04?rev={rev}")).await.status, 200);
    let late_bytes = random_bytes(1);
    attach(&ca, "src", "late-att", "one.bin", late_bytes.clone()).await;
    let reply = ca
        .post(
            "/src/_bulk_docs",
            json!({"new_edits": false, "docs": [
                {"_id": "d06", "_revisions": {"start": 1, "ids": ["feedface"]}, "branch": 1},
            ]}),
        )
        .await;
    created(&reply, "a second root of d06, a conflict");

    // B pulls only what came after `since`.
    let spec = json!({"source": a.url("/src"), "target": "partial", "create_target": true, "since_seq": since});
    let log = replicate(&cb, spec.clone()).await;
    assert_eq!(log["history"][0]["doc_write_failures"], 0, "{log}");
    let expected = ["after1", "after2", "d03", "d04", "d06", "late-att"];
    assert_eq!(
        feed_ids(&cb, "partial").await,
        expected,
        "only the documents changed after seq {since}: {log}"
    );
    for id in ["d00", "d05", "d19"] {
        assert_eq!(cb.get(&format!("/partial/{id}")).await.status, 404, "{id}");
    }
    let d04 = cb.get("/partial/d04").await;
    assert_eq!(
        (d04.status, d04.json()["reason"].as_str()),
        (404, Some("deleted")),
        "the deletion arrived"
    );
    assert_eq!(
        cb.get("/partial/d03").await.json(),
        ca.get("/src/d03").await.json()
    );
    let leaves = cb.get("/partial/d06?open_revs=all").await.json();
    assert_eq!(
        leaves.as_array().unwrap().len(),
        2,
        "both branches of d06, the older one included: {leaves}"
    );
    let (status, bytes) = get_bytes(&cb, "/partial/late-att/one.bin").await;
    assert_eq!((status, bytes), (200, late_bytes));
    assert_nothing_new(&cb, spec).await;

    // The same pull without since_seq is another replication: it starts
    // from the beginning and completes the copy.
    let full = json!({"source": a.url("/src"), "target": "partial"});
    let log = replicate(&cb, full).await;
    assert_eq!(
        log["history"][0]["docs_written"], 17,
        "the 17 earlier documents now travel: {log}"
    );
    compare_dbs(&ca, "src", &cb, "partial").await;
}

/// Polls until `check` holds, for at most `limit`.
async fn eventually(limit: Duration, mut check: impl AsyncFnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if check().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

/// A loopback port free right now (the listener is dropped at once).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .unwrap()
        .port()
}

/// A source server for a continuous pull: it listens on a fixed port so it
/// comes back at the same URL, holds `live` with a document `before`, and
/// the job (run by the target's server) has copied it and waits for more.
struct ContinuousPull {
    port: u16,
    source_dir: TempDir,
    /// `None` while stopped.
    source: Option<TestServer>,
    target: TestServer,
    _target_dir: TempDir,
    job_id: String,
}

impl ContinuousPull {
    async fn start(label: &str) -> ContinuousPull {
        let source_dir = TempDir::new(&format!("{label}-source"));
        let target_dir = TempDir::new(&format!("{label}-target"));
        let port = free_port();
        let source = TestServer::start_on_port(source_dir.path(), port, &[]);
        let target = TestServer::start(target_dir.path(), &[]);
        let (cs, ct) = (Client::new(&source), Client::new(&target));
        created(&cs.put("/live", json!({})).await, "create live");
        created(&cs.put("/live/before", json!({"v": 0})).await, "before");
        let spec = json!({"source": format!("http://127.0.0.1:{port}/live"), "target": "mirror",
                          "create_target": true, "continuous": true});
        let started = ct.post("/_replicate", spec).await;
        assert_eq!(started.status, 202, "{}", started.text);
        let job_id = started.json()["_local_id"].as_str().unwrap().to_string();
        assert!(
            arrives(&ct, "before", Duration::from_secs(5)).await,
            "the first document arrives"
        );
        // One more change, so the job has gone through a full cycle and
        // now waits on the source's feed.
        created(
            &cs.put("/live/last-word", json!({"v": 1})).await,
            "last-word",
        );
        assert!(arrives(&ct, "last-word", Duration::from_secs(5)).await);
        tokio::time::sleep(Duration::from_millis(300)).await;
        ContinuousPull {
            port,
            source_dir,
            source: Some(source),
            target,
            _target_dir: target_dir,
            job_id,
        }
    }

    /// Starts the source again on the same port and data folder, writes a
    /// document and checks the job delivers it, then another at normal
    /// speed; cancels the job and compares both databases.
    async fn check_it_resumes(self) {
        assert!(self.source.is_none(), "the source was stopped");
        let source = TestServer::start_on_port(self.source_dir.path(), self.port, &[]);
        let (cs, ct) = (Client::new(&source), Client::new(&self.target));
        assert_eq!(cs.get("/live/before").await.status, 200, "data survives");
        let written = Instant::now();
        created(
            &cs.put("/live/after-restart", json!({"v": 2})).await,
            "after-restart",
        );
        assert!(
            arrives(&ct, "after-restart", Duration::from_secs(8)).await,
            "a document written after the restart arrives; the target's jobs: {}",
            ct.get("/_scheduler/jobs").await.text
        );
        let first_delay = written.elapsed();
        let written = Instant::now();
        created(&cs.put("/live/later", json!({"v": 3})).await, "later");
        assert!(arrives(&ct, "later", Duration::from_secs(5)).await);
        assert!(
            written.elapsed() < Duration::from_secs(2),
            "back to normal speed: took {:?} (the first document after the restart: {first_delay:?})",
            written.elapsed()
        );
        let cancel = ct
            .post(
                "/_replicate",
                json!({"replication_id": self.job_id, "cancel": true}),
            )
            .await;
        assert_eq!(cancel.status, 200, "the job still runs: {}", cancel.text);
        compare_dbs(&cs, "live", &ct, "mirror").await;
    }
}

/// Whether `id` shows up in the target's `mirror` within `limit`.
async fn arrives(target: &Client, id: &str, limit: Duration) -> bool {
    let path = format!("/mirror/{id}");
    eventually(limit, async || target.get(&path).await.status == 200).await
}

#[tokio::test]
async fn a_continuous_pull_keeps_working_after_its_source_server_restarts() {
    let mut pull = ContinuousPull::start("restart").await;
    // SIGTERM while the job waits on the source's feed: the source must
    // stop promptly (TestServer::stop would wait 20 s), not hang on the
    // open feed until it times out.
    let source = pull.source.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let asked = Instant::now();
    std::thread::spawn(move || {
        let _ = tx.send(source.stop());
    });
    let status = rx.recv_timeout(Duration::from_secs(8)).unwrap_or_else(|_| {
        panic!(
            "the source server did not stop within 8 s of SIGTERM while a peer's \
             continuous replication waited on its _changes feed"
        )
    });
    assert!(status.success(), "a clean stop: {status}");
    eprintln!("the source stopped {:?} after SIGTERM", asked.elapsed());
    tokio::time::sleep(Duration::from_millis(500)).await;
    pull.check_it_resumes().await;
}

#[tokio::test]
async fn a_continuous_pull_keeps_working_after_its_source_server_is_killed() {
    let mut pull = ContinuousPull::start("killed").await;
    // SIGKILL while the job waits on the source's feed: the feed's
    // connection breaks mid-answer.
    drop(pull.source.take());
    tokio::time::sleep(Duration::from_millis(500)).await;
    pull.check_it_resumes().await;
}

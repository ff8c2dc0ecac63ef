//! Replication between two recliner processes over HTTP, in both directions
//! (a pull run by the target's server, a push run by the source's), with
//! every kind of content: updates, deletions, conflicts of several branches,
//! design documents, attachments of 0 B, 1 B, 1 MiB and 20 MiB, and local
//! documents that must stay home. Also a `since_seq` replication, and a
//! continuous one that survives a restart of its source server.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::time::{Duration, Instant};

use recliner_tests::content::{
    assert_nothing_new, attach, check_copy, created, edit_more, fill, get_bytes, random_bytes,
    replicate, rev_of,
};
use recliner_tests::{Client, TempDir, TestServer, compare_dbs, eventually_within};
use serde_json::{Value, json};

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
        let spec = json!({"source": source.url("/live"), "target": "mirror",
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
    eventually_within(limit, async || target.get(&path).await.status == 200).await
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

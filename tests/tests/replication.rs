//! One-shot replication through `POST /_replicate`: local to local, and
//! between two recliner processes over HTTP (pull and push), ending with
//! identical databases.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use recliner_tests::{Client, TempDir, TestServer, compare_dbs, eventually, seq_num};
use serde_json::{Value, json};

/// Fills a database with every kind of content a replication must carry.
async fn fill(c: &Client, db: &str) {
    assert_eq!(c.put(&format!("/{db}"), json!({})).await.status, 201);
    let mut docs: Vec<Value> = (0..120)
        .map(|i| json!({"_id": format!("doc{i:03}"), "n": i}))
        .collect();
    docs.push(json!({"_id": "_design/app", "views": {"all": {"map": "function(d){emit(d._id)}"}}}));
    docs.push(json!({"_id": "ünïcode id", "v": "ok"}));
    c.post(&format!("/{db}/_bulk_docs"), json!({"docs": docs}))
        .await;
    // Updates and a deletion.
    let r = c.get(&format!("/{db}/doc000")).await.json()["_rev"]
        .as_str()
        .unwrap()
        .to_string();
    let r2 = c
        .put(
            &format!("/{db}/doc000?rev={r}"),
            json!({"n": 0, "edited": true}),
        )
        .await
        .json()["rev"]
        .as_str()
        .unwrap()
        .to_string();
    c.put(
        &format!("/{db}/doc000?rev={r2}"),
        json!({"n": 0, "edited": 2}),
    )
    .await;
    let r = c.get(&format!("/{db}/doc001")).await.json()["_rev"]
        .as_str()
        .unwrap()
        .to_string();
    c.delete(&format!("/{db}/doc001?rev={r}")).await;
    // Conflicts with several branches, one deleted.
    c.post(
        &format!("/{db}/_bulk_docs"),
        json!({"new_edits": false, "docs": [
            {"_id": "conflicted", "_revisions": {"start": 2, "ids": ["b", "a"]}, "side": "b"},
            {"_id": "conflicted", "_revisions": {"start": 3, "ids": ["c3", "c", "a"]}, "side": "c"},
            {"_id": "conflicted", "_revisions": {"start": 2, "ids": ["d", "a"]}, "_deleted": true},
        ]}),
    )
    .await;
    // Attachments of 0 B, 1 B and 1 MiB.
    for (name, size) in [("empty.bin", 0usize), ("one.bin", 1), ("mib.bin", 1 << 20)] {
        let bytes: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
        let path = match c.get(&format!("/{db}/files")).await.json()["_rev"].as_str() {
            Some(rev) => format!("/{db}/files/{name}?rev={rev}"),
            None => format!("/{db}/files/{name}"),
        };
        assert_eq!(
            c.send_bytes("PUT", &path, bytes, "application/octet-stream")
                .await
                .status,
            201
        );
    }
    // A local document, which must not replicate.
    c.put(&format!("/{db}/_local/private"), json!({"secret": 1}))
        .await;
}

#[tokio::test]
async fn a_local_replication_copies_everything_and_a_second_run_finds_nothing_new() {
    let data = TempDir::new("repl-local");
    let server = TestServer::start(data.path(), &[]);
    let c = Client::new(&server);
    fill(&c, "source").await;

    let first = c
        .post(
            "/_replicate",
            json!({"source": "source", "target": "target", "create_target": true}),
        )
        .await;
    assert_eq!(first.status, 200, "{}", first.text);
    let log = first.json();
    assert_eq!(log["ok"], true);
    assert_eq!(log["replication_id_version"], 4);
    assert!(log["history"][0]["docs_written"].as_u64().unwrap() >= 125);
    assert_eq!(log["history"][0]["doc_write_failures"], 0);
    compare_dbs(&c, "source", &c, "target").await;
    assert_eq!(
        c.get("/target/_local/private").await.status,
        404,
        "local documents stay home"
    );

    let second = c
        .post(
            "/_replicate",
            json!({"source": "source", "target": "target"}),
        )
        .await
        .json();
    assert_eq!(second["no_changes"], true, "{second}");

    // New changes after the checkpoint are picked up, and only those.
    c.put("/source/late", json!({"v": 1})).await;
    let third = c
        .post(
            "/_replicate",
            json!({"source": "source", "target": "target"}),
        )
        .await
        .json();
    let written = third["history"][0]["docs_written"].as_u64().unwrap();
    let before = log["history"][0]["docs_written"].as_u64().unwrap();
    assert_eq!(
        written,
        before + 1,
        "counters continue and only the new document moves"
    );
    compare_dbs(&c, "source", &c, "target").await;
}

#[tokio::test]
async fn two_servers_replicate_over_http_in_both_directions() {
    let (da, db) = (TempDir::new("repl-a"), TempDir::new("repl-b"));
    // B requires a login: A's job logs in with the URL's credentials.
    let (a, b) = (
        TestServer::start(da.path(), &[]),
        TestServer::start_with_env(db.path(), &[], &[("RECLINER_ADMIN", "admin:hunter2")]),
    );
    let (ca, cb) = (Client::new(&a), Client::new(&b));
    fill(&ca, "data").await;

    // Pull: B runs the job with A as the source.
    let pull = cb
        .post(
            "/_replicate",
            json!({"source": a.url("/data"), "target": "pulled", "create_target": true}),
        )
        .await;
    assert_eq!(pull.status, 200, "{}", pull.text);
    compare_dbs(&ca, "data", &cb, "pulled").await;

    // Push: A runs the job with B as the target (credentials in the URL are accepted).
    let target = b.url("/pushed");
    assert!(target.contains("admin:hunter2@"), "{target}");
    let push = ca
        .post(
            "/_replicate",
            json!({"source": "data", "target": target, "create_target": true}),
        )
        .await;
    assert_eq!(push.status, 200, "{}", push.text);
    compare_dbs(&ca, "data", &cb, "pushed").await;

    // Changes on B come back to A.
    cb.put("/pushed/from-b", json!({"v": "b"})).await;
    let back = ca
        .post(
            "/_replicate",
            json!({"source": b.url("/pushed"), "target": "data"}),
        )
        .await;
    assert_eq!(back.status, 200, "{}", back.text);
    compare_dbs(&ca, "data", &cb, "pushed").await;
}

#[tokio::test]
async fn filtered_replications_copy_only_what_they_name() {
    let data = TempDir::new("repl-filter");
    let server = TestServer::start(data.path(), &[]);
    let c = Client::new(&server);
    fill(&c, "src").await;
    let ids = c
        .post("/_replicate", json!({"source": "src", "target": "ids", "create_target": true, "doc_ids": ["doc005", "conflicted"]}))
        .await;
    assert_eq!(ids.status, 200, "{}", ids.text);
    // CouchDB's doc_ids answer has the session's figures at the top too.
    let answer = ids.json();
    for field in [
        "docs_read",
        "docs_written",
        "doc_write_failures",
        "start_time",
    ] {
        assert_eq!(
            answer[field], answer["history"][0][field],
            "{field}: {answer}"
        );
    }
    assert!(answer["docs_written"].as_u64().unwrap() >= 2, "{answer}");
    assert!(answer["start_time"].is_string() && answer["end_time"].is_string());
    let feed = c.get("/ids/_changes").await.json();
    let got: Vec<&str> = feed["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(got.len(), 2, "{got:?}");
    let selected = c
        .post("/_replicate", json!({"source": server.url("/src"), "target": "sel", "create_target": true, "selector": {"n": {"$lt": 3}}}))
        .await;
    assert_eq!(selected.status, 200, "{}", selected.text);
    assert!(
        selected.json().get("docs_written").is_none(),
        "only doc_ids answers carry the flat figures"
    );
    let rows = c.get("/sel/_all_docs").await.json();
    let got: Vec<&str> = rows["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        got,
        ["doc000", "doc002"],
        "doc001 is deleted, so its tombstone has no n"
    );
}

#[tokio::test]
async fn bad_requests_and_missing_databases_are_named_without_credentials() {
    let data = TempDir::new("repl-errors");
    let server = TestServer::start_with_env(data.path(), &[], &[("RECLINER_ADMIN", "bob:s3cret")]);
    let c = Client::new(&server);
    let missing = c
        .post("/_replicate", json!({"source": "nope", "target": "t"}))
        .await;
    assert_eq!(
        (missing.status, missing.json()["error"].as_str()),
        (500, Some("db_not_found"))
    );
    assert!(missing.json()["reason"].as_str().unwrap().contains("nope"));
    let remote = server.url("/gone");
    assert!(remote.contains("bob:s3cret@"), "{remote}");
    let reply = c
        .post(
            "/_replicate",
            json!({"source": remote, "target": "t", "create_target": true}),
        )
        .await;
    assert_eq!(reply.json()["error"], "db_not_found");
    assert!(
        !reply.text.contains("s3cret"),
        "credentials leaked: {}",
        reply.text
    );
    let bad = c
        .post(
            "/_replicate",
            json!({"source": "a", "target": "b", "worker_processes": -1}),
        )
        .await;
    assert_eq!(
        (bad.status, bad.json()["error"].as_str()),
        (400, Some("bad_request"))
    );
    assert!(
        bad.json()["reason"]
            .as_str()
            .unwrap()
            .contains("worker_processes")
    );
}

#[tokio::test]
async fn a_continuous_replication_delivers_new_changes_until_cancelled() {
    let (da, db) = (TempDir::new("cont-a"), TempDir::new("cont-b"));
    let (a, b) = (
        TestServer::start(da.path(), &[]),
        TestServer::start(db.path(), &[]),
    );
    let (ca, cb) = (Client::new(&a), Client::new(&b));
    ca.put("/live", json!({})).await;
    ca.put("/live/before", json!({"v": 0})).await;
    let spec = json!({"source": a.url("/live"), "target": "mirror", "create_target": true, "continuous": true});
    let started = cb.post("/_replicate", spec.clone()).await;
    assert_eq!(started.status, 202, "{}", started.text);
    let id = started.json()["_local_id"].as_str().unwrap().to_string();
    assert!(id.ends_with("+continuous+create_target"), "{id}");
    assert!(eventually(5, async || cb.get("/mirror/before").await.status == 200).await);

    let written = std::time::Instant::now();
    ca.put("/live/new", json!({"v": 1})).await;
    assert!(eventually(5, async || cb.get("/mirror/new").await.status == 200).await);
    // The replication issue asks for a new change within 1 s.
    assert!(
        written.elapsed() < std::time::Duration::from_secs(1),
        "took {:?}",
        written.elapsed()
    );

    let cancel = cb
        .post("/_replicate", json!({"replication_id": id, "cancel": true}))
        .await;
    assert_eq!(
        (cancel.status, cancel.json()["_local_id"].as_str()),
        (200, Some(id.as_str()))
    );
    let again = cb
        .post("/_replicate", json!({"replication_id": id, "cancel": true}))
        .await;
    assert_eq!(again.status, 404);
    ca.put("/live/after-cancel", json!({})).await;
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert_eq!(
        cb.get("/mirror/after-cancel").await.status,
        404,
        "a cancelled job copies nothing more"
    );
}

#[tokio::test]
async fn a_local_continuous_replication_is_cancelled_by_its_spec() {
    let data = TempDir::new("cont-local");
    let server = TestServer::start(data.path(), &[]);
    let c = Client::new(&server);
    c.put("/one", json!({})).await;
    let spec = json!({"source": "one", "target": "two", "create_target": true, "continuous": true});
    assert_eq!(c.post("/_replicate", spec.clone()).await.status, 202);
    c.put("/one/x", json!({})).await;
    assert!(eventually(5, async || c.get("/two/x").await.status == 200).await);
    let mut cancel = spec.clone();
    cancel["cancel"] = json!(true);
    assert_eq!(c.post("/_replicate", cancel).await.status, 200);
    compare_dbs(&c, "one", &c, "two").await;
}

#[tokio::test]
async fn a_replication_killed_mid_run_resumes_from_its_checkpoint() {
    let (da, db) = (TempDir::new("kill-a"), TempDir::new("kill-b"));
    let a = TestServer::start(da.path(), &[]);
    let ca = Client::new(&a);
    ca.put("/big", json!({})).await;
    for chunk in 0..20 {
        let docs: Vec<Value> = (0..200)
            .map(|i| json!({"_id": format!("d{chunk:02}-{i:03}"), "pad": "x".repeat(500)}))
            .collect();
        ca.post("/big/_bulk_docs", json!({"docs": docs})).await;
    }
    let spec = json!({"source": a.url("/big"), "target": "copy", "create_target": true,
                      "worker_batch_size": 100, "checkpoint_interval": 20});

    // First run: kill the replicating server (SIGKILL) once some documents have arrived.
    let b = TestServer::start(db.path(), &[]);
    let cb = Client::new(&b);
    let runner = {
        let cb = cb.clone();
        let spec = spec.clone();
        tokio::spawn(async move { cb.post("/_replicate", spec).await })
    };
    assert!(
        eventually(20, async || {
            cb.get("/copy").await.json()["doc_count"]
                .as_u64()
                .unwrap_or(0)
                >= 1000
        })
        .await
    );
    let pid = b.pid();
    std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    let _ = runner.await;
    drop(b);

    // Second run on a restarted server: it resumes past the checkpoint.
    let b = TestServer::start(db.path(), &[]);
    let cb = Client::new(&b);
    let before = cb.get("/copy").await.json()["doc_count"].as_u64().unwrap();
    let log = cb.post("/_replicate", spec).await.json();
    let session = &log["history"][0];
    let resumed_at = seq_num(&session["start_last_seq"]);
    assert!(
        resumed_at > 0,
        "the second run starts from the checkpoint: {session}"
    );
    assert!(
        before >= 1000 && resumed_at >= 500,
        "resumed at {resumed_at} with {before} docs copied"
    );
    compare_dbs(&ca, "big", &cb, "copy").await;
}

#[tokio::test]
async fn replication_through_a_faulty_network_still_ends_identical() {
    let (da, db) = (TempDir::new("fault-a"), TempDir::new("fault-b"));
    let (a, b) = (
        TestServer::start(da.path(), &[]),
        TestServer::start(db.path(), &[]),
    );
    let (ca, cb) = (Client::new(&a), Client::new(&b));
    fill(&ca, "src").await;
    let addr: std::net::SocketAddr = a.plain_url.trim_start_matches("http://").parse().unwrap();
    // One connection in four is reset or cut mid-answer; all are delayed.
    let proxy = recliner_tests::FaultProxy::start(addr, 4).await;
    let through_proxy = proxy.url.replacen(
        "http://",
        &format!(
            "http://{}:{}@",
            recliner_tests::ADMIN,
            recliner_tests::ADMIN_PASSWORD
        ),
        1,
    );
    let spec = json!({"source": format!("{through_proxy}/src"), "target": "dst", "create_target": true,
                      "worker_batch_size": 20, "retries_per_request": 10, "use_bulk_get": false});
    let mut done = false;
    for _ in 0..5 {
        let reply = cb.post("/_replicate", spec.clone()).await;
        if reply.status == 200 {
            done = true;
            break;
        }
    }
    assert!(done, "the replication finishes despite the faults");
    compare_dbs(&ca, "src", &cb, "dst").await;
}

#[tokio::test]
async fn documents_the_target_refuses_are_counted_and_the_checkpoint_moves_past_them() {
    let (da, db) = (TempDir::new("refuse-a"), TempDir::new("refuse-b"));
    let a = TestServer::start(da.path(), &[]);
    // The target refuses documents over 1000 bytes (413 document_too_large).
    let b = TestServer::start_with_env(db.path(), &[], &[("RECLINER_MAX_DOCUMENT_SIZE", "1000")]);
    let (ca, cb) = (Client::new(&a), Client::new(&b));
    ca.put("/src", json!({})).await;
    let mut docs: Vec<Value> = (0..10)
        .map(|i| json!({"_id": format!("small{i}"), "v": i}))
        .collect();
    docs.push(json!({"_id": "big1", "pad": "x".repeat(2000)}));
    docs.push(json!({"_id": "big2", "pad": "y".repeat(2000)}));
    ca.post("/src/_bulk_docs", json!({"docs": docs})).await;
    cb.put("/dst", json!({})).await;

    let spec = json!({"source": "src", "target": b.url("/dst")});
    let log = ca.post("/_replicate", spec.clone()).await.json();
    let session = &log["history"][0];
    assert_eq!(
        (
            session["docs_written"].as_u64(),
            session["doc_write_failures"].as_u64()
        ),
        (Some(10), Some(2)),
        "{log}"
    );
    assert_eq!(cb.get("/dst").await.json()["doc_count"], 10);
    let again = ca.post("/_replicate", spec).await.json();
    assert_eq!(
        again["no_changes"], true,
        "the refused documents are not retried: {again}"
    );
}

#[tokio::test]
async fn winning_revs_only_leaves_conflicts_behind() {
    let data = TempDir::new("repl-winners");
    let server = TestServer::start(data.path(), &[]);
    let c = Client::new(&server);
    fill(&c, "src").await;
    let reply = c
        .post("/_replicate", json!({"source": "src", "target": "winners", "create_target": true, "winning_revs_only": true}))
        .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let leaves = c.get("/winners/conflicted?open_revs=all").await.json();
    assert_eq!(
        leaves.as_array().unwrap().len(),
        1,
        "only the winner: {leaves}"
    );
    assert_eq!(
        leaves[0]["ok"]["_rev"],
        c.get("/src/conflicted").await.json()["_rev"]
    );
    assert_eq!(
        c.get("/src/conflicted?open_revs=all")
            .await
            .json()
            .as_array()
            .unwrap()
            .len(),
        3
    );
}

#[tokio::test]
async fn headers_no_request_can_carry_are_a_bad_request_at_once_and_the_server_carries_on() {
    let data = TempDir::new("repl-bad-headers");
    let server = TestServer::start(data.path(), &[]);
    let c = Client::new(&server);
    assert_eq!(c.put("/src", json!({})).await.status, 201);
    c.put("/src/a", json!({"v": 1})).await;
    let remote = server.url("/src");
    let cases = [
        // A value with a line break: header injection.
        (
            json!({"source": {"url": remote, "headers": {"X-Bad": "a\r\nInjected: yes"}}, "target": "t", "create_target": true}),
            "\"X-Bad\"",
        ),
        // A name that is no HTTP token.
        (
            json!({"source": "src", "target": {"url": server.url("/t"), "headers": {"Bad Name": "x"}}, "create_target": true}),
            "\"Bad Name\"",
        ),
        (
            json!({"source": {"url": remote, "headers": {"X\r\nY": "z"}}, "target": "t", "continuous": true}),
            "\"X\\r\\nY\"",
        ),
        (
            json!({"source": {"url": remote, "headers": {"X-Nul": "a\u{0}b"}}, "target": "t"}),
            "\"X-Nul\"",
        ),
    ];
    for (body, named) in cases {
        let started = std::time::Instant::now();
        let reply = c.post("/_replicate", body.clone()).await;
        let took = started.elapsed();
        assert_eq!(
            (reply.status, reply.json()["error"].as_str()),
            (400, Some("bad_request")),
            "{body}: {}",
            reply.text
        );
        assert!(
            took < std::time::Duration::from_secs(2),
            "{body}: answered after {took:?}"
        );
        let reason = reply.json()["reason"].as_str().unwrap().to_string();
        assert!(
            reason.contains("headers") && reason.contains(named),
            "{body}: the reason names the header: {reason}"
        );
        assert!(
            !reason.contains("Injected"),
            "a header's value is never shown: {reason}"
        );
    }
    // Nothing was scheduled, and the server goes on replicating.
    assert_eq!(c.get("/_scheduler/jobs").await.json()["total_rows"], 0);
    assert_eq!(c.get("/t").await.status, 404, "no target was created");
    let ok = c
        .post(
            "/_replicate",
            json!({"source": {"url": remote, "headers": {"X-Fine": "yes\tand é"}}, "target": "t", "create_target": true}),
        )
        .await;
    assert_eq!(ok.status, 200, "{}", ok.text);
    assert_eq!(ok.json()["ok"], true);
    assert_eq!(c.get("/t/a").await.json()["v"], 1);
}

/// A replication whose filter lets nothing through (no `doc_ids` found, a
/// selector that matches nothing) replicated nothing: CouchDB's bare
/// `{"ok": true, "no_changes": true}`, and no checkpoint; a run with
/// nothing new after one that copied shows its checkpoint's history.
#[tokio::test]
async fn a_replication_that_finds_nothing_answers_no_changes() {
    let data = TempDir::new("replication-no-changes");
    let server = TestServer::start(data.path(), &[]);
    let c = Client::new(&server);
    for db in ["src", "dst"] {
        assert_eq!(c.put(&format!("/{db}"), json!(null)).await.status, 201);
    }
    assert_eq!(c.put("/src/a", json!({"x": 1})).await.status, 201);
    for request in [
        json!({"source": "src", "target": "dst", "doc_ids": ["nope"]}),
        json!({"source": "src", "target": "dst", "selector": {"x": 2}}),
    ] {
        let answer = c.post("/_replicate", request.clone()).await;
        assert_eq!(answer.status, 200, "{}", answer.text);
        assert_eq!(
            answer.json(),
            json!({"ok": true, "no_changes": true}),
            "{request}"
        );
    }
    assert_eq!(c.get("/dst/a").await.status, 404);

    let request = json!({"source": "src", "target": "dst"});
    let copied = c.post("/_replicate", request.clone()).await.json();
    assert_eq!(copied["history"][0]["docs_written"], 1, "{copied}");
    let again = c.post("/_replicate", request).await.json();
    assert_eq!(again["no_changes"], true, "{again}");
    assert_eq!(again["history"][0]["docs_written"], 1, "{again}");
    assert!(again["session_id"].is_string(), "{again}");
}

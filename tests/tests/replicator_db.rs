//! Replications described by documents in the `_replicator` database.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::time::Duration;

use recliner_tests::{Client, TempDir, TestServer, compare_dbs, eventually};
use serde_json::{Value, json};
async fn state(c: &Client, id: &str) -> Value {
    c.get(&format!("/_replicator/{id}")).await.json()
}

#[tokio::test]
async fn a_one_shot_document_completes_with_its_stats_written_back() {
    let data = TempDir::new("repdb-once");
    let server = TestServer::start(data.path(), &[]);
    let c = Client::new(&server);
    c.put("/src", json!({})).await;
    for i in 0..10 {
        c.put(&format!("/src/d{i}"), json!({"i": i})).await;
    }
    c.put(
        "/_replicator/once",
        json!({"source": "src", "target": "dst", "create_target": true}),
    )
    .await;
    assert!(
        eventually(10, async || state(&c, "once").await["_replication_state"]
            == "completed")
        .await
    );
    let doc = state(&c, "once").await;
    assert_eq!(doc["_replication_stats"]["docs_written"], 10);
    assert!(
        doc["_replication_state_time"]
            .as_str()
            .unwrap()
            .ends_with('Z')
    );
    compare_dbs(&c, "src", &c, "dst").await;
    // The manager's own write did not start the job again.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(state(&c, "once").await["_rev"], doc["_rev"]);
    // A finished document still names its peers, as CouchDB's do.
    let scheduled = c.get("/_scheduler/docs/_replicator/once").await.json();
    assert_eq!(
        (
            &scheduled["state"],
            &scheduled["source"],
            &scheduled["target"]
        ),
        (&json!("completed"), &json!("src"), &json!("dst")),
        "{scheduled}"
    );
}

#[tokio::test]
async fn invalid_and_duplicate_documents_fail_with_a_reason() {
    let data = TempDir::new("repdb-bad");
    let server = TestServer::start(data.path(), &[]);
    let c = Client::new(&server);
    c.put("/src", json!({})).await;
    c.put(
        "/_replicator/bad",
        json!({"source": "src", "target": "dst", "worker_processes": "many"}),
    )
    .await;
    assert!(
        eventually(10, async || state(&c, "bad").await["_replication_state"]
            == "failed")
        .await
    );
    assert!(
        state(&c, "bad").await["_replication_state_reason"]
            .as_str()
            .unwrap()
            .contains("worker_processes")
    );

    let spec =
        json!({"source": "src", "target": "dst2", "create_target": true, "continuous": true});
    c.put("/_replicator/first", spec.clone()).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    c.put("/_replicator/second", spec).await;
    assert!(
        eventually(10, async || state(&c, "second").await["_replication_state"]
            == "failed")
        .await
    );
    assert!(
        state(&c, "second").await["_replication_state_reason"]
            .as_str()
            .unwrap()
            .contains("already started")
    );
    assert!(
        state(&c, "first").await.get("_replication_state").is_none(),
        "a running continuous job writes no state"
    );
}

#[tokio::test]
async fn a_continuous_document_runs_until_deleted_and_survives_a_kill() {
    let (da, db) = (TempDir::new("repdb-src"), TempDir::new("repdb-runner"));
    let source = TestServer::start(da.path(), &[]);
    let cs = Client::new(&source);
    cs.put("/live", json!({})).await;
    cs.put("/live/a", json!({})).await;

    let runner = TestServer::start(db.path(), &[]);
    let cr = Client::new(&runner);
    let doc = json!({"source": source.url("/live"), "target": "mirror", "create_target": true, "continuous": true,
                     "checkpoint_interval": 50});
    cr.put("/_replicator/live", doc).await;
    assert!(eventually(10, async || cr.get("/mirror/a").await.status == 200).await);
    cs.put("/live/b", json!({})).await;
    assert!(eventually(5, async || cr.get("/mirror/b").await.status == 200).await);

    // SIGKILL the runner; on restart the job resumes from its checkpoint by itself.
    tokio::time::sleep(Duration::from_millis(300)).await;
    std::process::Command::new("kill")
        .args(["-9", &runner.pid().to_string()])
        .status()
        .unwrap();
    drop(runner);
    cs.put("/live/c", json!({})).await;
    let runner = TestServer::start(db.path(), &[]);
    let cr = Client::new(&runner);
    assert!(eventually(10, async || cr.get("/mirror/c").await.status == 200).await);
    compare_dbs(&cs, "live", &cr, "mirror").await;
    // Resumed from its checkpoint: the counters carry on from it (3 written
    // in all). Started from scratch, it would count only `c` (1).
    assert!(
        eventually(5, async || {
            let info = cr.get("/_scheduler/docs/_replicator/live").await.json()["info"].clone();
            info["docs_written"] == 3 && info["missing_revisions_found"] == 3
        })
        .await,
        "{}",
        cr.get("/_scheduler/docs/_replicator/live").await.text
    );

    // Deleting the document stops the job.
    let rev = cr.get("/_replicator/live").await.json()["_rev"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        cr.delete(&format!("/_replicator/live?rev={rev}"))
            .await
            .status,
        200
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    cs.put("/live/after", json!({})).await;
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(cr.get("/mirror/after").await.status, 404);
}

#[tokio::test]
async fn running_jobs_show_in_active_tasks_and_the_scheduler_without_credentials() {
    let (da, db) = (TempDir::new("tasks-src"), TempDir::new("tasks-runner"));
    // Both servers require logins: the jobs log in with these credentials.
    let source =
        TestServer::start_with_env(da.path(), &[], &[("RECLINER_ADMIN", "alice:pa55word")]);
    let cs = Client::new(&source);
    cs.put("/live", json!({})).await;
    cs.put("/live/a", json!({})).await;
    let runner = TestServer::start_with_env(db.path(), &[], &[("RECLINER_ADMIN", "u:hunter2")]);
    let cr = Client::new(&runner);
    let url = source.url("/live");
    assert!(url.contains("alice:pa55word@"), "{url}");
    // The second job reads m1, so it must exist before that job starts.
    cr.put("/m1", json!({})).await;
    cr.put(
        "/_replicator/doc-job",
        json!({"source": url, "target": "m1", "create_target": true, "continuous": true}),
    )
    .await;
    let started = cr
        .post("/_replicate", json!({"source": "m1", "target": {"url": runner.url("/m2"), "auth": {"basic": {"username": "u", "password": "hunter2"}}}, "create_target": true, "continuous": true}))
        .await;
    assert_eq!(started.status, 202, "{}", started.text);
    assert!(eventually(10, async || cr.get("/m1/a").await.status == 200).await);
    assert!(
        eventually(10, async || {
            let tasks = cr.get("/_active_tasks").await.json();
            tasks.as_array().unwrap().len() == 2
                && tasks
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|t| t["doc_id"] == "doc-job" && t["docs_written"] == 1)
        })
        .await
    );
    let tasks = cr.get("/_active_tasks").await;
    let jobs = cr.get("/_scheduler/jobs").await;
    assert_eq!(jobs.json()["total_rows"], 2);
    assert!(
        jobs.json()["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .any(|j| j["doc_id"] == "doc-job" && j["database"] == "_replicator")
    );
    for text in [&tasks.text, &jobs.text] {
        assert!(
            !text.contains("pa55word") && !text.contains("hunter2"),
            "credentials leaked: {text}"
        );
        assert!(text.contains("\"type\":\"replication\"") || text.contains("\"jobs\""));
    }
}

#[tokio::test]
async fn a_document_whose_headers_no_request_can_carry_fails_at_once() {
    let data = TempDir::new("repdb-bad-headers");
    let server = TestServer::start(data.path(), &[]);
    let c = Client::new(&server);
    c.put("/src", json!({})).await;
    c.put(
        "/_replicator/injected",
        json!({"source": {"url": server.url("/src"), "headers": {"X-Bad": "a\r\nInjected: yes"}}, "target": "dst", "create_target": true, "continuous": true}),
    )
    .await;
    assert!(
        eventually(
            2,
            async || state(&c, "injected").await["_replication_state"] == "failed"
        )
        .await,
        "{}",
        state(&c, "injected").await
    );
    let reason = state(&c, "injected").await["_replication_state_reason"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        reason.contains("`source.headers`") && reason.contains("\"X-Bad\""),
        "{reason}"
    );
    let docs = c.get("/_scheduler/docs/_replicator/injected").await.json();
    assert_eq!(docs["state"], "failed", "{docs}");
    assert_eq!(c.get("/_scheduler/jobs").await.json()["total_rows"], 0);
    assert_eq!(c.get("/dst").await.status, 404, "the job never ran");
}

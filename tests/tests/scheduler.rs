//! The replication scheduler seen from outside: `max_jobs` and rotation,
//! `_scheduler/docs` and `_scheduler/jobs` states and shapes, crashing jobs,
//! and no credentials anywhere (answers or logs).

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::collections::HashSet;
use std::time::{Duration, Instant};

use recliner_tests::{Client, TempDir, TestServer, eventually};
use serde_json::{Value, json};
async fn sched_doc(c: &Client, id: &str) -> Value {
    c.get(&format!("/_scheduler/docs/_replicator/{id}"))
        .await
        .json()
}

/// A TCP port nothing listens on.
fn dead_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

#[tokio::test]
async fn with_max_jobs_two_five_continuous_documents_all_make_progress() {
    let data = TempDir::new("sched-rotate");
    let server = TestServer::start_with_env(
        data.path(),
        &[],
        &[
            ("RECLINER_REPLICATOR_MAX_JOBS", "2"),
            ("RECLINER_REPLICATOR_INTERVAL_MS", "700"),
        ],
    );
    let c = Client::new(&server);
    for i in 0..5 {
        c.put(&format!("/s{i}"), json!({})).await;
        c.put(&format!("/t{i}"), json!({})).await;
        c.put(
            &format!("/_replicator/r{i}"),
            json!({"source": format!("s{i}"), "target": format!("t{i}"), "continuous": true,
                   "checkpoint_interval": 100}),
        )
        .await;
    }
    // Never more than two run; the others wait as pending.
    let mut seen_running = HashSet::new();
    let mut seen_pending = false;
    let mut round = 0;
    let deadline = Instant::now() + Duration::from_secs(40);
    let mut delivered = [0usize; 5];
    while delivered.iter().any(|n| *n < 3) {
        assert!(
            Instant::now() < deadline,
            "not every job progressed: {delivered:?}"
        );
        // Every source keeps getting new documents.
        for i in 0..5 {
            c.put(&format!("/s{i}/doc{round}"), json!({"round": round}))
                .await;
        }
        round += 1;
        let docs = c.get("/_scheduler/docs").await.json();
        let states: Vec<(String, String)> = docs["docs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| {
                (
                    d["doc_id"].as_str().unwrap().to_string(),
                    d["state"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        // Parked jobs show as running, and idle: they hold no slot.
        let moving = docs["docs"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| d["state"] == "running" && d["idle"] != true)
            .count();
        assert!(moving <= 2, "more than max_jobs run: {docs}");
        seen_pending |= states.iter().any(|(_, s)| s == "pending");
        for (id, s) in &states {
            if s == "running" {
                seen_running.insert(id.clone());
            }
        }
        for (i, n) in delivered.iter_mut().enumerate() {
            let info = c.get(&format!("/t{i}")).await.json();
            *n = info["doc_count"].as_u64().unwrap() as usize;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert!(seen_pending, "some job should have waited as pending");
    assert_eq!(seen_running.len(), 5, "every job ran at some point");
    let jobs = c.get("/_scheduler/jobs").await.json();
    assert_eq!(jobs["total_rows"], 5);
    // Rotation shows in the histories: stopped and started again.
    assert!(jobs["jobs"].as_array().unwrap().iter().any(|j| {
        j["history"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["type"] == "stopped")
    }));
}

#[tokio::test]
async fn scheduler_docs_show_each_state_in_couchdbs_shape() {
    let data = TempDir::new("sched-docs");
    let server = TestServer::start(data.path(), &[]);
    let c = Client::new(&server);
    c.put("/src", json!({})).await;
    c.put("/src/a", json!({})).await;
    c.put(
        "/_replicator/once",
        json!({"source": "src", "target": "once-t", "create_target": true}),
    )
    .await;
    c.put(
        "/_replicator/live",
        json!({"source": "src", "target": "live-t", "create_target": true, "continuous": true}),
    )
    .await;
    c.put("/_replicator/bad", json!({"source": "src", "target": 7}))
        .await;
    let dead = format!("http://127.0.0.1:{}/nowhere", dead_port());
    c.put(
        "/_replicator/down",
        json!({"source": dead, "target": "down-t", "retries_per_request": 0}),
    )
    .await;

    assert!(
        eventually(10, async || sched_doc(&c, "once").await["state"]
            == "completed")
        .await
    );
    let once = sched_doc(&c, "once").await;
    assert_eq!(once["database"], "_replicator");
    assert_eq!(once["info"]["docs_written"], 1);
    assert!(once["last_updated"].as_str().unwrap().ends_with('Z'));

    assert!(
        eventually(10, async || sched_doc(&c, "live").await["state"]
            == "running")
        .await
    );
    let live = sched_doc(&c, "live").await;
    assert!(
        live["id"]
            .as_str()
            .unwrap()
            .ends_with("+continuous+create_target")
    );
    assert_eq!(live["source"], "src");
    assert_eq!(live["error_count"], 0);
    assert!(
        eventually(
            10,
            async || sched_doc(&c, "live").await["info"]["docs_written"] == 1
        )
        .await
    );
    assert_eq!(sched_doc(&c, "live").await["info"]["changes_pending"], 0);

    assert!(eventually(10, async || sched_doc(&c, "bad").await["state"] == "failed").await);
    assert!(
        sched_doc(&c, "bad").await["info"]["error"]
            .as_str()
            .unwrap()
            .contains("target")
    );

    assert!(
        eventually(10, async || sched_doc(&c, "down").await["state"]
            == "crashing")
        .await
    );
    let down = sched_doc(&c, "down").await;
    assert_eq!(down["error_count"], 1);
    assert!(down["info"]["error"].as_str().unwrap().contains("nowhere"));
    let job = c
        .get(&format!(
            "/_scheduler/jobs/{}",
            down["id"].as_str().unwrap()
        ))
        .await
        .json();
    let kinds: Vec<&str> = job["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["crashed", "started", "added"]);
    assert!(job["pid"].is_null(), "a crashing job has no running task");

    // The states filter, and its refusal of unknown states.
    let running = c.get("/_scheduler/docs?states=running").await.json();
    assert_eq!(running["total_rows"], 1);
    assert_eq!(running["docs"][0]["doc_id"], "live");
    let some = c
        .get("/_scheduler/docs/_replicator?states=completed,FAILED")
        .await
        .json();
    assert_eq!(some["total_rows"], 2);
    let refused = c.get("/_scheduler/docs?states=sleeping").await;
    assert_eq!(refused.status, 400);
    assert_eq!(refused.json()["error"], "query_parse_error");
    let page = c.get("/_scheduler/docs?limit=1&skip=1").await.json();
    assert_eq!(page["docs"].as_array().unwrap().len(), 1);
    assert_eq!(page["offset"], 1);
    assert_eq!(page["total_rows"], 4);

    assert_eq!(c.get("/_scheduler/docs/_replicator/nope").await.status, 404);
    assert_eq!(c.get("/_scheduler/jobs/nope").await.status, 404);
    assert_eq!(c.get("/_scheduler/docs/notarepdb").await.status, 400);
    assert_eq!(c.get("/_scheduler/whatever").await.status, 404);

    // Only running jobs are active tasks.
    let tasks = c.get("/_active_tasks").await.json();
    let ids: Vec<&str> = tasks
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["doc_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["live"]);
    // A running job's sequences are never null: a client reads them back
    // as `since`, and CouchDB refuses `since=null`.
    for task in tasks.as_array().unwrap() {
        for field in ["through_seq", "checkpointed_source_seq", "source_seq"] {
            assert!(!task[field].is_null(), "{field} in {task}");
        }
    }

    // Editing the continuous document restarts its job with the new spec.
    let rev = c.get("/_replicator/live").await.json()["_rev"].clone();
    c.put(
        "/_replicator/live",
        json!({"_rev": rev, "source": "src", "target": "live-t2", "create_target": true, "continuous": true}),
    )
    .await;
    assert!(eventually(10, async || c.get("/live-t2/a").await.status == 200).await);
    let live = sched_doc(&c, "live").await;
    assert_eq!(live["state"], "running");
    assert_eq!(c.get("/_scheduler/jobs").await.json()["total_rows"], 2);
}

#[tokio::test]
async fn passwords_never_show_in_answers_or_logs() {
    let (da, db) = (TempDir::new("secret-src"), TempDir::new("secret-runner"));
    // The source requires logins: alice is its admin, bob a member of `live`.
    let source =
        TestServer::start_with_env(da.path(), &[], &[("RECLINER_ADMIN", "alice:pa55word")]);
    let cs = Client::new(&source);
    cs.put("/live", json!({})).await;
    cs.put("/live/a", json!({})).await;
    cs.put(
        "/_users/org.couchdb.user:bob",
        json!({"name": "bob", "password": "hunter2", "roles": [], "type": "user"}),
    )
    .await;
    cs.put("/live/_security", json!({"members": {"names": ["bob"]}}))
        .await;
    let runner = TestServer::start(db.path(), &[]);
    let cr = Client::new(&runner);

    let in_url = source.url("/live");
    assert!(in_url.contains("alice:pa55word@"), "{in_url}");
    cr.put(
        "/_replicator/by-url",
        json!({"source": in_url, "target": "m1", "create_target": true, "continuous": true}),
    )
    .await;
    cr.put(
        "/_replicator/by-auth",
        json!({"source": {"url": source.plain_url.clone() + "/live", "auth": {"basic": {"username": "bob", "password": "hunter2"}}},
               "target": "m2", "create_target": true, "continuous": true}),
    )
    .await;
    let dead = format!("http://carol:s3cr3t@127.0.0.1:{}/gone", dead_port());
    cr.put(
        "/_replicator/crashing",
        json!({"source": dead, "target": "m3", "retries_per_request": 0}),
    )
    .await;
    // A failed /_replicate names the side without its credentials.
    let failed = cr
        .post(
            "/_replicate",
            json!({"source": source.url("/missing").replace("http://", "http://dave:0pen5esame@"), "target": "m4"}),
        )
        .await;
    assert_eq!(failed.status, 500);
    // The source has no such user: it refuses the login before the database is looked up.
    let error = failed.json()["error"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        ["db_not_found", "replication_failed"].contains(&error.as_str()),
        "{}",
        failed.text
    );
    let bad = cr
        .post(
            "/_replicate",
            json!({"source": "http://erin:c0rrect@127.0.0.1:1/x", "target": {"url": 5}}),
        )
        .await;
    assert_eq!(bad.status, 400);

    assert!(
        eventually(10, async || cr.get("/m1/a").await.status == 200
            && cr.get("/m2/a").await.status == 200)
        .await
    );
    assert!(
        eventually(10, async || sched_doc(&cr, "crashing").await["state"]
            == "crashing")
        .await
    );
    let answers = [
        cr.get("/_active_tasks").await.text,
        cr.get("/_scheduler/jobs").await.text,
        cr.get("/_scheduler/docs").await.text,
        cr.get("/_scheduler/docs/_replicator/crashing").await.text,
        failed.text,
        bad.text,
    ];
    // Stop the runner so every log line is flushed.
    let logs = {
        let logs_before = runner.logs();
        runner.stop();
        logs_before
    };
    for secret in ["pa55word", "hunter2", "s3cr3t", "0pen5esame", "c0rrect"] {
        for text in &answers {
            assert!(!text.contains(secret), "{secret} leaked in {text}");
        }
        assert!(!logs.contains(secret), "{secret} leaked in the logs");
    }
    assert!(logs.contains("replication started"), "the logs name jobs");
    assert!(answers[1].contains("127.0.0.1"), "sources are still shown");
}

/// Jobs stuck in a request to a peer that never answers do not hold the
/// shutdown: with nothing read yet there is nothing to checkpoint.
#[tokio::test]
async fn jobs_waiting_on_a_silent_peer_let_the_server_stop_at_once() {
    let data = TempDir::new("sched-silent-stop");
    let server = TestServer::start(data.path(), &[]);
    let c = Client::new(&server);
    let port = recliner_tests::silent_peer();
    for i in 0..3 {
        let doc = json!({"source": format!("http://127.0.0.1:{port}/db{i}"), "target": format!("t{i}"),
                         "create_target": true, "continuous": true});
        assert_eq!(c.put(&format!("/_replicator/r{i}"), doc).await.status, 201);
    }
    assert!(
        eventually(10, async || {
            let docs = c.get("/_scheduler/docs/_replicator").await.json();
            docs["docs"]
                .as_array()
                .is_some_and(|d| d.len() == 3 && d.iter().all(|d| d["state"] == "running"))
        })
        .await
    );
    let asked = Instant::now();
    assert!(server.stop().success());
    assert!(
        asked.elapsed() < Duration::from_secs(5),
        "stopping took {:?}",
        asked.elapsed()
    );
}

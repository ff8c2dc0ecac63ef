//! Continuous replications that have caught up park: they hold no running
//! slot and wake when their source changes, locally through the store's
//! commits, remotely through a changes feed. Against the real binary.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use recliner_tests::{Client, TempDir, TestServer, eventually};
use serde_json::{Value, json};

async fn jobs(c: &Client) -> Vec<Value> {
    c.get("/_scheduler/jobs").await.json()["jobs"]
        .as_array()
        .unwrap()
        .clone()
}

async fn all_idle(c: &Client, count: usize) -> bool {
    let jobs = jobs(c).await;
    jobs.len() == count && jobs.iter().all(|j| j["idle"] == true)
}

async fn doc_count(c: &Client, db: &str) -> u64 {
    c.get(&format!("/{db}")).await.json()["doc_count"]
        .as_u64()
        .unwrap_or(0)
}

/// Whether databases `{prefix}0`..`{prefix}{count - 1}` each hold `docs` documents.
async fn all_hold(c: &Client, prefix: &str, count: usize, docs: u64) -> bool {
    for i in 0..count {
        if doc_count(c, &format!("{prefix}{i}")).await != docs {
            return false;
        }
    }
    true
}

/// Eight continuous jobs with `max_jobs` at two: once caught up every one
/// is parked (running and idle, CouchDB-shaped), and a change to any
/// source arrives within seconds, not after a rotation interval.
#[tokio::test]
async fn parked_jobs_wake_when_their_local_source_changes() {
    let data = TempDir::new("park-local");
    let server = TestServer::start_with_env(
        data.path(),
        &[],
        &[
            ("RECLINER_REPLICATOR_MAX_JOBS", "2"),
            // Rotation alone would take minutes.
            ("RECLINER_REPLICATOR_INTERVAL_MS", "600000"),
        ],
    );
    let c = Client::new(&server);
    for i in 0..8 {
        c.put(&format!("/src{i}"), json!({})).await;
        c.put(&format!("/src{i}/first"), json!({"i": i})).await;
        let doc = json!({"source": format!("src{i}"), "target": format!("dst{i}"),
                         "create_target": true, "continuous": true});
        assert_eq!(
            c.put(&format!("/_replicator/job{i}"), doc).await.status,
            201
        );
    }
    assert!(
        eventually(30, async || all_idle(&c, 8).await).await,
        "{:?}",
        jobs(&c).await
    );
    for i in 0..8 {
        assert_eq!(doc_count(&c, &format!("dst{i}")).await, 1);
    }
    let job = &jobs(&c).await[0];
    assert!(job["pid"].is_string() && job["history"].is_array(), "{job}");
    let docs = c.get("/_scheduler/docs").await.json();
    for doc in docs["docs"].as_array().unwrap() {
        assert_eq!(
            (&doc["state"], &doc["idle"]),
            (&json!("running"), &json!(true)),
            "{doc}"
        );
    }
    // `_active_tasks` keeps CouchDB's shape: no extra field.
    for task in c.get("/_active_tasks").await.json().as_array().unwrap() {
        assert!(task.get("idle").is_none(), "{task}");
        assert_eq!(task["type"], "replication");
    }

    // One change to every source, in reverse order of the jobs' starts.
    for i in (0..8).rev() {
        c.put(&format!("/src{i}/second"), json!({"i": i})).await;
    }
    assert!(
        eventually(15, async || all_hold(&c, "dst", 8, 2).await).await,
        "not every change arrived: {:?}",
        jobs(&c).await
    );
    // Never more than `max_jobs` moved data at once, and all park again.
    assert!(eventually(30, async || all_idle(&c, 8).await).await);
    let _ = server;
}

/// Jobs whose source is on another server park too, each following that
/// source's changes feed, and wake on its next change.
#[tokio::test]
async fn parked_jobs_wake_when_their_remote_source_changes() {
    let (a_data, b_data) = (TempDir::new("park-remote-a"), TempDir::new("park-remote-b"));
    let a = TestServer::start(a_data.path(), &[]);
    let b =
        TestServer::start_with_env(b_data.path(), &[], &[("RECLINER_REPLICATOR_MAX_JOBS", "1")]);
    let (ca, cb) = (Client::new(&a), Client::new(&b));
    for i in 0..3 {
        ca.put(&format!("/remote{i}"), json!({})).await;
        ca.put(&format!("/remote{i}/first"), json!({})).await;
        let doc = json!({"source": format!("{}/remote{i}", a.url), "target": format!("copy{i}"),
                         "create_target": true, "continuous": true});
        assert_eq!(
            cb.put(&format!("/_replicator/pull{i}"), doc).await.status,
            201
        );
    }
    assert!(
        eventually(30, async || all_idle(&cb, 3).await).await,
        "{:?}",
        jobs(&cb).await
    );
    // No credentials anywhere in what the scheduler shows.
    let shown = cb.get("/_scheduler/jobs").await.text;
    assert!(!shown.contains(recliner_tests::ADMIN_PASSWORD), "{shown}");
    // The three parked jobs share one `_db_updates` feed of the source server.
    let feeds = || a.logs().matches("path=/_db_updates ").count();
    assert!(eventually(10, async || feeds() >= 1).await);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(feeds(), 1, "one feed for the server");
    for i in 0..3 {
        ca.put(&format!("/remote{i}/second"), json!({})).await;
    }
    assert!(
        eventually(15, async || all_hold(&cb, "copy", 3, 2).await).await,
        "{:?}",
        jobs(&cb).await
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
}

/// Where the credentials do not allow the server's `_db_updates` (a user
/// who is no server admin), each parked job follows its own source.
#[tokio::test]
async fn parked_jobs_of_a_user_without_the_server_feed_still_wake() {
    let (a_data, b_data) = (TempDir::new("park-user-a"), TempDir::new("park-user-b"));
    let a = TestServer::start(a_data.path(), &[]);
    let b = TestServer::start(b_data.path(), &[]);
    let (ca, cb) = (Client::new(&a), Client::new(&b));
    ca.put(
        "/_users/org.couchdb.user:carol",
        json!({"name": "carol", "password": "carolpw", "roles": [], "type": "user"}),
    )
    .await;
    let carols = a.plain_url.replace("http://", "http://carol:carolpw@");
    for i in 0..2 {
        ca.put(&format!("/own{i}"), json!({})).await;
        ca.put(
            &format!("/own{i}/_security"),
            json!({"members": {"names": ["carol"]}}),
        )
        .await;
        ca.put(&format!("/own{i}/first"), json!({})).await;
        let doc = json!({"source": format!("{carols}/own{i}"), "target": format!("mine{i}"),
                         "create_target": true, "continuous": true});
        assert_eq!(
            cb.put(&format!("/_replicator/own{i}"), doc).await.status,
            201
        );
    }
    assert!(
        eventually(30, async || all_idle(&cb, 2).await).await,
        "{:?}",
        jobs(&cb).await
    );
    // The feed was asked for and refused; the jobs wait on their own.
    assert!(
        eventually(10, async || a.logs().lines().any(|l| l
            .contains("path=/_db_updates ")
            && l.contains("status=401")))
        .await
    );
    for i in 0..2 {
        ca.put(&format!("/own{i}/second"), json!({})).await;
    }
    assert!(
        eventually(15, async || all_hold(&cb, "mine", 2, 2).await).await,
        "{:?}",
        jobs(&cb).await
    );
}

/// A job that never runs out of work cannot hold back jobs with one change
/// each: a woken job takes the slot of one that has had its first turn.
#[tokio::test]
async fn a_busy_job_cannot_starve_woken_ones() {
    let data = TempDir::new("park-starve");
    let server = TestServer::start_with_env(
        data.path(),
        &[],
        &[
            ("RECLINER_REPLICATOR_MAX_JOBS", "1"),
            ("RECLINER_REPLICATOR_INTERVAL_MS", "600000"),
            ("RECLINER_REPLICATOR_FIRST_TURN_MS", "300"),
        ],
    );
    let c = Client::new(&server);
    for i in 0..4 {
        c.put(&format!("/small{i}"), json!({})).await;
        c.put(&format!("/small{i}/first"), json!({})).await;
        let doc = json!({"source": format!("small{i}"), "target": format!("small-copy{i}"),
                         "create_target": true, "continuous": true});
        c.put(&format!("/_replicator/small{i}"), doc).await;
    }
    assert!(eventually(30, async || all_idle(&c, 4).await).await);

    // A source that is written all the time: its job never parks.
    c.put("/busy", json!({})).await;
    let writer = {
        let c = c.clone();
        tokio::spawn(async move {
            for round in 0.. {
                let docs: Vec<Value> = (0..200)
                    .map(|i| json!({"_id": format!("r{round}-{i}")}))
                    .collect();
                c.post("/busy/_bulk_docs", json!({"docs": docs})).await;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };
    let doc = json!({"source": "busy", "target": "busy-copy", "create_target": true,
                     "continuous": true});
    c.put("/_replicator/busy", doc).await;
    assert!(eventually(10, async || doc_count(&c, "busy-copy").await > 0).await);

    for i in 0..4 {
        c.put(&format!("/small{i}/second"), json!({})).await;
    }
    let delivered = eventually(20, async || all_hold(&c, "small-copy", 4, 2).await).await;
    writer.abort();
    assert!(delivered, "{:?}", jobs(&c).await);
    // The busy job gave way, and runs again.
    let busy = jobs(&c)
        .await
        .into_iter()
        .find(|j| j["doc_id"] == "busy")
        .unwrap();
    assert!(
        busy["history"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["type"] == "stopped"),
        "{busy}"
    );
}

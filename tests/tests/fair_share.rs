//! Replicator databases other than `_replicator` (`*/_replicator`), and
//! the fair share of running slots between them (`[replicator.shares]`).
//! Against the real binary.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::collections::HashMap;
use std::time::Duration;

use recliner_tests::{Client, TempDir, TestServer, eventually, silent_peer};
use serde_json::{Value, json};

async fn scheduler_doc(c: &Client, db: &str, id: &str) -> Value {
    c.get(&format!("/_scheduler/docs/{}/{id}", db.replace('/', "%2F")))
        .await
        .json()
}

/// A document in `team/_replicator` runs as one in `_replicator` does:
/// `_scheduler/docs` shows it under its database, the final state is
/// written back into it, a replicator database created while the server
/// runs is followed at once, and deleting one cancels its jobs.
#[tokio::test]
async fn documents_in_any_replicator_database_run_and_go_with_it() {
    let data = TempDir::new("share-dbs");
    let server = TestServer::start(data.path(), &[]);
    let c = Client::new(&server);
    c.put("/src", json!({})).await;
    for i in 0..3 {
        c.put(&format!("/src/d{i}"), json!({"i": i})).await;
    }
    assert_eq!(c.put("/team%2F_replicator", json!({})).await.status, 201);
    let once = json!({"source": "src", "target": "copy", "create_target": true});
    assert_eq!(c.put("/team%2F_replicator/once", once).await.status, 201);
    assert!(
        eventually(20, async || {
            c.get("/team%2F_replicator/once").await.json()["_replication_state"] == "completed"
        })
        .await,
        "{}",
        c.get("/team%2F_replicator/once").await.json()
    );
    assert_eq!(c.get("/copy").await.json()["doc_count"], 3);
    let shown = scheduler_doc(&c, "team/_replicator", "once").await;
    assert_eq!(
        (&shown["database"], &shown["state"]),
        (&json!("team/_replicator"), &json!("completed"))
    );
    // Not listed under `_replicator`.
    let plain = c.get("/_scheduler/docs").await.json();
    assert_eq!(plain["total_rows"], 0, "{plain}");

    // A continuous job from a database that then goes away.
    let live =
        json!({"source": "src", "target": "live", "create_target": true, "continuous": true});
    assert_eq!(c.put("/team%2F_replicator/live", live).await.status, 201);
    assert!(
        eventually(20, async || {
            c.get("/live").await.json()["doc_count"] == 3
        })
        .await
    );
    assert_eq!(
        c.get("/_scheduler/jobs").await.json()["jobs"][0]["database"],
        "team/_replicator"
    );
    assert_eq!(c.delete("/team%2F_replicator").await.status, 200);
    assert!(
        eventually(10, async || {
            c.get("/_scheduler/jobs").await.json()["total_rows"] == 0
        })
        .await,
        "{}",
        c.get("/_scheduler/jobs").await.json()
    );
    assert!(
        eventually(10, async || {
            c.get("/_scheduler/docs/team%2F_replicator").await.json()["total_rows"] == 0
        })
        .await
    );
    // Its jobs no longer run: new source documents stay where they are.
    c.put("/src/late", json!({})).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(c.get("/live").await.json()["doc_count"], 3);
}

/// `team/_replicator` documents are other users' as `_replicator` ones
/// are: a member who is not an admin sees no credentials but their own.
#[tokio::test]
async fn other_users_credentials_are_hidden_in_any_replicator_database() {
    let data = TempDir::new("share-access");
    let server = TestServer::start(data.path(), &[]);
    let admin = Client::new(&server);
    assert_eq!(admin.put("/ops%2F_replicator", json!({})).await.status, 201);
    admin
        .put(
            "/ops%2F_replicator/_security",
            json!({"members": {"names": ["bob"]}}),
        )
        .await;
    admin
        .put(
            "/_users/org.couchdb.user:bob",
            json!({"name": "bob", "password": "bobpass", "roles": [], "type": "user"}),
        )
        .await;
    let secret = json!({"source": "http://alice:secret@127.0.0.1:1/a", "target": "b"});
    assert_eq!(admin.put("/ops%2F_replicator/r", secret).await.status, 201);
    let bob = Client::at(&server.plain_url.replace("http://", "http://bob:bobpass@"));
    let seen = bob.get("/ops%2F_replicator/r").await;
    assert_eq!(seen.status, 200);
    let source = seen.json()["source"].as_str().unwrap().to_string();
    assert!(!source.contains("secret"), "{source}");
    // Listing every document is for admins there, as in `_replicator`.
    assert_eq!(bob.get("/ops%2F_replicator/_all_docs").await.status, 401);
}

/// Running jobs per replicator database, from `_scheduler/jobs`.
async fn running_by_db(c: &Client) -> HashMap<String, u32> {
    let mut running = HashMap::new();
    for job in c.get("/_scheduler/jobs").await.json()["jobs"]
        .as_array()
        .unwrap()
    {
        let state = job["history"][0]["type"].as_str().unwrap_or("");
        if state == "started" {
            *running
                .entry(job["database"].as_str().unwrap_or("").to_string())
                .or_default() += 1;
        }
    }
    running
}

/// The running jobs of `small/_replicator` and `big/_replicator` summed
/// over 60 looks 100 ms apart, and big's over small's.
async fn slots_held(c: &Client) -> (u32, u32, f64) {
    let (mut small, mut big) = (0, 0);
    // Twelve seconds of turns: a shorter window (six) once caught one
    // database through a stretch of its jobs' restarts (4.7 for 3).
    for _ in 0..120 {
        let running = running_by_db(c).await;
        small += running.get("small/_replicator").copied().unwrap_or(0);
        big += running.get("big/_replicator").copied().unwrap_or(0);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    (small, big, f64::from(big) / f64::from(small.max(1)))
}

/// Two replicator databases with shares 1:3, each with more jobs than
/// slots, share the slots 1:3 over many turns (as CouchDB 3.3's fair
/// share does), whatever their number of jobs. The shares are set through
/// CouchDB's configuration API and kept in the configuration file.
#[tokio::test]
async fn slots_are_shared_one_to_three_between_two_replicator_databases() {
    let data = TempDir::new("share-slots");
    let server = TestServer::start_with_env(
        data.path(),
        &[],
        &[
            ("RECLINER_REPLICATOR_MAX_JOBS", "4"),
            ("RECLINER_REPLICATOR_INTERVAL_MS", "200"),
        ],
    );
    let c = Client::new(&server);
    let config = "/_node/_local/_config/replicator.shares";
    assert_eq!(
        c.put(&format!("{config}/small%2F_replicator"), json!("100"))
            .await
            .status,
        200
    );
    assert_eq!(
        c.put(&format!("{config}/big%2F_replicator"), json!("300"))
            .await
            .status,
        200
    );
    assert_eq!(
        c.get(config).await.json(),
        json!({"big/_replicator": "300", "small/_replicator": "100"})
    );
    let refused = c
        .put(&format!("{config}/big%2F_replicator"), json!("lots"))
        .await;
    assert_eq!(refused.status, 400, "{}", refused.text);
    let file = std::fs::read_to_string(data.path().join("recliner.toml")).unwrap();
    assert!(file.contains("[replicator_shares]"), "{file}");

    let port = silent_peer();
    // The small database has more jobs: shares, not job counts, decide.
    for (db, jobs) in [("small", 12), ("big", 6)] {
        assert_eq!(
            c.put(&format!("/{db}%2F_replicator"), json!({}))
                .await
                .status,
            201
        );
        for i in 0..jobs {
            let doc = json!({"source": format!("http://127.0.0.1:{port}/{db}{i}"),
                             "target": format!("{db}-t{i}"), "continuous": true,
                             "connection_timeout": 600000});
            let put = c.put(&format!("/{db}%2F_replicator/r{i}"), doc).await;
            assert_eq!(put.status, 201);
        }
    }
    assert!(
        eventually(20, async || {
            c.get("/_scheduler/jobs").await.json()["total_rows"] == 18
        })
        .await
    );
    // Let the priorities settle, then count who holds the slots.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (small, big, ratio) = slots_held(&c).await;
    assert!(
        (2.2..=4.2).contains(&ratio),
        "slots held: small {small}, big {big} (ratio {ratio:.2})"
    );

    // Back to equal shares: the databases take turns equally.
    assert_eq!(
        c.delete(&format!("{config}/big%2F_replicator"))
            .await
            .status,
        200
    );
    tokio::time::sleep(Duration::from_secs(4)).await;
    let (small, big, ratio) = slots_held(&c).await;
    assert!(
        (0.6..=1.6).contains(&ratio),
        "slots held with equal shares: small {small}, big {big} (ratio {ratio:.2})"
    );
}

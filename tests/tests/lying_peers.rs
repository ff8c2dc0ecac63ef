//! The replicator against peers that lie or never stop talking: answers
//! that never end cost the replicating server no more than a bounded
//! buffer, and a target that claims documents outside the replication is
//! sent nothing of them.

use std::time::{Duration, Instant};

use recliner_tests::hostile::{Answer, HostilePeer, Received};
use recliner_tests::{Client, TempDir, TestServer};
use serde_json::{Value, json};

/// The server's resident memory, in bytes (Linux).
fn resident(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|kb| kb.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

const MIB: u64 = 1 << 20;

fn info(db: &str) -> Answer {
    Answer::json(
        200,
        json!({"db_name": db, "update_seq": "1", "instance_start_time": "0"}),
    )
}

fn not_found() -> Answer {
    Answer::json(404, json!({"error": "not_found", "reason": "missing"}))
}

/// A source that answers `_changes` (and its documents) as `changes` and
/// `docs` say, and the rest as a plain CouchDB would.
fn source(
    changes: impl Fn() -> Answer + Send + Sync + 'static,
    docs: impl Fn() -> Answer + Send + Sync + 'static,
) -> impl Fn(&Received) -> Answer + Send + Sync + 'static {
    move |request: &Received| {
        let path = request.path.as_str();
        if path == "/" {
            Answer::json(200, json!({"couchdb": "Welcome", "version": "3.5.0"}))
        } else if path.starts_with("/db/_changes") {
            changes()
        } else if path.starts_with("/db/_bulk_get") || path.starts_with("/db/big") {
            docs()
        } else if path.starts_with("/db/_local/") {
            not_found()
        } else if path == "/db/" || path == "/db" {
            info("db")
        } else {
            not_found()
        }
    }
}

fn endless(prefix: &str, repeat: &str) -> Answer {
    Answer::Endless {
        prefix: prefix.as_bytes().to_vec(),
        repeat: repeat.repeat(4096).into_bytes(),
    }
}

/// Runs a one-shot replication from `peer` into a local database,
/// watching the server's memory; returns the answer and the growth.
async fn replicate_from(
    server: &TestServer,
    peer: &HostilePeer,
    target: &str,
) -> (u16, String, u64) {
    let admin = Client::new(server);
    let pid = server.pid();
    let start = resident(pid);
    let spec = json!({"source": peer.url("db"), "target": target, "create_target": true,
                      "connection_timeout": 60000, "retries_per_request": 1});
    let request = admin.post("/_replicate", spec);
    tokio::pin!(request);
    let mut peak = start;
    let began = Instant::now();
    let answer = loop {
        tokio::select! {
            answer = &mut request => break answer,
            () = tokio::time::sleep(Duration::from_millis(20)) => {
                peak = peak.max(resident(pid));
                assert!(began.elapsed() < Duration::from_secs(120), "the replication never ends");
            }
        }
    };
    peak = peak.max(resident(pid));
    (answer.status, answer.text, peak.saturating_sub(start))
}

#[tokio::test]
async fn endless_and_giant_answers_fail_the_job_within_bounded_memory() {
    let data = TempDir::new("lying-peers-endless");
    let server = TestServer::start(data.path(), &[]);
    let row = r#"{"seq":"1","id":"x","changes":[{"rev":"1-a"}]},"#;
    let big_change = || {
        Answer::json(
            200,
            json!({"results": [{"seq": "1", "id": "big", "changes": [{"rev": "1-abc"}]}], "last_seq": "1"}),
        )
    };
    let cases: Vec<(&str, HostilePeer)> = vec![
        (
            "database info that never ends",
            HostilePeer::start(|request: &Received| {
                if request.path == "/db/" || request.path == "/db" {
                    endless(r#"{"db_name":"db","pad":""#, "a")
                } else {
                    not_found()
                }
            })
            .await,
        ),
        (
            "changes that never end",
            HostilePeer::start(source(|| endless(r#"{"results":["#, row), not_found)).await,
        ),
        (
            "changes of one endless string",
            HostilePeer::start(source(
                || endless(r#"{"results":[{"seq":"1","id":""#, "a"),
                not_found,
            ))
            .await,
        ),
        (
            "a giant document",
            HostilePeer::start(source(big_change, || {
                endless(
                    r#"{"results":[{"id":"big","docs":[{"ok":{"_id":"big","_rev":"1-abc","pad":""#,
                    "a",
                )
            }))
            .await,
        ),
    ];
    for (at, (case, peer)) in cases.iter().enumerate() {
        let (status, text, growth) = replicate_from(&server, peer, &format!("t{at}")).await;
        eprintln!("{case}: {status}, grew {} MiB", growth / MIB);
        assert_ne!(status, 200, "{case}: {text}");
        assert!(
            text.contains("larger than"),
            "{case}: the job says why it failed: {text}"
        );
        assert!(
            growth < 100 * MIB,
            "{case}: the server grew by {} MiB",
            growth / MIB
        );
    }
}

/// A target that says it lacks, besides what it is asked about, the
/// document `claimed` at revision `rev`; it records what it is sent.
fn greedy_target(claimed: String, rev: String) -> impl Fn(&Received) -> Answer + Send + Sync {
    move |request: &Received| {
        let path = request.path.as_str();
        match (request.method.as_str(), path) {
            ("GET", "/") => Answer::json(200, json!({"couchdb": "Welcome", "version": "3.5.0"})),
            ("GET", "/t/" | "/t") => info("t"),
            ("GET", p) if p.starts_with("/t/_local/") => not_found(),
            ("PUT", p) if p.starts_with("/t/_local/") => {
                Answer::json(201, json!({"ok": true, "id": "_local/x", "rev": "0-1"}))
            }
            ("POST", "/t/_revs_diff") => {
                let mut asked: Value = serde_json::from_str(&request.body).unwrap_or(json!({}));
                let mut answer = serde_json::Map::new();
                if let Some(asked) = asked.as_object_mut() {
                    for (id, revs) in asked.iter() {
                        answer.insert(id.clone(), json!({"missing": revs}));
                    }
                }
                answer.insert(claimed.clone(), json!({"missing": [rev]}));
                Answer::json(200, Value::Object(answer))
            }
            ("POST", "/t/_bulk_docs") => Answer::json(201, json!([])),
            ("POST", "/t/_ensure_full_commit") => {
                Answer::json(201, json!({"ok": true, "instance_start_time": "0"}))
            }
            _ => not_found(),
        }
    }
}

#[tokio::test]
async fn a_target_that_claims_documents_outside_the_replication_is_sent_none() {
    let data = TempDir::new("lying-peers-greedy");
    let server = TestServer::start(data.path(), &[]);
    let admin = Client::new(&server);
    assert_eq!(admin.put("/src", json!(null)).await.status, 201);
    assert_eq!(
        admin.put("/src/a", json!({"kind": "open"})).await.status,
        201
    );
    let secret = admin
        .put("/src/secret", json!({"kind": "hidden", "pin": "7788"}))
        .await;
    let rev = secret.json()["rev"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    for scope in [
        json!({"doc_ids": ["a"]}),
        json!({"selector": {"kind": "open"}}),
    ] {
        let target = HostilePeer::start(greedy_target("secret".into(), rev.clone())).await;
        let mut spec = json!({"source": "src", "target": target.url("t")});
        for (k, v) in scope.as_object().into_iter().flatten() {
            spec[k] = v.clone();
        }
        let done = admin.post("/_replicate", spec).await;
        assert_eq!(done.status, 200, "{scope}: {}", done.text);
        let sent: Vec<Received> = target.received();
        assert!(
            sent.iter().any(|r| r.body.contains("\"open\"")),
            "{scope}: the document in scope travels"
        );
        for request in &sent {
            assert!(
                !request.body.contains("7788"),
                "{scope}: {} {} carried the document out of scope",
                request.method,
                request.path
            );
        }
    }
}

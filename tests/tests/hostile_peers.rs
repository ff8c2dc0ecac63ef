//! Replication peers that misbehave on purpose: one that redirects every
//! request to another address (which must never see the replication's
//! credentials), and one that accepts connections and never answers
//! (whose connections a cancelled replication must close at once).

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use recliner_tests::{Client, TempDir, TestServer, eventually, eventually_within};
use serde_json::{Value, json};

/// One request: its request line and body (by `Content-Length`).
fn read_request(stream: &mut TcpStream) -> Option<(String, Vec<u8>)> {
    let mut bytes = Vec::new();
    let mut buf = [0u8; 4096];
    let head_end = loop {
        if let Some(at) = bytes.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        match stream.read(&mut buf) {
            Ok(n @ 1..) => bytes.extend_from_slice(&buf[..n]),
            _ => return None,
        }
    };
    let head = String::from_utf8_lossy(&bytes[..head_end]).to_string();
    let length: usize = head
        .lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.trim().parse().ok())
        .unwrap_or(0);
    while bytes.len() < head_end + length {
        match stream.read(&mut buf) {
            Ok(n @ 1..) => bytes.extend_from_slice(&buf[..n]),
            _ => return None,
        }
    }
    let line = head.lines().next().unwrap_or_default().to_string();
    Some((line, bytes[head_end..head_end + length].to_vec()))
}

/// Everything that reached a listener: the bytes of each connection.
type Received = Arc<Mutex<Vec<Vec<u8>>>>;

/// A listener that records what each connection sends (for a second at
/// most), answers nothing and closes.
fn recording_peer() -> (u16, Received) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let received: Received = Arc::default();
    let sink = received.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let sink = sink.clone();
            std::thread::spawn(move || {
                let mut stream = stream;
                let _ = stream.set_read_timeout(Some(Duration::from_secs(1)));
                let mut bytes = Vec::new();
                let mut buf = [0u8; 4096];
                while let Ok(n @ 1..) = stream.read(&mut buf) {
                    bytes.extend_from_slice(&buf[..n]);
                }
                sink.lock().unwrap().push(bytes);
            });
        }
    });
    (port, received)
}

/// A peer that answers every request `307 Temporary Redirect` to the same
/// path on `elsewhere`; returns its port and the request lines it got.
fn redirecting_peer(elsewhere: u16) -> (u16, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let log = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let log = log.clone();
            std::thread::spawn(move || {
                let mut stream = stream;
                let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
                while let Some((line, _)) = read_request(&mut stream) {
                    let path = line.split(' ').nth(1).unwrap_or("/").to_string();
                    log.lock().unwrap().push(line);
                    let answer = format!(
                        "HTTP/1.1 307 Temporary Redirect\r\nLocation: http://127.0.0.1:{elsewhere}{path}\r\n\
                         Content-Type: text/plain\r\nContent-Length: 5\r\n\r\nmoved"
                    );
                    if stream.write_all(answer.as_bytes()).is_err() {
                        break;
                    }
                }
            });
        }
    });
    (port, seen)
}

/// A redirect never takes the replication, nor its credentials, to another
/// host: the replicator follows no redirect (a login's `POST /_session`
/// would carry the password in its body), and the replication fails.
#[tokio::test]
async fn a_redirecting_peer_never_sends_the_credentials_elsewhere() {
    let data = TempDir::new("hostile-redirect");
    let server = TestServer::start(data.path(), &[]);
    let c = Client::new(&server);
    assert_eq!(c.put("/local", json!({})).await.status, 201);
    assert_eq!(c.put("/local/d", json!({"v": 1})).await.status, 201);
    let (elsewhere, received) = recording_peer();
    let (port, seen) = redirecting_peer(elsewhere);
    let basic = json!({"basic": {"username": "replicator", "password": "never-elsewhere"}});
    let peers = [
        // Credentials as `auth`, then in the URL; the peer as source, then target.
        (
            json!({"url": format!("http://127.0.0.1:{port}/src"), "auth": basic}),
            json!("local_copy"),
        ),
        (
            json!(format!(
                "http://replicator:never-elsewhere@127.0.0.1:{port}/src"
            )),
            json!("local_copy"),
        ),
        (
            json!("local"),
            json!({"url": format!("http://127.0.0.1:{port}/tgt"), "auth": basic}),
        ),
        (
            json!("local"),
            json!(format!(
                "http://replicator:never-elsewhere@127.0.0.1:{port}/tgt"
            )),
        ),
    ];
    for (source, target) in peers {
        let asked = seen.lock().unwrap().len();
        let body = json!({"source": source, "target": target, "create_target": true});
        let started = Instant::now();
        let reply = tokio::time::timeout(Duration::from_secs(60), c.post("/_replicate", body))
            .await
            .expect("the replication ends");
        // The address redirected to heard nothing at all: no login, no request.
        tokio::time::sleep(Duration::from_millis(300)).await;
        {
            let received = received.lock().unwrap();
            assert!(
                received.is_empty(),
                "{source} -> {target}: the other host received {:?}",
                received
                    .iter()
                    .map(|r| String::from_utf8_lossy(r).to_string())
                    .collect::<Vec<_>>()
            );
        }
        assert!(
            reply.status >= 400,
            "{source} -> {target}: {} {}",
            reply.status,
            reply.text
        );
        let failure = reply.json();
        assert!(
            failure["reason"]
                .as_str()
                .is_some_and(|r| r.contains("redirect")),
            "{failure}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{:?}",
            started.elapsed()
        );
        assert!(
            seen.lock().unwrap().len() > asked,
            "the replication reached the redirecting peer"
        );
    }
    assert!(!server.logs().contains("never-elsewhere"));
}

/// A peer that accepts connections and never answers, keeping each one
/// to see whether the other side closed it.
fn silent_peer() -> (u16, Arc<Mutex<Vec<TcpStream>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let held: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
    let keep = held.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let _ = stream.set_nonblocking(true);
            keep.lock().unwrap().push(stream);
        }
    });
    (port, held)
}

/// How many of `held` the other side has not closed (a read that finds
/// the end of the stream, or a reset, is a closed connection; what the
/// replicator sent is read past).
fn still_open(held: &Arc<Mutex<Vec<TcpStream>>>) -> usize {
    let mut held = held.lock().unwrap();
    let mut open = 0;
    for stream in held.iter_mut() {
        let mut buf = [0u8; 4096];
        let closed = loop {
            match stream.read(&mut buf) {
                Ok(0) => break true,
                Ok(_) => continue,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break false,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => break true,
            }
        };
        if !closed {
            open += 1;
        }
    }
    open
}

/// Cancelling a replication whose peer never answers closes its
/// connections to that peer at once: with `cancel: true`, and by deleting
/// its `_replicator` document.
#[tokio::test]
async fn cancelling_a_replication_stuck_on_a_silent_peer_closes_its_connections() {
    let data = TempDir::new("hostile-silent");
    let server = TestServer::start(data.path(), &[]);
    let c = Client::new(&server);
    let connected = async |held: &Arc<Mutex<Vec<TcpStream>>>| {
        eventually(20, async || !held.lock().unwrap().is_empty()).await
    };
    let closed_soon = async |held: &Arc<Mutex<Vec<TcpStream>>>| {
        eventually_within(Duration::from_secs(3), async || still_open(held) == 0).await
    };

    // A transient replication, cancelled.
    let (port, held) = silent_peer();
    let spec = json!({"source": format!("http://127.0.0.1:{port}/db"), "target": "t1",
                      "create_target": true, "continuous": true});
    assert_eq!(c.post("/_replicate", spec.clone()).await.status, 202);
    assert!(connected(&held).await, "the replication never connected");
    // Still waiting for its answer a moment later.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(still_open(&held) > 0);
    let mut cancel = spec.clone();
    cancel["cancel"] = json!(true);
    let asked = Instant::now();
    let cancelled = c.post("/_replicate", cancel).await;
    assert_eq!(cancelled.status, 200, "{}", cancelled.text);
    assert!(
        closed_soon(&held).await,
        "{} connection(s) still open {:?} after the cancel",
        still_open(&held),
        asked.elapsed()
    );
    assert_eq!(c.get("/_scheduler/jobs").await.json()["total_rows"], 0);

    // A `_replicator` document, deleted.
    let (port, held) = silent_peer();
    let doc = json!({"source": format!("http://127.0.0.1:{port}/db"), "target": "t2",
                     "create_target": true, "continuous": true});
    let put = c.put("/_replicator/stuck", doc).await;
    assert_eq!(put.status, 201, "{}", put.text);
    assert!(connected(&held).await, "the replication never connected");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(still_open(&held) > 0);
    let rev = put.json()["rev"].as_str().unwrap().to_string();
    let asked = Instant::now();
    let deleted = c.delete(&format!("/_replicator/stuck?rev={rev}")).await;
    assert_eq!(deleted.status, 200, "{}", deleted.text);
    assert!(
        closed_soon(&held).await,
        "{} connection(s) still open {:?} after the document was deleted",
        still_open(&held),
        asked.elapsed()
    );
    let jobs: Value = c.get("/_scheduler/jobs").await.json();
    assert_eq!(jobs["total_rows"], 0, "{jobs}");
}

/// A target that answers everything a replication asks before it writes
/// (`GET /db/`, its checkpoint missing, every revision missing in
/// `_revs_diff`) but never answers `_bulk_docs`. Returns its port, the
/// writes it was sent, and how many of its connections are open.
fn stalling_target() -> (u16, Arc<AtomicUsize>, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let writes = Arc::new(AtomicUsize::new(0));
    let open = Arc::new(AtomicUsize::new(0));
    let (writes_seen, still_open) = (writes.clone(), open.clone());
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            still_open.fetch_add(1, Ordering::SeqCst);
            let (writes, open) = (writes_seen.clone(), still_open.clone());
            std::thread::spawn(move || {
                let mut stream = stream;
                while let Some((line, body)) = read_request(&mut stream) {
                    let path = line.split(' ').nth(1).unwrap_or("/").to_string();
                    let (status, answer) = if path.ends_with("/_bulk_docs") {
                        writes.fetch_add(1, Ordering::SeqCst);
                        // Never answered: wait for the other side to close.
                        let mut buf = [0u8; 4096];
                        while let Ok(1..) = stream.read(&mut buf) {}
                        break;
                    } else if path.ends_with("/_revs_diff") {
                        let asked: Value = serde_json::from_slice(&body).unwrap_or(json!({}));
                        let missing: serde_json::Map<String, Value> = asked
                            .as_object()
                            .into_iter()
                            .flatten()
                            .map(|(id, revs)| (id.clone(), json!({"missing": revs})))
                            .collect();
                        (200, Value::Object(missing))
                    } else if path.contains("/_local/") {
                        (404, json!({"error": "not_found", "reason": "missing"}))
                    } else if path == "/" {
                        (200, json!({"couchdb": "Welcome", "version": "3.5.0"}))
                    } else {
                        (
                            200,
                            json!({"db_name": "db", "update_seq": "0", "instance_start_time": "0"}),
                        )
                    };
                    let answer = answer.to_string();
                    let reply = format!(
                        "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{answer}",
                        answer.len()
                    );
                    if stream.write_all(reply.as_bytes()).is_err() {
                        break;
                    }
                }
                open.fetch_sub(1, Ordering::SeqCst);
            });
        }
    });
    (port, writes, open)
}

/// A replication waiting on a write its target never answers is cancelled
/// at once all the same: the cancel is answered within moments (not when
/// the write times out), and the write's connection is closed, not left to
/// be retried.
#[tokio::test]
async fn cancelling_a_replication_stuck_writing_to_a_silent_target_closes_its_connections() {
    let data = TempDir::new("hostile-stalled-write");
    let server = TestServer::start(data.path(), &[]);
    let c = Client::new(&server);
    assert_eq!(c.put("/local", json!({})).await.status, 201);
    assert_eq!(c.put("/local/d", json!({"v": 1})).await.status, 201);
    let stuck = async |writes: &Arc<AtomicUsize>| {
        eventually(20, async || writes.load(Ordering::SeqCst) > 0).await
    };
    let closed_soon = async |open: &Arc<AtomicUsize>| {
        eventually_within(Duration::from_secs(3), async || {
            open.load(Ordering::SeqCst) == 0
        })
        .await
    };

    // Cancelled with `cancel: true`.
    let (port, writes, open) = stalling_target();
    let spec = json!({"source": "local", "target": format!("http://127.0.0.1:{port}/db"),
                      "continuous": true});
    assert_eq!(c.post("/_replicate", spec.clone()).await.status, 202);
    assert!(stuck(&writes).await, "the replication never wrote");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(open.load(Ordering::SeqCst) > 0);
    let mut cancel = spec.clone();
    cancel["cancel"] = json!(true);
    let asked = Instant::now();
    let cancelled = c.post("/_replicate", cancel).await;
    assert_eq!(cancelled.status, 200, "{}", cancelled.text);
    assert!(
        asked.elapsed() < Duration::from_secs(5),
        "the cancel took {:?}",
        asked.elapsed()
    );
    assert!(
        closed_soon(&open).await,
        "{} connection(s) still open {:?} after the cancel",
        open.load(Ordering::SeqCst),
        asked.elapsed()
    );
    // And the write is not tried again.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(writes.load(Ordering::SeqCst), 1);
    assert_eq!(open.load(Ordering::SeqCst), 0);

    // A `_replicator` document, deleted.
    let (port, writes, open) = stalling_target();
    let doc = json!({"source": "local", "target": format!("http://127.0.0.1:{port}/db"),
                     "continuous": true});
    let put = c.put("/_replicator/stalled", doc).await;
    assert_eq!(put.status, 201, "{}", put.text);
    assert!(stuck(&writes).await, "the replication never wrote");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let rev = put.json()["rev"].as_str().unwrap().to_string();
    let asked = Instant::now();
    let deleted = c.delete(&format!("/_replicator/stalled?rev={rev}")).await;
    assert_eq!(deleted.status, 200, "{}", deleted.text);
    assert!(
        closed_soon(&open).await,
        "{} connection(s) still open {:?} after the document was deleted",
        open.load(Ordering::SeqCst),
        asked.elapsed()
    );
    let jobs: Value = c.get("/_scheduler/jobs").await.json();
    assert_eq!(jobs["total_rows"], 0, "{jobs}");
}

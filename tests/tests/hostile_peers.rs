//! Replication peers that misbehave on purpose: one that redirects every
//! request to another address (which must never see the replication's
//! credentials).

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use recliner_tests::{Client, TempDir, TestServer};
use serde_json::json;

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

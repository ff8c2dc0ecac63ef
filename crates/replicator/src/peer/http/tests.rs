//! The HTTP peer against fake peers on loopback ports: the bounds of its
//! connections, its retries, its decoding and its errors.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use reqwest::Method;
use revtree::RevId;
use serde_json::{Map, Value, json};

use super::paths::{bulk_docs_body, chunk_by_bytes};
use super::{BULK_GET_UNKNOWN, HttpOptions, HttpPeer};
use crate::peer::retry::RETRY_START;
use crate::peer::{EndpointError, Missing};
use crate::spec::{ChangesFilter, RemoteDb};
#[test]
fn writes_are_split_by_size_and_a_large_document_goes_alone() {
    let doc = |n: usize| ejson::to_vec(&json!({"_id": "x", "pad": "p".repeat(n)}));
    let encoded = vec![doc(10), doc(10), doc(100), doc(10)];
    let chunks = chunk_by_bytes(&encoded, 80);
    assert_eq!(chunks, [0..2, 2..3, 3..4]);
    assert!(chunk_by_bytes(&[], 80).is_empty());
    let body: Value = serde_json::from_slice(&bulk_docs_body(&encoded[..2])).unwrap();
    assert_eq!(body["new_edits"], false);
    assert_eq!(body["docs"].as_array().map(Vec::len), Some(2));
    let body: Value = serde_json::from_slice(&bulk_docs_body(&[])).unwrap();
    assert_eq!(body["docs"], json!([]));
}

#[test]
fn only_transport_errors_and_server_trouble_are_retried() {
    let http = |status| EndpointError::Http {
        url: String::new(),
        status,
        error: String::new(),
        reason: String::new(),
    };
    assert!(
        http(500).is_transient()
            && http(503).is_transient()
            && http(429).is_transient()
            && http(408).is_transient()
    );
    for status in [400, 401, 403, 404, 409, 412] {
        assert!(!http(status).is_transient(), "{status}");
    }
    assert!(
        EndpointError::Transport {
            url: String::new(),
            detail: String::new()
        }
        .is_transient()
    );
    assert!(!EndpointError::NotFound(String::new()).is_transient());
    assert!(
        !EndpointError::Request {
            url: String::new(),
            detail: String::new()
        }
        .is_transient()
    );
}

/// A peer on a loopback port that answers each request with what
/// `answer` gives for its request line, after `delay`, counting the
/// requests in flight (the most at once) and keeping the request lines.
struct FakePeer {
    url: String,
    most_in_flight: Arc<std::sync::atomic::AtomicUsize>,
    requests: Arc<std::sync::Mutex<Vec<String>>>,
}

async fn fake_peer(delay: Duration, answer: fn(&str) -> (u16, String)) -> FakePeer {
    use std::sync::atomic::AtomicUsize;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/db/", listener.local_addr().unwrap());
    let in_flight = Arc::new(AtomicUsize::new(0));
    let most_in_flight = Arc::new(AtomicUsize::new(0));
    let requests = Arc::new(std::sync::Mutex::new(Vec::new()));
    let (most, lines) = (most_in_flight.clone(), requests.clone());
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let (in_flight, most, lines) = (in_flight.clone(), most.clone(), lines.clone());
            tokio::spawn(async move {
                let mut buffer = Vec::new();
                loop {
                    // One request: headers, then a body of Content-Length bytes.
                    let end = loop {
                        if let Some(at) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
                            break at + 4;
                        }
                        let mut chunk = [0u8; 4096];
                        match socket.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buffer.extend_from_slice(&chunk[..n]),
                        }
                    };
                    let head = String::from_utf8_lossy(&buffer[..end]).to_string();
                    let length: usize = head
                        .lines()
                        .find_map(|l| {
                            let (k, v) = l.split_once(':')?;
                            k.eq_ignore_ascii_case("content-length")
                                .then(|| v.trim().parse().ok())?
                        })
                        .unwrap_or(0);
                    while buffer.len() < end + length {
                        let mut chunk = [0u8; 4096];
                        match socket.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buffer.extend_from_slice(&chunk[..n]),
                        }
                    }
                    buffer.drain(..end + length);
                    let line = head.lines().next().unwrap_or("").to_string();
                    lines.lock().unwrap().push(line.clone());
                    let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    tokio::time::sleep(delay).await;
                    in_flight.fetch_sub(1, Ordering::SeqCst);
                    let (status, body) = answer(&line);
                    let reply = format!(
                        "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    if socket.write_all(reply.as_bytes()).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    FakePeer {
        url,
        most_in_flight,
        requests,
    }
}

fn remote(url: &str, http_connections: usize) -> HttpPeer {
    let db = RemoteDb {
        url: url.parse().unwrap(),
        headers: Vec::new(),
        auth: None,
    };
    let options = HttpOptions {
        max_answer: crate::spec::defaults::MAX_ANSWER_BYTES as usize,
        timeout: Duration::from_secs(10),
        retries: 0,
        http_connections,
    };
    HttpPeer::new(&db, options).unwrap()
}

fn ok(_: &str) -> (u16, String) {
    (200, r#"{"ok":true}"#.to_string())
}

#[tokio::test]
async fn requests_in_flight_to_a_peer_never_exceed_http_connections() {
    for (connections, expected) in [(2, 2), (1, 1), (8, 8)] {
        let peer = fake_peer(Duration::from_millis(100), ok).await;
        let endpoint = remote(&peer.url, connections);
        let calls = (0..8).map(|_| endpoint.ensure_full_commit());
        for result in futures_util::future::join_all(calls).await {
            result.unwrap();
        }
        assert_eq!(
            peer.most_in_flight.load(Ordering::SeqCst),
            expected,
            "with http_connections = {connections}"
        );
    }
}

#[tokio::test]
async fn a_request_that_cannot_be_built_fails_at_once_and_is_never_retried() {
    let peer = fake_peer(Duration::ZERO, ok).await;
    // Headers the spec would refuse, put here directly: whatever slips
    // past it still fails on the first try, not after retries.
    let db = RemoteDb {
        url: peer.url.parse().unwrap(),
        headers: vec![("X-Bad".into(), "a\r\nInjected: yes".into())],
        auth: None,
    };
    let options = HttpOptions {
        max_answer: crate::spec::defaults::MAX_ANSWER_BYTES as usize,
        timeout: Duration::from_secs(10),
        retries: 5,
        http_connections: 2,
    };
    let endpoint = HttpPeer::new(&db, options).unwrap();
    let started = std::time::Instant::now();
    let calls = [
        endpoint.info().await.map(|_| ()),
        endpoint.ensure_full_commit().await,
        endpoint
            .send_with_retries(Method::GET, "doc", "application/json")
            .await
            .map(|_| ()),
        endpoint
            .send_streaming(Method::PUT, "doc", "text/plain", "x".into(), 1)
            .await,
    ];
    for result in calls {
        let e = result.unwrap_err();
        assert!(
            matches!(&e, EndpointError::Request { url, detail } if url.starts_with(&peer.url) && detail.contains("header")),
            "{e:?}"
        );
        assert!(!e.is_transient(), "{e}");
    }
    // The first retry would have waited 250 ms.
    assert!(started.elapsed() < RETRY_START, "{:?}", started.elapsed());
    assert!(peer.requests.lock().unwrap().is_empty(), "nothing was sent");
    // _bulk_get is not given up for it: the error is the request's own.
    let missing = Missing {
        id: "d".into(),
        revs: vec!["1-a".parse().unwrap()],
        possible_ancestors: Vec::new(),
    };
    assert!(matches!(
        endpoint.fetch_many(&[missing], true).await,
        Err(EndpointError::Request { .. })
    ));
    assert_eq!(endpoint.bulk_get.load(Ordering::Relaxed), BULK_GET_UNKNOWN);
}

#[tokio::test]
async fn the_target_is_created_with_q_n_and_partitioned() {
    fn created(line: &str) -> (u16, String) {
        if line.starts_with("PUT /db/?q=8") {
            (412, r#"{"error":"file_exists","reason":"exists"}"#.into())
        } else {
            (201, r#"{"ok":true}"#.into())
        }
    }
    let peer = fake_peer(Duration::ZERO, created).await;
    let endpoint = remote(&peer.url, 2);
    let params = json!({"q": 8, "n": "1", "partitioned": true, "placement": "x"});
    let Value::Object(params) = params else {
        unreachable!()
    };
    // An existing database (412) is fine.
    endpoint.create(&params).await.unwrap();
    endpoint.create(&Map::new()).await.unwrap();
    assert_eq!(
        *peer.requests.lock().unwrap(),
        [
            "PUT /db/?q=8&n=1&partitioned=true HTTP/1.1",
            "PUT /db/ HTTP/1.1"
        ]
    );
}

#[tokio::test]
async fn a_malformed_answer_is_an_error_of_the_call_not_a_dropped_revision() {
    fn broken(line: &str) -> (u16, String) {
        let body = if line.starts_with("POST /db/_revs_diff") {
            r#"{"a":{"missing":["1-a","not a revision"]}}"#
        } else if line.starts_with("GET /db/_changes") {
            r#"{"results":[{"seq":1,"id":"a","changes":[{"rev":"x"}]}],"last_seq":1}"#
        } else if line.starts_with("POST /db/_bulk_get") {
            r#"{"results":[{"id":"a","docs":[{"ok":{"_id":"a","_rev":"1-a"}},{"ok":{"_id":"a"}}]}]}"#
        } else if line.starts_with("POST /db/_bulk_docs") {
            r#"[{"id":"a","error":"conflict","rev":7}]"#
        } else {
            r#"{"db_name":"db"}"#
        };
        (200, body.into())
    }
    let peer = fake_peer(Duration::ZERO, broken).await;
    let endpoint = remote(&peer.url, 2);
    let rev = RevId::parse("1-a").unwrap();
    let asked = wire::rows::Entries(vec![("a".to_string(), vec![rev.clone()])]);
    let missing = Missing {
        id: "a".into(),
        revs: vec![rev.clone(), RevId::parse("2-b").unwrap()],
        possible_ancestors: Vec::new(),
    };
    let errors = [
        endpoint.revs_diff(asked).await.unwrap_err(),
        endpoint
            .changes(&json!(0), 10, &ChangesFilter::All, false)
            .await
            .unwrap_err(),
        endpoint.fetch_many(&[missing], true).await.unwrap_err(),
        endpoint
            .write(vec![json!({"_id": "a", "_rev": "1-a"})])
            .await
            .unwrap_err(),
        endpoint.info().await.unwrap_err(),
    ];
    for e in errors {
        assert!(
            matches!(&e, EndpointError::Protocol { detail, .. } if detail.starts_with("malformed answer") || detail.starts_with("fetched document")),
            "{e}"
        );
        assert!(!e.is_transient(), "{e}");
    }
}

#[tokio::test]
async fn errors_are_read_from_couchdb_bodies_and_from_anything_else() {
    fn refuse(line: &str) -> (u16, String) {
        if line.starts_with("GET /db/_local") {
            (403, r#"{"error":"forbidden","reason":{"why":"no"}}"#.into())
        } else {
            (502, "<html>\r\nbad gateway</html>".into())
        }
    }
    let peer = fake_peer(Duration::ZERO, refuse).await;
    let endpoint = remote(&peer.url, 2);
    match endpoint.get_local("_local/x").await {
        Err(EndpointError::Http {
            status: 403,
            error,
            reason,
            ..
        }) => assert_eq!(
            (error.as_str(), reason.as_str()),
            ("forbidden", r#"{"why":"no"}"#)
        ),
        other => panic!("{other:?}"),
    }
    match endpoint.ensure_full_commit().await {
        Err(EndpointError::Http {
            status: 502,
            error,
            reason,
            ..
        }) => assert_eq!(
            (error.as_str(), reason.as_str()),
            ("bad_gateway", "<html>  bad gateway</html>")
        ),
        other => panic!("{other:?}"),
    }
}

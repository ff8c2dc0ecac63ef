//! A 50 MiB attachment goes in and out without the server holding it in memory.

use recliner_tests::{Client, TempDir, TestServer};
use serde_json::json;

/// Resident memory of a process: (current, peak) in KiB.
fn rss_kib(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("a Linux /proc");
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("the field is there")
    };
    (field("VmRSS:"), field("VmHWM:"))
}

const SIZE: usize = 50 << 20;

#[tokio::test]
async fn a_50_mib_attachment_streams_through_with_flat_memory() {
    let data = TempDir::new("bigatt");
    let server = TestServer::start(data.path(), &[]);
    let c = Client::new(&server);
    c.put("/db", json!({})).await;
    // Warm up the paths once with something small, then take the baseline.
    c.send_bytes(
        "PUT",
        "/db/warm/a",
        vec![1; 1024],
        "application/octet-stream",
    )
    .await;
    let _ = c.get("/db/warm/a").await;
    let (idle, _) = rss_kib(server.pid());

    // Upload from a stream: 50 MiB of patterned bytes in 1 MiB pieces.
    let pieces =
        (0..SIZE / (1 << 20)).map(|i| Ok::<_, std::io::Error>(vec![(i % 251) as u8; 1 << 20]));
    let body = reqwest::Body::wrap_stream(futures_util::stream::iter(pieces));
    let put = c
        .http()
        .put(c.url("/db/big/blob.bin"))
        .header("content-type", "application/octet-stream")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), 201);

    let mut response = c
        .http()
        .get(c.url("/db/big/blob.bin"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        response.headers()["content-length"],
        SIZE.to_string().as_str()
    );
    let mut received = 0usize;
    while let Some(chunk) = response.chunk().await.unwrap() {
        let mib = received >> 20;
        assert!(
            chunk
                .iter()
                .enumerate()
                .all(|(k, &b)| b == (((received + k) >> 20) % 251) as u8),
            "bytes in MiB {mib}"
        );
        received += chunk.len();
    }
    assert_eq!(received, SIZE);

    let (_, peak) = rss_kib(server.pid());
    let growth_mib = peak.saturating_sub(idle) / 1024;
    assert!(
        growth_mib < 25,
        "peak memory grew {growth_mib} MiB above idle for a 50 MiB attachment"
    );
}

/// Large inline attachments in a JSON document body: the body is spooled
/// to disk and the data decoded into the attachment store as it is read,
/// never held as text, tree and bytes at once. Eight concurrent 40 MiB
/// bodies used to take the server's peak memory near a gigabyte.
#[tokio::test]
async fn concurrent_large_inline_attachments_keep_memory_bounded() {
    use base64::Engine;
    let data = TempDir::new("biginline");
    let server = TestServer::start(data.path(), &[]);
    let c = Client::new(&server);
    c.put("/db", json!({})).await;
    let _ = c.put("/db/warm", json!({"a": 1})).await;
    let (idle, _) = rss_kib(server.pid());

    const EACH: usize = 30 << 20;
    const CLIENTS: usize = 8;
    let bodies: Vec<(Vec<u8>, String)> = (0..CLIENTS)
        .map(|k| {
            let bytes: Vec<u8> = (0..EACH).map(|i| ((i * 31 + k * 7) % 251) as u8).collect();
            let body = format!(
                r#"{{"n":{k},"_attachments":{{"big.bin":{{"content_type":"application/octet-stream","data":"{}"}},"small.txt":{{"content_type":"text/plain","data":"aGk="}}}}}}"#,
                base64::engine::general_purpose::STANDARD.encode(&bytes)
            );
            (bytes, body)
        })
        .collect();
    let puts = bodies.iter().enumerate().map(|(k, (_, body))| {
        let c = &c;
        let body = body.clone();
        async move {
            let method = if k % 2 == 0 { "PUT" } else { "POST" };
            let path = if k % 2 == 0 {
                format!("/db/d{k}")
            } else {
                "/db".to_string()
            };
            let reply = c
                .send_bytes(method, &path, body.into_bytes(), "application/json")
                .await;
            assert_eq!(reply.status, 201, "{}", reply.text);
            reply.json()["id"].as_str().unwrap().to_string()
        }
    });
    let ids = futures_util::future::join_all(puts).await;
    let (_, peak) = rss_kib(server.pid());
    let grown_mib = peak.saturating_sub(idle) / 1024;
    eprintln!("server peak grew by {grown_mib} MiB");
    assert!(
        grown_mib < 150,
        "peak grew by {grown_mib} MiB for {CLIENTS} bodies of {} MiB",
        (EACH * 4 / 3) >> 20
    );

    for (k, id) in ids.iter().enumerate() {
        let (bytes, _) = &bodies[k];
        let doc = c.get(&format!("/db/{id}")).await.json();
        assert_eq!(doc["n"], k);
        let stub = &doc["_attachments"]["big.bin"];
        assert_eq!(stub["length"], EACH, "{stub}");
        assert_eq!(c.get(&format!("/db/{id}/small.txt")).await.text, "hi");
        let got = c
            .http()
            .get(c.url(&format!("/db/{id}/big.bin")))
            .send()
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap();
        assert!(got[..] == bytes[..], "attachment bytes of {id} differ");
    }
    // Bad data is still refused, naming the attachment, with nothing stored.
    let bad = format!(
        r#"{{"_attachments":{{"x":{{"data":"{}!"}}}}}}"#,
        "QUFB".repeat(1 << 19)
    );
    let reply = c
        .send_bytes("PUT", "/db/bad", bad.into_bytes(), "application/json")
        .await;
    assert_eq!(reply.status, 400, "{}", reply.text);
    assert_eq!(reply.json()["reason"], "Invalid attachment data for x");
    assert_eq!(c.get("/db/bad").await.status, 404);
}

/// `_bulk_docs` bodies over 8 MiB are spooled and written in two passes:
/// many small documents and large inline attachments in one body, with
/// `new_edits` after `docs` (as PouchDB sends it), several at once, in
/// bounded memory; every document and byte reads back.
#[tokio::test]
async fn large_bulk_docs_bodies_are_written_in_bounded_memory() {
    use base64::Engine;
    let data = TempDir::new("bigbulk");
    let server = TestServer::start(data.path(), &[]);
    let c = Client::new(&server);
    c.put("/db", json!({})).await;
    let _ = c.put("/db/warm", json!({"a": 1})).await;
    let (idle, _) = rss_kib(server.pid());

    const CLIENTS: usize = 4;
    const SMALL: usize = 20_000;
    const ATT: usize = 12 << 20;
    let pad = "p".repeat(900);
    let bodies: Vec<(Vec<u8>, String)> = (0..CLIENTS)
        .map(|k| {
            let bytes: Vec<u8> = (0..ATT).map(|i| ((i * 13 + k) % 251) as u8).collect();
            let mut body = String::from(r#"{"docs":["#);
            for i in 0..SMALL {
                body.push_str(&format!(
                    r#"{{"_id":"c{k}-{i:05}","_rev":"1-{i:x}","pad":"{pad}"}},"#
                ));
            }
            body.push_str(&format!(
                r#"{{"_id":"att{k}","_rev":"1-abc","_attachments":{{"big.bin":{{"content_type":"application/octet-stream","data":"{}"}}}}}}"#,
                base64::engine::general_purpose::STANDARD.encode(&bytes)
            ));
            body.push_str(r#"], "new_edits": false}"#);
            (bytes, body)
        })
        .collect();
    let posts = bodies.iter().map(|(_, body)| {
        let c = &c;
        let body = body.clone();
        async move {
            let reply = c
                .send_bytes(
                    "POST",
                    "/db/_bulk_docs",
                    body.into_bytes(),
                    "application/json",
                )
                .await;
            assert_eq!(
                reply.status,
                201,
                "{}",
                &reply.text[..reply.text.len().min(500)]
            );
            assert_eq!(
                reply.json(),
                json!([]),
                "new_edits false answers only failures"
            );
        }
    });
    futures_util::future::join_all(posts).await;
    let (_, peak) = rss_kib(server.pid());
    let grown_mib = peak.saturating_sub(idle) / 1024;
    eprintln!("server peak grew by {grown_mib} MiB");
    let body_mib = bodies[0].1.len() >> 20;
    assert!(
        grown_mib < 150,
        "peak grew by {grown_mib} MiB for {CLIENTS} bodies of {body_mib} MiB"
    );

    let info = c.get("/db").await.json();
    assert_eq!(info["doc_count"], 1 + CLIENTS * (SMALL + 1));
    for (k, (bytes, _)) in bodies.iter().enumerate() {
        let doc = c.get(&format!("/db/c{k}-{:05}", SMALL - 1)).await.json();
        assert_eq!(doc["_rev"], format!("1-{:x}", SMALL - 1));
        assert_eq!(doc["pad"], pad);
        let stub = c.get(&format!("/db/att{k}")).await.json();
        assert_eq!(stub["_attachments"]["big.bin"]["length"], ATT);
        let got = c
            .http()
            .get(c.url(&format!("/db/att{k}/big.bin")))
            .send()
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap();
        assert!(got[..] == bytes[..], "attachment bytes of att{k} differ");
    }

    // Refusals of a spooled body are CouchDB's, and nothing of it is written.
    // Many small documents past the in-memory size, the body cut short.
    let filler = (0..10_000)
        .map(|i| format!(r#"{{"_id":"f{i}","pad":"{pad}"}}"#))
        .collect::<Vec<_>>()
        .join(",");
    for (body, status, reason) in [
        (
            format!(
                r#"{{"docs":[{{"_id":"x1"}},{{"_id":"big","pad":"{}"}}]}}"#,
                "z".repeat(9 << 20)
            ),
            413,
            "big",
        ),
        (
            format!(r#"{{"other":"{}"}}"#, "q".repeat(9 << 20)),
            400,
            "POST body must include `docs` parameter.",
        ),
        (
            format!(
                r#"{{"docs":[{{"_id":"x1"}}], "x":"{}", "new_edits": 3}}"#,
                "q".repeat(9 << 20)
            ),
            400,
            "`new_edits` parameter must be a boolean.",
        ),
        (
            format!(r#"{{"docs":[{{"_id":"x1"}},{filler}"#),
            400,
            "invalid UTF-8 JSON",
        ),
    ] {
        let reply = c
            .send_bytes(
                "POST",
                "/db/_bulk_docs",
                body.into_bytes(),
                "application/json",
            )
            .await;
        assert_eq!(reply.status, status, "{}", reply.text);
        assert_eq!(reply.json()["reason"], reason);
        assert_eq!(c.get("/db/x1").await.status, 404);
    }

    // `all_or_nothing` is refused for a spooled body as for a small one:
    // 417, a row per document, nothing written.
    let body = format!(r#"{{"docs":[{{"_id":"x1"}},{filler}], "all_or_nothing": true}}"#);
    assert!(body.len() > 8 << 20);
    let reply = c
        .send_bytes(
            "POST",
            "/db/_bulk_docs",
            body.into_bytes(),
            "application/json",
        )
        .await;
    assert_eq!(
        reply.status,
        417,
        "{}",
        &reply.text[..reply.text.len().min(300)]
    );
    let rows = reply.json();
    let rows = rows.as_array().expect("an array of rows");
    assert_eq!(rows.len(), 10_001);
    assert_eq!(
        rows[0],
        json!({"id": "x1", "rev": "0-", "error": "not_implemented", "reason": "all_or_nothing is not supported"})
    );
    assert_eq!(c.get("/db/x1").await.status, 404);
    assert_eq!(c.get("/db/f9999").await.status, 404);
}

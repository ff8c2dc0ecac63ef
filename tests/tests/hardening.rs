//! Regression tests for requests that used to break a database or the
//! server: each names the defect it pins. Every test also checks the server
//! still answers afterwards.

use recliner_tests::{Client, TempDir, TestServer, percent_encode};
use serde_json::{Value, json};

async fn start(label: &str) -> (TempDir, TestServer, Client) {
    let data = TempDir::new(label);
    let server = TestServer::start(data.path(), &[]);
    let client = Client::new(&server);
    assert_eq!(client.put("/db", json!({})).await.status, 201);
    (data, server, client)
}

/// The lines of a `_changes` body in a streaming feed style, parsed.
fn json_lines(text: &str) -> Vec<Value> {
    text.lines()
        .map(|l| l.strip_prefix("data: ").unwrap_or(l))
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l:?}")))
        .collect()
}

#[tokio::test]
async fn hostile_revision_ids_read_back_as_valid_json_everywhere() {
    let (_d, _s, c) = start("hostile-revs").await;
    let revs = [
        "1-a\"b",
        "1-a\\b",
        "1-a\u{1}b",
        "1-a\r\nX: 1",
        "1-日本",
        "1-",
    ];
    for (i, rev) in revs.iter().enumerate() {
        let id = format!("d{i}\"\n");
        let reply = c
            .post(
                "/db/_bulk_docs",
                json!({"new_edits": false, "docs": [{"_id": id, "_rev": rev, "n": i}]}),
            )
            .await;
        assert_eq!(reply.status, 201, "{rev:?}: {}", reply.text);
        let path = format!("/db/{}", percent_encode(&id));
        let doc = c.get(&path).await.json();
        assert_eq!(doc["_rev"], *rev);
        assert_eq!(doc["_id"], id);
        let doc = c
            .get(&format!("{path}?revs=true&revs_info=true"))
            .await
            .json();
        assert_eq!(doc["_rev"], *rev);
        let open = c
            .send(
                "GET",
                &format!("{path}?open_revs=all"),
                None,
                &[("accept", "application/json")],
            )
            .await
            .json();
        assert_eq!(open[0]["ok"]["_rev"], *rev);
        let at = c
            .get(&format!("{path}?rev={}", percent_encode(rev)))
            .await
            .json();
        assert_eq!(at["_rev"], *rev);
    }
    let all = c.get("/db/_all_docs?include_docs=true").await.json();
    let rows = all["rows"].as_array().unwrap();
    assert_eq!(rows.len(), revs.len());
    for row in rows {
        assert_eq!(row["value"]["rev"], row["doc"]["_rev"]);
        assert!(revs.contains(&row["value"]["rev"].as_str().unwrap()));
    }
    let changes = c
        .get("/db/_changes?include_docs=true&style=all_docs")
        .await
        .json();
    assert_eq!(changes["results"].as_array().unwrap().len(), revs.len());
    for style in ["longpoll", "continuous&timeout=1", "eventsource&timeout=1"] {
        let reply = c
            .get(&format!("/db/_changes?feed={style}&include_docs=true"))
            .await;
        let seen: Vec<Value> = if style == "longpoll" {
            reply.json()["results"].as_array().unwrap().clone()
        } else {
            json_lines(&reply.text)
                .into_iter()
                .filter(|l| l.get("id").is_some())
                .collect()
        };
        assert_eq!(seen.len(), revs.len(), "{style}");
        for row in seen {
            assert_eq!(row["changes"][0]["rev"], row["doc"]["_rev"], "{style}");
        }
    }
    let docs: Vec<Value> = revs
        .iter()
        .enumerate()
        .map(|(i, rev)| json!({"id": format!("d{i}\"\n"), "rev": rev}))
        .collect();
    let got = c
        .post("/db/_bulk_get?revs=true", json!({"docs": docs}))
        .await
        .json();
    for (result, rev) in got["results"].as_array().unwrap().iter().zip(revs) {
        assert_eq!(result["docs"][0]["ok"]["_rev"], rev);
    }
}

#[tokio::test]
async fn positions_at_the_bound_refuse_an_edit_and_the_database_keeps_working() {
    let (_d, _s, c) = start("huge-positions").await;
    let top = "9223372036854775807-abc";
    let reply = c
        .post(
            "/db/_bulk_docs",
            json!({"new_edits": false, "docs": [{"_id": "x", "_rev": top}]}),
        )
        .await;
    assert_eq!(reply.status, 201, "{}", reply.text);
    // An edit would need a position past the bound: refused, not wrapped.
    let edit = c.put("/db/x", json!({"_rev": top, "v": 2})).await;
    assert_eq!(edit.status, 400, "{}", edit.text);
    assert_eq!(edit.json()["error"], "bad_request");
    for rev in ["18446744073709551614-abc", "9223372036854775808-a", "0-a"] {
        let reply = c
            .post(
                "/db/_bulk_docs",
                json!({"new_edits": false, "docs": [{"_id": "y", "_rev": rev}]}),
            )
            .await;
        assert_eq!(reply.status, 400, "{rev}: {}", reply.text);
    }
    let reply = c
        .post(
            "/db/_bulk_docs",
            json!({"new_edits": false, "docs": [{"_id": "z",
                "_revisions": {"start": 18446744073709551614u64, "ids": ["b", "a"]}}]}),
        )
        .await;
    assert_eq!(reply.status, 400, "{}", reply.text);
    // The writer is alive: the database is there and takes writes.
    assert_eq!(c.put("/db/after", json!({})).await.status, 201);
    assert_eq!(c.get("/db/x").await.json()["_rev"], top);
    assert_eq!(c.get("/db").await.json()["doc_count"], 2);
}

/// A multipart/related document upload with one attachment.
fn related_body(boundary: &str, doc: &Value, bytes: &[u8]) -> Vec<u8> {
    let mut body = format!(
        "--{boundary}\r\nContent-Type: application/json\r\n\r\n{doc}\r\n--{boundary}\r\nContent-Type: application/octet-stream\r\n\r\n"
    )
    .into_bytes();
    body.extend_from_slice(bytes);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    body
}

#[tokio::test]
async fn declared_attachment_lengths_are_checked_before_anything_is_allocated() {
    let (_d, server, c) = start("declared-lengths").await;
    let gz = {
        use std::io::Write;
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(b"hello hello hello").unwrap();
        e.finish().unwrap()
    };
    for (length, status) in [(1_000_000_000_000_000_000u64, 413), (18, 400), (17, 201)] {
        let doc = json!({"_attachments": {"a.txt": {"follows": true, "content_type": "text/plain",
            "encoding": "gzip", "length": length}}});
        let reply = c
            .send_bytes(
                "PUT",
                "/db/g",
                related_body("B", &doc, &gz),
                "multipart/related; boundary=\"B\"",
            )
            .await;
        assert_eq!(reply.status, status, "length {length}: {}", reply.text);
    }
    // The stored attachment inflates to what it declared, in every read path.
    let doc = c
        .send(
            "GET",
            "/db/g?attachments=true",
            None,
            &[("accept", "application/json")],
        )
        .await
        .json();
    assert_eq!(
        doc["_attachments"]["a.txt"]["data"],
        "aGVsbG8gaGVsbG8gaGVsbG8="
    );
    let got = c
        .post(
            "/db/_bulk_get?attachments=true",
            json!({"docs": [{"id": "g"}]}),
        )
        .await;
    assert_eq!(got.status, 200);
    // As CouchDB: the stored bytes go out compressed only to a client that
    // takes gzip; anyone else gets the content, with no ranges offered.
    let plain = c.http().get(c.url("/db/g/a.txt")).send().await.unwrap();
    assert_eq!(plain.headers().get("content-encoding"), None);
    assert_eq!(plain.headers()["accept-ranges"], "none");
    assert_eq!(plain.headers()["content-length"], "17");
    assert_eq!(&plain.bytes().await.unwrap()[..], b"hello hello hello");
    let zipped = c
        .http()
        .get(c.url("/db/g/a.txt"))
        .header("accept-encoding", "gzip")
        .send()
        .await
        .unwrap();
    assert_eq!(zipped.headers()["content-encoding"], "gzip");
    assert_eq!(zipped.bytes().await.unwrap()[..], gz[..]);
    // Stubs name the encoding only when asked.
    let stub = &c.get("/db/g").await.json()["_attachments"]["a.txt"];
    assert_eq!(
        (stub.get("encoding"), &stub["length"]),
        (None, &json!(17)),
        "{stub}"
    );
    let asked = c.get("/db/g?att_encoding_info=true").await.json();
    assert_eq!(
        asked["_attachments"]["a.txt"]["encoding"], "gzip",
        "{asked}"
    );
    // Inline gzip that inflates past the limit is refused, not inflated.
    let small = TempDir::new("declared-lengths-small");
    let limited =
        TestServer::start_with_env(small.path(), &[], &[("RECLINER_MAX_ATTACHMENT_SIZE", "10")]);
    let l = Client::new(&limited);
    l.put("/db", json!({})).await;
    let reply = l
        .send_bytes(
            "PUT",
            "/db/d/a.bin",
            vec![7u8; 11],
            "application/octet-stream",
        )
        .await;
    assert_eq!(reply.status, 413, "{}", reply.text);
    assert_eq!(reply.json()["error"], "attachment_too_large");
    assert_eq!(c.get("/").await.status, 200, "the server is still up");
    drop(server);
}

#[tokio::test]
async fn local_documents_ignore_revisions_as_couchdbs_replicator_sends_them() {
    let (_d, _s, c) = start("local-revisions").await;
    assert_eq!(
        c.put("/db/_local/cp", json!({"seq": 1})).await.json()["rev"],
        "0-1"
    );
    // CouchDB's replicator updates its checkpoint with such a body.
    let reply = c
        .put(
            "/db/_local/cp",
            json!({"_rev": "0-1", "_revisions": {"start": 0, "ids": ["1"]}, "seq": 2}),
        )
        .await;
    assert_eq!(reply.status, 201, "{}", reply.text);
    assert_eq!(reply.json()["rev"], "0-2");
    let doc = c.get("/db/_local/cp").await.json();
    assert_eq!(doc, json!({"_id": "_local/cp", "_rev": "0-2", "seq": 2}));
    let bad = c
        .put(
            "/db/_local/cp",
            json!({"_revisions": {"start": 5, "ids": ["a"]}}),
        )
        .await;
    assert_eq!(bad.status, 400, "{}", bad.text);
}

#[tokio::test]
async fn compaction_never_fails_a_concurrent_upload() {
    let (_d, _s, c) = start("compaction-uploads").await;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let compactor = {
        let c = c.clone();
        let stop = stop.clone();
        tokio::spawn(async move {
            let mut runs = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let reply = c.post("/db/_compact", json!({})).await;
                assert_eq!(reply.status, 202, "{}", reply.text);
                runs += 1;
            }
            runs
        })
    };
    let mut uploads = Vec::new();
    for i in 0..8 {
        let c = c.clone();
        uploads.push(tokio::spawn(async move {
            let mut failures = Vec::new();
            for j in 0..15 {
                let bytes = format!("attachment {i}/{j}").repeat(2000).into_bytes();
                let reply = c
                    .send_bytes(
                        "PUT",
                        &format!("/db/doc{i}-{j}/a.bin"),
                        bytes,
                        "application/octet-stream",
                    )
                    .await;
                if reply.status != 201 {
                    failures.push(reply.text);
                }
            }
            failures
        }));
    }
    let mut failures = Vec::new();
    for upload in uploads {
        failures.extend(upload.await.unwrap());
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let runs = compactor.await.unwrap();
    assert!(
        failures.is_empty(),
        "{} uploads failed: {:?}",
        failures.len(),
        failures.first()
    );
    assert!(runs > 1, "compaction ran beside the uploads");
    let all = c.get("/db/_all_docs").await.json();
    assert_eq!(all["rows"].as_array().unwrap().len(), 120);
    c.post("/db/_compact", json!({})).await;
    let got = c.get("/db/doc3-7/a.bin").await;
    assert_eq!(got.text, "attachment 3/7".repeat(2000));
}

#[tokio::test]
async fn attachment_names_and_types_cannot_inject_multipart_headers() {
    let (_d, _s, c) = start("header-injection").await;
    let reply = c
        .put(
            "/db/doc",
            json!({"_attachments": {"a\r\nX-Injected: 1": {
                "content_type": "text/plain\r\nX-Bad: 1", "data": "aGVsbG8="}}}),
        )
        .await;
    assert_eq!(reply.status, 201, "{}", reply.text);
    for (path, accept) in [
        ("/db/doc?attachments=true", "multipart/related"),
        ("/db/doc?open_revs=all&attachments=true", "multipart/mixed"),
    ] {
        let response = c
            .http()
            .get(c.url(path))
            .header("accept", accept)
            .send()
            .await
            .unwrap();
        let body = response.bytes().await.unwrap();
        let text = String::from_utf8_lossy(&body);
        for line in text.split("\r\n") {
            assert!(
                !line.starts_with("X-Injected") && !line.starts_with("X-Bad"),
                "{path}: an injected header line: {line:?}"
            );
        }
        assert!(
            text.contains("filename=\"a%0D%0AX-Injected: 1\""),
            "{path}: {text}"
        );
    }
    // The JSON reads keep the names and types exactly.
    let doc = c.get("/db/doc").await.json();
    let att = &doc["_attachments"]["a\r\nX-Injected: 1"];
    assert_eq!(att["content_type"], "text/plain\r\nX-Bad: 1");
}

#[tokio::test]
async fn wire_details_match_couchdb() {
    let (_d, _s, c) = start("wire-details").await;
    c.put(
        "/db/a",
        json!({"_attachments": {"t.txt": {"content_type": "text/plain", "data": "aGVsbG8="}}}),
    )
    .await;
    // _all_docs gives attachment data inline when asked, without `length`.
    let all = c
        .get("/db/_all_docs?include_docs=true&attachments=true")
        .await
        .json();
    let att = &all["rows"][0]["doc"]["_attachments"]["t.txt"];
    assert_eq!(att["data"], "aGVsbG8=", "{att}");
    assert!(
        att.get("length").is_none() && att.get("stub").is_none(),
        "{att}"
    );
    let doc = c
        .send(
            "GET",
            "/db/a?attachments=true",
            None,
            &[("accept", "application/json")],
        )
        .await
        .json();
    assert!(doc["_attachments"]["t.txt"].get("length").is_none());
    let changes = c
        .get("/db/_changes?include_docs=true&attachments=true")
        .await
        .json();
    assert!(
        changes["results"][0]["doc"]["_attachments"]["t.txt"]
            .get("length")
            .is_none()
    );
    // Stubs keep their length.
    assert_eq!(
        c.get("/db/a").await.json()["_attachments"]["t.txt"]["length"],
        5
    );

    // `keys` with a different `key` is a query_parse_error; the same key is fine.
    let bad = c
        .post("/db/_all_docs?key=%22b%22", json!({"keys": ["a"]}))
        .await;
    assert_eq!(bad.status, 400);
    assert_eq!(bad.json()["error"], "query_parse_error");
    assert_eq!(
        bad.json()["reason"],
        "`keys` is incompatible with `key`, `start_key` and `end_key`"
    );
    let same = c
        .post("/db/_all_docs?key=%22a%22", json!({"keys": ["a"]}))
        .await;
    assert_eq!(same.status, 200, "{}", same.text);

    // `1-` is a revision to CouchDB: position 1, empty hash.
    let reply = c
        .post(
            "/db/_bulk_docs",
            json!({"new_edits": false, "docs": [{"_id": "e", "_rev": "1-"}]}),
        )
        .await;
    assert_eq!(reply.status, 201, "{}", reply.text);
    assert_eq!(c.get("/db/e").await.json()["_rev"], "1-");

    // Design functions: CouchDB's 404s, never an attachment read.
    c.put(
        "/db/_design/d",
        json!({"views": {"v": {"map": "function(doc){}"}}}),
    )
    .await;
    for (path, reason) in [
        ("/db/_design/missing/_view/v", "missing"),
        ("/db/_design/d/_view/nope", "missing_named_view"),
        ("/db/_design/d/_show/s/x", "missing json key: shows"),
        ("/db/_design/missing/_list/l/v", "missing"),
        ("/db/_changes?filter=missing/f", "missing"),
        ("/db/_changes?filter=d/f", "missing json key: filters"),
    ] {
        let reply = c.get(path).await;
        assert_eq!(reply.status, 404, "{path}: {}", reply.text);
        assert_eq!(
            reply.json(),
            json!({"error": "not_found", "reason": reason}),
            "{path}"
        );
    }
    // The view runs: no document emits anything.
    let view = c.get("/db/_design/d/_view/v").await;
    assert_eq!(view.status, 200, "{}", view.text);
    assert_eq!(view.json()["rows"], json!([]));
    let bad_filter = c.get("/db/_changes?filter=noslash").await;
    assert_eq!(bad_filter.status, 400);

    // Sequences past i64 are refused, not wrapped into "everything", and so
    // is one past the database's end, as CouchDB refuses it.
    for since in [
        "9223372036854775808",
        "18446744073709551616",
        "-1",
        "abc",
        "9223372036854775807",
    ] {
        let reply = c.get(&format!("/db/_changes?since={since}")).await;
        assert_eq!(reply.status, 400, "since={since}: {}", reply.text);
        assert_eq!(
            reply.json()["reason"],
            "Malformed sequence supplied in 'since' parameter."
        );
    }

    // Every error has a reason.
    let reply = c.get("/_scheduler/nonsense").await;
    assert_eq!(reply.status, 404);
    assert_eq!(
        reply.json(),
        json!({"error": "not_found", "reason": "missing"})
    );
}

#[tokio::test]
async fn up_is_200_only_while_the_store_can_be_read_and_written() {
    let data = TempDir::new("up-health");
    let server = TestServer::start(data.path(), &[]);
    let c = Client::new(&server);
    let up = c.get("/_up").await;
    assert_eq!(up.status, 200, "{}", up.text);
    assert_eq!(up.json()["store"], json!({"read": "ok", "write": "ok"}));
    // The data folder disappears under the server (a lost mount, say).
    std::fs::remove_dir_all(data.path()).unwrap();
    let down = c.get("/_up").await;
    assert_eq!(down.status, 503, "{}", down.text);
    let body = down.json();
    assert_eq!(body["status"], "error");
    assert!(body["store"]["read"]["error"].is_string(), "{body}");
    assert!(body["store"]["write"]["error"].is_string(), "{body}");
}

#[tokio::test]
async fn every_declared_size_and_count_has_a_limit_with_a_clear_error() {
    let data = TempDir::new("limits");
    let server = TestServer::start_with_env(
        data.path(),
        &[],
        &[
            ("RECLINER_MAX_DOCUMENT_ID_LENGTH", "10"),
            ("RECLINER_MAX_BULK_ITEMS", "3"),
            ("RECLINER_MAX_ATTACHMENT_NAME_LENGTH", "5"),
            ("RECLINER_MAX_ATTACHMENTS_PER_DOCUMENT", "2"),
        ],
    );
    let c = Client::new(&server);
    c.put("/db", json!({})).await;
    let check = |reply: recliner_tests::Reply, error: &str| {
        assert_eq!(reply.status, 400, "{}", reply.text);
        assert_eq!(reply.json()["error"], error, "{}", reply.text);
    };
    check(
        c.post("/db", json!({"_id": "abcdefghijk"})).await,
        "illegal_docid",
    );
    check(c.put("/db/abcdefghijk", json!({})).await, "illegal_docid");
    check(
        c.post("/db/_bulk_docs", json!({"docs": [{"_id": "abcdefghijk"}]}))
            .await,
        "illegal_docid",
    );
    assert_eq!(
        c.post("/db", json!({"_id": "abcdefghij"})).await.status,
        201
    );
    let four = json!([{"_id": "a"}, {"_id": "b"}, {"_id": "c"}, {"_id": "d"}]);
    check(
        c.post("/db/_bulk_docs", json!({"docs": four})).await,
        "bad_request",
    );
    let four_ids = json!([{"id": "a"}, {"id": "b"}, {"id": "c"}, {"id": "d"}]);
    check(
        c.post("/db/_bulk_get", json!({"docs": four_ids})).await,
        "bad_request",
    );
    check(
        c.post(
            "/db/_revs_diff",
            json!({"a": ["1-a", "1-b"], "b": ["1-c", "1-d"]}),
        )
        .await,
        "bad_request",
    );
    check(
        c.post("/db/_all_docs", json!({"keys": ["a", "b", "c", "d"]}))
            .await,
        "bad_request",
    );
    check(
        c.post(
            "/db/_changes?filter=_doc_ids",
            json!({"doc_ids": ["a", "b", "c", "d"]}),
        )
        .await,
        "bad_request",
    );
    let data = "aGVsbG8=";
    check(
        c.put(
            "/db/x",
            json!({"_attachments": {"toolong": {"data": data}}}),
        )
        .await,
        "bad_request",
    );
    check(
        c.put(
            "/db/x",
            json!({"_attachments": {"a": {"data": data}, "b": {"data": data}, "c": {"data": data}}}),
        )
        .await,
        "bad_request",
    );
    check(
        c.send_bytes("PUT", "/db/y/toolong", b"x".to_vec(), "text/plain")
            .await,
        "bad_request",
    );
    // A request line or headers far beyond any real client's are refused
    // before they are read whole.
    let address = recliner_tests::without_credentials(&c.url(""))
        .trim_start_matches("http://")
        .to_string();
    for head in [
        format!(
            "GET /db/{} HTTP/1.1\r\nHost: x\r\n\r\n",
            "x".repeat(1 << 20)
        ),
        format!(
            "GET / HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n",
            "v".repeat(1 << 20)
        ),
    ] {
        let status = raw_status(&address, head.as_bytes()).await;
        assert!(status.starts_with("HTTP/1.1 4"), "{status}");
    }
    assert_eq!(
        c.get("/db/abcdefghij").await.status,
        200,
        "the server still answers"
    );
}

/// Sends raw bytes and returns the status line of the answer (or what
/// happened instead, shortened).
async fn raw_status(address: &str, request: &[u8]) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(address)
        .await
        .expect("the server accepts connections");
    // The server may answer and close before it has read everything.
    let _ = stream.write_all(request).await;
    let mut answer = vec![0u8; 256];
    let n = stream.read(&mut answer).await.unwrap_or(0);
    let text = String::from_utf8_lossy(&answer[..n]).to_string();
    text.lines()
        .next()
        .unwrap_or("(closed without an answer)")
        .to_string()
}

#[tokio::test]
async fn bulk_get_streams_many_pages_in_order() {
    let (_d, _s, c) = start("bulk-get-pages").await;
    let docs: Vec<Value> = (0..250)
        .map(|i| json!({"_id": format!("d{i:03}"), "n": i}))
        .collect();
    assert_eq!(
        c.post("/db/_bulk_docs", json!({"docs": docs})).await.status,
        201
    );
    let mut asked: Vec<Value> = (0..250)
        .map(|i| json!({"id": format!("d{i:03}")}))
        .collect();
    asked.push(json!({"id": "missing"}));
    let got = c.post("/db/_bulk_get", json!({"docs": asked})).await.json();
    let results = got["results"].as_array().unwrap();
    assert_eq!(results.len(), 251);
    for (i, result) in results.iter().take(250).enumerate() {
        assert_eq!(result["docs"][0]["ok"]["n"], i, "{result}");
    }
    assert_eq!(results[250]["docs"][0]["error"]["error"], "not_found");
    let none = c.post("/db/_bulk_get", json!({"docs": []})).await.json();
    assert_eq!(none, json!({"results": []}));
}

#[tokio::test]
async fn an_oversized_document_is_refused_from_its_raw_text_and_attachments_do_not_count() {
    let data = TempDir::new("doc-size");
    let server =
        TestServer::start_with_env(data.path(), &[], &[("RECLINER_MAX_DOCUMENT_SIZE", "1000")]);
    let c = Client::new(&server);
    c.put("/db", json!({})).await;
    let big = "x".repeat(5000);
    // As CouchDB: the reason is the id the body names (none in a PUT's body).
    let put = c.put("/db/big", json!({"pad": big})).await;
    assert_eq!(put.status, 413, "{}", put.text);
    assert_eq!(
        put.json(),
        json!({"error": "document_too_large", "reason": ""})
    );
    for reply in [
        c.post("/db", json!({"_id": "big", "pad": big})).await,
        c.post(
            "/db/_bulk_docs",
            json!({"docs": [{"_id": "small"}, {"_id": "big", "pad": big}]}),
        )
        .await,
    ] {
        assert_eq!(reply.status, 413, "{}", reply.text);
        assert_eq!(
            reply.json(),
            json!({"error": "document_too_large", "reason": "big"})
        );
    }
    assert_eq!(
        c.get("/db/small").await.status,
        404,
        "the whole batch was refused"
    );
    // Inline attachment data is not part of the document's size (CouchDB).
    let data_b64 = "eHh4".repeat(2000);
    let reply = c
        .put(
            "/db/att",
            json!({"_attachments": {"a": {"content_type": "text/plain", "data": data_b64}}}),
        )
        .await;
    assert_eq!(reply.status, 201, "{}", reply.text);
    // The JSON part of a multipart/related upload is held to the same size.
    let boundary = "b0und";
    let doc = json!({"pad": big, "_attachments": {"f": {"follows": true, "length": 3, "content_type": "text/plain"}}});
    let reply = c
        .send_bytes(
            "PUT",
            "/db/related",
            related_body(boundary, &doc, b"abc"),
            &format!("multipart/related; boundary=\"{boundary}\""),
        )
        .await;
    assert_eq!(reply.status, 413, "{}", reply.text);
    assert_eq!(
        reply.json()["error"],
        "document_too_large",
        "{}",
        reply.text
    );
    let doc = json!({"_attachments": {"f": {"follows": true, "length": 3, "content_type": "text/plain"}}});
    let reply = c
        .send_bytes(
            "PUT",
            "/db/related",
            related_body(boundary, &doc, b"abc"),
            &format!("multipart/related; boundary=\"{boundary}\""),
        )
        .await;
    assert_eq!(reply.status, 201, "{}", reply.text);
}

/// Bodies that are not documents (`_revs_diff`, `keys`, `_security`...)
/// are parsed whole, so they have a size limit of their own and their
/// values are counted before a tree is built: a body of tiny values would
/// otherwise take many times its size in memory.
#[tokio::test]
async fn bodies_parsed_whole_are_bounded_in_size_and_in_values() {
    let data = TempDir::new("json-bodies");
    let server = TestServer::start_with_env(
        data.path(),
        &[],
        &[
            ("RECLINER_MAX_JSON_BODY_SIZE", "4096"),
            ("RECLINER_MAX_BULK_ITEMS", "100"),
        ],
    );
    let c = Client::new(&server);
    c.put("/db", json!({})).await;
    let long_id = "x".repeat(5000);
    for (path, body) in [
        ("/db/_revs_diff", json!({long_id.clone(): ["1-a"]})),
        ("/db/_all_docs", json!({"keys": [long_id.clone()]})),
        ("/db/_bulk_get", json!({"docs": [{"id": long_id.clone()}]})),
        (
            "/db/_changes?filter=_doc_ids",
            json!({"doc_ids": [long_id.clone()]}),
        ),
    ] {
        let reply = c.post(path, body).await;
        assert_eq!(reply.status, 413, "{path}: {}", reply.text);
        assert_eq!(reply.json()["error"], "too_large", "{}", reply.text);
    }
    let reply = c.put("/db/_security", json!({"pad": long_id})).await;
    assert_eq!(reply.status, 413, "{}", reply.text);
    // Under the size limit, but more than four values per allowed item.
    let zeros = vec![0; 500];
    for (path, body) in [
        ("/db/_all_docs", json!({"keys": zeros})),
        ("/db/_revs_diff", json!({"a": zeros})),
    ] {
        let reply = c.post(path, body).await;
        assert_eq!(reply.status, 400, "{path}: {}", reply.text);
        assert!(
            reply.json()["reason"]
                .as_str()
                .unwrap_or("")
                .starts_with("Too many values"),
            "{}",
            reply.text
        );
    }
    // Within both limits, the same requests are answered.
    let reply = c.post("/db/_all_docs", json!({"keys": ["a", "b"]})).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let reply = c.post("/db/_revs_diff", json!({"a": ["1-a"]})).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    // Documents are not held to it: they are scanned as they arrive.
    let reply = c.put("/db/big", json!({"pad": "y".repeat(20_000)})).await;
    assert_eq!(reply.status, 201, "{}", reply.text);
}

/// A `skip` near 2^64 overflowed the offset sum (a 500 from a panic in
/// debug builds, a wrapped offset in release); found by the `query` fuzz
/// target. Rows skipped past the end count up to the end, as in CouchDB.
#[tokio::test]
async fn a_huge_skip_is_counted_up_to_the_end() {
    let (_d, _s, c) = start("huge-skip").await;
    for id in ["a", "b", "c"] {
        assert_eq!(c.put(&format!("/db/{id}"), json!({})).await.status, 201);
    }
    for (query, offset, rows) in [
        ("skip=18446744073709551613&startkey=%22%5Cufff0%22", 3, 0),
        ("skip=18446744073709551613", 3, 0),
        ("skip=10", 3, 0),
        ("skip=1&startkey=%22b%22", 2, 1),
    ] {
        let reply = c.get(&format!("/db/_all_docs?{query}")).await;
        assert_eq!(reply.status, 200, "{query}: {}", reply.text);
        let body = reply.json();
        assert_eq!(body["offset"], offset, "{query}: {body}");
        assert_eq!(body["rows"].as_array().unwrap().len(), rows, "{query}");
    }
}
